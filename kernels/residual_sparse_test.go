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

// TestReportedResidualNearCancellation puts each column's unstored share of c^T G c from a
// third down to 5e-7, around the guard (sparseResidualCancel), and checks the reported
// residual against a compensated sum over every observed row to 1e-12 of itself, unmasked
// and with a held-out set: a guard too loose (1e-5) fails it, and so does none.
func TestReportedResidualNearCancellation(t *testing.T) {
	const m, k, n, heavy = 3000, 12, 24, 60
	b, c := make([]float64, m*k), make([]float64, k*n)
	r := NewRNG(21, 0, 0)
	for i := range b {
		b[i] = r.Float64()
	}
	for i := range c {
		c[i] = r.Float64()
	}
	x := &CSC{Rows: m, Cols: n, ColPtr: make([]int, n+1)}
	for j := 0; j < n; j++ {
		for i := 0; i < heavy; i++ {
			var mi float64
			for p := 0; p < k; p++ {
				mi += b[p*m+i] * c[j*k+p]
			}
			x.RowIdx = append(x.RowIdx, int32(i))
			x.Val = append(x.Val, mi*(1+1e-4*(r.Float64()-0.5)))
		}
		x.ColPtr[j+1] = len(x.RowIdx)
	}
	// The unstored share of c^T G c: about 0.33, 5e-3, 1.2e-3, 4.4e-4, 5e-5 and 5e-7.
	for _, light := range []float64{0.1, 0.01, 0.005, 0.003, 0.001, 1e-4} {
		bb := append([]float64(nil), b...)
		for p := 0; p < k; p++ {
			for i := heavy; i < m; i++ {
				bb[p*m+i] *= light
			}
		}
		for _, o := range []Options{{}, {TestFraction: 0.2, TestSeed: 3}} {
			var sm *shardMask
			if o.Masked() {
				sm = scanMask(x, 0, o, true, true, nil)
			}
			got := reportedResidualSq(x, sm, bb, c, k, nil)
			var s, comp float64 // the compensated reference over every observed row
			for j := 0; j < n; j++ {
				xs := map[int]float64{}
				for t := x.ColPtr[j]; t < x.ColPtr[j+1]; t++ {
					xs[int(x.RowIdx[t])] = x.Val[t]
				}
				for i := 0; i < m; i++ {
					if sm != nil && sm.held.holds(int(sm.pat[j]), i) {
						continue
					}
					var hi, lo float64
					for p := 0; p < k; p++ {
						v, cp := bb[p*m+i], c[j*k+p]
						pr := v * cp
						pe := math.FMA(v, cp, -pr)
						tt := hi + pr
						bv := tt - hi
						lo += (hi - (tt - bv)) + (pr - bv) + pe
						hi = tt
					}
					d := (xs[i] - hi) - lo
					v := d * d
					tt := s + v
					if math.Abs(s) >= math.Abs(v) {
						comp += (s - tt) + v
					} else {
						comp += (v - tt) + s
					}
					s = tt
				}
			}
			if ref := s + comp; !(math.Abs(got-ref) <= 1e-12*ref) {
				t.Errorf("rows past %d scaled by %g, held out %v: %.17g, reference %.17g (off by %.3g of itself)",
					heavy, light, o.TestFraction, got, ref, math.Abs(got-ref)/ref)
			}
		}
	}
}

// TestLayoutSameResidual runs DID on a dense block and on its CSC form, over several lanes
// (matio may choose either layout by kernel path), and checks that the reported residual has
// the same bits, unmasked and masked.
func TestLayoutSameResidual(t *testing.T) {
	d0 := sparseCounts(40, 300, 0.3, 8) // about 70% zeros
	dense := &Dense{Rows: 40, Cols: 300, Data: make([]float64, 40*300)}
	for j := 0; j < 300; j++ {
		for t := d0.ColPtr[j]; t < d0.ColPtr[j+1]; t++ {
			dense.Data[j*40+int(d0.RowIdx[t])] = d0.Val[t]
		}
	}
	// Every entry stored, zeros included: a stored zero counts as an unstored one.
	whole := &CSC{Rows: 40, Cols: 300, ColPtr: make([]int, 301)}
	for j := 0; j < 300; j++ {
		for i := 0; i < 40; i++ {
			whole.RowIdx = append(whole.RowIdx, int32(i))
			whole.Val = append(whole.Val, dense.Data[j*40+i])
		}
		whole.ColPtr[j+1] = len(whole.RowIdx)
	}
	for _, sparse := range []*CSC{ToCSC(dense), whole} {
		for _, o := range []Options{{}, {TestFraction: 0.1, TestSeed: 3}, {TestFraction: 0.1, TestSeed: 3, Missing: true}} {
			cfg := baseConfig(DID, 5, StopRule{MaxIter: 10})
			cfg.Options = o
			a, b := mustRun(t, dense, 3, cfg), mustRun(t, sparse, 3, cfg)
			if !sameBits(a.B, b.B) || a.Residual != b.Residual || a.TestSSE != b.TestSSE {
				t.Errorf("%d stored, %+v: CSC reports residual %.17g, dense %.17g", sparse.NNZ(), o, b.Residual, a.Residual)
			}
		}
	}
}

// TestReportedResidualOverflow scales B up and C down by 1e200 (B C is moderate, B^T B
// overflows) and by 1e-158 / 1e158 (B^T B is subnormal): the identity is not trusted there,
// and the residual is the direct sums'.
func TestReportedResidualOverflow(t *testing.T) {
	x := sparseCounts(12, 80, 0.3, 5)
	for _, scale := range []float64{1e200, 1e-158} {
		r := NewRNG(1, 0, 0)
		b, c := make([]float64, 12*3), make([]float64, 3*80)
		for i := range b {
			b[i] = r.Float64() * scale
		}
		for i := range c {
			c[i] = r.Float64() / scale
		}
		for _, o := range []Options{{}, {TestFraction: 0.2, TestSeed: 1}} {
			var sm *shardMask
			var direct float64
			if o.Masked() {
				sm = scanMask(x, 0, o, true, true, nil)
				direct = maskedResidualSq(sm, b, c, 3, nil)
			} else {
				direct = ResidualSq(x, b, c, 3, nil)
			}
			got := reportedResidualSq(x, sm, b, c, 3, nil)
			if !(math.Abs(got-direct) <= 1e-12*direct) {
				t.Errorf("scale %g, held out %v: %g, direct %g", scale, o.TestFraction, got, direct)
			}
		}
	}
}
