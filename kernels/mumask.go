package kernels

import "slices"

// Masked MU (see "Missing values" and "Held-out entries" in doc.go). With W the 0/1 mask of the
// observed entries (1 where the fit sees x_ij), Y = BC and the unmasked code's conventions
// (beta.go: Ys, Yd, EPS, gamma, the penalties, entries below float64 eps set to 0), an
// iteration makes the weighted updates
//
//	C <- C .* ((B^T (W .* X .* Ys^(beta-2))) ./ den_C)^gamma,   den_C = B^T (W .* Yd^(beta-1)),
//	B <- B .* (((W .* X .* Ys^(beta-2)) C^T) ./ den_B)^gamma,   den_B = (W .* Yd^(beta-1)) C^T,
//
// an unobserved entry contributing 0 to every numerator and denominator: the unmasked updates
// of the loss sum_{ij in O} d_beta(x_ij | y_ij), to which they reduce when W is all ones.
// Every loss runs on the beta lane (beta_lane.go), the Frobenius one too (beta = 2: R = X_o,
// Dn = Y), as the Gram shortcut B^T B C of mu.go no longer gives den_C; the Frobenius updates
// keep mu.go's rule that an entry whose denominator is 0 keeps its value, the others
// scikit-learn's (0 -> EPS; for KL's den_B, 0 -> 1): under them a column or row of X with no
// observed entry has coefficients or basis entries 0 after one iteration, under the Frobenius
// loss they stay as they are.
//
// The kernels read X_o (mask.go: the unobserved entries zeroed or dropped), so R, which is
// 0 wherever x is, needs nothing more; the weights Dn are set to 0 at the unobserved entries
// of a batch from the shard's column lists before they enter B^T Dn and Dn C^T. KL, whose Dn
// is 1, never forms it: den_C of column j is the column sums of B over the column's observed
// rows, and den_B of row i the row sums of C_new over the row's observed columns (M x K now,
// not K), each the full sum (B's column sums, C_new's row sums over the shard) minus the
// unobserved terms, or, where those are more than half or the difference would lose more than
// 6 bits (maskCancel), summed directly over the observed ones, as mask.go's maskedSqNorm does.
// A sparse KL block thus still touches only its stored entries (X_o's) and its unobserved
// ones: an unstored entry is an observed 0, which has R = 0 and weight 1.
//
// The objective, 2 D_beta over the observed entries plus the penalties, has the unmasked
// terms with sums over O: for the Frobenius loss sum_O (x - y)^2 summed directly (no
// cancelling identity, so that it is the masked residual to round-off); for KL sum_O y =
// sum_j c_j . (the column sums of B over O_j); for IS the count M N becomes the observed count
// (MaskStats); for the other betas sum_O Y^beta. The held-out error of (B_t, C_t) is
// heldOutSq's, summed by the lanes in the pass that computes the loss of (B_t, C_t).
//
// One allreduce per iteration ("mu.beta", as the unmasked beta-divergence MU, with the same
// half-iteration pipeline):
//
//	numerator (M x K) | den_B (M x K, every loss) | loss terms | held-out error (with a test
//	set) | ||C_i||_1, ||C_i||^2 (penalty on C)
//
// with loss terms [sum_O (x - y)^2] for the Frobenius loss, [sum x log(x/Ys), sum x, sum_O y]
// for KL, [sum x/Ys, sum log(x/Ys)] for IS and [sum x^beta, sum x Ys^(beta-1), sum_O Y^beta]
// otherwise. The Snapshot State is [B_{t+1}] for every loss (muMaskedState).
//
// Arithmetic: the products run on the Gram lane's steps of the process's kernel path as the
// unmasked ones do, the rest in plain Go with pinned arithmetic, every sum in a fixed order
// (rows, columns of a lane, lanes, shards by the reduce tree; KL's den_B row by row): the bits
// do not depend on the kernel path, the thread count or GOAMD64, and depend on the shard count
// by round-off only.

// muMaskedState is masked MU's Snapshot.State layout (after the mask slot): B_{t+1}, for every
// loss.
func muMaskedState(s *ShardSpec) []stateSlot {
	m, _ := s.X.Dims()
	return []stateSlot{{"B_next, the basis of the next iteration (M x K)", m * s.K}}
}

