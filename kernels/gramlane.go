package kernels

import "math"

// DID's Gram-form lane kernel. Its arithmetic is pinned (see "Pinned arithmetic" in doc.go):
// the generic Go code below and the assembly paths (gramlane_amd64.go) perform the same IEEE
// operations in the same order on every value, so every path gives the same bits. For a lane of
// columns [lo, hi), with Kp = K rounded up to a multiple of 4, B and A = X C^T stored as rows of
// Kp values (row i holds components 0..Kp-1 of feature i; pads are 0) and fma(a, b, c) the
// correctly rounded a·b + c:
//
//  1. h_j[p] = fma(B[r_t, p], x_t, h_j[p]) over the stored entries t of column j in storage
//     order (every row for a dense block), from h_j[p] = +0, for p < Kp.
//  2. For p = 0..K-1: s = h_j[p]; s = fma(-G[p, q], c_j[q], s) for q = p..K-1 (coefficients
//     not yet updated), then for q = 0..p-1 (updated ones); n = fma(s, 1/G[p, p], c_j[p]) (the
//     reciprocal is 0 for a dead component); c_j[p] = 0 if n < 0, else n (so -0 and NaN are
//     kept). Taking the old coefficients first keeps them off the chain of dependent
//     operations from one component to the next, which bounds the update's speed. With a
//     penalty on C (see "Penalties" in doc.go) G is G + l2 I in -G and 1/G[p, p], and
//     h_j[p] = h_j[p] - l1 (one rounded subtraction, in Go on every path) between steps 1
//     and 2 (gramLaneShift).
//  3. A[r_t, p] = fma(x_t, c_j[p], A[r_t, p]) over the stored entries in storage order, columns
//     in order, for p < Kp (c_j's pads are 0).
//  4. V[p, q] = fma(c_j[p], c_j[q], V[p, q]) for p < K and q <= p (computed in lanes of 4 up
//     to the chunk that holds q = p), columns in order.
//
// Columns are independent in steps 1 and 2, so a path may interleave them (the assembly works
// on 8 dense or 4 sparse columns at a time, and updates 4 columns a vector); steps 3 and 4
// accumulate in column order. Only h_j[p] for p < K is read, so a path may leave h's pads 0.
// A vector's lanes may hold components, columns (step 1 of the AVX-512 column-lane kernels) or
// rows of A (their step 3): each lane still computes one value with the operations above, in
// the order above. The lane runs the steps on batches of columns (all h, then all
// updates, then A and V), which only regroups the same operations.

