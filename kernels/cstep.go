package kernels

import "math"

// cStep is the local half of a DID iteration on one block: the coordinate descent update of
// every column of C with B fixed, plus W = E C^T (E = X - B C after the C update), V = C C^T and
// the objective before and after the C update. It runs lanes of columns on the pool and adds
// lane results in lane order.
//
// The residual form computes the two objective values column by column from the residuals.
// The Gram form gets them at no per-column cost from the shard-level identity
// ||X - BC||^2 = ||X||^2 - 2<B, X C^T> + <B^T B, C C^T>, with ||X||^2 computed once and X C^T,
// C C^T kept from the previous iteration.
type cStep struct {
	x       Block
	m, n, k int
	pool    *Pool
	form    Form
	lanes   []int
	order   []int       // laneOrder of lanes
	laneW   [][]float64 // per lane: E C^T (residual, M x K) or X C^T (gram, M rows of Kp)
	laneV   [][]float64 // per lane: C C^T, lower triangle of a K x vStride row-major matrix
	laneObj [][2]float64
	scratch [][]float64
	g       []float64 // B^T B, K x K
	b, c    []float64 // the current call's B and C
	laneFn  func(int)
	flag    *interruptFlag
	vStride int // row length of laneV: K (residual form) or Kp (Gram form)
	// l1 and l2 are the penalty on C (l1C, l2C; 0 without one): each column solves
	// min ||x - B c||^2 + 2 l1 sum c + l2 ||c||^2, by coordinate descent on G + l2 I and
	// B^T x - l1 (see "Penalties" in doc.go). The objective values stay ||X - BC||^2.
	l1, l2 float64
	// norms asks each lane for the norms of its columns of C after the update (DID with a
	// penalty on C needs ||C_i||_1 and ||C_i||^2 every iteration): laneNorms, taken batch by
	// batch while the new coefficients are in cache (normSums.push) and added in lane order
	// by coefNorms, so that they cost no pass of their own over C.
	norms     bool
	laneNorms []normSums
	// sweeps, per lane, are accelerated DID's further C sweeps (setAccel; nil: plain DID).
	sweeps []*coefSweeps
	// Gram form only.
	kern     *gramKernels
	path     *gramKernels // the run's kernels (kern is them, or generic, in the Gram form)
	widening []widening   // per lane, for a block stored as float32
	gneg     []float64    // -G
	ginv     []float64    // 1 / G_pp, 0 for a dead component
	bp       []float64    // B in rows of Kp
	sqX      float64      // ||X||^2 of the block
	aPrev    []float64    // X C^T (rows of Kp) of the last call
	vPrev    []float64    // C C^T of the last call
	havePrev bool
}

// ChooseForm picks DID's kernel form for a block: the Gram form, whose SIMD kernels beat the
// residual form's Go loops on every shape measured, rank 1 included (M=784, 64 and 2000 at
// K=1: 2.4-4.2x; BENCHMARKS.md). The choice depends on the shape only, never on the kernel
// path, since the two forms round differently. The residual form computes the objective
// directly from residuals, the more accurate choice when an objective ratio far below 1e-10
// matters; --form residual selects it.
func ChooseForm(x Block, k int) Form {
	return FormGram
}

// state returns copies of what the Gram form carries from one call to the next and uses for
// the next call's prev: X C^T (M x K, column-major, as the lanes accumulated it, which is not
// bitwise what a fresh product gives) and C C^T. The residual form carries nothing.
func (s *cStep) state() [][]float64 {
	if s.form != FormGram {
		return nil
	}
	a := make([]float64, s.m*s.k)
	unpackRows(a, s.aPrev, s.m, s.k)
	return cloneAll(a, s.vPrev)
}

// restore sets the state that state returned, as if the previous call had run here.
func (s *cStep) restore(st [][]float64) {
	if s.form != FormGram {
		return
	}
	packRows(s.aPrev, st[0], s.m, s.k)
	copy(s.vPrev, st[1])
	s.havePrev = true
}

