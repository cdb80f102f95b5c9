package kernels

// DADMM, the DID paper's distributed ADMM (section 3, Algorithm 1). Shard i keeps X_i, C_i, the
// auxiliary Y_i = B C_i + ... and the scaled dual U_i (both M x n_i). Each iteration:
//
//	U_i <- U_i + (Y_i - B C_i)
//	Y_i <- (X_i - rho U_i + rho B C_i) / (1 + rho)
//	C_i <- argmin_{C_i>=0} ||U_i + Y_i - B C_i||^2         (BPP, column by column)
//	(W, H) <- allreduce(C_i C_i^T, (U_i + Y_i) C_i^T)
//	B <- BPP(W, H)                                          (rows of B)
//
// The allreduce also carries X_i C_i^T and two scalars so that every shard gets the exact
// objective ||X||^2 - 2<B, X C^T> + <B^T B, C C^T> of the new iterate without another step.
// It starts from Y_i = B0 C_i0, U_i = 0.
func runDADMM(e *shardEnv) {
	first, initial, state := e.begin()
	// DADMM reads X entry by entry in several places: it works on a float64 copy of a block
	// stored as float32 (exact, so the same bits; the memory saving is lost for DADMM).
	x, m, n, k := Widen(e.spec.X), e.rows, e.cols, e.k
	b, c := e.B, e.C
	rho := e.rho()
	lanes := laneBounds(x, k)
	nl := len(lanes) - 1
	var u, y []float64
	if first > 1 {
		u, y = state[0], state[1]
	} else {
		y = make([]float64, m*n)
		u = make([]float64, m*n)
		span := e.flag.span(m*k, 1)
		for j0 := 0; j0 < n; j0 += span {
			e.flag.poll()
			for j, j1 := j0, min(j0+span, n); j < j1; j++ {
				for p, cp := range c[j*k : (j+1)*k] {
					if cp != 0 {
						axpy(y[j*m:(j+1)*m], cp, b[p*m:(p+1)*m])
					}
				}
			}
		}
	}
	e.state = func() [][]float64 { return cloneAll(u, y) }
	g := make([]float64, k*k)
	ws := laneWorkspaces(nl, k, e.flag)
	type laneAcc struct {
		v, h, a []float64 // C C^T (lower), (U+Y) C^T, X C^T (both M x K column-major)
		prev    float64
		bc, f   []float64
	}
	acc := make([]laneAcc, nl)
	for l := range acc {
		acc[l] = laneAcc{v: make([]float64, k*k), h: make([]float64, m*k), a: make([]float64, m*k),
			bc: make([]float64, m), f: make([]float64, k)}
	}
	sqX := x.SqNorm()
	lp := lowerLen(k)
	partial := make([]float64, lp+2*m*k+2)
	v := make([]float64, k*k)
	ft := make([]float64, k*m)
	bt := make([]float64, k*m)
	wsB := newWorkspace(k, e.flag)
	// Columns between two looks at the flag (the column's BPP solve also looks on its own).
	span := e.flag.span(7*m*k+k*k, 1)
	big := e.flag.big(7*m*k + k*k) // also look between the phases of a column
	for it := first; ; it++ {
		gramCols(b, m, k, g, e.flag)
		e.spec.Pool.Run(nl, func(l int) {
			la := &acc[l]
			clear64(la.v)
			clear64(la.h)
			clear64(la.a)
			la.prev = 0
			for j0 := lanes[l]; j0 < lanes[l+1]; j0 += span {
				if e.flag.stopped() {
					return
				}
				for j, j1 := j0, min(j0+span, lanes[l+1]); j < j1; j++ {
					cj := c[j*k : (j+1)*k]
					yj, uj := y[j*m:(j+1)*m], u[j*m:(j+1)*m]
					bc := la.bc
					clear64(bc)
					for p, cp := range cj {
						if cp != 0 {
							axpy(bc, cp, b[p*m:(p+1)*m])
						}
					}
					// objective of the previous iterate, U and Y updates; yj becomes U+Y for C.
					switch xb := x.(type) {
					case *Dense:
						xj := xb.Col(j)
						for i := 0; i < m; i++ {
							r := xj[i] - bc[i]
							la.prev += float64(r * r)
							uj[i] += yj[i] - bc[i]
							yj[i] = (xj[i] - float64(rho*uj[i]) + float64(rho*bc[i])) / (1 + rho)
						}
					case *CSC:
						t, t1 := xb.ColPtr[j], xb.ColPtr[j+1]
						for i := 0; i < m; i++ {
							xi := 0.0
							if t < t1 && int(xb.RowIdx[t]) == i {
								xi = xb.Val[t]
								t++
							}
							r := xi - bc[i]
							la.prev += float64(r * r)
							uj[i] += yj[i] - bc[i]
							yj[i] = (xi - float64(rho*uj[i]) + float64(rho*bc[i])) / (1 + rho)
						}
					}
					if big && e.flag.stopped() {
						return
					}
					for p := 0; p < k; p++ {
						bp := b[p*m : (p+1)*m]
						la.f[p] = dot(bp, uj) + dot(bp, yj)
					}
					if big && e.flag.stopped() {
						return
					}
					ws[l].SolveOne(g, la.f, cj, true)
					if big && e.flag.stopped() {
						return
					}
					addOuterLower(la.v, cj, k)
					for p, cp := range cj {
						if cp == 0 {
							continue
						}
						hp := la.h[p*m : (p+1)*m]
						axpy(hp, cp, uj)
						axpy(hp, cp, yj)
						switch xb := x.(type) {
						case *Dense:
							axpy(la.a[p*m:(p+1)*m], cp, xb.Col(j))
						case *CSC:
							ap := la.a[p*m : (p+1)*m]
							for t := xb.ColPtr[j]; t < xb.ColPtr[j+1]; t++ {
								ap[xb.RowIdx[t]] += float64(cp * xb.Val[t])
							}
						}
					}
				}
			}
		})
		e.flag.poll()
		// Combine lanes in order.
		clear64(v)
		hsum, asum := partial[lp:lp+m*k], partial[lp+m*k:lp+2*m*k]
		clear64(hsum)
		clear64(asum)
		var prev float64
		for l := range acc {
			for p := 0; p < k; p++ {
				for q := 0; q <= p; q++ {
					v[p*k+q] += acc[l].v[p*k+q]
				}
			}
			for i, w := range acc[l].h {
				hsum[i] += w
			}
			for i, w := range acc[l].a {
				asum[i] += w
			}
			prev += acc[l].prev
		}
		packLower(partial, v, k)
		partial[lp+2*m*k] = prev
		partial[lp+2*m*k+1] = sqX
		sum := e.allReduce("dadmm.partial", it, partial)
		unpackLower(v, sum[:lp], k)
		if it == 1 {
			initial = sum[lp+2*m*k]
		}
		// B rows: min ||C^T b_i - ((U+Y)_i)^T||, G = C C^T, F = ((U+Y) C^T)^T.
		nnlsBasis(wsB, v, sum[lp:lp+m*k], b, ft, bt, m, k, e.flag)
		gramCols(b, m, k, g, e.flag)
		obj := gramObjective(sum[lp+2*m*k+1], b, sum[lp+m*k:lp+2*m*k], g, v)
		e.iterationDone(it, obj, initial)
	}
}

// dadmmState is DADMM's Snapshot.State layout.
func dadmmState(s *ShardSpec) []stateSlot {
	m, n := s.X.Dims()
	return []stateSlot{{"U_i (M x n_i)", m * n}, {"Y_i (M x n_i)", m * n}}
}
