package kernels

import (
	"math"
	"slices"
)

// Masked DID (see "Missing values" in doc.go), which runs with missing values (Options.Missing);
// with a held-out set alone DID runs didheld.go's algorithm. With O the observed entries the objective is
// sum over (i, j) in O of (x_ij - b_i c_j)^2, b_i row i of B and c_j column j of C. An
// iteration of shard s makes one pass over X_o (X with zeros where it is unobserved) on the
// Gram lane's kernels (gramlane.go), a lane of columns at a time and a batch of the lane's
// columns at a time:
//
//  1. Step 1 of the Gram lane: h_j = B^T x_o,j (h_j - l1 with a penalty on C).
//  2. The C step: coordinate descent on min_{c >= 0} c^T G_j c - 2 h_j^T c with
//     G_j = sum_{i in O_j} b_i b_i^T, the Gram matrix of B's observed rows, by step 2 of the
//     Gram lane: fma with -G_j and 1/G_j,pp (G_j + l2 I with a penalty on C). A column
//     without unobserved entries has G_j = G = B^T B and is updated with the others of its
//     batch on G. A column with some gets its own G_j (columnGram): -G_j is -G plus b_i b_i^T
//     for each of its unobserved rows in row order, by fma (the Gram lane's step 4 from -G),
//     when those are at most half and no diagonal entry of G_j falls below maskCancel times
//     G's; else G_j is the sum of its observed rows' b_i b_i^T, by fma in row order, from 0.
//     One to three rows come from tables of B's rows made once per iteration (one row's -G_j
//     whole, in the update's form); more go to the kernel path's indexed step 4 (accVIdx,
//     gramidx.go), which reads them from B's rows of Kp in place, V in registers: about
//     3 ns per unobserved entry at K = 10 (AVX-512), the bulk of the masking's cost.
//     1/G_j,pp is correctly rounded. Columns are independent, so the order and the grouping
//     in which they are updated change no bit.
//  3. For each unobserved entry (i, j), columns in order and rows in order: with a test set
//     and a held-out entry, e = b_i.c_j (fma over the components in order, from 0),
//     r_ij = x_ij - e and postT, the held-out error, gets r^2 (by fma, in four partial sums
//     by the entry's index mod 4, added as (s0 + s1) + (s2 + s3) at the end of the lane);
//     then the entry's column joins row i's sums, which a rowStage forms on the Gram lane's
//     steps: S_i = sum c_j c_j^T (step 4: fma, columns in order), Rt_i = sum r_ij c_j (step
//     3 on a one-row block) over the held-out entries and, for a row that also has missing
//     entries, Vt_i = sum c_j c_j^T over its held-out ones (without missing entries Vt_i is
//     S_i). A rowStage keeps only the column indices j (and weights r_ij) of a row's chunk and
//     flushes it on the indexed kernels (accVIdx, accAIdx), which read the c_j from C in
//     place.
//  4. Steps 3 and 4 of the Gram lane: A = X_o C^T and V = C C^T.
//
// A lane's sums run over its columns in order and the lanes' sums are added in lane order.
// Without a test set and with C of at most didMaskTuning.rowPassBytes (it stays in the cache), or
// when the lanes' row sums would take more than didMaskTuning.laneBudget floats, the lanes keep no
// row sums and the row pass forms the same lane partials from the row lists instead, with
// the same operations: a lane's part of a row's list is already the column list the indexed
// kernel takes, so it costs no gathering (held-out residuals are computed again, by the same
// operations). Then:
//
//  5. The per-row sums of the B step, row i's normal equations: A_i (row i of A) and
//     V_i = sum_{j in O_i} c_j c_j^T: V - S_i when row i's unobserved entries are at most
//     half of the shard's columns and no diagonal entry falls below maskCancel times V's,
//     else the direct sum over its observed columns (fma, columns in order).
//  6. The objective of B_old and the new C from the shard's identity
//     ||X_o||^2 - 2<B, A> + sum_i b_i^T V_i b_i (||X_o||^2 the columns' squared norms added
//     in order; clamped at 0; its cancellation costs about eps ||X_o||^2 / objective
//     relative, as the unmasked Gram form's), or with Form residual summed directly from each
//     column's residual on its observed rows (2 M K more operations per column). The
//     objective of the factors before the iteration is needed at iteration 1 only (later it
//     is the last iteration's): it is summed directly then, and so is their held-out error.
//  7. One allreduce of A (M x K), the M lower triangles V_i, with a test set the held-out
//     sums Rt_i and Vt_i (another M x K and M triangles), with a penalty on C the four norms
//     of C_i (as DID's), with a test set the held-out errors postT and that of the factors
//     before the iteration (iteration 1; 0 later), and the two objective scalars: M K +
//     M K(K+1)/2 + 2 values, twice the matrices (and 2 more values) with a test set.
//  8. Every shard updates B row by row: w_i = A_i - V_i b_i, then for p = 1..K
//     b_ip <- max(0, b_ip + (w_ip - sum_{q<p} V_i,pq db_iq) / V_i,pp) (unchanged when
//     V_i,pp = 0), the row form of DID's update, and the objective changes by
//     -2 db_i.w_i + db_i^T V_i db_i. The penalty on B shifts w_i and V_i as in DID. The
//     held-out error changes likewise, by -2 db_i.Rt_i + db_i^T Vt_i db_i, from the directly
//     summed postT: no cancellation but that of the change.
//
// Accelerated (Options.Accel, see "Accelerated DID" in accel.go): in step 2 each column
// gets up to CSweeps - 1 further sweeps right after its first, on the form its first took (G
// for a column without unobserved entries, its own G_j otherwise) and the same h_j, by the
// kernel path's sweeps (sweepCoefsGo's operations and stop rule, per column); everything
// after step 2 reads the final C. In step 8 every row of B then gets further sweeps on its own
// V_i and w_i (penalty-shifted) with sweepBasis's arithmetic, the step db_i now the total
// change from B_old: b_ip <- max(0, b_ip + (w_ip - sum_q V_i,pq db_iq) / V_i,pp). Whether
// another sweep runs is one decision for all of B, sweepBasis's rule on the squared norms of
// the sweeps' steps, each the rows' partials (fma over the components) added in row order,
// all replicated values, so every shard takes the same decisions whatever the lanes. The
// objective's and the held-out error's changes are the identities above with the total db_i,
// so they stay exact. Still one allreduce per iteration.
//
// The updates are BCD's on the masked objective (bcdmask.go) in the same order, so the
// iterates agree to round-off. Still one allreduce per iteration. Every sum is in an order
// fixed by the data and the lanes (a function of the block's shape), and every kernel path
// makes the Gram lane's operations, so the bits are the same on every kernel path, thread
// count, batch and chunk size; a held-out entry is exactly a missing one for the fit; and
// a block stored as float32 gives the bits of its float64 values.

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

// didMaskTuning are masked DID's internal choices, which depend on the shape only and give
// the same bits either way; a run takes didMaskDefaults, and tests move them (through
// Options.maskTuning) to check that every choice gives the same bits.
type didMaskTuning struct {
	// laneBudget bounds the floats of the lanes' row sums (S_i, and with a test set Rt_i and
	// Vt_i, for every row, in every lane). Beyond it the lanes keep none and the row pass sums
	// the same lane partials from the row lists.
	laneBudget int
	// rowPassBytes: without a test set, when C (N K floats) takes at most this many bytes, the
	// row pass sums the S_i from the row lists, reading the c_j from C at random (C stays in
	// the cache), instead of the lanes gathering them by row as they go, which costs a
	// scattered store per unobserved entry; a larger C, or a test set (whose residuals the
	// lanes compute where c_j is at hand), is read where the lanes just wrote it.
	rowPassBytes int
	// rowSumScalar: rowSum sums n rows in Go when n K(K+1)/2 is at most this, else on the
	// kernel path (the same operations).
	rowSumScalar int
	// tableBudget bounds M K^2, the size of masked DID's tables of B's rows; beyond it
	// columnGram forms every G_j (the same values).
	tableBudget int
}

