//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"testing"
)

// BenchmarkSweeps times accelerated DID's further C sweeps (step 2b) on a batch of 256 columns
// after update, at most extra = 2 further sweeps, eps2 = 0.01 (AccelAuto), generic Go against
// each assembly path; ns/col is per column, including the copy that restores the batch's
// coefficients before each run (the same for every path).
//
//	go test -run '^$' -bench BenchmarkSweeps -benchtime 20000x ./kernels
func BenchmarkSweeps(b *testing.B) {
	const ncols = 256
	for _, k := range []int{3, 10, 20, 40} {
		sc := newSweepsCase(k+3, k, ncols, uint64(k), false)
		cs, c := sc.clone()
		paths := map[string]func(h, cs, c, old, gneg, ginv []float64, k, kp, ncols, extra int, eps2 float64){
			"generic": sweepCoefsGo,
		}
		if hasAVX512 {
			paths["avx512"] = avx512Gram.sweeps
		}
		if hasAVX2 {
			paths["avx2"] = avx2Gram.sweeps
		}
		for _, name := range []string{"generic", "avx2", "avx512"} {
			sweeps, ok := paths[name]
			if !ok {
				continue
			}
			b.Run(fmt.Sprintf("k%d/%s", k, name), func(b *testing.B) {
				for range b.N {
					copy(cs, sc.cs)
					copy(c, sc.c)
					sweeps(sc.h, cs, c, sc.old, sc.gneg, sc.ginv, k, sc.kp, ncols, 2, 0.01)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*ncols), "ns/col")
			})
		}
	}
}

// BenchmarkFusedAccel times one pass of the Gram-form C update over dense columns of the
// paper's synthetic shape (M = 5, K = 3), 2^14 columns (in the caches: the arithmetic) and 2^20
// (X is 40 MB, C 24 MB, so memory is in play): the fused
// kernel (plain DID), the fused kernel with at most extra = 2 further sweeps (eps2 = 0.01), and
// the batched steps with the sweeps between update and accDense (the path an accelerated run
// takes without fusedAccel); then the extrapolating forms: the fused kernel with the sweeps
// and the extrapolation (fusedExtrap, --accel auto's C update), with the extrapolation alone
// (fusedExtrapOnly, --accel x), and the batched steps with extrapolateCoefs after the sweeps
// (batchedExtrap: what an extrapolating run took before fusedExtrap). C (and the previous
// coefficients) are restored outside the timer before each pass, so each pass starts from the
// same coefficients. ns/col is per column.
//
//	go test -run '^$' -bench BenchmarkFusedAccel -benchtime 20x ./kernels
func BenchmarkFusedAccel(b *testing.B) {
	if !hasAVX512 || avx512Gram.fusedAccel == nil {
		b.Skip("no AVX-512 on this CPU")
	}
	for _, ncols := range []int{1 << 14, 1 << 20} {
		b.Run(fmt.Sprintf("cols%d", ncols), func(b *testing.B) { benchFusedAccel(b, ncols) })
	}
}

func benchFusedAccel(b *testing.B, ncols int) {
	const m, k, extra, eps2 = 5, 3, 2, 0.01
	const kp = 4
	sc := newSweepsCase(m, k, ncols, 35, false)
	kern := &avx512Gram
	g4, i4 := make([]float64, 4*k*k), make([]float64, 4*k+4)
	fusedScalars(g4, i4, sc.gneg, sc.ginv, k, 0)
	c := make([]float64, len(sc.old))
	const beta = 0.5
	prev0 := make([]float64, len(sc.old)) // previous plain coefficients, near C
	for i, v := range sc.old {
		prev0[i] = v * (0.75 + float64(i%5)/8)
	}
	prev := make([]float64, len(prev0))
	a, v := make([]float64, 4*m), make([]float64, 4*k)
	h, cs, old := make([]float64, gramBatchCols*kp), make([]float64, gramBatchCols*kp), make([]float64, gramBatchCols*k)
	runs := []struct {
		name string
		pass func()
	}{
		{"fused", func() { kern.fused(sc.x, sc.bp, g4, i4, c, m, k, ncols/4, a, v) }},
		{"fusedAccel", func() { kern.fusedAccel(sc.x, sc.bp, g4, i4, c, m, k, ncols/4, extra, eps2, a, v) }},
		{"batchedAccel", func() {
			for j0 := 0; j0 < ncols; j0 += gramBatchCols {
				nb := min(gramBatchCols, ncols-j0)
				xb, cb := sc.x[j0*m:(j0+nb)*m], c[j0*k:(j0+nb)*k]
				kern.dotsDense(sc.bp, xb, m, kp, nb, h)
				copy(old, cb)
				kern.update(h, cs, cb, sc.gneg, sc.ginv, k, kp, nb)
				kern.sweeps(h, cs, cb, old, sc.gneg, sc.ginv, k, kp, nb, extra, eps2)
				kern.accDense(xb, m, k, kp, nb, cs, a, v)
			}
		}},
		{"fusedExtrap", func() {
			kern.fusedExtrap(sc.x, sc.bp, g4, i4, c, m, k, ncols/4, extra, eps2, prev, beta, a, v)
		}},
		{"fusedExtrapOnly", func() { kern.fusedExtrap(sc.x, sc.bp, g4, i4, c, m, k, ncols/4, 0, eps2, prev, beta, a, v) }},
		{"batchedExtrap", func() {
			for j0 := 0; j0 < ncols; j0 += gramBatchCols {
				nb := min(gramBatchCols, ncols-j0)
				xb, cb := sc.x[j0*m:(j0+nb)*m], c[j0*k:(j0+nb)*k]
				kern.dotsDense(sc.bp, xb, m, kp, nb, h)
				copy(old, cb)
				kern.update(h, cs, cb, sc.gneg, sc.ginv, k, kp, nb)
				kern.sweeps(h, cs, cb, old, sc.gneg, sc.ginv, k, kp, nb, extra, eps2)
				extrapolateCoefs(cs, cb, prev[j0*k:(j0+nb)*k], beta, k, kp, nb)
				kern.accDense(xb, m, k, kp, nb, cs, a, v)
			}
		}},
	}
	for _, r := range runs {
		b.Run(r.name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				copy(c, sc.old)
				copy(prev, prev0)
				b.StartTimer()
				r.pass()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*ncols), "ns/col")
		})
	}
}
