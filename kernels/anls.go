package kernels

import "github.com/didnmf/didnmf/kernels/nnls"

// ANLS (Kim & Park 2011): alternately solve the two NNLS subproblems exactly with block
// principal pivoting,
//
//	C <- argmin_{C>=0} ||X - BC||^2   (columns: G = B^T B, F = B^T X)
//	B <- argmin_{B>=0} ||X - BC||^2   (rows:    G = C C^T, F = C X^T)
//
// each warm-started from the previous solution's passive set.
//
// Penalties (see "Penalties" in doc.go): the subproblems become
// min ||x - Bc||^2 + 2 l1 sum c + l2 ||c||^2, whose normal-equation data are G + l2 I and
// F - l1, solved by the same BPP; the penalties of the new factors are added to the objective.
func runANLS(e *shardEnv) {
	first, initial, _ := e.begin()
	x, m, n, k := e.spec.X, e.rows, e.cols, e.k
	b, c := e.B, e.C
	ops := newBlockOps(x, k, e.spec.Pool, e.flag, e.gram())
	sqX := x.SqNorm()
	h := make([]float64, k*n)
	g := make([]float64, k*k)
	a := make([]float64, m*k)
	v := make([]float64, k*k)
	ft := make([]float64, k*m)
	bt := make([]float64, k*m)
	wsC := laneWorkspaces(len(ops.lanes)-1, k, e.flag)
	wsB := newWorkspace(k, e.flag)
	pen := e.penalty()
	if first == 1 {
		initial = residualSq(x, b, c, k, e.spec.Pool, e.flag)
		if pen.on() {
			initial = initial + pen.coefPenalty(c, e.flag) + pen.basisPenalty(b, e.flag)
		}
	}
	vb := v // C C^T, plus l2B I with a penalty on B
	if pen.basis() {
		vb = make([]float64, k*k)
	}
	for it := first; ; it++ {
		nnlsCoef(ops, wsC, b, c, g, h, pen.l1C, pen.l2C)
		ops.xct(c, a)
		ops.cct(c, v)
		if pen.basis() {
			copy(vb, v)
			shiftGram(vb, k, pen.l2B)
		}
		nnlsBasisShift(wsB, vb, a, pen.l1B, b, ft, bt, m, k, e.flag)
		gramCols(b, m, k, g, e.flag)
		obj := gramObjective(sqX, b, a, g, v)
		if pen.on() {
			obj = obj + pen.coefPenalty(c, e.flag) + pen.basisPenalty(b, e.flag)
		}
		e.iterationDone(it, obj, initial)
	}
}

// newWorkspace returns an NNLS workspace whose solves stop early (within about 2^18
// multiply-adds of work) once the machine is interrupted.
func newWorkspace(k int, flag *interruptFlag) *nnls.Workspace {
	ws := nnls.NewWorkspace(k)
	if flag != nil {
		ws.SetInterrupt(flag.stopped)
	}
	return ws
}

func laneWorkspaces(lanes, k int, flag *interruptFlag) []*nnls.Workspace {
	ws := make([]*nnls.Workspace, lanes)
	for l := range ws {
		ws[l] = newWorkspace(k, flag)
	}
	return ws
}

// nnlsCoef sets every column of C to argmin_{c>=0} ||x - B c||^2 + 2 l1 sum c + l2 ||c||^2
// (BPP, warm-started from C; l1 = l2 = 0 without a penalty), leaving G + l2 I in g and
// H = B^T X - l1 in h. The workspaces stop with the machine (see newWorkspace), and ops.run
// polls its flag.
func nnlsCoef(ops *blockOps, ws []*nnls.Workspace, b, c, g, h []float64, l1, l2 float64) {
	k := ops.k
	ops.btx(b, h)
	gramCols(b, ops.m, k, g, ops.flag)
	shiftGram(g, k, l2)
	ops.run(func(l, lo, hi int) {
		shiftCross(h[lo*k:hi*k], l1)
		ws[l].Solve(g, h[lo*k:hi*k], c[lo*k:hi*k], hi-lo, true)
	})
}

// nnlsBasis sets B (M x K, column-major) to argmin_{B>=0} ||Y - B C||^2 row by row (BPP,
// warm-started from B) given V = C C^T and A = Y C^T (M x K, column-major); ft and bt are
// K x M scratch. B is left as it was if the machine is interrupted.
func nnlsBasis(ws *nnls.Workspace, v, a, b, ft, bt []float64, m, k int, flag *interruptFlag) {
	nnlsBasisShift(ws, v, a, 0, b, ft, bt, m, k, flag)
}

// nnlsBasisShift is nnlsBasis with l1 subtracted from every entry of A (the L1 penalty on B;
// the caller puts the L2 penalty in v).
func nnlsBasisShift(ws *nnls.Workspace, v, a []float64, l1 float64, b, ft, bt []float64, m, k int, flag *interruptFlag) {
	transpose(ft, a, m, k)
	shiftCross(ft, l1)
	transpose(bt, b, m, k)
	ws.Solve(v, ft, bt, m, true)
	flag.poll()
	for i := 0; i < m; i++ {
		for p := 0; p < k; p++ {
			b[p*m+i] = bt[i*k+p]
		}
	}
}
