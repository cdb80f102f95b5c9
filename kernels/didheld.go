package kernels

import "math"

// DID with a held-out set and no missing values (Options.TestFraction > 0, Missing off): the
// held-out entries of sample j are the rows P_l of its pattern l = HeldOutPattern(seed, j)
// (heldout.go), so the samples of a pattern share their masked Gram matrices. With O the
// observed entries the objective is masked DID's (didmask.go), sum over (i, j) in O of
// (x_ij - b_i c_j)^2, and so are the updates: BCD's on the masked objective, so the iterates
// agree with masked DID's and BCD's to round-off. What changes is how the sums are formed. An
// iteration of shard s:
//
//  1. The patterns' Gram matrices, for each pattern l some sample of the shard takes:
//     S_l = sum_{i in P_l} b_i b_i^T (fma, rows in order, from 0: packed lower triangles) and
//     G_l = G - S_l, G = B^T B, when P_l is at most half of the rows and no diagonal entry of
//     G_l falls below maskCancel times G's; else G_l = sum_{i not in P_l} b_i b_i^T (fma,
//     rows in order). -G_l and 1/G_l,pp (G_l,pp + l2 with a penalty on C) are the update's
//     form. Patterns are independent, so they run in parallel without changing a bit:
//     O(L |P| K^2) for L patterns, about L F M K^2 / 2, instead of masked DID's K^2 for every
//     held-out entry.
//  2. One pass over X_o (X without its held-out entries) on the Gram lane's kernels, a lane of
//     columns at a time: h_j = B^T x_o,j (h_j - l1 with a penalty on C), then each column's
//     coordinate descent on its pattern's -G_l and 1/G_l,pp (step 2 of the Gram lane, one
//     column at a time), A = X_o C^T (steps 3 of the Gram lane), and per pattern
//     V_l = sum c_j c_j^T over the lane's columns of pattern l (fma, columns in order), and
//     At = X_t C^T over the stored held-out entries X_t (fma, columns in order; a held-out
//     zero adds nothing to At). At iteration 1 it also sums the objective of the initial
//     factors, ||x_o,j||^2 - 2 h_j.c_j + c_j^T G_l c_j per column, and their held-out error,
//     c_j^T S_l c_j - 2 sum_{i in T_j} x_ij b_i.c_j per column plus the held-out entries'
//     squared norm.
//  3. One allreduce of A (M x K), the L triangles V_l, At (M x K), the four norms of C_i
//     with a penalty on C, and three scalars (||X_o||^2 of the shard's columns, or with Form
//     residual the objective summed directly from each column's residual; the two sums of
//     iteration 1): 2 M K + L K(K+1)/2 + 3 values, against masked DID's
//     2 M K + M K(K+1) + 4 with a test set.
//  4. Every shard forms row i's V_i = V - sum_{l: i in P_l} V_l (V = sum_l V_l, in pattern
//     order; the patterns that hold row i in order), under maskCancel's rule, else the sum of
//     the V_l of the other patterns, in order; the objective of B_old and the new C is
//     ||X_o||^2 - 2<B, A> + sum_i b_i^T V_i b_i; and masked DID's B update (updateB, with
//     its accelerated sweeps) runs on A and the V_i.
//  5. The held-out error of the new factors is sum_i b_i^T Vt_i b_i - 2 b_i.At_i plus the
//     held-out entries' squared norm, Vt_i = sum_{l: i in P_l} V_l: an identity, like the Gram
//     form's objective, so it loses about eps ||X_t||^2 / error relative.
//
// Every sum is in an order fixed by the data, the patterns and the lanes (a function of the
// block's shape), and the per-column updates are the kernel path's, so the bits are the same
// on every kernel path and thread count, and a block stored as float32 gives the bits of its
// float64 values. The shard keeps no list of its held-out zeros: its memory is X_o, the
// stored held-out entries (12 bytes each) and L patterns of F M rows.

