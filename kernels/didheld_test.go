package kernels

import (
	"fmt"
	"math"
	"testing"
)

// heldInputs are masked inputs without missing values: a held-out set on them runs
// didheld.go's algorithm (Missing off) or masked DID's (Missing on).
func heldInputs() []maskInput {
	dense := exact32Dense(synthDense(16, 420, 3, 71, 0.1))
	return []maskInput{
		{"dense", dense},
		{"sparse", ToCSC(sparsify(dense, 0.5, 7))},
		{"tall", exact32Dense(synthDense(70, 300, 4, 5, 0.05))},
	}
}

// heldOptions are the held-out settings of the tests: a usual fraction, and one that holds
// out more than half the rows of many patterns and many patterns of every row (the Gram
// matrices summed directly).
var heldOptions = []struct {
	name string
	o    Options
}{
	{"f0.15", Options{TestFraction: 0.15, TestSeed: 4}},
	{"f0.6", Options{TestFraction: 0.6, TestSeed: 9}},
}

// TestHeldDIDMatchesMaskedDID: DID with a held-out set and no missing values (didheld.go)
// makes masked DID's updates, so on the same start its iterates, objective and held-out
// error agree with masked DID's (the same held-out set, run as masked DID by setting
// Missing) to round-off, on 1 and 3 shards, with penalties, the residual form and the
// accelerated sweeps.
func TestHeldDIDMatchesMaskedDID(t *testing.T) {
	t.Parallel()
	const k = 3
	variants := []struct {
		name string
		edit func(*Config)
	}{
		{"plain", func(*Config) {}},
		{"penalty", func(c *Config) { c.Options.AlphaCoef, c.Options.AlphaBasis, c.Options.L1Ratio = 0.02, 0.01, 0.5 }},
		{"residual", func(c *Config) { c.Options.Form = FormResidual }},
		{"accel", func(c *Config) { c.Options.Accel = Accel{CSweeps: 3, BSweeps: 4, Eps: 0.1} }},
	}
	for _, in := range heldInputs() {
		m, n := in.x.Dims()
		b0, c0 := penaltyStart(m, n, k)
		for _, ho := range heldOptions {
			for _, v := range variants {
				for _, p := range []int{1, 3} {
					cfg := baseConfig(DID, k, StopRule{MaxIter: 15})
					cfg.Init = InitSpec{Method: InitCustom, B0: b0, C0: c0}
					cfg.Options = ho.o
					v.edit(&cfg)
					held := mustRun(t, in.x, p, cfg)
					cfg.Options.Missing = true
					masked := mustRun(t, in.x, p, cfg)
					name := fmt.Sprintf("%s/%s/%s/P=%d", in.name, ho.name, v.name, p)
					if d := max(maxRelDiff(held.B, masked.B), maxRelDiff(held.C, masked.C)); d > 1e-8 {
						t.Errorf("%s: factors differ from masked DID's by %.3g", name, d)
					}
					if d := relDiff(held.TestSSE, masked.TestSSE); d > 1e-8 {
						t.Errorf("%s: held-out error %.17g, masked DID's %.17g", name, held.TestSSE, masked.TestSSE)
					}
					if d := relDiff(held.Objective, masked.Objective); d > 1e-8 {
						t.Errorf("%s: objective %.17g, masked DID's %.17g", name, held.Objective, masked.Objective)
					}
					if held.TestCount != masked.TestCount || held.Observed != masked.Observed || held.TestCount == 0 {
						t.Errorf("%s: counts %d/%d, masked DID's %d/%d", name, held.Observed, held.TestCount, masked.Observed, masked.TestCount)
					}
				}
			}
		}
	}
}

