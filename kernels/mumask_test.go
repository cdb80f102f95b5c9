package kernels

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// Masked MU (mumask.go), for every loss: the unmasked bits when nothing is unobserved, the
// values of unobserved entries never reaching the fit, a plain masked MU written here, the
// reported objective and held-out error against direct computations, the same bits on every
// kernel path, thread count and storage, round-off across shard counts, resumes, collectives
// and the data checks.

// muMaskLosses are the losses of the masked MU tests.
var muMaskLosses = []Loss{LossFrobenius, LossKL, LossIS, BetaLoss(1.5)}

// muMaskInputs returns the masked inputs of a loss: positive everywhere for IS (its CSC form
// stores every entry), about 30% zeros otherwise; with about 10% NaN (dense and CSC), with 60%
// NaN and a row and a column entirely missing (heavy: the masked sums are summed directly),
// and but for IS a CSC block with fewer than a quarter of its entries stored (KL's per-entry
// path).
func muMaskInputs(loss Loss) []maskInput {
	base := exact32Dense(synthDense(16, 420, 3, 71, 0.1))
	dense := base
	if loss.Beta() > 0 {
		dense = sparsify(base, 0.3, 7)
	}
	nan := withNaN(dense, 0.1, 5)
	heavy := withNaN(dense, 0.6, 9)
	for j := 0; j < heavy.Cols; j++ {
		heavy.Data[j*heavy.Rows+3] = math.NaN()
	}
	for i := 0; i < heavy.Rows; i++ {
		heavy.Data[5*heavy.Rows+i] = math.NaN()
	}
	ins := []maskInput{{"dense", nan}, {"sparse", ToCSC(nan)}, {"heavy", heavy}}
	if loss.Beta() > 0 {
		thin := ToCSC(withNaN(sparsify(base, 0.85, 11), 0.05, 12))
		if !perEntryY(thin, 16) {
			panic("the thin input is not thin")
		}
		ins = append(ins, maskInput{"thin", thin})
	}
	return ins
}

// plainMaskedMU runs iters masked MU iterations from b, c (updated in place) on the dense x
// for the loss of that beta, observed(i, j) telling the observed entries, written
// straightforwardly from the weighted updates: C <- C .* (B^T (W.*X.*Ys^(beta-2)) ./
// B^T (W.*Yd^(beta-1)))^gamma, then B likewise with the new C, with scikit-learn's
// conventions (EPS, gamma, the penalties added to the denominators, entries below float64
// eps set to 0) but the Frobenius loss's: a zero denominator keeps the entry. n is N, the
// columns of X, for the scaling of the penalties.
func plainMaskedMU(x *Dense, observed func(i, j int) bool, b, c []float64, k, iters int, beta float64, pc penaltyCase) {
	const eps, eps64 = 0x1p-23, 0x1p-52
	m, n := x.Rows, x.Cols
	l1C, l2C := float64(m)*pc.alphaW*pc.l1Ratio, float64(m)*pc.alphaW*(1-pc.l1Ratio)
	l1B, l2B := float64(n)*pc.alphaH*pc.l1Ratio, float64(n)*pc.alphaH*(1-pc.l1Ratio)
	gamma := 1.0
	switch {
	case beta < 1:
		gamma = 1 / (2 - beta)
	case beta > 2:
		gamma = 1 / (beta - 1)
	}
	frob := beta == 2
	// ratio and weight: x Ys^(beta-2) and Yd^(beta-1) (KL: x / Ys and 1).
	ratio := func(x, y float64) float64 {
		if x == 0 {
			return 0
		}
		if y == 0 && beta < 2 {
			y = eps
		}
		return x * math.Pow(y, beta-2)
	}
	weight := func(y float64) float64 {
		if beta == 1 {
			return 1
		}
		if y == 0 && beta < 1 {
			y = eps
		}
		return math.Pow(y, beta-1)
	}
	step := func(f, num, den, l1, l2 float64, zero bool) float64 {
		if l1 > 0 {
			den += l1
		}
		if l2 > 0 {
			den += l2 * f
		}
		if frob {
			if den > 0 {
				return f * num / den
			}
			return f
		}
		if den == 0 {
			den = eps
		}
		v := f * math.Pow(num/den, gamma)
		if zero && v < eps64 {
			v = 0
		}
		return v
	}
	y := make([]float64, m*n)
	prod := func() {
		for j := 0; j < n; j++ {
			for i := 0; i < m; i++ {
				var s float64
				for p := 0; p < k; p++ {
					s += b[p*m+i] * c[j*k+p]
				}
				y[j*m+i] = s
			}
		}
	}
	cn := make([]float64, len(c))
	bn := make([]float64, len(b))
	for it := 0; it < iters; it++ {
		prod()
		for j := 0; j < n; j++ {
			for p := 0; p < k; p++ {
				var num, den float64
				for i := 0; i < m; i++ {
					if observed(i, j) {
						num += b[p*m+i] * ratio(x.Data[j*m+i], y[j*m+i])
						den += b[p*m+i] * weight(y[j*m+i])
					}
				}
				cn[j*k+p] = step(c[j*k+p], num, den, l1C, l2C, beta < 1)
			}
		}
		copy(c, cn)
		prod()
		for i := 0; i < m; i++ {
			for p := 0; p < k; p++ {
				var num, den float64
				for j := 0; j < n; j++ {
					if observed(i, j) {
						num += ratio(x.Data[j*m+i], y[j*m+i]) * c[j*k+p]
						den += weight(y[j*m+i]) * c[j*k+p]
					}
				}
				if beta == 1 && den == 0 {
					den = 1
				}
				bn[p*m+i] = step(b[p*m+i], num, den, l1B, l2B, beta <= 1)
			}
		}
		copy(b, bn)
	}
}