// newCStep prepares the C step of a block on the kernels kern (see gramKernelsOf); flag is the
// machine's interrupt flag (nil outside a machine).
func newCStep(x Block, k int, pool *Pool, form Form, flag *interruptFlag, kern *gramKernels) *cStep {
	m, n := x.Dims()
	if form == FormAuto {
		form = ChooseForm(x, k)
	}
	s := &cStep{x: x, m: m, n: n, k: k, pool: pool, form: form,
		lanes: laneBounds(x, k), g: make([]float64, k*k), flag: flag, path: kern}
	s.order = laneOrder(x, s.lanes, k)
	nl := len(s.lanes) - 1
	s.laneW = make([][]float64, nl)
	s.laneV = make([][]float64, nl)
	s.laneObj = make([][2]float64, nl)
	s.laneNorms = make([]normSums, nl)
	s.scratch = make([][]float64, nl)
	aLen, vLen, scratch := m*k, k*k, m
	s.vStride = k
	if form == FormGram {
		kp := paddedK(k)
		aLen, vLen, scratch = m*kp, k*kp, gramLaneScratch(m, k)
		s.vStride = kp
		s.kern = kern
		if sp, ok := x.(*CSC); ok && s.kern != &genericGram && sp.Validate() != nil {
			// The assembly trusts row indices; a malformed block takes the bounds-checked path.
			s.kern = &genericGram
		}
		s.gneg = make([]float64, k*k)
		s.ginv = make([]float64, k)
		s.bp = make([]float64, colsRows(m)*kp) // rows beyond m stay 0 (the column-lane dots read them)
		s.aPrev = make([]float64, aLen)
		s.vPrev = make([]float64, k*k)
		s.sqX = x.SqNorm()
	}
	for l := 0; l < nl; l++ {
		s.laneW[l] = make([]float64, aLen)
		s.laneV[l] = make([]float64, vLen)
		s.scratch[l] = make([]float64, scratch)
	}
	s.widening = make([]widening, nl)
	s.laneFn = s.lane
	return s
}

// run updates c in place given b, writes W (M x K column-major) and V (K x K symmetric) and
// returns ||X - B C_old||^2 and ||X - B C_new||^2 for this block.
func (s *cStep) run(b, c, w, v []float64) (prev, post float64) {
	m, k := s.m, s.k
	s.b, s.c = b, c
	gramCols(b, m, k, s.g, s.flag)
	if s.form == FormGram {
		return s.runGram(b, c, w, v)
	}
	s.pool.RunOrder(len(s.lanes)-1, s.order, s.laneFn)
	s.flag.poll()
	copy(w, s.laneW[0])
	for l := 1; l < len(s.laneW); l++ {
		for i, x := range s.laneW[l] {
			w[i] += x
		}
	}
	s.sumLaneV(v)
	for l := range s.laneObj {
		prev += s.laneObj[l][0]
		post += s.laneObj[l][1]
	}
	return prev, post
}

// sumLaneV adds the lanes' lower triangles in lane order into the full symmetric v.
func (s *cStep) sumLaneV(v []float64) {
	k, st := s.k, s.vStride
	clear64(v)
	for _, lv := range s.laneV {
		for p := 0; p < k; p++ {
			for q := 0; q <= p; q++ {
				v[p*k+q] += lv[p*st+q]
			}
		}
	}
	for p := 0; p < k; p++ {
		for q := 0; q < p; q++ {
			v[q*k+p] = v[p*k+q]
		}
	}
}

