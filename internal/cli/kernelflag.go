package cli

import (
	"flag"

	"github.com/didnmf/didnmf/kernels"
)

// kernelUsage is the help text of --kernel, shared by factorize, bench and serve.
const kernelUsage = "kernel path: auto (the fastest this CPU offers), generic (pure Go), avx2, avx512; every path gives the same bits (default: $" + kernels.KernelEnv + ", else auto)"

// addKernelFlag registers --kernel on fs and returns where its value lands.
func addKernelFlag(fs *flag.FlagSet) *string {
	return fs.String("kernel", "", kernelUsage)
}

// applyKernel sets the process's kernel path from the --kernel value, or from $DIDNMF_KERNEL
// when the flag is empty. An unknown name, or a path this CPU lacks, is bad input.
func applyKernel(name string) error {
	p, err := kernels.KernelPathFromEnv()
	if name != "" {
		p, err = kernels.ParseKernelPath(name)
	}
	if err != nil {
		return badInput("--kernel: %v", err)
	}
	if err := kernels.SetKernelPath(p); err != nil {
		return badInput("--kernel: %v", err)
	}
	return nil
}