// didHeldLane is a column lane's work space and partial sums.
type didHeldLane struct {
	h, cs []float64 // a batch's h (Kp per column) and updated coefficients (Kp per column)
	cold  []float64 // a batch's coefficients before the update
	ws    widening
	a     []float64 // A = X_o C^T, column-major M x K (the column-lane kernels' layout)
	arow  []float64 // A in rows of Kp (the other kernels' layout)
	v     []float64 // C C^T (the kernels' by-product, unused)
	vp    []float64 // V_l of the lane's columns, L packed triangles
	at    []float64 // At = X_t C^T, in rows of Kp (step 3's layout)
	e     []float64 // residual-form scratch (M)
	// post is the residual form's objective; prev and prevT the sums of iteration 1.
	post, prev, prevT float64
}

// didHeld is the shard's work space.
type didHeld struct {
	e           *shardEnv
	sm          *shardMask
	m, n, k, kp int
	ll          int
	pool        *Pool
	kern        *gramKernels
	lanes       []int
	order       []int // laneOrder of lanes
	useCols     bool
	colsStep    int
	span        int
	big         bool
	g           []float64 // G = B^T B (K x K)
	bp          []float64 // B in rows of Kp
	brow        []float64 // B row-major (M x K)
	// used lists the patterns of the shard's columns, increasing; pneg and pinv hold each
	// pattern's -G_l and 1/G_l,pp (update form), ps its S_l (packed), at pattern l's place.
	used       []int
	pneg, pinv []float64
	ps, po     []float64 // S_l, and G_l when summed directly (packed)
	patFn      func(int)
	patLanes   []int // the used patterns in lanes
	lane       []*didHeldLane
	laneFn     func(int)
	rowLanes   []int
	rowFn      func(int)
	testFn     func(int)
	rowQuad    []float64 // b_i^T V_i b_i
	rowT       []float64 // b_i^T Vt_i b_i - 2 b_i.At_i
	rowScratch [][]float64
	// patSpan and rowSpan are the rows a pattern's Gram matrix and a row lane go between two
	// looks at the interrupt flag.
	patSpan, rowSpan int
	l1, l2           float64
	pen              penalty
	direct           bool
	first            bool // iteration 1: sum the initial factors' objective and held-out error
	cExtra           int
	eps2             float64
	sqXo             float64
	lay              didHeldLayout
	partial          []float64
	sum              []float64
	v                []float64 // V = sum_l V_l (packed)
	bs               *didMasked
}

// didHeldLayout places the parts of the payload.
type didHeldLayout struct {
	a, vp, at, norms, sq, prev, prevT, total int
}

func newDIDHeldLayout(m, k int, norms bool) didHeldLayout {
	y := didHeldLayout{a: 0, vp: m * k}
	n := m*k + HeldOutPatterns*lowerLen(k)
	y.at = n
	n += m * k
	y.norms = n
	if norms {
		n += didNormsLen
	}
	y.sq, y.prev, y.prevT = n, n+1, n+2
	y.total = n + 3
	return y
}

func newDIDHeld(e *shardEnv) *didHeld {
	sm := e.m.mask.sm
	m, n, k := e.rows, e.cols, e.k
	kp, ll := paddedK(k), lowerLen(k)
	pen := e.penalty()
	d := &didHeld{e: e, sm: sm, m: m, n: n, k: k, kp: kp, ll: ll, pool: e.spec.Pool,
		lanes: ColumnRanges(n, heldLaneCount(m, n, k)), g: make([]float64, k*k), bp: make([]float64, colsRows(m)*kp),
		brow: make([]float64, m*k), l1: pen.l1C, l2: pen.l2C, pen: pen,
		direct: e.spec.Form == FormResidual, cExtra: e.spec.Accel.cExtra(), eps2: e.spec.Accel.eps2(),
		rowLanes: rowLaneBounds(m), rowQuad: make([]float64, m), rowT: make([]float64, m),
		v: make([]float64, ll)}
	d.lay = newDIDHeldLayout(m, k, pen.coef())
	d.partial = make([]float64, d.lay.total)
	var seen [HeldOutPatterns]bool
	for _, p := range sm.pat {
		seen[p] = true
	}
	for l, s := range seen {
		if s {
			d.used = append(d.used, l)
		}
	}
	d.pneg = make([]float64, HeldOutPatterns*k*k)
	d.pinv = make([]float64, HeldOutPatterns*k)
	d.ps = make([]float64, HeldOutPatterns*ll)
	d.po = make([]float64, HeldOutPatterns*ll)
	for _, v := range sm.colSq {
		d.sqXo += v
	}
	d.kern, d.useCols, d.colsStep, d.span, d.big = maskedBatching(e, sm.x, (2+d.cExtra)*k*k+k*kp)
	d.order = laneOrder(sm.x, d.lanes, k)
	d.lane = make([]*didHeldLane, len(d.lanes)-1)
	for l := range d.lane {
		ls := &didHeldLane{h: make([]float64, gramBatchCols*kp), cs: make([]float64, gramBatchCols*kp),
			cold: make([]float64, gramBatchCols*k), a: make([]float64, m*k), v: make([]float64, k*kp),
			vp: make([]float64, HeldOutPatterns*ll), at: make([]float64, m*kp)}
		if !d.useCols {
			ls.arow = make([]float64, m*kp)
		}
		if d.direct {
			ls.e = make([]float64, m)
		}
		d.lane[l] = ls
	}
	d.rowScratch = make([][]float64, len(d.rowLanes)-1)
	for l := range d.rowScratch {
		d.rowScratch[l] = make([]float64, 2*k*k+ll)
	}
	d.patSpan = e.flag.span(ll, 1)
	d.rowSpan = e.flag.span((len(sm.held.of)/max(m, 1)+2)*ll+k*k, 1)
	d.bs = newMaskedBUpdate(e, false)
	d.bs.lay.a = d.lay.a // the B update reads A from the payload, the V_i from vrows
	d.bs.vrows = make([]float64, m*ll)
	d.patLanes = ColumnRanges(len(d.used), max(1, min(len(d.used), maxLanes)))
	d.patFn, d.laneFn, d.rowFn, d.testFn = d.patternLane, d.colLane, d.rowLane, d.testLane
	return d
}

