package kernels

import "math"

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
//
// With Options.Accel on, runHALS runs Gillis and Glineur's accelerated HALS instead
// (runHALSAccel).
func runHALS(e *shardEnv) {
	first, initial, state := e.begin()
	if e.masked() {
		runHALSMasked(e, first, initial, state)
		return
	}
	if e.spec.Accel.On() {
		runHALSAccel(e, first, initial)
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

// Accelerated HALS (Gillis & Glineur 2012, "Accelerated multiplicative updates and hierarchical
// ALS algorithms for nonnegative matrix factorization"). An iteration makes one pass over X
// for B's products and one for C's, and reuses each pair of products for several HALS sweeps:
//
//	A = X C^T, V = C C^T;  up to BSweeps sweeps over the components of B:
//	    b_p <- max(0, (a_p - sum_{q != p} b_q v_qp - l1B) / (v_pp + l2B))
//	H = B^T X, G = B^T B;  up to CSweeps sweeps over the rows of C:
//	    c_p <- max(0, (h_p - sum_{q != p} g_pq c_q - l1C) / (g_pp + l2C))
//
// the same penalized rank-one steps as plain HALS, in blocks (all of B, then all of C) rather
// than interleaved pairs, so the iterates differ from plain HALS's. Each inner loop stops
// after a sweep whose step, the squared Frobenius norm of the change of the whole factor
// (st = fma(d, d, st) in a fixed order: component by component and row by row for B; lane by
// lane, column by column and component by component for C, lane sums added in lane order), is
// at most Eps^2 times the first sweep's, or after the cap (the stop rule of accel.go, with
// one decision for the whole factor, as in their paper). A sweep over the rows of C updates
// each column independently, so it runs column by column on the lanes.
//
// The objective is exact, from the pieces the iteration has: ||X||^2 - 2 <H, C> + <G, C C^T>
// with the final C (<H, C> summed by the C sweeps, C C^T the next iteration's V), plus the
// penalties of the final B and C.
func runHALSAccel(e *shardEnv, first int, initial float64) {
	x, m, n, k := e.spec.X, e.rows, e.cols, e.k
	b, c := e.B, e.C
	acc := e.spec.Accel
	ops := newBlockOps(x, k, e.spec.Pool, e.flag, e.gram())
	pen := e.penalty()
	sqX := x.SqNorm()
	a := make([]float64, m*k) // X C^T
	v := make([]float64, k*k) // C C^T
	h := make([]float64, k*n) // B^T X
	g := make([]float64, k*k) // B^T B
	num := make([]float64, m) // scratch of the B sweeps
	cs := newHALSCoefSweeper(ops, c, h, g, pen.l1C, pen.l2C)
	if first == 1 {
		initial = residualSq(x, b, c, k, e.spec.Pool, e.flag)
		if pen.on() {
			initial = initial + pen.coefPenalty(c, e.flag) + pen.basisPenalty(b, e.flag)
		}
	}
	ops.cct(c, v)
	for it := first; ; it++ {
		ops.xct(c, a)
		halsBasisSweeps(b, a, v, num, m, k, max(acc.BSweeps, 1), acc.eps2(), pen.l1B, pen.l2B, e.flag)
		ops.btx(b, h)
		gramCols(b, m, k, g, e.flag)
		cross := cs.sweeps(max(acc.CSweeps, 1), acc.eps2())
		ops.cct(c, v)
		obj := sqX - float64(2*cross) + frob(g, v)
		if pen.on() {
			obj = obj + pen.coefPenalty(c, e.flag) + pen.basisPenalty(b, e.flag)
		}
		e.iterationDone(it, obj, initial)
	}
}

// halsBasisSweeps runs up to sweeps HALS sweeps over the components of B (M x K column-major)
// from a = X C^T (M x K column-major) and v = C C^T (K x K full), with the penalty l1, l2 on B,
// stopping after a sweep whose step is at most eps2 times the first's. A component with
// v_pp + l2 <= 0 keeps its value. num is scratch (M). It polls flag before each component.
func halsBasisSweeps(b, a, v, num []float64, m, k, sweeps int, eps2, l1, l2 float64, flag *interruptFlag) {
	var thr float64
	for l := 1; ; l++ {
		var st float64
		for p := 0; p < k; p++ {
			flag.poll()
			hpp := v[p*k+p] + l2
			if !(hpp > 0) {
				continue
			}
			// num = a_p - sum_{q != p} b_q v_qp, products rounded and subtracted in q order
			copy(num, a[p*m:(p+1)*m])
			for q, vq := range v[p*k : (p+1)*k] {
				if q != p && vq != 0 {
					axpy(num, -vq, b[q*m:(q+1)*m])
				}
			}
			bp := b[p*m : (p+1)*m]
			for i, ni := range num {
				nb := (ni - l1) / hpp
				if nb < 0 {
					nb = 0
				}
				d := nb - bp[i]
				st = math.FMA(d, d, st)
				bp[i] = nb
			}
		}
		if l == 1 {
			thr = st * eps2
		}
		if l >= sweeps || !(st > thr) {
			return
		}
	}
}

// halsCoefSweeper runs accelerated HALS's sweeps over the rows of C on the lanes of ops.
type halsCoefSweeper struct {
	ops    *blockOps
	c, h   []float64 // C and H = B^T X, K x n column-major
	g      []float64 // G = B^T B, K x K full
	l1, l2 float64
	diag   []float64 // g_pp + l2 (a component with diag <= 0 keeps its value)
	span   int
	fn     func(l, lo, hi int)
	// laneStep and laneCross are per-lane sums of a sweep's step and of <h_j, c_j>.
	laneStep, laneCross []float64
}

func newHALSCoefSweeper(ops *blockOps, c, h, g []float64, l1, l2 float64) *halsCoefSweeper {
	k := ops.k
	nl := len(ops.lanes) - 1
	s := &halsCoefSweeper{ops: ops, c: c, h: h, g: g, l1: l1, l2: l2, diag: make([]float64, k),
		span: ops.flag.span(k*k+2*k, 1), laneStep: make([]float64, nl), laneCross: make([]float64, nl)}
	s.fn = s.lane
	return s
}

// sweeps runs up to n sweeps over the rows of C, stopping after a sweep whose step is at most
// eps2 times the first's, and returns <H, C> for the final C.
func (s *halsCoefSweeper) sweeps(n int, eps2 float64) (cross float64) {
	k := s.ops.k
	for p := 0; p < k; p++ {
		s.diag[p] = s.g[p*k+p] + s.l2
	}
	var thr float64
	for l := 1; ; l++ {
		s.ops.run(s.fn)
		var st float64
		cross = 0
		for i, v := range s.laneStep {
			st += v
			cross += s.laneCross[i]
		}
		if l == 1 {
			thr = st * eps2
		}
		if l >= n || !(st > thr) {
			return cross
		}
	}
}

// lane runs one sweep over the rows of C on the columns [lo, hi): column by column, the
// coordinate steps of components 1..K in order (a row-by-row sweep, as each column's values
// depend only on that column's).
func (s *halsCoefSweeper) lane(l, lo, hi int) {
	k, g, l1 := s.ops.k, s.g, s.l1
	var st, cross float64
	for j0 := lo; j0 < hi; j0 += s.span {
		if s.ops.flag.stopped() {
			return
		}
		for j, j1 := j0, min(j0+s.span, hi); j < j1; j++ {
			cj := s.c[j*k : (j+1)*k]
			hj := s.h[j*k : (j+1)*k]
			for p, hpp := range s.diag {
				if !(hpp > 0) {
					continue
				}
				num := hj[p]
				for q, gq := range g[p*k : (p+1)*k] {
					if q != p {
						num -= float64(gq * cj[q])
					}
				}
				nc := (num - l1) / hpp
				if nc < 0 {
					nc = 0
				}
				d := nc - cj[p]
				st = math.FMA(d, d, st)
				cj[p] = nc
			}
			for p, hp := range hj {
				cross += float64(hp * cj[p])
			}
		}
	}
	s.laneStep[l], s.laneCross[l] = st, cross
}
