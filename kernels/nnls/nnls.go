// Package nnls solves nonnegative least squares problems with many right-hand sides,
//
//	for each column j:  minimize ||A x_j - b_j||²  subject to  x_j >= 0,
//
// given only the normal-equation data G = AᵀA (k x k, symmetric positive semi-definite) and
// F = AᵀB (k x n). It implements the block principal pivoting (BPP) method of Kim & Park, "Fast
// nonnegative matrix factorization: an active-set-like method and comparisons", SIAM J. Sci.
// Comput. 33(6), 2011, the inner solver of ANLS-type NMF.
//
// Columns are solved one at a time, each passive-set system with a Cholesky factorization of
// the passive submatrix of G. Factorizations are kept in a direct-mapped cache keyed by passive
// set (at most about 1 MiB per workspace; every set when k <= 10), so a set that recurs in another
// iteration or another column is factorized once per call. This captures the sharing that the
// paper's multiple right-hand-side organisation (sort the columns by passive set, one
// factorization per group) exploits, without its O(n) per-call state. Measured on n = 10000
// columns (BenchmarkSolve against BenchmarkSolveGrouped, which keeps the grouped form in the
// tests) the two are within a few percent at k = 3 cold, k = 10 and k = 50 cold; grouping is
// about 20% faster at k = 3 warm (about 10 ns per column) and this form about 6% faster at
// k = 50 warm.
//
// # Numerical safeguards
//
//   - Dead variables: a variable with G_ii <= 0 or NaN (a zero column of A: a dead NMF
//     component) is fixed at x_i = 0 and never enters the passive set.
//   - Singular passive systems: the passive variables are factorized in increasing index order,
//     and a variable whose Cholesky pivot is not larger than PivotTol·G_ii (its column of A is,
//     to within an angle of about 1e-6 rad, a combination of the passive columns before it) is
//     left out of the factorization and held at x_i = 0 while it stays passive; its gradient is
//     then zero up to that angle, so it is not tested. The factorized variables span the same
//     space, so the passive least-squares fit is unchanged, and every accepted pivot is
//     positive, so the factor stays bounded (a tiny ridge instead was tried and rejected: it
//     amplifies rounding errors geometrically when several variables are dependent). The test
//     is relative to each variable's own diagonal, hence invariant under diagonal scaling of G.
//     When both copies of an exactly duplicated column are passive, the lower-index copy carries
//     the weight and the other is 0.
//   - Feasibility tests: a factorized x_i is infeasible when x_i < 0; an active variable's
//     gradient y_i = (Gx - f)_i is infeasible when y_i < -tol_i, with
//     tol_i = 8(k+1)ε·(|f_i| + sqrt(G_ii)·Σ_j sqrt(G_jj)|x_j|), a bound on the rounding error of
//     y_i, so that roundoff on degenerate problems (true gradient 0) does not trigger exchanges.
//   - Cycling: full exchange of all infeasible variables while their number decreases, with a
//     backup counter of 3, then exchange of the largest-index infeasible variable only, as in
//     the paper, plus a hard cap of MaxIter(k) = 5k+50 passive-set solves per column. A column
//     that hits the cap is counted in Solve's result.
//   - Rank-deficient G: the single-exchange rule is only guaranteed to terminate when G is
//     positive definite. When a column would fall back to it after one of its passive sets had
//     dependent variables (typically more components than rows of A), or when it hits the cap,
//     it is finished instead by the Lawson–Hanson active-set method, started from the better (by
//     objective) of 0 and the last pivoting iterate projected onto x >= 0. Lawson–Hanson keeps x
//     feasible and decreases the objective monotonically, so the result is the best feasible
//     point found, and it is the optimum unless Lawson–Hanson also reaches MaxIter(k)
//     iterations, in which case the column is counted as capped.
//
// Everything is deterministic: no maps, no goroutines, fixed loop orders. The same inputs give
// bitwise-identical outputs, independent of the workspace's history (the cache holds pure
// functions of G and the passive set). Inputs containing NaN or Inf are not supported (the
// result is unspecified) but the solver terminates within the iteration caps, every entry of
// X is >= 0 (never NaN), and the columns whose right-hand side is finite over a finite G are
// solved as without the others.
package nnls

import (
	"fmt"
	"math"
	"slices"
)

// PivotTol is the relative Cholesky pivot threshold: a passive variable whose pivot is at most
// PivotTol times its diagonal entry of G is treated as numerically dependent on the passive
// variables before it and held at zero.
const PivotTol = 1e-12

// pbar is the backup counter of the cycling safeguard (p̄ in Kim & Park).
const pbar = 3