// TestHeldDIDErrorsAreDirect: at every iteration the held-out error and the objective (and
// at iteration 1 those of B0 C0) equal the sums computed directly from the shards' factors,
// to the identities' round-off (1e-9), and LocalTestSSE and LocalResidual, which sum them
// directly, to 1e-12.
func TestHeldDIDErrorsAreDirect(t *testing.T) {
	t.Parallel()
	const iters, k = 30, 3
	pool := NewPool(2)
	defer pool.Close()
	for _, in := range heldInputs() {
		m, n := in.x.Dims()
		b0, c0 := penaltyStart(m, n, k)
		for _, ho := range heldOptions {
			for _, form := range []Form{FormGram, FormResidual} {
				o := ho.o
				o.Form = form
				specs := maskedSpecs(t, in.x, 3, DID, k, o, b0, c0, pool)
				ms := newMachines(t, specs, nil)
				name := fmt.Sprintf("%s/%s/%s", in.name, ho.name, form)
				driveMachines(t, ms, iters, func(it int) {
					st := ms[0].last
					c := []float64{}
					for _, mc := range ms {
						c = append(c, mc.Coef()...)
					}
					obs, test := direct(in.x, ms[0].Basis(), c, k, o)
					if d := relDiff(st.TestSSE, test); d > 1e-9 {
						t.Errorf("%s: iteration %d: held-out error %.17g, direct %.17g (%.3g)", name, it, st.TestSSE, test, d)
					}
					if d := relDiff(st.Objective, obs); d > 1e-9 {
						t.Errorf("%s: iteration %d: objective %.17g, direct %.17g (%.3g)", name, it, st.Objective, obs, d)
					}
					var local, resid float64
					for _, mc := range ms {
						local += mc.LocalTestSSE()
						resid += mc.LocalResidual()
					}
					if d := relDiff(local, test); d > 1e-12 {
						t.Errorf("%s: iteration %d: LocalTestSSE sums to %.17g, direct %.17g", name, it, local, test)
					}
					if d := relDiff(resid, obs); d > 1e-12 {
						t.Errorf("%s: iteration %d: LocalResidual sums to %.17g, direct %.17g", name, it, resid, obs)
					}
					if it == 1 {
						obs0, test0 := direct(in.x, b0, c0, k, o)
						if d := relDiff(st.InitialTestSSE, test0); d > 1e-9 {
							t.Errorf("%s: initial held-out error %.17g, direct %.17g", name, st.InitialTestSSE, test0)
						}
						if d := relDiff(st.Initial, obs0); d > 1e-9 {
							t.Errorf("%s: initial objective %.17g, direct %.17g", name, st.Initial, obs0)
						}
					}
					if st.Mask.Test == 0 || st.Mask.Missing != 0 || st.Mask.Observed+st.Mask.Test != int64(m*n) {
						t.Errorf("%s: mask counts %+v", name, st.Mask)
					}
				})
			}
		}
	}
}

// TestHeldDIDBitsAcrossPathsAndThreads: the same bits on every kernel path, thread count and
// storage, at ranks 3, 10 and 20 (the kernels' register forms and their Go fallbacks).
func TestHeldDIDBitsAcrossPathsAndThreads(t *testing.T) {
	t.Parallel()
	for _, k := range []int{3, 10, 20} {
		for _, in := range heldInputs() {
			if m, _ := in.x.Dims(); m < k {
				continue
			}
			for _, p := range []int{1, 3} {
				var ref *Result
				for _, path := range AvailableKernelPaths() {
					for _, threads := range []int{1, 2, 4} {
						for _, st := range []Storage{StorageFloat64, StorageFloat32} {
							cfg := baseConfig(DID, k, StopRule{MaxIter: 8})
							cfg.Options = heldOptions[0].o
							cfg.Options.Storage = st
							cfg.Options.Kernel = path
							cfg.Threads = threads
							res := mustRun(t, in.x, p, cfg)
							if ref == nil {
								ref = res
								continue
							}
							if !sameBits(res.B, ref.B) || !sameBits(res.C, ref.C) ||
								math.Float64bits(res.TestSSE) != math.Float64bits(ref.TestSSE) ||
								math.Float64bits(res.Objective) != math.Float64bits(ref.Objective) {
								t.Errorf("K=%d %s/P=%d: path %s, %d threads, %s storage: bits differ (B %.3g, C %.3g)",
									k, in.name, p, path, threads, st, maxRelDiff(res.B, ref.B), maxRelDiff(res.C, ref.C))
							}
						}
					}
				}
			}
		}
	}
}