// observedOf returns the observed predicate of x (dense) under o.
func observedOf(x *Dense, o Options) func(i, j int) bool {
	m := x.Rows
	return func(i, j int) bool {
		return !math.IsNaN(x.Data[j*m+i]) && !HeldOut(o.TestSeed, j, i, o.TestFraction)
	}
}

// TestMaskedMUMatchesPlain: masked MU, every loss (and betas 0.5 and 3, whose gamma is not
// 1), dense and CSC (both KL paths), light and heavy masks, M a multiple of 4 or not, with and
// without penalties, on 1 and 3 shards, gives plainMaskedMU's iterates
// after 20 iterations from the same start to 1e-12 relative, and its objective and held-out
// error are 2 D over the observed entries plus the penalties and the squared error over the
// held-out ones at those factors, computed directly, to 1e-12.
func TestMaskedMUMatchesPlain(t *testing.T) {
	const iters, k = 20, 3
	o := Options{Missing: true, TestFraction: 0.12, TestSeed: 9}
	worst := 0.0
	for _, loss := range append(slices.Clone(muMaskLosses), BetaLoss(0.5), BetaLoss(3)) {
		beta := loss.Beta()
		odd := exact32Dense(synthDense(15, 230, 3, 31, 0.1)) // M not a multiple of 4
		if beta > 0 {
			odd = sparsify(odd, 0.3, 1)
		}
		for _, in := range append(muMaskInputs(loss), maskInput{"odd", withNaN(odd, 0.15, 2)}) {
			x := ToDense(in.x)
			m, n := x.Rows, x.Cols
			observed := observedOf(x, o)
			b0, c0 := penaltyStart(m, n, k)
			for _, pc := range []penaltyCase{{}, testPenalty} {
				b, c := slices.Clone(b0), slices.Clone(c0)
				plainMaskedMU(x, observed, b, c, k, iters, beta, pc)
				wantObj := 2*directDivergence(x, observed, b, c, k, beta) + penaltyOf(b, c, m, n, pc)
				wantInit := 2*directDivergence(x, observed, b0, c0, k, beta) + penaltyOf(b0, c0, m, n, pc)
				_, wantTest := direct(in.x, b, c, k, o)
				for _, p := range []int{1, 3} {
					name := fmt.Sprintf("%s/%s/%v/P=%d", loss, in.name, pc, p)
					cfg := customConfig(MU, k, b0, c0, iters, pc)
					cfg.Options.Missing, cfg.Options.TestFraction, cfg.Options.TestSeed = o.Missing, o.TestFraction, o.TestSeed
					cfg.Options.Loss = loss
					got := mustRun(t, in.x, p, cfg)
					db, dc := maxRelDiff(b, got.B), maxRelDiff(c, got.C)
					do, di, dt := relDiff(got.Objective, wantObj), relDiff(got.Initial, wantInit), relDiff(got.TestSSE, wantTest)
					worst = max(worst, db, dc)
					if db > 1e-12 || dc > 1e-12 {
						t.Errorf("%s: differs from the plain masked MU: B by %.3g, C by %.3g", name, db, dc)
					}
					if do > 1e-12 || di > 1e-12 {
						t.Errorf("%s: objective %.17g (direct %.17g, %.3g), initial %.17g (direct %.17g, %.3g)",
							name, got.Objective, wantObj, do, got.Initial, wantInit, di)
					}
					if dt > 1e-12 || got.TestSSE == 0 {
						t.Errorf("%s: held-out error %.17g, direct %.17g (%.3g)", name, got.TestSSE, wantTest, dt)
					}
					if got.Observed+got.Missing+got.TestCount != int64(m*n) || got.TestCount == 0 {
						t.Errorf("%s: counts %d/%d/%d", name, got.Observed, got.Missing, got.TestCount)
					}
				}
			}
		}
	}
	t.Logf("largest relative difference of the factors from the plain masked MU: %.3g", worst)
}