// gramKernels are one path's implementations of the lane's steps. Every function has the
// semantics of its generic counterpart (dotsDenseGo, ...) bit for bit.
type gramKernels struct {
	// dotsDense sets h[j*kp+p] (step 1) for the ncols dense columns of x (m values each).
	dotsDense func(bp, x []float64, m, kp, ncols int, h []float64)
	// dotsSparse is dotsDense for CSC columns: column u has entries colptr[u]..colptr[u+1]-1 of
	// rows and vals.
	dotsSparse func(bp []float64, kp int, colptr []int, rows []int32, vals []float64, h []float64)
	// update runs step 2 on ncols columns: it reads c (k per column), writes the new
	// coefficients to c and to cs (kp per column, pads left as they are: 0).
	update func(h, cs, c, gneg, ginv []float64, k, kp, ncols int)
	// accDense runs steps 3 and 4 for dense columns; v is k rows of kp.
	accDense func(x []float64, m, k, kp, ncols int, cs, a, v []float64)
	// accSparse runs steps 3 and 4 for CSC columns.
	accSparse func(k, kp int, colptr []int, rows []int32, vals []float64, cs, a, v []float64)
	// accDenseA, accSparseA and accV run step 3 alone and step 4 alone (for the products of
	// the other algorithms, blockOps).
	accDenseA  func(x []float64, m, kp, ncols int, cs, a []float64)
	accSparseA func(kp int, colptr []int, rows []int32, vals []float64, cs, a []float64)
	accV       func(cs []float64, k, kp, ncols int, v []float64)
	// accVIdx is accV on vectors gathered by index (accVIdxGo): x = src[idx[t]·stride:][:k]
	// for t in order, components k..kp-1 taken as 0.
	accVIdx func(src []float64, stride int, idx []int32, k, kp int, v []float64)
	// accAIdx is accDenseA on a one-row block over vectors gathered by index (accAIdxGo): the
	// row's values w, the coefficients c_j = src[idx[t]·stride:][:k].
	accAIdx func(src []float64, stride int, idx []int32, w []float64, k, kp int, a []float64)
	// fused, when set, runs steps 1-4 in one pass on 4·ngroups dense float64 columns of
	// m <= maxFusedM rows for k <= 4 (kp = 4); g4 and i4 hold each value of -G and 1/diag(G)
	// four times, and i4 then l1 (the L1 penalty subtracted from h after step 1) four times.
	fused func(x, bp, g4, i4, c []float64, m, k, ngroups int, a, v []float64)
	// sweeps runs accelerated DID's further C sweeps (step 2b, sweepCoefsGo's semantics) on
	// ncols columns after update: old holds their coefficients before update.
	sweeps func(h, cs, c, old, gneg, ginv []float64, k, kp, ncols, extra int, eps2 float64)
	// fusedAccel, when set, is fused with accelerated DID's further C sweeps: on the same
	// columns it gives the bits of dotsDense, subtractL1, update, sweeps (extra further sweeps
	// at most, stopping at eps2, as sweepCoefsGo) and accDense. i4 and g4 as for fused.
	fusedAccel func(x, bp, g4, i4, c []float64, m, k, ngroups, extra int, eps2 float64, a, v []float64)
	// fusedExtrap, when set, is fusedAccel with accelerated DID's extrapolation after the
	// sweeps (extra >= 0: none when 0): the bits of dotsDense, subtractL1, update, sweeps,
	// extrapolateCoefs (cprev: the columns' previous plain coefficients, k a column, which
	// take the new plain ones; beta) and accDense on the moved coefficients.
	fusedExtrap func(x, bp, g4, i4, c []float64, m, k, ngroups, extra int, eps2 float64, cprev []float64, beta float64, a, v []float64)
	// cols, when set, runs steps 1 and 3 of dense blocks of at least colsMinRows rows with
	// the vector lanes over columns and rows (see denseCols).
	cols *denseCols
}

// denseCols are a path's column-lane kernels for steps 1 and 3 of dense blocks, for X stored
// as float64 or float32:
//   - dots sets h (kp per column, pads written as 0) for 8·ngroups columns; bp must have
//     colsRows(m) rows of kp, zero beyond row m; tailmask = colsTailMask(m);
//   - acc adds step 3 for ncols columns to at, A transposed (at[p*m+i] = A[i, p]).
//
// Each lane of a vector computes one value of h or A with the generic operations in the
// generic order, so the bits are those of dotsDenseGo and accDenseGo.
type denseCols struct {
	dots64 func(bp, x []float64, m, k, kp, ngroups, tailmask int, h []float64)
	dots32 func(bp []float64, x []float32, m, k, kp, ngroups, tailmask int, h []float64)
	acc64  func(x []float64, m, k, kp, ncols, tailmask int, cs, at []float64)
	acc32  func(x []float32, m, k, kp, ncols, tailmask int, cs, at []float64)
}

// colsMinRows is the fewest rows for which a dense block takes the column-lane kernels (fewer
// rows leave too little work per transposed block of eight).
const colsMinRows = 16

// colsRows is m rounded up to a multiple of 8: the rows of B the column-lane dots read.
func colsRows(m int) int { return (m + 7) / 8 * 8 }

// colsTailMask is the lane mask of the last m mod 8 rows (0 when m is a multiple of 8).
func colsTailMask(m int) int { return 1<<(m%8) - 1 }

