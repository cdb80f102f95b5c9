package kernels

import "math"

// A lane's pass of muBeta (beta.go) over its columns, in batches of columns. The products with
// the factors run on the Gram lane's steps (gramlane.go) of the process's kernel path, so every
// path gives the same bits; what is done entry by entry (the quotients, the powers, the loss
// terms) and the C update are plain Go with pinned arithmetic. For a batch of columns J:
//
//  1. Y_J = B C_J: step 1 with B^T as the "basis" (K rows of Mp) and the coefficients as the
//     "data": y_ij = fma(b_i,K-1, c_K-1,j, ... fma(b_i0, c_0j, +0)), components in order.
//  2. Entry by entry: R = X .* Ys^(beta-2) (KL: X / Ys, one division; IS: r = 1 / Ys, r^2 x)
//     and, but for KL, Dn = Yd^(beta-1) (IS: the same r), with the loss terms (full pass).
//  3. The C update's numerator B^T R_J and denominator B^T Dn_J (KL: the column sums of B):
//     step 1 with B in M rows of Kp: fma over the rows in order, from +0.
//  4. C_J <- C_J .* (num ./ den)^gamma (betaLoss.step).
//  5. With the full pass: Y'_J = B C_J (step 1 again), R' and Dn' at Y', and the B update's
//     partial sums R' C_J^T and Dn' C_J^T (KL: the row sums of C_J) on step 3: fma over the
//     columns in order into the lane's accumulators.
//
// Steps 3 and 5 take the path's column-lane kernels (denseCols, AVX-512) when it has them and
// M >= colsMinRows, as the Gram lane does; Y keeps step 1's component-lane kernel, faster for
// its shape (K inputs, M outputs per column).
// An entry x = 0 has r = x Ys^(beta-2) = +0, which leaves every fma of steps 3 and 5 as it is
// (fma(b, +0, s) = s for a finite b): so the batch of a CSC block made dense, and the CSC
// block's stored entries alone (sparse KL: Y at each stored entry by the same fma chain, steps
// 3 and 5 on the stored entries), give the bits of its dense form.

// betaBatchCols is the most columns of a batch, and betaBatchEntries about the most entries
// of its dense scratch (Y, R, Dn of the batch: a few tens of KB, in L1 and L2 between the steps).
const (
	betaBatchCols    = 64
	betaBatchEntries = 1 << 12
)

// betaLane is one lane's partial sums and scratch.
type betaLane struct {
	// numB and denB are the B update's partial sums: M rows of Kp, or M x K column-major
	// (muBeta.cols); denB is K values for KL.
	numB, denB []float64
	terms      []float64 // the loss terms
	// xbeta is the lane's sum of x^beta over its entries x > EPS (general beta): a constant
	// of X, summed by the first full pass the lane completes (xbetaOK) and reused after.
	xbeta   float64
	xbetaOK bool
	y       []float64 // batch x Mp: Y (and Y') of the batch
	r       []float64 // batch x M, or the batch's stored entries (sparse KL): R (and R')
	w       []float64 // batch x M: Dn (and Dn'), but for KL
	h, hd   []float64 // batch x Kp: B^T R and B^T Dn
	cs      []float64 // batch x Kp: the batch's updated coefficients, pads 0
	q       []float64 // batch x M: the quotients x / Ys (IS)
	xd      []float64 // batch x M: a CSC batch made dense
	ws      widening  // a float32 batch widened
	cp      []int     // a CSC batch's column pointers from 0
}

// batchCols returns the most columns of a batch: betaBatchCols, fewer for tall blocks.
func (s *muBeta) batchCols() int { return max(1, min(betaBatchCols, betaBatchEntries/s.mp)) }

func (s *muBeta) newLane() betaLane {
	m, k, mp, kp, bc := s.m, s.k, s.mp, s.kp, s.batchCols()
	ln := betaLane{numB: make([]float64, m*kp), terms: make([]float64, s.loss.lossLen(k)),
		h: make([]float64, bc*kp), cs: make([]float64, bc*kp)}
	if s.cols != nil {
		ln.numB = ln.numB[:m*k]
	}
	if s.loss.kl {
		ln.denB = make([]float64, k)
	} else {
		ln.denB = make([]float64, len(ln.numB))
		ln.w = make([]float64, bc*m)
		ln.hd = make([]float64, bc*kp)
	}
	if !s.sparseY {
		ln.y = make([]float64, bc*mp)
		ln.r = make([]float64, bc*m)
		if s.loss.is {
			ln.q = make([]float64, bc*m)
		}
	}
	if _, ok := s.x.(*CSC); ok && !s.sparseY {
		ln.xd = make([]float64, bc*m)
	}
	return ln
}

