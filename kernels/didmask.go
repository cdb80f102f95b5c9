package kernels

// Masked DID (see "Missing values" in doc.go). With O the observed entries the objective is
// sum over (i, j) in O of (x_ij - b_i c_j)^2, b_i row i of B and c_j column j of C. An
// iteration of shard s:
//
//  1. C step, column by column: coordinate descent on min_{c >= 0} c^T G_j c - 2 h_j^T c with
//     G_j = sum_{i in O_j} b_i b_i^T, the Gram matrix of B's observed rows (maskedGram: G
//     minus the unobserved rows' outer products, or the direct sum), and h_j = B^T x_o,j
//     (X_o has zeros where X is unobserved). The objective of the column before and after is
//     ||x_o,j||^2 - 2 h_j.c_j + c_j^T G_j c_j.
//  2. The per-row sums of the B step, which are row i's normal equations:
//     A_i = sum_{j in O_i} x_ij c_j (A = X_o C^T) and V_i = sum_{j in O_i} c_j c_j^T
//     (maskedRowGram: C C^T minus the unobserved columns' outer products, or the direct sum).
//  3. One allreduce of A (M x K), the M lower triangles V_i, with a test set the held-out
//     sums Rt_i = sum_{j in T_i} r_ij c_j, r_ij = x_ij - b_i c_j the held-out residual of
//     B_old and the new C, and Vt_i = sum_{j in T_i} c_j c_j^T (another M x K and M
//     triangles), with a penalty on C the four norms of C_i (as DID's), with a test set the
//     held-out errors sum r_ij^2 and that of the factors before the iteration (iteration 1;
//     0 later), and the two objective scalars: M K + M K(K+1)/2 + 2 values, twice the
//     matrices (and 2 more values) with a test set.
//  4. Every shard updates B row by row: w_i = A_i - V_i b_i, then for p = 1..K
//     b_ip <- max(0, b_ip + (w_ip - sum_{q<p} V_i,pq db_iq) / V_i,pp) (unchanged when
//     V_i,pp = 0), the row form of DID's update, and the objective changes by
//     -2 db_i.w_i + db_i^T V_i db_i. The penalty on B shifts w_i and V_i as in DID. The
//     held-out error changes likewise, by -2 db_i.Rt_i + db_i^T Vt_i db_i, from the directly
//     summed sum r_ij^2: no cancellation but that of the change.
//
// The updates are BCD's on the masked objective (bcdmask.go) in the same order, so the
// iterates agree to round-off. Still one allreduce per iteration. The C step is always the
// Gram form's, B^T X_o and X_o C^T on the kernel paths of blockOps; Options.Form only
// chooses how a column's objective is summed: from the Gram identity above (gram, auto; its
// cancellation costs about eps ||x_o||^2 / objective relative, as the unmasked Gram form's),
// or directly from the column's residual on the observed rows (residual: 2 M K more
// operations per column).

// didMaskLayout places the parts of masked DID's payload.
type didMaskLayout struct {
	a, v   int // A (M x K column-major), the V_i (M packed triangles)
	at, vt int // the held-out Rt and Vt (-1 without a test set)
	norms  int // the four norms of C_i (with a penalty on C)
	// prevT and prevT+1: the held-out errors of the factors before the iteration and of
	// B_old with the new C (-1 without a test set).
	prevT      int
	prev, post int
	total      int
}

func newDIDMaskLayout(m, k int, test, norms bool) didMaskLayout {
	l := lowerLen(k)
	y := didMaskLayout{a: 0, v: m * k, at: -1, vt: -1, prevT: -1}
	n := m*k + m*l
	if test {
		y.at, y.vt = n, n+m*k
		n += m*k + m*l
	}
	y.norms = n
	if norms {
		n += didNormsLen
	}
	if test {
		y.prevT = n
		n += 2
	}
	y.prev, y.post = n, n+1
	y.total = n + 2
	return y
}