// maskable reports whether the shard runs with a mask (Options.Masked), whether or not some
// entry of X is unobserved.
func (e *shardEnv) maskable() bool { return e.m != nil && e.m.mask != nil }

// runMUMaskable runs MU on a masked shard: the masked code when some entry of X is
// unobserved, otherwise the unmasked code, bit for bit.
func runMUMaskable(e *shardEnv) {
	first, initial, state := e.begin()
	if !e.masked() {
		if e.spec.Loss == LossFrobenius {
			runMUFrobenius(e, first, initial)
			return
		}
		if err := e.spec.Loss.CheckData(e.spec.X, e.spec.ColOffset); err != nil {
			panic(err)
		}
		newMUBeta(e).run(first, initial, state)
		return
	}
	sm := e.m.mask.sm
	if err := e.spec.Loss.checkData(sm.x, e.spec.ColOffset, sm.isUnobserved); err != nil {
		panic(err)
	}
	s := newMUBeta(e) // on X_o: begin made it the shard's block
	s.mk = newMUMask(s, e.m.mask)
	s.run(first, initial, state)
}

// isUnobserved reports whether entry (i, j) of the block is unobserved (v is not looked at).
func (s *shardMask) isUnobserved(j, i int, _ float64) bool {
	_, found := slices.BinarySearch(s.urow[s.uptr[j]:s.uptr[j+1]], int32(i))
	return found
}

// muMask is the masked part of a muBeta.
type muMask struct {
	s    *muBeta
	ms   *maskState
	sm   *shardMask
	frob bool // the Frobenius loss: R = X_o, Dn = Y, a zero denominator keeps the entry
	// termsLen is the number of loss terms in the payload.
	termsLen int
	lanes    []muMaskLane
	// The pass's arguments, for laneFn (method values made once: a pass allocates nothing).
	c, cn  []float64
	full   bool
	laneFn func(int)
	// KL's den_B: rowLanes cut the rows, rowSpan rows between two looks at the flag; rs are
	// the row sums of C_new over the shard, den the payload's M x K.
	rowLanes []int
	rowSpan  int
	rs, den  []float64
	rowAcc   [][]float64 // per row lane: K sums
	rowFn    func(int)
}

// muMaskLane is a lane's masked sums and scratch.
type muMaskLane struct {
	t0, t1, t2 float64   // the loss terms (see muMask.pass)
	test       float64   // the held-out squared error of (B, C) over the lane's columns
	den        []float64 // KL: the batch's den_C, Kp per column
}

func newMUMask(s *muBeta, ms *maskState) *muMask {
	mk := &muMask{s: s, ms: ms, sm: ms.sm, frob: s.e.spec.Loss == LossFrobenius,
		lanes: make([]muMaskLane, len(s.lane))}
	s.denLen = s.m * s.k
	switch {
	case mk.frob:
		mk.termsLen = 1
	case s.loss.is:
		mk.termsLen = 2
	default:
		mk.termsLen = 3
	}
	if s.loss.kl {
		for l := range mk.lanes {
			mk.lanes[l].den = make([]float64, s.batchCols()*s.kp)
		}
		mk.rowLanes = rowLaneBounds(s.m)
		mk.rowAcc = make([][]float64, len(mk.rowLanes)-1)
		for l := range mk.rowAcc {
			mk.rowAcc[l] = make([]float64, s.k)
		}
		mk.rowSpan = s.e.flag.span(2*s.k*(1+len(mk.sm.urow)/max(s.m, 1)), 1)
		mk.rowFn = mk.rowLane
	}
	mk.laneFn = mk.lane
	return mk
}

// payloadLen is the length of the masked allreduce payload.
func (mk *muMask) payloadLen() int {
	n := 2*mk.s.m*mk.s.k + mk.termsLen
	if mk.sm.test {
		n++
	}
	if mk.s.pen.coef() {
		n += 2
	}
	return n
}

