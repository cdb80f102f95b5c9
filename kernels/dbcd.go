package kernels

// DBCD (Gao & Chu 2018, Algorithm 2) and its sequential form BCD. A shard keeps its residual
// E_i = X_i - B C_i. Each iteration it updates C_i by coordinate descent on E_i, then for each
// component k: y_k = sum_j (e_j + b_k c_kj) c_kj and z_k = sum_j c_kj^2 are summed over all
// shards (one allreduce per component, K per iteration), b_k <- max(0, y_k / z_k), and
// E_i -= db_k c_k. BCD runs the same updates with the sums formed locally.
//
// The objective is tracked exactly without extra passes: phase 0 also carries ||E_i||^2 before
// and after the C update, and each B column step changes it by
// -2 db_k·(y_k - b_k z_k) + ||db_k||^2 z_k, all from reduced values.
//
// Penalties (see "Penalties" in doc.go): the C update takes the penalty on C in its coordinate
// steps, and b_k <- max(0, (y_k - l1B) / (z_k + l2B)), scikit-learn's coordinate step on
// C C^T + l2B I and X C^T - l1B (the exact minimizer over b_k >= 0). The tracked data term is
// unchanged; the penalties are added to it at the end of the iteration: B's from the local
// replica, C's from ||C_i||_1 and ||C_i||^2, which phase 0's allreduce carries as four extra
// scalars (before and after the C update; only when C is penalized, so the unpenalized payload
// keeps its length). No extra collective.
//
// Accelerated BCD (Options.Accel, sequential bcd only: dbcd has no accelerated form) runs the
// inner loops of accelerated DID (accel.go) in the residual form, so that its iterates are
// DID's with the same Accel up to round-off:
//
//   - C: after a column's coordinate sweep (residualCoef), further sweeps on the same column
//     and residual while the squared norm of the last sweep's step exceeds Eps^2 times the
//     first's, at most CSweeps in all (sweepCoefsGo's stop rule, with math.FMA in component
//     order);
//   - B: with BSweeps > 1, DID's products W = E' C^T (E' = X - B_old C) and V = C C^T: the C
//     update also sums V (lane partials added in lane order), and W comes from the sums bcd's
//     B update forms anyway, without another product with the residual: component p's sum
//     is E^(p-1) c_p^T = W_p - sum_{q<p} v_qp db_q (E^(p-1) the residual after the steps of
//     components q < p), so W_p = E^(p-1) c_p^T + sum_{q<p} v_qp db_q (products rounded,
//     added in q order). After bcd's usual B update (which is DID's first B sweep)
//     sweepBasis runs the further sweeps from W and V, the
//     objective comes from DID's identity ||E_new||^2 = ||E'||^2 - 2 <dB, W> + <dB^T dB, V>
//     with dB the total change of B (W and V penalty-shifted as in DID when B is penalized),
//     and the further change of B is left pending on the residual as a whole M x K step,
//     applied by the next C update (and by residual, for a snapshot) as the one-column steps
//     are. Still no extra pass over the residual.

import (
	"math"
	"slices"
)

// residualShard holds the residual of a block and runs DBCD's local work on lanes.
type residualShard struct {
	x       Block
	m, n, k int
	pool    *Pool
	lanes   []int
	e       []float64 // M x n residual, column-major
	g       []float64
	b, c    []float64
	laneY   [][]float64
	laneZ   []float64
	laneObj [][2]float64
	// A pending column step of B not yet applied to e: e -= pendDB c_pendK.
	pendK  int
	pendDB []float64
	phaseK int
	cFn    func(int)
	yFn    func(int)
	flag   *interruptFlag
	// cSpan and ySpan are the columns between two looks at the flag in cLane and yLane.
	cSpan, ySpan int
	// pen is the job's penalty (zero without one).
	pen penalty
	// Accelerated BCD (setAccel): cExtra further C sweeps per column, stopping below eps2
	// times the first step; with wv the C update also sums V = C C^T into laneV (its lower
	// triangle, packed) and columnSums keeps component p's E^(p-1) c_p^T in rawW's column p.
	cExtra  int
	eps2    float64
	wv      bool
	laneOld [][]float64 // per lane, two columns of coefficients (before a sweep)
	laneV   [][]float64
	rawW    []float64
	// A pending step of all of B not yet applied to e (after pendK's): e -= pendFull C, over
	// the components p with pendCols[p].
	pendAll  bool
	pendFull []float64
	pendCols []bool
}