// didMaskDefaults are the choices of every run (Options.maskTuning nil).
var didMaskDefaults = didMaskTuning{laneBudget: lanePartialBudget, rowPassBytes: 8 << 20, rowSumScalar: 64, tableBudget: 1 << 20}

// didMaskRowBlock is the most rows the row pass sums together, column lane by column lane
// (without a test set).
const didMaskRowBlock = 64

// didMaskLane is a column lane's work space and partial sums.
type didMaskLane struct {
	h, cs []float64 // a batch's h (Kp per column) and updated coefficients (Kp per column)
	cold  []float64 // a batch's coefficients before the update
	ws    widening
	a     []float64 // A = X_o C^T, column-major M x K (the column-lane kernels' layout)
	arow  []float64 // A in rows of Kp (the other kernels' layout)
	v     []float64 // C C^T, K rows of Kp (lower triangle)
	// The row sums (with fused lanes): st0 gathers every unobserved entry (S_i, and Rt_i
	// for a row without missing entries), st1 the held-out entries of the rows with missing
	// ones (Vt_i and Rt_i).
	st0, st1 *rowStage
	gneg     []float64  // -G_j (K x K), two of them
	ginv     []float64  // 1 / G_j,pp, two of them
	flip     bool       // which of the two is in use
	bucket   [5][]int32 // a batch's columns by number of unobserved entries
	s        []float64  // columnGram's sum (K rows of Kp)
	rows     []float64  // rowSum's gathered rows of B (M rows of Kp)
	e        []float64  // residual-form scratch (M)
	// pt are the held-out error's partial sums (entry index mod 4), post the residual
	// form's objective.
	pt   [4]float64
	post float64
}

// didMasked is a masked DID shard's work space.
type didMasked struct {
	e           *shardEnv
	sm          *shardMask
	m, n, k, kp int
	ll          int // lowerLen(k)
	pool        *Pool
	kern        *gramKernels
	tune        didMaskTuning
	lanes       []int   // column lanes
	order       []int   // laneOrder of lanes
	ucol        []int32 // the column of each entry of the column lists
	mcols       []int32 // the columns with unobserved entries
	useCols     bool    // dense block on the column-lane kernels
	colsStep    int     // their batch
	span        int     // columns between two looks at the flag
	big         bool    // a column is several blocks of work
	g           []float64
	gneg, ginv  []float64
	gRows       []float64 // -G in K rows of Kp (lower triangle; 0 above it)
	bp          []float64 // B in rows of Kp (colsRows(M) rows, zero beyond M)
	brow        []float64 // B row-major (M x K)
	// The row tables (when M K^2 <= didMaskTuning.tableBudget), for a column whose one unobserved
	// entry is in row i: one its -G_j, oneOK whether columnGram takes it, oneUpd and oneInv
	// its update form (oneUpd is one without an L2 penalty on C).
	one, oneUpd, oneInv []float64
	// lt and rt2: b_ip and b_iq at position p K + q of row i's K x K.
	lt, rt2 []float64
	oneOK   []bool
	vl      []float64 // C C^T, packed lower triangle
	vfull   []float64 // scratch (K x K)
	sqXo    float64   // ||X_o||^2: the columns' squared norms added in column order
	lane    []*didMaskLane
	// fused: the lanes keep the row sums; otherwise the row pass sums them from the row
	// lists (and computes the held-out residuals again, with the same operations).
	fused      bool
	rowMissing []bool // with a test set: row i has missing entries (Vt_i is not S_i)
	// rowWeighted: with a test set, row i has no missing entries (st0 sums its Rt_i).
	rowWeighted []bool
	vtLanes     bool  // the lanes keep Vt_i
	rowLanes    []int // row lanes of the row pass
	rowScratch  [][]float64
	// rowSt0 and rowSt1: the row lanes' one-row stages (without fused lanes).
	rowSt0, rowSt1 []*rowStage
	// rowBlock and rowPos: without fused lanes and without a test set, each row lane's
	// S_i of didMaskRowBlock rows (packed), a V scratch, and those rows' places in their lists.
	rowBlock   [][]float64
	rowPos     [][]int
	needDirect []bool
	directList []int
	rows       []int // row lanes of the B update
	laneRow    [][]float64
	rowObj     []float64
	rowTest    []float64
	l1, l2     float64 // the penalty on C
	// direct: sum each column's objective from its residual (FormResidual).
	direct  bool
	pen     penalty
	lay     didMaskLayout
	test    bool
	partial []float64
	sum     []float64 // the reduced payload during the B update
	// vsrc are the V_i of the B update (M packed triangles): the payload's, or vrows when
	// set (didHeld's, formed after the allreduce).
	vsrc, vrows []float64
	laneFn      func(int)
	rowFn       func(int)
	dirFn       func(int)
	bFn         func(int)
	// bSweepFn and bDoneFn run a further B sweep and the end of the B update on a row lane.
	bSweepFn, bDoneFn func(int)

	// Accelerated DID (Options.Accel): cExtra and bExtra further sweeps at most over each
	// column of C and over B, stopping at eps2 times the first step's squared norm.
	cExtra, bExtra int
	eps2           float64
	// With further B sweeps, per row (row-major M x K): bOld B before the iteration's first
	// sweep, bCur B, bDB the total step B - B_old, bW the (penalty-shifted) w_i of the B
	// update; rowStep each row's squared step norm of the last sweep.
	bOld, bCur, bDB, bW []float64
	rowStep             []float64
}

func newDIDMasked(e *shardEnv) *didMasked {
	sm := e.m.mask.sm
	m, n, k := e.rows, e.cols, e.k
	kp, ll := paddedK(k), lowerLen(k)
	pen := e.penalty()
	d := newMaskedBUpdate(e, sm.test)
	d.sm, d.n, d.kp = sm, n, kp
	d.lanes, d.g, d.gRows = laneBounds(sm.x, k), make([]float64, k*k), make([]float64, k*kp)
	d.order = laneOrder(sm.x, d.lanes, k)
	d.gneg, d.ginv, d.bp = make([]float64, k*k), make([]float64, k), make([]float64, colsRows(m)*kp)
	d.brow, d.vl, d.vfull = make([]float64, m*k), make([]float64, ll), make([]float64, k*k)
	d.l1, d.l2 = pen.l1C, pen.l2C
	d.direct, d.needDirect, d.tune = e.spec.Form == FormResidual, make([]bool, m), didMaskDefaults
	d.cExtra = e.spec.Accel.cExtra()
	if t := e.spec.maskTuning; t != nil {
		d.tune = *t
	}
	d.lay = newDIDMaskLayout(m, k, d.test, pen.coef())
	d.ucol = make([]int32, len(sm.urow))
	for j := 0; j < n; j++ {
		if sm.uptr[j+1] > sm.uptr[j] {
			d.mcols = append(d.mcols, int32(j))
		}
		for t := sm.uptr[j]; t < sm.uptr[j+1]; t++ {
			d.ucol[t] = int32(j)
		}
	}
	if m*k*k <= d.tune.tableBudget {
		d.one, d.oneInv, d.oneOK = make([]float64, m*k*k), make([]float64, m*k), make([]bool, m)
		d.lt, d.rt2 = make([]float64, m*k*k), make([]float64, m*k*k)
		d.oneUpd = d.one
		if d.l2 != 0 {
			d.oneUpd = make([]float64, m*k*k)
		}
	}
	for _, v := range sm.colSq {
		d.sqXo += v
	}
	d.partial = make([]float64, d.lay.total)
	d.kern, d.useCols, d.colsStep, d.span, d.big = maskedBatching(e, sm.x, (1+d.cExtra)*k*k+k*kp)
	if d.test {
		d.rowMissing = make([]bool, m)
		for i := range m {
			for _, v := range sm.rval[sm.rptr[i]:sm.rptr[i+1]] {
				if v != v {
					d.rowMissing[i] = true
					d.vtLanes = true
					break
				}
			}
		}
	}
	if d.test {
		d.rowWeighted = make([]bool, m)
		for i, miss := range d.rowMissing {
			d.rowWeighted[i] = !miss
		}
	}
	nl := len(d.lanes) - 1
	// The lanes' stages, with chunks of 32 columns or fewer (down to 4) to fit the budget.
	chunk := 32
	stageLen := func(chunk int) int {
		n := rowStageLen(m, k, chunk, d.test)
		if d.vtLanes {
			n += rowStageLen(m, k, chunk, true)
		}
		return nl * n
	}
	for chunk > 4 && stageLen(chunk) > d.tune.laneBudget {
		chunk /= 2
	}
	d.fused = stageLen(chunk) <= d.tune.laneBudget && (d.test || n*k*8 > d.tune.rowPassBytes)
	d.lane = make([]*didMaskLane, nl)
	for l := range d.lane {
		ls := &didMaskLane{h: make([]float64, gramBatchCols*kp), cs: make([]float64, gramBatchCols*kp),
			cold: make([]float64, gramBatchCols*k),
			a:    make([]float64, m*k), v: make([]float64, k*kp),
			gneg: make([]float64, 2*k*k), ginv: make([]float64, 2*k), s: make([]float64, k*kp),
			rows: make([]float64, m*kp)}
		for b := range ls.bucket {
			ls.bucket[b] = make([]int32, gramBatchCols)
		}
		if !d.useCols {
			ls.arow = make([]float64, m*kp)
		}
		if d.fused {
			ls.st0 = newRowStage(m, k, chunk, d.test, d.rowWeighted)
			if d.vtLanes {
				ls.st1 = newRowStage(m, k, chunk, true, nil)
			}
		}
		if d.direct {
			ls.e = make([]float64, m)
		}
		d.lane[l] = ls
	}
	d.rowLanes = ColumnRanges(m, max(1, min(m, maxLanes)))
	d.rowScratch = make([][]float64, len(d.rowLanes)-1)
	for l := range d.rowScratch {
		d.rowScratch[l] = make([]float64, 2*ll+k)
	}
	if !d.fused && !d.test {
		d.rowBlock, d.rowPos = make([][]float64, len(d.rowLanes)-1), make([][]int, len(d.rowLanes)-1)
		for l := range d.rowBlock {
			d.rowBlock[l], d.rowPos[l] = make([]float64, didMaskRowBlock*ll+k*kp), make([]int, didMaskRowBlock)
		}
	}
	if !d.fused {
		d.rowSt0 = make([]*rowStage, len(d.rowLanes)-1)
		d.rowSt1 = make([]*rowStage, len(d.rowLanes)-1)
		for l := range d.rowSt0 {
			d.rowSt0[l] = newRowStage(1, k, 256, d.test, make([]bool, 1))
			d.rowSt1[l] = newRowStage(1, k, 256, true, nil)
		}
	}
	d.laneFn, d.rowFn, d.dirFn = d.colLane, d.rowLane, d.directRow
	return d
}

