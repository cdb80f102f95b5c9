package nnls

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestAgainstExhaustive(t *testing.T) {
	cases := []struct {
		k, extraRows, n int
		shift           float64
		problems        int
	}{
		{1, 0, 1, 0, 200},
		{1, 3, 7, 0.5, 100},
		{2, 0, 3, 0, 200},
		{2, 4, 5, -0.3, 100},
		{3, 2, 4, 0, 200},
		{4, 1, 6, 0.3, 150},
		{5, 3, 4, 0, 100},
		{6, 6, 3, -0.2, 80},
		{7, 2, 3, 0, 50},
		{8, 4, 3, 0.2, 40},
		{8, 0, 2, 0, 30},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("k=%d,m=k+%d,n=%d,shift=%g", tc.k, tc.extraRows, tc.n, tc.shift), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(tc.k), uint64(100*tc.extraRows+tc.n)))
			w := NewWorkspace(tc.k)
			worst := 0.0
			for trial := 0; trial < tc.problems; trial++ {
				p := randomProblem(r, tc.k, tc.k+tc.extraRows+1, tc.n, tc.shift)
				X := make([]float64, tc.k*tc.n)
				if c := w.Solve(p.G, p.F, X, tc.n, false); c != 0 {
					t.Fatalf("trial %d: %d columns capped", trial, c)
				}
				for c := 0; c < tc.n; c++ {
					f := p.F[c*tc.k : (c+1)*tc.k]
					x := X[c*tc.k : (c+1)*tc.k]
					ref, ok := exhaustive(p.G, f, tc.k)
					if !ok {
						t.Fatalf("trial %d col %d: exhaustive search found no KKT point", trial, c)
					}
					e := relErr(x, ref)
					worst = math.Max(worst, e)
					if e > 1e-9 {
						t.Fatalf("trial %d col %d: rel err %.3g\nbpp %v\nref %v", trial, c, e, x, ref)
					}
				}
			}
			t.Logf("worst relative error %.3g", worst)
		})
	}
}

func TestKKTLarge(t *testing.T) {
	cases := []struct {
		name string
		k, m int
		n    int
		make func(r *rand.Rand, k, m, n int) *problem
	}{
		{"gauss k=20", 20, 60, 300, func(r *rand.Rand, k, m, n int) *problem { return randomProblem(r, k, m, n, 0) }},
		{"gauss-shift k=20", 20, 25, 300, func(r *rand.Rand, k, m, n int) *problem { return randomProblem(r, k, m, n, 0.5) }},
		{"gauss k=50", 50, 120, 200, func(r *rand.Rand, k, m, n int) *problem { return randomProblem(r, k, m, n, 0) }},
		{"gauss-shift k=50", 50, 55, 200, func(r *rand.Rand, k, m, n int) *problem { return randomProblem(r, k, m, n, -0.4) }},
		{"nmf k=20", 20, 100, 300, func(r *rand.Rand, k, m, n int) *problem { return nmfProblem(r, k, m, n, 0.3, 0.05) }},
		{"nmf k=50", 50, 200, 200, func(r *rand.Rand, k, m, n int) *problem { return nmfProblem(r, k, m, n, 0.2, 0.05) }},
		{"nmf k=120", 120, 300, 40, func(r *rand.Rand, k, m, n int) *problem { return nmfProblem(r, k, m, n, 0.1, 0.05) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(tc.k), uint64(tc.m)))
			p := tc.make(r, tc.k, tc.m, tc.n)
			w := NewWorkspace(tc.k)
			X := make([]float64, tc.k*tc.n)
			if c := w.Solve(p.G, p.F, X, tc.n, false); c != 0 {
				t.Fatalf("%d columns capped", c)
			}
			checkKKTAll(t, p, X, 1e-9)
			// A warm start from the solution must reproduce it.
			X2 := append([]float64(nil), X...)
			if c := w.Solve(p.G, p.F, X2, tc.n, true); c != 0 {
				t.Fatalf("warm: %d columns capped", c)
			}
			checkKKTAll(t, p, X2, 1e-9)
		})
	}
}

func checkKKTAll(t *testing.T, p *problem, X []float64, tol float64) {
	t.Helper()
	k := p.k
	for c := 0; c < p.n; c++ {
		if ok, why := kktViolation(p.G, p.F[c*k:(c+1)*k], X[c*k:(c+1)*k], tol); !ok {
			t.Fatalf("column %d: KKT violated: %s", c, why)
		}
	}
}

