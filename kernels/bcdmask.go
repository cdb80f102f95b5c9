package kernels

import (
	"fmt"
	"slices"
)

// Masked DBCD, BCD and HALS (see "Missing values" in doc.go). A shard keeps the masked residual
// E_i: e_ij = x_ij - b_i c_j on the observed entries and 0 on the unobserved ones, so that
// b_p.e_j and e_i.c_p sum over the observed entries alone.
//
// C step, column j: c_pj <- max(0, (b_p.e_j + g_jp c_pj - l1C) / (g_jp + l2C)) with
// g_jp = sum_{i in O_j} B[i, p]^2 (maskedDiag), then e_j -= dc b_p on the observed rows.
//
// B step, component p (DBCD sums over the shards in one allreduce, BCD locally): per row
// y_i = sum_{j in O_i} (e_ij + b_ip c_pj) c_pj and z_i = sum_{j in O_i} c_pj^2, then
// b_ip <- max(0, (y_i - l1B) / (z_i + l2B)) (unchanged when z_i + l2B = 0), the exact
// minimizer, and the objective changes by -2 db_i (y_i - b_ip z_i) + db_i^2 z_i. The payload is
// y and z (2M values instead of M + 1), with a test set also the held-out sums
// yt_i = sum_{j in T_i} r_ij c_pj and zt_i = sum_{j in T_i} c_pj^2 (r the held-out residual,
// recomputed by every C step), from which the held-out error changes by
// -2 db_i yt_i + db_i^2 zt_i. Phase 0 carries the objective before and after the C step and
// the held-out error after it (and, at iteration 1, before it).
//
// HALS: for p = 1..K the B step of component p, then the C step of component p alone, on the
// same residual; the objective is ||E||^2 summed directly after each iteration and the
// held-out error directly from B and C.

// refuseMaskedAccel stops a masked bcd or hals run with Options.Accel on: their masked forms
// have no accelerated inner loops yet (masked did has them). The machine returns the error
// from its first Next, before any iteration.
func refuseMaskedAccel(e *shardEnv) {
	if e.spec.Accel.On() {
		panic(fmt.Errorf("algorithm %s has no accelerated inner loops with %s (--accel %s): use --accel off, or algorithm did",
			e.spec.Algo, e.spec.Options.maskWhat(), e.spec.Accel))
	}
}

// maskedResidual is the masked residual of a block and its lanes.
type maskedResidual struct {
	sm      *shardMask
	m, n, k int
	pool    *Pool
	lanes   []int
	e       []float64 // M x n, column-major
	rt      []float64 // the held-out residuals, by entry of the column lists
	b, c    []float64
	gd      []float64 // ||b_p||^2
	laneD   [][]float64
	laneY   [][]float64 // per lane: y, z, yt, zt (M each)
	laneObj [][4]float64
	pendK   int
	pendDB  []float64
	phaseK  int
	flag    *interruptFlag
	pen     penalty
	// wantPrevT: the C step also sums the held-out error of the factors it starts from.
	wantPrevT bool
	// tracked: the C step keeps rt (DBCD, BCD); HALS computes the held-out error directly.
	tracked    bool
	cFn, yFn   func(int)
	cpFn, sqFn func(int)
	cSpan      int
	ySpan      int
	laneSq     []float64
	yParts     int // vectors per lane in laneY: 2, or 4 with tracked held-out sums
}