func runDIDHeld(e *shardEnv, first int, initial float64) {
	ms := e.m.mask
	d := newDIDHeld(e)
	pen, lay := d.pen, d.lay
	e.state = nil
	var c1, c2 float64 // ||C_i||_1 and ||C_i||^2 of the C the next C update starts from
	if pen.coef() {
		c1, c2 = factorNorms(e.C, e.flag)
	}
	for it := first; ; it++ {
		d.first = it == 1
		partial := d.partial
		partial[lay.prev], partial[lay.prevT] = 0, 0
		if d.first && d.direct {
			// The objective of the initial factors, summed directly.
			partial[lay.prev] = maskedResidualSq(d.sm, e.B, e.C, d.k, d.pool)
			e.flag.poll()
		}
		d.cStep()
		if pen.coef() {
			norms := partial[lay.norms : lay.norms+didNormsLen]
			norms[0], norms[1] = c1, c2
			c1, c2 = factorNorms(e.C, e.flag)
			norms[2], norms[3] = c1, c2
		}
		sum := e.allReduce("did.partial", it, partial)
		d.sum = sum
		post := d.reducedRows()
		prev := sum[lay.prev]
		if pen.on() {
			var penC0, penC1 float64
			if pen.coef() {
				norms := sum[lay.norms : lay.norms+didNormsLen]
				penC0, penC1 = pen.coefValue(norms[0], norms[1]), pen.coefValue(norms[2], norms[3])
			}
			penB := pen.basisPenalty(e.B, e.flag)
			prev = prev + penC0 + penB
			post = post + penC1 + penB
		}
		if d.first {
			initial = prev
			ms.initialTest = max(sum[lay.prevT]+ms.totals.TestSqNorm, 0)
		}
		obj, _ := d.bs.updateB(sum, post, 0)
		ms.test = d.heldOutError()
		e.iterationDone(it, obj, initial)
	}
}

// cStep runs steps 1 and 2 and writes the shard's payload (but the norms of C).
func (d *didHeld) cStep() {
	b, flag := d.e.B, d.e.flag
	m, k := d.m, d.k
	gramCols(b, m, k, d.g, flag)
	packRows(d.bp, b, m, k)
	transpose(d.brow, b, m, k)
	d.pool.Run(len(d.patLanes)-1, d.patFn)
	flag.poll()
	d.pool.RunOrder(len(d.lane), d.order, d.laneFn)
	flag.poll()
	lay := d.lay
	p := d.partial
	a, vp, at := p[lay.a:lay.a+m*k], p[lay.vp:lay.vp+HeldOutPatterns*d.ll], p[lay.at:lay.at+m*k]
	var post, prev, prevT float64
	for l, ls := range d.lane {
		addInto(a, ls.a, l > 0)
		addInto(vp, ls.vp, l > 0)
		addRowsInto(at, ls.at, m, k, l > 0)
		post += ls.post
		prev += ls.prev
		prevT += ls.prevT
	}
	if d.direct {
		p[lay.sq] = post
	} else {
		p[lay.sq] = d.sqXo
	}
	if d.first {
		if !d.direct {
			p[lay.prev] = prev
		}
		p[lay.prevT] = prevT
	}
}