// solveAll solves p from scratch (cold, or warm from warmFrom) with a fresh workspace and
// checks that nothing was capped and X is finite and nonnegative.
func solveAll(t *testing.T, p *problem, warmFrom []float64) []float64 {
	t.Helper()
	X := make([]float64, p.k*p.n)
	warm := warmFrom != nil
	if warm {
		copy(X, warmFrom)
	}
	if c := NewWorkspace(p.k).Solve(p.G, p.F, X, p.n, warm); c != 0 {
		t.Fatalf("%d columns capped", c)
	}
	for i, v := range X {
		if !(v >= 0) || math.IsInf(v, 0) {
			t.Fatalf("X[%d] = %v", i, v)
		}
	}
	return X
}

// dropColumn returns the problem with variable j removed (A without column j).
func dropColumn(p *problem, j int) *problem {
	m := p.m
	A := append(append([]float64(nil), p.A[:j*m]...), p.A[(j+1)*m:]...)
	return newProblem(p.k-1, m, p.n, A, p.B)
}

// insertZero returns x (k-1 per column) with a zero inserted at position j in every column.
func insertZero(x []float64, k, n, j int) []float64 {
	out := make([]float64, 0, (k+1)*n)
	for c := 0; c < n; c++ {
		col := x[c*k : (c+1)*k]
		out = append(out, col[:j]...)
		out = append(out, 0)
		out = append(out, col[j:]...)
	}
	return out
}

func TestDeadComponent(t *testing.T) {
	for _, tc := range []struct {
		k, dead int
		badF    bool // make F inconsistent: f_dead != 0 although G_dead,dead == 0
	}{
		{1, 0, false}, {1, 0, true}, {3, 1, false}, {5, 0, true}, {6, 5, false}, {8, 3, true},
	} {
		t.Run(fmt.Sprintf("k=%d,dead=%d,badF=%v", tc.k, tc.dead, tc.badF), func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, uint64(tc.k*10+tc.dead)))
			m, n := tc.k+4, 20
			p := randomProblem(r, tc.k, m, n, 0.3)
			clear(p.A[tc.dead*m : (tc.dead+1)*m])
			p = newProblem(tc.k, m, n, p.A, p.B)
			if tc.badF {
				for c := 0; c < n; c++ {
					p.F[c*tc.k+tc.dead] = float64(c%3) - 1 // -1, 0, 1
				}
			}
			X := solveAll(t, p, nil)
			for c := 0; c < n; c++ {
				if X[c*tc.k+tc.dead] != 0 {
					t.Fatalf("column %d: dead variable = %v", c, X[c*tc.k+tc.dead])
				}
			}
			if tc.k == 1 {
				return
			}
			want := insertZero(solveAll(t, dropColumn(p, tc.dead), nil), tc.k-1, n, tc.dead)
			if e := relErr(X, want); e > 1e-12 {
				t.Fatalf("differs from the reduced problem: rel err %.3g", e)
			}
			// Also from a warm start that marks the dead variable passive.
			warm := make([]float64, len(X))
			for i := range warm {
				warm[i] = 1
			}
			if e := relErr(solveAll(t, p, warm), want); e > 1e-9 {
				t.Fatalf("warm start: rel err %.3g", e)
			}
		})
	}
}

func TestDuplicateColumns(t *testing.T) {
	for _, tc := range []struct {
		k, src, dst int
		scale       float64 // column dst = scale * column src
	}{
		{2, 0, 1, 1}, {3, 0, 2, 1}, {4, 2, 1, 1}, {6, 1, 4, 2.5}, {8, 7, 0, 1e-3}, {8, 2, 3, 1},
		{20, 3, 11, 1}, {20, 19, 0, 7},
	} {
		t.Run(fmt.Sprintf("k=%d,%d=%g*%d", tc.k, tc.dst, tc.scale, tc.src), func(t *testing.T) {
			r := rand.New(rand.NewPCG(11, uint64(tc.k*100+tc.src*10+tc.dst)))
			m, n := tc.k+5, 50
			p := nmfProblem(r, tc.k, m, n, 0.5, 0.3)
			for i := 0; i < m; i++ {
				p.A[tc.dst*m+i] = tc.scale * p.A[tc.src*m+i]
			}
			p = newProblem(tc.k, m, n, p.A, p.B)
			w := NewWorkspace(tc.k)
			X := make([]float64, tc.k*n)
			if c := w.Solve(p.G, p.F, X, n, false); c != 0 {
				t.Fatalf("%d columns capped", c)
			}
			if w.dropped == 0 {
				t.Error("no dependent variable was detected")
			}
			checkKKTAll(t, p, X, 1e-9)
			// The fit A x is unique: compare objectives with the problem without the copy.
			q := dropColumn(p, tc.dst)
			Xr := solveAll(t, q, nil)
			for c := 0; c < n; c++ {
				f := p.F[c*tc.k : (c+1)*tc.k]
				got := objective(p.G, f, X[c*tc.k:(c+1)*tc.k])
				want := objective(q.G, q.F[c*(tc.k-1):(c+1)*(tc.k-1)], Xr[c*(tc.k-1):(c+1)*(tc.k-1)])
				if d := math.Abs(got - want); d > 1e-9*math.Abs(want)+1e-12 {
					t.Fatalf("column %d: objective %.15g, reduced problem %.15g", c, got, want)
				}
			}
		})
	}
}