// newMaskedBUpdate returns the part of a masked DID shard that runs the B update (updateB):
// its row lanes, scratch and accelerated sweeps; test says whether it updates a held-out
// error from the payload's Rt_i and Vt_i.
func newMaskedBUpdate(e *shardEnv, test bool) *didMasked {
	m, k := e.rows, e.k
	d := &didMasked{e: e, m: m, k: k, kp: paddedK(k), ll: lowerLen(k), pool: e.spec.Pool,
		rows: rowLaneBounds(m), rowObj: make([]float64, m), rowTest: make([]float64, m),
		pen: e.penalty(), test: test, bExtra: e.spec.Accel.bExtra(), eps2: e.spec.Accel.eps2()}
	if d.bExtra > 0 {
		d.bOld, d.bCur, d.bDB, d.bW = make([]float64, m*k), make([]float64, m*k), make([]float64, m*k), make([]float64, m*k)
		d.rowStep = make([]float64, m)
	}
	d.laneRow = make([][]float64, len(d.rows)-1)
	for l := range d.laneRow {
		d.laneRow[l] = make([]float64, 2*k*k+4*k)
	}
	d.bFn, d.bSweepFn, d.bDoneFn = d.bLane, d.bSweepLane, d.bDoneLane
	return d
}

func runDIDMasked(e *shardEnv, first int, initial float64) {
	ms := e.m.mask
	d := newDIDMasked(e)
	pen := d.pen
	e.state = nil
	var c1, c2 float64 // ||C_i||_1 and ||C_i||^2 of the C the next C update starts from
	if pen.coef() {
		c1, c2 = factorNorms(e.C, e.flag)
	}
	lay := d.lay
	for it := first; ; it++ {
		var prev, prevT float64
		if it == 1 {
			// The objective and held-out error of the initial factors, summed directly.
			prev = maskedResidualSq(d.sm, e.B, e.C, d.k, d.pool)
			if d.test {
				prevT = heldOutSq(d.sm, e.B, e.C, d.k, 0, d.n)
			}
			e.flag.poll()
		}
		post, postT := d.cStep()
		partial := d.partial
		if pen.coef() {
			norms := partial[lay.norms : lay.norms+didNormsLen]
			norms[0], norms[1] = c1, c2
			c1, c2 = factorNorms(e.C, e.flag)
			norms[2], norms[3] = c1, c2
		}
		d.rowSums()
		if !d.direct {
			post = d.gramObjective()
		}
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

// cStep updates every column of C, writes A into the payload and returns the shard's
// objective of B_old and the new C and its held-out error.
func (d *didMasked) cStep() (post, postT float64) {
	b, flag := d.e.B, d.e.flag
	m, k, kp := d.m, d.k, d.kp
	gramCols(b, m, k, d.g, flag)
	for i, g := range d.g {
		d.gneg[i] = -g
	}
	for p := 0; p < k; p++ {
		for q := 0; q <= p; q++ {
			d.gRows[p*kp+q] = -d.g[p*k+q]
		}
	}
	for p := 0; p < k; p++ {
		gpp := d.g[p*k+p]
		if d.l2 != 0 {
			gpp += d.l2
			d.gneg[p*k+p] = -gpp
		}
		d.ginv[p] = 0
		if gpp > 0 {
			d.ginv[p] = 1 / gpp
		}
	}
	packRows(d.bp, b, m, k)
	transpose(d.brow, b, m, k)
	if d.one != nil {
		d.rowTables()
	}
	d.pool.RunOrder(len(d.lane), d.order, d.laneFn)
	flag.poll()
	a := d.partial[d.lay.a : d.lay.a+m*k]
	copy(a, d.lane[0].a)
	clear64(d.vl)
	for l, ls := range d.lane {
		if l > 0 {
			for i, v := range ls.a {
				a[i] += v
			}
		}
		n := 0
		for p := 0; p < k; p++ {
			for q := 0; q <= p; q++ {
				d.vl[n] += ls.v[p*kp+q]
				n++
			}
		}
		postT += (ls.pt[0] + ls.pt[1]) + (ls.pt[2] + ls.pt[3])
		post += ls.post
	}
	return post, postT
}

// rowTables fills the tables of B's rows: -G_j of a column whose one unobserved entry is in
// row i (columnGram's fma(b_ip, b_iq, -G_pq)), whether columnGram takes it, its update form,
// and b_ip, b_iq at position p K + q.
func (d *didMasked) rowTables() {
	m, k := d.m, d.k
	kk := k * k
	for i := 0; i < m; i++ {
		bi, one := d.brow[i*k:(i+1)*k], d.one[i*kk:(i+1)*kk]
		lt, rt := d.lt[i*kk:(i+1)*kk], d.rt2[i*kk:(i+1)*kk]
		ok := 2 <= m
		for p, bp := range bi {
			for q, bq := range bi {
				lt[p*k+q], rt[p*k+q] = bp, bq
			}
			for q, bq := range bi[:p+1] {
				v := math.FMA(bp, bq, -d.g[p*k+q])
				one[p*k+q], one[q*k+p] = v, v
			}
			if !(-one[p*k+p] >= d.g[p*k+p]*maskCancel) {
				ok = false
			}
		}
		d.oneOK[i] = ok
		if ok {
			upd := d.oneUpd[i*kk : (i+1)*kk]
			copy(upd, one)
			updateForm(upd, d.oneInv[i*k:(i+1)*k], d.l2)
		}
	}
}

// gramObjective returns the objective of B_old and the new C from the payload's A and V_i:
// ||X_o - B C||^2 = ||X_o||^2 - 2<B, A> + sum_i b_i^T V_i b_i (clamped at 0), ||X_o||^2 the
// columns' squared norms added in column order, products rounded before they are added.
func (d *didMasked) gramObjective() float64 {
	m, k, ll, b := d.m, d.k, d.ll, d.e.B
	cross := basisCross(b, d.partial[d.lay.a:d.lay.a+m*k], m, k)
	var quad float64
	for i := 0; i < m; i++ {
		unpackLower(d.vfull, d.partial[d.lay.v+i*ll:d.lay.v+(i+1)*ll], k)
		quad += quadForm(d.vfull, d.brow[i*k:(i+1)*k], k)
	}
	obj := d.sqXo - float64(2*cross) + quad
	return max(obj, 0)
}

// colLane runs steps 1-4 and the masked columns' updates on column lane l.
func (d *didMasked) colLane(l int) {
	ls := d.lane[l]
	m, k, kp := d.m, d.k, d.kp
	flag := d.e.flag
	clear64(ls.a)
	clear64(ls.arow)
	clear64(ls.v)
	clear64(ls.cs)
	if ls.st0 != nil {
		ls.st0.reset()
	}
	if ls.st1 != nil {
		ls.st1.reset()
	}
	ls.pt, ls.post = [4]float64{}, 0
	x := d.sm.x
	c, uptr, kern := d.e.C, d.sm.uptr, d.kern
	mpos, _ := slices.BinarySearch(d.mcols, int32(d.lanes[l])) // the lane's first column with unobserved entries
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
		subtractL1(h, d.l1, k, kp, nb)
		if d.big && flag.stopped() {
			return
		}
		// The columns without unobserved entries on G, those with some on their own G_j.
		cb := c[j0*k : j1*k]
		mlo := mpos
		for mpos < len(d.mcols) && int(d.mcols[mpos]) < j1 {
			mpos++
		}
		masked := d.mcols[mlo:mpos]
		if d.cExtra > 0 {
			// The coefficients before the update, from which the further sweeps measure
			// each column's first step.
			copy(ls.cold, cb)
		}
		switch {
		case len(masked) == 0:
			kern.update(h, cs, cb, d.gneg, d.ginv, k, kp, nb)
			if d.cExtra > 0 {
				kern.sweeps(h, cs, cb, ls.cold, d.gneg, d.ginv, k, kp, nb, d.cExtra, d.eps2)
			}
		case 2*len(masked) <= nb:
			// Mostly observed: the whole batch on G, then the others again from their old
			// coefficients.
			if d.cExtra == 0 {
				copy(ls.cold, cb)
			}
			kern.update(h, cs, cb, d.gneg, d.ginv, k, kp, nb)
			if d.cExtra > 0 {
				d.observedSweeps(ls, j0, j1, masked, h, cs)
			}
			d.maskedUpdates(ls, j0, masked, h, cs, true)
		default:
			// Mostly unobserved: the runs of observed columns on G.
			run := j0
			for _, j32 := range masked {
				if j := int(j32); run < j {
					u0, u1 := run-j0, j-j0
					kern.update(h[u0*kp:u1*kp], cs[u0*kp:u1*kp], c[run*k:j*k], d.gneg, d.ginv, k, kp, j-run)
				}
				run = int(j32) + 1
			}
			if run < j1 {
				u0 := run - j0
				kern.update(h[u0*kp:nb*kp], cs[u0*kp:nb*kp], c[run*k:j1*k], d.gneg, d.ginv, k, kp, j1-run)
			}
			if d.cExtra > 0 {
				d.observedSweeps(ls, j0, j1, masked, h, cs)
			}
			d.maskedUpdates(ls, j0, masked, h, cs, false)
		}
		if len(masked) > 0 && (d.fused || d.test) {
			d.batchSums(ls, uptr[j0], uptr[j1])
		}
		if d.direct {
			for j := j0; j < j1; j++ {
				ls.post += d.sm.residualSq(j, d.e.B, c[j*k:(j+1)*k], ls.e)
			}
		}
		if d.big && flag.stopped() {
			return
		}
		bt.acc(m, k, kp, cs, ls.a, ls.arow, ls.v, true)
		j0 = j1
	}
	if !d.useCols {
		unpackRows(ls.a, ls.arow, m, k)
	}
	if ls.st0 != nil {
		ls.st0.flushAll(d)
	}
	if ls.st1 != nil {
		ls.st1.flushAll(d)
	}
}

// maskedUpdates runs the C update of the batch's columns js (increasing) that have unobserved
// entries, each on its own G_j, from their coefficients before the batch's update on G
// (ls.cold, with restore), grouped by their number of unobserved entries (1, 2, 3, more), so that each
// group runs the same code. The columns are independent, so the grouping changes no bit.
func (d *didMasked) maskedUpdates(ls *didMaskLane, j0 int, js []int32, h, cs []float64, restore bool) {
	k, kp, uptr := d.k, d.kp, d.sm.uptr
	var nb [5]int
	for _, j := range js {
		b := min(uptr[j+1]-uptr[j], 4)
		ls.bucket[b][nb[b]] = j
		nb[b]++
	}
	c := d.e.C
	for b := 1; b <= 4; b++ {
		for _, j32 := range ls.bucket[b][:nb[b]] {
			j := int(j32)
			u := j - j0
			cj := c[j*k : j*k+k]
			if restore {
				move(cj, ls.cold[u*k:(u+1)*k])
			}
			gneg, ginv := d.columnForm(ls, j, b)
			hu, csu := h[u*kp:(u+1)*kp], cs[u*kp:(u+1)*kp]
			d.kern.update(hu, csu, cj, gneg, ginv, k, kp, 1)
			if d.cExtra > 0 {
				d.kern.sweeps(hu, csu, cj, ls.cold[u*k:(u+1)*k], gneg, ginv, k, kp, 1, d.cExtra, d.eps2)
			}
		}
	}
}

// observedSweeps runs accelerated DID's further C sweeps (sweepCoefsGo's) on the batch
// [j0, j1)'s columns without unobserved entries, a run between two of masked (increasing) at
// a time, on G, from their coefficients before the update in ls.cold. The columns with
// unobserved entries get theirs on their own G_j in maskedUpdates.
func (d *didMasked) observedSweeps(ls *didMaskLane, j0, j1 int, masked []int32, h, cs []float64) {
	k, kp, c := d.k, d.kp, d.e.C
	sweep := func(lo, hi int) {
		if lo < hi {
			u0, u1 := lo-j0, hi-j0
			d.kern.sweeps(h[u0*kp:u1*kp], cs[u0*kp:u1*kp], c[lo*k:hi*k], ls.cold[u0*k:u1*k],
				d.gneg, d.ginv, k, kp, hi-lo, d.cExtra, d.eps2)
		}
	}
	run := j0
	for _, j32 := range masked {
		sweep(run, int(j32))
		run = int(j32) + 1
	}
	sweep(run, j1)
}

// columnForm returns -G_j and 1/G_j,pp of column j, which has b unobserved entries (4: four
// or more), in the update's form: a row table's for one entry, else written in one of the
// lane's two buffers (in turn, so that a column's does not wait for the last update).
func (d *didMasked) columnForm(ls *didMaskLane, j, b int) (gneg, ginv []float64) {
	k, kk := d.k, d.k*d.k
	skip := d.sm.urow[d.sm.uptr[j]:d.sm.uptr[j+1]]
	if i := int(skip[0]); b == 1 && d.oneOK != nil && d.oneOK[i] {
		return d.oneUpd[i*kk : i*kk+kk], d.oneInv[i*k : i*k+k]
	}
	ls.flip = !ls.flip
	gneg, ginv = ls.gneg[:kk], ls.ginv[:k]
	if ls.flip {
		gneg, ginv = ls.gneg[kk:2*kk], ls.ginv[k:2*k]
	}
	d.columnGram(ls, gneg, skip)
	updateForm(gneg, ginv, d.l2)
	return gneg, ginv
}

// batchSums adds the unobserved entries t0 <= t < t1 of the column lists (a batch's columns,
// just updated) to the lane's sums, entries in column order: for a held-out entry
// r_ij = heldOutResidual and r^2 into partial sum t mod 4 (fma), and with fused lanes every
// entry gathered into its row's sums.
func (d *didMasked) batchSums(ls *didMaskLane, t0, t1 int) {
	k, sm, c := d.k, d.sm, d.e.C
	fused, brow := d.fused, d.brow
	st0, st1 := ls.st0, ls.st1
	pt := ls.pt
	var rs [256]float64 // a block's residuals
	var hs [256]int32   // its held-out entries
	for b0 := t0; b0 < t1; b0 += len(rs) {
		b1 := min(b0+len(rs), t1)
		urow, uval, ucol := sm.urow[b0:b1], sm.uval[b0:b1], d.ucol[b0:b1]
		uval, ucol = uval[:len(urow)], ucol[:len(urow)]
		nh := 0
		if d.test {
			for t, v := range uval {
				if v == v { // held out
					hs[nh] = int32(t)
					nh++
				}
			}
			// The residuals four at a time (four independent chains of fma), then their
			// squares in entry order.
			h := hs[:nh]
			for ; len(h) >= 4; h = h[4:] {
				u0, u1, u2, u3 := int(h[0]), int(h[1]), int(h[2]), int(h[3])
				i0, i1, i2, i3 := int(urow[u0])*k, int(urow[u1])*k, int(urow[u2])*k, int(urow[u3])*k
				j0, j1, j2, j3 := int(ucol[u0])*k, int(ucol[u1])*k, int(ucol[u2])*k, int(ucol[u3])*k
				x0, x1, x2, x3 := brow[i0:i0+k], brow[i1:i1+k], brow[i2:i2+k], brow[i3:i3+k]
				y0, y1, y2, y3 := c[j0:j0+k], c[j1:j1+k], c[j2:j2+k], c[j3:j3+k]
				x1, x2, x3 = x1[:len(x0)], x2[:len(x0)], x3[:len(x0)]
				y0, y1, y2, y3 = y0[:len(x0)], y1[:len(x0)], y2[:len(x0)], y3[:len(x0)]
				var e0, e1, e2, e3 float64
				for p, xp := range x0 {
					e0 = math.FMA(xp, y0[p], e0)
					e1 = math.FMA(x1[p], y1[p], e1)
					e2 = math.FMA(x2[p], y2[p], e2)
					e3 = math.FMA(x3[p], y3[p], e3)
				}
				rs[u0], rs[u1], rs[u2], rs[u3] = uval[u0]-e0, uval[u1]-e1, uval[u2]-e2, uval[u3]-e3
			}
			for _, t32 := range h {
				t := int(t32)
				i, j := int(urow[t]), int(ucol[t])
				rs[t] = heldOutResidual(uval[t], brow[i*k:i*k+k], c[j*k:j*k+k])
			}
			for _, t32 := range hs[:nh] {
				t := int(t32)
				r := rs[t]
				q := (b0 + t) & 3
				pt[q] = math.FMA(r, r, pt[q])
			}
		}
		if !fused {
			continue
		}
		for t, i32 := range urow {
			i, j := int(i32), int(ucol[t])
			var r float64
			if v := uval[t]; v == v {
				r = rs[t]
				if d.rowMissing[i] {
					st1.add(d, i, j, r)
				}
			}
			// st0.add(d, i, j, r), inline.
			chunk := st0.chunk
			n := st0.cnt[i]
			st0.ibuf[i*chunk+n] = int32(j)
			if st0.wbuf != nil {
				st0.wbuf[i*chunk+n] = r
			}
			if n++; n == chunk {
				st0.flush(d, i, n)
				n = 0
			}
			st0.cnt[i] = n
		}
	}
	ls.pt = pt
}

// rowStage gathers, row by row, the indices j (into C) and weights w_j of the columns that a
// row's sums take, and adds them a chunk at a time on the Gram lane's step 4 over the gathered
// columns (V_i += c_j c_j^T, accVIdx, reading the c_j from C in place) and, for the rows that
// take weights, a_i += w_j c_j (accAIdx: step 3 on a one-row block, in place as well):
// fma in column order, so the sums do not depend on the chunk. A chunk is flushed once its
// columns are updated, so it reads their final coefficients.
type rowStage struct {
	chunk int
	ibuf  []int32   // per row: chunk column indices
	wbuf  []float64 // per row: chunk weights
	cnt   []int     // per row: the columns gathered
	v     []float64 // per row: V_i, K rows of Kp (lower triangle)
	a     []float64 // per row: a_i, Kp values (nil without weights)
	// weighted[i]: row i takes weights (nil: every row does when a is set).
	weighted []bool
}

func newRowStage(rows, k, chunk int, weights bool, weighted []bool) *rowStage {
	kp := paddedK(k)
	st := &rowStage{chunk: chunk, ibuf: make([]int32, rows*chunk), cnt: make([]int, rows),
		v: make([]float64, rows*k*kp)}
	if weights {
		st.wbuf, st.a, st.weighted = make([]float64, rows*chunk), make([]float64, rows*kp), weighted
	}
	return st
}

// rowStageLen is the number of floats of a rowStage (an index counted as half of one).
func rowStageLen(rows, k, chunk int, weights bool) int {
	kp := paddedK(k)
	n := rows * ((chunk+1)/2 + k*kp)
	if weights {
		n += rows * (chunk + kp)
	}
	return n
}

// reset empties the stage and zeroes its sums.
func (st *rowStage) reset() {
	clear(st.cnt)
	clear64(st.v)
	clear64(st.a)
}

// add gathers column j with weight w into row i.
func (st *rowStage) add(d *didMasked, i, j int, w float64) {
	chunk := st.chunk
	n := st.cnt[i]
	st.ibuf[i*chunk+n] = int32(j)
	if st.wbuf != nil {
		st.wbuf[i*chunk+n] = w
	}
	if n++; n == chunk {
		st.flush(d, i, n)
		n = 0
	}
	st.cnt[i] = n
}

// flush adds row i's n gathered columns to its sums.
func (st *rowStage) flush(d *didMasked, i, n int) {
	if n == 0 {
		return
	}
	k, kp, chunk := d.k, d.kp, st.chunk
	idx := st.ibuf[i*chunk : i*chunk+n]
	d.kern.accVIdx(d.e.C, k, idx, k, kp, st.v[i*k*kp:(i+1)*k*kp])
	if st.a != nil && (st.weighted == nil || st.weighted[i]) {
		d.kern.accAIdx(d.e.C, k, idx, st.wbuf[i*chunk:i*chunk+n], k, kp, st.a[i*kp:(i+1)*kp])
	}
}

// flushAll flushes every row.
func (st *rowStage) flushAll(d *didMasked) {
	for i, n := range st.cnt {
		st.flush(d, i, n)
		st.cnt[i] = 0
	}
}

// lowerOf writes the lower triangle of V_i (K rows of Kp) packed into dst, or adds it.
func lowerOf(dst, v []float64, k, kp int, add bool) {
	n := 0
	for p := 0; p < k; p++ {
		row := v[p*kp : p*kp+p+1]
		if add {
			for _, x := range row {
				dst[n] += x
				n++
			}
		} else {
			for _, x := range row {
				dst[n] = x
				n++
			}
		}
	}
}

// updateForm turns -G_j (K x K) into the update's form: with l2 its diagonal is
// -(G_j,pp + l2), and ginv[p] = 1 / (G_j,pp + l2), 0 unless that is positive.
func updateForm(gneg, ginv []float64, l2 float64) {
	k := len(ginv)
	for p := range ginv {
		gpp := -gneg[p*k+p]
		if l2 != 0 {
			gpp += l2
			gneg[p*k+p] = -gpp
		}
		ginv[p] = 0
		if gpp > 0 {
			ginv[p] = 1 / gpp
		}
	}
}

// move copies src into dst (src's length) by a loop: a few values, for which copy's call to
// memmove costs more than the copy.
func move(dst, src []float64) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = v
	}
}