// MaxIter returns the iteration cap for problems of size k: the number of passive-set solves
// after which the pivoting of a column stops and the column is reported as capped.
func MaxIter(k int) int { return 5*k + 50 }

// Workspace holds scratch memory for solving problems of size k; reuse it across calls. Not safe
// for concurrent use: use one per goroutine.
type Workspace struct {
	k       int
	maxIter int     // cap on BPP iterations (MaxIter(k); lowered by tests)
	tolFac  float64 // 8(k+1)ε, the relative tolerance on gradients

	// Derived from G at the start of each call.
	sq   []float64 // sqrt(G_ii); 0 for dead variables
	dead []bool    // G_ii is not > 0: fixed at 0

	// Per-column state.
	passive []bool
	excl    []bool    // Lawson–Hanson: variables that cannot enter at the current point
	idx     []int     // passive indices, increasing
	xs      []float64 // solution on the basis, aligned with bidx
	viol    []int     // infeasible variables of the current iterate, increasing
	z       []float64 // Lawson–Hanson: full-length passive solution

	// The current factorization (views of one of the cache slots): the Cholesky factor of
	// G[bidx[:nb], bidx[:nb]], lower triangular, row-major with stride fs, and the reciprocals
	// of its diagonal.
	L    []float64
	inv  []float64
	bidx []int
	fs   int

	// A direct-mapped cache of factorizations keyed by passive set, so that a set that recurs
	// (in later iterations or other columns: with small k most columns share a handful of
	// sets, and after a cold start on nonnegative data most columns' second set is
	// "everything") is factorized once. A factorization depends only on G and the set, so the
	// results do not depend on the cache state.
	slots     []factorSlot
	slotShift uint     // slot of a hashed key: hash >> slotShift
	direct    bool     // k is small enough for the set's bit mask to be the slot number
	key       []uint64 // bit set of the current passive set

	// stop, when set by SetInterrupt, is asked after about stopWork multiply-adds of work;
	// work counts them since the last time.
	stop func() bool
	work int

	// Counters for tests.
	iters          int // BPP solves used by the most recent column
	dropped        int // dependent variables left out of factorizations
	singles        int // single-variable exchanges
	switched       int // columns handed to Lawson–Hanson because G was rank deficient
	factorizations int // Cholesky factorizations computed (cache misses)
}

// NewWorkspace returns a workspace for problems with k variables. It panics if k < 0.
func NewWorkspace(k int) *Workspace {
	if k < 0 {
		panic(fmt.Sprintf("nnls: negative problem size %d", k))
	}
	w := &Workspace{
		k:       k,
		maxIter: MaxIter(k),
		tolFac:  8 * float64(k+1) * 0x1p-52,
		sq:      make([]float64, k),
		dead:    make([]bool, k),
		passive: make([]bool, k),
		excl:    make([]bool, k),
		idx:     make([]int, k),
		xs:      make([]float64, k),
		viol:    make([]int, k),
		z:       make([]float64, k),
	}
	words := (k + 63) / 64
	w.key = make([]uint64, words)
	nslots, lg := 1, uint(0)
	for nslots < 2 || (lg < uint(k) && (2*nslots)*(k*k+2*k+words)*8 <= cacheBytes) {
		nslots *= 2
		lg++
	}
	w.direct = lg >= uint(k)
	w.slotShift = 64 - lg
	w.slots = make([]factorSlot, nslots)
	key := make([]uint64, nslots*words)
	ints := make([]int, nslots*k)
	fl := make([]float64, nslots*(k*k+k))
	for i := range w.slots {
		w.slots[i] = factorSlot{
			key:  key[i*words : (i+1)*words],
			bidx: ints[i*k : (i+1)*k],
			L:    fl[i*(k*k+k) : i*(k*k+k)+k*k],
			inv:  fl[i*(k*k+k)+k*k : (i+1)*(k*k+k)],
		}
	}
	return w
}

// K returns the problem size the workspace was made for.
func (w *Workspace) K() int { return w.k }