// didMasked is a masked DID shard's work space.
type didMasked struct {
	e       *shardEnv
	sm      *shardMask
	m, n, k int
	pool    *Pool
	ops     *blockOps
	lanes   []int // column lanes
	rows    []int // row lanes
	g       []float64
	brow    []float64       // B row-major (M x K)
	h       []float64       // B^T X_o (K x n)
	vs      []float64       // C C^T (K x K)
	laneG   []*outerScratch // per column lane
	laneRS  []*outerScratch // per row lane
	laneGj  [][]float64     // per column lane: G_j
	laneObj [][4]float64
	laneRow [][]float64
	rowObj  []float64
	rowTest []float64
	rt      []float64 // the held-out residuals of B_old and the new C, by entry of the column lists
	l1, l2  float64   // the penalty on C
	// direct: sum each column's objective from its residual (FormResidual), laneE its
	// scratch.
	direct bool
	laneE  [][]float64
	pen    penalty
	lay    didMaskLayout
	test   bool
	// wantPrevT: the C step also sums the held-out error of the factors it starts from.
	wantPrevT bool
	partial   []float64
	sum       []float64 // the reduced payload during the B update
	colFn     func(int)
	rowFn     func(int)
	bFn       func(int)
}

func runDIDMasked(e *shardEnv, first int, initial float64) {
	ms := e.m.mask
	sm := ms.sm
	m, n, k := e.rows, e.cols, e.k
	pen := e.penalty()
	d := &didMasked{e: e, sm: sm, m: m, n: n, k: k, pool: e.spec.Pool, ops: newBlockOps(sm.x, k, e.spec.Pool, e.flag),
		lanes: laneBounds(sm.x, k), rows: rowLaneBounds(m), g: make([]float64, k*k), brow: make([]float64, m*k),
		h: make([]float64, k*n), vs: make([]float64, k*k), rowObj: make([]float64, m), rowTest: make([]float64, m),
		l1: pen.l1C, l2: pen.l2C, pen: pen, test: sm.test}
	d.lay = newDIDMaskLayout(m, k, d.test, pen.coef())
	d.partial = make([]float64, d.lay.total)
	nl := len(d.lanes) - 1
	d.laneG = make([]*outerScratch, nl)
	d.laneGj = make([][]float64, nl)
	d.laneObj = make([][4]float64, nl)
	if e.spec.Form == FormResidual {
		d.direct = true
		d.laneE = make([][]float64, nl)
		for l := range d.laneE {
			d.laneE[l] = make([]float64, m)
		}
	}
	if d.test {
		d.rt = make([]float64, len(sm.urow))
	}
	for l := range d.laneG {
		d.laneG[l] = newOuterScratch(k)
		d.laneGj[l] = make([]float64, k*k)
	}
	d.laneRow = make([][]float64, len(d.rows)-1)
	d.laneRS = make([]*outerScratch, len(d.rows)-1)
	for l := range d.laneRow {
		d.laneRow[l] = make([]float64, 2*k*k+4*k)
		d.laneRS[l] = newOuterScratch(k)
	}
	d.colFn, d.rowFn, d.bFn = d.colLane, d.rowLane, d.bLane
	e.state = nil
	var c1, c2 float64 // ||C_i||_1 and ||C_i||^2 of the C the next C update starts from
	if pen.coef() {
		c1, c2 = factorNorms(e.C, e.flag)
	}
	lay := d.lay
	for it := first; ; it++ {
		prev, post, prevT, postT := d.cStep(d.test && it == 1)
		partial := d.partial
		if pen.coef() {
			norms := partial[lay.norms : lay.norms+didNormsLen]
			norms[0], norms[1] = c1, c2
			c1, c2 = factorNorms(e.C, e.flag)
			norms[2], norms[3] = c1, c2
		}
		d.rowSums()
		if d.test {
			partial[lay.prevT], partial[lay.prevT+1] = prevT, postT
		}
		partial[lay.prev], partial[lay.post] = prev, post
		sum := e.allReduce("did.partial", it, partial)
		prev, post = sum[lay.prev], sum[lay.post]
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
		if it == 1 {
			initial = prev
			if d.test {
				ms.initialTest = max(sum[lay.prevT], 0)
			}
		}
		var postTest float64
		if d.test {
			postTest = sum[lay.prevT+1]
		}
		obj, test := d.updateB(sum, post, postTest)
		ms.test = test
		e.iterationDone(it, obj, initial)
	}
}