// genericGram is the pure-Go path, the definition the others match.
var genericGram = gramKernels{
	dotsDense:  dotsDenseGo,
	dotsSparse: dotsSparseGo,
	update:     updateCoefsGo,
	accDense: func(x []float64, m, k, kp, ncols int, cs, a, v []float64) {
		accDenseGo(x, m, kp, ncols, cs, a)
		accVGo(cs, k, kp, ncols, v)
	},
	accSparse: func(k, kp int, colptr []int, rows []int32, vals []float64, cs, a, v []float64) {
		accSparseGo(kp, colptr, rows, vals, cs, a)
		accVGo(cs, k, kp, len(colptr)-1, v)
	},
	accDenseA:  accDenseGo,
	accSparseA: accSparseGo,
	accV:       accVGo,
	accVIdx:    accVIdxGo,
	accAIdx:    accAIdxGo,
	sweeps:     sweepCoefsGo,
}

// gramBatchCols is the most columns a lane carries through the steps at a time, and
// gramBatchEntries about the most stored entries (so a batch of X stays in the L2 cache between
// steps 1 and 3).
const (
	gramBatchCols    = 256
	gramBatchEntries = 1 << 14
)

// colsBatchEntries is about the most stored entries of a batch on the column-lane kernels,
// whose batch is read twice (steps 1 and 3) and stays in L2 in between.
const colsBatchEntries = 1 << 16

// gramLaneScratch returns the scratch length gramLane needs for m rows and rank k.
func gramLaneScratch(m, k int) int { return 2*gramBatchCols*paddedK(k) + max(m*k, 4*k*k+4*k+4) }

// maxFusedM is the most rows of the fused small-shape kernels.
const maxFusedM = 8

// repeat4 sets dst[4i..4i+3] to src[i] (the broadcast copies of -G and 1/diag(G) that the
// four-column update kernels read as vectors).
func repeat4(dst, src []float64) {
	dst = dst[:4*len(src)]
	for i, g := range src {
		dst[4*i], dst[4*i+1], dst[4*i+2], dst[4*i+3] = g, g, g, g
	}
}

// fusedScalars fills the fused kernels' broadcast scalars: g4 (4k^2) the copies of -G, and i4
// (4k+4) those of 1/diag(G) followed by four copies of the L1 penalty l1.
func fusedScalars(g4, i4, gneg, ginv []float64, k int, l1 float64) {
	repeat4(g4, gneg[:k*k])
	repeat4(i4[:4*k], ginv[:k])
	for u := 4 * k; u < 4*k+4; u++ {
		i4[u] = l1
	}
}

// widening is a lane's scratch for the widened values of a batch of a block stored as float32.
type widening struct {
	vals []float64
	cp   []int
}

// gramLane runs the Gram-form C update on columns [lo, hi) of x, adding to a (m rows of kp)
// and v (k rows of kp). gneg is -G (K x K), ginv the reciprocals of G's diagonal (0 for a dead
// component), bp is B in rows of kp. ws (nil for a block stored as float64) holds the widened
// values of a float32 block's batch. It looks at the interrupt flag before each batch, and
// between the steps of a column when a column is several blocks of work.
func gramLane(kern *gramKernels, x Block, k, lo, hi int, bp, gneg, ginv, c, a, v, scratch []float64, ws *widening, flag *interruptFlag) {
	gramLaneShift(kern, x, k, lo, hi, bp, gneg, ginv, 0, c, a, v, scratch, ws, nil, flag)
}

// gramLaneShift is gramLane for the penalized C update: l1 (the L1 penalty on C; 0 without
// one) is subtracted from every h_j[p], p < K, between steps 1 and 2, h_j[p] = h_j[p] - l1, on
// every path in Go. The L2 penalty needs nothing here: it is in gneg and ginv (G + l2 I). With
// the fused small-shape kernel, which runs steps 1 and 2 in one pass, subtracts l1 between
// them as well (the last four values of its ginv4), so penalties cost it nothing.
//
// norms, when not nil, takes the new coefficients of each batch of columns, in column order,
// while they are still in cache (normSums.push): the norms of the lane's C after the update.
//
// scratch (gramLaneScratch long) must be all 0 on its first use, and then be used by
// gramLaneShift alone: it keeps what needs to stay 0 at 0.
func gramLaneShift(kern *gramKernels, x Block, k, lo, hi int, bp, gneg, ginv []float64, l1 float64, c, a, v, scratch []float64, ws *widening, norms *normSums, flag *interruptFlag) {
	gramLaneSweep(kern, x, k, lo, hi, bp, gneg, ginv, l1, c, a, v, scratch, ws, norms, nil, flag)
}