// pass is muBeta.pass on a masked block.
func (mk *muMask) pass(c, cn, payload []float64, full bool) []float64 {
	s := mk.s
	mk.c, mk.cn, mk.full = c, cn, full
	s.e.spec.Pool.Run(len(s.lane), mk.laneFn)
	s.e.flag.poll()
	if !full {
		return nil
	}
	m, k := s.m, s.k
	// Lane sums in lane order, into lane 0's accumulators.
	first, f0 := &s.lane[0], &mk.lanes[0]
	for l := 1; l < len(s.lane); l++ {
		s.e.flag.poll()
		ln, ml := &s.lane[l], &mk.lanes[l]
		for i, v := range ln.numB {
			first.numB[i] += v
		}
		for i, v := range ln.denB {
			first.denB[i] += v
		}
		f0.t0 += ml.t0
		f0.t1 += ml.t1
		f0.t2 += ml.t2
		f0.test += ml.test
	}
	num, den := payload[:m*k], payload[m*k:2*m*k]
	if s.cols != nil {
		copy(num, first.numB)
	} else {
		unpackRows(num, first.numB, m, k)
	}
	switch {
	case s.loss.kl:
		mk.rs, mk.den = first.denB[:k], den
		s.e.spec.Pool.Run(len(mk.rowLanes)-1, mk.rowFn)
		s.e.flag.poll()
	case s.cols != nil:
		copy(den, first.denB)
	default:
		unpackRows(den, first.denB, m, k)
	}
	at := 2 * m * k
	for i, t := range [3]float64{f0.t0, f0.t1, f0.t2} {
		if i < mk.termsLen {
			payload[at+i] = t
		}
	}
	at += mk.termsLen
	if mk.sm.test {
		payload[at] = f0.test
		at++
	}
	if s.pen.coef() {
		payload[at], payload[at+1] = factorNorms(c, s.e.flag)
	}
	return payload
}

// heldOut returns the held-out error from the reduced payload (0 without a test set).
func (mk *muMask) heldOut(sum []float64) float64 {
	if !mk.sm.test {
		return 0
	}
	return max(sum[2*mk.s.m*mk.s.k+mk.termsLen], 0)
}

// objective returns 2 D_beta over the observed entries + the penalties of (B, C) from the
// reduced payload.
func (mk *muMask) objective(b, sum []float64) float64 {
	s, l := mk.s, &mk.s.loss
	at := 2 * s.m * s.k
	t := sum[at : at+mk.termsLen]
	var obj float64
	switch {
	case mk.frob:
		obj = t[0]
	case l.kl:
		obj = 2 * (t[0] + (t[2] - t[1]))
	case l.is:
		obj = 2 * ((t[0] - float64(mk.ms.totals.Observed)) - t[1])
	default:
		obj = 2 * l.divergence(t, nil, 0, 0)
	}
	if s.pen.on() {
		var penC float64
		if s.pen.coef() {
			at += mk.termsLen
			if mk.sm.test {
				at++
			}
			penC = s.pen.coefValue(sum[at], sum[at+1])
		}
		obj = obj + penC + s.pen.basisPenalty(b, s.e.flag)
	}
	return obj
}

// updateB writes into bn the B update of b from the reduced payload.
func (mk *muMask) updateB(b, bn, sum []float64) {
	s, l := mk.s, &mk.s.loss
	m, k := s.m, s.k
	num, den := sum[:m*k], sum[m*k:2*m*k]
	l1, l2 := s.pen.l1B, s.pen.l2B
	for p := 0; p < k; p++ {
		s.e.flag.poll()
		for i := p * m; i < (p+1)*m; i++ {
			d, f := den[i], b[i]
			switch {
			case mk.frob:
				bn[i] = frobStep(f, num[i], d, l1, l2)
			case l.kl && d == 0:
				bn[i] = l.step(f, num[i], 1, l1, l2, true) // scikit-learn's W_sum[W_sum == 0] = 1
			default:
				bn[i] = l.step(f, num[i], d, l1, l2, l.beta <= 1)
			}
		}
	}
}

// lane runs the pass over lane l's columns (the arguments in mk.c, mk.cn, mk.full).
func (mk *muMask) lane(l int) {
	s := mk.s
	ln, ml := &s.lane[l], &mk.lanes[l]
	lo, hi := s.lanes[l], s.lanes[l+1]
	var lt lossTerms
	beta := !mk.frob && !s.loss.kl && !s.loss.is // the general beta
	if mk.full {
		clear64(ln.numB)
		clear64(ln.denB)
		ml.test = 0
		lt.sumXBeta = beta && !ln.xbetaOK
	}
	bc := s.batchCols()
	for j0 := lo; j0 < hi; {
		if s.e.flag.stopped() {
			return
		}
		j1 := batchEnd(s.x, j0, min(j0+bc, hi, j0+s.span))
		mk.batch(ln, ml, &lt, j0, j1)
		j0 = j1
	}
	if !mk.full {
		return
	}
	if beta {
		if lt.sumXBeta {
			ln.xbeta, ln.xbetaOK = lt.t0, true
		}
		lt.t0 = ln.xbeta
	}
	ml.t0, ml.t1, ml.t2 = lt.t0, lt.t1, lt.t2
}