// newResidualShard starts from the residual e (M x n, taken over) or, when e is nil, from
// e = X - B C.
func newResidualShard(x Block, k int, pool *Pool, b, c, e []float64, flag *interruptFlag) *residualShard {
	m, n := x.Dims()
	lanes := laneBounds(&Dense{Rows: m, Cols: n}, k)
	s := &residualShard{x: x, m: m, n: n, k: k, pool: pool, lanes: lanes, b: b, c: c,
		e: e, g: make([]float64, k*k), pendK: -1, pendDB: make([]float64, m),
		laneY: make([][]float64, len(lanes)-1), laneZ: make([]float64, len(lanes)-1),
		laneObj: make([][2]float64, len(lanes)-1), flag: flag,
		cSpan: flag.span(3*m*k+m, 1), ySpan: flag.span(2*m, 1)}
	for l := range s.laneY {
		s.laneY[l] = make([]float64, m)
	}
	s.cFn, s.yFn = s.cLane, s.yLane
	if e != nil {
		return s
	}
	// e = X - B C
	s.e = make([]float64, m*n)
	span := flag.span(m*k+m, 1)
	pool.Run(len(lanes)-1, func(l int) {
		for j0 := lanes[l]; j0 < lanes[l+1]; j0 += span {
			if flag.stopped() {
				return
			}
			for j, j1 := j0, min(j0+span, lanes[l+1]); j < j1; j++ {
				ej := s.e[j*m : (j+1)*m]
				columnInto(x, j, ej)
				for p, cp := range c[j*k : (j+1)*k] {
					if cp != 0 {
						axpy(ej, -cp, b[p*m:(p+1)*m])
					}
				}
			}
		}
	})
	flag.poll()
	return s
}

// setAccel turns on accelerated BCD's inner loops (see the file comment).
func (s *residualShard) setAccel(a Accel) {
	m, k := s.m, s.k
	s.cExtra, s.eps2, s.wv = a.cExtra(), a.eps2(), a.bExtra() > 0
	nl := len(s.lanes) - 1
	s.laneOld = make([][]float64, nl)
	for l := range s.laneOld {
		s.laneOld[l] = make([]float64, 2*k)
	}
	perCol := (3*m*k + m) * (s.cExtra + 1)
	if s.wv {
		perCol += k * k
		s.laneV = make([][]float64, nl)
		for l := range s.laneV {
			s.laneV[l] = make([]float64, lowerLen(k))
		}
		s.rawW = make([]float64, m*k)
		s.pendFull = make([]float64, m*k)
		s.pendCols = make([]bool, k)
	}
	s.cSpan = s.flag.span(perCol, 1)
}

// residual returns a copy of E = X - B C with the pending step applied, bitwise as the next
// C update applies it.
func (s *residualShard) residual() []float64 {
	e := slices.Clone(s.e)
	for j := 0; j < s.n; j++ {
		s.applyPending(e[j*s.m:(j+1)*s.m], j)
	}
	return e
}

// applyPending applies the pending B column step, then the pending step of all of B
// (accelerated BCD), to column j of e.
func (s *residualShard) applyPending(ej []float64, j int) {
	if s.pendK >= 0 {
		if cp := s.c[j*s.k+s.pendK]; cp != 0 {
			axpy(ej, -cp, s.pendDB)
		}
	}
	if s.pendAll {
		m := s.m
		for p, cp := range s.c[j*s.k : (j+1)*s.k] {
			if cp != 0 && s.pendCols[p] {
				axpy(ej, -cp, s.pendFull[p*m:(p+1)*m])
			}
		}
	}
}

