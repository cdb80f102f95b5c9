package kernels

// ADMM for NMF (Zhang 2010), as written in the DID paper's section 2: with auxiliary W (M x K)
// and H (K x N) free of sign, multipliers Phi and Psi and penalty rho,
//
//	W   <- (X H^T + Phi + rho B)(H H^T + rho I)^-1
//	H   <- (W^T W + rho I)^-1 (W^T X + Psi + rho C)
//	B   <- max(0, W - Phi/rho),   C <- max(0, H - Psi/rho)
//	Phi <- Phi + rho (B - W),     Psi <- Psi + rho (C - H)
//
// It starts from W = B0, H = C0, Phi = Psi = 0. The reported objective is ||X - BC||^2 for the
// nonnegative pair, computed directly. ADMM is not monotone and is sensitive to rho.
func runADMM(e *shardEnv) {
	first, initial, state := e.begin()
	x, m, n, k := e.spec.X, e.rows, e.cols, e.k
	b, c := e.B, e.C
	rho := e.rho()
	ops := newBlockOps(x, k, e.spec.Pool, e.flag, e.gram())
	w := append([]float64(nil), b...)
	h := append([]float64(nil), c...)
	phi := make([]float64, m*k)
	psi := make([]float64, k*n)
	if first > 1 {
		h, phi, psi = state[0], state[1], state[2]
	} else {
		initial = residualSq(x, b, c, k, e.spec.Pool, e.flag)
	}
	e.state = func() [][]float64 { return cloneAll(h, phi, psi) }
	xht := make([]float64, m*k)
	s := make([]float64, k*k)
	wtx := make([]float64, k*n)
	row := make([]float64, k)
	span := e.flag.span(k*k+3*k, 1) // rows of W or columns of H between two looks at the flag
	for it := first; ; it++ {
		// W (S = H H^T + rho I is symmetric, so W S = R  <=>  S w_i = r_i for each row i)
		ops.xct(h, xht)
		ops.cct(h, s)
		for p := 0; p < k; p++ {
			s[p*k+p] += rho
		}
		if !cholesky(s, k, e.flag) {
			panic("admm: H H^T + rho I is not positive definite")
		}
		for i0 := 0; i0 < m; i0 += span {
			e.flag.poll()
			for i, i1 := i0, min(i0+span, m); i < i1; i++ {
				for p := 0; p < k; p++ {
					row[p] = xht[p*m+i] + phi[p*m+i] + float64(rho*b[p*m+i])
				}
				choleskySolve(s, k, row)
				for p := 0; p < k; p++ {
					w[p*m+i] = row[p]
				}
			}
		}
		// H
		ops.btx(w, wtx)
		gramCols(w, m, k, s, e.flag)
		for p := 0; p < k; p++ {
			s[p*k+p] += rho
		}
		if !cholesky(s, k, e.flag) {
			panic("admm: W^T W + rho I is not positive definite")
		}
		ops.run(func(_, lo, hi int) {
			for j0 := lo; j0 < hi; j0 += span {
				if e.flag.stopped() {
					return
				}
				for j, j1 := j0, min(j0+span, hi); j < j1; j++ {
					hj := h[j*k : (j+1)*k]
					for p := 0; p < k; p++ {
						hj[p] = wtx[j*k+p] + psi[j*k+p] + float64(rho*c[j*k+p])
					}
					choleskySolve(s, k, hj)
					// C and Psi for this column.
					for p := 0; p < k; p++ {
						t := j*k + p
						nc := hj[p] - psi[t]/rho
						if nc < 0 {
							nc = 0
						}
						c[t] = nc
						psi[t] += float64(rho * (nc - hj[p]))
					}
				}
			}
		})
		for i := range b {
			nb := w[i] - phi[i]/rho
			if nb < 0 {
				nb = 0
			}
			b[i] = nb
			phi[i] += float64(rho * (nb - w[i]))
		}
		e.iterationDone(it, residualSq(x, b, c, k, e.spec.Pool, e.flag), initial)
	}
}

// admmState is ADMM's Snapshot.State layout. W needs no slot: each iteration overwrites it
// before reading it.
func admmState(s *ShardSpec) []stateSlot {
	m, n := s.X.Dims()
	return []stateSlot{{"H (K x n)", s.K * n}, {"Phi (M x K)", m * s.K}, {"Psi (K x n)", s.K * n}}
}