// perEntryY reports whether a CSC block's KL quotients should take Y at its stored entries
// (K multiply-adds each, in scalar code) rather than whole columns of Y on the Gram lane's
// vector steps (M K per column): when fewer than a quarter of the entries are stored.
func perEntryY(x *CSC, m int) bool { return 4*x.NNZ() < m*x.Cols }

// runLane runs the pass over the lane's columns [lo, hi): cn = the C update of c; with full
// also the loss terms and the B update's partial sums, into the lane's accumulators. It
// returns early (leaving them partial) when the machine is interrupted.
func (s *muBeta) runLane(ln *betaLane, lo, hi int, c, cn []float64, full bool) {
	var lt lossTerms
	if full {
		clear64(ln.numB)
		clear64(ln.denB)
		clear64(ln.terms)
		lt.sumXBeta = !s.loss.kl && !s.loss.is && !ln.xbetaOK
	}
	bc := s.batchCols()
	for j0 := lo; j0 < hi; {
		if s.e.flag.stopped() {
			return
		}
		j1 := batchEnd(s.x, j0, min(j0+bc, hi, j0+s.span))
		s.batch(ln, &lt, j0, j1, c, cn, full)
		j0 = j1
	}
	if !full {
		return
	}
	switch {
	case s.loss.kl:
		ln.terms[0], ln.terms[1] = lt.t0, lt.t1
	case s.loss.is:
		ln.terms[0], ln.terms[1] = lt.t0, lt.t1
	default:
		if lt.sumXBeta {
			ln.xbeta, ln.xbetaOK = lt.t0, true
		}
		ln.terms[0], ln.terms[1], ln.terms[2] = ln.xbeta, lt.t1, lt.t2
	}
}

// lossTerms are a lane's running loss sums (see betaLoss.lossLen): KL sum x log(x/Ys), sum x;
// IS sum x/Ys, sum log(x/Ys); otherwise sum x^beta (when sumXBeta), sum x Ys^(beta-1),
// sum Y^beta.
type lossTerms struct {
	t0, t1, t2 float64
	sumXBeta   bool
}

// batch runs the pass over the columns [j0, j1).
func (s *muBeta) batch(ln *betaLane, lt *lossTerms, j0, j1 int, c, cn []float64, full bool) {
	k, nb := s.k, j1-j0
	cb, cnb := c[j0*k:j1*k], cn[j0*k:j1*k]
	xd, colptr, rows, vals := s.batchInput(ln, j0, j1)
	if xd == nil {
		s.sparseKLBatch(ln, lt, colptr, rows, vals, nb, cb, cnb, full)
		return
	}
	s.denseBatch(ln, lt, xd, nb, cb, cnb, full)
}

// batchInput returns the data of the columns [j0, j1): dense, xd (M values per column, a CSC
// batch made dense in the lane's scratch), or for sparseY (xd nil) the CSC batch's column
// pointers from 0, its rows and its values.
func (s *muBeta) batchInput(ln *betaLane, j0, j1 int) (xd []float64, colptr []int, rows []int32, vals []float64) {
	m, nb := s.m, j1-j0
	switch x := s.x.(type) {
	case *Dense:
		return denseBatch(x, j0, j1, &ln.ws.vals), nil, nil, nil
	case *CSC:
		colptr, rows, vals := sparseBatch(x, j0, j1, &ln.ws.cp, &ln.ws.vals)
		base, end := colptr[0], colptr[nb]
		if base != 0 {
			if len(ln.cp) < nb+1 {
				ln.cp = make([]int, nb+1)
			}
			cp := ln.cp[:nb+1]
			for i, v := range colptr {
				cp[i] = v - base
			}
			colptr = cp
		}
		rows, vals = rows[base:end], vals[base:end]
		if s.sparseY {
			return nil, colptr, rows, vals
		}
		xd := ln.xd[:nb*m]
		clear64(xd)
		for j := 0; j < nb; j++ {
			xj := xd[j*m : (j+1)*m]
			for t := colptr[j]; t < colptr[j+1]; t++ {
				xj[rows[t]] = vals[t]
			}
		}
		return xd, nil, nil, nil
	}
	panic("kernels: unknown block type")
}