// updateC runs the C update on all columns and returns ||E||^2 before and after it.
func (s *residualShard) updateC() (prev, post float64) {
	gramCols(s.b, s.m, s.k, s.g, s.flag)
	s.pool.Run(len(s.lanes)-1, s.cFn)
	s.flag.poll()
	s.pendK, s.pendAll = -1, false
	for _, o := range s.laneObj {
		prev += o[0]
		post += o[1]
	}
	return prev, post
}

func (s *residualShard) cLane(l int) {
	m, k := s.m, s.k
	var prev, post float64
	var old, v []float64
	if s.cExtra > 0 {
		old = s.laneOld[l]
	}
	if s.wv {
		v = s.laneV[l]
		clear64(v)
	}
	for j0, hi := s.lanes[l], s.lanes[l+1]; j0 < hi; j0 += s.cSpan {
		if s.flag.stopped() {
			return
		}
		for j, j1 := j0, min(j0+s.cSpan, hi); j < j1; j++ {
			ej := s.e[j*m : (j+1)*m]
			cj := s.c[j*k : (j+1)*k]
			s.applyPending(ej, j)
			prev += dot(ej, ej)
			if old != nil {
				copy(old[:k], cj)
			}
			residualCoef(ej, s.b, s.g, cj, m, k, s.pen.l1C, s.pen.l2C)
			if old != nil {
				s.coefSweeps(ej, cj, old[:k], old[k:])
			}
			post += dot(ej, ej)
			if v != nil {
				addOuterLowerPacked(v, cj, k)
			}
		}
	}
	s.laneObj[l] = [2]float64{prev, post}
}

// coefSweeps runs accelerated BCD's further coordinate sweeps on one column: e is its
// residual and cj its coefficients after the first sweep, c0 them before it; prev is scratch
// (K). The stop rule and its arithmetic are sweepCoefsGo's.
func (s *residualShard) coefSweeps(e, cj, c0, prev []float64) {
	var first float64
	for p, v := range cj {
		d := v - c0[p]
		first = math.FMA(d, d, first)
	}
	thr := first * s.eps2
	st := first
	for l := 0; l < s.cExtra && st > thr; l++ {
		copy(prev, cj)
		residualCoef(e, s.b, s.g, cj, s.m, s.k, s.pen.l1C, s.pen.l2C)
		st = 0
		for p, v := range cj {
			d := v - prev[p]
			st = math.FMA(d, d, st)
		}
	}
}

// addOuterLowerPacked adds the lower triangle of c c^T to v, packed row by row (packLower's
// layout), with addOuterLower's operations.
func addOuterLowerPacked(v, c []float64, k int) {
	n := 0
	for p := 0; p < k; p++ {
		cp := c[p]
		if cp == 0 {
			n += p + 1
			continue
		}
		row := v[n : n+p+1]
		for q := range row {
			row[q] += float64(cp * c[q])
		}
		n += p + 1
	}
}

// basisProducts writes DID's W = E' C^T (M x K column-major) and V = C C^T (K x K full) of
// the last iteration (with wv), after its B update made the step db = B - B_old (see the file
// comment): V's lane partials added in lane order, W_p = rawW_p + sum_{q<p} v_qp db_q.
func (s *residualShard) basisProducts(w, v, db []float64) {
	m, k := s.m, s.k
	acc := s.laneV[0]
	for l := 1; l < len(s.laneV); l++ {
		for i, x := range s.laneV[l] {
			acc[i] += x
		}
	}
	unpackLower(v, acc, k)
	copy(w, s.rawW)
	for p := 1; p < k; p++ {
		s.flag.poll()
		wp := w[p*m : (p+1)*m]
		for q := 0; q < p; q++ {
			if vq := v[q*k+p]; vq != 0 {
				axpy(wp, vq, db[q*m:(q+1)*m])
			}
		}
	}
}

