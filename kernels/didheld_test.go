package kernels

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
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
			for _, r := range set.rows[p] {
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
		for _, opt := range []Options{o, {TestFraction: frac, TestSeed: 9, Form: FormResidual, Accel: Accel{CSweeps: 3, BSweeps: 4, Eps: 0.1}}} {
			sm := scanMask(c.x, 0, opt, true, true, nil)
			mc := &Machine{mask: &maskState{sm: sm}}
			e := newShardEnv(mc, ShardSpec{Algo: DID, X: sm.x, K: c.k, Options: opt, Shards: 1, TotalCols: n})
			d := newDIDHeld(e)
			d.e, d.bs.e, d.sm = nil, nil, nil // the env and the mask are counted once, below
			kept := reachableBytes(struct {
				sm *shardMask
				d  *didHeld
			}{sm, d}) - reachableBytes(sm.x)
			bound := uint64(HeldOutBytes(int64(m), int64(n), stored, c.k, frac))
			explicit := uint64(float64(MaskEntryBytes) * frac * float64(m) * float64(n))
			t.Logf("%s, form %s, accel %+v: %d bytes kept, bound %d, masked DID's lists about %d", c.name, opt.Form, opt.Accel, kept, bound, explicit)
			if kept > bound {
				t.Errorf("%s, form %s, accel %+v: the shard keeps %d bytes for its held-out set, more than HeldOutBytes's %d",
					c.name, opt.Form, opt.Accel, kept, bound)
			}
		}
	}
}

// TestHeldOutSchemeRecorded: a masked snapshot records how its held-out set was drawn, and a
// snapshot of the earlier scheme (entry by entry: a mask slot one value shorter) or of
// another scheme is refused with an error that says so, instead of resuming with a held-out
// set its totals do not describe.
func TestHeldOutSchemeRecorded(t *testing.T) {
	pool := NewPool(1)
	defer pool.Close()
	x := heldInputs()[0].x
	for _, o := range []Options{heldOptions[0].o, {Missing: true, TestFraction: 0.1, TestSeed: 2}} {
		specs := maskedSpecs(t, x, 1, DID, 3, o, nil, nil, pool)
		ms := newMachines(t, specs, nil)
		driveMachines(t, ms, 2, nil)
		snap := snapshotAll(t, ms)[0]
		if got := snap.State[0][maskSlotLen-1]; got != heldOutScheme {
			t.Fatalf("the mask slot records scheme %v, want %d", got, heldOutScheme)
		}
		for _, c := range []struct {
			name, want string
			edit       func([]float64) []float64
		}{
			{"entry by entry", "older version", func(v []float64) []float64 { return v[:maskSlotLen-1] }},
			{"another scheme", "scheme 1", func(v []float64) []float64 { v[maskSlotLen-1] = 1; return v }},
		} {
			bad := snap
			bad.State = append([][]float64{c.edit(slices.Clone(snap.State[0]))}, snap.State[1:]...)
			spec := specs[0]
			spec.Resume = &bad
			if _, err := NewMachine(spec); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("missing %v, %s: %v, want an error saying %q", o.Missing, c.name, err, c.want)
			}
		}
	}
}