// TestMaskedMUObjectiveAndHeldOutEachIteration: at every iteration (and for B0 C0) the
// objective and the held-out error masked MU reports are those of the factors the machines
// hold at that boundary, computed directly (the half-iteration pipeline reports (B_t, C_t)),
// to 1e-12; LocalTestSSE agrees; with beta in [1, 2] and no penalty the objective never rises.
func TestMaskedMUObjectiveAndHeldOutEachIteration(t *testing.T) {
	const iters, k = 12, 3
	pool := NewPool(2)
	defer pool.Close()
	o := Options{Missing: true, TestFraction: 0.2, TestSeed: 17}
	for _, loss := range muMaskLosses {
		beta := loss.Beta()
		for _, in := range muMaskInputs(loss)[:2] {
			x := ToDense(in.x)
			m, n := x.Rows, x.Cols
			observed := observedOf(x, o)
			b0, c0 := penaltyStart(m, n, k)
			lo := o
			lo.Loss = loss
			specs := maskedSpecs(t, in.x, 3, MU, k, lo, b0, c0, pool)
			ms := newMachines(t, specs, nil)
			name := fmt.Sprintf("%s/%s", loss, in.name)
			prev := math.Inf(1)
			driveMachines(t, ms, iters, func(it int) {
				st := ms[0].last
				var c []float64
				var local float64
				for _, mc := range ms {
					c = append(c, mc.Coef()...)
					local += mc.LocalTestSSE()
				}
				b := ms[0].Basis()
				_, test := direct(in.x, b, c, k, o)
				obj := 2 * directDivergence(x, observed, b, c, k, beta)
				if d := relDiff(st.TestSSE, test); d > 1e-12 {
					t.Errorf("%s: iteration %d: held-out error %.17g, direct %.17g (%.3g)", name, it, st.TestSSE, test, d)
				}
				if d := relDiff(local, test); d > 1e-12 {
					t.Errorf("%s: iteration %d: LocalTestSSE sums to %.17g, direct %.17g", name, it, local, test)
				}
				if d := relDiff(st.Objective, obj); d > 1e-12 {
					t.Errorf("%s: iteration %d: objective %.17g, direct %.17g (%.3g)", name, it, st.Objective, obj, d)
				}
				if beta >= 1 && st.Objective > prev*(1+1e-12) {
					t.Errorf("%s: iteration %d: objective rose from %.17g to %.17g", name, it, prev, st.Objective)
				}
				prev = st.Objective
				if it == 1 {
					_, test0 := direct(in.x, b0, c0, k, o)
					obj0 := 2 * directDivergence(x, observed, b0, c0, k, beta)
					if d := relDiff(st.InitialTestSSE, test0); d > 1e-12 {
						t.Errorf("%s: initial held-out error %.17g, direct %.17g", name, st.InitialTestSSE, test0)
					}
					if d := relDiff(st.Initial, obj0); d > 1e-12 {
						t.Errorf("%s: initial objective %.17g, direct %.17g", name, st.Initial, obj0)
					}
				}
			})
		}
	}
}

