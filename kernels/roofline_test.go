package kernels

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// streamLengths cover empty input, every tail length around one and two blocks, and long runs.
func streamLengths() []int {
	var ns []int
	for n := 0; n <= 140; n++ {
		ns = append(ns, n)
	}
	return append(ns, 1000, 4099, 1<<16+13)
}

// TestStreamSumF64: the streaming sum (assembly where the CPU has it) adds in exactly the order
// of the Go loop, at any offset (alignment) and length, and agrees with a plain sum.
func TestStreamSumF64(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]float64, 1<<16+20)
	for i := range buf {
		buf[i] = r.Float64()*2 - 0.5
	}
	for _, off := range []int{0, 1, 3} {
		for _, n := range streamLengths() {
			x := buf[off : off+n]
			got, want := sumF64(x), sumF64Generic(x)
			if math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("off %d n %d: sumF64 %v, generic %v", off, n, got, want)
			}
			var plain float64
			for _, v := range x {
				plain += v
			}
			if math.Abs(got-plain) > 1e-12*float64(n+1) {
				t.Fatalf("off %d n %d: sum %v, plain sum %v", off, n, got, plain)
			}
		}
	}
	// Integer values: every order is exact.
	x := make([]float64, 777)
	for i := range x {
		x[i] = float64(i%13) - 4
	}
	var want float64
	for _, v := range x {
		want += v
	}
	if got := sumF64(x); got != want {
		t.Fatalf("integer values: sum %v, want %v", got, want)
	}
}

// TestStreamSumInts: the integer streaming sums wrap like Go's integers, at any offset and
// length, with negative and large values.
func TestStreamSumInts(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	b32 := make([]int32, 1<<16+20)
	b64 := make([]int, 1<<16+20)
	for i := range b32 {
		b32[i] = int32(r.Uint32())
		b64[i] = int(r.Uint64())
	}
	b32[5], b64[5] = math.MaxInt32, math.MaxInt
	for _, off := range []int{0, 1, 3} {
		for _, n := range streamLengths() {
			x32, x64 := b32[off:off+n], b64[off:off+n]
			var w32 uint32
			var w64 uint64
			for i := range x32 {
				w32 += uint32(x32[i])
				w64 += uint64(x64[i])
			}
			if got := sumI32(x32); got != w32 {
				t.Fatalf("off %d n %d: sumI32 %d, want %d", off, n, got, w32)
			}
			if got := sumI32Generic(x32); got != w32 {
				t.Fatalf("off %d n %d: sumI32Generic %d, want %d", off, n, got, w32)
			}
			if got := sumI64(x64); got != w64 {
				t.Fatalf("off %d n %d: sumI64 %d, want %d", off, n, got, w64)
			}
			if got := sumI64Generic(x64); got != w64 {
				t.Fatalf("off %d n %d: sumI64Generic %d, want %d", off, n, got, w64)
			}
		}
	}
}

// TestMemoryRoofline: the roofline pass returns the sum of X's values (and for CSC of its row
// indices and column end pointers) and copies C, on dense and CSC blocks, on a column slice
// whose pointers do not start at 0, with 1 and 2 workers alike.
func TestMemoryRoofline(t *testing.T) {
	const m, n, k = 7, 5000, 3
	dense := synthDense(m, n, k, 1, 0.01)
	csc := ToCSC(sparsify(synthDense(m, n, k, 2, 0.01), 0.6, 3))
	blocks := map[string]Block{"dense": dense, "csc": csc, "csc slice": csc.ColSlice(1001, 4500), "dense slice": dense.ColSlice(7, 3000)}
	for name, x := range blocks {
		_, cols := x.Dims()
		if len(laneBounds(x, k)) < 3 {
			t.Fatalf("%s: one lane only; the test wants several", name)
		}
		var want RooflineSums
		var plain float64
		switch xb := x.(type) {
		case *Dense:
			for _, v := range xb.Data[:m*cols] {
				plain += v
			}
		case *CSC:
			for p := xb.ColPtr[0]; p < xb.ColPtr[cols]; p++ {
				plain += xb.Val[p]
				want.RowIdx += uint32(xb.RowIdx[p])
			}
			for _, p := range xb.ColPtr[1 : cols+1] {
				want.ColPtr += uint64(p)
			}
		}
		src := make([]float64, k*cols)
		for i := range src {
			src[i] = float64(i) + 0.5
		}
		var first RooflineSums
		for _, workers := range []int{1, 2} {
			pool := NewPool(workers)
			dst := make([]float64, k*cols)
			got := MemoryRoofline(x, k, src, dst, pool)
			pool.Close()
			if math.Abs(got.Values-plain) > 1e-9*math.Abs(plain) || got.RowIdx != want.RowIdx || got.ColPtr != want.ColPtr {
				t.Errorf("%s, %d workers: sums %+v, want values %v, row indices %d, column pointers %d", name, workers, got, plain, want.RowIdx, want.ColPtr)
			}
			if !slices.Equal(dst, src) {
				t.Errorf("%s, %d workers: C not copied", name, workers)
			}
			if workers == 1 {
				first = got
			} else if got != first {
				t.Errorf("%s: 2 workers %+v, 1 worker %+v", name, got, first)
			}
		}
	}
}

