//go:build !purego

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