// TestMaskedMUAllObservedSameBits: with a mask that leaves every entry observed (Missing
// without NaN, a test fraction that selects nothing) MU gives exactly the unmasked bits,
// factors and history, for every loss, dense and sparse, penalized or not, on 1 and 3 shards.
func TestMaskedMUAllObservedSameBits(t *testing.T) {
	for _, loss := range muMaskLosses {
		dense := exact32Dense(synthDense(14, 300, 3, 73, 0.05))
		if loss.Beta() > 0 {
			dense = sparsify(dense, 0.4, 3)
		}
		for _, x := range []Block{dense, ToCSC(dense)} {
			for _, pc := range []penaltyCase{{}, testPenalty} {
				for _, p := range []int{1, 3} {
					cfg := baseConfig(MU, 3, StopRule{MaxIter: 15})
					cfg.Options = pc.options()
					cfg.Options.Loss = loss
					ref := mustRun(t, x, p, cfg)
					for _, mo := range []Options{{Missing: true}, {Missing: true, TestFraction: 1e-300, TestSeed: 3}, {TestFraction: 1e-300}} {
						cfg.Options.Missing, cfg.Options.TestFraction, cfg.Options.TestSeed = mo.Missing, mo.TestFraction, mo.TestSeed
						got := mustRun(t, x, p, cfg)
						name := fmt.Sprintf("%s/%T/%v/P=%d/missing=%v,test=%v", loss, x, pc, p, mo.Missing, mo.TestFraction)
						if !sameBits(ref.B, got.B) || !sameBits(ref.C, got.C) ||
							math.Float64bits(ref.Objective) != math.Float64bits(got.Objective) ||
							math.Float64bits(ref.Initial) != math.Float64bits(got.Initial) {
							t.Errorf("%s: not the unmasked bits (B %.3g, C %.3g)", name, maxRelDiff(ref.B, got.B), maxRelDiff(ref.C, got.C))
						}
						for i := range ref.History {
							if math.Float64bits(ref.History[i].Ratio) != math.Float64bits(got.History[i].Ratio) {
								t.Errorf("%s: iteration %d: history differs", name, i)
								break
							}
						}
					}
				}
			}
		}
	}
}

