package kernels

// blockOps computes the products of a data block with the factors on lanes of columns. Products
// that sum over columns (X C^T) add lane partials in lane order, so results do not depend on
// the thread count. Every product looks at the machine's interrupt flag between blocks of
// columns and polls it after its lanes.
//
// B^T X, X C^T and C C^T run on the Gram lane's steps (gramlane.go) of the process's kernel
// path: steps 1, 3 and 4 with their pinned arithmetic (FMA in storage order), so every path
// gives the same bits. The rank-one products of HALS (xcRow, btxRow) are plain Go.
type blockOps struct {
	x     Block
	m, n  int
	k, kp int
	pool  *Pool
	kern  *gramKernels
	lanes []int
	order []int       // laneOrder of lanes
	laneA [][]float64 // per-lane accumulators: M rows of Kp (X C^T), K rows of Kp (C C^T) or M
	// laneH and laneC are per-lane batches of h (Kp per column) and padded coefficients.
	laneH, laneC [][]float64
	laneW        []widening // per lane, for a block stored as float32
	bp           []float64  // B in rows of Kp
	brow         []float64
	flag         *interruptFlag
	// colK and col1 are the columns between two looks at the flag for a pass over a column
	// against K components and against one.
	colK, col1 int
}

func newBlockOps(x Block, k int, pool *Pool, flag *interruptFlag, kern *gramKernels) *blockOps {
	m, n := x.Dims()
	kp := paddedK(k)
	o := &blockOps{x: x, m: m, n: n, k: k, kp: kp, pool: pool, lanes: laneBounds(x, k), brow: make([]float64, m*k),
		bp: make([]float64, m*kp), flag: flag, colK: flag.span(colWork(x, kp), 1), col1: flag.span(colWork(x, 1), 1)}
	o.order = laneOrder(x, o.lanes, k)
	o.kern = kern
	if sp, ok := x.(*CSC); ok && o.kern != &genericGram && sp.Validate() != nil {
		o.kern = &genericGram // the assembly trusts row indices
	}
	nl := len(o.lanes) - 1
	o.laneA, o.laneH, o.laneC = make([][]float64, nl), make([][]float64, nl), make([][]float64, nl)
	o.laneW = make([]widening, nl)
	for l := range o.laneA {
		o.laneA[l] = make([]float64, max(m, k)*kp)
		o.laneH[l] = make([]float64, gramBatchCols*kp)
		o.laneC[l] = make([]float64, gramBatchCols*kp)
	}
	return o
}

// run calls fn on every lane, then polls the interrupt flag: fn should return early when
// o.flag.stopped().
func (o *blockOps) run(fn func(l, lo, hi int)) {
	o.pool.RunOrder(len(o.lanes)-1, o.order, func(l int) { fn(l, o.lanes[l], o.lanes[l+1]) })
	o.flag.poll()
}

// batches calls fn on batches of the lane's columns [lo, hi): at most gramBatchCols columns,
// about gramBatchEntries stored entries and o.colK columns between two looks at the flag. It
// stops early when the machine is interrupted.
func (o *blockOps) batches(lo, hi int, fn func(j0, j1 int)) {
	for j0 := lo; j0 < hi; {
		if o.flag.stopped() {
			return
		}
		j1 := batchEnd(o.x, j0, min(j0+gramBatchCols, hi, j0+o.colK))
		fn(j0, j1)
		j0 = j1
	}
}

// padCoefs copies the coefficients of columns [j0, j1) of c (K x n) into cs, Kp per column.
func (o *blockOps) padCoefs(cs, c []float64, j0, j1 int) {
	k, kp := o.k, o.kp
	for j := j0; j < j1; j++ {
		copy(cs[(j-j0)*kp:(j-j0)*kp+k], c[j*k:(j+1)*k])
	}
}

// btx writes H = B^T X (K x n, column-major) for B (M x K column-major): step 1 of the Gram
// lane on every column.
func (o *blockOps) btx(b, h []float64) {
	m, k, kp := o.m, o.k, o.kp
	packRows(o.bp, b, m, k)
	o.run(func(l, lo, hi int) {
		hb := o.laneH[l]
		ws := &o.laneW[l]
		o.batches(lo, hi, func(j0, j1 int) {
			nb := j1 - j0
			switch x := o.x.(type) {
			case *Dense:
				o.kern.dotsDense(o.bp, denseBatch(x, j0, j1, &ws.vals), m, kp, nb, hb[:nb*kp])
			case *CSC:
				colptr, rows, vals := sparseBatch(x, j0, j1, &ws.cp, &ws.vals)
				o.kern.dotsSparse(o.bp, kp, colptr, rows, vals, hb[:nb*kp])
			}
			for j := j0; j < j1; j++ {
				copy(h[j*k:(j+1)*k], hb[(j-j0)*kp:])
			}
		})
	})
}