// gramLaneSweep is gramLaneShift for accelerated DID: with sw set, every column's update is
// followed by its further sweeps (step 2b, kern.sweeps, or kern.fusedAccel on the fused
// shapes), which read the same h. sw nil is gramLaneShift.
func gramLaneSweep(kern *gramKernels, x Block, k, lo, hi int, bp, gneg, ginv []float64, l1 float64, c, a, v, scratch []float64, ws *widening, norms *normSums, sw *coefSweeps, flag *interruptFlag) {
	m, _ := x.Dims()
	kp := paddedK(k)
	h := scratch[:gramBatchCols*kp]
	// cs's pads must be 0 (step 3 reads kp values a column). They are in a fresh scratch, and
	// every update kernel leaves them as they are, so a lane's scratch is cleared once, when
	// it is made, not at each call: clearing 8 KB that the lanes' streaming of X has pushed
	// out of the caches cost about 1 µs a lane (0.8% of a 1e6 x 5 iteration).
	cs := scratch[gramBatchCols*kp : 2*gramBatchCols*kp]
	if ws == nil {
		ws = &widening{}
	}
	dn, _ := x.(*Dense)
	fused := kern.fused != nil
	if sw != nil {
		fused = sw.fusable(kern)
	}
	if fused && dn != nil && dn.Data != nil && kp == 4 && m <= maxFusedM {
		extra := scratch[2*gramBatchCols*kp:]
		g4, i4 := extra[:4*k*k], extra[4*k*k:4*k*k+4*k+4]
		fusedScalars(g4, i4, gneg, ginv, k, l1)
		gramLaneFused(kern, dn, k, lo, hi, bp, gneg, ginv, l1, g4, i4, c, a, v, h, cs, norms, sw, flag)
		return
	}
	if cols := kern.cols; cols != nil && dn != nil && m >= colsMinRows && len(bp) >= colsRows(m)*kp {
		at := scratch[2*gramBatchCols*kp : 2*gramBatchCols*kp+m*k]
		unpackRows(at, a, m, k) // at is A column-major: at[p*m+i] = A[i, p]
		gramLaneCols(kern, cols, dn, k, lo, hi, bp, gneg, ginv, l1, c, at, v, h, cs, ws, norms, sw, flag)
		for p := 0; p < k; p++ { // not packRows: a's pads keep their values
			for i := range m {
				a[i*kp+p] = at[p*m+i]
			}
		}
		return
	}
	perCol := 2*colWork(x, kp) + k*k + k*kp
	span := flag.span(perCol, 1)
	big := flag.big(perCol)
	sp, sparse := x.(*CSC)
	for j0 := lo; j0 < hi; {
		if flag.stopped() {
			return
		}
		j1 := batchEnd(x, j0, min(j0+gramBatchCols, hi, j0+span))
		nb := j1 - j0
		var xd, vals []float64
		var colptr []int
		var rows []int32
		if sparse {
			colptr, rows, vals = sparseBatch(sp, j0, j1, &ws.cp, &ws.vals)
			kern.dotsSparse(bp, kp, colptr, rows, vals, h[:nb*kp])
		} else {
			xd = denseBatch(dn, j0, j1, &ws.vals)
			kern.dotsDense(bp, xd, m, kp, nb, h[:nb*kp])
		}
		subtractL1(h, l1, k, kp, nb)
		if big && flag.stopped() {
			return
		}
		updateSweep(kern, h, cs, c[j0*k:j1*k], gneg, ginv, k, kp, nb, j0, sw)
		norms.push(c[j0*k : j1*k])
		if big && flag.stopped() {
			return
		}
		if sparse {
			kern.accSparse(k, kp, colptr, rows, vals, cs[:nb*kp], a, v)
		} else {
			kern.accDense(xd, m, k, kp, nb, cs[:nb*kp], a, v)
		}
		j0 = j1
	}
}