// patternLane forms the update's forms of the used patterns of lane l (step 1).
func (d *didHeld) patternLane(l int) {
	for u := d.patLanes[l]; u < d.patLanes[l+1]; u++ {
		if !d.patternForm(u) {
			return
		}
	}
}

// patternForm forms the update's form of the u-th used pattern (step 1); false when the
// machine was interrupted meanwhile.
func (d *didHeld) patternForm(u int) bool {
	l := d.used[u]
	k, kk, ll := d.k, d.k*d.k, d.ll
	rows := d.sm.held.rows[l]
	s := d.ps[l*ll : (l+1)*ll]
	clear64(s)
	flag := d.e.flag
	for t, i := range rows {
		if t%d.patSpan == 0 && flag.stopped() {
			return false
		}
		addOuterFMA(s, d.brow[int(i)*k:(int(i)+1)*k])
	}
	gneg, ginv := d.pneg[l*kk:(l+1)*kk], d.pinv[l*k:(l+1)*k]
	direct := 2*len(rows) > d.m
	if !direct {
		n := 0
		for p := 0; p < k; p++ {
			for q := 0; q <= p; q++ {
				v := s[n] - d.g[p*k+q]
				gneg[p*k+q], gneg[q*k+p] = v, v
				n++
			}
			if -gneg[p*k+p] < d.g[p*k+p]*maskCancel {
				direct = true
			}
		}
	}
	if direct {
		// G_l summed over the other rows: in a scratch triangle, then mirrored.
		o := d.po[l*ll : (l+1)*ll]
		clear64(o)
		t := 0
		for i := 0; i < d.m; i++ {
			if i%d.patSpan == 0 && flag.stopped() {
				return false
			}
			if t < len(rows) && int(rows[t]) == i {
				t++
				continue
			}
			addOuterFMA(o, d.brow[i*k:(i+1)*k])
		}
		n := 0
		for p := 0; p < k; p++ {
			for q := 0; q <= p; q++ {
				gneg[p*k+q], gneg[q*k+p] = -o[n], -o[n]
				n++
			}
		}
	}
	updateForm(gneg, ginv, d.l2)
	return true
}

