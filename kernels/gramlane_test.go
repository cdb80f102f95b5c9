package kernels

import (
	"context"
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
)

// gramLaneCase builds the inputs of one call of gramLane: x (dense, or CSC with a fraction of
// zeros and a few empty columns), B in rows of Kp, -G, 1/diag(G) with one dead component when
// k > 2, and starting coefficients.
func gramLaneCase(m, n, k int, sparse bool, seed uint64) (x Block, bp, gneg, ginv, c []float64) {
	d := synthDense(m, n, k, seed, 0.1)
	if sparse {
		d = sparsify(d, 0.5, seed+1)
		for i := 0; i < m; i++ {
			d.Data[3*m+i] = 0 // an empty column
		}
		x = ToCSC(d)
	} else {
		x = d
	}
	b, c := exactFactors(m, n, k, seed+2)
	for i := range b {
		b[i] *= 0.9
	}
	if k > 2 {
		clear64(b[2*m : 3*m]) // a dead component: G_22 = 0
	}
	g := make([]float64, k*k)
	gramCols(b, m, k, g, nil)
	gneg, ginv = make([]float64, k*k), make([]float64, k)
	for i := range g {
		gneg[i] = -g[i]
	}
	for p := range ginv {
		if g[p*k+p] > 0 {
			ginv[p] = 1 / g[p*k+p]
		}
	}
	bp = make([]float64, colsRows(m)*paddedK(k))
	packRows(bp, b, m, k)
	return x, bp, gneg, ginv, c
}

// runGramLane runs one lane over every column with a path's kernels; a and v start from
// non-zero values so that accumulation onto existing sums is covered.
func runGramLane(kern *gramKernels, x Block, k int, bp, gneg, ginv, c0 []float64) (c, a, v []float64) {
	return runGramLaneL1(kern, x, k, bp, gneg, ginv, 0, c0)
}

// runGramLaneL1 is runGramLane with an L1 penalty l1 subtracted from h (gramLaneShift).
func runGramLaneL1(kern *gramKernels, x Block, k int, bp, gneg, ginv []float64, l1 float64, c0 []float64) (c, a, v []float64) {
	m, n := x.Dims()
	kp := paddedK(k)
	c = append([]float64(nil), c0...)
	a, v = make([]float64, m*kp), make([]float64, k*kp)
	for i := range a {
		a[i] = float64(i%5) / 8
	}
	for i := range v {
		v[i] = float64(i%3) / 4
	}
	gramLaneShift(kern, x, k, 0, n, bp, gneg, ginv, l1, c, a, v, make([]float64, gramLaneScratch(m, k)), nil, nil, nil)
	return c, a, v
}

// TestGramLanePathsBitwise: every assembly path gives the generic kernel's bits for C, A and V,
// without and with an L1 penalty, over shapes that reach every variant (register-resident and in-memory accumulators, one to
// several groups of chunks, block and tail columns, pairs and single sparse columns).
func TestGramLanePathsBitwise(t *testing.T) {
	paths := AvailableKernelPaths()
	if len(paths) == 1 {
		t.Skip("no assembly path on this CPU and build")
	}
	ms := []int{1, 2, 3, 5, 8, 10, 11, 17, 64}
	ks := []int{1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 17, 20, 33}
	for _, sparse := range []bool{false, true} {
		for _, m := range ms {
			for _, k := range ks {
				n := 37 + m%3
				x, bp, gneg, ginv, c0 := gramLaneCase(m, n, k, sparse, uint64(m*100+k))
				for _, l1 := range []float64{0, 0.03} { // without and with an L1 penalty on C
					wc, wa, wv := runGramLaneL1(&genericGram, x, k, bp, gneg, ginv, l1, c0)
					if sameBits(wc, c0) {
						t.Fatalf("m=%d k=%d l1=%v: the generic kernel changed no coefficient", m, k, l1)
					}
					for _, p := range paths[1:] {
						gc, ga, gv := runGramLaneL1(gramKernelsFor(p), x, k, bp, gneg, ginv, l1, c0)
						if !sameBits(gc, wc) || !sameBits(ga, wa) || !sameBits(gv[:k*paddedK(k)], wv) {
							t.Errorf("%s sparse=%v m=%d k=%d l1=%v: differs from generic (C %.3g, A %.3g, V %.3g)", p, sparse, m, k, l1,
								maxRelDiff(gc, wc), maxRelDiff(ga, wa), maxRelDiff(gv, wv))
						}
					}
				}
			}
		}
	}
}

