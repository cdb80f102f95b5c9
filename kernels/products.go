package kernels

// blockOps computes the products of a data block with the factors on lanes of columns. Products
// that sum over columns (X C^T) add lane partials in lane order, so results do not depend on
// the thread count. Every product looks at the machine's interrupt flag between blocks of
// columns and polls it after its lanes.
type blockOps struct {
	x     Block
	m, n  int
	k     int
	pool  *Pool
	lanes []int
	laneA [][]float64 // per-lane M x K (or M) accumulators
	brow  []float64
	flag  *interruptFlag
	// colK and col1 are the columns between two looks at the flag for a pass over a column
	// against K components and against one.
	colK, col1 int
}

func newBlockOps(x Block, k int, pool *Pool, flag *interruptFlag) *blockOps {
	m, n := x.Dims()
	o := &blockOps{x: x, m: m, n: n, k: k, pool: pool, lanes: laneBounds(x, k), brow: make([]float64, m*k),
		flag: flag, colK: flag.span(colWork(x, k), 1), col1: flag.span(colWork(x, 1), 1)}
	o.laneA = make([][]float64, len(o.lanes)-1)
	for l := range o.laneA {
		o.laneA[l] = make([]float64, m*k)
	}
	return o
}

// run calls fn on every lane, then polls the interrupt flag: fn should return early when
// o.flag.stopped().
func (o *blockOps) run(fn func(l, lo, hi int)) {
	o.pool.Run(len(o.lanes)-1, func(l int) { fn(l, o.lanes[l], o.lanes[l+1]) })
	o.flag.poll()
}

// btx writes H = B^T X (K x n, column-major) for B (M x K column-major).
func (o *blockOps) btx(b, h []float64) {
	m, k := o.m, o.k
	switch x := o.x.(type) {
	case *Dense:
		o.run(func(_, lo, hi int) {
			for j0 := lo; j0 < hi; j0 += o.colK {
				if o.flag.stopped() {
					return
				}
				for j, j1 := j0, min(j0+o.colK, hi); j < j1; j++ {
					xj := x.Data[j*m : (j+1)*m]
					for p := 0; p < k; p++ {
						h[j*k+p] = dot(b[p*m:(p+1)*m], xj)
					}
				}
			}
		})
	case *CSC:
		transpose(o.brow, b, m, k)
		o.run(func(_, lo, hi int) {
			for j0 := lo; j0 < hi; j0 += o.colK {
				if o.flag.stopped() {
					return
				}
				for j, j1 := j0, min(j0+o.colK, hi); j < j1; j++ {
					hj := h[j*k : (j+1)*k]
					clear64(hj)
					for t := x.ColPtr[j]; t < x.ColPtr[j+1]; t++ {
						xv := x.Val[t]
						br := o.brow[int(x.RowIdx[t])*k : int(x.RowIdx[t])*k+k]
						for p, bv := range br {
							hj[p] += float64(xv * bv)
						}
					}
				}
			}
		})
	}
}

// xct writes A = X C^T (M x K, column-major) for C (K x n, column-major).
func (o *blockOps) xct(c, a []float64) {
	m, k := o.m, o.k
	switch x := o.x.(type) {
	case *Dense:
		o.run(func(l, lo, hi int) {
			acc := o.laneA[l]
			clear64(acc)
			for j0 := lo; j0 < hi; j0 += o.colK {
				if o.flag.stopped() {
					return
				}
				for j, j1 := j0, min(j0+o.colK, hi); j < j1; j++ {
					xj := x.Data[j*m : (j+1)*m]
					for p, cp := range c[j*k : (j+1)*k] {
						if cp != 0 {
							axpy(acc[p*m:(p+1)*m], cp, xj)
						}
					}
				}
			}
		})
		copy(a, o.laneA[0])
		for l := 1; l < len(o.laneA); l++ {
			for i, v := range o.laneA[l] {
				a[i] += v
			}
		}
	case *CSC:
		o.run(func(l, lo, hi int) {
			acc := o.laneA[l] // row-major
			clear64(acc)
			for j0 := lo; j0 < hi; j0 += o.colK {
				if o.flag.stopped() {
					return
				}
				for j, j1 := j0, min(j0+o.colK, hi); j < j1; j++ {
					cj := c[j*k : (j+1)*k]
					for t := x.ColPtr[j]; t < x.ColPtr[j+1]; t++ {
						xv := x.Val[t]
						ar := acc[int(x.RowIdx[t])*k : int(x.RowIdx[t])*k+k]
						for p, cp := range cj {
							ar[p] += float64(xv * cp)
						}
					}
				}
			}
		})
		acc := o.laneA[0]
		for l := 1; l < len(o.laneA); l++ {
			for i, v := range o.laneA[l] {
				acc[i] += v
			}
		}
		for i := 0; i < m; i++ {
			for p := 0; p < k; p++ {
				a[p*m+i] = acc[i*k+p]
			}
		}
	}
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
				for j := j0; j < j1; j++ {
					if cp := c[j*k+r]; cp != 0 {
						axpy(acc, cp, x.Data[j*m:(j+1)*m])
					}
				}
			case *CSC:
				for j := j0; j < j1; j++ {
					if cp := c[j*k+r]; cp != 0 {
						for t := x.ColPtr[j]; t < x.ColPtr[j+1]; t++ {
							acc[x.RowIdx[t]] += float64(x.Val[t] * cp)
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
		o.run(func(_, lo, hi int) {
			for j0 := lo; j0 < hi; j0 += o.col1 {
				if o.flag.stopped() {
					return
				}
				for j, j1 := j0, min(j0+o.col1, hi); j < j1; j++ {
					h[j] = dot(b, x.Data[j*m:(j+1)*m])
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
						s += float64(x.Val[t] * b[x.RowIdx[t]])
					}
					h[j] = s
				}
			}
		})
	}
}

// cct writes V = C C^T (K x K, symmetric row-major), lane partials added in lane order.
func (o *blockOps) cct(c, v []float64) {
	k := o.k
	span := o.flag.span(k*k/2+1, 1)
	o.run(func(l, lo, hi int) {
		acc := o.laneA[l][:k*k]
		clear64(acc)
		for j0 := lo; j0 < hi; j0 += span {
			if o.flag.stopped() {
				return
			}
			for j, j1 := j0, min(j0+span, hi); j < j1; j++ {
				addOuterLower(acc, c[j*k:(j+1)*k], k)
			}
		}
	})
	clear64(v)
	for l := range o.laneA {
		acc := o.laneA[l]
		for p := 0; p < k; p++ {
			for q := 0; q <= p; q++ {
				v[p*k+q] += acc[p*k+q]
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