// TestHeldDIDResumeBitwise: machines resumed from snapshots produce bitwise the steps,
// factors and state of the uninterrupted job.
func TestHeldDIDResumeBitwise(t *testing.T) {
	const last = 7
	pool := NewPool(2)
	defer pool.Close()
	for _, in := range heldInputs()[:2] {
		for _, o := range []Options{heldOptions[0].o, {TestFraction: 0.2, TestSeed: 3, AlphaCoef: 0.01, AlphaBasis: 0.01, Accel: Accel{CSweeps: 3, BSweeps: 4, Eps: 0.1}}} {
			for _, p := range []int{1, 3} {
				specs := maskedSpecs(t, in.x, p, DID, 3, o, nil, nil, pool)
				ref := newMachines(t, specs, nil)
				snaps := map[int][]Snapshot{}
				refSteps := driveMachines(t, ref, last, func(it int) {
					if it == 3 || it == last {
						snaps[it] = snapshotAll(t, ref)
					}
				})
				resumed := newMachines(t, specs, snaps[3])
				got := driveMachines(t, resumed, last, nil)
				name := fmt.Sprintf("%s/%+v/P=%d", in.name, o.Accel, p)
				sameStepsAfter(t, name, refSteps, got, 3, sameMaskedStep)
				for s, snap := range snapshotAll(t, resumed) {
					if d := sameSnapshot(snap, snaps[last][s]); d != "" {
						t.Fatalf("%s: shard %d at iteration %d: %s", name, s, last, d)
					}
				}
			}
		}
	}
}

// TestHeldDIDNoAllocations: an iteration allocates nothing, dense and sparse, at ranks 3 and
// 10, on one worker and on two.
func TestHeldDIDNoAllocations(t *testing.T) {
	for _, workers := range []int{1, 2} {
		pool := NewPool(workers)
		for _, k := range []int{3, 10} {
			for _, in := range heldInputs()[:2] {
				ms := newMachines(t, maskedSpecs(t, in.x, 1, DID, k, heldOptions[0].o, nil, nil, pool), nil)
				driveMachines(t, ms, 2, nil)
				if a := allocsPerIteration(t, ms[0]); a != 0 {
					t.Errorf("K=%d %s, %d workers: %.1f allocations per iteration", k, in.name, workers, a)
				}
				ms[0].Close()
			}
		}
		pool.Close()
	}
}

// TestHeldDIDKeepsNoHeldOutZeros: a sparse shard lists only its stored held-out entries
// (the held-out zeros follow from the patterns), and its X_o is the block without them.
func TestHeldDIDKeepsNoHeldOutZeros(t *testing.T) {
	x := ToCSC(sparsify(synthDense(60, 500, 3, 2, 0.05), 0.95, 3))
	o := Options{TestFraction: 0.3, TestSeed: 5}
	sm := scanMask(x, 0, o, true, true, nil)
	stored := 0
	for j := 0; j < x.Cols; j++ {
		for t := x.ColPtr[j]; t < x.ColPtr[j+1]; t++ {
			if HeldOut(o.TestSeed, j, int(x.RowIdx[t]), o.TestFraction) {
				stored++
			}
		}
	}
	if len(sm.urow) != stored || stored == 0 {
		t.Errorf("the lists hold %d entries, want the %d stored held-out ones", len(sm.urow), stored)
	}
	if sm.local.Test < int64(5*stored) {
		t.Errorf("%d held-out entries, %d stored: the test wants mostly zeros", sm.local.Test, stored)
	}
	xo := sm.x.(*CSC)
	if xo.ColPtr[x.Cols] != x.ColPtr[x.Cols]-stored {
		t.Errorf("X_o keeps %d entries, want %d", xo.ColPtr[x.Cols], x.ColPtr[x.Cols]-stored)
	}
	full := scanMask(x, 0, o, true, false, nil)
	if full.local != sm.local {
		t.Errorf("counts %+v, explicit lists' %+v", sm.local, full.local)
	}
	if int64(len(full.urow)) != full.local.Test {
		t.Errorf("the explicit lists hold %d entries, want %d", len(full.urow), full.local.Test)
	}
}

