package kernels

import (
	"context"
	"math"
	"testing"
)

// synthDense returns X = B* C* (+ noise) with uniform factors, M x N dense.
func synthDense(m, n, k int, seed uint64, noise float64) *Dense {
	rb := NewRNG(seed, DomainSyntheticB, 0)
	b := make([]float64, m*k)
	for i := range b {
		b[i] = rb.Float64()
	}
	x := NewDense(m, n)
	c := make([]float64, k)
	for j := 0; j < n; j++ {
		rc := NewRNG(seed, DomainSyntheticC, uint64(j))
		for p := range c {
			c[p] = rc.Float64()
		}
		col := x.Col(j)
		for p, cp := range c {
			axpy(col, cp, b[p*m:(p+1)*m])
		}
		if noise > 0 {
			rn := NewRNG(seed, DomainSyntheticNoise, uint64(j))
			for i := range col {
				col[i] += float64(noise * rn.Float64())
			}
		}
	}
	return x
}

// sparsify zeroes about the given fraction of entries of a dense block (deterministically).
func sparsify(x *Dense, frac float64, seed uint64) *Dense {
	y := &Dense{Rows: x.Rows, Cols: x.Cols, Data: append([]float64(nil), x.Data...)}
	r := NewRNG(seed, 99, 0)
	for i := range y.Data {
		if r.Float64() < frac {
			y.Data[i] = 0
		}
	}
	return y
}

func mustRun(t testing.TB, x Block, shards int, cfg Config) *Result {
	t.Helper()
	blocks, err := Split(x, shards)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), blocks, cfg)
	if err != nil {
		t.Fatalf("%s on %d shards: %v", cfg.Algo, shards, err)
	}
	return res
}

// maxRelDiff returns max |a-b| / max(max|a|, tiny).
func maxRelDiff(a, b []float64) float64 {
	var d, s float64
	for i := range a {
		d = math.Max(d, math.Abs(a[i]-b[i]))
		s = math.Max(s, math.Abs(a[i]))
	}
	if s == 0 {
		return d
	}
	return d / s
}

// sameBits reports whether a and b hold the same float64 values, bit for bit.
func sameBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}