// columnGram sets gneg (K x K) to -G_j, G_j the Gram matrix of the rows of B outside skip
// (increasing): when those rows are at most half, -G_j = -G + sum of b_i b_i^T over them,
// by fma, rows in order (the Gram lane's step 4 from -G), unless a diagonal entry of G_j
// falls below maskCancel times G's; then, or when they are more than half, -G_j = -S with S
// the sum of b_i b_i^T over the other rows, by fma, rows in order, from 0. Up to three rows
// are taken from the tables of B's rows, more are summed by rowSum (on the kernel path's
// indexed step 4, which reads them from B in place).
func (d *didMasked) columnGram(ls *didMaskLane, gneg []float64, skip []int32) {
	m, k, kp := d.m, d.k, d.kp
	kk := k * k
	gneg = gneg[:kk]
	s := ls.s[:k*kp]
	if 2*len(skip) <= m {
		switch u := len(skip); {
		case d.one != nil && u <= 3:
			i0 := int(skip[0]) * kk
			one := d.one[i0 : i0+kk]
			switch u {
			case 1:
				move(gneg, one)
			case 2:
				i1 := int(skip[1]) * kk
				l1, r1 := d.lt[i1:i1+kk], d.rt2[i1:i1+kk]
				for x, v := range one {
					gneg[x] = math.FMA(l1[x], r1[x], v)
				}
			case 3:
				i1, i2 := int(skip[1])*kk, int(skip[2])*kk
				l1, r1, l2, r2 := d.lt[i1:i1+kk], d.rt2[i1:i1+kk], d.lt[i2:i2+kk], d.rt2[i2:i2+kk]
				for x, v := range one {
					gneg[x] = math.FMA(l2[x], r2[x], math.FMA(l1[x], r1[x], v))
				}
			}
		default:
			copy(s, d.gRows)
			d.rowSum(ls, s, skip, false)
			mirrorLower(gneg, s, k, kp, false)
		}
		ok := true
		for p := 0; p < k; p++ {
			if !(-gneg[p*k+p] >= d.g[p*k+p]*maskCancel) {
				ok = false
			}
		}
		if ok {
			return
		}
	}
	clear64(s)
	d.rowSum(ls, s, skip, true)
	mirrorLower(gneg, s, k, kp, true)
}

