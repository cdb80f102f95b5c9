package kernels

// The Gram-form lane kernels. B and the accumulator A = X C^T are stored in panels of four
// components: panel g holds components 4g..4g+3 of rows 0..M-1 as [M][4] (K is padded to a
// multiple of four with zero columns, whose coefficients stay zero). A row of a panel is four
// contiguous values, so the inner loops keep four independent accumulators in registers and
// stream the panel sequentially; the dense update of A takes two columns per pass to halve its
// loads and stores. These shapes were chosen by measurement for the default amd64 build
// (GOAMD64=v1, no FMA), where eight accumulators spill to the stack.

// panelWidth is the number of components per panel.
const panelWidth = 4

// paddedK rounds k up to a multiple of panelWidth.
func paddedK(k int) int { return (k + panelWidth - 1) / panelWidth * panelWidth }

// packPanels writes the column-major m x k matrix b into panels (length m*paddedK(k)).
func packPanels(dst, b []float64, m, k int) {
	clear64(dst)
	for p := 0; p < k; p++ {
		g, r := p/panelWidth, p%panelWidth
		panel := dst[g*m*panelWidth : (g+1)*m*panelWidth]
		for i, v := range b[p*m : (p+1)*m] {
			panel[i*panelWidth+r] = v
		}
	}
}

// unpackPanels writes panels back as a column-major m x k matrix.
func unpackPanels(dst, panels []float64, m, k int) {
	for p := 0; p < k; p++ {
		g, r := p/panelWidth, p%panelWidth
		panel := panels[g*m*panelWidth : (g+1)*m*panelWidth]
		col := dst[p*m : (p+1)*m]
		for i := range col {
			col[i] = panel[i*panelWidth+r]
		}
	}
}

// updateCoefRecip is the coordinate descent on one column's coefficients given h = B^T x,
// G = B^T B and ginv_p = 1/G_pp (0 for a dead component, which leaves c_p unchanged).
func updateCoefRecip(c, h, g, ginv []float64, k int) {
	h = h[:k]
	ginv = ginv[:k]
	for p := 0; p < k; p++ {
		row := g[p*k : p*k+k]
		s := h[p]
		for q, gq := range row {
			s -= gq * c[q]
		}
		nc := c[p] + s*ginv[p]
		if nc < 0 {
			nc = 0
		}
		c[p] = nc
	}
}

// gramDenseLane runs the Gram-form C update on dense columns [lo, hi) and accumulates
// A += X C^T (panels) and V += C C^T (lower triangle). scratch has room for 4*paddedK(k). It
// returns early when the machine is interrupted, looking between blocks of an even number of
// columns (so that the pairs stay aligned with lo) and, when a pair is more work than a few
// blocks (rank in the thousands), also between the phases of a pair.
func gramDenseLane(xd []float64, m, k, lo, hi int, bp, g, ginv, c, ap, v, scratch []float64, flag *interruptFlag) {
	k4 := paddedK(k)
	ha, hb := scratch[:k4], scratch[k4:2*k4]
	ca, cb := scratch[2*k4:3*k4], scratch[3*k4:4*k4] // padded copies; pads stay 0
	clear64(ca)
	clear64(cb)
	span := flag.span(2*m*k4+2*k*k, 2)
	big := flag.big(2*m*k4 + 2*k*k)
	j := lo
	for j+2 <= hi {
		if flag.stopped() {
			return
		}
		end := min(j+span, hi)
		for ; j+2 <= end; j += 2 {
			xa := xd[j*m : j*m+m]
			xb := xd[j*m+m : j*m+2*m]
			xb = xb[:len(xa)]
			// h = B^T x for both columns, one column and one panel at a time: four independent
			// accumulators is what the default amd64 build (no FMA) runs fastest; eight spill.
			for p := 0; p < k4; p += panelWidth {
				panel := bp[p*m : p*m+panelWidth*m]
				ha[p], ha[p+1], ha[p+2], ha[p+3] = panelDot(panel, xa)
				hb[p], hb[p+1], hb[p+2], hb[p+3] = panelDot(panel, xb)
			}
			if big && flag.stopped() {
				return
			}
			cja, cjb := c[j*k:j*k+k], c[j*k+k:j*k+2*k]
			updateCoefRecip(cja, ha, g, ginv, k)
			if big && flag.stopped() {
				return
			}
			updateCoefRecip(cjb, hb, g, ginv, k)
			if big && flag.stopped() {
				return
			}
			copy(ca, cja)
			copy(cb, cjb)
			for p := 0; p < k4; p += panelWidth {
				panel := ap[p*m : p*m+panelWidth*m]
				panel = panel[:4*len(xa)]
				a0, a1, a2, a3 := ca[p], ca[p+1], ca[p+2], ca[p+3]
				b0, b1, b2, b3 := cb[p], cb[p+1], cb[p+2], cb[p+3]
				for i, xai := range xa {
					r := panel[4*i : 4*i+4 : 4*i+4]
					xbi := xb[i]
					r[0] += xai*a0 + xbi*b0
					r[1] += xai*a1 + xbi*b1
					r[2] += xai*a2 + xbi*b2
					r[3] += xai*a3 + xbi*b3
				}
			}
			if big && flag.stopped() {
				return
			}
			addOuterLower(v, cja, k)
			if big && flag.stopped() {
				return
			}
			addOuterLower(v, cjb, k)
		}
	}
	if j < hi {
		if big && flag.stopped() {
			return
		}
		x1 := xd[j*m : j*m+m]
		for p := 0; p < k4; p += panelWidth {
			ha[p], ha[p+1], ha[p+2], ha[p+3] = panelDot(bp[p*m:p*m+panelWidth*m], x1)
		}
		cj := c[j*k : j*k+k]
		updateCoefRecip(cj, ha, g, ginv, k)
		copy(ca, cj)
		for p := 0; p < k4; p += panelWidth {
			panel := ap[p*m : p*m+panelWidth*m]
			panel = panel[:4*len(x1)]
			a0, a1, a2, a3 := ca[p], ca[p+1], ca[p+2], ca[p+3]
			for i, xi := range x1 {
				r := panel[4*i : 4*i+4 : 4*i+4]
				r[0] += xi * a0
				r[1] += xi * a1
				r[2] += xi * a2
				r[3] += xi * a3
			}
		}
		addOuterLower(v, cj, k)
	}
}