func TestSpecialSolutions(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, k := range []int{1, 2, 5, 10, 30} {
		m, n := 2*k+3, 25
		t.Run(fmt.Sprintf("F=0/k=%d", k), func(t *testing.T) {
			p := randomProblem(r, k, m, n, 0)
			clear(p.F)
			X := solveAll(t, p, nil)
			for i, v := range X {
				if v != 0 || math.Signbit(v) {
					t.Fatalf("X[%d] = %v, want +0", i, v)
				}
			}
		})
		t.Run(fmt.Sprintf("all-constrained/k=%d", k), func(t *testing.T) {
			// A >= 0 and B <= 0 give F <= 0, so x = 0 is optimal.
			p := nmfProblem(r, k, m, n, 0.5, 0)
			for i := range p.B {
				p.B[i] = -p.B[i] - r.Float64()
			}
			p = newProblem(k, m, n, p.A, p.B)
			X := solveAll(t, p, nil)
			for i, v := range X {
				if v != 0 {
					t.Fatalf("X[%d] = %v, want 0", i, v)
				}
			}
		})
		t.Run(fmt.Sprintf("all-free/k=%d", k), func(t *testing.T) {
			// B = A C with C > 0: the unconstrained optimum C is feasible.
			p := randomProblem(r, k, m, n, 0)
			C := make([]float64, k*n)
			for i := range C {
				C[i] = 0.1 + r.Float64()
			}
			for c := 0; c < n; c++ {
				for i := 0; i < m; i++ {
					v := 0.0
					for j := 0; j < k; j++ {
						v += p.A[j*m+i] * C[c*k+j]
					}
					p.B[c*m+i] = v
				}
			}
			p = newProblem(k, m, n, p.A, p.B)
			X := solveAll(t, p, nil)
			if e := relErr(X, C); e > 1e-9 {
				t.Fatalf("rel err %.3g", e)
			}
		})
	}
}

func TestWarmStart(t *testing.T) {
	for _, k := range []int{1, 3, 8, 25, 60} {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, uint64(k)))
			m, n := k+10, 40
			p := nmfProblem(r, k, m, n, 0.4, 0.2)
			X := solveAll(t, p, nil)

			// From the exact solution: unchanged, in one solve per column.
			w := NewWorkspace(k)
			x := make([]float64, k)
			for c := 0; c < n; c++ {
				want := X[c*k : (c+1)*k]
				copy(x, want)
				if w.SolveOne(p.G, p.F[c*k:(c+1)*k], x, true) {
					t.Fatalf("column %d capped", c)
				}
				if w.iters != 1 {
					t.Fatalf("column %d: %d solves from the exact solution, want 1", c, w.iters)
				}
				for i := range x {
					if math.Float64bits(x[i]) != math.Float64bits(want[i]) {
						t.Fatalf("column %d: warm start changed x[%d] from %v to %v", c, i, want[i], x[i])
					}
				}
			}

			// From wrong passive sets: converges to the same optimum.
			for trial := 0; trial < 5; trial++ {
				warm := make([]float64, k*n)
				for i := range warm {
					switch trial {
					case 0: // everything passive
						warm[i] = 1
					case 1: // complement of the optimal passive set
						if X[i] == 0 {
							warm[i] = 1
						}
					default:
						if r.IntN(2) == 0 {
							warm[i] = r.Float64()
						} else {
							warm[i] = -r.Float64() // negative entries are not passive
						}
					}
				}
				if e := relErr(solveAll(t, p, warm), X); e > 1e-9 {
					t.Fatalf("trial %d: rel err %.3g", trial, e)
				}
			}
		})
	}
}