// Solve solves the n problems. G is k x k row-major (symmetric), F is k x n column-major (rhs j
// is F[j*k:(j+1)*k]), X is k x n column-major output. If warm is true, X holds a previous
// solution whose passive set (X > 0) is used as the starting point; otherwise start from
// all-zero. It returns the number of columns for which the pivoting hit its iteration cap
// (their X is the best feasible point found), which callers may report. (Columns whose pivoting
// stalls on a rank-deficient G are finished by Lawson–Hanson and counted only if that also
// reaches its cap; see the package documentation.)
//
// Solve does not allocate. G must be stored in full; X must not overlap G or F. It panics if
// G, F or X is too short.
func (w *Workspace) Solve(G []float64, F []float64, X []float64, n int, warm bool) (capped int) {
	k := w.k
	if n < 0 || len(G) < k*k || len(F) < k*n || len(X) < k*n {
		panic(fmt.Sprintf("nnls: Solve(k=%d, n=%d) with len(G)=%d, len(F)=%d, len(X)=%d",
			k, n, len(G), len(F), len(X)))
	}
	if k == 0 {
		return 0
	}
	if w.stop != nil {
		defer func() {
			if r := recover(); r != nil && r != (stopSignal{}) {
				panic(r)
			}
		}()
	}
	w.prepare(G)
	for j := 0; j < n; j++ {
		if w.column(G, F[j*k:(j+1)*k], X[j*k:(j+1)*k], warm) {
			capped++
		}
	}
	return capped
}

// SetInterrupt makes Solve stoppable: Solve then calls stop (on its own goroutine) after about
// every 2^18 multiply-adds of work, between columns, passive-set solves and rows of a
// factorization (so also within one column of a large problem), and returns early once stop
// reports true. The columns solved by then hold their solutions; the column in progress keeps
// what it held (or, if stopped in the Lawson–Hanson fallback, holds a feasible point of it),
// and so do the columns after it. The workspace stays usable. Without SetInterrupt (or with
// nil) Solve runs to the end, and with it an uninterrupted Solve gives the same bits.
func (w *Workspace) SetInterrupt(stop func() bool) { w.stop, w.work = stop, 0 }

// stopWork is the work, in multiply-adds, between two calls of the interrupt function.
const stopWork = 1 << 18

// stopSignal unwinds an interrupted Solve.
type stopSignal struct{}

// tick counts n multiply-adds of work and, when it is time, asks stop (small enough to be
// inlined: without an interrupt function it costs a nil test).
func (w *Workspace) tick(n int) {
	if w.stop != nil {
		if w.work += n; w.work >= stopWork {
			w.ask()
		}
	}
}

// ask asks stop and unwinds Solve if it says so. (Not inlined, so that tick is.)
//
//go:noinline
func (w *Workspace) ask() {
	w.work = 0
	if w.stop() {
		panic(stopSignal{})
	}
}

// SolveOne solves a single problem (f and x have length k) with the same semantics as Solve.
// It reports whether the pivoting hit its iteration cap.
func (w *Workspace) SolveOne(G []float64, f []float64, x []float64, warm bool) (capped bool) {
	return w.Solve(G, f, x, 1, warm) == 1
}

// prepare derives the per-call data from G and invalidates the cached factorization.
func (w *Workspace) prepare(G []float64) {
	k := w.k
	for i := 0; i < k; i++ {
		if d := G[i*k+i]; d > 0 {
			w.dead[i] = false
			w.sq[i] = math.Sqrt(d)
		} else { // zero, negative or NaN
			w.dead[i] = true
			w.sq[i] = 0
		}
	}
	for i := range w.slots {
		w.slots[i].valid = false
	}
}

// column solves one problem by block principal pivoting. x is the warm start (if warm) and the
// output. It reports whether the iteration cap was hit.
func (w *Workspace) column(G, f, x []float64, warm bool) bool {
	k := w.k
	passive, dead := w.passive, w.dead
	for i := 0; i < k; i++ {
		passive[i] = warm && !dead[i] && x[i] > 0
	}
	ninf, p := k+1, pbar
	deficient := false // some passive set had dependent variables
	for it := 1; ; it++ {
		s, nb := w.solvePassive(G, f)
		deficient = deficient || nb < s
		nv := w.check(G, f, nb)
		if nv == 0 {
			w.iters = it
			w.store(x, nb)
			return false
		}
		if it >= w.maxIter {
			w.iters = it
			w.fallback(G, f, x, nb)
			return true
		}
		switch {
		case nv < ninf:
			ninf, p = nv, pbar
			w.exchange(nv)
		case p > 0:
			p--
			w.exchange(nv)
		case deficient:
			// Single exchanges are only guaranteed to terminate for positive definite G.
			w.iters = it
			w.switched++
			return !w.fallback(G, f, x, nb)
		default:
			w.singles++
			i := w.viol[nv-1] // largest infeasible index
			passive[i] = !passive[i]
		}
	}
}

// exchange flips the first nv infeasible variables between the passive and active sets.
func (w *Workspace) exchange(nv int) {
	for _, i := range w.viol[:nv] {
		w.passive[i] = !w.passive[i]
	}
}

