package kernels

// HPC-ANLS (Kannan, Ballard & Park 2016) with the 1-D column partition the DID paper uses
// (P_c = P, P_r = 1): shard i owns columns i of X and C and a block of rows of B. Each iteration:
//
//	C_i   <- BPP(B^T B, B^T X_i)                 (local; every shard holds all of B)
//	C C^T <- allreduce(C_i C_i^T)
//	(X C^T)_r <- reduce-scatter(X_i C_i^T)       (shard i gets the rows of B it owns)
//	B_r   <- BPP(C C^T, (X C^T)_r^T)             (its rows of B)
//	B     <- allgather(B_r)
//
// Three collectives per iteration. With P_r = 1 every shard has all of B after the allgather,
// so B^T B is formed locally instead of by the 2-D algorithm's allreduce. The allgather also
// carries each shard's part of the objective, -2<B_r, (X C^T)_r> + sum_{i in r} b_i^T (C C^T) b_i,
// so ||X - BC||^2 = ||X||^2 + sum is exact at every iteration; ||X||^2 and ||E_0||^2 come from
// one allreduce during initialisation.
//
// Penalties (see "Penalties" in doc.go): C_i <- BPP(B^T B + l2C I, B^T X_i - l1C) and
// B_r <- BPP(C C^T + l2B I, (X C^T)_r^T - l1B), shifted locally after the collectives. B is
// replicated after the allgather, so its penalty is local; ||C_i||_1 and ||C_i||^2 travel as
// two extra scalars of the C C^T allreduce (and of the initialisation's, for C0), only when C
// is penalized. No extra collective.
func runHPCANLS(e *shardEnv) {
	first, initial, state := e.begin()
	x, m, n, k := e.spec.X, e.rows, e.cols, e.k
	b, c := e.B, e.C
	p, me := e.spec.Shards, e.spec.Shard
	rowRanges := ColumnRanges(m, p)
	r0, r1 := rowRanges[me], rowRanges[me+1]
	segments := make([]int, p)
	for s := range segments {
		segments[s] = (rowRanges[s+1] - rowRanges[s]) * k
	}
	ops := newBlockOps(x, k, e.spec.Pool, e.flag, e.gram())
	pen := e.penalty()
	var sqX float64
	if first > 1 {
		sqX = state[0][0]
	} else {
		init := []float64{residualSq(x, b, c, k, e.spec.Pool, e.flag), x.SqNorm()}
		if pen.coef() {
			c1, c2 := factorNorms(c, e.flag)
			init = append(init, c1, c2)
		}
		start := e.allReduce("hpcanls.init", 0, init)
		initial, sqX = start[0], start[1]
		if pen.on() {
			var penC float64
			if pen.coef() {
				penC = pen.coefValue(start[2], start[3])
			}
			initial = initial + penC + pen.basisPenalty(b, e.flag)
		}
	}
	e.state = func() [][]float64 { return [][]float64{{sqX}} }
	h := make([]float64, k*n)
	g := make([]float64, k*k)
	a := make([]float64, m*k)
	arow := make([]float64, m*k)
	v := make([]float64, k*k)
	nNorms := 0
	if pen.coef() {
		nNorms = 2 // ||C_i||_1, ||C_i||^2 after V's lower triangle
	}
	packed := make([]float64, lowerLen(k)+nNorms)
	var vb, fb []float64 // with a penalty on B: C C^T + l2B I and (X C^T)_r^T - l1B
	if pen.basis() {
		vb, fb = make([]float64, k*k), make([]float64, (r1-r0)*k)
	}
	wsC := laneWorkspaces(len(ops.lanes)-1, k, e.flag)
	wsB := newWorkspace(k, e.flag)
	span := e.flag.span(k*k+2*k, 1) // rows of the objective's part between two looks at the flag
	own := make([]float64, (r1-r0)*k+1)
	for it := first; ; it++ {
		nnlsCoef(ops, wsC, b, c, g, h, pen.l1C, pen.l2C)
		ops.cct(c, v)
		packLower(packed, v, k)
		if pen.coef() {
			packed[lowerLen(k)], packed[lowerLen(k)+1] = factorNorms(c, e.flag)
		}
		vsum := e.allReduce("hpcanls.cct", it, packed)
		unpackLower(v, vsum, k)
		var penC float64
		if pen.coef() {
			penC = pen.coefValue(vsum[lowerLen(k)], vsum[lowerLen(k)+1])
		}
		ops.xct(c, a)
		transpose(arow, a, m, k) // row-major, so each owner's rows are contiguous
		f := e.reduceScatter("hpcanls.xct", it, arow, segments)
		// B_r: rows r0..r1 of B, row-major in own (K x rows column-major for BPP).
		bt := own[:(r1-r0)*k]
		for i := r0; i < r1; i++ {
			for q := 0; q < k; q++ {
				bt[(i-r0)*k+q] = b[q*m+i]
			}
		}
		if r1 > r0 {
			if pen.basis() {
				// Shifted copies: f is the collective's result, v is needed unshifted below.
				copy(vb, v)
				shiftGram(vb, k, pen.l2B)
				copy(fb, f)
				shiftCross(fb, pen.l1B)
				wsB.Solve(vb, fb, bt, r1-r0, true)
			} else {
				wsB.Solve(v, f, bt, r1-r0, true)
			}
			e.flag.poll()
		}
		var part float64
		for i0 := 0; i0 < r1-r0; i0 += span {
			e.flag.poll()
			for i, i1 := i0, min(i0+span, r1-r0); i < i1; i++ {
				bi, fi := bt[i*k:(i+1)*k], f[i*k:(i+1)*k]
				part += float64(-2*dot(bi, fi)) + quadForm(v, bi, k)
			}
		}
		own[len(own)-1] = part
		all := e.allGather("hpcanls.b", it, own)
		obj := sqX
		at := 0
		for s := 0; s < p; s++ {
			rows := rowRanges[s+1] - rowRanges[s]
			for i := 0; i < rows; i++ {
				for q := 0; q < k; q++ {
					b[q*m+rowRanges[s]+i] = all[at+i*k+q]
				}
			}
			at += rows * k
			obj += all[at]
			at++
		}
		if pen.on() {
			obj = obj + penC + pen.basisPenalty(b, e.flag)
		}
		e.iterationDone(it, obj, initial)
	}
}

// hpcanlsState is HPC-ANLS's Snapshot.State layout: ||X||^2 of the whole matrix, which only
// the initialisation's allreduce gives.
func hpcanlsState(*ShardSpec) []stateSlot { return []stateSlot{{"||X||^2 (1)", 1}} }