func TestBadlyScaled(t *testing.T) {
	for _, k := range []int{3, 8, 20} {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			r := rand.New(rand.NewPCG(13, uint64(k)))
			m, n := 2*k, 30
			p := nmfProblem(r, k, m, n, 0.5, 0.1)
			X := solveAll(t, p, nil)
			// Scale variable i by D_i in 1e-4..1e4: G -> DGD (entries up to 1e-8..1e8),
			// F -> DF, solution -> D⁻¹x.
			D := make([]float64, k)
			for i := range D {
				D[i] = math.Pow(10, -4+8*float64(i)/float64(k-1))
			}
			r.Shuffle(k, func(i, j int) { D[i], D[j] = D[j], D[i] })
			s := &problem{k: k, m: m, n: n, G: make([]float64, k*k), F: make([]float64, k*n)}
			for i := 0; i < k; i++ {
				for j := 0; j < k; j++ {
					s.G[i*k+j] = D[i] * p.G[i*k+j] * D[j]
				}
				for c := 0; c < n; c++ {
					s.F[c*k+i] = D[i] * p.F[c*k+i]
				}
			}
			Xs := solveAll(t, s, nil)
			for c := 0; c < n; c++ {
				got := make([]float64, k)
				for i := range got {
					got[i] = D[i] * Xs[c*k+i]
				}
				if e := relErr(got, X[c*k:(c+1)*k]); e > 1e-8 {
					t.Fatalf("column %d: rel err %.3g", c, e)
				}
				if ok, why := kktViolation(s.G, s.F[c*k:(c+1)*k], Xs[c*k:(c+1)*k], 1e-8); !ok {
					t.Fatalf("column %d: scaled KKT: %s", c, why)
				}
			}
		})
	}
}

func TestDeterminism(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 19))
	for _, k := range []int{3, 10, 50} {
		n := 500
		p := nmfProblem(r, k, 3*k, n, 0.3, 0.1)
		// Duplicate a column to exercise the singular path too.
		for i := 0; i < p.m; i++ {
			p.A[(k-1)*p.m+i] = p.A[i]
		}
		p = newProblem(k, p.m, n, p.A, p.B)
		run := func(w *Workspace, warm bool, init []float64) []float64 {
			X := append([]float64(nil), init...)
			w.Solve(p.G, p.F, X, n, warm)
			return X
		}
		zero := make([]float64, k*n)
		a := run(NewWorkspace(k), false, zero)
		// A used workspace (different cached factor) and garbage in X must not matter.
		w := NewWorkspace(k)
		other := nmfProblem(r, k, 3*k, 10, 0.5, 0.1)
		w.Solve(other.G, other.F, make([]float64, k*10), 10, false)
		garbage := make([]float64, k*n)
		for i := range garbage {
			garbage[i] = r.NormFloat64()
		}
		b := run(w, false, garbage)
		for i := range a {
			if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
				t.Fatalf("k=%d: run 1 and 2 differ at %d: %v vs %v", k, i, a[i], b[i])
			}
		}
		c1 := run(NewWorkspace(k), true, garbage)
		c2 := run(w, true, garbage)
		for i := range c1 {
			if math.Float64bits(c1[i]) != math.Float64bits(c2[i]) {
				t.Fatalf("k=%d: warm runs differ at %d", k, i)
			}
		}
		// Solve on n columns equals SolveOne column by column.
		x := make([]float64, k)
		for c := 0; c < n; c++ {
			w.SolveOne(p.G, p.F[c*k:(c+1)*k], x, false)
			for i := range x {
				if math.Float64bits(x[i]) != math.Float64bits(a[c*k+i]) {
					t.Fatalf("k=%d: SolveOne differs from Solve in column %d", k, c)
				}
			}
		}
	}
}

