//go:build purego || !amd64

package kernels

// gramKernelsFor returns the Gram lane kernels of path p, nil when this build has none: a
// purego or non-amd64 build has only the generic code.
func gramKernelsFor(p KernelPath) *gramKernels {
	if p == KernelGeneric {
		return &genericGram
	}
	return nil
}

func cpuDescription() string { return "a build without assembly (purego or not amd64)" }

// widen converts float32 values to float64.
func widen(dst []float64, src []float32) { widenGo(dst, src) }