// TestGramLaneSpec checks the generic kernel against the pinned arithmetic written out
// directly for one column: h by FMA in storage order, the coordinate update, A and V.
func TestGramLaneSpec(t *testing.T) {
	const m, n, k = 6, 1, 3
	x, bp, gneg, ginv, c0 := gramLaneCase(m, n, k, false, 5)
	xd := x.(*Dense).Data
	kp := paddedK(k)
	var h [4]float64
	for p := 0; p < kp; p++ {
		for i := 0; i < m; i++ {
			h[p] = math.FMA(bp[i*kp+p], xd[i], h[p])
		}
	}
	want := append([]float64(nil), c0...)
	for p := 0; p < k; p++ {
		s := h[p]
		for q := p; q < k; q++ { // old coefficients first
			s = math.FMA(gneg[p*k+q], want[q], s)
		}
		for q := 0; q < p; q++ { // then the updated ones
			s = math.FMA(gneg[p*k+q], want[q], s)
		}
		want[p] = math.Max(0, math.FMA(s, ginv[p], want[p]))
	}
	c, a, v := runGramLane(&genericGram, x, k, bp, gneg, ginv, c0)
	if !sameBits(c, want) {
		t.Errorf("C = %v, want %v", c, want)
	}
	for i := 0; i < m; i++ {
		for p := 0; p < k; p++ {
			if w := math.FMA(xd[i], want[p], float64((i*kp+p)%5)/8); a[i*kp+p] != w {
				t.Errorf("A[%d,%d] = %v, want %v", i, p, a[i*kp+p], w)
			}
		}
	}
	for p := 0; p < k; p++ {
		for q := 0; q <= p; q++ {
			if w := math.FMA(want[p], want[q], float64((p*kp+q)%3)/4); v[p*kp+q] != w {
				t.Errorf("V[%d,%d] = %v, want %v", p, q, v[p*kp+q], w)
			}
		}
	}
}

// TestKernelPathsSameFactors: whole runs of every algorithm give bitwise the same factors on
// every kernel path, dense and sparse, on 1 and 3 shards and 1 and 2 threads.
func TestKernelPathsSameFactors(t *testing.T) {
	t.Parallel()
	paths := AvailableKernelPaths()
	dense := synthDense(12, 300, 4, 41, 0.05)
	blocks := map[string]Block{"dense": dense, "sparse": ToCSC(sparsify(dense, 0.6, 42))}
	for _, info := range Algorithms() {
		for name, x := range blocks {
			for _, shards := range []int{1, 3} {
				if shards > 1 && !info.Distributed {
					continue
				}
				var ref *Result
				for _, p := range paths {
					for _, threads := range []int{1, 2} {
						cfg := baseConfig(info.Name, 4, StopRule{MaxIter: 12})
						cfg.Threads = threads
						cfg.Options.Kernel = p
						res := mustRun(t, x, shards, cfg)
						if ref == nil {
							ref = res
							continue
						}
						if !sameBits(res.B, ref.B) || !sameBits(res.C, ref.C) {
							t.Errorf("%s %s P=%d: path %s with %d threads differs from generic (B %.3g, C %.3g)",
								info.Name, name, shards, p, threads, maxRelDiff(res.B, ref.B), maxRelDiff(res.C, ref.C))
						}
					}
				}
			}
		}
	}
}

func TestParseKernelPath(t *testing.T) {
	for _, c := range []struct {
		in   string
		want KernelPath
		ok   bool
	}{{"auto", KernelAuto, true}, {"generic", KernelGeneric, true}, {"AVX2", KernelAVX2, true}, {"avx512", KernelAVX512, true}, {"sse", 0, false}, {"", 0, false}} {
		got, err := ParseKernelPath(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseKernelPath(%q) = %v, %v", c.in, got, err)
		}
	}
	for _, p := range []KernelPath{KernelAVX2, KernelAVX512} {
		err := CheckKernelPath(p)
		if (gramKernelsFor(p) == nil) != (err != nil) {
			t.Errorf("CheckKernelPath(%s) = %v, but kernels available: %v", p, err, gramKernelsFor(p) != nil)
		}
		if err != nil {
			t.Log(err)
		}
	}
	if err := SetKernelPath(KernelPath(9)); err == nil {
		t.Error("SetKernelPath(9) accepted")
	}
	_ = fmt.Sprint(ActiveKernelPath())
}