// batch runs the masked pass over the columns [j0, j1): denseBatch's steps with the weights
// zeroed at the unobserved entries (KL: klBatch), and with the full pass the held-out error.
func (mk *muMask) batch(ln *betaLane, ml *muMaskLane, lt *lossTerms, j0, j1 int) {
	s := mk.s
	k, mp, kp, nb := s.k, s.mp, s.kp, j1-j0
	c, full := mk.c, mk.full
	cb, cnb := c[j0*k:j1*k], mk.cn[j0*k:j1*k]
	if full && mk.sm.test {
		ml.test = addHeldOutSq(ml.test, mk.sm, s.e.B, c, k, j0, j1) // e.B is the B of the pass
	}
	xd, colptr, rows, vals := s.batchInput(ln, j0, j1)
	h := ln.h[:nb*kp]
	if s.loss.kl {
		mk.klBatch(ln, ml, lt, xd, colptr, rows, vals, j0, nb, cb, cnb, h)
		return
	}
	y := ln.y[:nb*mp]
	s.kern.dotsDense(s.bt, cb, k, mp, nb, y)
	if full && mk.frob {
		mk.loss(lt, xd, y, nil, nil, j0, nb) // before weights, which may zero y
	}
	w, rr := mk.weights(ln, xd, y, j0, nb)
	if full && !mk.frob {
		mk.loss(lt, xd, y, w, ln.q, j0, nb)
	}
	den := ln.hd[:nb*kp]
	s.dotsB(w, nb, den)
	s.dotsB(rr, nb, h)
	if mk.frob {
		mk.frobCoefs(h, den, cb, cnb, nb)
	} else {
		s.updateCoefs(h, den, cb, cnb, nb)
	}
	if !full {
		return
	}
	s.kern.dotsDense(s.bt, cnb, k, mp, nb, y)
	cs := s.padCoefs(ln, cnb, nb)
	w, rr = mk.weights(ln, xd, y, j0, nb)
	s.accB(w, nb, cs, ln.denB)
	s.accB(rr, nb, cs, ln.numB)
}

// weights returns w = W .* Dn and R for the batch's nb columns (from column j0 of the block),
// M values per column: for the Frobenius loss w = Y at the observed entries, 0 elsewhere (Y
// itself, zeroed there, when M is a multiple of 4, else a copy in the lane's w), and R = X_o
// itself; otherwise weightsRatios's w and r in the lane's, with w set to 0 at the unobserved
// entries.
func (mk *muMask) weights(ln *betaLane, xd, y []float64, j0, nb int) (w, r []float64) {
	s, sm := mk.s, mk.sm
	m, mp := s.m, s.mp
	w, r = ln.w[:nb*m], xd
	switch {
	case mk.frob && m == mp:
		w = y[:nb*m]
	case mk.frob:
		for j := 0; j < nb; j++ {
			copy(w[j*m:(j+1)*m], y[j*mp:j*mp+m])
		}
	default:
		r = ln.r[:nb*m]
		s.weightsRatios(xd, y, w, r, nb)
	}
	for j := 0; j < nb; j++ {
		wj := w[j*m : (j+1)*m]
		for _, i := range sm.urow[sm.uptr[j0+j]:sm.uptr[j0+j+1]] {
			wj[i] = 0
		}
	}
	return w, r
}

