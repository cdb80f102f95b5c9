package kernels

// cStep is the local half of a DID (and BCD-family) iteration on one block: the coordinate
// descent update of every column of C with B fixed, plus W = E C^T (E = X - B C after the C
// update), V = C C^T and the objective before and after the C update. It runs lanes of columns
// on the pool and adds lane results in lane order.
type cStep struct {
	x       Block
	m, n, k int
	pool    *Pool
	form    Form
	sparse  bool
	lanes   []int
	laneW   [][]float64 // per lane: E C^T (residual) or X C^T (gram); row-major M x K for sparse gram
	laneV   [][]float64 // per lane: C C^T, lower triangle of a K x K row-major matrix
	laneObj [][2]float64
	scratch [][]float64 // per lane: e (length M) or h (length K)
	g       []float64   // B^T B, K x K
	brow    []float64   // B row-major, for sparse gram
	b, c    []float64   // the current call's B and C
	laneFn  func(int)
}

// ChooseForm picks DID's kernel form for a block. Sparse blocks always use the Gram form (its
// cost follows the stored entries); dense blocks use the Gram form too unless M is tiny, where
// the paper's residual form does less work (measured by BenchmarkCStep).
func ChooseForm(x Block, k int) Form {
	if _, ok := x.(*CSC); ok {
		return FormGram
	}
	return FormGram
}

func newCStep(x Block, k int, pool *Pool, form Form) *cStep {
	m, n := x.Dims()
	if form == FormAuto {
		form = ChooseForm(x, k)
	}
	_, sparse := x.(*CSC)
	s := &cStep{x: x, m: m, n: n, k: k, pool: pool, form: form, sparse: sparse,
		lanes: laneBounds(x, k), g: make([]float64, k*k)}
	if sparse && form == FormGram {
		s.brow = make([]float64, m*k)
	}
	nl := len(s.lanes) - 1
	s.laneW = make([][]float64, nl)
	s.laneV = make([][]float64, nl)
	s.laneObj = make([][2]float64, nl)
	s.scratch = make([][]float64, nl)
	for l := 0; l < nl; l++ {
		s.laneW[l] = make([]float64, m*k)
		s.laneV[l] = make([]float64, k*k)
		s.scratch[l] = make([]float64, max(m, k))
	}
	s.laneFn = s.lane
	return s
}

// run updates c in place given b, writes W (M x K column-major) and V (K x K symmetric) and
// returns ||X - B C_old||^2 and ||X - B C_new||^2 for this block.
func (s *cStep) run(b, c, w, v []float64) (prev, post float64) {
	m, k := s.m, s.k
	s.b, s.c = b, c
	gramCols(b, m, k, s.g)
	if s.brow != nil {
		transpose(s.brow, b, m, k)
	}
	s.pool.Run(len(s.lanes)-1, s.laneFn)
	// Combine lanes in lane order.
	sparseGram := s.sparse && s.form == FormGram
	clear64(v)
	if sparseGram {
		// laneW is row-major; sum into lane 0's buffer, then transpose.
		acc := s.laneW[0]
		for l := 1; l < len(s.laneW); l++ {
			for i, x := range s.laneW[l] {
				acc[i] += x
			}
		}
		for i := 0; i < m; i++ {
			for p := 0; p < k; p++ {
				w[p*m+i] = acc[i*k+p]
			}
		}
	} else {
		copy(w, s.laneW[0])
		for l := 1; l < len(s.laneW); l++ {
			for i, x := range s.laneW[l] {
				w[i] += x
			}
		}
	}
	for l := range s.laneV {
		lv := s.laneV[l]
		for p := 0; p < k; p++ {
			for q := 0; q <= p; q++ {
				v[p*k+q] += lv[p*k+q]
			}
		}
		prev += s.laneObj[l][0]
		post += s.laneObj[l][1]
	}
	for p := 0; p < k; p++ {
		for q := 0; q < p; q++ {
			v[q*k+p] = v[p*k+q]
		}
	}
	if s.form == FormGram {
		// W = X C^T - B (C C^T)
		for p := 0; p < k; p++ {
			wp := w[p*m : (p+1)*m]
			for q := 0; q < k; q++ {
				if vq := v[q*k+p]; vq != 0 {
					axpy(wp, -vq, b[q*m:(q+1)*m])
				}
			}
		}
	}
	if prev < 0 {
		prev = 0
	}
	if post < 0 {
		post = 0
	}
	return prev, post
}

func (s *cStep) lane(l int) {
	lo, hi := s.lanes[l], s.lanes[l+1]
	w, v := s.laneW[l], s.laneV[l]
	clear64(w)
	clear64(v)
	var prev, post float64
	switch x := s.x.(type) {
	case *Dense:
		if s.form == FormGram {
			prev, post = gramDenseCols(x, lo, hi, s.b, s.g, s.c, w, v, s.scratch[l], s.k)
		} else {
			prev, post = residualDenseCols(x, lo, hi, s.b, s.g, s.c, w, v, s.scratch[l], s.k)
		}
	case *CSC:
		if s.form == FormGram {
			prev, post = gramSparseCols(x, lo, hi, s.brow, s.g, s.c, w, v, s.scratch[l], s.k)
		} else {
			prev, post = residualSparseCols(x, lo, hi, s.b, s.g, s.c, w, v, s.scratch[l], s.k)
		}
	}
	s.laneObj[l] = [2]float64{prev, post}
}

