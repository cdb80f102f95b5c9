//go:build !linux

package kernels

// adviseHuge does nothing where transparent huge pages are not asked for by madvise.
func adviseHuge(s []float64) {}