// TestMaskedMUMissingEntriesDoNotMatter: for every loss, NaN of other bit patterns and other
// values at the held-out entries (stored or not, for CSC; negative ones too, which no loss
// checks there) give the same bits, dense and sparse, float64 and float32; the held-out error
// changes.
func TestMaskedMUMissingEntriesDoNotMatter(t *testing.T) {
	o := Options{Missing: true, TestFraction: 0.2, TestSeed: 11}
	for _, loss := range muMaskLosses {
		base := exact32Dense(synthDense(15, 330, 3, 79, 0.1))
		if loss.Beta() > 0 {
			base = sparsify(base, 0.3, 2)
		}
		nan := withNaN(base, 0.1, 12)
		// other: other NaN payloads and other values at the held-out entries, stored or not.
		other, _, _ := otherUnobserved(nan, o, func(v float64) float64 { return float64(float32(2.25 - 3*v)) })
		pairs := []struct {
			name    string
			x, y    Block
			storage Storage
		}{
			{"dense", nan, other, StorageAsIs},
			{"dense-float32", nan, other, StorageFloat32},
			{"sparse", ToCSC(nan), ToCSC(other), StorageAsIs},
			{"sparse-float32", ToCSC(nan), ToCSC(other), StorageFloat32},
		}
		for _, pr := range pairs {
			for _, p := range []int{1, 3} {
				cfg := baseConfig(MU, 3, StopRule{MaxIter: 12})
				cfg.Options = o
				cfg.Options.Loss = loss
				ref := mustRun(t, pr.x, p, cfg)
				cfg.Options.Storage = pr.storage
				got := mustRun(t, pr.y, p, cfg)
				name := fmt.Sprintf("%s/%s/P=%d", loss, pr.name, p)
				if !sameBits(ref.B, got.B) || !sameBits(ref.C, got.C) || math.Float64bits(ref.Objective) != math.Float64bits(got.Objective) {
					t.Errorf("%s: changing unobserved entries changed the fit (B %.3g, C %.3g)", name, maxRelDiff(ref.B, got.B), maxRelDiff(ref.C, got.C))
				}
				if ref.TestSSE == got.TestSSE {
					t.Errorf("%s: the held-out error did not change with the held-out values", name)
				}
			}
		}
	}
}

// TestMaskedMUBitsAcrossPathsThreadsShards: masked MU is bitwise the same on every kernel path,
// thread count and storage, for every loss and input, on 1 and 3 shards; 2, 3 and 5 shards
// agree with 1 to round-off (1e-12 relative; measured much less), as unmasked MU does.
func TestMaskedMUBitsAcrossPathsThreadsShards(t *testing.T) {
	t.Parallel()
	o := Options{Missing: true, TestFraction: 0.1, TestSeed: 2}
	worst := 0.0
	for _, loss := range muMaskLosses {
		for _, in := range muMaskInputs(loss) {
			var one *Result
			for _, p := range []int{1, 2, 3, 5} {
				var ref *Result
				for _, path := range AvailableKernelPaths() {
					for _, threads := range []int{1, 2, 4} {
						for _, st := range []Storage{StorageFloat64, StorageFloat32} {
							if p == 2 || p == 5 {
								if path != AvailableKernelPaths()[0] || threads != 2 || st != StorageFloat64 {
									continue
								}
							}
							cfg := baseConfig(MU, 3, StopRule{MaxIter: 10})
							cfg.Options = testPenalty.options()
							cfg.Options.Missing, cfg.Options.TestFraction, cfg.Options.TestSeed = o.Missing, o.TestFraction, o.TestSeed
							cfg.Options.Loss, cfg.Options.Storage = loss, st
							cfg.Threads = threads
							cfg.Options.Kernel = path
							res := mustRun(t, in.x, p, cfg)
							if ref == nil {
								ref = res
								continue
							}
							if !sameBits(res.B, ref.B) || !sameBits(res.C, ref.C) ||
								math.Float64bits(res.TestSSE) != math.Float64bits(ref.TestSSE) ||
								math.Float64bits(res.Objective) != math.Float64bits(ref.Objective) {
								t.Errorf("%s/%s/P=%d: path %s, %d threads, %s storage: bits differ (B %.3g, C %.3g)",
									loss, in.name, p, path, threads, st, maxRelDiff(res.B, ref.B), maxRelDiff(res.C, ref.C))
							}
						}
					}
				}
				if one == nil {
					one = ref
					continue
				}
				d := max(maxRelDiff(one.B, ref.B), maxRelDiff(one.C, ref.C), relDiff(one.Objective, ref.Objective), relDiff(one.TestSSE, ref.TestSSE))
				worst = max(worst, d)
				if d > 1e-12 {
					t.Errorf("%s/%s: P=%d differs from P=1 by %.3g", loss, in.name, p, d)
				}
			}
		}
	}
	t.Logf("largest relative difference across shard counts: %.3g", worst)
}