// newMaskedResidual starts from the residual e (taken over) or, when e is nil, from the masked
// X_o - B C.
func newMaskedResidual(sm *shardMask, k int, pool *Pool, b, c, e []float64, pen penalty, tracked bool, flag *interruptFlag) *maskedResidual {
	m, n := sm.m, sm.n
	lanes := laneBounds(&Dense{Rows: m, Cols: n}, k)
	nl := len(lanes) - 1
	s := &maskedResidual{sm: sm, m: m, n: n, k: k, pool: pool, lanes: lanes, b: b, c: c, e: e,
		gd: make([]float64, k), pendK: -1, pendDB: make([]float64, m), flag: flag, pen: pen,
		tracked: tracked && sm.test, laneD: make([][]float64, nl), laneY: make([][]float64, nl),
		laneObj: make([][4]float64, nl), laneSq: make([]float64, nl),
		cSpan: flag.span(3*m*k+m, 1), ySpan: flag.span(3*m, 1)}
	s.yParts = 2
	if s.tracked {
		s.yParts = 4
		s.rt = make([]float64, len(sm.urow))
	}
	for l := range s.laneY {
		s.laneD[l] = make([]float64, k)
		s.laneY[l] = make([]float64, s.yParts*m)
	}
	s.cFn, s.yFn, s.cpFn, s.sqFn = s.cLane, s.yLane, s.cpLane, s.sqLane
	if e != nil {
		return s
	}
	s.e = make([]float64, m*n)
	span := flag.span(m*k+m, 1)
	pool.Run(nl, func(l int) {
		for j0 := lanes[l]; j0 < lanes[l+1]; j0 += span {
			if flag.stopped() {
				return
			}
			for j, j1 := j0, min(j0+span, lanes[l+1]); j < j1; j++ {
				ej := s.e[j*m : (j+1)*m]
				columnInto(sm.x, j, ej)
				for p, cp := range c[j*k : (j+1)*k] {
					if cp != 0 {
						axpy(ej, -cp, b[p*m:(p+1)*m])
					}
				}
				sm.zeroUnobserved(ej, j)
			}
		}
	})
	flag.poll()
	return s
}

// residual returns a copy of E with the pending step applied, bitwise as the next C update
// applies it.
func (s *maskedResidual) residual() []float64 {
	e := slices.Clone(s.e)
	for j := 0; j < s.n; j++ {
		s.applyPending(e[j*s.m:(j+1)*s.m], j)
	}
	return e
}

// applyPending applies the pending B column step to column j of e (observed rows only).
func (s *maskedResidual) applyPending(ej []float64, j int) {
	if s.pendK >= 0 {
		if cp := s.c[j*s.k+s.pendK]; cp != 0 {
			axpy(ej, -cp, s.pendDB)
			s.sm.zeroUnobserved(ej, j)
		}
	}
}

// applyPendingTest applies the pending B column step to the held-out residuals of column j.
func (s *maskedResidual) applyPendingTest(j int) {
	if s.pendK < 0 {
		return
	}
	cp := s.c[j*s.k+s.pendK]
	if cp == 0 {
		return
	}
	sm := s.sm
	for t := sm.uptr[j]; t < sm.uptr[j+1]; t++ {
		if v := sm.uval[t]; v == v {
			s.rt[t] -= float64(s.pendDB[sm.urow[t]] * cp)
		}
	}
}

// updateC runs the C step on every column and returns the objective before and after it and
// the held-out error before (with wantPrevT) and after (when tracked).
func (s *maskedResidual) updateC(wantPrevT bool) (prev, post, prevT, postT float64) {
	for p := 0; p < s.k; p++ {
		bp := s.b[p*s.m : (p+1)*s.m]
		s.gd[p] = dot(bp, bp)
	}
	s.flag.poll()
	s.wantPrevT = wantPrevT
	s.pool.Run(len(s.lanes)-1, s.cFn)
	s.flag.poll()
	s.pendK = -1
	for _, o := range s.laneObj {
		prev += o[0]
		post += o[1]
		prevT += o[2]
		postT += o[3]
	}
	return prev, post, prevT, postT
}