// denseBatch runs the pass over a batch of nb dense columns xd (M values each) with
// coefficients cb, writing the updated ones to cnb.
func (s *muBeta) denseBatch(ln *betaLane, lt *lossTerms, xd []float64, nb int, cb, cnb []float64, full bool) {
	m, k, mp, kp, l := s.m, s.k, s.mp, s.kp, &s.loss
	y, r, h := ln.y[:nb*mp], ln.r[:nb*m], ln.h[:nb*kp]
	s.kern.dotsDense(s.bt, cb, k, mp, nb, y)
	var den []float64 // B^T Dn, Kp per column (nil for KL: the column sums of B)
	if l.kl {
		if full {
			for j := 0; j < nb; j++ {
				lt.t0, lt.t1 = sumLogs(xd[j*m:(j+1)*m], r[j*m:(j+1)*m], y[j*mp:j*mp+m], false, lt.t0, lt.t1)
			}
		} else {
			klQuotients(xd, y, r, m, mp, nb)
		}
	} else {
		w := ln.w[:nb*m]
		s.weightsRatios(xd, y, w, r, nb)
		if full {
			s.denseLoss(lt, xd, y, w, ln.q, nb)
		}
		den = ln.hd[:nb*kp]
		s.dotsB(w, nb, den)
	}
	s.dotsB(r, nb, h)
	s.updateCoefs(h, den, cb, cnb, nb)
	if !full {
		return
	}
	s.kern.dotsDense(s.bt, cnb, k, mp, nb, y)
	cs := s.padCoefs(ln, cnb, nb)
	if l.kl {
		klQuotients(xd, y, r, m, mp, nb)
		s.accB(r, nb, cs, ln.numB)
		s.klSums(ln, cb, cnb, nb)
		return
	}
	w := ln.w[:nb*m]
	s.weightsRatios(xd, y, w, r, nb)
	s.accB(w, nb, cs, ln.denB)
	s.accB(r, nb, cs, ln.numB)
}

// dotsB sets h = B^T v for the batch's nb columns of v (M values each): the Gram lane's step 1
// (Kp per column), eight columns at a time on the column-lane kernel when there is one.
func (s *muBeta) dotsB(v []float64, nb int, h []float64) {
	m, k, kp := s.m, s.k, s.kp
	n8 := 0
	if s.cols != nil {
		if n8 = nb / 8 * 8; n8 > 0 {
			s.cols.dots64(s.bp, v[:n8*m], m, k, kp, n8/8, colsTailMask(m), h[:n8*kp])
		}
	}
	if n8 < nb {
		s.kern.dotsDense(s.bp, v[n8*m:nb*m], m, kp, nb-n8, h[n8*kp:nb*kp])
	}
}

// accB adds v C_J^T (step 3, C_J's padded coefficients cs) for the batch's nb columns of v to
// acc: M rows of Kp, or M x K column-major on the column-lane kernel.
func (s *muBeta) accB(v []float64, nb int, cs, acc []float64) {
	m, k, kp := s.m, s.k, s.kp
	if s.cols != nil {
		s.cols.acc64(v[:nb*m], m, k, kp, nb, colsTailMask(m), cs, acc)
		return
	}
	s.kern.accDenseA(v[:nb*m], m, kp, nb, cs, acc)
}

// sparseKLBatch is denseBatch for KL on the stored entries of a CSC batch (column pointers
// from 0 into rows and vals).
func (s *muBeta) sparseKLBatch(ln *betaLane, lt *lossTerms, colptr []int, rows []int32, vals []float64, nb int, cb, cnb []float64, full bool) {
	kp := s.kp
	if len(ln.r) < len(vals) {
		ln.r = make([]float64, len(vals))
	}
	r, h := ln.r[:len(vals)], ln.h[:nb*kp]
	s.sparseQuotients(colptr, rows, vals, cb, r)
	if full {
		lt.t0, lt.t1 = sumLogs(vals, r, nil, false, lt.t0, lt.t1)
	}
	s.kern.dotsSparse(s.bp, kp, colptr, rows, r, h)
	s.updateCoefs(h, nil, cb, cnb, nb)
	if !full {
		return
	}
	cs := s.padCoefs(ln, cnb, nb)
	s.sparseQuotients(colptr, rows, vals, cnb, r)
	s.kern.accSparseA(kp, colptr, rows, r, cs, ln.numB)
	s.klSums(ln, cb, cnb, nb)
}

