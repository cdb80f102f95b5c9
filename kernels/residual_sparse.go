package kernels

// The residual a run reports at its end (Machine.LocalResidual), without a pass over every
// row of every column of a sparse block. A column's squared residual over its observed rows O
// splits into its nonzero entries S and the rest:
//
//	||x_O - (B c)_O||^2 = sum_{i in S} (x_i - b_i.c)^2 + sum_{i in O \ S} (b_i.c)^2
//
// The first sum is taken directly, at |S| K flops. The second is an identity, the model's
// squared norm on O less its nonzero rows':
//
//	sum_{i in O \ S} (b_i.c)^2 = c^T G_O c - sum_{i in S} (b_i.c)^2,   G_O = sum_{i in O} b_i b_i^T
//
// with G_O = B^T B, less the held-out pattern's Gram matrix (implicit held-out sets) or the
// listed unobserved rows' squares. B and C are nonnegative, so nothing larger than c^T G c
// cancels, and the identity loses a few eps c^T G c (more for a large M: B^T B's own rounding
// grows with it). It is kept only when the rest is at least sparseResidualCancel of c^T G c
// and c^T G c is a normal number; otherwise the column is computed directly. Measured against
// a compensated sum, the reported residual is within 1e-12 of itself at M = 3,000 and within
// about 2e-12 at M = 200,000 (K=30), and a column fitted exactly stays exact.
//
// A dense block takes the same identity over its nonzero entries, and the columns' values are
// added in column order: the residual has the same bits whatever the block's layout (which
// matio may choose by kernel path), the lanes and the threads. At 200,000 x 20,000 (2%
// stored, K=15) it is 0.4 G flops instead of the direct pass's 60 G.

// sparseResidualCancel is the smallest share of c^T G c the identity's part may be; below it
// the column is computed directly.
const sparseResidualCancel = 1.0 / 64

// sparseResidual holds what the identity needs: B by rows, B^T B, and for an implicit
// held-out set the Gram matrix of each pattern that more than K/2 of the block's columns use
// (a column of a pattern used less sums its held-out rows' squares instead: that is cheaper
// than forming the pattern's matrix).
type sparseResidual struct {
	m, k int
	b    []float64 // B, column-major M x K (for the direct columns)
	brow []float64 // B, row-major M x K
	g    []float64 // B^T B, K x K
	pat  []float64 // pattern l's Gram matrix at l*K*K (implicit held-out sets; else nil)
	hasG [HeldOutPatterns]bool
	// gOK: every entry of B^T B is 0 or a normal number far from overflow, so that the
	// identity's rounding is relative to it (else every column is computed directly).
	gOK bool
}

// newSparseResidual prepares sparseResidual for B (M x K, column-major) and the mask sm (nil
// for an unmasked block).
func newSparseResidual(sm *shardMask, b []float64, m, k int) *sparseResidual {
	r := &sparseResidual{m: m, k: k, b: b, brow: make([]float64, m*k), g: make([]float64, k*k)}
	transpose(r.brow, b, m, k)
	gramCols(b, m, k, r.g, nil)
	r.gOK = true
	for _, v := range r.g {
		r.gOK = r.gOK && (v == 0 || v >= 0x1p-900 && v <= 0x1p900)
	}
	if sm == nil || sm.held == nil {
		return r
	}
	var uses [HeldOutPatterns]int
	for _, l := range sm.pat {
		uses[l]++
	}
	for l, u := range uses {
		if 2*u <= k {
			continue
		}
		if r.pat == nil {
			r.pat = make([]float64, HeldOutPatterns*k*k)
		}
		r.hasG[l] = true
		s := r.pat[l*k*k : (l+1)*k*k]
		for _, i := range sm.held.rows[l] {
			bi := r.brow[int(i)*k : (int(i)+1)*k]
			for p, bp := range bi {
				row := s[p*k : p*k+p+1]
				for q, bq := range bi[:p+1] {
					row[q] += float64(bp * bq)
				}
			}
		}
		for p := 0; p < k; p++ {
			for q := 0; q < p; q++ {
				s[q*k+p] = s[p*k+q]
			}
		}
	}
	return r
}