// mirrorLower sets the K x K g to the symmetric matrix of the lower triangle of s (K rows of
// Kp), negated with neg.
func mirrorLower(g, s []float64, k, kp int, neg bool) {
	g = g[:k*k]
	for p := 0; p < k; p++ {
		row := s[p*kp : p*kp+p+1]
		gp := g[p*k : p*k+p+1]
		for q, v := range row {
			if neg {
				v = -v
			}
			gp[q], g[q*k+p] = v, v
		}
	}
}

// rowSum adds to s (K rows of Kp, lower triangle) b_i b_i^T for the rows i of B in list
// (increasing), or with complement for the others: s_pq = fma(b_ip, b_iq, s_pq), rows in
// order. A few rows are summed here, more are gathered from B's rows of Kp (pads 0) for the
// kernel path's step 4: the same operations.
func (d *didMasked) rowSum(ls *didMaskLane, s []float64, list []int32, complement bool) {
	m, k, kp := d.m, d.k, d.kp
	n := len(list)
	if complement {
		n = m - n
	}
	if n*lowerLen(k) <= d.tune.rowSumScalar {
		add := func(i int) {
			bi := d.brow[i*k : i*k+k]
			for p, bp := range bi {
				row := s[p*kp : p*kp+p+1]
				for q, bq := range bi[:p+1] {
					row[q] = math.FMA(bp, bq, row[q])
				}
			}
		}
		if !complement {
			for _, i := range list {
				add(int(i))
			}
			return
		}
		t := 0
		for i := 0; i < m; i++ {
			if t < len(list) && int(list[t]) == i {
				t++
				continue
			}
			add(i)
		}
		return
	}
	if !complement {
		d.kern.accVIdx(d.bp, kp, list, k, kp, s)
		return
	}
	buf := ls.rows[:n*kp]
	r, t := 0, 0
	for i := 0; i < m; i++ {
		if t < len(list) && int(list[t]) == i {
			t++
			continue
		}
		move(buf[r*kp:(r+1)*kp], d.bp[i*kp:(i+1)*kp])
		r++
	}
	d.kern.accV(buf, k, kp, n, s)
}

