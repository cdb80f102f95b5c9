package kernels

import (
	"math/rand/v2"
	"testing"
)

// TestAccVIdxPaths: the indexed step 4 (accVIdx) gives accVGo's bits on the gathered
// vectors, and the indexed one-row step 3 (accAIdx) accDenseGo's, on every kernel path, for
// ranks around the register passes (1..18), strides K and Kp, lists with repeats and out of
// order, and sums that start from non-zero values.
func TestAccVIdxPaths(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for k := 1; k <= 18; k++ {
		kp := paddedK(k)
		for _, stride := range []int{k, kp} {
			for _, n := range []int{1, 2, 7, 40} {
				rows := 13
				src := make([]float64, rows*stride)
				for i := range src {
					src[i] = r.Float64()*2 - 0.5
				}
				idx := make([]int32, n)
				for u := range idx {
					idx[u] = int32(r.IntN(rows))
				}
				idx[n-1] = int32(rows - 1) // the last vector ends src
				v0 := make([]float64, k*kp)
				for i := range v0 {
					v0[i] = r.Float64()
				}
				// The reference: accVGo on the gathered vectors, pads 0.
				cs := make([]float64, n*kp)
				for u, i := range idx {
					copy(cs[u*kp:u*kp+k], src[int(i)*stride:int(i)*stride+k])
				}
				want := append([]float64(nil), v0...)
				accVGo(cs, k, kp, n, want)
				// accAIdx's reference: accDenseGo on a one-row block of weights w.
				w := make([]float64, n)
				for u := range w {
					w[u] = r.Float64() - 0.3
				}
				a0 := v0[:kp]
				wantA := append([]float64(nil), a0...)
				accDenseGo(w, 1, kp, n, cs, wantA)
				for _, p := range AvailableKernelPaths() {
					kern := gramKernelsFor(p)
					got := append([]float64(nil), v0...)
					kern.accVIdx(src[:(rows-1)*stride+k], stride, idx, k, kp, got)
					if !sameBits(got, want) {
						t.Errorf("accVIdx k=%d stride=%d n=%d path %s: bits differ", k, stride, n, p)
					}
					gotA := append([]float64(nil), a0...)
					kern.accAIdx(src[:(rows-1)*stride+k], stride, idx, w, k, kp, gotA)
					if !sameBits(gotA, wantA) {
						t.Errorf("accAIdx k=%d stride=%d n=%d path %s: bits differ", k, stride, n, p)
					}
				}
			}
		}
	}
}

// TestAccVIdxBadIndex: an index whose vector is not inside src (past its end, or negative)
// panics on every path instead of reading outside src.
func TestAccVIdxBadIndex(t *testing.T) {
	for _, k := range []int{3, 10} {
		kp := paddedK(k)
		src := make([]float64, 5*k)
		for _, bad := range []int32{5, -1, 1 << 30} {
			for _, p := range AvailableKernelPaths() {
				func() {
					defer func() {
						if recover() == nil {
							t.Errorf("k=%d path %s: index %d did not panic", k, p, bad)
						}
					}()
					gramKernelsFor(p).accVIdx(src, k, []int32{0, 4, bad}, k, kp, make([]float64, k*kp))
				}()
				func() {
					defer func() {
						if recover() == nil {
							t.Errorf("accAIdx k=%d path %s: index %d did not panic", k, p, bad)
						}
					}()
					gramKernelsFor(p).accAIdx(src, k, []int32{0, 4, bad}, make([]float64, 3), k, kp, make([]float64, kp))
				}()
			}
		}
	}
}

// BenchmarkAccVIdxK10 times the indexed step 4 at K = 10 on each path, on 39 random rows of a
// 784-row B (a Fashion-MNIST column with 5% of its entries missing).
func BenchmarkAccVIdxK10(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const k, rows = 10, 784
	kp := paddedK(k)
	src := make([]float64, rows*kp)
	for i := range src {
		src[i] = r.Float64()
	}
	idx := make([]int32, 39)
	for u := range idx {
		idx[u] = int32(r.IntN(rows))
	}
	v := make([]float64, k*kp)
	for _, p := range AvailableKernelPaths() {
		kern := gramKernelsFor(p)
		b.Run(p.String(), func(b *testing.B) {
			for b.Loop() {
				kern.accVIdx(src, kp, idx, k, kp, v)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(idx)), "ns/entry")
		})
	}
}