// colLane runs step 2 on column lane l.
func (d *didHeld) colLane(l int) {
	ls := d.lane[l]
	m, k, kp, kk, ll := d.m, d.k, d.kp, d.k*d.k, d.ll
	flag := d.e.flag
	clear64(ls.a)
	clear64(ls.arow)
	clear64(ls.v)
	clear64(ls.cs)
	clear64(ls.vp)
	clear64(ls.at)
	ls.post, ls.prev, ls.prevT = 0, 0, 0
	x := d.sm.x
	c, kern, sm := d.e.C, d.kern, d.sm
	bt := maskedBatch{kern: kern, x: x, useCols: d.useCols}
	for j0, hi := d.lanes[l], d.lanes[l+1]; j0 < hi; {
		if flag.stopped() {
			return
		}
		j1 := maskedBatchEnd(x, d.useCols, d.colsStep, d.span, j0, hi)
		nb := j1 - j0
		h, cs := ls.h[:nb*kp], ls.cs[:nb*kp]
		bt.j0, bt.j1 = j0, j1
		bt.dots(d.bp, m, k, kp, &ls.ws, h)
		if d.first && !d.direct {
			// The initial factors' objective: ||x_o,j||^2 - 2 h_j.c_j + c_j^T G_l c_j.
			for u := 0; u < nb; u++ {
				j := j0 + u
				p := int(sm.pat[j])
				cj := c[j*k : (j+1)*k]
				var hc float64
				for q, cq := range cj {
					hc += float64(h[u*kp+q] * cq)
				}
				ls.prev += sm.colSq[j] - float64(2*hc) + d.patternQuad(p, cj)
			}
		}
		if d.first {
			// The initial factors' held-out error, but the entries' squared norm.
			for j := j0; j < j1; j++ {
				cj := c[j*k : (j+1)*k]
				ls.prevT += d.packedQuad(d.ps[int(sm.pat[j])*ll:], cj) - float64(2*d.storedCross(j, cj))
			}
		}
		subtractL1(h, d.l1, k, kp, nb)
		if d.big && flag.stopped() {
			return
		}
		for u := 0; u < nb; u++ {
			j := j0 + u
			p := int(sm.pat[j])
			cj := c[j*k : (j+1)*k]
			gneg, ginv := d.pneg[p*kk:(p+1)*kk], d.pinv[p*k:(p+1)*k]
			hu, csu := h[u*kp:(u+1)*kp], cs[u*kp:(u+1)*kp]
			if d.cExtra > 0 {
				move(ls.cold[u*k:(u+1)*k], cj)
			}
			kern.update(hu, csu, cj, gneg, ginv, k, kp, 1)
			if d.cExtra > 0 {
				kern.sweeps(hu, csu, cj, ls.cold[u*k:(u+1)*k], gneg, ginv, k, kp, 1, d.cExtra, d.eps2)
			}
			addOuterFMA(ls.vp[p*ll:(p+1)*ll], cj)
			if d.direct {
				ls.post += sm.residualSq(j, d.e.B, cj, ls.e)
			}
		}
		if d.big && flag.stopped() {
			return
		}
		// At += x_t,j c_j^T over the batch's stored held-out entries, columns and entries in
		// order: step 3's kernel on the held-out lists (rows of kp, unpadded in cStep).
		kern.accSparseA(kp, sm.uptr[j0:j1+1], sm.urow, sm.uval, cs, ls.at)
		bt.acc(m, k, kp, cs, ls.a, ls.arow, ls.v, false)
		j0 = j1
	}
	if !d.useCols {
		unpackRows(ls.a, ls.arow, m, k)
	}
}

// patternQuad returns c^T G_l c with G_l pattern l's masked Gram matrix (without the L2
// penalty the update form adds to its diagonal): products rounded, added row by row.
func (d *didHeld) patternQuad(l int, c []float64) float64 {
	k := d.k
	gneg := d.pneg[l*k*k : (l+1)*k*k]
	var s float64
	for p := 0; p < k; p++ {
		var t float64
		for q, cq := range c {
			g := -gneg[p*k+q]
			if p == q {
				g -= d.l2
			}
			t += float64(g * cq)
		}
		s += float64(c[p] * t)
	}
	return s
}

// packedQuad returns c^T S c for S a packed lower triangle: products rounded, added row by
// row, each off-diagonal product twice.
func (d *didHeld) packedQuad(s, c []float64) float64 {
	var r float64
	n := 0
	for p, cp := range c {
		var t float64
		for q, cq := range c[:p] {
			t += float64(s[n+q] * cq)
		}
		n += p
		r += float64(cp*float64(2*t)) + float64(float64(cp*s[n])*cp)
		n++
	}
	return r
}

// storedCross returns sum over the stored held-out entries (i, j) of column j of x_ij b_i.c_j,
// rows in order, b_i.c_j by fma over the components.
func (d *didHeld) storedCross(j int, cj []float64) float64 {
	sm, k := d.sm, d.k
	var s float64
	for t := sm.uptr[j]; t < sm.uptr[j+1]; t++ {
		bi := d.brow[int(sm.urow[t])*k : (int(sm.urow[t])+1)*k]
		var e float64
		for q, cq := range cj {
			e = math.FMA(bi[q], cq, e)
		}
		s += float64(sm.uval[t] * e)
	}
	return s
}

// reducedRows runs step 4 on the reduced payload: V, each row's V_i (into the B update's
// rows), and returns the objective of B_old and the new C.
func (d *didHeld) reducedRows() float64 {
	ll := d.ll
	vp := d.sum[d.lay.vp : d.lay.vp+HeldOutPatterns*ll]
	clear64(d.v)
	for l := 0; l < HeldOutPatterns; l++ {
		for q, x := range vp[l*ll : (l+1)*ll] {
			d.v[q] += x
		}
	}
	d.pool.Run(len(d.rowLanes)-1, d.rowFn)
	d.e.flag.poll()
	if d.direct {
		return d.sum[d.lay.sq]
	}
	m, k := d.m, d.k
	cross := basisCross(d.e.B, d.sum[d.lay.a:d.lay.a+m*k], m, k)
	var quad float64
	for _, q := range d.rowQuad {
		quad += q
	}
	return max(d.sum[d.lay.sq]-float64(2*cross)+quad, 0)
}