// cStep updates every column of C and returns the shard's objective before and after, with
// wantPrevT the held-out error before and with a test set that after (of B_old and the new
// C).
func (d *didMasked) cStep(wantPrevT bool) (prev, post, prevT, postT float64) {
	b, flag := d.e.B, d.e.flag
	gramCols(b, d.m, d.k, d.g, flag)
	transpose(d.brow, b, d.m, d.k)
	d.ops.btx(b, d.h)
	d.wantPrevT = wantPrevT
	d.pool.Run(len(d.lanes)-1, d.colFn)
	flag.poll()
	for _, o := range d.laneObj {
		prev += o[0]
		post += o[1]
		prevT += o[2]
		postT += o[3]
	}
	return prev, post, prevT, postT
}

func (d *didMasked) colLane(l int) {
	k, flag := d.k, d.e.flag
	gj := d.laneGj[l]
	var prev, post, prevT, postT float64
	span := flag.span(4*k*k+k, 1)
	for j0, hi := d.lanes[l], d.lanes[l+1]; j0 < hi; j0 += span {
		if flag.stopped() {
			return
		}
		for j, j1 := j0, min(j0+span, hi); j < j1; j++ {
			p0, p1, pt0, pt1 := d.column(l, j, gj)
			prev, post, prevT, postT = prev+p0, post+p1, prevT+pt0, postT+pt1
		}
	}
	d.laneObj[l] = [4]float64{prev, post, prevT, postT}
}

// column runs the C step on column j of lane l (gj is scratch for G_j).
func (d *didMasked) column(l, j int, gj []float64) (prev, post, prevT, postT float64) {
	m, k, sm := d.m, d.k, d.sm
	cj, hj := d.e.C[j*k:(j+1)*k], d.h[j*k:(j+1)*k]
	g := d.g
	if lo, hi := sm.unobserved(j); hi > lo {
		maskedGram(gj, d.g, d.brow, sm.urow[lo:hi], m, k, d.laneG[l])
		g = gj
		if d.wantPrevT {
			prevT = heldOutSq(sm, d.e.B, d.e.C, k, j, j+1)
		}
	}
	sq := sm.colSq[j]
	if d.direct {
		prev = d.columnResidual(j, cj, d.laneE[l])
	} else {
		prev = sq - float64(2*dot(hj, cj)) + quadForm(g, cj, k)
	}
	l1, l2 := d.l1, d.l2
	for p := 0; p < k; p++ {
		gpp := g[p*k+p]
		hh := gpp + l2
		if !(hh > 0) {
			continue
		}
		r := hj[p]
		for q, gq := range g[p*k : (p+1)*k] {
			r -= float64(gq * cj[q])
		}
		nc := (r + float64(gpp*cj[p]) - l1) / hh
		if nc < 0 {
			nc = 0
		}
		cj[p] = nc
	}
	if d.direct {
		post = d.columnResidual(j, cj, d.laneE[l])
	} else {
		post = sq - float64(2*dot(hj, cj)) + quadForm(g, cj, k)
	}
	if d.test {
		lo, hi := sm.unobserved(j)
		for t := lo; t < hi; t++ {
			v := sm.uval[t]
			if v != v {
				continue
			}
			i := int(sm.urow[t])
			r := v - dot(d.brow[i*k:(i+1)*k], cj)
			d.rt[t] = r
			postT += float64(r * r)
		}
	}
	return prev, post, prevT, postT
}

// columnResidual returns ||x_o,j - B c_j||^2 over the observed rows of column j (e is
// scratch of length M).
func (d *didMasked) columnResidual(j int, cj, e []float64) float64 {
	m, b := d.m, d.e.B
	columnInto(d.sm.x, j, e)
	for p, cp := range cj {
		if cp != 0 {
			axpy(e, -cp, b[p*m:(p+1)*m])
		}
	}
	d.sm.zeroUnobserved(e, j)
	return dot(e, e)
}

// rowSums writes A, the V_i and the held-out sums of the C just updated into the payload.
func (d *didMasked) rowSums() {
	d.ops.xct(d.e.C, d.partial[d.lay.a:d.lay.a+d.m*d.k])
	d.ops.cct(d.e.C, d.vs)
	d.pool.Run(len(d.rows)-1, d.rowFn)
	d.e.flag.poll()
}

