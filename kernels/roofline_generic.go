//go:build purego || !amd64

package kernels

// sumF64 returns the sum of x in the order of sumF64Generic.
func sumF64(x []float64) float64 { return sumF64Generic(x) }

// sumI32 returns the sum of x modulo 2^32.
func sumI32(x []int32) uint32 { return sumI32Generic(x) }

// sumI64 returns the sum of x modulo 2^64.
func sumI64(x []int) uint64 { return sumI64Generic(x) }

// fmaKernels lists the FMA peak loops of this build: the Go loop only.
func fmaKernels() []fmaKernel { return []fmaKernel{scalarFMA} }