// xct writes A = X C^T (M x K, column-major) for C (K x n, column-major): step 3 of the Gram
// lane on every column, lane partials added in lane order.
func (o *blockOps) xct(c, a []float64) {
	m, k, kp := o.m, o.k, o.kp
	o.run(func(l, lo, hi int) {
		acc, cs := o.laneA[l][:m*kp], o.laneC[l]
		clear64(acc)
		clear64(cs)
		ws := &o.laneW[l]
		o.batches(lo, hi, func(j0, j1 int) {
			nb := j1 - j0
			o.padCoefs(cs, c, j0, j1)
			switch x := o.x.(type) {
			case *Dense:
				o.kern.accDenseA(denseBatch(x, j0, j1, &ws.vals), m, kp, nb, cs[:nb*kp], acc)
			case *CSC:
				colptr, rows, vals := sparseBatch(x, j0, j1, &ws.cp, &ws.vals)
				o.kern.accSparseA(kp, colptr, rows, vals, cs[:nb*kp], acc)
			}
		})
	})
	acc := o.laneA[0][:m*kp]
	for l := 1; l < len(o.laneA); l++ {
		for i, v := range o.laneA[l][:m*kp] {
			acc[i] += v
		}
	}
	unpackRows(a, acc, m, k)
}

// xcRow writes a = X c_r^T (length M), where c_r is row r of C (K x n, column-major).
func (o *blockOps) xcRow(c []float64, r int, a []float64) {
	m, k := o.m, o.k
	o.run(func(l, lo, hi int) {
		acc := o.laneA[l][:m]
		clear64(acc)
		for j0 := lo; j0 < hi; j0 += o.col1 {
			if o.flag.stopped() {
				return
			}
			j1 := min(j0+o.col1, hi)
			switch x := o.x.(type) {
			case *Dense:
				xd := denseBatch(x, j0, j1, &o.laneW[l].vals)
				for j := j0; j < j1; j++ {
					if cp := c[j*k+r]; cp != 0 {
						axpy(acc, cp, xd[(j-j0)*m:(j-j0+1)*m])
					}
				}
			case *CSC:
				for j := j0; j < j1; j++ {
					if cp := c[j*k+r]; cp != 0 {
						for t := x.ColPtr[j]; t < x.ColPtr[j+1]; t++ {
							acc[x.RowIdx[t]] += float64(x.value(t) * cp)
						}
					}
				}
			}
		}
	})
	copy(a, o.laneA[0][:m])
	for l := 1; l < len(o.laneA); l++ {
		for i, v := range o.laneA[l][:m] {
			a[i] += v
		}
	}
}

// btxRow writes h_j = b^T x_j for every column j (length n), for one column b of length M.
func (o *blockOps) btxRow(b, h []float64) {
	m := o.m
	switch x := o.x.(type) {
	case *Dense:
		o.run(func(l, lo, hi int) {
			for j0 := lo; j0 < hi; j0 += o.col1 {
				if o.flag.stopped() {
					return
				}
				j1 := min(j0+o.col1, hi)
				xd := denseBatch(x, j0, j1, &o.laneW[l].vals)
				for j := j0; j < j1; j++ {
					h[j] = dot(b, xd[(j-j0)*m:(j-j0+1)*m])
				}
			}
		})
	case *CSC:
		o.run(func(_, lo, hi int) {
			for j0 := lo; j0 < hi; j0 += o.col1 {
				if o.flag.stopped() {
					return
				}
				for j, j1 := j0, min(j0+o.col1, hi); j < j1; j++ {
					var s float64
					for t := x.ColPtr[j]; t < x.ColPtr[j+1]; t++ {
						s += float64(x.value(t) * b[x.RowIdx[t]])
					}
					h[j] = s
				}
			}
		})
	}
}

// cct writes V = C C^T (K x K, symmetric row-major): step 4 of the Gram lane on every column,
// lane partials added in lane order.
func (o *blockOps) cct(c, v []float64) {
	k, kp := o.k, o.kp
	span := o.flag.span(k*kp/2+1, 1)
	o.run(func(l, lo, hi int) {
		acc, cs := o.laneA[l][:k*kp], o.laneC[l]
		clear64(acc)
		clear64(cs)
		for j0 := lo; j0 < hi; {
			if o.flag.stopped() {
				return
			}
			j1 := min(j0+gramBatchCols, hi, j0+span)
			o.padCoefs(cs, c, j0, j1)
			o.kern.accV(cs[:(j1-j0)*kp], k, kp, j1-j0, acc)
			j0 = j1
		}
	})
	clear64(v)
	for l := range o.laneA {
		acc := o.laneA[l]
		for p := 0; p < k; p++ {
			for q := 0; q <= p; q++ {
				v[p*k+q] += acc[p*kp+q]
			}
		}
	}
	for p := 0; p < k; p++ {
		for q := 0; q < p; q++ {
			v[q*k+p] = v[p*k+q]
		}
	}
}

// gramObjective returns ||X||^2 - 2<B, X C^T> + <B^T B, C C^T> from its pieces (clamped at 0).
func gramObjective(sqNormX float64, b, xct, btb, cct []float64) float64 {
	obj := sqNormX - float64(2*frob(b, xct)) + frob(btb, cct)
	if obj < 0 {
		return 0
	}
	return obj
}
