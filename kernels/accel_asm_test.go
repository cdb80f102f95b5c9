//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// sweepsCase is the input of accelerated DID's further C sweeps on ncols columns of rank k, as
// the lane has it after update: h = B^T x, old (the coefficients before update, k a column),
// c and cs (after it; cs's pads set to padMark, which no kernel may touch), -G and 1/diag(G)
// with a dead component (1/G_pp = 0) when k > 1.
type sweepsCase struct {
	k, kp, ncols          int
	h, cs, c, old         []float64
	gneg, ginv            []float64
	bp, x                 []float64 // B in rows of kp, X (k + 3 rows): for the fused kernels
	m                     int
	specialFirst, special bool
}

const padMark = 42.5

// newFusedCase is a case of the fused kernels' tests: ngroups groups of four columns with
// newSweepsCase's data and, from two groups on, a NaN in column 1 (NaN h, coefficients and
// steps), infinite coefficients in column 2 (an infinite first step) and a -0 in column 5; and
// A and V to accumulate into (a0, 4m; v0, 4k).
func newFusedCase(m, k, ngroups int, seed uint64) (sc *sweepsCase, x, c0, a0, v0 []float64) {
	sc = newSweepsCase(m, k, 4*ngroups, seed, false)
	x, c0 = sc.x, sc.old
	if ngroups >= 2 {
		x[1*m] = math.NaN()
		for p := 0; p < k; p++ {
			c0[2*k+p] = math.Inf(1)
		}
		c0[5*k] = math.Copysign(0, -1)
	}
	a0, v0 = make([]float64, 4*m), make([]float64, 4*k)
	for i := range a0 {
		a0[i] = float64(i%5) - 1.5
	}
	for i := range v0 {
		v0[i] = float64(i%3) + 0.25
	}
	return sc, x, c0, a0, v0
}

func newSweepsCase(m, k, ncols int, seed uint64, specials bool) *sweepsCase {
	r := rand.New(rand.NewPCG(seed, 99))
	kp := paddedK(k)
	b := make([]float64, m*k) // column-major
	for i := range b {
		b[i] = r.Float64()
	}
	if k > 1 {
		clear64(b[m : 2*m]) // component 1 is dead: G_11 = 0, 1/G_11 taken as 0
	}
	g := make([]float64, k*k)
	gramCols(b, m, k, g, nil)
	sc := &sweepsCase{k: k, kp: kp, ncols: ncols, m: m, gneg: make([]float64, k*k), ginv: make([]float64, k)}
	for i := range g {
		sc.gneg[i] = -g[i]
	}
	for p := range sc.ginv {
		if g[p*k+p] > 0 {
			sc.ginv[p] = 1 / g[p*k+p]
		}
	}
	sc.bp = make([]float64, m*kp)
	packRows(sc.bp, b, m, k)
	sc.x = make([]float64, m*ncols)
	for i := range sc.x {
		sc.x[i] = r.Float64() * 2
	}
	sc.h = make([]float64, ncols*kp)
	dotsDenseGo(sc.bp, sc.x, m, kp, ncols, sc.h)
	sc.old = make([]float64, ncols*k)
	for i := range sc.old {
		sc.old[i] = r.Float64() * 1.5
		if r.IntN(7) == 0 {
			sc.old[i] = 0
		}
	}
	sc.c = append([]float64(nil), sc.old...)
	sc.cs = make([]float64, ncols*kp)
	for i := range sc.cs {
		sc.cs[i] = padMark
	}
	updateCoefsGo(sc.h, sc.cs, sc.c, sc.gneg, sc.ginv, k, kp, ncols)
	if specials && ncols >= 8 {
		sc.special = true
		set := func(j, p int, v float64) { sc.c[j*k+p], sc.cs[j*kp+p] = v, v }
		set(1, 0, math.NaN())                // a NaN first step: stops at once
		sc.old[2*k] = math.Inf(1)            // an infinite first step: thr = Inf, stops
		sc.h[3*kp+k-1] = math.NaN()          // sweeps that make NaN: st NaN stops
		sc.h[4*kp] = math.Inf(-1)            // an infinite h
		copy(sc.old[5*k:6*k], sc.c[5*k:6*k]) // a zero first step: 0 > 0 is false
		set(6, k-1, math.Copysign(0, -1))    // a -0 coefficient, kept by max(0, .)
		if ncols > 9 {
			set(9, 0, math.Inf(1))
		}
	}
	return sc
}