// gramLaneFused is gramLane for a small dense float64 block on the fused kernel: groups of
// four columns in one pass, the last columns of a batch (fewer than four) by the separate
// steps after them, so that A and V still accumulate in column order. With sw set, the
// accelerated form: further sweeps (fusedAccel) and, when sw extrapolates, the extrapolation
// (fusedExtrap, on sw.cprev's columns), as updateSweep runs them on the last columns.
func gramLaneFused(kern *gramKernels, x *Dense, k, lo, hi int, bp, gneg, ginv []float64, l1 float64, g4, i4, c, a, v, h, cs []float64, norms *normSums, sw *coefSweeps, flag *interruptFlag) {
	m := x.Rows
	kp := paddedK(k)
	span := flag.span(m*kp+k*k+k*kp+m*kp, 4)
	for j0 := lo; j0 < hi; {
		if flag.stopped() {
			return
		}
		j1 := min(hi, j0+span)
		if n4 := (j1 - j0) / 4; n4 > 0 {
			xg, cg := x.Data[j0*m:(j0+4*n4)*m], c[j0*k:(j0+4*n4)*k]
			switch {
			case sw == nil:
				kern.fused(xg, bp, g4, i4, cg, m, k, n4, a, v)
			case sw.extrap:
				kern.fusedExtrap(xg, bp, g4, i4, cg, m, k, n4, sw.extra, sw.eps2, sw.cprev[j0*k:(j0+4*n4)*k], sw.beta, a, v)
			default:
				kern.fusedAccel(xg, bp, g4, i4, cg, m, k, n4, sw.extra, sw.eps2, a, v)
			}
			norms.push(c[j0*k : (j0+4*n4)*k])
			j0 += 4 * n4
		}
		if j0 < j1 {
			nb := j1 - j0
			xd := x.Data[j0*m : j1*m]
			kern.dotsDense(bp, xd, m, kp, nb, h[:nb*kp])
			subtractL1(h, l1, k, kp, nb)
			updateSweep(kern, h, cs, c[j0*k:j1*k], gneg, ginv, k, kp, nb, j0, sw)
			norms.push(c[j0*k : j1*k])
			kern.accDense(xd, m, k, kp, nb, cs[:nb*kp], a, v)
			j0 = j1
		}
	}
}

// gramLaneCols is gramLane for a dense block on the column-lane kernels, with A transposed
// in at.
func gramLaneCols(kern *gramKernels, cols *denseCols, x *Dense, k, lo, hi int, bp, gneg, ginv []float64, l1 float64, c, at, v, h, cs []float64, ws *widening, norms *normSums, sw *coefSweeps, flag *interruptFlag) {
	m := x.Rows
	kp := paddedK(k)
	tail := colsTailMask(m)
	perCol := 2*m*kp + k*k + k*kp
	span := flag.span(perCol, 8)
	big := flag.big(perCol)
	step := max(8, colsBatchEntries/m/8*8)
	for j0 := lo; j0 < hi; {
		if flag.stopped() {
			return
		}
		j1 := min(j0+min(step, gramBatchCols), hi, j0+span)
		nb := j1 - j0
		ng := nb / 8
		if x.Data != nil {
			xb := x.Data[j0*m : j1*m]
			if ng > 0 {
				cols.dots64(bp, xb, m, k, kp, ng, tail, h[:ng*8*kp])
			}
			if ng*8 < nb {
				kern.dotsDense(bp, xb[ng*8*m:], m, kp, nb-ng*8, h[ng*8*kp:nb*kp])
			}
		} else {
			xb := x.Data32[j0*m : j1*m]
			if ng > 0 {
				cols.dots32(bp, xb, m, k, kp, ng, tail, h[:ng*8*kp])
			}
			if ng*8 < nb {
				xd := denseBatch(x, j0+ng*8, j1, &ws.vals)
				kern.dotsDense(bp, xd, m, kp, nb-ng*8, h[ng*8*kp:nb*kp])
			}
		}
		subtractL1(h, l1, k, kp, nb)
		if big && flag.stopped() {
			return
		}
		updateSweep(kern, h, cs, c[j0*k:j1*k], gneg, ginv, k, kp, nb, j0, sw)
		norms.push(c[j0*k : j1*k])
		if big && flag.stopped() {
			return
		}
		if x.Data != nil {
			cols.acc64(x.Data[j0*m:j1*m], m, k, kp, nb, tail, cs[:nb*kp], at)
		} else {
			cols.acc32(x.Data32[j0*m:j1*m], m, k, kp, nb, tail, cs[:nb*kp], at)
		}
		kern.accV(cs[:nb*kp], k, kp, nb, v)
		j0 = j1
	}
}