// solvePassive solves the unconstrained problem on the passive set: it factorizes the passive
// submatrix of G (dropping dependent variables) and solves for xs on the basis bidx. It
// returns the sizes of the passive set and of the basis.
func (w *Workspace) solvePassive(G, f []float64) (s, nb int) {
	idx := w.idx
	for i, p := range w.passive {
		if p {
			idx[s] = i
			s++
		}
	}
	w.tick(w.k * (s + 1))
	if s == 0 {
		return 0, 0
	}
	nb = w.factor(G, s)
	w.substitute(f, nb)
	return s, nb
}

// cacheBytes is the approximate memory budget of the factorization cache (at least two
// factorizations are cached whatever k).
const cacheBytes = 1 << 20

// factorSlot is a cached factorization of the passive set given by the bit set key (of size
// s): see Workspace.L.
type factorSlot struct {
	key    []uint64
	s, nb  int
	bidx   []int
	L, inv []float64
	valid  bool
}

// factor makes current the Cholesky factor of G[B, B], where the basis B is the passive set
// idx[:s] without its numerically dependent variables, and returns |B|. Variables are taken in
// increasing index order; one whose pivot is not larger than PivotTol·G_ii is left out. A
// cached factorization of the same set is reused.
func (w *Workspace) factor(G []float64, s int) int {
	idx, key := w.idx[:s], w.key
	clear(key)
	for _, i := range idx {
		key[i>>6] |= 1 << (i & 63)
	}
	var slot uint64
	if w.direct {
		slot = key[0]
	} else {
		h := uint64(0)
		for _, v := range key {
			h = (h ^ v) * 0x9e3779b97f4a7c15
		}
		slot = h >> w.slotShift
	}
	sl := &w.slots[slot]
	if sl.valid && (w.direct || sl.s == s && slices.Equal(sl.key, key)) {
		w.use(sl)
		return sl.nb
	}
	w.factorizations++
	k := w.k
	L, inv, bidx := sl.L[:s*s], sl.inv[:s], sl.bidx[:s]
	nb := 0
	for _, ia := range idx {
		w.tick(nb*nb/2 + 1)
		row := G[ia*k : ia*k+k]
		La := L[nb*s : nb*s+nb+1] // candidate row; kept only if its pivot is accepted
		for b := 0; b < nb; b++ {
			sum := row[bidx[b]]
			for t, v := range L[b*s : b*s+b] {
				sum -= float64(La[t] * v)
			}
			La[b] = sum * inv[b]
		}
		gaa := row[ia]
		d := gaa
		for _, v := range La[:nb] {
			d -= float64(v * v)
		}
		if !(d > PivotTol*gaa) { // dependent (or NaN)
			w.dropped++
			continue
		}
		r := math.Sqrt(d)
		La[nb] = r
		inv[nb] = 1 / r
		bidx[nb] = ia
		nb++
	}
	copy(sl.key, key)
	sl.s, sl.nb, sl.valid = s, nb, true
	w.use(sl)
	return nb
}

// use makes sl the current factorization.
func (w *Workspace) use(sl *factorSlot) {
	w.L, w.inv, w.bidx, w.fs = sl.L, sl.inv, sl.bidx, sl.s
}

// substitute solves L Lᵀ xs = f[bidx] with the current factor of the basis (size nb; the
// factor's row stride is w.fs).
func (w *Workspace) substitute(f []float64, nb int) {
	s := w.fs
	L, inv, xs := w.L, w.inv[:nb], w.xs[:nb]
	for a, ia := range w.bidx[:nb] {
		sum := f[ia]
		for t, v := range L[a*s : a*s+a] {
			sum -= float64(v * xs[t])
		}
		xs[a] = sum * inv[a]
	}
	for a := nb - 1; a >= 0; a-- {
		v := xs[a] * inv[a]
		xs[a] = v
		for t, l := range L[a*s : a*s+a] {
			xs[t] -= float64(l * v)
		}
	}
}

// gradScale returns Σ_j sqrt(G_jj)|x_j| over the basis, the scale of the gradient tolerance.
func (w *Workspace) gradScale(nb int) float64 {
	scale := 0.0
	for a, i := range w.bidx[:nb] {
		scale += float64(w.sq[i] * math.Abs(w.xs[a]))
	}
	return scale
}

// grad returns y_i = (Gx - f)_i for the current iterate (xs on the basis) and its tolerance.
func (w *Workspace) grad(G, f []float64, nb, i int, scale float64) (y, tol float64) {
	k := w.k
	row := G[i*k : i*k+k]
	y = -f[i]
	for b, j := range w.bidx[:nb] {
		y += float64(row[j] * w.xs[b])
	}
	return y, w.tolFac * (math.Abs(f[i]) + float64(w.sq[i]*scale))
}

