package kernels

import (
	"context"
	"fmt"
	"math"
	"testing"
)

// TestHeldOutOfSquares: with Options.TestOfSquares a run's held-out error is that of the
// model's square against the values' squares (the input's scale under a sqrt transform), the
// direct sum over the held-out entries to round-off, the same bits on 1 and 3 threads, while
// the iterations' test errors stay those of the values; without it the run's TestSSE is the
// values' own.
func TestHeldOutOfSquares(t *testing.T) {
	const k = 3
	counts := withNaN(countsBlock(14, 2600, 7), 0.05, 9)
	for i, v := range counts.Data {
		counts.Data[i] = math.Sqrt(v) // NaN stays NaN
	}
	o := Options{Missing: true, TestFraction: 0.2, TestSeed: 3}
	for _, x := range []Block{counts, ToCSC(counts)} {
		for _, algo := range []Algorithm{DID, HALS} {
			p := 3
			if algo == HALS {
				p = 1
			}
			blocks, err := Split(x, p)
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%T/%s", x, algo)
			run := func(threads int, squares bool) *Result {
				c := Config{Algo: algo, K: k, Seed: 2, Init: InitSpec{Method: InitRandom}, Options: o, Threads: threads, Stop: StopRule{MaxIter: 30}}
				c.Options.TestOfSquares = squares
				res, err := Run(context.Background(), blocks, c)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			one, three, plain := run(1, true), run(3, true), run(3, false)
			if one.TestSSE != three.TestSSE || one.TestSqNorm != three.TestSqNorm {
				t.Errorf("%s: on 1 thread %v of %v, on 3 %v of %v", name, one.TestSSE, one.TestSqNorm, three.TestSSE, three.TestSqNorm)
			}
			m, n := x.Dims()
			d := ToDense(x)
			var sse, sq, sseValues float64
			for j := range n {
				for i := range m {
					v := d.At(i, j)
					if !HeldOut(o.TestSeed, j, i, o.TestFraction) || v != v {
						continue
					}
					var y float64
					for q := range k {
						y += one.B[q*m+i] * one.C[j*k+q]
					}
					sseValues += (v - y) * (v - y)
					y = max(y, 0)
					e := v*v - y*y
					sse += e * e
					sq += v * v * v * v
				}
			}
			if relDiff(one.TestSSE, sse) > 1e-12 || relDiff(one.TestSqNorm, sq) > 1e-12 || sse == 0 {
				t.Errorf("%s: held-out error of the squares %.17g of %.17g, direct %.17g of %.17g", name, one.TestSSE, one.TestSqNorm, sse, sq)
			}
			last := one.History[len(one.History)-1]
			if relDiff(last.TestSSE, sseValues) > 1e-9 || relDiff(plain.TestSSE, sseValues) > 1e-9 || relDiff(plain.TestSSE, sse) < 1e-3 {
				t.Errorf("%s: the last iteration's test SSE %v and the plain run's %v should be the values' %v, not the squares' %v",
					name, last.TestSSE, plain.TestSSE, sseValues, sse)
			}
		}
	}
}