// updateCoefs writes the C update of the batch's coefficients cb into cnb from the numerators
// h (Kp per column) and the denominators den (Kp per column; nil: the column sums of B).
// Without a penalty on C it makes betaLoss.step's operations in line, without its call and
// its tests of the penalties per coefficient.
func (s *muBeta) updateCoefs(h, den, cb, cnb []float64, nb int) {
	k, kp, l := s.k, s.kp, &s.loss
	zero := l.beta < 1
	if s.pen.coef() {
		for j := 0; j < nb; j++ {
			hj := h[j*kp : j*kp+k]
			dj := s.bsum
			if den != nil {
				dj = den[j*kp : j*kp+k]
			}
			cj, cnj := cb[j*k:(j+1)*k], cnb[j*k:(j+1)*k]
			for p := range cnj {
				cnj[p] = l.step(cj[p], hj[p], dj[p], s.pen.l1C, s.pen.l2C, zero)
			}
		}
		return
	}
	gamma := l.gamma
	for j := 0; j < nb; j++ {
		hj := h[j*kp : j*kp+k]
		dj := s.bsum
		if den != nil {
			dj = den[j*kp : j*kp+k]
		}
		cj, cnj := cb[j*k:(j+1)*k], cnb[j*k:(j+1)*k]
		hj, dj, cnj = hj[:len(cj)], dj[:len(cj)], cnj[:len(cj)]
		for p, f := range cj {
			d := dj[p]
			if d == 0 {
				d = sklearnEps
			}
			delta := hj[p] / d
			if gamma != 1 {
				delta = powNumpy(delta, gamma)
			}
			v := float64(f * delta)
			if zero && v < sklearnEps64 {
				v = 0
			}
			cnj[p] = v
		}
	}
}

// padCoefs copies the batch's coefficients into the lane's cs, Kp per column (pads 0).
func (s *muBeta) padCoefs(ln *betaLane, cnb []float64, nb int) []float64 {
	k, kp := s.k, s.kp
	cs := ln.cs[:nb*kp]
	for j := 0; j < nb; j++ {
		copy(cs[j*kp:j*kp+k], cnb[j*k:(j+1)*k])
	}
	return cs
}

// klSums adds the batch's old coefficients to the loss terms' row sums of C and the new ones
// to the B update's denominator (the row sums of C_new), column by column (axpy's sums of
// 1 c: exact).
func (s *muBeta) klSums(ln *betaLane, cb, cnb []float64, nb int) {
	k := s.k
	rs, den := ln.terms[2:2+k], ln.denB[:k]
	for j := 0; j < nb; j++ {
		cj, cnj := cb[j*k:(j+1)*k], cnb[j*k:(j+1)*k]
		cj, cnj = cj[:len(rs)], cnj[:len(rs)]
		for p := range rs {
			rs[p] += cj[p]
			den[p] += cnj[p]
		}
	}
}

// klQuotients sets r = x / Ys for the nb columns of xd (M each) and y (Mp each): x = 0 gives
// +0 without a test (Ys > 0).
func klQuotients(xd, y, r []float64, m, mp, nb int) {
	for j := 0; j < nb; j++ {
		xj, yj, rj := xd[j*m:(j+1)*m], y[j*mp:j*mp+m], r[j*m:(j+1)*m]
		for i, x := range xj {
			ys := yj[i]
			if ys == 0 {
				ys = sklearnEps
			}
			rj[i] = x / ys
		}
	}
}