// quad returns c^T A c for a K x K matrix A: products rounded, added row by row.
func quad(a, c []float64, k int) float64 {
	var s float64
	for p, cp := range c {
		var t float64
		for q, cq := range c {
			t += float64(a[p*k+q] * cq)
		}
		s += float64(cp * t)
	}
	return s
}

// rowsSquares returns the sum over rows of (b_i.c)^2, B by rows (row-major M x K).
func rowsSquares(brow []float64, rows []int32, c []float64) float64 {
	k := len(c)
	var s float64
	for _, i := range rows {
		mi := dot(brow[int(i)*k:(int(i)+1)*k], c)
		s += float64(mi * mi)
	}
	return s
}

// column returns the squared residual of column j of x (X_o: its stored entries are all
// observed; col is column j of a dense block, widened, or nil for a CSC one) over its
// observed rows, unobserved ones given by sm (nil: every row is observed); *e is scratch of M
// for a column computed directly, made at the first.
func (r *sparseResidual) column(x Block, col []float64, sm *shardMask, j int, c []float64, e *[]float64) float64 {
	k := r.k
	total := quad(r.g, c, k)
	model := total // c^T G_O c
	switch {
	case sm != nil && sm.held != nil:
		l := int(sm.pat[j])
		if r.hasG[l] {
			model -= quad(r.pat[l*k*k:(l+1)*k*k], c, k)
			break
		}
		model -= rowsSquares(r.brow, sm.held.rows[l], c)
	case sm != nil:
		model -= rowsSquares(r.brow, sm.urow[sm.uptr[j]:sm.uptr[j+1]], c)
	}
	var stored, storedModel float64
	entry := func(i int, v float64) {
		mi := dot(r.brow[i*k:(i+1)*k], c)
		d := v - mi
		stored += float64(d * d)
		storedModel += float64(mi * mi)
	}
	if xs, ok := x.(*CSC); ok {
		for t := xs.ColPtr[j]; t < xs.ColPtr[j+1]; t++ {
			if v := xs.value(t); v != 0 {
				entry(int(xs.RowIdx[t]), v)
			}
		}
	} else {
		for i, v := range col {
			if v != 0 {
				entry(i, v)
			}
		}
	}
	// B^T B and c^T G c are normal and finite: an overflowing Gram matrix (or one in the
	// subnormals) is no identity to trust.
	if rest := model - storedModel; r.gOK && (total == 0 || total >= 0x1p-900 && total <= 0x1p900 && rest >= sparseResidualCancel*total) {
		if total == 0 {
			rest = 0
		}
		return stored + rest
	}
	if *e == nil {
		*e = make([]float64, r.m)
	}
	if sm != nil {
		return sm.residualSq(j, r.b, c, *e)
	}
	columnInto(x, j, *e)
	return residualNorm(*e, r.b, c, r.m)
}

// reportedResidualSq returns the residual a run reports, ||X_o - B C||^2 over the observed
// entries of the block x (sm nil: unmasked; else sm.x is X_o), by sparseResidual's columns on
// pool (nil: inline), their values added in column order: the same bits for either layout of
// the same values and any number of lanes or threads.
func reportedResidualSq(x Block, sm *shardMask, b, c []float64, k int, pool *Pool) float64 {
	if sm != nil {
		x = sm.x
	}
	m, n := x.Dims()
	r := newSparseResidual(sm, b, m, k)
	dense, _ := x.(*Dense)
	lanes := laneBounds(x, k)
	cols := make([]float64, n)
	run := func(l int) {
		var e, col []float64
		if dense != nil {
			col = make([]float64, m)
		}
		for j := lanes[l]; j < lanes[l+1]; j++ {
			if dense != nil {
				columnInto(dense, j, col)
			}
			cols[j] = r.column(x, col, sm, j, c[j*k:(j+1)*k], &e)
		}
	}
	if pool == nil {
		for l := range len(lanes) - 1 {
			run(l)
		}
	} else {
		pool.Run(len(lanes)-1, run)
	}
	var total float64
	for _, v := range cols {
		total += v
	}
	return total
}