func (s *maskedResidual) cLane(l int) {
	m, k, sm := s.m, s.k, s.sm
	dg := s.laneD[l]
	l1, l2 := s.pen.l1C, s.pen.l2C
	var prev, post, prevT, postT float64
	for j0, hi := s.lanes[l], s.lanes[l+1]; j0 < hi; j0 += s.cSpan {
		if s.flag.stopped() {
			return
		}
		for j, j1 := j0, min(j0+s.cSpan, hi); j < j1; j++ {
			ej := s.e[j*m : (j+1)*m]
			cj := s.c[j*k : (j+1)*k]
			s.applyPending(ej, j)
			prev += dot(ej, ej)
			lo, up := sm.unobserved(j)
			if s.wantPrevT && up > lo {
				prevT += heldOutSq(sm, s.b, s.c, k, j, j+1)
			}
			maskedDiag(dg, s.gd, s.b, sm.urow[lo:up], m, k)
			for p := 0; p < k; p++ {
				gpp := dg[p]
				h := gpp + l2
				if !(h > 0) {
					continue
				}
				bp := s.b[p*m : (p+1)*m]
				old := cj[p]
				nc := (dot(bp, ej) + float64(gpp*old) - l1) / h
				if nc < 0 {
					nc = 0
				}
				if d := nc - old; d != 0 {
					axpy(ej, -d, bp)
					sm.zeroUnobserved(ej, j)
				}
				cj[p] = nc
			}
			post += dot(ej, ej)
			if s.tracked {
				for t := lo; t < up; t++ {
					v := sm.uval[t]
					if v != v {
						continue
					}
					r := v - rowDot(s.b, int(sm.urow[t]), m, cj)
					s.rt[t] = r
					postT += float64(r * r)
				}
			}
		}
	}
	s.laneObj[l] = [4]float64{prev, post, prevT, postT}
}

// columnSums writes into y, z (and with tracked held-out sums yt, zt) the per-row sums of
// component p, y_i = sum_{j in O_i} (e_ij + b_ip c_pj) c_pj, after applying any pending step.
func (s *maskedResidual) columnSums(p int, y, z, yt, zt []float64) {
	m := s.m
	s.phaseK = p
	s.pool.Run(len(s.lanes)-1, s.yFn)
	s.flag.poll()
	s.pendK = -1
	outs := [][]float64{y, z, yt, zt}[:s.yParts]
	for v, out := range outs {
		copy(out, s.laneY[0][v*m:(v+1)*m])
		for l := 1; l < len(s.laneY); l++ {
			for i, x := range s.laneY[l][v*m : (v+1)*m] {
				out[i] += x
			}
		}
	}
	bp := s.b[p*m : (p+1)*m]
	for i, zi := range z {
		y[i] += float64(zi * bp[i])
	}
}

func (s *maskedResidual) yLane(l int) {
	m, k, kk, sm := s.m, s.k, s.phaseK, s.sm
	acc := s.laneY[l]
	clear64(acc)
	y, z := acc[:m], acc[m:2*m]
	var yt, zt []float64
	if s.tracked {
		yt, zt = acc[2*m:3*m], acc[3*m:4*m]
	}
	for j0, hi := s.lanes[l], s.lanes[l+1]; j0 < hi; j0 += s.ySpan {
		if s.flag.stopped() {
			return
		}
		for j, j1 := j0, min(j0+s.ySpan, hi); j < j1; j++ {
			ej := s.e[j*m : (j+1)*m]
			s.applyPending(ej, j)
			if s.tracked {
				s.applyPendingTest(j)
			}
			cp := s.c[j*k+kk]
			if cp == 0 {
				continue
			}
			axpy(y, cp, ej)
			cc := float64(cp * cp)
			lo, up := sm.unobserved(j)
			skip := sm.urow[lo:up]
			t := 0
			for i := range z {
				if t < len(skip) && int(skip[t]) == i {
					t++
					continue
				}
				z[i] += cc
			}
			if s.tracked {
				for u := lo; u < up; u++ {
					if v := sm.uval[u]; v == v {
						i := sm.urow[u]
						yt[i] += float64(s.rt[u] * cp)
						zt[i] += cc
					}
				}
			}
		}
	}
}