// coefSweeps is a lane's setting and scratch for accelerated DID's C update beyond plain
// DID's one sweep: further sweeps and extrapolation. A nil *coefSweeps is plain DID.
type coefSweeps struct {
	extra int     // further sweeps at most (Accel.CSweeps - 1)
	eps2  float64 // Accel.eps2()
	old   []float64
	// With extrapolation: beta this iteration and the shard's previous plain coefficients
	// (K x n_i, column-major), which each column's update replaces with its new ones.
	extrap bool
	beta   float64
	cprev  []float64
}

// newCoefSweeps returns the lane setting of accel's C update for rank k (nil for plain
// DID's): old holds a batch's coefficients before the first sweep.
func newCoefSweeps(a Accel, k int) *coefSweeps {
	if a.cExtra() == 0 && !a.Extrapolate {
		return nil
	}
	return &coefSweeps{extra: a.cExtra(), eps2: a.eps2(), old: make([]float64, gramBatchCols*k), extrap: a.Extrapolate}
}

// fusable reports whether a lane with this setting may take a fused kernel of kern: its
// accelerated form, with the extrapolation when the setting extrapolates.
func (sw *coefSweeps) fusable(kern *gramKernels) bool {
	return kern.fusedAccel != nil && (!sw.extrap || kern.fusedExtrap != nil)
}

// updateSweep runs step 2 on the batch of ncols columns that starts at column j0 of the
// shard and, with sw set, their further sweeps and their extrapolation (extrapolateCoefs).
func updateSweep(kern *gramKernels, h, cs, c, gneg, ginv []float64, k, kp, ncols, j0 int, sw *coefSweeps) {
	if sw == nil {
		kern.update(h, cs, c, gneg, ginv, k, kp, ncols)
		return
	}
	if sw.extra > 0 {
		old := sw.old[:ncols*k]
		copy(old, c[:ncols*k])
		kern.update(h, cs, c, gneg, ginv, k, kp, ncols)
		kern.sweeps(h, cs, c, old, gneg, ginv, k, kp, ncols, sw.extra, sw.eps2)
	} else {
		kern.update(h, cs, c, gneg, ginv, k, kp, ncols)
	}
	if sw.extrap {
		extrapolateCoefs(cs, c, sw.cprev[j0*k:(j0+ncols)*k], sw.beta, k, kp, ncols)
	}
}

// extrapolateCoefs moves each of ncols columns on along its last step: with c the new plain
// coefficients and p the previous plain ones, c_p <- max(0, fma(beta, c_p - p_p, c_p)) (NaN
// kept), p_p <- the plain c_p, and cs (kp per column) takes the moved values.
func extrapolateCoefs(cs, c, prev []float64, beta float64, k, kp, ncols int) {
	for j := 0; j < ncols; j++ {
		cj, pj, row := c[j*k:j*k+k], prev[j*k:j*k+k], cs[j*kp:j*kp+k]
		for p, v := range cj {
			n := math.FMA(beta, v-pj[p], v)
			if n < 0 {
				n = 0
			}
			pj[p] = v
			cj[p] = n
			row[p] = n
		}
	}
}

// subtractL1 sets h_j[p] = h_j[p] - l1 for p < k of ncols columns (kp per column): the L1
// penalty's shift of B^T x_j. Nothing for l1 = 0.
func subtractL1(h []float64, l1 float64, k, kp, ncols int) {
	if l1 == 0 {
		return
	}
	for j := 0; j < ncols; j++ {
		hj := h[j*kp : j*kp+k]
		for p := range hj {
			hj[p] -= l1
		}
	}
}