// rowLane forms V_i for the rows of row lane l, and b_i^T V_i b_i (B_old).
func (d *didHeld) rowLane(l int) {
	k, ll, m := d.k, d.ll, d.m
	set := d.sm.held
	vp := d.sum[d.lay.vp : d.lay.vp+HeldOutPatterns*ll]
	sc := d.rowScratch[l]
	vi, bi := sc[:k*k], sc[k*k:k*k+k]
	out := d.bs.vrows
	flag := d.e.flag
	for i := d.rowLanes[l]; i < d.rowLanes[l+1]; i++ {
		if (i-d.rowLanes[l])%d.rowSpan == 0 && flag.stopped() {
			return
		}
		dst := out[i*ll : (i+1)*ll]
		pats := set.patternsOf(i)
		direct := 2*len(pats) > HeldOutPatterns
		if !direct {
			copy(dst, d.v)
			for _, p := range pats {
				for q, x := range vp[int(p)*ll : (int(p)+1)*ll] {
					dst[q] -= x
				}
			}
			n := 0
			for p := 0; p < k; p++ {
				n += p
				if dst[n] < d.v[n]*maskCancel {
					direct = true
				}
				n++
			}
		}
		if direct {
			clear64(dst)
			t := 0
			for p := 0; p < HeldOutPatterns; p++ {
				if t < len(pats) && int(pats[t]) == p {
					t++
					continue
				}
				for q, x := range vp[p*ll : (p+1)*ll] {
					dst[q] += x
				}
			}
		}
		if !d.direct {
			unpackLower(vi, dst, k)
			for p := range bi {
				bi[p] = d.e.B[p*m+i]
			}
			d.rowQuad[i] = quadForm(vi, bi, k)
		}
	}
}

// heldOutError returns step 5's held-out error of the factors after the B update.
func (d *didHeld) heldOutError() float64 {
	d.pool.Run(len(d.rowLanes)-1, d.testFn)
	d.e.flag.poll()
	t := d.e.m.mask.totals.TestSqNorm
	for _, r := range d.rowT {
		t += r
	}
	return max(t, 0)
}

// testLane sets rowT for the rows of row lane l: b_i^T Vt_i b_i - 2 b_i.At_i.
func (d *didHeld) testLane(l int) {
	k, ll, m := d.k, d.ll, d.m
	set := d.sm.held
	vp := d.sum[d.lay.vp : d.lay.vp+HeldOutPatterns*ll]
	at := d.sum[d.lay.at : d.lay.at+m*k]
	sc := d.rowScratch[l]
	bi, vt := sc[k*k:k*k+k], sc[k*k+k:k*k+k+ll]
	flag := d.e.flag
	for i := d.rowLanes[l]; i < d.rowLanes[l+1]; i++ {
		if (i-d.rowLanes[l])%d.rowSpan == 0 && flag.stopped() {
			return
		}
		for p := range bi {
			bi[p] = d.e.B[p*m+i]
		}
		clear64(vt)
		for _, p := range set.patternsOf(i) {
			for q, x := range vp[int(p)*ll : (int(p)+1)*ll] {
				vt[q] += x
			}
		}
		var a float64
		for p, bp := range bi {
			a += float64(bp * at[i*k+p])
		}
		d.rowT[i] = d.packedQuad(vt, bi) - float64(2*a)
	}
}

// heldLaneCount is the number of column lanes of didHeld: laneCount's, and fewer when the
// lanes' partial sums (A in two layouts, At and the patterns' triangles) would exceed
// lanePartialBudget floats in total.
func heldLaneCount(m, n, k int) int {
	lanes := laneCount(m, n, k)
	per := 2*m*k + m*paddedK(k) + HeldOutPatterns*lowerLen(k)
	if lanes*per > lanePartialBudget {
		lanes = max(1, lanePartialBudget/per)
	}
	return lanes
}
