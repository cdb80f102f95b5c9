package nnls

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSolveInterruptKeepsBits: a stop function that never fires changes nothing, bit for bit.
func TestSolveInterruptKeepsBits(t *testing.T) {
	for _, k := range []int{3, 10, 50} {
		p := nmfProblem(rand.New(rand.NewPCG(uint64(k), 5)), k, max(100, 4*k), 3000, 0.4, 0.05)
		for _, warm := range []bool{false, true} {
			start := benchStart(p, warm)
			plain, stoppable := slices.Clone(start), slices.Clone(start)
			cp := NewWorkspace(k).Solve(p.G, p.F, plain, p.n, warm)
			w := NewWorkspace(k)
			calls := 0
			w.SetInterrupt(func() bool { calls++; return false })
			cs := w.Solve(p.G, p.F, stoppable, p.n, warm)
			if cp != cs {
				t.Errorf("k=%d warm=%v: %d capped columns, %d with a stop function", k, warm, cp, cs)
			}
			for i := range plain {
				if math.Float64bits(plain[i]) != math.Float64bits(stoppable[i]) {
					t.Fatalf("k=%d warm=%v: entry %d is %v, %v with a stop function", k, warm, i, plain[i], stoppable[i])
				}
			}
			if calls == 0 && k > 3 { // 3000 columns at k = 3 are less work than one look
				t.Errorf("k=%d warm=%v: the stop function was never asked", k, warm)
			}
		}
	}
}

// TestSolveInterruptWithinFactorization: a large problem stops inside the factorization of its
// first passive set (the stop function is asked between its rows), leaves the column as it
// was, and the workspace then solves the next call normally.
func TestSolveInterruptWithinFactorization(t *testing.T) {
	const k, m = 600, 700
	r := rand.New(rand.NewPCG(7, 11))
	p := nmfProblem(r, k, m, 2, 0.5, 0.01)
	x := make([]float64, k*p.n)
	for i := range x {
		x[i] = 1 // warm start with every variable passive: the first factorization is k x k
	}
	w := NewWorkspace(k)
	calls := 0
	w.SetInterrupt(func() bool { calls++; return calls == 3 })
	w.Solve(p.G, p.F, x, p.n, true)
	if calls != 3 {
		t.Fatalf("stop asked %d times, want 3 (Solve should return as soon as it says stop)", calls)
	}
	if w.factorizations != 1 {
		t.Errorf("%d factorizations started, want the interrupted first one only", w.factorizations)
	}
	for i, v := range x {
		if v != 1 {
			t.Fatalf("entry %d is %v: an interrupted column must keep its warm start", i, v)
		}
	}
	// Still usable: the same problem, uninterrupted, gives the plain solver's bits.
	w.SetInterrupt(func() bool { return false })
	want := slices.Clone(x)
	NewWorkspace(k).Solve(p.G, p.F, want, p.n, true)
	w.Solve(p.G, p.F, x, p.n, true)
	if !slices.Equal(x, want) {
		t.Error("after an interrupted Solve the workspace gives other results")
	}
}