func (d *didMasked) rowLane(l int) {
	m, n, k, sm, flag := d.m, d.n, d.k, d.sm, d.e.flag
	c := d.e.C
	lay := d.lay
	ll := lowerLen(k)
	at := d.laneRow[l][:k]
	sc := d.laneRS[l]
	span := flag.span(k*k, 1)
	for i0, hi := d.rows[l], d.rows[l+1]; i0 < hi; i0 += span {
		if flag.stopped() {
			return
		}
		for i, i1 := i0, min(i0+span, hi); i < i1; i++ {
			lo, up := sm.rptr[i], sm.rptr[i+1]
			maskedRowGram(d.partial[lay.v+i*ll:lay.v+(i+1)*ll], d.vs, c, sm.rcol[lo:up], n, k, sc)
			if !d.test {
				continue
			}
			// Rt_i and Vt_i over the row's held-out entries (not the missing ones).
			t := lo
			next := func() (int, float64, bool) {
				for ; t < up; t++ {
					if v := sm.rval[t]; v == v {
						j, r := int(sm.rcol[t]), d.rt[sm.rent[t]]
						t++
						return j, r, true
					}
				}
				return 0, 0, false
			}
			weightedOuterSum(d.partial[lay.vt+i*ll:lay.vt+(i+1)*ll], at, c, k, next, sc)
			for p, a := range at {
				d.partial[lay.at+p*m+i] = a
			}
		}
	}
}

// updateB runs the B update on the reduced payload and returns the objective after it (post
// is the objective of B_old with the new C, penalties included) and the held-out error
// (postTest that of B_old with the new C).
func (d *didMasked) updateB(sum []float64, post, postTest float64) (obj, test float64) {
	d.sum = sum
	d.pool.Run(len(d.rows)-1, d.bFn)
	d.e.flag.poll()
	obj = post
	for _, r := range d.rowObj {
		obj += r
	}
	if d.test {
		test = postTest
		for _, r := range d.rowTest {
			test += r
		}
		test = max(test, 0)
	}
	return obj, test
}

func (d *didMasked) bLane(l int) {
	m, k, flag := d.m, d.k, d.e.flag
	b, sum, lay := d.e.B, d.sum, d.lay
	ll := lowerLen(k)
	s := d.laneRow[l]
	vi, vt := s[:k*k], s[k*k:2*k*k]
	bi, w, db := s[2*k*k:2*k*k+k], s[2*k*k+k:2*k*k+2*k], s[2*k*k+2*k:2*k*k+3*k]
	l1B, l2B := d.pen.l1B, d.pen.l2B
	basis := d.pen.basis()
	span := flag.span(3*k*k, 1)
	for i0, hi := d.rows[l], d.rows[l+1]; i0 < hi; i0 += span {
		if flag.stopped() {
			return
		}
		for i, i1 := i0, min(i0+span, hi); i < i1; i++ {
			unpackLower(vi, sum[lay.v+i*ll:lay.v+(i+1)*ll], k)
			for p := range bi {
				bi[p] = b[p*m+i]
			}
			// w = A_i - V_i b_i
			for p := range w {
				r := sum[lay.a+p*m+i]
				for q, vq := range vi[p*k : (p+1)*k] {
					r -= float64(vq * bi[q])
				}
				w[p] = r
			}
			if basis {
				for p, bp := range bi {
					w[p] = w[p] - float64(l2B*bp) - l1B
				}
				shiftGram(vi, k, l2B)
			}
			for p := 0; p < k; p++ {
				vpp := vi[p*k+p]
				if !(vpp > 0) {
					db[p] = 0
					continue
				}
				num := w[p]
				for q, vq := range vi[p*k : p*k+p] {
					num -= float64(vq * db[q])
				}
				nb := bi[p] + num/vpp
				if nb < 0 {
					nb = 0
				}
				db[p] = nb - bi[p]
				bi[p] = nb
			}
			d.rowObj[i] = quadForm(vi, db, k) - float64(2*dot(db, w))
			for p, bp := range bi {
				b[p*m+i] = bp
			}
			if d.test {
				// The held-out error changes by db^T Vt_i db - 2 db.Rt_i.
				unpackLower(vt, sum[lay.vt+i*ll:lay.vt+(i+1)*ll], k)
				var a float64
				for p, dp := range db {
					a += float64(dp * sum[lay.at+p*m+i])
				}
				d.rowTest[i] = quadForm(vt, db, k) - float64(2*a)
			}
		}
	}
}