// pendBasis leaves the step B - b1 pending on the residual (b1: B before the further sweeps).
func (s *residualShard) pendBasis(b1 []float64) {
	m := s.m
	s.pendAll = false
	for p := range s.pendCols {
		s.pendCols[p] = false
		for i := p * m; i < (p+1)*m; i++ {
			d := s.b[i] - b1[i]
			s.pendFull[i] = d
			if d != 0 {
				s.pendCols[p] = true
			}
		}
		s.pendAll = s.pendAll || s.pendCols[p]
	}
}

// columnSums returns y = sum_j (e_j + b_k c_kj) c_kj (written into y) and z = sum_j c_kj^2,
// after applying any pending step to e.
func (s *residualShard) columnSums(k int, y []float64) (z float64) {
	s.phaseK = k
	s.pool.Run(len(s.lanes)-1, s.yFn)
	s.flag.poll()
	s.pendK = -1
	copy(y, s.laneY[0])
	z = s.laneZ[0]
	for l := 1; l < len(s.laneY); l++ {
		for i, v := range s.laneY[l] {
			y[i] += v
		}
		z += s.laneZ[l]
	}
	if s.wv {
		copy(s.rawW[k*s.m:(k+1)*s.m], y)
	}
	axpy(y, z, s.b[k*s.m:(k+1)*s.m])
	return z
}

func (s *residualShard) yLane(l int) {
	m, k, kk := s.m, s.k, s.phaseK
	y := s.laneY[l]
	clear64(y)
	var z float64
	for j0, hi := s.lanes[l], s.lanes[l+1]; j0 < hi; j0 += s.ySpan {
		if s.flag.stopped() {
			return
		}
		for j, j1 := j0, min(j0+s.ySpan, hi); j < j1; j++ {
			ej := s.e[j*m : (j+1)*m]
			s.applyPending(ej, j)
			if cp := s.c[j*k+kk]; cp != 0 {
				axpy(y, cp, ej)
				z += float64(cp * cp)
			}
		}
	}
	s.laneY[l], s.laneZ[l] = y, z
}

// stepB sets b_k = max(0, y/z) (unchanged when z = 0), records the step as pending for e and
// returns the change of ||E||^2 it causes. With a penalty on B it sets
// b_k = max(0, (y - l1B)/(z + l2B)) (unchanged when z + l2B = 0).
func (s *residualShard) stepB(k int, y []float64, z float64) float64 {
	if s.pen.basis() {
		return s.stepBPenalized(k, y, z)
	}
	if !(z > 0) {
		return 0
	}
	bk := s.b[k*s.m : (k+1)*s.m]
	var cross, sq float64
	for i, yi := range y {
		nb := yi / z
		if nb < 0 {
			nb = 0
		}
		d := nb - bk[i]
		// E^(k-1) c_k^T = y - b_k_old z
		cross += float64(d * (yi - float64(bk[i]*z)))
		sq += float64(d * d)
		s.pendDB[i] = d
		bk[i] = nb
	}
	s.pendK = k
	return float64(-2*cross) + float64(sq*z)
}

// stepBPenalized is stepB with the penalty on B.
func (s *residualShard) stepBPenalized(k int, y []float64, z float64) float64 {
	l1, l2 := s.pen.l1B, s.pen.l2B
	h := z + l2
	if !(h > 0) {
		return 0
	}
	bk := s.b[k*s.m : (k+1)*s.m]
	var cross, sq float64
	for i, yi := range y {
		nb := (yi - l1) / h
		if nb < 0 {
			nb = 0
		}
		d := nb - bk[i]
		cross += float64(d * (yi - float64(bk[i]*z)))
		sq += float64(d * d)
		s.pendDB[i] = d
		bk[i] = nb
	}
	s.pendK = k
	return float64(-2*cross) + float64(sq*z)
}

func runDBCD(e *shardEnv) { runResidualBCD(e, true) }

func runBCD(e *shardEnv) { runResidualBCD(e, false) }

// residualBCDState is DBCD's and BCD's Snapshot.State layout: the maintained residual, whose
// accumulated updates differ in round-off from a fresh X - B C.
func residualBCDState(s *ShardSpec) []stateSlot {
	m, n := s.X.Dims()
	return []stateSlot{{"E = X_i - B C_i (M x n_i)", m * n}}
}

