package kernels

import "math"

// cholesky factors the symmetric positive definite k x k row-major a in place into its lower
// factor L (a = L L^T; the upper part is left as it was). It reports false if a pivot is not
// positive. It polls flag before each column.
func cholesky(a []float64, k int, flag *interruptFlag) bool {
	for j := 0; j < k; j++ {
		flag.poll()
		d := a[j*k+j]
		for p := 0; p < j; p++ {
			d -= float64(a[j*k+p] * a[j*k+p])
		}
		if !(d > 0) {
			return false
		}
		d = math.Sqrt(d)
		a[j*k+j] = d
		for i := j + 1; i < k; i++ {
			s := a[i*k+j]
			for p := 0; p < j; p++ {
				s -= float64(a[i*k+p] * a[j*k+p])
			}
			a[i*k+j] = s / d
		}
	}
	return true
}

// choleskySolve solves L L^T x = b in place (b becomes x) for the factor from cholesky.
func choleskySolve(l []float64, k int, b []float64) {
	for i := 0; i < k; i++ {
		s := b[i]
		for p := 0; p < i; p++ {
			s -= float64(l[i*k+p] * b[p])
		}
		b[i] = s / l[i*k+i]
	}
	for i := k - 1; i >= 0; i-- {
		s := b[i]
		for p := i + 1; p < k; p++ {
			s -= float64(l[p*k+i] * b[p])
		}
		b[i] = s / l[i*k+i]
	}
}