// loss adds the batch's loss terms over its observed entries to lt (all but KL; w is not
// read for the Frobenius loss). IS is denseLoss's: its terms sum over x > EPS, which the
// unobserved entries (0 in X_o) are not.
func (mk *muMask) loss(lt *lossTerms, xd, y, w, qs []float64, j0, nb int) {
	s, sm, l := mk.s, mk.sm, &mk.s.loss
	m, mp := s.m, s.mp
	if l.is {
		s.denseLoss(lt, xd, y, w, qs, nb)
		return
	}
	t0, t1, t2 := lt.t0, lt.t1, lt.t2
	for j := 0; j < nb; j++ {
		xj, yj := xd[j*m:(j+1)*m], y[j*mp:j*mp+m]
		skip := sm.urow[sm.uptr[j0+j]:sm.uptr[j0+j+1]]
		if mk.frob {
			// The observed rows in order: the runs between the unobserved ones.
			lo := 0
			for u := 0; u <= len(skip); u++ {
				hi := m
				if u < len(skip) {
					hi = int(skip[u])
				}
				for i, x := range xj[lo:hi] {
					d := x - yj[lo+i]
					t0 += float64(d * d)
				}
				lo = hi + 1
			}
			continue
		}
		// sum_O Y^beta as denseLoss sums Y^beta, then the terms of x > EPS (observed).
		wj := w[j*m : (j+1)*m]
		var ty float64
		lo := 0
		for u := 0; u <= len(skip); u++ {
			hi := m
			if u < len(skip) {
				hi = int(skip[u])
			}
			for i := lo; i < hi; i++ {
				if v := yj[i]; v != 0 {
					ty += float64(v * wj[i])
				} else {
					ty += powNumpy(v, l.beta)
				}
			}
			lo = hi + 1
		}
		t2 += ty
		t0, t1 = addBetaXTerms(t0, t1, l.beta, lt.sumXBeta, xj, yj, wj)
	}
	lt.t0, lt.t1, lt.t2 = t0, t1, t2
}

// frobCoefs is the Frobenius C update of mu.go on the batch: den (Kp per column) penalized,
// and the coefficient kept where it is 0.
func (mk *muMask) frobCoefs(h, den, cb, cnb []float64, nb int) {
	s := mk.s
	k, kp := s.k, s.kp
	l1, l2 := s.pen.l1C, s.pen.l2C
	for j := 0; j < nb; j++ {
		hj, dj := h[j*kp:j*kp+k], den[j*kp:j*kp+k]
		cj, cnj := cb[j*k:(j+1)*k], cnb[j*k:(j+1)*k]
		hj, dj, cnj = hj[:len(cj)], dj[:len(cj)], cnj[:len(cj)]
		for p, f := range cj {
			cnj[p] = frobStep(f, hj[p], dj[p], l1, l2)
		}
	}
}

// klBatch is the masked KL pass over a batch: the unmasked quotients and products
// (denseBatch's, or sparseKLBatch's on the stored entries when xd is nil), with den_C the
// column sums of B over each column's observed rows and, in the full pass, sum_O y and the
// row sums of C_new (den_B is made from them after the lanes, rowLane).
func (mk *muMask) klBatch(ln *betaLane, ml *muMaskLane, lt *lossTerms, xd []float64, colptr []int, rows []int32, vals []float64,
	j0, nb int, cb, cnb, h []float64) {
	s := mk.s
	m, k, mp, kp, full := s.m, s.k, s.mp, s.kp, mk.full
	den := ml.den[:nb*kp]
	mk.colSums(j0, nb, den)
	var y, r []float64
	if xd == nil {
		if len(ln.r) < len(vals) {
			ln.r = make([]float64, len(vals)) // grows to the largest batch, as sparseKLBatch's
		}
		r = ln.r[:len(vals)]
		s.sparseQuotients(colptr, rows, vals, cb, r)
		if full {
			lt.t0, lt.t1 = sumLogs(vals, r, nil, false, lt.t0, lt.t1)
		}
		s.kern.dotsSparse(s.bp, kp, colptr, rows, r, h)
	} else {
		y, r = ln.y[:nb*mp], ln.r[:nb*m]
		s.kern.dotsDense(s.bt, cb, k, mp, nb, y)
		if full {
			for j := 0; j < nb; j++ {
				lt.t0, lt.t1 = sumLogs(xd[j*m:(j+1)*m], r[j*m:(j+1)*m], y[j*mp:j*mp+m], false, lt.t0, lt.t1)
			}
		} else {
			klQuotients(xd, y, r, m, mp, nb)
		}
		s.dotsB(r, nb, h)
	}
	if full {
		t2 := lt.t2
		for j := 0; j < nb; j++ {
			cj, dj := cb[j*k:(j+1)*k], den[j*kp:j*kp+k]
			dj = dj[:len(cj)]
			for p, v := range cj {
				t2 += float64(v * dj[p])
			}
		}
		lt.t2 = t2
	}
	s.updateCoefs(h, den, cb, cnb, nb)
	if !full {
		return
	}
	cs := s.padCoefs(ln, cnb, nb)
	if xd == nil {
		s.sparseQuotients(colptr, rows, vals, cnb, r)
		s.kern.accSparseA(kp, colptr, rows, r, cs, ln.numB)
	} else {
		s.kern.dotsDense(s.bt, cnb, k, mp, nb, y)
		klQuotients(xd, y, r, m, mp, nb)
		s.accB(r, nb, cs, ln.numB)
	}
	rs := ln.denB[:k]
	for j := 0; j < nb; j++ {
		cnj := cnb[j*k : (j+1)*k]
		cnj = cnj[:len(rs)]
		for p, v := range cnj {
			rs[p] += v
		}
	}
}

