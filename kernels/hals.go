package kernels

// HALS (Cichocki et al. 2007): for k = 1..K in order, the rank-one pair
//
//	b_k <- max(0, (X c_k^T - sum_{l != k} b_l (c_l c_k^T)) / (c_k c_k^T))
//	c_k <- max(0, (b_k^T X - sum_{l != k} (b_k^T b_l) c_l) / (b_k^T b_k))
//
// so b_k and c_k are updated together before the next component; this order differs from
// BCD/DID (all of C, then all of B) and gives different iterates. Components with zero norm
// keep their value. The objective comes from ||X||^2 - 2 sum_k (b_k^T X) c_k^T + <B^T B, C C^T>,
// whose pieces the updates produce anyway.
//
// Penalties (see "Penalties" in doc.go): each rank-one step is the exact minimizer of the
// penalized objective over its vector, numerator - l1 over denominator + l2:
//
//	b_k <- max(0, (X c_k^T - sum_{l != k} b_l (c_l c_k^T) - l1B) / (c_k c_k^T + l2B))
//	c_k <- max(0, (b_k^T X - sum_{l != k} (b_k^T b_l) c_l - l1C) / (b_k^T b_k + l2C))
//
// and the penalties of the final B and C are added to the objective.
func runHALS(e *shardEnv) {
	first, initial, state := e.begin()
	if e.masked() {
		runHALSMasked(e, first, initial, state)
		return
	}
	x, m, n, k := e.spec.X, e.rows, e.cols, e.k
	b, c := e.B, e.C
	ops := newBlockOps(x, k, e.spec.Pool, e.flag, e.gram())
	sqX := x.SqNorm()
	xc := make([]float64, m)
	bx := make([]float64, n)
	cc := make([]float64, k)
	bb := make([]float64, k)
	g := make([]float64, k*k)
	v := make([]float64, k*k)
	laneCross := make([]float64, len(ops.lanes)-1)
	span := e.flag.span(2*k, 1) // columns of the c_p update between two looks at the flag
	pen := e.penalty()
	if first == 1 {
		initial = residualSq(x, b, c, k, e.spec.Pool, e.flag)
		if pen.on() {
			initial = initial + pen.coefPenalty(c, e.flag) + pen.basisPenalty(b, e.flag)
		}
	}
	for it := first; ; it++ {
		var cross float64
		for p := 0; p < k; p++ {
			// b_p (xcRow and the other products poll the interrupt flag)
			ops.xcRow(c, p, xc)
			rowDots(ops, c, p, cc)
			bp := b[p*m : (p+1)*m]
			if pen.basis() {
				halsBasisPenalized(b, xc, cc, p, m, k, pen.l1B, pen.l2B)
			} else if cpp := cc[p]; cpp > 0 {
				for i := 0; i < m; i++ {
					num := xc[i]
					for q := 0; q < k; q++ {
						if q != p && cc[q] != 0 {
							num -= float64(b[q*m+i] * cc[q])
						}
					}
					nb := num / cpp
					if nb < 0 {
						nb = 0
					}
					bp[i] = nb
				}
			}
			// c_p
			ops.btxRow(bp, bx)
			for q := 0; q < k; q++ {
				bb[q] = dot(bp, b[q*m:(q+1)*m])
			}
			bpp := bb[p]
			if pen.coef() {
				halsCoefPenalized(ops, c, bx, bb, p, span, pen.l1C, pen.l2C, laneCross)
			} else {
				ops.run(func(l, lo, hi int) {
					var s float64
					for j0 := lo; j0 < hi; j0 += span {
						if e.flag.stopped() {
							return
						}
						for j, j1 := j0, min(j0+span, hi); j < j1; j++ {
							cj := c[j*k : (j+1)*k]
							if bpp > 0 {
								num := bx[j]
								for q, bq := range bb {
									if q != p {
										num -= float64(bq * cj[q])
									}
								}
								nc := num / bpp
								if nc < 0 {
									nc = 0
								}
								cj[p] = nc
							}
							s += float64(bx[j] * cj[p])
						}
					}
					laneCross[l] = s
				})
			}
			for _, s := range laneCross {
				cross += s
			}
		}
		gramCols(b, m, k, g, e.flag)
		ops.cct(c, v)
		obj := sqX - float64(2*cross) + frob(g, v)
		if pen.on() {
			obj = obj + pen.coefPenalty(c, e.flag) + pen.basisPenalty(b, e.flag)
		}
		e.iterationDone(it, obj, initial)
	}
}

// halsBasisPenalized is HALS's b_p update with the penalty on B, given xc = X c_p^T and
// cc[q] = c_q · c_p.
func halsBasisPenalized(b, xc, cc []float64, p, m, k int, l1, l2 float64) {
	h := cc[p] + l2
	if !(h > 0) {
		return
	}
	bp := b[p*m : (p+1)*m]
	for i := 0; i < m; i++ {
		num := xc[i]
		for q := 0; q < k; q++ {
			if q != p && cc[q] != 0 {
				num -= float64(b[q*m+i] * cc[q])
			}
		}
		nb := (num - l1) / h
		if nb < 0 {
			nb = 0
		}
		bp[i] = nb
	}
}

// halsCoefPenalized is HALS's c_p update with the penalty on C, given bx_j = b_p^T x_j and
// bb[q] = b_p · b_q, and sets laneCross[l] to lane l's sum of bx_j c_pj.
func halsCoefPenalized(ops *blockOps, c, bx, bb []float64, p, span int, l1, l2 float64, laneCross []float64) {
	k := ops.k
	h := bb[p] + l2
	ops.run(func(l, lo, hi int) {
		var s float64
		for j0 := lo; j0 < hi; j0 += span {
			if ops.flag.stopped() {
				return
			}
			for j, j1 := j0, min(j0+span, hi); j < j1; j++ {
				cj := c[j*k : (j+1)*k]
				if h > 0 {
					num := bx[j]
					for q, bq := range bb {
						if q != p {
							num -= float64(bq * cj[q])
						}
					}
					nc := (num - l1) / h
					if nc < 0 {
						nc = 0
					}
					cj[p] = nc
				}
				s += float64(bx[j] * cj[p])
			}
		}
		laneCross[l] = s
	})
}

// rowDots writes out[q] = c_q · c_p (rows of C, K x n column-major), lanes added in order.
func rowDots(o *blockOps, c []float64, p int, out []float64) {
	k := o.k
	span := o.flag.span(k, 1)
	o.run(func(l, lo, hi int) {
		acc := o.laneA[l][:k]
		clear64(acc)
		for j0 := lo; j0 < hi; j0 += span {
			if o.flag.stopped() {
				return
			}
			for j, j1 := j0, min(j0+span, hi); j < j1; j++ {
				cj := c[j*k : (j+1)*k]
				if cp := cj[p]; cp != 0 {
					for q, cq := range cj {
						acc[q] += float64(cq * cp)
					}
				}
			}
		}
	})
	copy(out, o.laneA[0][:k])
	for l := 1; l < len(o.laneA); l++ {
		for q, v := range o.laneA[l][:k] {
			out[q] += v
		}
	}
}