// stepB updates b_p from the (reduced) sums, records the step as pending and returns the
// change of the objective and of the held-out error (when tracked).
func (s *maskedResidual) stepB(p int, y, z, yt, zt []float64) (dObj, dTest float64) {
	l1, l2 := s.pen.l1B, s.pen.l2B
	bp := s.b[p*s.m : (p+1)*s.m]
	var cross, sq, crossT, sqT float64
	for i, yi := range y {
		zi := z[i]
		h := zi + l2
		if !(h > 0) {
			s.pendDB[i] = 0
			continue
		}
		nb := (yi - l1) / h
		if nb < 0 {
			nb = 0
		}
		d := nb - bp[i]
		cross += float64(d * (yi - float64(bp[i]*zi)))
		dd := float64(d * d)
		sq += float64(dd * zi)
		if s.tracked {
			crossT += float64(d * yt[i])
			sqT += float64(dd * zt[i])
		}
		s.pendDB[i] = d
		bp[i] = nb
	}
	s.pendK = p
	return float64(-2*cross) + sq, float64(-2*crossT) + sqT
}

// updateCRow runs HALS's C step of component p alone on every column (after applying the
// pending B step).
func (s *maskedResidual) updateCRow(p int) {
	bp := s.b[p*s.m : (p+1)*s.m]
	s.gd[0] = dot(bp, bp)
	s.phaseK = p
	s.pool.Run(len(s.lanes)-1, s.cpFn)
	s.flag.poll()
	s.pendK = -1
}

func (s *maskedResidual) cpLane(l int) {
	m, k, p, sm := s.m, s.k, s.phaseK, s.sm
	l1, l2 := s.pen.l1C, s.pen.l2C
	bp := s.b[p*m : (p+1)*m]
	for j0, hi := s.lanes[l], s.lanes[l+1]; j0 < hi; j0 += s.ySpan {
		if s.flag.stopped() {
			return
		}
		for j, j1 := j0, min(j0+s.ySpan, hi); j < j1; j++ {
			ej := s.e[j*m : (j+1)*m]
			s.applyPending(ej, j)
			lo, up := sm.unobserved(j)
			gpp := maskedSqNorm(s.gd[0], bp, sm.urow[lo:up])
			h := gpp + l2
			if !(h > 0) {
				continue
			}
			old := s.c[j*k+p]
			nc := (dot(bp, ej) + float64(gpp*old) - l1) / h
			if nc < 0 {
				nc = 0
			}
			if d := nc - old; d != 0 {
				axpy(ej, -d, bp)
				sm.zeroUnobserved(ej, j)
			}
			s.c[j*k+p] = nc
		}
	}
}

// sqNorm returns ||E||^2 (no step may be pending), lanes added in order.
func (s *maskedResidual) sqNorm() float64 {
	s.pool.Run(len(s.lanes)-1, s.sqFn)
	s.flag.poll()
	var t float64
	for _, v := range s.laneSq {
		t += v
	}
	return t
}

func (s *maskedResidual) sqLane(l int) {
	m := s.m
	var t float64
	for j0, hi := s.lanes[l], s.lanes[l+1]; j0 < hi; j0 += s.ySpan {
		if s.flag.stopped() {
			return
		}
		for j, j1 := j0, min(j0+s.ySpan, hi); j < j1; j++ {
			ej := s.e[j*m : (j+1)*m]
			t += dot(ej, ej)
		}
	}
	s.laneSq[l] = t
}

