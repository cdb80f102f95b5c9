package kernels

// batch4 is the number of columns gramDenseLane4 carries through each phase at a time.
const batch4 = 128

// gramDenseLane4 is gramDenseLane for k <= 4 (one panel). For the paper's shapes (M = 5,
// K = 3) loop overhead and register spills would otherwise cost more than the arithmetic, so
// it works in phases over batches of columns (all h = B^T x, then all coordinate updates, then
// A and V), each loop with few live values, and the coordinate updates of independent columns
// overlap in the CPU. It performs the same floating-point operations in the same order as
// gramDenseLane, so it gives the same bits (TestGramKernel4MatchesGeneric). It returns early
// when the machine is interrupted, looking between runs of whole batches.
func gramDenseLane4(xd []float64, m, k, lo, hi int, bp, g, ginv, c, ap, v []float64, flag *interruptFlag) {
	var gm [16]float64 // padded 4 x 4 Gram matrix; pads are 0, so their coefficients stay 0
	var gi [4]float64
	for p := 0; p < k; p++ {
		gi[p] = ginv[p]
		for q := 0; q < k; q++ {
			gm[p*4+q] = g[p*k+q]
		}
	}
	bp = bp[:4*m]
	ap = ap[:4*m]
	var hbuf, cbuf [4 * batch4]float64
	var vacc [10]float64
	span := flag.span(8*m+32, batch4)
	for s0 := lo; s0 < hi; s0 += span {
		if flag.stopped() {
			return
		}
		s1 := min(s0+span, hi)
		for b0 := s0; b0 < s1; b0 += batch4 {
			b1 := min(b0+batch4, s1)
			nb := b1 - b0
			hs, cs := hbuf[:4*nb], cbuf[:4*nb]
			// Phase 1: h = B^T x, and the padded coefficients.
			for j := b0; j < b1; j++ {
				t := 4 * (j - b0)
				hs[t], hs[t+1], hs[t+2], hs[t+3] = panelDot(bp, xd[j*m:j*m+m])
				cj := c[j*k : j*k+k]
				cp := cs[t : t+4 : t+4]
				cp[0], cp[1], cp[2], cp[3] = 0, 0, 0, 0
				copy(cp, cj)
			}
			// Phase 2: coordinate descent per column (updateCoefRecip unrolled).
			if k == 3 {
				update3(hs, cs, &gm, &gi)
			} else {
				update4(hs, cs, &gm, &gi)
			}
			for j := b0; j < b1; j++ {
				t := 4 * (j - b0)
				copy(c[j*k:j*k+k], cs[t:t+k])
			}
			// Phase 3: A += X C^T, two columns per pass (pairs aligned with the lane's start, as in
			// gramDenseLane).
			j := b0
			for ; j+2 <= b1; j += 2 {
				xa := xd[j*m : j*m+m]
				xb := xd[j*m+m : j*m+2*m]
				xb = xb[:len(xa)]
				t := 4 * (j - b0)
				ca := cs[t : t+4 : t+4]
				cb := cs[t+4 : t+8 : t+8]
				a0, a1, a2, a3 := ca[0], ca[1], ca[2], ca[3]
				e0, e1, e2, e3 := cb[0], cb[1], cb[2], cb[3]
				for i, xai := range xa {
					r := ap[4*i : 4*i+4 : 4*i+4]
					xbi := xb[i]
					r[0] += xai*a0 + xbi*e0
					r[1] += xai*a1 + xbi*e1
					r[2] += xai*a2 + xbi*e2
					r[3] += xai*a3 + xbi*e3
				}
			}
			if j < b1 {
				x1 := xd[j*m : j*m+m]
				t := 4 * (j - b0)
				a0, a1, a2, a3 := cs[t], cs[t+1], cs[t+2], cs[t+3]
				for i, xi := range x1 {
					r := ap[4*i : 4*i+4 : 4*i+4]
					r[0] += xi * a0
					r[1] += xi * a1
					r[2] += xi * a2
					r[3] += xi * a3
				}
			}
			// Phase 4: C C^T, lower triangle in column order.
			if k == 3 {
				outer3(cs, &vacc)
			} else {
				outer4(cs, &vacc)
			}
		}
	}
	t := 0
	for p := 0; p < 4; p++ {
		for q := 0; q <= p; q++ {
			if p < k {
				v[p*k+q] += vacc[t]
			}
			t++
		}
	}
}