// lowerDiagAbove reports whether every diagonal entry of the packed lower triangle g is at
// least maskCancel times that of full.
func lowerDiagAbove(g, full []float64, k int) bool {
	n := 0
	for p := 0; p < k; p++ {
		n += p
		if !(g[n] >= full[n]*maskCancel) {
			return false
		}
		n++
	}
	return true
}

// addOuterFMA adds c c^T to the packed lower triangle s: s_pq = fma(c_p, c_q, s_pq), the
// operations of the Gram lane's step 4.
func addOuterFMA(s, c []float64) {
	n := 0
	for p, cp := range c {
		row := s[n : n+p+1]
		for q, cq := range c[:p+1] {
			row[q] = math.FMA(cp, cq, row[q])
		}
		n += p + 1
	}
}

// rowSums writes the V_i and the held-out sums of the C just updated into the payload (A is
// there already).
func (d *didMasked) rowSums() {
	d.pool.Run(len(d.rowLanes)-1, d.rowFn)
	d.e.flag.poll()
	d.directList = d.directList[:0]
	for i, need := range d.needDirect {
		if need {
			d.directList = append(d.directList, i)
		}
	}
	if len(d.directList) > 0 {
		d.pool.Run(len(d.directList), d.dirFn)
		d.e.flag.poll()
	}
}

// rowLane runs the row pass on row lane l: the lanes' row sums added in lane order, then
// V_i = V - S_i, or a direct sum left to directRow.
func (d *didMasked) rowLane(l int) {
	m, n, k, ll, sm, lay, flag := d.m, d.n, d.k, d.ll, d.sm, d.lay, d.e.flag
	sc := d.rowScratch[l]
	s, vt, at := sc[:ll], sc[ll:2*ll], sc[2*ll:2*ll+k]
	span := flag.span(len(d.lane)*(2*ll+k)+ll, 1)
	if d.rowBlock != nil {
		span = min(span, didMaskRowBlock)
	}
	for i0, hi := d.rowLanes[l], d.rowLanes[l+1]; i0 < hi; i0 += span {
		if flag.stopped() {
			return
		}
		i1 := min(i0+span, hi)
		if d.rowBlock != nil {
			d.blockPartials(l, i0, i1)
		}
		for i := i0; i < i1; i++ {
			switch {
			case d.rowBlock != nil:
				s = d.rowBlock[l][(i-i0)*ll : (i-i0+1)*ll]
			case d.fused:
				d.fusedRow(i, s, vt, at)
			default:
				d.rowPartials(i, s, vt, at, d.rowSt0[l], d.rowSt1[l])
			}
			vi := d.partial[lay.v+i*ll : lay.v+(i+1)*ll]
			u := sm.rptr[i+1] - sm.rptr[i]
			d.needDirect[i] = false
			switch {
			case u == 0:
				copy(vi, d.vl)
			case 2*u <= n:
				for q, v := range d.vl {
					vi[q] = v - s[q]
				}
				d.needDirect[i] = !lowerDiagAbove(vi, d.vl, k)
			default:
				d.needDirect[i] = true
			}
			if !d.test {
				continue
			}
			if d.rowMissing[i] {
				copy(d.partial[lay.vt+i*ll:lay.vt+(i+1)*ll], vt)
			} else {
				copy(d.partial[lay.vt+i*ll:lay.vt+(i+1)*ll], s)
			}
			for p, a := range at {
				d.partial[lay.at+p*m+i] = a
			}
		}
	}
}