// runResidualBCDMasked is runResidualBCD on a masked block.
func runResidualBCDMasked(e *shardEnv, distributed bool, first int, initial float64, state [][]float64) {
	refuseMaskedAccel(e)
	ms := e.m.mask
	m, k := e.rows, e.k
	var res []float64
	if first > 1 {
		res = state[0]
	}
	pen := e.penalty()
	sh := newMaskedResidual(ms.sm, k, e.spec.Pool, e.B, e.C, res, pen, true, e.flag)
	e.state = func() [][]float64 { return [][]float64{sh.residual()} }
	test := sh.tracked
	nNorms := 0
	if pen.coef() {
		nNorms = 4
	}
	vecs := 2 * m
	nScalars := 2
	if test {
		vecs, nScalars = 4*m, 4
	}
	partial := make([]float64, vecs+nScalars+nNorms)
	y, z := make([]float64, m), make([]float64, m)
	var yt, zt []float64
	if test {
		yt, zt = make([]float64, m), make([]float64, m)
	}
	var c1, c2 float64
	if pen.coef() {
		c1, c2 = factorNorms(e.C, e.flag)
	}
	for it := first; ; it++ {
		prev, post, prevT, postT := sh.updateC(test && it == 1)
		var norms [4]float64
		if pen.coef() {
			norms[0], norms[1] = c1, c2
			c1, c2 = factorNorms(e.C, e.flag)
			norms[2], norms[3] = c1, c2
		}
		var penB0 float64
		if pen.on() && it == 1 {
			penB0 = pen.basisPenalty(e.B, e.flag)
		}
		var obj, tst float64
		for p := 0; p < k; p++ {
			sh.columnSums(p, y, z, yt, zt)
			if distributed {
				copy(partial, y)
				copy(partial[m:], z)
				if test {
					copy(partial[2*m:], yt)
					copy(partial[3*m:], zt)
				}
				n := vecs
				if p == 0 {
					sc := partial[vecs : vecs+nScalars]
					sc[0], sc[1] = prev, post
					if test {
						sc[2], sc[3] = prevT, postT
					}
					copy(partial[vecs+nScalars:], norms[:nNorms])
					n = len(partial)
				}
				sum := e.allReduce("dbcd.partial", it, partial[:n])
				copy(y, sum[:m])
				copy(z, sum[m:2*m])
				if test {
					copy(yt, sum[2*m:3*m])
					copy(zt, sum[3*m:4*m])
				}
				if p == 0 {
					sc := sum[vecs : vecs+nScalars]
					prev, post = sc[0], sc[1]
					if test {
						prevT, postT = sc[2], sc[3]
					}
					copy(norms[:nNorms], sum[vecs+nScalars:n])
				}
			}
			if p == 0 {
				obj, tst = post, postT
				if it == 1 {
					initial = prev
					if pen.on() {
						initial = prev + pen.coefValue(norms[0], norms[1]) + penB0
					}
					ms.initialTest = max(prevT, 0)
				}
			}
			do, dt := sh.stepB(p, y, z, yt, zt)
			obj += do
			tst += dt
		}
		if pen.on() {
			obj = obj + pen.coefValue(norms[2], norms[3]) + pen.basisPenalty(e.B, e.flag)
		}
		ms.test = max(tst, 0)
		e.iterationDone(it, obj, initial)
	}
}

// runHALSMasked is HALS on a masked block.
func runHALSMasked(e *shardEnv, first int, initial float64, state [][]float64) {
	refuseMaskedAccel(e)
	ms := e.m.mask
	sm := ms.sm
	m, k := e.rows, e.k
	var res []float64
	if first > 1 {
		res = state[0]
	}
	pen := e.penalty()
	sh := newMaskedResidual(sm, k, e.spec.Pool, e.B, e.C, res, pen, false, e.flag)
	e.state = func() [][]float64 { return [][]float64{sh.residual()} }
	objective := func() float64 {
		obj := sh.sqNorm()
		if pen.on() {
			obj = obj + pen.coefPenalty(e.C, e.flag) + pen.basisPenalty(e.B, e.flag)
		}
		return obj
	}
	heldOut := func() float64 {
		if !sm.test {
			return 0
		}
		return heldOutSq(sm, e.B, e.C, k, 0, sm.n)
	}
	if first == 1 {
		initial = objective()
		ms.initialTest = heldOut()
	}
	y, z := make([]float64, m), make([]float64, m)
	for it := first; ; it++ {
		for p := 0; p < k; p++ {
			sh.columnSums(p, y, z, nil, nil)
			sh.stepB(p, y, z, nil, nil)
			sh.updateCRow(p)
		}
		obj := objective()
		ms.test = heldOut()
		e.iterationDone(it, obj, initial)
	}
}