func TestCapFallback(t *testing.T) {
	// Force the cap with an artificially small limit: the result must still be feasible,
	// finite and no worse than x = 0.
	r := rand.New(rand.NewPCG(23, 29))
	for _, k := range []int{2, 5, 20} {
		p := randomProblem(r, k, k+3, 60, 0.2)
		ref := solveAll(t, p, nil)
		for _, limit := range []int{1, 2} {
			w := NewWorkspace(k)
			w.maxIter = limit
			X := make([]float64, k*p.n)
			capped := w.Solve(p.G, p.F, X, p.n, false)
			if capped == 0 {
				t.Errorf("k=%d limit=%d: nothing capped", k, limit)
			}
			for c := 0; c < p.n; c++ {
				f := p.F[c*k : (c+1)*k]
				x := X[c*k : (c+1)*k]
				for i, v := range x {
					if !(v >= 0) || math.IsInf(v, 0) {
						t.Fatalf("k=%d: x[%d] = %v", k, i, v)
					}
				}
				q, qopt := objective(p.G, f, x), objective(p.G, f, ref[c*k:(c+1)*k])
				if q > 0 || q < qopt-1e-9*math.Abs(qopt) {
					t.Fatalf("k=%d column %d: objective %v outside [%v, 0]", k, c, q, qopt)
				}
				// The Lawson–Hanson fallback normally reaches the optimum.
				if e := relErr(x, ref[c*k:(c+1)*k]); e > 1e-9 {
					t.Fatalf("k=%d column %d: fallback rel err %.3g", k, c, e)
				}
			}
		}
	}
}

// TestNaNDoesNotHang: NaN and Inf in G or F (unsupported input) do not make Solve loop: it
// does no more work than the iteration caps allow (the interrupt, asked every stopWork
// multiply-adds, counts the work and stops a Solve that exceeds the bound, failing the test),
// it reports at most n capped columns, every entry of X is >= 0 and never NaN, and a column
// whose right-hand side is finite over a finite G gets the same bits as without the bad one.
func TestNaNDoesNotHang(t *testing.T) {
	t.Parallel()
	k, n := 4, 3
	r := rand.New(rand.NewPCG(1, 2))
	p := randomProblem(r, k, 8, n, 0)
	// The most work a column can take: MaxIter(k) pivoting solves, then Lawson–Hanson's
	// MaxIter(k) outer steps of two solves and at most k+1 inner ones (each drops a passive
	// variable); a solve counts k(s+1) <= k(k+1) and a factorization at most k rows of
	// k*k/2+1.
	solves := MaxIter(k) + MaxIter(k)*(k+3)
	bound := n * solves * (k*(k+1) + k*(k*k/2+1))
	asks := bound / stopWork // the interrupt calls a terminating Solve may make
	clean := make([]float64, k*n)
	NewWorkspace(k).Solve(p.G, p.F, clean, n, false)
	for _, c := range []struct {
		name string
		mod  func(G, F []float64)
		// fine are the columns the change leaves finite (over a finite G).
		fine []int
	}{
		{"NaN in F's column 0", func(G, F []float64) { F[1] = math.NaN() }, []int{1, 2}},
		{"NaN in G's row and column 1", func(G, F []float64) { G[1] = math.NaN(); G[k] = math.NaN() }, nil},
		{"NaN on G's diagonal", func(G, F []float64) { G[k+1] = math.NaN() }, nil},
		{"+Inf in G", func(G, F []float64) { G[0] = math.Inf(1) }, nil},
		{"-Inf and +Inf in F's columns 0 and 1", func(G, F []float64) { F[0] = math.Inf(-1); F[5] = math.Inf(1) }, []int{2}},
	} {
		for _, warm := range []bool{false, true} {
			G := append([]float64(nil), p.G...)
			F := append([]float64(nil), p.F...)
			c.mod(G, F)
			X := make([]float64, k*n)
			if warm {
				copy(X, clean) // a warm start from the clean solution
			}
			w := NewWorkspace(k)
			calls := 0
			w.SetInterrupt(func() bool { calls++; return calls > asks })
			capped := w.Solve(G, F, X, n, warm)
			if calls > asks {
				t.Fatalf("%s (warm %v): Solve did more than the %d multiply-adds the iteration caps allow", c.name, warm, bound)
			}
			if capped < 0 || capped > n {
				t.Errorf("%s (warm %v): %d columns capped of %d", c.name, warm, capped, n)
			}
			for i, v := range X {
				if !(v >= 0) {
					t.Errorf("%s (warm %v): X[%d] = %v, want >= 0", c.name, warm, i, v)
				}
			}
			for _, j := range c.fine {
				for i := j * k; i < (j+1)*k; i++ {
					if math.Float64bits(X[i]) != math.Float64bits(clean[i]) {
						t.Errorf("%s (warm %v): column %d, a finite one, X[%d] = %v, want %v as without the bad column", c.name, warm, j, i, X[i], clean[i])
					}
				}
			}
		}
	}
}

