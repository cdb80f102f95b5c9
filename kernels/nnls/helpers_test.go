package nnls

import (
	"math"
	"math/rand/v2"
)

// problem is a test instance: A is m x k column-major, B is m x n column-major, and G, F are
// the normal-equation data the solver sees.
type problem struct {
	k, m, n int
	A, B    []float64
	G, F    []float64
}

// newProblem makes G = AᵀA (row-major) and F = AᵀB (column-major) from A and B.
func newProblem(k, m, n int, A, B []float64) *problem {
	p := &problem{k: k, m: m, n: n, A: A, B: B, G: make([]float64, k*k), F: make([]float64, k*n)}
	for i := 0; i < k; i++ {
		for j := 0; j < k; j++ {
			p.G[i*k+j] = dot(A[i*m:(i+1)*m], A[j*m:(j+1)*m])
		}
		for c := 0; c < n; c++ {
			p.F[c*k+i] = dot(A[i*m:(i+1)*m], B[c*m:(c+1)*m])
		}
	}
	return p
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// randomProblem draws A with entries N(0,1) + shift (a negative shift makes constraints bind
// more often) and B with entries N(0,1).
func randomProblem(r *rand.Rand, k, m, n int, shift float64) *problem {
	A := make([]float64, m*k)
	for i := range A {
		A[i] = r.NormFloat64() + shift
	}
	B := make([]float64, m*n)
	for i := range B {
		B[i] = r.NormFloat64()
	}
	return newProblem(k, m, n, A, B)
}

// nmfProblem is NMF-like: A >= 0 uniform, B = A·C + noise with C >= 0 sparse.
func nmfProblem(r *rand.Rand, k, m, n int, density, noise float64) *problem {
	A := make([]float64, m*k)
	for i := range A {
		A[i] = r.Float64()
	}
	B := make([]float64, m*n)
	for c := 0; c < n; c++ {
		col := B[c*m : (c+1)*m]
		for j := 0; j < k; j++ {
			if r.Float64() < density {
				v := r.Float64()
				for i := range col {
					col[i] += A[j*m+i] * v
				}
			}
		}
		for i := range col {
			col[i] += noise * r.NormFloat64()
		}
	}
	return newProblem(k, m, n, A, B)
}

// objective returns q(x) = ½xᵀGx - fᵀx, which equals ½||Ax-b||² - ½||b||².
func objective(G, f, x []float64) float64 {
	k := len(x)
	q := 0.0
	for i := 0; i < k; i++ {
		gx := 0.0
		for j := 0; j < k; j++ {
			gx += G[i*k+j] * x[j]
		}
		q += x[i] * (0.5*gx - f[i])
	}
	return q
}

// gaussSolve solves the dense system M z = r (M is s x s row-major, both overwritten) by
// Gaussian elimination with partial pivoting. It reports false if M is singular.
func gaussSolve(M, r []float64, s int) bool {
	for c := 0; c < s; c++ {
		p := c
		for i := c + 1; i < s; i++ {
			if math.Abs(M[i*s+c]) > math.Abs(M[p*s+c]) {
				p = i
			}
		}
		if M[p*s+c] == 0 {
			return false
		}
		if p != c {
			for j := 0; j < s; j++ {
				M[p*s+j], M[c*s+j] = M[c*s+j], M[p*s+j]
			}
			r[p], r[c] = r[c], r[p]
		}
		for i := c + 1; i < s; i++ {
			m := M[i*s+c] / M[c*s+c]
			for j := c; j < s; j++ {
				M[i*s+j] -= m * M[c*s+j]
			}
			r[i] -= m * r[c]
		}
	}
	for c := s - 1; c >= 0; c-- {
		v := r[c]
		for j := c + 1; j < s; j++ {
			v -= M[c*s+j] * r[j]
		}
		r[c] = v / M[c*s+c]
	}
	return true
}

// exhaustive solves one NNLS problem by enumerating all 2^k passive sets, solving the
// unconstrained system on each and keeping the KKT point (lowest objective among those that
// pass the KKT test with a loose tolerance). It reports false if no candidate passes.
func exhaustive(G, f []float64, k int) ([]float64, bool) {
	var best []float64
	bestQ := math.Inf(1)
	x := make([]float64, k)
	idx := make([]int, 0, k)
	for mask := 0; mask < 1<<k; mask++ {
		idx = idx[:0]
		for i := 0; i < k; i++ {
			if mask&(1<<i) != 0 {
				idx = append(idx, i)
			}
		}
		s := len(idx)
		M := make([]float64, s*s)
		r := make([]float64, s)
		for a, i := range idx {
			for b, j := range idx {
				M[a*s+b] = G[i*k+j]
			}
			r[a] = f[i]
		}
		if !gaussSolve(M, r, s) {
			continue
		}
		clear(x)
		for a, i := range idx {
			x[i] = r[a]
		}
		if !kkt(G, f, x, 1e-8) {
			continue
		}
		if q := objective(G, f, x); q < bestQ {
			bestQ = q
			best = append(best[:0], x...)
		}
	}
	return best, best != nil
}

// kkt reports whether x satisfies the NNLS optimality conditions x >= 0, g = Gx - f >= 0 and
// x_i g_i = 0, up to tol relative to the natural scale of each gradient entry.
func kkt(G, f, x []float64, tol float64) bool {
	ok, _ := kktViolation(G, f, x, tol)
	return ok
}

// kktViolation is kkt with the name of the first failed condition.
func kktViolation(G, f, x []float64, tol float64) (bool, string) {
	k := len(x)
	scale := 0.0
	for j := 0; j < k; j++ {
		if d := G[j*k+j]; d > 0 {
			scale += math.Sqrt(d) * math.Abs(x[j])
		}
	}
	for i := 0; i < k; i++ {
		if !(x[i] >= 0) || math.IsInf(x[i], 0) {
			return false, "x < 0 or not finite"
		}
		if G[i*k+i] <= 0 { // dead variable: must be 0
			if x[i] != 0 {
				return false, "dead variable nonzero"
			}
			continue
		}
		g := -f[i]
		for j := 0; j < k; j++ {
			g += G[i*k+j] * x[j]
		}
		t := tol * (math.Abs(f[i]) + math.Sqrt(G[i*k+i])*scale)
		if g < -t {
			return false, "negative gradient"
		}
		if x[i] > 0 && math.Abs(g) > t {
			return false, "nonzero gradient on passive variable"
		}
	}
	return true, ""
}

// relErr returns max_i |x_i - y_i| / max(max_i |y_i|, tiny).
func relErr(x, y []float64) float64 {
	num, den := 0.0, 0.0
	for i := range x {
		num = math.Max(num, math.Abs(x[i]-y[i]))
		den = math.Max(den, math.Abs(y[i]))
	}
	if den == 0 {
		return num
	}
	return num / den
}