// TestHeldDIDEdgeCases: tiny and wide blocks, ranks past 16, fractions from 0.003 to 0.999
// (patterns with no rows, rows held out by every pattern) and shards of zero columns agree with
// masked DID on the same held-out set, on both forms, with penalties and the accelerated sweeps.
func TestHeldDIDEdgeCases(t *testing.T) {
	type tc struct {
		name string
		x    Block
		k    int
		frac float64
		p    int
		it   int
	}
	tiny := exact32Dense(synthDense(3, 60, 2, 11, 0.1))
	mid := exact32Dense(synthDense(30, 400, 5, 13, 0.1))
	// sparse with empty columns: a third block entirely zero
	sp := sparsify(exact32Dense(synthDense(20, 300, 3, 17, 0.1)), 0.7, 5)
	for j := 200; j < 300; j++ {
		for i := 0; i < 20; i++ {
			sp.Data[j*20+i] = 0
		}
	}
	cases := []tc{
		{"tiny K=M", tiny, 3, 0.3, 2, 10},
		{"tiny f0.99", tiny, 2, 0.99, 1, 10},
		{"mid K=20 f0.15", mid, 20, 0.15, 3, 10},
		{"mid K=17 f0.5", mid, 17, 0.5, 2, 10},
		{"mid f0.97", mid, 4, 0.97, 3, 10},
		{"mid f0.003", mid, 4, 0.003, 3, 10},
		{"mid f0.995", mid, 4, 0.995, 3, 10},
		{"wide f0.999", exact32Dense(synthDense(40, 3000, 3, 19, 0.1)), 3, 0.999, 2, 10},
		{"sparse empty shard", ToCSC(sp), 3, 0.2, 3, 10},
		{"sparse empty shard f0.8", ToCSC(sp), 3, 0.8, 3, 10},
		{"dense empty shard", sp, 3, 0.2, 3, 10},
	}
	for _, c := range cases {
		for _, form := range []Form{FormGram, FormResidual} {
			for _, accel := range []Accel{{}, {CSweeps: 3, BSweeps: 4, Eps: 0.1}} {
				m, n := c.x.Dims()
				b0, c0 := penaltyStart(m, n, c.k)
				cfg := baseConfig(DID, c.k, StopRule{MaxIter: c.it})
				cfg.Init = InitSpec{Method: InitCustom, B0: b0, C0: c0}
				cfg.Options = Options{TestFraction: c.frac, TestSeed: 4, Form: form, Accel: accel, AlphaBasis: 0.01, AlphaCoef: 0.01, L1Ratio: 0.3}
				name := fmt.Sprintf("%s/%s/%+v", c.name, form, accel)
				held := mustRun(t, c.x, c.p, cfg)
				cfg.Options.Missing = true
				masked := mustRun(t, c.x, c.p, cfg)
				if d := max(maxRelDiff(held.B, masked.B), maxRelDiff(held.C, masked.C)); d > 1e-8 || math.IsNaN(d) {
					t.Errorf("%s: factors differ by %.3g", name, d)
				}
				if d := relDiff(held.TestSSE, masked.TestSSE); d > 1e-8 || math.IsNaN(d) {
					t.Errorf("%s: test %.17g masked %.17g", name, held.TestSSE, masked.TestSSE)
				}
				if d := relDiff(held.Objective, masked.Objective); d > 1e-8 || math.IsNaN(d) {
					t.Errorf("%s: obj %.17g masked %.17g", name, held.Objective, masked.Objective)
				}
				t.Logf("%s: test %.6g obj %.6g count %d", name, held.TestSSE, held.Objective, held.TestCount)
			}
		}
	}
}

// TestHeldDIDInitialWithPenalty: the initial objective and held-out error (Step.Initial,
// InitialTestSSE) with penalties, on both forms, are masked DID's (Missing on).
func TestHeldDIDInitialWithPenalty(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	const k = 3
	for _, in := range heldInputs() {
		m, n := in.x.Dims()
		b0, c0 := penaltyStart(m, n, k)
		for _, form := range []Form{FormGram, FormResidual} {
			for _, pen := range []Options{{AlphaCoef: 0.5, L1Ratio: 0}, {AlphaCoef: 0.5, L1Ratio: 1}, {AlphaCoef: 0.3, AlphaBasis: 0.2, L1Ratio: 0.5}} {
				o := pen
				o.TestFraction, o.TestSeed, o.Form = 0.15, 4, form
				var got [2]Step
				for v, missing := range []bool{false, true} {
					o.Missing = missing
					ms := newMachines(t, maskedSpecs(t, in.x, 2, DID, k, o, b0, c0, pool), nil)
					driveMachines(t, ms, 1, func(int) { got[v] = ms[0].last })
				}
				name := fmt.Sprintf("%s/%s/%+v", in.name, form, pen)
				if d := relDiff(got[0].Initial, got[1].Initial); d > 1e-9 {
					t.Errorf("%s: initial objective %.17g, masked DID's %.17g", name, got[0].Initial, got[1].Initial)
				}
				if d := relDiff(got[0].InitialTestSSE, got[1].InitialTestSSE); d > 1e-9 {
					t.Errorf("%s: initial test %.17g, masked DID's %.17g", name, got[0].InitialTestSSE, got[1].InitialTestSSE)
				}
				if d := relDiff(got[0].Objective, got[1].Objective); d > 1e-9 {
					t.Errorf("%s: objective %.17g, masked DID's %.17g", name, got[0].Objective, got[1].Objective)
				}
			}
		}
	}
}