// update4 runs the coordinate descent on each padded column of cs given hs (both 4 per column).
func update4(hs, cs []float64, gm *[16]float64, gi *[4]float64) {
	hs = hs[:len(cs)]
	for t := 0; t+4 <= len(cs); t += 4 {
		h := hs[t : t+4 : t+4]
		cp := cs[t : t+4 : t+4]
		c0, c1, c2, c3 := cp[0], cp[1], cp[2], cp[3]
		s := h[0]
		s -= gm[0] * c0
		s -= gm[1] * c1
		s -= gm[2] * c2
		s -= gm[3] * c3
		if c0 += s * gi[0]; c0 < 0 {
			c0 = 0
		}
		s = h[1]
		s -= gm[4] * c0
		s -= gm[5] * c1
		s -= gm[6] * c2
		s -= gm[7] * c3
		if c1 += s * gi[1]; c1 < 0 {
			c1 = 0
		}
		s = h[2]
		s -= gm[8] * c0
		s -= gm[9] * c1
		s -= gm[10] * c2
		s -= gm[11] * c3
		if c2 += s * gi[2]; c2 < 0 {
			c2 = 0
		}
		s = h[3]
		s -= gm[12] * c0
		s -= gm[13] * c1
		s -= gm[14] * c2
		s -= gm[15] * c3
		if c3 += s * gi[3]; c3 < 0 {
			c3 = 0
		}
		cp[0], cp[1], cp[2], cp[3] = c0, c1, c2, c3
	}
}

// update3 is update4 for k = 3: the padding terms it leaves out are exact zeros.
func update3(hs, cs []float64, gm *[16]float64, gi *[4]float64) {
	hs = hs[:len(cs)]
	g00, g01, g02 := gm[0], gm[1], gm[2]
	g10, g11, g12 := gm[4], gm[5], gm[6]
	g20, g21, g22 := gm[8], gm[9], gm[10]
	i0, i1, i2 := gi[0], gi[1], gi[2]
	for t := 0; t+4 <= len(cs); t += 4 {
		h := hs[t : t+4 : t+4]
		cp := cs[t : t+4 : t+4]
		c0, c1, c2 := cp[0], cp[1], cp[2]
		s := h[0]
		s -= g00 * c0
		s -= g01 * c1
		s -= g02 * c2
		if c0 += s * i0; c0 < 0 {
			c0 = 0
		}
		s = h[1]
		s -= g10 * c0
		s -= g11 * c1
		s -= g12 * c2
		if c1 += s * i1; c1 < 0 {
			c1 = 0
		}
		s = h[2]
		s -= g20 * c0
		s -= g21 * c1
		s -= g22 * c2
		if c2 += s * i2; c2 < 0 {
			c2 = 0
		}
		cp[0], cp[1], cp[2] = c0, c1, c2
	}
}

// outer4 adds each padded column's c c^T (lower triangle, row by row) into acc.
func outer4(cs []float64, acc *[10]float64) {
	v00, v10, v11, v20, v21, v22 := acc[0], acc[1], acc[2], acc[3], acc[4], acc[5]
	v30, v31, v32, v33 := acc[6], acc[7], acc[8], acc[9]
	for t := 0; t+4 <= len(cs); t += 4 {
		cp := cs[t : t+4 : t+4]
		c0, c1, c2, c3 := cp[0], cp[1], cp[2], cp[3]
		v00 += c0 * c0
		v10 += c1 * c0
		v11 += c1 * c1
		v20 += c2 * c0
		v21 += c2 * c1
		v22 += c2 * c2
		v30 += c3 * c0
		v31 += c3 * c1
		v32 += c3 * c2
		v33 += c3 * c3
	}
	*acc = [10]float64{v00, v10, v11, v20, v21, v22, v30, v31, v32, v33}
}

// outer3 is outer4 for k = 3 (the fourth row of the triangle only adds zeros).
func outer3(cs []float64, acc *[10]float64) {
	v00, v10, v11, v20, v21, v22 := acc[0], acc[1], acc[2], acc[3], acc[4], acc[5]
	for t := 0; t+4 <= len(cs); t += 4 {
		cp := cs[t : t+4 : t+4]
		c0, c1, c2 := cp[0], cp[1], cp[2]
		v00 += c0 * c0
		v10 += c1 * c0
		v11 += c1 * c1
		v20 += c2 * c0
		v21 += c2 * c1
		v22 += c2 * c2
	}
	acc[0], acc[1], acc[2], acc[3], acc[4], acc[5] = v00, v10, v11, v20, v21, v22
}
