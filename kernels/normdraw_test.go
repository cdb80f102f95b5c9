package kernels

import (
	"fmt"
	"math"
	"testing"
)

// drawInitCScalar is the reference draw: initRandom's loop before the AVX-512 kernel.
func drawInitCScalar(c []float64, seed uint64, colOffset, j0, j1, k int, scale float64) {
	for j := j0; j < j1; j++ {
		rc := NewRNG(seed, DomainInitC, uint64(colOffset+j))
		for p := 0; p < k; p++ {
			c[j*k+p] = scale * math.Abs(rc.Norm())
		}
	}
}

// firstBitDiff returns the first index where a and b differ bitwise, or -1.
func firstBitDiff(a, b []float64) int {
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestDrawInitCBitwise: drawInitC (eight columns at a time through the kernel where the CPU
// has it, the tail in Go) gives the scalar draw's bits, for every rank 1..40, every tail
// length, many seeds and column offsets (including offsets near 2^64 wrapping).
func TestDrawInitCBitwise(t *testing.T) {
	if normDraw8 == nil {
		t.Skip("no AVX-512 draw on this CPU or build")
	}
	cases := []struct {
		seed   uint64
		offset int
	}{{0, 0}, {7, 0}, {1, 12345}, {0xdeadbeef, 1 << 40}, {math.MaxUint64, -17}, {42, math.MaxInt64 - 100}}
	total := 0
	for _, cs := range cases {
		for k := 1; k <= 40; k++ {
			for _, n := range []int{8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 23, 64, 250} {
				for _, j0 := range []int{0, 3} {
					want := make([]float64, n*k)
					got := make([]float64, n*k)
					scale := 0.37 + float64(k)
					drawInitCScalar(want, cs.seed, cs.offset, j0, n, k, scale)
					drawInitC(got, cs.seed, cs.offset, j0, n, k, scale)
					if i := firstBitDiff(got, want); i >= 0 {
						t.Fatalf("seed %d offset %d k %d n %d j0 %d: entry %d is %v (%#x), want %v (%#x)",
							cs.seed, cs.offset, k, n, j0, i, got[i], math.Float64bits(got[i]), want[i], math.Float64bits(want[i]))
					}
					total += n - j0
				}
			}
		}
	}
	// Many columns at K = 3 (the paper's rank), cheap.
	for s := uint64(0); s < 4; s++ {
		n, k := 1<<18+5, 3
		want := make([]float64, n*k)
		got := make([]float64, n*k)
		drawInitCScalar(want, s, int(s)*1000003, 0, n, k, 1.5)
		drawInitC(got, s, int(s)*1000003, 0, n, k, 1.5)
		if i := firstBitDiff(got, want); i >= 0 {
			t.Fatalf("seed %d: entry %d is %#x, want %#x", s, i, math.Float64bits(got[i]), math.Float64bits(want[i]))
		}
		total += n
	}
	t.Logf("%d columns compared", total)
}

// TestInitRandomKernelBitwise: a whole random-init job gives the same bits with the AVX-512
// draw and with the scalar one forced (the initial objective ||X - B0 C0||^2, which reads all
// of C0, and the factors after one iteration), on shard layouts whose column offsets and
// lengths are not multiples of eight.
func TestInitRandomKernelBitwise(t *testing.T) {
	if normDraw8 == nil {
		t.Skip("no AVX-512 draw on this CPU or build")
	}
	for _, k := range []int{1, 3, 5} {
		for _, shards := range []int{1, 3} {
			x := synthDense(9, 1003, k, 11, 0.01)
			cfg := baseConfig(DID, k, StopRule{MaxIter: 1})
			got := mustRun(t, x, shards, cfg)
			forceScalarNorm = true
			want := mustRun(t, x, shards, cfg)
			forceScalarNorm = false
			name := fmt.Sprintf("k %d shards %d", k, shards)
			if math.Float64bits(got.Initial) != math.Float64bits(want.Initial) {
				t.Errorf("%s: initial objective %v, scalar draw %v", name, got.Initial, want.Initial)
			}
			if i := firstBitDiff(got.C, want.C); i >= 0 {
				t.Errorf("%s: C entry %d differs", name, i)
			}
			if i := firstBitDiff(got.B, want.B); i >= 0 {
				t.Errorf("%s: B entry %d differs", name, i)
			}
		}
	}
}

// BenchmarkInitRandomC draws the random initial C of n = 2^20 columns at K = 3 on one thread,
// through the scalar RNG.Norm and through the AVX-512 kernel (where the CPU has it); the
// metric ns/normal is per value of C0.
func BenchmarkInitRandomC(b *testing.B) {
	const n, k = 1 << 20, 3
	c := make([]float64, n*k)
	for _, path := range []string{"scalar", "avx512"} {
		b.Run(path, func(b *testing.B) {
			if path == "avx512" && normDraw8 == nil {
				b.Skip("no AVX-512 draw on this CPU or build")
			}
			forceScalarNorm = path == "scalar"
			defer func() { forceScalarNorm = false }()
			for b.Loop() {
				drawInitC(c, 7, 0, 0, n, k, 1.25)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(n*k), "ns/normal")
		})
	}
}