// TestMaskedMUResumeBitwise: masked MU machines resumed from snapshots (mask slot, then
// B_next for every loss) make bitwise the steps, held-out errors and snapshots of the
// uninterrupted job; looking at the flag every column changes no bit.
func TestMaskedMUResumeBitwise(t *testing.T) {
	const last, k = 6, 3
	pool := NewPool(2)
	defer pool.Close()
	for _, loss := range muMaskLosses {
		for _, in := range muMaskInputs(loss)[:2] {
			m, _ := in.x.Dims()
			o := Options{Missing: true, TestFraction: 0.1, TestSeed: 1, Loss: loss,
				AlphaCoef: testPenalty.alphaW, AlphaBasis: testPenalty.alphaH, L1Ratio: testPenalty.l1Ratio}
			specs := maskedSpecs(t, in.x, 3, MU, k, o, nil, nil, pool)
			name := fmt.Sprintf("%s/%s", loss, in.name)
			ref := newMachines(t, specs, nil)
			snaps := map[int][]Snapshot{}
			refSteps := driveMachines(t, ref, last, func(it int) {
				if it == 2 || it == last {
					snaps[it] = snapshotAll(t, ref)
				}
			})
			if st := snaps[2][0].State; len(st) != 2 || len(st[0]) != maskSlotLen || len(st[1]) != m*k {
				t.Fatalf("%s: snapshot state of %d slices, want the mask slot and B_next", name, len(st))
			}
			fine := newMachines(t, specs, nil)
			for _, mc := range fine {
				mc.intr.work = 1
			}
			for s, steps := range driveMachines(t, fine, last, nil) {
				for i := range steps {
					if d := sameStep(refSteps[s][i], steps[i]); d != "" || steps[i].TestSSE != refSteps[s][i].TestSSE {
						t.Fatalf("%s: checking the flag every column: shard %d step %d: %s", name, s, i, d)
					}
				}
			}
			resumed := newMachines(t, specs, snaps[2])
			got := driveMachines(t, resumed, last, nil)
			sameStepsAfter(t, name, refSteps, got, 2, sameMaskedStep)
			for s, snap := range snapshotAll(t, resumed) {
				if d := sameSnapshot(snap, snaps[last][s]); d != "" {
					t.Fatalf("%s: shard %d at iteration %d: %s", name, s, last, d)
				}
			}
		}
	}
}

// TestMaskedMUCollectives: masked MU keeps one allreduce per iteration ("mu.beta"), of
// 2 M K values (numerator and den_B, M x K for every loss) + the loss terms (1 for the
// Frobenius loss, 2 for IS, 3 otherwise) + the held-out error (with a test set) + the norms of
// C_i (with a penalty on C); the initialisation runs "init.mask" and the first "mu.beta".
func TestMaskedMUCollectives(t *testing.T) {
	const k, iters, p = 3, 7, 3
	for _, loss := range muMaskLosses {
		x := muMaskInputs(loss)[0].x
		m, _ := x.Dims()
		terms := map[Loss]int{LossFrobenius: 1, LossIS: 2}[loss]
		if terms == 0 {
			terms = 3
		}
		for _, c := range []struct {
			test float64
			pen  penaltyCase
		}{{0, penaltyCase{}}, {0.1, penaltyCase{}}, {0.1, testPenalty}} {
			cfg := baseConfig(MU, k, StopRule{MaxIter: iters})
			cfg.Options = c.pen.options()
			cfg.Options.Missing, cfg.Options.TestFraction, cfg.Options.Loss = true, c.test, loss
			res := mustRun(t, x, p, cfg)
			want := 2*m*k + terms
			if c.test > 0 {
				want++
			}
			if c.pen != (penaltyCase{}) {
				want += 2
			}
			if res.Comm.PerIteration != 1 || res.Comm.InitCollectives != 2 {
				t.Errorf("%s test=%v: %.2f collectives per iteration, %d init; want 1, 2", loss, c.test, res.Comm.PerIteration, res.Comm.InitCollectives)
			}
			if got := res.Comm.FloatsPerIteration / p; got != float64(want) {
				t.Errorf("%s test=%v %v: %.1f floats per shard per iteration, want %d", loss, c.test, c.pen, got, want)
			}
		}
	}
}

