package kernels

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// BenchmarkMaskedDID times whole masked DID iterations through the driver (2 shards, all
// cores) on a tall dense block, swept over the held-out fraction: 0 is the unmasked code (a
// test fraction of 0 is no mask), the others hold out that fraction of the entries. It reports
// the mean and the median time of an iteration (the first, which also scans the mask, is left
// out); run with -benchtime=Nx for N iterations.
func BenchmarkMaskedDID(b *testing.B) {
	const m, n, k, shards = 20, 500000, 5, 2
	x := synthDense(m, n, k, 4, 0.05)
	blocks, err := Split(x, shards)
	if err != nil {
		b.Fatal(err)
	}
	for _, frac := range []float64{0, 0.01, 0.1, 0.3} {
		b.Run(fmt.Sprintf("M%d_N%d_K%d/held=%g", m, n, k, frac), func(b *testing.B) {
			cfg := Config{Algo: DID, K: k, Seed: 1, Init: InitSpec{Method: InitRandom}, Stop: StopRule{MaxIter: b.N + 1},
				Options: Options{TestFraction: frac, TestSeed: 7}}
			res, err := Run(context.Background(), blocks, cfg)
			if err != nil {
				b.Fatal(err)
			}
			it := slices.Clone(res.IterSeconds[1:])
			var total float64
			for _, s := range it {
				total += s
			}
			slices.Sort(it)
			b.ReportMetric(total/float64(len(it))*1e3, "ms/iter")
			b.ReportMetric(it[len(it)/2]*1e3, "median-ms/iter")
		})
	}
}