// clone returns copies of the slices a kernel writes.
func (sc *sweepsCase) clone() (cs, c []float64) {
	return append([]float64(nil), sc.cs...), append([]float64(nil), sc.c...)
}

// sweepCounts returns, per column, how many further sweeps sweepCoefsGo ran (at most extra):
// the first e whose result equals that of extra.
func (sc *sweepsCase) sweepCounts(extra int, eps2 float64) []int {
	k, kp := sc.k, sc.kp
	counts := make([]int, sc.ncols)
	for j := range counts {
		run := func(e int) []float64 {
			cs := append([]float64(nil), sc.cs[j*kp:(j+1)*kp]...)
			c := append([]float64(nil), sc.c[j*k:(j+1)*k]...)
			sweepCoefsGo(sc.h[j*kp:(j+1)*kp], cs, c, sc.old[j*k:(j+1)*k], sc.gneg, sc.ginv, k, kp, 1, e, eps2)
			return c
		}
		final := run(extra)
		for e := 0; e <= extra; e++ {
			if sameBits(run(e), final) {
				counts[j] = e
				break
			}
		}
	}
	return counts
}

// firstDiff describes the first differing value of got and want.
func firstDiff(got, want []float64) string {
	for i := range got {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			return fmt.Sprintf("[%d] = %v (%#x), want %v (%#x)", i, got[i], math.Float64bits(got[i]), want[i], math.Float64bits(want[i]))
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("%d values, want %d", len(got), len(want))
	}
	return "equal"
}

// accelPaths are the assembly kernel tables this CPU runs.
func accelPaths(t testing.TB) map[string]*gramKernels {
	paths := map[string]*gramKernels{}
	if hasAVX2 {
		paths["avx2"] = &avx2Gram
	}
	if hasAVX512 {
		paths["avx512"] = &avx512Gram
	}
	if len(paths) == 0 {
		t.Skip("no assembly path on this CPU")
	}
	return paths
}

// TestSweepsAsmBitwise checks every path's sweeps against sweepCoefsGo bit for bit: ranks 1-12,
// 20 and 40; column counts that are not multiples of 8 or 32; columns that stop after
// different numbers of sweeps in the same vector (mixed lanes); a dead component; NaN and
// infinite first steps; extra 1..5; eps2 near 0 and near 1.
func TestSweepsAsmBitwise(t *testing.T) {
	paths := accelPaths(t)
	ks := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 20, 40}
	ncolss := []int{1, 7, 8, 13, 32, 45, 77}
	eps2s := []float64{1e-300, 1e-12, 0.01, 0.25, 0.999999, math.Nextafter(1, 0)}
	mixed := 0
	for _, k := range ks {
		for ni, ncols := range ncolss {
			sc := newSweepsCase(k+3, k, ncols, uint64(1000*k+ni), true)
			for extra := 0; extra <= 5; extra++ {
				for _, eps2 := range eps2s {
					wcs, wc := sc.clone()
					sweepCoefsGo(sc.h, wcs, wc, sc.old, sc.gneg, sc.ginv, k, sc.kp, ncols, extra, eps2)
					for name, kern := range paths {
						gcs, gc := sc.clone()
						kern.sweeps(sc.h, gcs, gc, sc.old, sc.gneg, sc.ginv, k, sc.kp, ncols, extra, eps2)
						if !sameBits(gc, wc) || !sameBits(gcs, wcs) {
							t.Fatalf("%s k=%d ncols=%d extra=%d eps2=%v: c %s; cs %s", name, k, ncols, extra, eps2,
								firstDiff(gc, wc), firstDiff(gcs, wcs))
						}
					}
				}
			}
			if ncols >= 32 {
				counts := sc.sweepCounts(5, 0.01)
				for g := 0; g+8 <= ncols; g += 8 {
					seen := map[int]bool{}
					for _, n := range counts[g : g+8] {
						seen[n] = true
					}
					if len(seen) > 1 {
						mixed++
					}
				}
			}
		}
	}
	if mixed == 0 {
		t.Fatal("no vector of eight columns had columns stopping at different sweeps: the cases do not test the lane mask")
	}
}