func (s *cStep) runGram(b, c, w, v []float64) (prev, post float64) {
	m, k := s.m, s.k
	for p := 0; p < k; p++ {
		s.ginv[p] = 0
		if gpp := s.g[p*k+p]; gpp > 0 {
			s.ginv[p] = 1 / gpp
		}
	}
	for i, g := range s.g {
		s.gneg[i] = -g
	}
	if s.l2 != 0 {
		// The penalized Hessian G + l2 I: its diagonal in -G and 1/diag (G itself stays for
		// the objective).
		for p := 0; p < k; p++ {
			d := s.g[p*k+p] + s.l2
			s.gneg[p*k+p] = -d
			s.ginv[p] = 0
			if d > 0 {
				s.ginv[p] = 1 / d
			}
		}
	}
	packRows(s.bp, b, m, k)
	if !s.havePrev {
		// First call: X C0^T and C0 C0^T for the objective of the starting point.
		ops := newBlockOps(s.x, k, s.pool, s.flag, s.path)
		a := make([]float64, m*k)
		ops.xct(c, a)
		packRows(s.aPrev, a, m, k)
		ops.cct(c, s.vPrev)
		s.havePrev = true
	}
	prev = s.gramObjective(b, s.aPrev, s.vPrev)
	s.pool.RunOrder(len(s.lanes)-1, s.order, s.laneFn)
	s.flag.poll()
	copy(s.aPrev, s.laneW[0])
	for l := 1; l < len(s.laneW); l++ {
		for i, x := range s.laneW[l] {
			s.aPrev[i] += x
		}
	}
	s.sumLaneV(v)
	copy(s.vPrev, v)
	post = s.gramObjective(b, s.aPrev, v)
	// W = X C^T - B (C C^T)
	unpackRows(w, s.aPrev, m, k)
	for p := 0; p < k; p++ {
		s.flag.poll()
		wp := w[p*m : (p+1)*m]
		for q := 0; q < k; q++ {
			if vq := v[q*k+p]; vq != 0 {
				axpy(wp, -vq, b[q*m:(q+1)*m])
			}
		}
	}
	return prev, post
}

// gramObjective returns ||X||^2 - 2<B, A> + <G, V> (clamped at 0) for A = X C^T in rows of
// Kp. Products are rounded before they are added (no FMA).
func (s *cStep) gramObjective(b, a, v []float64) float64 {
	m, k := s.m, s.k
	kp := paddedK(k)
	var cross float64
	for p := 0; p < k; p++ {
		var t float64
		for i, bv := range b[p*m : (p+1)*m] {
			t += float64(bv * a[i*kp+p])
		}
		cross += t
	}
	obj := s.sqX - float64(2*cross) + frob(s.g, v)
	if obj < 0 {
		return 0
	}
	return obj
}

func (s *cStep) lane(l int) {
	lo, hi := s.lanes[l], s.lanes[l+1]
	w, v := s.laneW[l], s.laneV[l]
	clear64(w)
	clear64(v)
	var prev, post float64
	var norms *normSums
	if s.norms {
		norms = &s.laneNorms[l]
		*norms = normSums{}
	}
	if s.form == FormResidual {
		prev, post = residualCols(s.x, lo, hi, s.b, s.g, s.c, w, v, s.scratch[l], s.k, s.l1, s.l2, s.laneSweeps(l), s.flag)
		norms.push(s.c[lo*s.k : hi*s.k])
	} else {
		gramLaneSweep(s.kern, s.x, s.k, lo, hi, s.bp, s.gneg, s.ginv, s.l1, s.c, w, v, s.scratch[l], &s.widening[l], norms, s.laneSweeps(l), s.flag)
	}
	s.laneObj[l] = [2]float64{prev, post}
}

// setAccel makes the C update of every later run make accel's further sweeps over each column
// (accel.go). The zero Accel is plain DID.
func (s *cStep) setAccel(a Accel) {
	s.sweeps = make([]*coefSweeps, len(s.lanes)-1)
	for l := range s.sweeps {
		s.sweeps[l] = newCoefSweeps(a, s.k)
	}
}

// setExtrapolation sets the extrapolation of the next run (Accel.Extrapolate): beta and the
// shard's previous plain coefficients, which the run replaces with its new ones.
func (s *cStep) setExtrapolation(beta float64, cprev []float64) {
	for _, sw := range s.sweeps {
		sw.beta, sw.cprev = beta, cprev
	}
}

// laneSweeps returns lane l's further C sweeps (nil: plain DID).
func (s *cStep) laneSweeps(l int) *coefSweeps {
	if s.sweeps == nil {
		return nil
	}
	return s.sweeps[l]
}

// coefNorms returns ||C||_1 and ||C||^2 of the C the last run left (s.norms set), the lanes'
// norms added in lane order: the bits of normsByLane(c).
func (s *cStep) coefNorms() (s1, sq float64) {
	for l := range s.laneNorms {
		a, q := s.laneNorms[l].result()
		s1 += a
		sq += q
	}
	return s1, sq
}

// normsByLane returns ||c||_1 and ||c||^2 as the lanes of a run compute them (coefNorms), on
// the calling goroutine: for the C a run starts from.
func (s *cStep) normsByLane(c []float64) (s1, sq float64) {
	for l := 0; l+1 < len(s.lanes); l++ {
		s.flag.poll()
		var n normSums
		n.push(c[s.lanes[l]*s.k : s.lanes[l+1]*s.k])
		a, q := n.result()
		s1 += a
		sq += q
	}
	return s1, sq
}