// check finds the infeasible variables of the current iterate (basis x_i < 0, active non-dead
// y_i < -tol_i; dependent passive variables are at 0 and not tested), stores them in
// increasing order in w.viol and returns their number.
func (w *Workspace) check(G, f []float64, nb int) int {
	k := w.k
	bidx, xs := w.bidx[:nb], w.xs[:nb]
	scale := w.gradScale(nb)
	nv, a := 0, 0
	for i := 0; i < k; i++ {
		if a < nb && bidx[a] == i {
			if xs[a] < 0 {
				w.viol[nv] = i
				nv++
			}
			a++
			continue
		}
		if w.dead[i] || w.passive[i] {
			continue
		}
		if y, tol := w.grad(G, f, nb, i, scale); y < -tol {
			w.viol[nv] = i
			nv++
		}
	}
	return nv
}

// store writes the current iterate (xs on the basis, 0 elsewhere) to x, keeping only positive
// entries.
func (w *Workspace) store(x []float64, nb int) {
	clear(x[:w.k])
	for a, i := range w.bidx[:nb] {
		if v := w.xs[a]; v > 0 {
			x[i] = v
		}
	}
}

// objective returns ½xᵀGx - fᵀx (which is ½||Ax - b||² - ½||b||²) over the support of x.
func (w *Workspace) objective(G, f, x []float64) float64 {
	k := w.k
	q := 0.0
	for i, xi := range x[:k] {
		if xi == 0 {
			continue
		}
		gx := 0.0
		for j, v := range G[i*k : i*k+k] {
			if x[j] != 0 {
				gx += float64(v * x[j])
			}
		}
		q += float64(xi * (float64(0.5*gx) - f[i]))
	}
	return q
}

// fallback finishes a column with the Lawson–Hanson active-set method, starting from the last
// pivoting iterate (basis size nb), and writes the result to x. It reports whether the method
// converged (rather than stopping at its iteration cap).
func (w *Workspace) fallback(G, f, x []float64, nb int) bool {
	k := w.k
	w.store(x, nb) // the last iterate projected onto x >= 0
	if !(w.objective(G, f, x) <= 0) {
		clear(x[:k]) // 0 is better (or the iterate is not finite)
	}
	passive, excl, z := w.passive, w.excl, w.z
	for i := 0; i < k; i++ {
		passive[i] = x[i] > 0
		excl[i] = false
	}
	for outer := 0; outer < MaxIter(k); outer++ {
		// Inner loop: move x towards the least-squares solution on its passive set, dropping
		// the variables that reach zero, until that solution is positive.
		for {
			_, nb := w.solvePassive(G, f)
			clear(z)
			ok := true
			for a, i := range w.bidx[:nb] {
				z[i] = w.xs[a]
			}
			for i := 0; i < k; i++ {
				if passive[i] && !(z[i] > 0) {
					ok = false
				}
			}
			if ok {
				copy(x[:k], z)
				break
			}
			alpha, amin := 1.0, -1
			for i := 0; i < k; i++ {
				if passive[i] && !(z[i] > 0) {
					if t := x[i] / (x[i] - z[i]); t < alpha || amin < 0 {
						alpha, amin = t, i
					}
				}
			}
			if !(alpha >= 0) { // NaN: give up on this point
				alpha = 0
			}
			for i := 0; i < k; i++ {
				if passive[i] {
					x[i] += float64(alpha * (z[i] - x[i]))
					if i == amin || !(x[i] > 0) {
						x[i] = 0
						passive[i] = false
					}
				}
			}
		}
		// Outer step: add the variable with the most negative gradient that can enter.
		_, nb := w.solvePassive(G, f)
		scale := w.gradScale(nb)
		best, bestY := -1, 0.0
		for i := 0; i < k; i++ {
			if passive[i] || w.dead[i] || excl[i] {
				continue
			}
			// Rank by the gradient scaled to unit-norm columns, which is scale invariant.
			if y, tol := w.grad(G, f, nb, i, scale); y < -tol && y/w.sq[i] < bestY {
				best, bestY = i, y/w.sq[i]
			}
		}
		if best < 0 {
			return true
		}
		// The entering variable must be independent of the passive ones and move up; if
		// rounding says otherwise, leave it out until x changes.
		passive[best] = true
		_, nb = w.solvePassive(G, f)
		enters := false
		for a, i := range w.bidx[:nb] {
			if i == best {
				enters = w.xs[a] > 0
			}
		}
		if !enters {
			passive[best] = false
			excl[best] = true
			continue
		}
		for i := range excl {
			excl[i] = false
		}
	}
	return false
}