// TestSweepsAsmChecksLengths: the checked wrapper refuses a short slice instead of reading past
// it.
func TestSweepsAsmChecksLengths(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512 on this CPU")
	}
	sc := newSweepsCase(6, 3, 40, 5, false)
	for name, sweeps := range map[string]func(h, cs, c, old, gneg, ginv []float64, k, kp, ncols, extra int, eps2 float64){
		"avx512": sweepsAVX512Checked,
		"avx2":   sweepsAVX2Checked,
	} {
		for _, short := range []string{"h", "cs", "c", "old", "gneg", "ginv"} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: sweeps with a short %s did not panic", name, short)
					}
				}()
				h, cs, c, old, gneg, ginv := sc.h, sc.cs, sc.c, sc.old, sc.gneg, sc.ginv
				switch short {
				case "h":
					h = h[:len(h)-1]
				case "cs":
					cs = cs[:len(cs)-1]
				case "c":
					c = c[:len(c)-1]
				case "old":
					old = old[:len(old)-1]
				case "gneg":
					gneg = gneg[:len(gneg)-1]
				case "ginv":
					ginv = ginv[:len(ginv)-1]
				}
				sweeps(h, cs, c, old, gneg, ginv, 3, 4, 40, 2, 0.01)
			}()
		}
	}
}

// fusedAccelReference is the batched sequence fusedAccel must match: dotsDense, subtractL1,
// a copy of the old coefficients, update, sweeps and accDense on the same columns.
func fusedAccelReference(x, bp, gneg, ginv, c []float64, m, k, ncols, extra int, eps2, l1 float64, a, v []float64) {
	const kp = 4
	h := make([]float64, ncols*kp)
	dotsDenseGo(bp, x, m, kp, ncols, h)
	subtractL1(h, l1, k, kp, ncols)
	old := append([]float64(nil), c[:ncols*k]...)
	cs := make([]float64, ncols*kp)
	updateCoefsGo(h, cs, c, gneg, ginv, k, kp, ncols)
	sweepCoefsGo(h, cs, c, old, gneg, ginv, k, kp, ncols, extra, eps2)
	genericGram.accDense(x, m, k, kp, ncols, cs, a, v)
}