// TestHeldDIDOutOfSquares: TestOfSquares (--transform sqrt) counts the implicit held-out zeros:
// the sums equal a direct sum over every held-out entry, dense and sparse.
func TestHeldDIDOutOfSquares(t *testing.T) {
	const k = 3
	counts := countsBlock(14, 2600, 7)
	for i, v := range counts.Data {
		counts.Data[i] = math.Sqrt(v)
	}
	o := Options{TestFraction: 0.2, TestSeed: 3}
	for _, x := range []Block{counts, ToCSC(counts)} {
		blocks, err := Split(x, 3)
		if err != nil {
			t.Fatal(err)
		}
		c := Config{Algo: DID, K: k, Seed: 2, Init: InitSpec{Method: InitRandom}, Options: o, Threads: 2, Stop: StopRule{MaxIter: 30}}
		c.Options.TestOfSquares = true
		one, err := Run(context.Background(), blocks, c)
		if err != nil {
			t.Fatal(err)
		}
		m, n := x.Dims()
		d := ToDense(x)
		var sse, sq float64
		zeros := 0
		for j := range n {
			for i := range m {
				v := d.At(i, j)
				if !HeldOut(o.TestSeed, j, i, o.TestFraction) {
					continue
				}
				if v == 0 {
					zeros++
				}
				var y float64
				for q := range k {
					y += one.B[q*m+i] * one.C[j*k+q]
				}
				y = max(y, 0)
				e := v*v - y*y
				sse += e * e
				sq += v * v * v * v
			}
		}
		if relDiff(one.TestSSE, sse) > 1e-12 || relDiff(one.TestSqNorm, sq) > 1e-12 || zeros == 0 {
			t.Errorf("%T: held-out error of the squares %.17g of %.17g, direct %.17g of %.17g (%d held-out zeros)", x, one.TestSSE, one.TestSqNorm, sse, sq, zeros)
		}
	}
}

// TestHeldDIDPatternCancellation: a start whose first component lives almost only on row 0, so that the patterns
// holding row 0 out lose nearly all of G_00 by cancellation: patternForm must then sum G_l
// directly (maskCancel), as masked DID does. Kills the mutation that drops that branch.
func TestHeldDIDPatternCancellation(t *testing.T) {
	x := heldInputs()[0].x
	m, n := x.Dims()
	const k = 3
	b0, c0 := penaltyStart(m, n, k)
	for i := 0; i < m; i++ {
		b0[i] = 1e-4
	}
	b0[0] = 1e4
	cfg := baseConfig(DID, k, StopRule{MaxIter: 1})
	cfg.Init = InitSpec{Method: InitCustom, B0: b0, C0: c0}
	cfg.Options = Options{TestFraction: 0.15, TestSeed: 4}
	held := mustRun(t, x, 1, cfg)
	cfg.Options.Missing = true
	masked := mustRun(t, x, 1, cfg)
	if d := maxRelDiff(held.C, masked.C); d > 1e-8 {
		t.Errorf("C differs from masked DID's by %.3g", d)
	}
	// The new C's first component is large on the samples whose pattern holds row 0 out and
	// tiny elsewhere, so row 0's V_0 = V - sum of those patterns' V_l cancels (rowLane's
	// maskCancel rule). Compare row 0 of B on its own: its scale is far below B's.
	b0h, b0m := make([]float64, k), make([]float64, k)
	for p := 0; p < k; p++ {
		b0h[p], b0m[p] = held.B[p*m], masked.B[p*m]
	}
	if d := maxRelDiff(b0h, b0m); d > 1e-8 {
		t.Errorf("row 0 of B %v, masked DID's %v (%.3g)", b0h, b0m, d)
	}
	if d := maxRelDiff(held.B, masked.B); d > 1e-8 {
		t.Errorf("B differs from masked DID's by %.3g", d)
	}
}

