package kernels

// Small dense helpers with fixed evaluation orders (so results are reproducible bit for bit).

// dot returns x·y over len(x) elements with four partial sums.
func dot(x, y []float64) float64 {
	y = y[:len(x)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += float64(x[i] * y[i])
		s1 += float64(x[i+1] * y[i+1])
		s2 += float64(x[i+2] * y[i+2])
		s3 += float64(x[i+3] * y[i+3])
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i] * y[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy sets y += a*x over len(x) elements.
func axpy(y []float64, a float64, x []float64) {
	y = y[:len(x)]
	i := 0
	for ; i+4 <= len(x); i += 4 {
		y[i] += float64(a * x[i])
		y[i+1] += float64(a * x[i+1])
		y[i+2] += float64(a * x[i+2])
		y[i+3] += float64(a * x[i+3])
	}
	for ; i < len(x); i++ {
		y[i] += float64(a * x[i])
	}
}

// gramCols returns G = A^T A (k x k, row-major, symmetric) for a column-major m x k matrix A,
// polling flag (on the machine's goroutine) before each row.
func gramCols(a []float64, m, k int, g []float64, flag *interruptFlag) {
	for p := 0; p < k; p++ {
		flag.poll()
		ap := a[p*m : (p+1)*m]
		for q := 0; q <= p; q++ {
			v := dot(ap, a[q*m:(q+1)*m])
			g[p*k+q] = v
			g[q*k+p] = v
		}
	}
}

// quadForm returns c^T G c for a symmetric k x k G.
func quadForm(g, c []float64, k int) float64 {
	var s float64
	for p := 0; p < k; p++ {
		row := g[p*k : (p+1)*k]
		var t float64
		for q := 0; q < k; q++ {
			t += float64(row[q] * c[q])
		}
		s += float64(c[p] * t)
	}
	return s
}

// lowerLen is the number of entries of a k x k lower triangle.
func lowerLen(k int) int { return k * (k + 1) / 2 }

// packLower writes the lower triangle of the symmetric k x k v (row-major) row by row.
func packLower(dst, v []float64, k int) {
	n := 0
	for p := 0; p < k; p++ {
		for q := 0; q <= p; q++ {
			dst[n] = v[p*k+q]
			n++
		}
	}
}

// unpackLower fills the symmetric k x k v from a packed lower triangle.
func unpackLower(v, src []float64, k int) {
	n := 0
	for p := 0; p < k; p++ {
		for q := 0; q <= p; q++ {
			v[p*k+q] = src[n]
			v[q*k+p] = src[n]
			n++
		}
	}
}

// transpose writes the column-major m x k matrix a into dst row-major (dst[i*k+p] = a[p*m+i]).
func transpose(dst, a []float64, m, k int) {
	for p := 0; p < k; p++ {
		col := a[p*m : (p+1)*m]
		for i, v := range col {
			dst[i*k+p] = v
		}
	}
}

// frob returns <a, b> = sum a_i b_i.
func frob(a, b []float64) float64 { return dot(a, b) }

func clear64(x []float64) {
	for i := range x {
		x[i] = 0
	}
}
