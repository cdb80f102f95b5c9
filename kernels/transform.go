package kernels

// Transform: the coefficients of samples for a fixed basis, as scikit-learn's
// NMF.transform and cNMF's refit give them, but exact: every column of C is
//
//	c_j = argmin_{c >= 0} ||x_j - B c||^2 + 2 l1C sum(c) + l2C ||c||^2
//
// solved by block principal pivoting (package nnls) with G = B^T B + l2C I and
// h_j = B^T x_j - l1C. B never changes (Init.B0, given), so the samples are independent: a
// shard solves its own and the only collective is the objective's sum, two scalars in one
// allreduce (||X_i - B C0_i||^2 and ||X_i - B C_i||^2, each with the penalty of its C_i).
// One iteration solves the problem; a second would find the same C (the warm start is the
// solution), so callers run exactly one (jobspec sets MaxIter 1). A penalty on the basis
// is a constant for a fixed basis and is left out of the objective.
//
// C0 (Init.C0) is optional: without it the solve starts from C = 0.

// transformPartialLen is the length of the transform's allreduce payload.
const transformPartialLen = 2

func runTransform(e *shardEnv) {
	first, initial, _ := e.begin()
	x, n, k := e.spec.X, e.cols, e.k
	b, c := e.B, e.C
	ops := newBlockOps(x, k, e.spec.Pool, e.flag, e.gram())
	h := make([]float64, k*n)
	g := make([]float64, k*k)
	ws := laneWorkspaces(len(ops.lanes)-1, k, e.flag)
	pen := e.penalty()
	objective := func() float64 {
		obj := residualSq(x, b, c, k, e.spec.Pool, e.flag)
		if pen.coef() {
			obj = obj + pen.coefPenalty(c, e.flag)
		}
		return obj
	}
	prev := objective()
	partial := make([]float64, transformPartialLen)
	for it := first; ; it++ {
		nnlsCoef(ops, ws, b, c, g, h, pen.l1C, pen.l2C)
		post := objective()
		partial[0], partial[1] = prev, post
		sum := e.allReduce("transform.objective", it, partial)
		if it == 1 {
			initial = sum[0]
		}
		prev = post
		e.iterationDone(it, sum[1], initial)
	}
}