// TestHeldDIDHostileBlocks: CSC blocks with unsorted, duplicate or out-of-range row indices,
// and NaN, infinite or huge values, neither hang nor panic outside the machine's error.
func TestHeldDIDHostileBlocks(t *testing.T) {
	base := ToCSC(sparsify(exact32Dense(synthDense(12, 80, 3, 3, 0.1)), 0.5, 2))
	mk := func(edit func(x *CSC)) *CSC {
		x := &CSC{Rows: base.Rows, Cols: base.Cols, ColPtr: slices.Clone(base.ColPtr), RowIdx: slices.Clone(base.RowIdx), Val: slices.Clone(base.Val)}
		edit(x)
		return x
	}
	cases := []struct {
		name string
		x    Block
	}{
		{"unsorted", mk(func(x *CSC) {
			for j := 0; j < x.Cols; j++ {
				slices.Reverse(x.RowIdx[x.ColPtr[j]:x.ColPtr[j+1]])
				slices.Reverse(x.Val[x.ColPtr[j]:x.ColPtr[j+1]])
			}
		})},
		{"duplicates", mk(func(x *CSC) {
			for j := 0; j < x.Cols; j++ {
				if lo, hi := x.ColPtr[j], x.ColPtr[j+1]; hi-lo >= 2 {
					x.RowIdx[lo+1] = x.RowIdx[lo]
				}
			}
		})},
		{"row too big", mk(func(x *CSC) { x.RowIdx[5] = int32(x.Rows + 3) })},
		{"row negative", mk(func(x *CSC) { x.RowIdx[5] = -1 })},
		{"nan stored", mk(func(x *CSC) { x.Val[7] = math.NaN() })},
		{"inf stored", mk(func(x *CSC) { x.Val[7] = math.Inf(1) })},
		{"huge", mk(func(x *CSC) { x.Val[7] = 1e300 })},
		{"nan dense", func() Block { d := ToDense(base); d.Data[9] = math.NaN(); return d }()},
		{"inf dense", func() Block { d := ToDense(base); d.Data[9] = math.Inf(1); return d }()},
	}
	for _, c := range cases {
		for _, missing := range []bool{false, true} {
			cfg := baseConfig(DID, 3, StopRule{MaxIter: 5})
			cfg.Options = Options{TestFraction: 0.3, TestSeed: 1, Missing: missing}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s missing=%v: panic %v", c.name, missing, r)
					}
				}()
				blocks, _ := Split(c.x, 2)
				done := make(chan struct{})
				var res *Result
				var err error
				go func() {
					defer close(done)
					res, err = Run(context.Background(), blocks, cfg)
				}()
				select {
				case <-done:
				case <-time.After(20 * time.Second):
					t.Fatalf("%s: hangs", c.name)
				}
				if bad := c.name == "unsorted" || c.name == "duplicates" || strings.HasPrefix(c.name, "row "); bad && (err == nil || !strings.Contains(err.Error(), "row index")) {
					t.Errorf("%s missing=%v: %v, want an error naming the row index", c.name, missing, err)
				}
				if err != nil {
					t.Logf("%s missing=%v: error %v", c.name, missing, err)
				} else {
					t.Logf("%s missing=%v: test %v obj %v testcount %d observed %d", c.name, missing, res.TestSSE, res.Objective, res.TestCount, res.Observed)
				}
			}()
		}
	}
}

// TestHeldDIDBitsHighRank: the same bits on every kernel path and thread count at ranks 17, 33
// and 64, with the accelerated sweeps, penalties and the residual form.
func TestHeldDIDBitsHighRank(t *testing.T) {
	x := exact32Dense(synthDense(70, 600, 4, 5, 0.05))
	sp := ToCSC(sparsify(x, 0.6, 3))
	for _, k := range []int{17, 33, 64} {
		for _, in := range []Block{x, sp} {
			for _, o := range []Options{{}, {Accel: Accel{CSweeps: 3, BSweeps: 4, Eps: 0.1}, AlphaCoef: 0.01, AlphaBasis: 0.01, L1Ratio: 0.5}, {Form: FormResidual}} {
				var ref *Result
				for _, path := range AvailableKernelPaths() {
					for _, threads := range []int{1, 3} {
						cfg := baseConfig(DID, k, StopRule{MaxIter: 4})
						cfg.Options = o
						cfg.Options.TestFraction, cfg.Options.TestSeed = 0.2, 4
						cfg.Options.Kernel = path
						cfg.Threads = threads
						res := mustRun(t, in, 2, cfg)
						if ref == nil {
							ref = res
							continue
						}
						if !sameBits(res.B, ref.B) || !sameBits(res.C, ref.C) || res.TestSSE != ref.TestSSE || res.Objective != ref.Objective {
							t.Errorf("K=%d %T %+v: path %s threads %d: bits differ", k, in, o.Accel, path, threads)
						}
					}
				}
			}
		}
	}
}
