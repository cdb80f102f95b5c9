//go:build !purego

package kernels

import (
	"fmt"
	"testing"
)

// BenchmarkUpdateGroups times step 2 (the coordinate update of a column's coefficients) on
// 256 columns, four columns a lane: one group of four at a time (updateT4AnyAVX2) against
// four groups interleaved (updateT16AnyAVX2), whose independent chains hide the FMA latency.
func BenchmarkUpdateGroups(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2")
	}
	const ncols = 256
	for _, k := range []int{5, 10, 20, 32} {
		kp := paddedK(k)
		_, _, gneg, ginv, c0 := gramLaneCase(4, ncols, k, false, 7)
		h := make([]float64, ncols*kp)
		for i := range h {
			h[i] = float64(i%7) / 5
		}
		cs := make([]float64, ncols*kp)
		g4, i4, t := make([]float64, 4*k*k), make([]float64, 4*k), make([]float64, 32*kp)
		repeat4(g4, gneg[:k*k])
		repeat4(i4, ginv[:k])
		for _, groups := range []int{1, 4} {
			b.Run(fmt.Sprintf("k%d/groups%d", k, groups), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					for j := 0; j < ncols; j++ {
						copy(cs[j*kp:j*kp+k], c0[j*k:(j+1)*k])
					}
					if groups == 4 {
						updateT16AnyAVX2(h, cs, g4, i4, t, k, kp, ncols/16)
					} else {
						updateT4AnyAVX2(h, cs, g4, i4, t[:8*kp], k, kp, ncols/4)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/ncols, "ns/column")
			})
		}
	}
}