// colSums sets den (Kp per column) to the column sums of B over the observed rows of the
// batch's nb columns from column j0 of the block.
func (mk *muMask) colSums(j0, nb int, den []float64) {
	s, sm := mk.s, mk.sm
	m, k, mp, kp := s.m, s.k, s.mp, s.kp
	for j := 0; j < nb; j++ {
		dj := den[j*kp : j*kp+k]
		skip := sm.urow[sm.uptr[j0+j]:sm.uptr[j0+j+1]]
		if len(skip) == 0 {
			copy(dj, s.bsum)
			continue
		}
		for p := range dj {
			dj[p] = maskedSum(s.bsum[p], s.bt[p*mp:p*mp+m], skip)
		}
	}
}

// maskedSum returns the sum of v outside the entries skip (increasing), given full, the sum
// of all of v in order: full minus the skipped entries when they are at most half and the
// difference keeps full*maskCancel, otherwise the sum of the others in order (maskedSqNorm's
// rule for nonnegative v).
func maskedSum(full float64, v []float64, skip []int32) float64 {
	if len(skip) == 0 {
		return full
	}
	if 2*len(skip) <= len(v) {
		s := full
		for _, i := range skip {
			s -= v[i]
		}
		if s >= full*maskCancel {
			return s
		}
	}
	var s float64
	t := 0
	for i, x := range v {
		if t < len(skip) && int(skip[t]) == i {
			t++
			continue
		}
		s += x
	}
	return s
}

// rowLane sets KL's den_B (column-major M x K, mk.den) for the rows of row lane l: entry
// (i, p) is the sum of C_new's row p over the shard's columns observed in row i, by
// maskedSum's rule from the row sums mk.rs: rs_p minus the unobserved columns' c_pj in column
// order when they are at most half and the difference keeps rs_p*maskCancel, otherwise
// directRowSum.
func (mk *muMask) rowLane(l int) {
	s, sm := mk.s, mk.sm
	m, n, k := s.m, s.n, s.k
	rs, den, cn, acc := mk.rs, mk.den, mk.cn, mk.rowAcc[l]
	lo, hi := mk.rowLanes[l], mk.rowLanes[l+1]
	for i0 := lo; i0 < hi; i0 += mk.rowSpan {
		if s.e.flag.stopped() {
			return
		}
		for i, i1 := i0, min(i0+mk.rowSpan, hi); i < i1; i++ {
			skip := sm.rcol[sm.rptr[i]:sm.rptr[i+1]]
			if 2*len(skip) > n {
				for p := 0; p < k; p++ {
					den[p*m+i] = directRowSum(cn, p, k, n, skip)
				}
				continue
			}
			copy(acc, rs)
			for _, j := range skip { // the K values of a column at a time
				cj := cn[int(j)*k : (int(j)+1)*k]
				cj = cj[:len(acc)]
				for p, v := range cj {
					acc[p] -= v
				}
			}
			for p, v := range acc {
				if len(skip) > 0 && !(v >= rs[p]*maskCancel) {
					v = directRowSum(cn, p, k, n, skip)
				}
				den[p*m+i] = v
			}
		}
	}
}

// directRowSum returns sum_j c[j*k+p] over the n columns outside skip (increasing), in order.
func directRowSum(c []float64, p, k, n int, skip []int32) float64 {
	var s float64
	t := 0
	for j := 0; j < n; j++ {
		if t < len(skip) && int(skip[t]) == j {
			t++
			continue
		}
		s += c[j*k+p]
	}
	return s
}