// sparseQuotients sets r[t] = x_t / Ys_t for the stored entries of a CSC batch, with y =
// b_row . c_j by step 1's fma chain (components in order from +0).
func (s *muBeta) sparseQuotients(colptr []int, rows []int32, vals, cb, r []float64) {
	k, kp := s.k, s.kp
	for j := 0; j+1 < len(colptr); j++ {
		cj := cb[j*k : (j+1)*k : (j+1)*k]
		for t := colptr[j]; t < colptr[j+1]; t++ {
			o := int(rows[t]) * kp
			bi := s.bp[o : o+k : o+k]
			var y float64
			for p, v := range cj {
				y = math.FMA(bi[p], v, y)
			}
			if y == 0 {
				y = sklearnEps
			}
			r[t] = vals[t] / y
		}
	}
}

// weightsRatios sets, entry by entry of the batch, w = Yd^(beta-1) and r = x Ys^(beta-2)
// (0 for x = 0), as betaLoss.weight and ratio compute them; IS and beta 1.5 share the
// reciprocal and the root: 1/Ys is both IS's weight and the root of its ratio's factor, and
// for beta 1.5 Ys^-0.5 = 1 / sqrt(Ys) = 1 / w when y != 0.
func (s *muBeta) weightsRatios(xd, y, w, r []float64, nb int) {
	m, mp, l := s.m, s.mp, &s.loss
	for j := 0; j < nb; j++ {
		xj, yj, wj, rj := xd[j*m:(j+1)*m], y[j*mp:j*mp+m], w[j*m:(j+1)*m], r[j*m:(j+1)*m]
		switch {
		case l.is:
			for i, x := range xj {
				ys := yj[i]
				if ys == 0 {
					ys = sklearnEps
				}
				inv := 1 / ys
				wj[i] = inv
				rj[i] = float64(float64(inv*inv) * x)
			}
		case l.beta == 1.5:
			for i, x := range xj {
				v := yj[i]
				wv := math.Sqrt(v)
				wj[i] = wv
				if x == 0 {
					rj[i] = 0
				} else if v == 0 {
					rj[i] = l.ratio(x, v)
				} else {
					rj[i] = float64((1 / wv) * x)
				}
			}
		default:
			for i, x := range xj {
				v := yj[i]
				wj[i] = l.weight(v)
				if x == 0 {
					rj[i] = 0
				} else {
					rj[i] = l.ratio(x, v)
				}
			}
		}
	}
}

// denseLoss adds the batch's loss terms (IS and general beta) to lt: see lossTerms. They take
// the weights w for the powers of Ys where Ys = Yd (y != 0): IS's x / Ys is x w (w = 1 / Ys),
// y^beta is y w = y y^(beta-1); x^beta is powNumpy's, summed by the lane's first full pass
// only (sumXBeta).
func (s *muBeta) denseLoss(lt *lossTerms, xd, y, w, qs []float64, nb int) {
	m, mp, l := s.m, s.mp, &s.loss
	t0, t1, t2 := lt.t0, lt.t1, lt.t2
	if l.is {
		q := qs[:nb*m]
		for i, x := range xd[:nb*m] {
			q[i] = float64(x * w[i]) // x / Ys
		}
		lt.t0, lt.t1 = sumLogs(xd[:nb*m], q, nil, true, t0, t1)
		return
	}
	for j := 0; j < nb; j++ {
		xj, yj, wj := xd[j*m:(j+1)*m], y[j*mp:j*mp+m], w[j*m:(j+1)*m]
		var ty float64
		for i, v := range yj {
			if v != 0 {
				ty += float64(v * wj[i])
			} else {
				ty += powNumpy(v, l.beta)
			}
		}
		t2 += ty
		t0, t1 = addBetaXTerms(t0, t1, l.beta, lt.sumXBeta, xj, yj, wj)
	}
	lt.t0, lt.t1, lt.t2 = t0, t1, t2
}

// addBetaXTerms adds a column's general-beta loss terms of its entries x > eps to t0 (sum
// x^beta, when sumXBeta) and t1 (sum x y^(beta-1), w holding y^(beta-1); eps^(beta-1) where y
// is 0), entries in order.
func addBetaXTerms(t0, t1, beta float64, sumXBeta bool, xj, yj, wj []float64) (float64, float64) {
	for i, x := range xj {
		if x > sklearnEps {
			if sumXBeta {
				t0 += powNumpy(x, beta)
			}
			if v := yj[i]; v != 0 {
				t1 += float64(x * wj[i])
			} else {
				t1 += float64(x * powNumpy(sklearnEps, beta-1))
			}
		}
	}
	return t0, t1
}
