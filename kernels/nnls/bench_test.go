package nnls

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchProblem is an ANLS-like C update: G = BᵀB for a nonnegative basis B with m = max(100,
// 4k) rows and F = BᵀX for n = 10000 samples X = B·C* + noise, C* nonnegative and 40% dense.
func benchProblem(k int) *problem {
	r := rand.New(rand.NewPCG(uint64(k), 2011))
	return nmfProblem(r, k, max(100, 4*k), 10000, 0.4, 0.05)
}

// BenchmarkSolve measures Solve on n = 10000 columns, from a cold start (x = 0) and from a
// warm start at the solution of a perturbed problem, as in later ANLS iterations.
func BenchmarkSolve(b *testing.B) {
	for _, k := range []int{3, 10, 50} {
		p := benchProblem(k)
		for _, warm := range []bool{false, true} {
			b.Run(fmt.Sprintf("k=%d/warm=%v", k, warm), func(b *testing.B) {
				w := NewWorkspace(k)
				start := benchStart(p, warm)
				X := make([]float64, len(start))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					copy(X, start)
					w.Solve(p.G, p.F, X, p.n, warm)
				}
			})
		}
	}
}

// BenchmarkSolveGrouped measures the grouped multiple right-hand-side alternative on the same
// problems (its per-column state is allocated once, outside the timed loop).
func BenchmarkSolveGrouped(b *testing.B) {
	for _, k := range []int{3, 10, 50} {
		p := benchProblem(k)
		for _, warm := range []bool{false, true} {
			b.Run(fmt.Sprintf("k=%d/warm=%v", k, warm), func(b *testing.B) {
				w := NewWorkspace(k)
				gs := newGrouped(k, p.n)
				start := benchStart(p, warm)
				X := make([]float64, len(start))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					copy(X, start)
					w.solveGrouped(gs, p.G, p.F, X, p.n, warm)
				}
			})
		}
	}
}

// benchStart returns the starting X: zeros (cold), or (warm) the solution for a basis
// perturbed by 1% entrywise, as an ANLS iteration sees the previous C after B moved.
func benchStart(p *problem, warm bool) []float64 {
	X := make([]float64, p.k*p.n)
	if !warm {
		return X
	}
	r := rand.New(rand.NewPCG(7, 7))
	A := append([]float64(nil), p.A...)
	for i := range A {
		A[i] *= 1 + 0.01*r.NormFloat64()
	}
	q := newProblem(p.k, p.m, p.n, A, p.B)
	NewWorkspace(p.k).Solve(q.G, q.F, X, p.n, false)
	return X
}