// TestMaskedMUCheckData: a masked run checks the loss's data condition on the observed entries
// only: IS takes zeros (stored or not) and KL negative values where they are missing or held
// out, and refuses them where they are observed, naming the entry; CheckObserved says the same.
func TestMaskedMUCheckData(t *testing.T) {
	const m, n = 8, 40
	o := Options{Missing: true, TestFraction: 0.2, TestSeed: 3}
	x := exact32Dense(synthDense(m, n, 2, 5, 0.1))
	var held, obs [2]int // (j, i) of a held-out entry and of an observed one
	found := 0
	for j := 0; j < n && found < 3; j++ {
		for i := 0; i < m; i++ {
			if HeldOut(o.TestSeed, j, i, o.TestFraction) {
				if found&1 == 0 {
					held, found = [2]int{j, i}, found|1
				}
			} else if found&2 == 0 {
				obs, found = [2]int{j, i}, found|2
			}
		}
	}
	zeroAt := func(e [2]int, v float64) *Dense {
		y := &Dense{Rows: m, Cols: n, Data: slices.Clone(x.Data)}
		y.Data[e[0]*m+e[1]] = v
		y.Data[(n-1)*m+2] = math.NaN() // a missing entry too
		return y
	}
	for _, c := range []struct {
		loss   Loss
		v      float64
		at     [2]int
		ok     bool
		sparse bool
	}{
		{LossIS, 0, held, true, false},
		{LossIS, 0, held, true, true}, // an unstored held-out zero
		{LossIS, 0, obs, false, false},
		{LossIS, 0, obs, false, true}, // an unstored observed zero
		{LossKL, -1, held, true, false},
		{LossKL, -1, obs, false, false},
	} {
		var blk Block = zeroAt(c.at, c.v)
		if c.sparse {
			blk = ToCSC(blk.(*Dense))
		}
		name := fmt.Sprintf("%s %v at (sample %d, feature %d) sparse=%v", c.loss, c.v, c.at[0], c.at[1], c.sparse)
		lo := o
		lo.Loss = c.loss
		err := c.loss.CheckObserved(blk, 0, lo)
		cfg := baseConfig(MU, 2, StopRule{MaxIter: 3})
		cfg.Options = lo
		_, runErr := Run(context.Background(), []Block{blk}, cfg)
		want := fmt.Sprintf("sample %d, feature %d", c.at[0], c.at[1])
		switch {
		case c.ok && (err != nil || runErr != nil):
			t.Errorf("%s: refused: %v / %v", name, err, runErr)
		case !c.ok && (err == nil || runErr == nil || !strings.Contains(err.Error(), want) || !strings.Contains(runErr.Error(), want)):
			t.Errorf("%s: want a refusal naming %q: %v / %v", name, want, err, runErr)
		}
	}
	// Without a mask CheckObserved is CheckData.
	if err := LossIS.CheckObserved(zeroAt(held, 0), 0, Options{}); err == nil {
		t.Error("CheckObserved without a mask accepted a zero for IS")
	}
}