// batchEnd returns where a batch of x's columns that starts at j0 ends, at most at limit: after
// about gramBatchEntries stored entries (at least one column), so that the batch of X stays in
// the L2 cache between the steps that read it.
func batchEnd(x Block, j0, limit int) int {
	if sp, ok := x.(*CSC); ok {
		base := sp.ColPtr[j0]
		for e := j0 + 1; e < limit; e++ {
			if sp.ColPtr[e+1]-base > gramBatchEntries {
				return e
			}
		}
		return limit
	}
	m, _ := x.Dims()
	n := max(1, gramBatchEntries/max(m, 1))
	if n > 8 {
		n = n / 8 * 8
	}
	return min(limit, j0+n)
}

// dotsDenseGo is step 1 for dense columns.
func dotsDenseGo(bp, x []float64, m, kp, ncols int, h []float64) {
	for j := 0; j < ncols; j++ {
		xj := x[j*m : j*m+m]
		for p0 := 0; p0 < kp; p0 += 4 {
			var h0, h1, h2, h3 float64
			for i, xi := range xj {
				r := bp[i*kp+p0 : i*kp+p0+4 : i*kp+p0+4]
				h0 = math.FMA(r[0], xi, h0)
				h1 = math.FMA(r[1], xi, h1)
				h2 = math.FMA(r[2], xi, h2)
				h3 = math.FMA(r[3], xi, h3)
			}
			hj := h[j*kp+p0 : j*kp+p0+4 : j*kp+p0+4]
			hj[0], hj[1], hj[2], hj[3] = h0, h1, h2, h3
		}
	}
}

// dotsSparseGo is step 1 for CSC columns.
func dotsSparseGo(bp []float64, kp int, colptr []int, rows []int32, vals []float64, h []float64) {
	for j := 0; j+1 < len(colptr); j++ {
		rs := rows[colptr[j]:colptr[j+1]]
		xs := vals[colptr[j]:colptr[j+1]]
		xs = xs[:len(rs)]
		for p0 := 0; p0 < kp; p0 += 4 {
			var h0, h1, h2, h3 float64
			for t, ri := range rs {
				xi := xs[t]
				o := int(ri)*kp + p0
				r := bp[o : o+4 : o+4]
				h0 = math.FMA(r[0], xi, h0)
				h1 = math.FMA(r[1], xi, h1)
				h2 = math.FMA(r[2], xi, h2)
				h3 = math.FMA(r[3], xi, h3)
			}
			hj := h[j*kp+p0 : j*kp+p0+4 : j*kp+p0+4]
			hj[0], hj[1], hj[2], hj[3] = h0, h1, h2, h3
		}
	}
}

// updateCoefsGo is step 2.
func updateCoefsGo(h, cs, c, gneg, ginv []float64, k, kp, ncols int) {
	if k == 3 {
		updateCoefs3(h, cs, c, gneg, ginv, ncols)
		return
	}
	for j := 0; j < ncols; j++ {
		cj := c[j*k : j*k+k]
		row := cs[j*kp : j*kp+k]
		hj := h[j*kp : j*kp+k]
		copy(row, cj)
		updateCoefRow(row, hj, gneg, ginv, k)
		copy(cj, row)
	}
}

// updateCoefRow is step 2 on one column: row holds its K coefficients, updated in place from
// hj (its h_j), -G and 1/diag(G), in the pinned order (gramlane.go's header).
func updateCoefRow(row, hj, gneg, ginv []float64, k int) {
	for p := range row {
		s := hj[p]
		gp := gneg[p*k : p*k+k]
		for q := p; q < k; q++ {
			s = math.FMA(gp[q], row[q], s)
		}
		for q := 0; q < p; q++ {
			s = math.FMA(gp[q], row[q], s)
		}
		n := math.FMA(s, ginv[p], row[p])
		if n < 0 {
			n = 0
		}
		row[p] = n
	}
}