func runResidualBCD(e *shardEnv, distributed bool) {
	first, initial, state := e.begin()
	if e.masked() {
		runResidualBCDMasked(e, distributed, first, initial, state)
		return
	}
	m, k := e.rows, e.k
	var res []float64
	if first > 1 {
		res = state[0]
	}
	sh := newResidualShard(e.spec.X, k, e.spec.Pool, e.B, e.C, res, e.flag)
	pen := e.penalty()
	sh.pen = pen
	// dbcd has no accelerated form (ValidateAccel refuses it): its B sweeps would need W and V
	// reduced over the shards.
	acc := e.spec.Accel
	accB := !distributed && acc.bExtra() > 0
	if !distributed && acc.On() {
		sh.setAccel(acc)
	}
	var w, v, bOld, b1, db []float64
	if accB {
		w, v = make([]float64, m*k), make([]float64, k*k)
		bOld, b1, db = make([]float64, m*k), make([]float64, m*k), make([]float64, m*k)
	}
	e.state = func() [][]float64 { return [][]float64{sh.residual()} }
	nNorms := 0
	if pen.coef() {
		nNorms = 4
	}
	partial := make([]float64, m+3+nNorms)
	y := make([]float64, m)
	var c1, c2 float64 // ||C_i||_1 and ||C_i||^2 of the C the next C update starts from
	if pen.coef() {
		c1, c2 = factorNorms(e.C, e.flag)
	}
	for it := first; ; it++ {
		prev, post := sh.updateC()
		// ||C_i||_1 and ||C_i||^2 before and after the C update (with a penalty), summed over
		// the shards by phase 0's allreduce.
		var norms [4]float64
		if pen.coef() {
			norms[0], norms[1] = c1, c2
			c1, c2 = factorNorms(e.C, e.flag)
			norms[2], norms[3] = c1, c2
		}
		var obj float64
		var penB0 float64 // the penalty of B before the B update (iteration 1 only)
		if pen.on() && it == 1 {
			penB0 = pen.basisPenalty(e.B, e.flag)
		}
		if accB {
			copy(bOld, e.B)
		}
		for p := 0; p < k; p++ {
			z := sh.columnSums(p, y)
			if distributed {
				n := m + 1
				copy(partial, y)
				partial[m] = z
				if p == 0 {
					partial[m+1], partial[m+2] = prev, post
					copy(partial[m+3:], norms[:nNorms])
					n = m + 3 + nNorms
				}
				sum := e.allReduce("dbcd.partial", it, partial[:n])
				copy(y, sum[:m])
				z = sum[m]
				if p == 0 {
					prev, post = sum[m+1], sum[m+2]
					copy(norms[:nNorms], sum[m+3:n])
				}
			}
			if p == 0 {
				obj = post
				if it == 1 {
					initial = prev
					if pen.on() {
						initial = prev + pen.coefValue(norms[0], norms[1]) + penB0
					}
				}
			}
			obj += sh.stepB(p, y, z)
		}
		if accB {
			// The further B sweeps and the objective from DID's identity (see the file
			// comment); obj, bcd's tracked value after the first sweep, is replaced.
			for i, bi := range e.B {
				db[i] = bi - bOld[i]
			}
			sh.basisProducts(w, v, db)
			obj = post
			if pen.basis() {
				obj += pen.basisPenalty(bOld, e.flag)
				shiftBasisStep(w, v, bOld, m, k, pen.l1B, pen.l2B)
			}
			copy(b1, e.B)
			sweepBasis(e.B, bOld, w, v, db, m, k, acc.bExtra(), acc.eps2(), e.flag)
			sh.pendBasis(b1)
			obj = basisObjective(w, v, db, m, k, obj, e.flag)
			if pen.coef() {
				obj += pen.coefValue(norms[2], norms[3])
			}
		} else if pen.on() {
			obj = obj + pen.coefValue(norms[2], norms[3]) + pen.basisPenalty(e.B, e.flag)
		}
		e.iterationDone(it, obj, initial)
	}
}