// blockPartials is rowPartials without a test set for rows i0 <= i < i1 of row lane l at
// once, column lane by column lane, so that the rows share the lane's part of C while it is
// in the cache: row i's S_i goes to the lane's block scratch, the same operations in the same
// order.
func (d *didMasked) blockPartials(l, i0, i1 int) {
	k, kp, ll, sm, c := d.k, d.kp, d.ll, d.sm, d.e.C
	sb := d.rowBlock[l]
	v := sb[didMaskRowBlock*ll : didMaskRowBlock*ll+k*kp]
	pos := d.rowPos[l][:i1-i0]
	for i := i0; i < i1; i++ {
		pos[i-i0] = sm.rptr[i]
	}
	for cl := range d.lane {
		hi := int32(d.lanes[cl+1])
		for i := i0; i < i1; i++ {
			t0 := pos[i-i0]
			n, _ := slices.BinarySearch(sm.rcol[t0:sm.rptr[i+1]], hi)
			clear64(v)
			d.kern.accVIdx(c, k, sm.rcol[t0:t0+n], k, kp, v)
			lowerOf(sb[(i-i0)*ll:(i-i0+1)*ll], v, k, kp, cl > 0)
			pos[i-i0] = t0 + n
		}
	}
}

// fusedRow adds row i's sums of the lanes in lane order into s, vt and at.
func (d *didMasked) fusedRow(i int, s, vt, at []float64) {
	vtOn := d.test && d.rowMissing[i]
	for l, ls := range d.lane {
		d.addPartials(i, l > 0, ls.st0, ls.st1, vtOn, s, vt, at)
	}
}

// addPartials writes (add false) or adds one lane's row i sums from its stages.
func (d *didMasked) addPartials(i int, add bool, st0, st1 *rowStage, vtOn bool, s, vt, at []float64) {
	k, kp := d.k, d.kp
	lowerOf(s, st0.v[i*k*kp:(i+1)*k*kp], k, kp, add)
	if !d.test {
		return
	}
	a := st0.a
	if vtOn {
		lowerOf(vt, st1.v[i*k*kp:(i+1)*k*kp], k, kp, add)
		a = st1.a
	}
	addInto(at, a[i*kp:i*kp+k], add)
}

// rowPartials is fusedRow without the lanes' stages, with a test set (blockPartials sums the
// rows without one): for each lane, the lane's part of row i's list (columns in order) goes
// through the one-row stages st0 and st1 with the held-out residuals computed again, so that
// the same operations give the same sums.
func (d *didMasked) rowPartials(i int, s, vt, at []float64, st0, st1 *rowStage) {
	k, sm := d.k, d.sm
	vtOn := d.test && d.rowMissing[i]
	if st0.weighted != nil {
		st0.weighted[0] = !vtOn
	}
	t, up := sm.rptr[i], sm.rptr[i+1]
	for l := range d.lane {
		st0.reset()
		st1.reset()
		hi := d.lanes[l+1]
		for ; t < up && int(sm.rcol[t]) < hi; t++ {
			j := int(sm.rcol[t])
			v := sm.rval[t]
			if v != v {
				st0.add(d, 0, j, 0)
				continue
			}
			r := heldOutResidual(v, d.brow[i*k:i*k+k], d.e.C[j*k:j*k+k])
			st0.add(d, 0, j, r)
			if vtOn {
				st1.add(d, 0, j, r)
			}
		}
		st0.flushAll(d)
		st1.flushAll(d)
		d.addPartials(0, l > 0, st0, st1, vtOn, s, vt, at)
	}
}

// heldOutResidual returns r_ij = x_ij - e_ij, e_ij = b_i.c_j by fma over the components in
// order, from 0: the one definition of a held-out entry's residual (batchSums, four entries at
// a time, and the row pass compute it alike).
func heldOutResidual(x float64, bi, cj []float64) float64 {
	bi = bi[:len(cj)]
	var e float64
	for p, cp := range cj {
		e = math.FMA(bi[p], cp, e)
	}
	return x - e
}

// addInto sets dst = src (add false) or dst += src.
func addInto(dst, src []float64, add bool) {
	if !add {
		copy(dst, src)
		return
	}
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] += v
	}
}

// addRowsInto copies (add false) or adds the first K values of each of the M rows of Kp in
// rows into dst, row-major M x K: addInto for a lane's rows in step 3's padded layout.
func addRowsInto(dst, rows []float64, m, k int, add bool) {
	kp := paddedK(k)
	for i := range m {
		d, r := dst[i*k:(i+1)*k], rows[i*kp:i*kp+k]
		if !add {
			copy(d, r)
			continue
		}
		for q, v := range r {
			d[q] += v
		}
	}
}

// directRow sets V_i of the t-th row of directList to the sum of c_j c_j^T over its observed
// columns (fma, in column order).
func (d *didMasked) directRow(t int) {
	i := d.directList[t]
	n, k, ll, sm, c, flag := d.n, d.k, d.ll, d.sm, d.e.C, d.e.flag
	vi := d.partial[d.lay.v+i*ll : d.lay.v+(i+1)*ll]
	clear64(vi)
	skip := sm.rcol[sm.rptr[i]:sm.rptr[i+1]]
	span := flag.span(ll, 1)
	u := 0
	for j0 := 0; j0 < n; j0 += span {
		if flag.stopped() {
			return
		}
		for j, j1 := j0, min(j0+span, n); j < j1; j++ {
			if u < len(skip) && int(skip[u]) == j {
				u++
				continue
			}
			addOuterFMA(vi, c[j*k:(j+1)*k])
		}
	}
}