// updateCoefs3 is updateCoefsGo for k = 3, unrolled (the paper's shape).
func updateCoefs3(h, cs, c, gneg, ginv []float64, ncols int) {
	gn := gneg[:9:9]
	g00, g01, g02, g10, g11, g12, g20, g21, g22 := gn[0], gn[1], gn[2], gn[3], gn[4], gn[5], gn[6], gn[7], gn[8]
	i0, i1, i2 := ginv[0], ginv[1], ginv[2]
	c = c[:3*ncols]
	for j := 0; j < ncols; j++ {
		hj := h[4*j : 4*j+3 : 4*j+3]
		cj := c[3*j : 3*j+3 : 3*j+3]
		c0, c1, c2 := cj[0], cj[1], cj[2]
		s0 := math.FMA(g02, c2, math.FMA(g01, c1, math.FMA(g00, c0, hj[0])))
		s1 := math.FMA(g12, c2, math.FMA(g11, c1, hj[1]))
		s2 := math.FMA(g22, c2, hj[2])
		if c0 = math.FMA(s0, i0, c0); c0 < 0 {
			c0 = 0
		}
		s1 = math.FMA(g10, c0, s1)
		if c1 = math.FMA(s1, i1, c1); c1 < 0 {
			c1 = 0
		}
		s2 = math.FMA(g21, c1, math.FMA(g20, c0, s2))
		if c2 = math.FMA(s2, i2, c2); c2 < 0 {
			c2 = 0
		}
		cj[0], cj[1], cj[2] = c0, c1, c2
		row := cs[4*j : 4*j+3 : 4*j+3]
		row[0], row[1], row[2] = c0, c1, c2
	}
}

// accDenseGo is step 3 for dense columns.
func accDenseGo(x []float64, m, kp, ncols int, cs, a []float64) {
	a = a[:m*kp]
	for j := 0; j < ncols; j++ {
		xj := x[j*m : j*m+m]
		cj := cs[j*kp : j*kp+kp]
		for i, xi := range xj {
			row := a[i*kp : i*kp+kp]
			row = row[:len(cj)]
			for p, cp := range cj {
				row[p] = math.FMA(xi, cp, row[p])
			}
		}
	}
}

// accSparseGo is step 3 for CSC columns.
func accSparseGo(kp int, colptr []int, rows []int32, vals []float64, cs, a []float64) {
	for j := 0; j+1 < len(colptr); j++ {
		rs := rows[colptr[j]:colptr[j+1]]
		xs := vals[colptr[j]:colptr[j+1]]
		xs = xs[:len(rs)]
		cj := cs[j*kp : j*kp+kp]
		for t, ri := range rs {
			xi := xs[t]
			row := a[int(ri)*kp : int(ri)*kp+kp]
			row = row[:len(cj)]
			for p, cp := range cj {
				row[p] = math.FMA(xi, cp, row[p])
			}
		}
	}
}

// accVGo is step 4.
func accVGo(cs []float64, k, kp, ncols int, v []float64) {
	for j := 0; j < ncols; j++ {
		cj := cs[j*kp : j*kp+kp]
		for p := 0; p < k; p++ {
			cp := cj[p]
			n := (p/4 + 1) * 4
			row := v[p*kp : p*kp+n]
			for q, cq := range cj[:n] {
				row[q] = math.FMA(cp, cq, row[q])
			}
		}
	}
}

// paddedK rounds k up to a multiple of 4, the width of the kernels' component lanes.
func paddedK(k int) int { return (k + 3) / 4 * 4 }

// packRows writes the column-major m x k matrix b as m rows of kp = paddedK(k) values (pads 0).
func packRows(dst, b []float64, m, k int) {
	kp := paddedK(k)
	clear64(dst[:m*kp])
	for p := 0; p < k; p++ {
		for i, v := range b[p*m : (p+1)*m] {
			dst[i*kp+p] = v
		}
	}
}

// unpackRows is the inverse of packRows.
func unpackRows(dst, rows []float64, m, k int) {
	kp := paddedK(k)
	for p := 0; p < k; p++ {
		col := dst[p*m : (p+1)*m]
		for i := range col {
			col[i] = rows[i*kp+p]
		}
	}
}