// TestRooflineBytes: the bytes of one pass, by hand.
func TestRooflineBytes(t *testing.T) {
	d := NewDense(7, 100)
	if got, want := RooflineBytes(d, 3), int64(8*700+16*3*100); got != want {
		t.Errorf("dense: %d bytes, want %d", got, want)
	}
	s := &CSC{Rows: 4, Cols: 3, ColPtr: []int{0, 2, 2, 5}, RowIdx: []int32{0, 3, 1, 2, 3}, Val: []float64{1, 2, 3, 4, 5}}
	if got, want := RooflineBytes(s, 2), int64(12*5+8*3+16*2*3); got != want {
		t.Errorf("csc: %d bytes, want %d", got, want)
	}
}

// TestDIDFlops: the flop count of one DID iteration on small examples, by hand.
func TestDIDFlops(t *testing.T) {
	// Dense 5 x 10, K=3 (Kp=4): per column 2*5*4 + 2*5*4 + 2*9 + 3*4 = 110.
	if got := DIDFlops(NewDense(5, 10), 3); got != 1100 {
		t.Errorf("dense: %v flops, want 1100", got)
	}
	// CSC with 5 entries in 3 columns, K=5 (Kp=8): 4*8*5 + 3*(2*25 + 5*8) = 160 + 270.
	s := &CSC{Rows: 4, Cols: 3, ColPtr: []int{0, 2, 2, 5}, RowIdx: []int32{0, 3, 1, 2, 3}, Val: []float64{1, 2, 3, 4, 5}}
	if got := DIDFlops(s, 5); got != 430 {
		t.Errorf("csc: %v flops, want 430", got)
	}
	// K=4 needs no padding: 4*4*5 + 3*(32 + 16).
	if got := DIDFlops(s, 4); got != 224 {
		t.Errorf("csc, K=4: %v flops, want 224", got)
	}
}

// TestFMAKernels: every FMA peak loop of this build (and the Go loop) computes
// chains * lanes * n * a*a.
func TestFMAKernels(t *testing.T) {
	kerns := append(fmaKernels(), scalarFMA)
	for _, kern := range kerns {
		for _, n := range []int{0, 1, 7, 1000} {
			want := float64(fmaChains*kern.lanes*n) * 2.25
			if got := kern.fn(n, 1.5); got != want {
				t.Errorf("%s, n=%d: %v, want %v", kern.kind, n, got, want)
			}
		}
	}
	t.Logf("FMA loops of this build: %d (%s first)", len(kerns)-1, kerns[0].kind)
}

// TestMeasureFMAPeak: a measurement has one rate per loop of the build, each positive and
// finite, and is taken once for a number of workers.
func TestMeasureFMAPeak(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	p := MeasureFMAPeak(pool)
	if p.Workers != 2 || len(p.Rates) != len(fmaKernels()) {
		t.Fatalf("peak %+v", p)
	}
	for i, r := range p.Rates {
		if r.Kind != fmaKernels()[i].kind || !(r.OneCore > 0) || !(r.All > 0) || math.IsInf(r.OneCore, 0) || math.IsInf(r.All, 0) {
			t.Errorf("rate %+v", r)
		}
	}
	if b := p.Best(); b.All != slices.MaxFunc(p.Rates, func(a, b FMARate) int { return cmp.Compare(a.All, b.All) }).All {
		t.Errorf("best %+v of %+v", b, p.Rates)
	}
	if again := MeasureFMAPeak(pool); !slices.Equal(again.Rates, p.Rates) {
		t.Errorf("second measurement %+v, first %+v", again, p)
	}
}

// BenchmarkStream512MB is the streaming bandwidth of the memory roofline pass over a 512 MB
// dense block (no C), on 1 and 2 workers; B/s is the figure.
func BenchmarkStream512MB(b *testing.B) {
	x := NewDense(8, 1<<23)
	for i := range x.Data {
		x.Data[i] = 1
	}
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			pool := NewPool(workers)
			defer pool.Close()
			b.SetBytes(RooflineBytes(x, 0))
			for i := 0; i < b.N; i++ {
				if s := MemoryRoofline(x, 0, nil, nil, pool); s.Values != float64(len(x.Data)) {
					b.Fatalf("sum %v", s.Values)
				}
			}
		})
	}
}