// TestOptionsKernelChoosesThePath: Options.Kernel picks the kernels a run uses (the tests that
// compare paths set it rather than the process's path, so they can run in parallel): each
// available path its own kernels, distinct paths distinct kernels (so those tests compare
// different code), KernelAuto the process's; a path that cannot run here is refused.
func TestOptionsKernelChoosesThePath(t *testing.T) {
	t.Parallel()
	paths := AvailableKernelPaths()
	x := synthDense(12, 40, 4, 3, 0.05)
	pool := NewPool(1)
	defer pool.Close()
	seen := map[*gramKernels]KernelPath{}
	for _, p := range paths {
		want := gramKernelsFor(p)
		e := newShardEnv(&Machine{}, ShardSpec{X: x, K: 4, Options: Options{Kernel: p}})
		if got := e.gram(); got != want {
			t.Errorf("Options.Kernel %s: the run's kernels are not the path's", p)
		}
		if st := newCStep(x, 4, pool, FormGram, nil, e.gram()); st.kern != want {
			t.Errorf("Options.Kernel %s: DID's Gram-form C step does not use the path's kernels", p)
		}
		if q, dup := seen[want]; dup {
			t.Errorf("paths %s and %s share their kernels: comparing them compares nothing", q, p)
		}
		seen[want] = p
	}
	if gramKernelsOf(KernelAuto) != activeGramKernels() {
		t.Error("Options.Kernel auto does not take the process's path")
	}
	bad := []KernelPath{KernelPath(9)}
	for _, p := range []KernelPath{KernelAVX2, KernelAVX512} {
		if CheckKernelPath(p) != nil {
			bad = append(bad, p)
		}
	}
	for _, p := range bad {
		blocks, err := Split(x, 1)
		if err != nil {
			t.Fatal(err)
		}
		cfg := baseConfig(DID, 4, StopRule{MaxIter: 2})
		cfg.Options.Kernel = p
		if _, err := Run(context.Background(), blocks, cfg); err == nil {
			t.Errorf("a run with Options.Kernel %s, which cannot run here, was accepted", p)
		}
	}
}

// TestAVX2AssemblyUsesVEXRegisters: the AVX2 functions of the generated assembly name no vector
// register above 15, which only EVEX (AVX-512) instructions can reach: on an AVX2-only CPU such
// an instruction would kill the process.
func TestAVX2AssemblyUsesVEXRegisters(t *testing.T) {
	src, err := os.ReadFile("gramlane_amd64.s")
	if err != nil {
		t.Skip(err)
	}
	high := regexp.MustCompile(`\b[XYZ](1[6-9]|2[0-9]|3[01])\b`)
	fn, checked := "", 0
	for i, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "TEXT ") {
			fn = strings.Fields(line)[1]
			if strings.Contains(fn, "AVX2(") {
				checked++
			}
			continue
		}
		if strings.Contains(fn, "AVX2(") && (high.MatchString(line) || strings.Contains(line, " Z")) {
			t.Errorf("gramlane_amd64.s:%d (%s) needs AVX-512: %s", i+1, fn, strings.TrimSpace(line))
		}
	}
	if checked == 0 {
		t.Error("no AVX2 function found")
	}
}

// TestDenseColsBitwise: the column-lane kernels of dense blocks (lanes over columns in step 1,
// over rows in step 3) give the generic bits, for X stored as float64 and as float32, over row
// counts around multiples of 8 and 16, ranks across chunk boundaries and column counts around
// groups of eight.
func TestDenseColsBitwise(t *testing.T) {
	var paths []*gramKernels
	for _, p := range AvailableKernelPaths() {
		if k := gramKernelsFor(p); k.cols != nil {
			paths = append(paths, k)
		}
	}
	if len(paths) == 0 {
		t.Skip("no column-lane kernels on this CPU and build")
	}
	for _, m := range []int{16, 17, 23, 24, 31, 32, 33, 47, 100} {
		for _, k := range []int{1, 2, 3, 5, 8, 9, 10, 12, 13, 16, 17, 20, 33} {
			for _, n := range []int{1, 8, 9, 23, 40} {
				x, bp, gneg, ginv, c0 := gramLaneCase(m, n, k, false, uint64(m*1000+k*10+n))
				d := x.(*Dense)
				for i := range d.Data {
					d.Data[i] = float64(float32(d.Data[i]))
				}
				x32, err := Narrow(d)
				if err != nil {
					t.Fatal(err)
				}
				wc, wa, wv := runGramLane(&genericGram, d, k, bp, gneg, ginv, c0)
				for _, kern := range paths {
					for _, xb := range []Block{d, x32} {
						gc, ga, gv := runGramLane(kern, xb, k, bp, gneg, ginv, c0)
						if !sameBits(gc, wc) || !sameBits(ga, wa) || !sameBits(gv[:k*paddedK(k)], wv) {
							t.Errorf("m=%d k=%d n=%d narrow=%v: differs from generic (C %.3g, A %.3g, V %.3g)", m, k, n, IsNarrow(xb),
								maxRelDiff(gc, wc), maxRelDiff(ga, wa), maxRelDiff(gv, wv))
						}
					}
				}
			}
		}
	}
}