// TestMaskedMUBitsDoNotDependOnBuildFlags pins the bits of masked MU's factors, held-out
// error and objective for every loss (dense and sparse, penalized or not, 3 shards), as
// TestMaskedBitsDoNotDependOnBuildFlags does for the Frobenius loss; rewrite with
// go test ./kernels -run TestMaskedMUBitsDoNotDependOnBuildFlags -update.
func TestMaskedMUBitsDoNotDependOnBuildFlags(t *testing.T) {
	got := map[string]string{}
	o := Options{Missing: true, TestFraction: 0.1, TestSeed: 1}
	for _, loss := range muMaskLosses {
		for _, in := range muMaskInputs(loss) {
			for _, pc := range []penaltyCase{{}, {0.02, 0.01, 0.5}} {
				cfg := bitsConfig(MU, StopRule{MaxIter: 20})
				cfg.K = 3
				cfg.Options = pc.options()
				cfg.Options.Missing, cfg.Options.TestFraction, cfg.Options.TestSeed = o.Missing, o.TestFraction, o.TestSeed
				cfg.Options.Loss = loss
				res := mustRun(t, in.x, 3, cfg)
				name := fmt.Sprintf("%s/%s/p3/%v", loss, in.name, pc)
				got[name+"/B"] = hashFloats(res.B)
				got[name+"/C"] = hashFloats(res.C)
				got[name+"/test"] = hashFloats([]float64{res.TestSSE, res.Objective})
			}
		}
	}
	golden{path: "testdata/mumask_bits.golden", what: "masked mu's factors, every loss", test: "TestMaskedMUBitsDoNotDependOnBuildFlags"}.check(t, got)
}

// TestMaskedMUNoAllocations: a masked MU iteration allocates nothing (one shard, the allreduce
// delivered as is), for every loss, dense and both CSC paths, with a test set and penalties,
// on one worker and on two.
func TestMaskedMUNoAllocations(t *testing.T) {
	for _, workers := range []int{1, 2} {
		pool := NewPool(workers)
		for _, loss := range muMaskLosses {
			for _, in := range muMaskInputs(loss) {
				o := Options{Missing: true, TestFraction: 0.1, TestSeed: 1, Loss: loss,
					AlphaCoef: testPenalty.alphaW, AlphaBasis: testPenalty.alphaH, L1Ratio: testPenalty.l1Ratio}
				ms := newMachines(t, maskedSpecs(t, in.x, 1, MU, 3, o, nil, nil, pool), nil)
				driveMachines(t, ms, 2, nil)
				m := ms[0]
				if a := allocsPerIteration(t, m); a != 0 {
					t.Errorf("%s/%s, %d workers: %.1f allocations per iteration", loss, in.name, workers, a)
				}
				m.Close()
			}
		}
		pool.Close()
	}
}

// BenchmarkMaskedMU times MU iterations (one shard, all cores) with each loss on a dense block,
// unmasked and with 5% of its entries missing; run with -benchtime=Nx for N iterations.
func BenchmarkMaskedMU(b *testing.B) {
	const m, n, k = 784, 30000, 10
	x := sparsify(synthDense(m, n, k, 4, 0.05), 0.3, 5)
	nan := withNaN(x, 0.05, 6)
	for _, loss := range []Loss{LossFrobenius, LossKL} {
		for _, c := range []struct {
			name string
			x    *Dense
		}{{"unmasked", x}, {"missing=0.05", nan}} {
			b.Run(fmt.Sprintf("%s/%s", loss, c.name), func(b *testing.B) {
				cfg := Config{Algo: MU, K: k, Seed: 1, Init: InitSpec{Method: InitRandom}, Stop: StopRule{MaxIter: b.N + 1},
					Options: Options{Loss: loss, Missing: c.x == nan}}
				res, err := Run(context.Background(), []Block{c.x}, cfg)
				if err != nil {
					b.Fatal(err)
				}
				it := slices.Clone(res.IterSeconds[1:])
				slices.Sort(it)
				b.ReportMetric(it[len(it)/2]*1e3, "median-ms/iter")
			})
		}
	}
}
