package kernels

// MU (Lee & Seung 2001): C <- C .* (B^T X) ./ (B^T B C), then B <- B .* (X C^T) ./ (B C C^T).
// An entry whose denominator is 0 keeps its value (no epsilon is added, so the updates are the
// textbook ones). MU never moves an entry away from 0: its known slow tail.
//
// Penalties (see "Penalties" in doc.go), as scikit-learn's solver="mu" with beta_loss
// "frobenius" adds them: the L1 coefficient to each denominator, then the L2 coefficient times
// the entry,
//
//	C <- C .* (B^T X) ./ ((B^T B C + l1C) + l2C C),   B <- B .* (X C^T) ./ ((B C C^T + l1B) + l2B B),
//
// and the penalties of the new factors to the objective.
func runMU(e *shardEnv) {
	first, initial, _ := e.begin()
	x, m, n, k := e.spec.X, e.rows, e.cols, e.k
	b, c := e.B, e.C
	ops := newBlockOps(x, k, e.spec.Pool, e.flag)
	sqX := x.SqNorm()
	h := make([]float64, k*n)
	g := make([]float64, k*k)
	a := make([]float64, m*k)
	v := make([]float64, k*k)
	bv := make([]float64, m*k)
	pen := e.penalty()
	if first == 1 {
		initial = residualSq(x, b, c, k, e.spec.Pool, e.flag)
		if pen.on() {
			initial = initial + pen.coefPenalty(c, e.flag) + pen.basisPenalty(b, e.flag)
		}
	}
	span := e.flag.span(k*k+k, 1) // columns of the C update between two looks at the flag
	for it := first; ; it++ {
		ops.btx(b, h)
		gramCols(b, m, k, g, e.flag)
		ops.run(func(_, lo, hi int) {
			den := make([]float64, k) // one per lane and iteration, not per column
			for j0 := lo; j0 < hi; j0 += span {
				if e.flag.stopped() {
					return
				}
				for j, j1 := j0, min(j0+span, hi); j < j1; j++ {
					cj := c[j*k : (j+1)*k]
					for p := 0; p < k; p++ {
						den[p] = dot(g[p*k:(p+1)*k], cj)
					}
					if pen.coef() {
						penalizeDenominators(den, cj, pen.l1C, pen.l2C)
					}
					for p, d := range den {
						if d > 0 {
							cj[p] *= h[j*k+p] / d
						}
					}
				}
			}
		})
		ops.xct(c, a)
		ops.cct(c, v)
		// B <- B .* A ./ (B V), all entries from the same B.
		clear64(bv)
		for p := 0; p < k; p++ {
			e.flag.poll()
			for q := 0; q < k; q++ {
				if vq := v[q*k+p]; vq != 0 {
					axpy(bv[p*m:(p+1)*m], vq, b[q*m:(q+1)*m])
				}
			}
		}
		if pen.basis() {
			penalizeDenominators(bv, b, pen.l1B, pen.l2B)
		}
		for i, d := range bv {
			if d > 0 {
				b[i] *= a[i] / d
			}
		}
		gramCols(b, m, k, g, e.flag)
		obj := gramObjective(sqX, b, a, g, v)
		if pen.on() {
			obj = obj + pen.coefPenalty(c, e.flag) + pen.basisPenalty(b, e.flag)
		}
		e.iterationDone(it, obj, initial)
	}
}

// penalizeDenominators adds the penalty to MU's denominators as scikit-learn does:
// den = den + l1 (when l1 > 0), then den = den + l2 * f (when l2 > 0), f the factor's entries.
func penalizeDenominators(den, f []float64, l1, l2 float64) {
	if l1 > 0 {
		for i := range den {
			den[i] += l1
		}
	}
	if l2 > 0 {
		for i, v := range f[:len(den)] {
			den[i] += float64(l2 * v)
		}
	}
}
