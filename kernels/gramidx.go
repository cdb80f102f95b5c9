package kernels

import "math"

// accVIdxGo is step 4 of the Gram lane (accVGo) on vectors gathered by index: for t in order,
// x = src[idx[t]*stride : idx[t]*stride+k] with x_q = 0 for k <= q < kp, and
// V[p, q] = fma(x_p, x_q, V[p, q]) for p < k and q < (p/4+1)*4 (the chunks that hold q <= p),
// v being k rows of kp. It sums the outer products of rows of B (stride K or Kp) or columns of
// C (stride K) without copying them; the assembly paths make the same operations.
func accVIdxGo(src []float64, stride int, idx []int32, k, kp int, v []float64) {
	for _, t := range idx {
		x := src[int(t)*stride : int(t)*stride+k]
		for p, xp := range x {
			n := (p/4 + 1) * 4
			row := v[p*kp : p*kp+n]
			m := min(n, k)
			for q, xq := range x[:m] {
				row[q] = math.FMA(xp, xq, row[q])
			}
			for q := m; q < n; q++ {
				row[q] = math.FMA(xp, 0, row[q])
			}
		}
	}
}

// accAIdxGo is step 3 of the Gram lane (accDenseGo) on a one-row block over vectors gathered
// by index: for t in order, x = src[idx[t]*stride : idx[t]*stride+k] (x_q = 0 for
// k <= q < kp) and a[q] = fma(w[t], x_q, a[q]) for q < kp: the sum of w_t c_j over the
// columns j = idx[t] of C, read in place.
func accAIdxGo(src []float64, stride int, idx []int32, w []float64, k, kp int, a []float64) {
	w = w[:len(idx)]
	a = a[:kp]
	for t, j := range idx {
		x := src[int(j)*stride : int(j)*stride+k]
		wt := w[t]
		for q, xq := range x {
			a[q] = math.FMA(wt, xq, a[q])
		}
		for q := k; q < kp; q++ {
			a[q] = math.FMA(wt, 0, a[q])
		}
	}
}
