//go:build !purego

package kernels

import "golang.org/x/sys/cpu"

// The assembly kernels run only on CPUs (and operating systems) that have their instructions.
var (
	haveAVX2   = cpu.X86.HasAVX && cpu.X86.HasAVX2
	haveFMA3   = cpu.X86.HasAVX && cpu.X86.HasFMA
	haveAVX512 = cpu.X86.HasAVX512F
)

// sumF64 returns the sum of x in the order of sumF64Generic.
func sumF64(x []float64) float64 {
	if haveAVX2 {
		return streamSumF64(x)
	}
	return sumF64Generic(x)
}

// sumI32 returns the sum of x modulo 2^32.
func sumI32(x []int32) uint32 {
	if haveAVX2 {
		return streamSumI32(x)
	}
	return sumI32Generic(x)
}

// sumI64 returns the sum of x modulo 2^64.
func sumI64(x []int) uint64 {
	if haveAVX2 {
		return streamSumI64(x)
	}
	return sumI64Generic(x)
}

// fmaKernels lists the FMA peak loops this CPU can run, widest first.
func fmaKernels() []fmaKernel {
	var ks []fmaKernel
	if haveAVX512 {
		ks = append(ks, fmaKernel{"zmm", 8, fmaChainsZMM})
	}
	if haveFMA3 {
		ks = append(ks, fmaKernel{"ymm", 4, fmaChainsYMM})
	}
	if len(ks) == 0 {
		ks = append(ks, scalarFMA)
	}
	return ks
}