// TestUpdateLeavesPads holds every path's update kernel to its contract: it writes the first
// k values of each column of cs and leaves the pads at 0 (some write them, with 0).
// gramLaneShift relies on it to clear a lane's scratch only when the scratch is made.
func TestUpdateLeavesPads(t *testing.T) {
	const sentinel = -12345.5
	for _, p := range AvailableKernelPaths() {
		kern := gramKernelsFor(p)
		for _, k := range []int{1, 2, 3, 4, 5, 7, 8, 9, 13, 17, 33} {
			kp := paddedK(k)
			if kp == k {
				continue // no pads
			}
			for _, ncols := range []int{1, 3, 4, 5, 8, 9, 17} {
				_, _, gneg, ginv, c := gramLaneCase(4, ncols, k, false, uint64(k*100+ncols))
				h := make([]float64, ncols*kp)
				for i := range h {
					h[i] = float64(i%7) / 5
				}
				cs := make([]float64, ncols*kp)
				for j := 0; j < ncols; j++ {
					for q := 0; q < k; q++ {
						cs[j*kp+q] = sentinel
					}
				}
				kern.update(h, cs, c, gneg, ginv, k, kp, ncols)
				for j := 0; j < ncols; j++ {
					for q := 0; q < kp; q++ {
						got := cs[j*kp+q]
						if q < k && got == sentinel || q >= k && math.Float64bits(got) != 0 {
							t.Fatalf("%s k=%d ncols=%d: cs[%d*%d+%d] = %v after the update (pads must stay 0, the rest be written)", p, k, ncols, j, kp, q, got)
						}
					}
				}
			}
		}
	}
}

// TestGramLaneScratchReused: a lane's scratch, used again (as every iteration does), gives the
// bits of a fresh one, on every path, dense and sparse.
func TestGramLaneScratchReused(t *testing.T) {
	run := func(kern *gramKernels, x Block, k int, bp, gneg, ginv, c0, scratch []float64) (c, a, v []float64) {
		m, n := x.Dims()
		kp := paddedK(k)
		c = append([]float64(nil), c0...)
		a, v = make([]float64, m*kp), make([]float64, k*kp)
		gramLaneShift(kern, x, k, 0, n, bp, gneg, ginv, 0, c, a, v, scratch, nil, nil, nil)
		return c, a, v
	}
	for _, p := range AvailableKernelPaths() {
		kern := gramKernelsFor(p)
		for _, sparse := range []bool{false, true} {
			for _, m := range []int{3, 5, 17, 40} {
				for _, k := range []int{1, 3, 5, 9} {
					n := 2*gramBatchCols + 7 // several batches, and a tail
					x, bp, gneg, ginv, c0 := gramLaneCase(m, n, k, sparse, uint64(m*10+k))
					scratch := make([]float64, gramLaneScratch(m, k))
					for round := 0; round < 3; round++ {
						c, a, v := run(kern, x, k, bp, gneg, ginv, c0, scratch)
						fc, fa, fv := run(kern, x, k, bp, gneg, ginv, c0, make([]float64, len(scratch)))
						if !sameBits(c, fc) || !sameBits(a, fa) || !sameBits(v, fv) {
							t.Fatalf("%s sparse=%v m=%d k=%d round %d: a used scratch gives other bits than a fresh one", p, sparse, m, k, round)
						}
					}
				}
			}
		}
	}
}
