package nnls

import (
	"math"
	"testing"
)

// byteReader hands out fuzz bytes, then zeros.
type byteReader struct {
	data []byte
	pos  int
}

func (b *byteReader) next() byte {
	if b.pos >= len(b.data) {
		return 0
	}
	b.pos++
	return b.data[b.pos-1]
}

// FuzzSolve builds G = AᵀA and F = AᵀB from fuzzed bytes (k <= 8, A and B with entries of
// either sign, many zeros, columns scaled by 2^-13..2^13 so that G spans about 1e-8..1e8) and
// checks that Solve does not panic, returns finite x >= 0, and does no worse than x = 0.
func FuzzSolve(f *testing.F) {
	f.Add([]byte{2, 3, 1, 0, 16, 32, 48, 240, 200, 100, 1, 2, 3})
	f.Add([]byte{7, 9, 3, 1, 0, 0, 0, 255, 1, 128, 64, 32, 16, 8, 4, 2, 1, 0, 17})
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{5, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})                   // duplicates
	f.Add([]byte{8, 1, 1, 3, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150}) // k > m
	f.Fuzz(func(t *testing.T, data []byte) {
		br := &byteReader{data: data}
		k := 1 + int(br.next()%8)
		m := 1 + int(br.next()%10)
		n := 1 + int(br.next()%4)
		flags := br.next()
		warm := flags&1 != 0
		entry := func() float64 {
			b := br.next()
			if b%4 == 0 {
				return 0
			}
			return float64(int8(b)) / 16
		}
		A := make([]float64, m*k)
		for j := 0; j < k; j++ {
			scale := 1.0
			if flags&2 != 0 {
				scale = math.Ldexp(1, int(br.next()%27)-13)
			}
			for i := 0; i < m; i++ {
				A[j*m+i] = scale * entry()
			}
		}
		B := make([]float64, m*n)
		for i := range B {
			B[i] = entry()
		}
		p := newProblem(k, m, n, A, B)
		X := make([]float64, k*n)
		for i := range X {
			X[i] = entry()
		}
		NewWorkspace(k).Solve(p.G, p.F, X, n, warm)
		for c := 0; c < n; c++ {
			fc, x := p.F[c*k:(c+1)*k], X[c*k:(c+1)*k]
			mag := 0.0
			for i, v := range x {
				if !(v >= 0) || math.IsInf(v, 0) {
					t.Fatalf("column %d: x[%d] = %v", c, i, v)
				}
				mag += math.Abs(fc[i] * v)
				for j := range x {
					mag += math.Abs(p.G[i*k+j] * v * x[j])
				}
			}
			if q := objective(p.G, fc, x); q > 1e-9*mag {
				t.Fatalf("column %d: objective %g is worse than x = 0", c, q)
			}
		}
	})
}
