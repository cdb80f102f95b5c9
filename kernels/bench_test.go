package kernels

import (
	"context"
	"fmt"
	"testing"
)

var benchShapes = []struct {
	name    string
	m, n, k int
	sparse  float64 // fraction of zeros; 0 keeps the block dense
}{
	{"M5_N1e6_K3", 5, 1000000, 3, 0},
	{"M784_N70000_K10", 784, 70000, 10, 0},
	{"M784_N70000_K10_sparse50", 784, 70000, 10, 0.5},
}

func benchBlock(m, n, k int, zeros float64) Block {
	x := synthDense(m, n, k, 1, 0.01)
	if zeros > 0 {
		return ToCSC(sparsify(x, zeros, 2))
	}
	return x
}

// BenchmarkCStep times DID's local step (C update + W, V) per form, kernel path and shape, on
// all cores.
func BenchmarkCStep(b *testing.B) {
	for _, sh := range benchShapes {
		x := benchBlock(sh.m, sh.n, sh.k, sh.sparse)
		for _, form := range []Form{FormResidual, FormGram} {
			for _, path := range AvailableKernelPaths() {
				if form == FormResidual && path != KernelGeneric {
					continue // the residual form has no assembly
				}
				b.Run(fmt.Sprintf("%s/%s/%s", sh.name, form, path), func(b *testing.B) {
					pool := NewPool(0)
					defer pool.Close()
					bb, c := exactFactors(sh.m, sh.n, sh.k, 2)
					st := newCStep(x, sh.k, pool, form, nil, gramKernelsOf(path))
					w := make([]float64, sh.m*sh.k)
					v := make([]float64, sh.k*sh.k)
					st.run(bb, c, w, v) // the first call also forms X C0^T for the starting objective
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						st.run(bb, c, w, v)
					}
				})
			}
		}
	}
}

// BenchmarkDIDIteration times whole DID iterations through the driver (C step, allreduce,
// B update) on 4 shards, plain and with scikit-learn-style penalties (an L1/L2 mix on both
// factors), which should cost nothing measurable.
func BenchmarkDIDIteration(b *testing.B) {
	for _, sh := range benchShapes {
		x := benchBlock(sh.m, sh.n, sh.k, sh.sparse)
		for _, pen := range []struct {
			name string
			opts Options
		}{{"plain", Options{}}, {"penalized", Options{AlphaCoef: 0.01, AlphaBasis: 0.01, L1Ratio: 0.5}}} {
			b.Run(sh.name+"/"+pen.name, func(b *testing.B) {
				blocks, _ := Split(x, 4)
				cfg := Config{Algo: DID, K: sh.k, Seed: 1, Init: InitSpec{Method: InitRandom}, Stop: StopRule{MaxIter: b.N + 1}, Options: pen.opts}
				res, err := Run(context.Background(), blocks, cfg)
				if err != nil {
					b.Fatal(err)
				}
				var total float64
				for _, s := range res.IterSeconds[1:] {
					total += s
				}
				b.ReportMetric(total/float64(b.N)*1e3, "ms/iter")
			})
		}
	}
}

// BenchmarkRoofline times the memory floor for the same shapes and reports its bandwidth.
func BenchmarkRoofline(b *testing.B) {
	for _, sh := range benchShapes {
		x := benchBlock(sh.m, sh.n, sh.k, sh.sparse)
		b.Run(sh.name, func(b *testing.B) {
			pool := NewPool(0)
			defer pool.Close()
			src := make([]float64, sh.k*sh.n)
			dst := make([]float64, sh.k*sh.n)
			for i := range src { // written, so that C is not the kernel's zero page
				src[i], dst[i] = 1, 2
			}
			b.SetBytes(RooflineBytes(x, sh.k))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				MemoryRoofline(x, sh.k, src, dst, pool)
			}
		})
	}
}