// TestFusedAccelBitwise checks the fused kernel with further sweeps against the batched
// sequence for every m <= maxFusedM and k <= 4, on 1 to 9 groups of four columns (the kernel
// runs four groups at a time, then two, then one), with and without an L1 shift, extra 0..5, eps2 near
// 0 and near 1, a dead component and columns whose first step is NaN or infinite.
func TestFusedAccelBitwise(t *testing.T) {
	if !hasAVX512 || avx512Gram.fusedAccel == nil {
		t.Skip("no AVX-512 on this CPU")
	}
	for m := 1; m <= maxFusedM; m++ {
		for k := 1; k <= 4; k++ {
			for _, ngroups := range []int{1, 2, 3, 4, 5, 6, 7, 9} {
				ncols := 4 * ngroups
				sc, x, c0, a0, v0 := newFusedCase(m, k, ngroups, uint64(100*m+10*k+ngroups))
				for _, l1 := range []float64{0, 0.05} {
					g4, i4 := make([]float64, 4*k*k), make([]float64, 4*k+4)
					fusedScalars(g4, i4, sc.gneg, sc.ginv, k, l1)
					for extra := 0; extra <= 5; extra++ {
						for _, eps2 := range []float64{1e-300, 0.01, 0.5, math.Nextafter(1, 0)} {
							wc := append([]float64(nil), c0...)
							wa := append([]float64(nil), a0...)
							wv := append([]float64(nil), v0...)
							fusedAccelReference(x, sc.bp, sc.gneg, sc.ginv, wc, m, k, ncols, extra, eps2, l1, wa, wv)
							gc := append([]float64(nil), c0...)
							ga := append([]float64(nil), a0...)
							gv := append([]float64(nil), v0...)
							avx512Gram.fusedAccel(x, sc.bp, g4, i4, gc, m, k, ngroups, extra, eps2, ga, gv)
							if !sameBits(gc, wc) || !sameBits(ga, wa) || !sameBits(gv, wv) {
								t.Fatalf("m=%d k=%d ngroups=%d l1=%v extra=%d eps2=%v: c %s; a %s; v %s", m, k, ngroups, l1, extra, eps2,
									firstDiff(gc, wc), firstDiff(ga, wa), firstDiff(gv, wv))
							}
						}
					}
				}
			}
		}
	}
}

// fusedExtrapReference is the batched sequence fusedExtrap must match: fusedAccelReference's
// steps with extrapolateCoefs (cprev, beta) between the sweeps and accDense, as updateSweep
// runs them.
func fusedExtrapReference(x, bp, gneg, ginv, c []float64, m, k, ncols, extra int, eps2, l1 float64, cprev []float64, beta float64, a, v []float64) {
	const kp = 4
	h := make([]float64, ncols*kp)
	dotsDenseGo(bp, x, m, kp, ncols, h)
	subtractL1(h, l1, k, kp, ncols)
	old := append([]float64(nil), c[:ncols*k]...)
	cs := make([]float64, ncols*kp)
	updateCoefsGo(h, cs, c, gneg, ginv, k, kp, ncols)
	sweepCoefsGo(h, cs, c, old, gneg, ginv, k, kp, ncols, extra, eps2)
	extrapolateCoefs(cs, c, cprev, beta, k, kp, ncols)
	genericGram.accDense(x, m, k, kp, ncols, cs, a, v)
}

// extrapPrev returns previous plain coefficients for ncols columns of rank k near c0 (some
// above, so that the moved value falls below 0 and is clipped, some equal), with NaN, an
// infinity and a -0 among them.
func extrapPrev(c0 []float64, k, ncols int, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, 7))
	p := make([]float64, ncols*k)
	for i := range p {
		switch r.IntN(6) {
		case 0:
			p[i] = c0[i]
		case 1:
			p[i] = c0[i] + 3 + r.Float64() // far above: the moved value is negative, clipped to 0
		default:
			p[i] = c0[i] * (0.5 + r.Float64())
		}
	}
	if ncols >= 8 {
		p[3*k] = math.NaN()
		p[4*k+k-1] = math.Inf(-1)
		p[6*k] = math.Copysign(0, -1)
		p[7*k] = math.Inf(1)
	}
	return p
}