func TestEdgeSizes(t *testing.T) {
	w := NewWorkspace(0)
	if c := w.Solve(nil, nil, nil, 5, false); c != 0 {
		t.Fatal("k=0 capped")
	}
	w = NewWorkspace(3)
	if c := w.Solve(make([]float64, 9), nil, nil, 0, false); c != 0 {
		t.Fatal("n=0 capped")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("short X did not panic")
		}
	}()
	w.Solve(make([]float64, 9), make([]float64, 6), make([]float64, 5), 2, false)
}

func TestIllConditioned(t *testing.T) {
	// Square or nearly square A make G ill-conditioned; this is where full exchanges stop
	// reducing the number of infeasible variables and the single-exchange rule is needed.
	singles := 0
	for _, tc := range []struct{ k, extra int }{{2, 0}, {3, 0}, {4, 0}, {5, 0}, {5, 1}, {6, 0}, {7, 1}, {8, 0}, {8, 1}} {
		t.Run(fmt.Sprintf("k=%d,m=k+%d", tc.k, tc.extra), func(t *testing.T) {
			r := rand.New(rand.NewPCG(41, uint64(tc.k*10+tc.extra)))
			w := NewWorkspace(tc.k)
			for trial := 0; trial < 60; trial++ {
				var p *problem
				switch trial % 3 {
				case 0:
					p = nmfProblem(r, tc.k, tc.k+tc.extra, 20, 0.5, 0.3)
				case 1:
					p = randomProblem(r, tc.k, tc.k+tc.extra, 20, 0.8)
				default:
					p = randomProblem(r, tc.k, tc.k+tc.extra, 20, -0.5)
				}
				X := make([]float64, tc.k*p.n)
				if c := w.Solve(p.G, p.F, X, p.n, false); c != 0 {
					t.Fatalf("trial %d: %d capped", trial, c)
				}
				for c := 0; c < p.n; c++ {
					f, x := p.F[c*tc.k:(c+1)*tc.k], X[c*tc.k:(c+1)*tc.k]
					if ok, why := kktViolation(p.G, f, x, 1e-9); !ok {
						t.Fatalf("trial %d col %d: KKT: %s", trial, c, why)
					}
					ref, ok := exhaustive(p.G, f, tc.k)
					if !ok {
						continue // too ill-conditioned for the reference
					}
					// Compare fits rather than x: x itself is only as accurate as cond(G)·ε.
					q, qref := objective(p.G, f, x), objective(p.G, f, ref)
					if q > qref+1e-9*math.Abs(qref)+1e-14 {
						t.Fatalf("trial %d col %d: objective %.17g > reference %.17g", trial, c, q, qref)
					}
				}
			}
			singles += w.singles
		})
	}
	if singles == 0 {
		t.Error("the single-exchange rule was never used")
	}
}

func TestRankDeficient(t *testing.T) {
	// More variables than rows of A: G is singular with many dependent passive sets. Pivoting
	// that stalls is finished by Lawson–Hanson; the results must satisfy the KKT conditions.
	switched, dropped := 0, 0
	for _, tc := range []struct{ k, m, n int }{{2, 1, 50}, {4, 2, 200}, {8, 3, 200}, {8, 5, 200}, {20, 5, 200}, {20, 15, 200}, {50, 10, 100}, {50, 40, 100}, {100, 30, 30}} {
		t.Run(fmt.Sprintf("k=%d,m=%d", tc.k, tc.m), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(tc.k), uint64(tc.m)))
			w := NewWorkspace(tc.k)
			for trial := 0; trial < 6; trial++ {
				var p *problem
				if trial%2 == 0 {
					p = nmfProblem(r, tc.k, tc.m, tc.n, 0.3, 0.1)
				} else {
					p = randomProblem(r, tc.k, tc.m, tc.n, 0.2)
				}
				for _, warm := range []bool{false, true} {
					X := make([]float64, tc.k*p.n)
					if warm {
						for i := range X {
							X[i] = r.Float64() - 0.3
						}
					}
					if c := w.Solve(p.G, p.F, X, p.n, warm); c != 0 {
						t.Fatalf("trial %d: %d capped", trial, c)
					}
					checkKKTAll(t, p, X, 1e-9)
				}
			}
			switched += w.switched
			dropped += w.dropped
		})
	}
	if switched == 0 || dropped == 0 {
		t.Errorf("switched %d, dropped %d: the rank-deficient paths were not exercised", switched, dropped)
	}
}