// addOuterLower adds c c^T to the lower triangle of the K x K row-major v.
func addOuterLower(v, c []float64, k int) {
	for p := 0; p < k; p++ {
		cp := c[p]
		if cp == 0 {
			continue
		}
		row := v[p*k : p*k+p+1]
		for q := range row {
			row[q] += float64(cp * c[q])
		}
	}
}

// residualCoef runs the paper's coordinate descent on one column's coefficients: e holds
// x_j - B c_j on entry and on return, with c_j updated in place. G = B^T B. With a penalty
// (l1, l2 not both 0) it minimizes ||x_j - B c_j||^2 + 2 l1 sum c_j + l2 ||c_j||^2 instead.
func residualCoef(e, b, g, cj []float64, m, k int, l1, l2 float64) {
	if l1 != 0 || l2 != 0 {
		residualCoefPenalized(e, b, g, cj, m, k, l1, l2)
		return
	}
	for p := 0; p < k; p++ {
		gpp := g[p*k+p]
		if !(gpp > 0) {
			continue
		}
		bp := b[p*m : (p+1)*m]
		old := cj[p]
		// c_p = max(0, b_p·(e + b_p c_p) / b_p·b_p); e -= b_p (c_p_new - c_p_old)
		nc := (dot(bp, e) + float64(gpp*old)) / gpp
		if nc < 0 {
			nc = 0
		}
		if d := nc - old; d != 0 {
			axpy(e, -d, bp)
		}
		cj[p] = nc
	}
}

// residualCoefPenalized is residualCoef's penalized update: with hessian h = G_pp + l2,
// c_p <- max(0, c_p - (l2 c_p + l1 - b_p·e) / h) = max(0, (b_p·e + G_pp c_p - l1) / h),
// scikit-learn's coordinate step on G + l2 I and B^T x - l1. A component with h = 0 (dead,
// no l2) keeps its value.
func residualCoefPenalized(e, b, g, cj []float64, m, k int, l1, l2 float64) {
	for p := 0; p < k; p++ {
		gpp := g[p*k+p]
		h := gpp + l2
		if !(h > 0) {
			continue
		}
		bp := b[p*m : (p+1)*m]
		old := cj[p]
		nc := (dot(bp, e) + float64(gpp*old) - l1) / h
		if nc < 0 {
			nc = 0
		}
		if d := nc - old; d != 0 {
			axpy(e, -d, bp)
		}
		cj[p] = nc
	}
}

// residualCoefSweeps is residualCoef followed, with sw set, by accelerated DID's further
// sweeps over the column (accel.go's stop rule on the column's steps; each sweep is
// residualCoef, so the residual form's arithmetic).
func residualCoefSweeps(e, b, g, cj []float64, m, k, j int, l1, l2 float64, sw *coefSweeps) {
	if sw == nil {
		residualCoef(e, b, g, cj, m, k, l1, l2)
		return
	}
	old := sw.old[:k]
	copy(old, cj)
	residualCoef(e, b, g, cj, m, k, l1, l2)
	var first float64
	for p, v := range cj {
		d := v - old[p]
		first = math.FMA(d, d, first)
	}
	thr := first * sw.eps2
	st := first
	for l := 0; l < sw.extra && st > thr; l++ {
		copy(old, cj)
		residualCoef(e, b, g, cj, m, k, l1, l2)
		st = 0
		for p, v := range cj {
			d := v - old[p]
			st = math.FMA(d, d, st)
		}
	}
	residualExtrapolate(e, b, cj, m, k, j, sw)
}

// residualExtrapolate is extrapolateCoefs on column j in the residual form: e = x_j - B c_j
// follows the moved coefficients.
func residualExtrapolate(e, b, cj []float64, m, k, j int, sw *coefSweeps) {
	if !sw.extrap {
		return
	}
	pj := sw.cprev[j*k : j*k+k]
	for p, v := range cj {
		n := math.FMA(sw.beta, v-pj[p], v)
		if n < 0 {
			n = 0
		}
		pj[p] = v
		cj[p] = n
		if d := n - v; d != 0 {
			axpy(e, -d, b[p*m:(p+1)*m])
		}
	}
}