// TestFusedExtrapBitwise checks the fused extrapolating kernels (with and without further
// sweeps) against the batched sequence for every m <= maxFusedM and k <= 4, on 1 to 5 groups of
// four columns (pairs and a single group), with and without an L1 shift, extra 0..3, several
// eps2 and betas (0 included), a dead component, NaN and infinite coefficients and previous
// coefficients that send the moved value below 0: C, the previous coefficients, A and V.
func TestFusedExtrapBitwise(t *testing.T) {
	if !hasAVX512 || avx512Gram.fusedExtrap == nil {
		t.Skip("no AVX-512 on this CPU")
	}
	clipped := 0
	for m := 1; m <= maxFusedM; m++ {
		for k := 1; k <= 4; k++ {
			for _, ngroups := range []int{1, 2, 3, 5} {
				ncols := 4 * ngroups
				sc, x, c0, a0, v0 := newFusedCase(m, k, ngroups, uint64(1000+100*m+10*k+ngroups))
				p0 := extrapPrev(c0, k, ncols, uint64(m*10+k))
				for _, l1 := range []float64{0, 0.05} {
					g4, i4 := make([]float64, 4*k*k), make([]float64, 4*k+4)
					fusedScalars(g4, i4, sc.gneg, sc.ginv, k, l1)
					for extra := 0; extra <= 3; extra++ {
						for _, eps2 := range []float64{1e-300, 0.01, math.Nextafter(1, 0)} {
							for _, beta := range []float64{0, 0.3, 0.7501, 1} {
								wc := append([]float64(nil), c0...)
								wp := append([]float64(nil), p0...)
								wa := append([]float64(nil), a0...)
								wv := append([]float64(nil), v0...)
								fusedExtrapReference(x, sc.bp, sc.gneg, sc.ginv, wc, m, k, ncols, extra, eps2, l1, wp, beta, wa, wv)
								gc := append([]float64(nil), c0...)
								gp := append([]float64(nil), p0...)
								ga := append([]float64(nil), a0...)
								gv := append([]float64(nil), v0...)
								avx512Gram.fusedExtrap(x, sc.bp, g4, i4, gc, m, k, ngroups, extra, eps2, gp, beta, ga, gv)
								if !sameBits(gc, wc) || !sameBits(gp, wp) || !sameBits(ga, wa) || !sameBits(gv, wv) {
									t.Fatalf("m=%d k=%d ngroups=%d l1=%v extra=%d eps2=%v beta=%v: c %s; cprev %s; a %s; v %s",
										m, k, ngroups, l1, extra, eps2, beta, firstDiff(gc, wc), firstDiff(gp, wp), firstDiff(ga, wa), firstDiff(gv, wv))
								}
								if extra == 0 { // the form with sweeps takes extra = 0 as none as well
									gc, gp = append(gc[:0], c0...), append(gp[:0], p0...)
									ga, gv = append(ga[:0], a0...), append(gv[:0], v0...)
									fusedAccelExtrapKernels[m-1][k-1](x, sc.bp, g4, i4, gc, ngroups, 0, eps2, gp, beta, ga, gv)
									if !sameBits(gc, wc) || !sameBits(gp, wp) || !sameBits(ga, wa) || !sameBits(gv, wv) {
										t.Fatalf("fusedAccelExtrap m=%d k=%d ngroups=%d l1=%v extra=0 beta=%v: c %s; cprev %s; a %s; v %s",
											m, k, ngroups, l1, beta, firstDiff(gc, wc), firstDiff(gp, wp), firstDiff(ga, wa), firstDiff(gv, wv))
									}
								}
								for i, v := range wc {
									if beta > 0 && v == 0 && wp[i] > 0 {
										clipped++
									}
								}
							}
						}
					}
				}
			}
		}
	}
	if clipped == 0 {
		t.Fatal("no moved coefficient was clipped to 0: the cases do not test the max")
	}
}