// updateB runs the B update on the reduced payload and returns the objective after it (post
// is the objective of B_old with the new C, penalties included) and the held-out error
// (postTest that of B_old with the new C).
func (d *didMasked) updateB(sum []float64, post, postTest float64) (obj, test float64) {
	d.sum = sum
	d.vsrc = d.vrows
	if d.vsrc == nil {
		d.vsrc = sum[d.lay.v:]
	}
	d.pool.Run(len(d.rows)-1, d.bFn)
	d.e.flag.poll()
	if d.bExtra > 0 {
		d.sweepB()
	}
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

// sweepB runs accelerated DID's further B sweeps after the first (bLane's), each row on its
// own V_i and w_i (penalty-shifted as the first sweep's) with sweepBasis's arithmetic, and
// then the end of the B update (bDoneLane) from the total step. The rows are independent
// problems, but whether another sweep runs is one decision for all of B, taken as
// sweepBasis takes it from the squared norms of the sweeps' steps, each the rows' partials
// (rowStep) added in row order: replicated values in an order that depends on nothing but
// the row index, so every shard, lane split and shard count takes the same decisions.
func (d *didMasked) sweepB() {
	first := d.stepNorm()
	thr := first * d.eps2
	st := first
	for l := 0; l < d.bExtra && st > thr; l++ {
		d.pool.Run(len(d.rows)-1, d.bSweepFn)
		d.e.flag.poll()
		st = d.stepNorm()
	}
	d.pool.Run(len(d.rows)-1, d.bDoneFn)
	d.e.flag.poll()
}

// stepNorm returns the squared norm of the last B sweep's step: the rows' partials added in
// row order.
func (d *didMasked) stepNorm() float64 {
	var s float64
	for _, v := range d.rowStep {
		s += v
	}
	return s
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
	accel := d.bExtra > 0
	span := flag.span(3*k*k, 1)
	for i0, hi := d.rows[l], d.rows[l+1]; i0 < hi; i0 += span {
		if flag.stopped() {
			return
		}
		for i, i1 := i0, min(i0+span, hi); i < i1; i++ {
			unpackLower(vi, d.vsrc[i*ll:(i+1)*ll], k)
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
			if accel {
				copy(d.bOld[i*k:(i+1)*k], bi)
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
			if accel {
				// The further sweeps start from here (sweepB); the step's squared norm
				// as sweepBasis takes its first.
				copy(d.bCur[i*k:(i+1)*k], bi)
				copy(d.bDB[i*k:(i+1)*k], db)
				copy(d.bW[i*k:(i+1)*k], w)
				var st float64
				for _, dp := range db {
					st = math.FMA(dp, dp, st)
				}
				d.rowStep[i] = st
				continue
			}
			d.rowDone(i, vi, vt, bi, w, db)
		}
	}
}

// rowDone ends row i's B update: the objective's change -2 db.w + db^T V_i db (w and V_i
// penalty-shifted, db the total step of the iteration), row i of B set to bi, and with a
// test set the held-out error's change.
func (d *didMasked) rowDone(i int, vi, vt, bi, w, db []float64) {
	m, k, ll, b, sum, lay := d.m, d.k, d.ll, d.e.B, d.sum, d.lay
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

// rowV sets vi (K x K) to row i's V_i of the B update (penalty-shifted with a penalty on B).
func (d *didMasked) rowV(vi []float64, i int) {
	k, ll := d.k, d.ll
	unpackLower(vi, d.vsrc[i*ll:(i+1)*ll], k)
	if d.pen.basis() {
		shiftGram(vi, k, d.pen.l2B)
	}
}

// bSweepLane runs one further B sweep (sweepBasis's arithmetic) over the rows of row lane l,
// each on its own V_i and w_i from its total step db_i:
//
//	b_ip <- max(0, b_ip + (w_ip - sum_q V_i,pq db_iq) / V_i,pp),  db_ip = b_ip - bOld_ip
//
// (components with V_i,pp > 0, in order; each product rounded, subtracted in q order), and
// sets rowStep[i] to the squared norm of the row's step (fma, components in order).
func (d *didMasked) bSweepLane(l int) {
	k, flag := d.k, d.e.flag
	vi := d.laneRow[l][:k*k]
	span := flag.span(2*k*k, 1)
	for i0, hi := d.rows[l], d.rows[l+1]; i0 < hi; i0 += span {
		if flag.stopped() {
			return
		}
		for i, i1 := i0, min(i0+span, hi); i < i1; i++ {
			d.rowV(vi, i)
			bi, db, w, bo := d.bCur[i*k:(i+1)*k], d.bDB[i*k:(i+1)*k], d.bW[i*k:(i+1)*k], d.bOld[i*k:(i+1)*k]
			var st float64
			for p := 0; p < k; p++ {
				vpp := vi[p*k+p]
				if !(vpp > 0) {
					continue
				}
				num := w[p]
				for q, vq := range vi[p*k : (p+1)*k] {
					num -= float64(vq * db[q])
				}
				nb := bi[p] + num/vpp
				if nb < 0 {
					nb = 0
				}
				dd := nb - bi[p]
				st = math.FMA(dd, dd, st)
				bi[p] = nb
				db[p] = nb - bo[p]
			}
			d.rowStep[i] = st
		}
	}
}

// bDoneLane ends the accelerated B update on row lane l (rowDone from the total step).
func (d *didMasked) bDoneLane(l int) {
	k, flag := d.k, d.e.flag
	s := d.laneRow[l]
	vi, vt := s[:k*k], s[k*k:2*k*k]
	span := flag.span(3*k*k, 1)
	for i0, hi := d.rows[l], d.rows[l+1]; i0 < hi; i0 += span {
		if flag.stopped() {
			return
		}
		for i, i1 := i0, min(i0+span, hi); i < i1; i++ {
			d.rowV(vi, i)
			d.rowDone(i, vi, vt, d.bCur[i*k:(i+1)*k], d.bW[i*k:(i+1)*k], d.bDB[i*k:(i+1)*k])
		}
	}
}

// maskedBatch is a batch of columns [j0, j1) of a masked DID lane's block as the Gram lane's
// kernels read it (masked DID's and didHeld's lanes share it).
type maskedBatch struct {
	kern    *gramKernels
	x       Block
	useCols bool
	j0, j1  int
	xd      []float64 // the dense batch (dense, without the column-lane kernels)
	colptr  []int     // the sparse batch
	rows    []int32
	vals    []float64
}

// maskedBatching returns how a masked DID shard's lanes read their batches of block x: the
// kernel path (the generic one for a CSC block whose row indices the assembly cannot trust),
// whether a dense block goes on the column-lane kernels and their batch, and the columns
// between two looks at the flag (and whether a column is several blocks of work), for a
// column costing a pass over it plus extra multiply-adds.
func maskedBatching(e *shardEnv, x Block, extra int) (kern *gramKernels, useCols bool, colsStep, span int, big bool) {
	m, _ := x.Dims()
	kp := paddedK(e.k)
	kern = e.gram()
	if sp, ok := x.(*CSC); ok && kern != &genericGram && sp.Validate() != nil {
		kern = &genericGram // the assembly trusts row indices
	}
	dn, _ := x.(*Dense)
	useCols = kern.cols != nil && dn != nil && m >= colsMinRows
	if useCols {
		colsStep = min(max(8, colsBatchEntries/m/8*8), gramBatchCols)
		perCol := 2*m*kp + extra
		return kern, true, colsStep, e.flag.span(perCol, 8), e.flag.big(perCol)
	}
	perCol := 2*colWork(x, kp) + extra
	return kern, false, 0, e.flag.span(perCol, 1), e.flag.big(perCol)
}

// maskedBatchEnd returns the end of the batch that starts at column j0 of a lane ending at hi.
func maskedBatchEnd(x Block, useCols bool, colsStep, span, j0, hi int) int {
	if useCols {
		return min(j0+colsStep, hi, j0+span)
	}
	return batchEnd(x, j0, min(j0+gramBatchCols, hi, j0+span))
}

// dots runs step 1 of the Gram lane on the batch: h (Kp per column) = B^T x_j, bp B in rows
// of Kp.
func (b *maskedBatch) dots(bp []float64, m, k, kp int, ws *widening, h []float64) {
	kern, j0, j1 := b.kern, b.j0, b.j1
	nb := j1 - j0
	dn, _ := b.x.(*Dense)
	b.xd, b.colptr, b.rows, b.vals = nil, nil, nil, nil
	switch sp, sparse := b.x.(*CSC); {
	case b.useCols:
		tail := colsTailMask(m)
		ng := nb / 8
		if dn.Data != nil {
			xb := dn.Data[j0*m : j1*m]
			if ng > 0 {
				kern.cols.dots64(bp, xb, m, k, kp, ng, tail, h[:ng*8*kp])
			}
			if ng*8 < nb {
				kern.dotsDense(bp, xb[ng*8*m:], m, kp, nb-ng*8, h[ng*8*kp:])
			}
		} else {
			if ng > 0 {
				kern.cols.dots32(bp, dn.Data32[j0*m:(j0+ng*8)*m], m, k, kp, ng, tail, h[:ng*8*kp])
			}
			if ng*8 < nb {
				xt := denseBatch(dn, j0+ng*8, j1, &ws.vals)
				kern.dotsDense(bp, xt, m, kp, nb-ng*8, h[ng*8*kp:])
			}
		}
	case sparse:
		b.colptr, b.rows, b.vals = sparseBatch(sp, j0, j1, &ws.cp, &ws.vals)
		kern.dotsSparse(bp, kp, b.colptr, b.rows, b.vals, h)
	default:
		b.xd = denseBatch(dn, j0, j1, &ws.vals)
		kern.dotsDense(bp, b.xd, m, kp, nb, h)
	}
}

// acc runs steps 3 and 4 of the Gram lane on the batch's updated coefficients cs: A = X C^T
// into a (column-major, the column-lane kernels') or arow (rows of Kp), and C C^T into v,
// which the column-lane kernels form only with withV.
func (b *maskedBatch) acc(m, k, kp int, cs, a, arow, v []float64, withV bool) {
	kern, j0, j1 := b.kern, b.j0, b.j1
	nb := j1 - j0
	switch {
	case b.useCols:
		dn := b.x.(*Dense)
		tail := colsTailMask(m)
		if dn.Data != nil {
			kern.cols.acc64(dn.Data[j0*m:j1*m], m, k, kp, nb, tail, cs, a)
		} else {
			kern.cols.acc32(dn.Data32[j0*m:j1*m], m, k, kp, nb, tail, cs, a)
		}
		if withV {
			kern.accV(cs, k, kp, nb, v)
		}
	case b.colptr != nil:
		kern.accSparse(k, kp, b.colptr, b.rows, b.vals, cs, arow, v)
	default:
		kern.accDense(b.xd, m, k, kp, nb, cs, arow, v)
	}
}

// basisCross returns <B, A> for column-major M x K B and A: per component the products
// rounded and added in row order, the components' sums added in order.
func basisCross(b, a []float64, m, k int) float64 {
	var cross float64
	for p := 0; p < k; p++ {
		var t float64
		ap := a[p*m : (p+1)*m]
		for i, bv := range b[p*m : (p+1)*m] {
			t += float64(bv * ap[i])
		}
		cross += t
	}
	return cross
}