// residualCol runs the residual-form update on one column: e holds x_j - B c_j on entry; on
// return c_j is updated, e = x_j - B c_j_new, W += e c^T and V += c c^T.
func residualCol(e, b, g, cj, w, v []float64, m, k, j int, l1, l2 float64, sw *coefSweeps) (prev, post float64) {
	prev = dot(e, e)
	residualCoefSweeps(e, b, g, cj, m, k, j, l1, l2, sw)
	post = dot(e, e)
	for p, cp := range cj {
		if cp != 0 {
			axpy(w[p*m:(p+1)*m], cp, e)
		}
	}
	addOuterLower(v, cj, k)
	return prev, post
}

// residualCols is the residual-form lane kernel: e_j = x_j - B c_j, then residualCol. The
// dense case has its own loop: a call on either branch of a shared loop costs the short
// columns of the paper's shapes about 70% more time (measured at M=5). It returns early
// (with partial sums) when the machine is interrupted. l1 and l2 are the penalty on C.
func residualCols(x Block, lo, hi int, b, g, c, w, v, e []float64, k int, l1, l2 float64, sw *coefSweeps, flag *interruptFlag) (prev, post float64) {
	m, _ := x.Dims()
	e = e[:m]
	if flag.big(4*m*k + k*k) {
		return residualColsBig(x, lo, hi, b, g, c, w, v, e, k, l1, l2, sw, flag)
	}
	span := flag.span(4*m*k+k*k, 1)
	if dense, ok := x.(*Dense); ok && dense.Data != nil {
		for j0 := lo; j0 < hi; j0 += span {
			if flag.stopped() {
				return prev, post
			}
			for j, j1 := j0, min(j0+span, hi); j < j1; j++ {
				copy(e, dense.Data[j*m:(j+1)*m])
				p0, p1 := residualFromColumn(e, b, g, c[j*k:(j+1)*k], w, v, m, k, j, l1, l2, sw)
				prev, post = prev+p0, post+p1
			}
		}
		return prev, post
	}
	for j0 := lo; j0 < hi; j0 += span {
		if flag.stopped() {
			return prev, post
		}
		for j, j1 := j0, min(j0+span, hi); j < j1; j++ {
			columnInto(x, j, e)
			p0, p1 := residualFromColumn(e, b, g, c[j*k:(j+1)*k], w, v, m, k, j, l1, l2, sw)
			prev, post = prev+p0, post+p1
		}
	}
	return prev, post
}

// residualColsBig is residualCols for columns of several blocks of work each (rank in the
// thousands): the same operations in the same order, looking at the flag before each column
// and between its passes over B.
func residualColsBig(x Block, lo, hi int, b, g, c, w, v, e []float64, k int, l1, l2 float64, sw *coefSweeps, flag *interruptFlag) (prev, post float64) {
	m := len(e)
	for j := lo; j < hi; j++ {
		if flag.stopped() {
			return prev, post
		}
		columnInto(x, j, e)
		cj := c[j*k : (j+1)*k]
		for p, cp := range cj {
			if cp != 0 {
				axpy(e, -cp, b[p*m:(p+1)*m])
			}
		}
		if flag.stopped() {
			return prev, post
		}
		p0 := dot(e, e)
		residualCoefSweeps(e, b, g, cj, m, k, j, l1, l2, sw)
		p1 := dot(e, e)
		if flag.stopped() {
			return prev, post
		}
		for p, cp := range cj {
			if cp != 0 {
				axpy(w[p*m:(p+1)*m], cp, e)
			}
		}
		addOuterLower(v, cj, k)
		prev, post = prev+p0, post+p1
	}
	return prev, post
}

// residualFromColumn turns e = x_j into x_j - B c_j and runs residualCol.
func residualFromColumn(e, b, g, cj, w, v []float64, m, k, j int, l1, l2 float64, sw *coefSweeps) (prev, post float64) {
	for p, cp := range cj {
		if cp != 0 {
			axpy(e, -cp, b[p*m:(p+1)*m])
		}
	}
	return residualCol(e, b, g, cj, w, v, m, k, j, l1, l2, sw)
}