// TestFusedExtrapLaneBitwise runs gramLaneSweep with an extrapolating setting on the AVX-512
// kernels (the fused extrapolating kernel for the groups of four, the separate steps for the
// last ncols mod 4 columns of a span) and on the generic ones, over every fused shape and
// lane bounds that leave 0 to 3 tail columns: C, the previous coefficients, A and V must have
// the same bits, and the fused kernel must have run.
func TestFusedExtrapLaneBitwise(t *testing.T) {
	if !hasAVX512 || avx512Gram.fusedExtrap == nil {
		t.Skip("no AVX-512 on this CPU")
	}
	calls := 0
	kern := avx512Gram
	kern.fusedExtrap = func(x, bp, g4, i4, c []float64, m, k, ngroups, extra int, eps2 float64, cprev []float64, beta float64, a, v []float64) {
		calls++
		avx512Gram.fusedExtrap(x, bp, g4, i4, c, m, k, ngroups, extra, eps2, cprev, beta, a, v)
	}
	run := func(kern *gramKernels, x Block, k, lo, hi int, bp, gneg, ginv []float64, l1 float64, c0, p0 []float64, a Accel, beta float64) (c, cprev, av, vv []float64) {
		m, _ := x.Dims()
		kp := paddedK(k)
		c, cprev = append([]float64(nil), c0...), append([]float64(nil), p0...)
		av, vv = make([]float64, m*kp), make([]float64, k*kp)
		for i := range av {
			av[i] = float64(i%5) / 8
		}
		for i := range vv {
			vv[i] = float64(i%3) / 4
		}
		sw := newCoefSweeps(a, k)
		sw.beta, sw.cprev = beta, cprev
		gramLaneSweep(kern, x, k, lo, hi, bp, gneg, ginv, l1, c, av, vv, make([]float64, gramLaneScratch(m, k)), nil, nil, sw, nil)
		return c, cprev, av, vv
	}
	for m := 1; m <= maxFusedM; m++ {
		for k := 1; k <= 4; k++ {
			for _, n := range []int{5, 14, 41, 263} {
				x, bp, gneg, ginv, c0 := gramLaneCase(m, n, k, false, uint64(m*100+k+n))
				p0 := extrapPrev(c0, k, n, uint64(n))
				for _, lo := range []int{0, 1, 2, 3} {
					for _, a := range []Accel{{Extrapolate: true}, {CSweeps: 3, BSweeps: 1, Eps: 0.1, Extrapolate: true}} {
						for _, l1 := range []float64{0, 0.03} {
							for _, beta := range []float64{0, 0.55} {
								wc, wp, wa, wv := run(&genericGram, x, k, lo, n, bp, gneg, ginv, l1, c0, p0, a, beta)
								before := calls
								gc, gp, ga, gv := run(&kern, x, k, lo, n, bp, gneg, ginv, l1, c0, p0, a, beta)
								if n-lo >= 4 && calls == before {
									t.Fatalf("m=%d k=%d n=%d lo=%d: the fused extrapolating kernel did not run", m, k, n, lo)
								}
								if !sameBits(gc, wc) || !sameBits(gp, wp) || !sameBits(ga, wa) || !sameBits(gv, wv) {
									t.Fatalf("m=%d k=%d n=%d lo=%d accel=%v l1=%v beta=%v: c %s; cprev %s; a %s; v %s", m, k, n, lo, a, l1, beta,
										firstDiff(gc, wc), firstDiff(gp, wp), firstDiff(ga, wa), firstDiff(gv, wv))
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestFusedExtrapChecksLengths: the checked wrapper refuses a short slice (cprev included)
// instead of reading or writing past it.
func TestFusedExtrapChecksLengths(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512 on this CPU")
	}
	const m, k, ngroups = 5, 3, 2
	sc := newSweepsCase(m, k, 4*ngroups, 9, false)
	g4, i4 := make([]float64, 4*k*k), make([]float64, 4*k+4)
	cprev := make([]float64, 4*ngroups*k)
	for _, short := range []string{"x", "c", "cprev", "a", "v"} {
		for _, extra := range []int{0, 2} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("extra=%d: fusedExtrap with a short %s did not panic", extra, short)
					}
				}()
				x, c, p, a, v := sc.x, append([]float64(nil), sc.old...), cprev, make([]float64, 4*m), make([]float64, 4*k)
				switch short {
				case "x":
					x = x[:len(x)-1]
				case "c":
					c = c[:len(c)-1]
				case "cprev":
					p = p[:len(p)-1]
				case "a":
					a = a[:len(a)-1]
				case "v":
					v = v[:len(v)-1]
				}
				fusedExtrapAVX512Checked(x, sc.bp, g4, i4, c, m, k, ngroups, extra, 0.01, p, 0.5, a, v)
			}()
		}
	}
}
