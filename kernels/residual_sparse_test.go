package kernels

import (
	"math"
	"testing"
)

// TestReportedResidualSparse checks the sparse residual a run reports against the direct sums
// (ResidualSq, maskedResidualSq) on sparse blocks, unmasked and under every kind of mask, to
// about 1e-12 of itself; and, on blocks fitted exactly, where the identity would be all
// cancellation, that it falls back to the direct sums bit for bit.
func TestReportedResidualSparse(t *testing.T) {
	cases := []struct {
		name            string
		m, n, k         int
		density         float64
		opt             Options
		implicit, exact bool
	}{
		{name: "unmasked", m: 300, n: 200, k: 7, density: 0.05},
		{name: "unmasked dense-ish", m: 40, n: 60, k: 3, density: 0.7},
		{name: "held out, implicit", m: 500, n: 300, k: 12, density: 0.03, opt: Options{TestFraction: 0.1, TestSeed: 4}, implicit: true},
		{name: "held out, listed", m: 500, n: 300, k: 12, density: 0.03, opt: Options{TestFraction: 0.1, TestSeed: 4}},
		{name: "held out 90%, implicit", m: 80, n: 90, k: 5, density: 0.2, opt: Options{TestFraction: 0.9, TestSeed: 2}, implicit: true},
		{name: "missing and held out", m: 200, n: 150, k: 9, density: 0.1, opt: Options{TestFraction: 0.2, TestSeed: 1, Missing: true}},
		{name: "exact, unmasked", m: 120, n: 80, k: 4, density: 1, exact: true},
		{name: "exact, implicit", m: 120, n: 80, k: 4, density: 1, exact: true, opt: Options{TestFraction: 0.1, TestSeed: 9}, implicit: true},
		{name: "exact, listed", m: 120, n: 80, k: 4, density: 1, exact: true, opt: Options{TestFraction: 0.1, TestSeed: 9}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var x *CSC
			var b, c []float64
			r := NewRNG(77, 0, 0)
			if tc.exact {
				x, b, c = exactSparse(tc.m, tc.n, tc.k)
			} else {
				x = sparseCounts(tc.m, tc.n, tc.density, 11)
				b, c = make([]float64, tc.m*tc.k), make([]float64, tc.k*tc.n)
				for i := range b {
					b[i] = r.Float64() * 0.5
				}
				for i := range c {
					if r.Float64() < 0.8 {
						c[i] = r.Float64()
					}
				}
				clear(c[0:tc.k]) // a zero column
			}
			if tc.opt.Missing {
				for t := range x.Val {
					if t%17 == 3 {
						x.Val[t] = math.NaN()
					}
				}
			}
			var sm *shardMask
			var direct float64
			if tc.opt.Masked() {
				sm = scanMask(x, 0, tc.opt, true, tc.implicit, nil)
				if (sm.held != nil) != tc.implicit {
					t.Fatalf("implicit held-out set: %v, want %v", sm.held != nil, tc.implicit)
				}
				direct = maskedResidualSq(sm, b, c, tc.k, nil)
			} else {
				direct = ResidualSq(x, b, c, tc.k, nil)
			}
			for _, threads := range []int{1, 3} {
				pool := NewPool(threads)
				got := reportedResidualSq(x, sm, b, c, tc.k, pool)
				pool.Close()
				if tc.exact {
					if got != direct {
						t.Errorf("%d threads: exact fit: %g, want the direct sums' %g bit for bit", threads, got, direct)
					}
					continue
				}
				if d := math.Abs(got - direct); !(d <= 1e-12*direct) {
					t.Errorf("%d threads: %.17g, direct %.17g (off by %.3g of itself)", threads, got, direct, d/direct)
				}
			}
		})
	}
}

// exactSparse returns a CSC block X = B C that B and C fit exactly, whose stored entries are
// exactly the model's nonzeros: row i belongs to component i mod k, and column j uses every
// component, so each column's model is zero nowhere and the unstored rows' part is all
// cancellation if X is stored whole (density 1: the rows it does not store are none).
func exactSparse(m, n, k int) (*CSC, []float64, []float64) {
	b, c := make([]float64, m*k), make([]float64, k*n)
	for i := 0; i < m; i++ {
		b[(i%k)*m+i] = float64(1+i%5) / 3 // inexact: the identity's sums round
	}
	for j := 0; j < n; j++ {
		for p := 0; p < k; p++ {
			c[j*k+p] = float64(1+(j+p)%3) * 0.1
		}
	}
	d := make([]float64, m*n)
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			d[j*m+i] = b[(i%k)*m+i] * c[j*k+i%k]
		}
	}
	return ToCSC(&Dense{Rows: m, Cols: n, Data: d}), b, c
}