// updateCoefGram runs the coordinate descent on one column's coefficients c given h = B^T x
// and G = B^T B: c_k <- max(0, c_k + (h_k - (G c)_k) / G_kk), k in order. Components with
// G_kk = 0 (b_k = 0) keep their value.
func updateCoefGram(c, h, g []float64, k int) {
	for p := 0; p < k; p++ {
		row := g[p*k : (p+1)*k]
		gpp := row[p]
		if !(gpp > 0) {
			continue
		}
		s := h[p]
		for q, gq := range row {
			s -= gq * c[q]
		}
		nc := c[p] + s/gpp
		if nc < 0 {
			nc = 0
		}
		c[p] = nc
	}
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
			row[q] += cp * c[q]
		}
	}
}

// gramDenseCols is the Gram-form lane kernel for a dense block.
func gramDenseCols(x *Dense, lo, hi int, b, g, c, a, v, h []float64, k int) (prev, post float64) {
	m := x.Rows
	h = h[:k]
	for j := lo; j < hi; j++ {
		xj := x.Data[j*m : (j+1)*m]
		cj := c[j*k : (j+1)*k]
		xx := dot(xj, xj)
		for p := 0; p < k; p++ {
			h[p] = dot(b[p*m:(p+1)*m], xj)
		}
		prev += xx - 2*dot(h, cj) + quadForm(g, cj, k)
		updateCoefGram(cj, h, g, k)
		post += xx - 2*dot(h, cj) + quadForm(g, cj, k)
		for p, cp := range cj {
			if cp != 0 {
				axpy(a[p*m:(p+1)*m], cp, xj)
			}
		}
		addOuterLower(v, cj, k)
	}
	return prev, post
}

// gramSparseCols is the Gram-form lane kernel for a sparse block; brow is B row-major and a
// accumulates X C^T row-major (M x K).
func gramSparseCols(x *CSC, lo, hi int, brow, g, c, a, v, h []float64, k int) (prev, post float64) {
	h = h[:k]
	for j := lo; j < hi; j++ {
		cj := c[j*k : (j+1)*k]
		clear64(h)
		var xx float64
		p0, p1 := x.ColPtr[j], x.ColPtr[j+1]
		rows, vals := x.RowIdx[p0:p1], x.Val[p0:p1]
		for t, r := range rows {
			xv := vals[t]
			xx += xv * xv
			br := brow[int(r)*k : int(r)*k+k]
			for p, bv := range br {
				h[p] += xv * bv
			}
		}
		prev += xx - 2*dot(h, cj) + quadForm(g, cj, k)
		updateCoefGram(cj, h, g, k)
		post += xx - 2*dot(h, cj) + quadForm(g, cj, k)
		for t, r := range rows {
			xv := vals[t]
			ar := a[int(r)*k : int(r)*k+k]
			for p, cp := range cj {
				ar[p] += xv * cp
			}
		}
		addOuterLower(v, cj, k)
	}
	return prev, post
}

// residualCoef runs the paper's coordinate descent on one column's coefficients: e holds
// x_j - B c_j on entry and on return, with c_j updated in place. G = B^T B.
func residualCoef(e, b, g, cj []float64, m, k int) {
	for p := 0; p < k; p++ {
		gpp := g[p*k+p]
		if !(gpp > 0) {
			continue
		}
		bp := b[p*m : (p+1)*m]
		old := cj[p]
		// c_p = max(0, b_p·(e + b_p c_p) / b_p·b_p); e -= b_p (c_p_new - c_p_old)
		nc := (dot(bp, e) + gpp*old) / gpp
		if nc < 0 {
			nc = 0
		}
		if d := nc - old; d != 0 {
			axpy(e, -d, bp)
		}
		cj[p] = nc
	}
}

// residualCol runs the residual-form update on one column: e holds x_j - B c_j on entry; on
// return c_j is updated, e = x_j - B c_j_new, W += e c^T and V += c c^T.
func residualCol(e, b, g, cj, w, v []float64, m, k int) (prev, post float64) {
	prev = dot(e, e)
	residualCoef(e, b, g, cj, m, k)
	post = dot(e, e)
	for p, cp := range cj {
		if cp != 0 {
			axpy(w[p*m:(p+1)*m], cp, e)
		}
	}
	addOuterLower(v, cj, k)
	return prev, post
}

// residualDenseCols is the residual-form lane kernel for a dense block.
func residualDenseCols(x *Dense, lo, hi int, b, g, c, w, v, e []float64, k int) (prev, post float64) {
	m := x.Rows
	e = e[:m]
	for j := lo; j < hi; j++ {
		cj := c[j*k : (j+1)*k]
		copy(e, x.Data[j*m:(j+1)*m])
		for p, cp := range cj {
			if cp != 0 {
				axpy(e, -cp, b[p*m:(p+1)*m])
			}
		}
		p0, p1 := residualCol(e, b, g, cj, w, v, m, k)
		prev += p0
		post += p1
	}
	return prev, post
}

// residualSparseCols is the residual-form lane kernel for a sparse block (e is dense).
func residualSparseCols(x *CSC, lo, hi int, b, g, c, w, v, e []float64, k int) (prev, post float64) {
	m := x.Rows
	e = e[:m]
	for j := lo; j < hi; j++ {
		cj := c[j*k : (j+1)*k]
		clear64(e)
		for p, cp := range cj {
			if cp != 0 {
				axpy(e, -cp, b[p*m:(p+1)*m])
			}
		}
		for t := x.ColPtr[j]; t < x.ColPtr[j+1]; t++ {
			e[x.RowIdx[t]] += x.Val[t]
		}
		p0, p1 := residualCol(e, b, g, cj, w, v, m, k)
		prev += p0
		post += p1
	}
	return prev, post
}