// TestHeldOutPatterns: a sample's held-out features are its pattern's; the patterns are a
// function of (seed, sample) with each of the HeldOutPatterns about equally likely, and each
// feature is held out of about the fraction of the samples.
func TestHeldOutPatterns(t *testing.T) {
	const seed, frac, m, n = 7, 0.2, 50, 20000
	set := newHeldOutSet(seed, frac, m)
	counts := make([]int, HeldOutPatterns)
	rowHeld := make([]int, m)
	for j := 0; j < n; j++ {
		p := HeldOutPattern(seed, j)
		counts[p]++
		for i := 0; i < m; i++ {
			in := HeldOut(seed, j, i, frac)
			if in {
				rowHeld[i]++
			}
			listed := false
			for _, r := range set.columnRows(j) {
				listed = listed || int(r) == i
			}
			if in != listed {
				t.Fatalf("sample %d feature %d: HeldOut %v, its pattern's rows %v", j, i, in, listed)
			}
		}
	}
	for p, c := range counts {
		if c < n/HeldOutPatterns/2 || c > 2*n/HeldOutPatterns {
			t.Errorf("pattern %d takes %d of %d samples", p, c, n)
		}
	}
	for i, c := range rowHeld {
		// A feature is held out of the samples of the patterns that hold it: Binomial(256, 0.2)
		// patterns, so between 10% and 30% of the samples.
		if f := float64(c) / n; f < 0.1 || f > 0.3 {
			t.Errorf("feature %d held out of %.3f of the samples", i, f)
		}
		for _, p := range set.patternsOf(i) {
			found := false
			for _, r := range set.rows[p] {
				found = found || int(r) == i
			}
			if !found {
				t.Errorf("feature %d: pattern %d does not hold it", i, p)
			}
		}
	}
}

// TestHeldOutBytes measures what a shard of DID with a held-out set keeps for it beyond X_o,
// its mask and its work space, on sparse counts at the density (2%) and test fraction (10%)
// of a large single-cell sweep and on a dense block, and checks that HeldOutBytes bounds it
// (jobspec's HeldOutFootprint reserves it). Most of it is work space of a size fixed by M and
// K (TestHeldDIDKeepsNoHeldOutZeros checks that the lists grow only with the stored held-out
// entries).
func TestHeldOutBytes(t *testing.T) {
	const frac = 0.1
	o := Options{TestFraction: frac, TestSeed: 9}
	dense := synthDense(64, 3000, 5, 4, 0.1)
	for _, c := range []struct {
		name string
		x    Block
		k    int
	}{
		{"sparse K=10", sparseCounts(20000, 300, 0.02, 3), 10},
		{"sparse K=30", sparseCounts(20000, 300, 0.02, 3), 30},
		{"dense K=5", dense, 5},
	} {
		m, n := c.x.Dims()
		stored := int64(m) * int64(n)
		if sp, ok := c.x.(*CSC); ok {
			stored = int64(sp.NNZ())
		}
		sm := scanMask(c.x, 0, o, true, true, nil)
		mc := &Machine{mask: &maskState{sm: sm}}
		e := newShardEnv(mc, ShardSpec{Algo: DID, X: sm.x, K: c.k, Options: o, Shards: 1, TotalCols: n})
		d := newDIDHeld(e)
		d.e, d.bs.e, d.sm = nil, nil, nil // the env and the mask are counted once, below
		kept := reachableBytes(struct {
			sm *shardMask
			d  *didHeld
		}{sm, d}) - reachableBytes(sm.x)
		bound := uint64(HeldOutBytes(int64(m), int64(n), stored, c.k, frac))
		explicit := uint64(float64(MaskEntryBytes) * frac * float64(m) * float64(n))
		t.Logf("%s: %d bytes kept, bound %d, masked DID's lists about %d", c.name, kept, bound, explicit)
		if kept > bound {
			t.Errorf("%s: the shard keeps %d bytes for its held-out set, more than HeldOutBytes's %d", c.name, kept, bound)
		}
	}
}