// panelDot returns the four dot products of a panel's components with x.
func panelDot(panel, x []float64) (a0, a1, a2, a3 float64) {
	panel = panel[:4*len(x)]
	for i, xi := range x {
		r := panel[4*i : 4*i+4 : 4*i+4]
		a0 += r[0] * xi
		a1 += r[1] * xi
		a2 += r[2] * xi
		a3 += r[3] * xi
	}
	return a0, a1, a2, a3
}

// gramSparseLane is gramDenseLane for CSC columns. It looks at the interrupt flag between
// blocks of columns.
func gramSparseLane(x *CSC, m, k, lo, hi int, bp, g, ginv, c, ap, v, scratch []float64, flag *interruptFlag) {
	span := flag.span(2*colWork(x, paddedK(k))+2*k*k, 1)
	for j0 := lo; j0 < hi; j0 += span {
		if flag.stopped() {
			return
		}
		gramSparseCols(x, m, k, j0, min(j0+span, hi), bp, g, ginv, c, ap, v, scratch)
	}
}

// gramSparseCols is the body of gramSparseLane for columns [lo, hi), without looks at the flag
// (kept as it was, so that the hot loops compile as they did).
func gramSparseCols(x *CSC, m, k, lo, hi int, bp, g, ginv, c, ap, v, scratch []float64) {
	k4 := paddedK(k)
	h, cpad := scratch[:k4], scratch[k4:2*k4]
	clear64(cpad)
	for j := lo; j < hi; j++ {
		t0, t1 := x.ColPtr[j], x.ColPtr[j+1]
		rows := x.RowIdx[t0:t1]
		vals := x.Val[t0:t1]
		vals = vals[:len(rows)]
		for p := 0; p < k4; p += panelWidth {
			pa := bp[p*m : p*m+panelWidth*m]
			var a0, a1, a2, a3 float64
			for t, r := range rows {
				xv := vals[t]
				ra := pa[4*int(r) : 4*int(r)+4 : 4*int(r)+4]
				a0 += ra[0] * xv
				a1 += ra[1] * xv
				a2 += ra[2] * xv
				a3 += ra[3] * xv
			}
			h[p], h[p+1], h[p+2], h[p+3] = a0, a1, a2, a3
		}
		cj := c[j*k : j*k+k]
		updateCoefRecip(cj, h, g, ginv, k)
		copy(cpad, cj)
		for p := 0; p < k4; p += panelWidth {
			panel := ap[p*m : p*m+panelWidth*m]
			c0, c1, c2, c3 := cpad[p], cpad[p+1], cpad[p+2], cpad[p+3]
			for t, r := range rows {
				xv := vals[t]
				rr := panel[4*int(r) : 4*int(r)+4 : 4*int(r)+4]
				rr[0] += xv * c0
				rr[1] += xv * c1
				rr[2] += xv * c2
				rr[3] += xv * c3
			}
		}
		addOuterLower(v, cj, k)
	}
}
