package kernels

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Accelerated masked DID (didmask.go with Options.Accel): the further C sweeps on each
// column's own Gram form and the further B sweeps on each row's own V_i keep masked DID's
// guarantees: the same bits on every kernel path, thread count and internal choice (and
// round-off across shard counts), after a resume; an exact objective and held-out error; a monotone objective; and
// fewer iterations to plain DID's error.

// maskAccels are the accelerated settings of the tests: maskAccelSweeps and a looser one.
var maskAccels = []Accel{{CSweeps: 3, BSweeps: 5, Eps: 0.1}, {CSweeps: 2, BSweeps: 3, Eps: 0.3}}

// accelMaskOptions are the mask settings of the accelerated tests: missing values, a test
// fraction, and penalties on C and on B (with and without a test fraction).
var accelMaskOptions = append(maskOptions[:len(maskOptions):len(maskOptions)], struct {
	name string
	o    Options
}{"penalty", Options{Missing: true, AlphaCoef: 0.02, AlphaBasis: 0.01, L1Ratio: 0.3}})

// TestMaskedAccelSameBits: on each of 1, 3 and 8 shards, accelerated masked DID gives bitwise
// the same factors, objective history and held-out error on every kernel path and thread
// count and with every internal choice of didMaskTuning (every inner decision is taken from
// a column's own values or from replicated ones summed in row order); across shard counts,
// whose allreduce adds the shards' partial sums in another order, the results agree to
// round-off, as plain DID's do (README, "Reproducibility"). Each inner loop changes the
// iterates (the runs with only the C loop, only the B loop and both differ from plain DID
// and from each other), so the comparisons are of accelerated runs.
func TestMaskedAccelSameBits(t *testing.T) {
	t.Parallel()
	const iters = 10
	for _, acc := range maskAccels {
		for _, in := range maskInputs() {
			for _, mo := range accelMaskOptions {
				name := fmt.Sprintf("%s/%s/%s", acc, in.name, mo.name)
				cfg := baseConfig(DID, 3, StopRule{MaxIter: iters})
				cfg.Options = mo.o
				cfg.Options.Accel = acc
				var one *Result
				for _, p := range []int{1, 3, 8} {
					ref := mustRun(t, in.x, p, cfg)
					check := func(what string, got *Result) {
						t.Helper()
						if d := sameResult(got, ref); d != "" {
							t.Errorf("%s/P=%d: %s: %s", name, p, what, d)
						}
					}
					for _, path := range AvailableKernelPaths() {
						for _, threads := range []int{1, 4} {
							c := cfg
							c.Options.Kernel, c.Threads = path, threads
							check(fmt.Sprintf("path %s, %d threads", path, threads), mustRun(t, in.x, p, c))
						}
					}
					c := cfg
					c.Options.maskTuning = &didMaskTuning{}
					check("every internal choice at its other side", mustRun(t, in.x, p, c))
					if one == nil {
						one = ref
						continue
					}
					db, dc := maxRelDiff(one.B, ref.B), maxRelDiff(one.C, ref.C)
					if db > 1e-11 || dc > 1e-11 || relDiff(one.Objective, ref.Objective) > 1e-11 || relDiff(one.TestSSE, ref.TestSSE) > 1e-11 {
						t.Errorf("%s/P=%d: differs from 1 shard by more than round-off: B %.3g, C %.3g, objective %.3g, held-out %.3g",
							name, p, db, dc, relDiff(one.Objective, ref.Objective), relDiff(one.TestSSE, ref.TestSSE))
					}
				}

				// Each loop is in effect.
				runs := map[string]*Result{"both": one}
				for _, v := range []struct {
					name string
					a    Accel
				}{{"plain", Accel{}}, {"C only", Accel{CSweeps: acc.CSweeps, BSweeps: 1, Eps: acc.Eps}}, {"B only", Accel{CSweeps: 1, BSweeps: acc.BSweeps, Eps: acc.Eps}}} {
					c := cfg
					c.Options.Accel = v.a
					got := mustRun(t, in.x, 1, c)
					for other, r := range runs {
						if sameBits(got.B, r.B) || sameBits(got.C, r.C) {
							t.Errorf("%s: %s gives the factors of %s: an inner loop does nothing", name, v.name, other)
						}
					}
					runs[v.name] = got
				}
			}
		}
	}
}

// sameResult reports how two results differ in their bits ("" when they agree): factors,
// objective and held-out error, and the history.
func sameResult(got, want *Result) string {
	switch {
	case !sameBits(got.B, want.B) || !sameBits(got.C, want.C):
		return fmt.Sprintf("factors differ (B %.3g, C %.3g)", maxRelDiff(got.B, want.B), maxRelDiff(got.C, want.C))
	case math.Float64bits(got.Objective) != math.Float64bits(want.Objective) ||
		math.Float64bits(got.TestSSE) != math.Float64bits(want.TestSSE):
		return fmt.Sprintf("objective %v held-out %v, want %v %v", got.Objective, got.TestSSE, want.Objective, want.TestSSE)
	case len(got.History) != len(want.History):
		return fmt.Sprintf("%d iterations, want %d", len(got.History), len(want.History))
	}
	for i, h := range got.History {
		w := want.History[i]
		if math.Float64bits(h.RelErr2) != math.Float64bits(w.RelErr2) || math.Float64bits(h.TestSSE) != math.Float64bits(w.TestSSE) {
			return fmt.Sprintf("iteration %d: objective %v held-out %v, want %v %v", h.Iteration, h.RelErr2, h.TestSSE, w.RelErr2, w.TestSSE)
		}
	}
	return ""
}

// directPenalized returns the penalized masked objective of B, C on x (o's penalty, as
// newPenalty scales it) and the held-out error, computed entry by entry.
func directPenalized(x Block, b, c []float64, k int, o Options) (obj, test float64) {
	m, n := x.Dims()
	obs, test := direct(x, b, c, k, o)
	pen := newPenalty(o, m, n)
	norms := func(v []float64) (s1, sq float64) {
		for _, x := range v {
			s1 += math.Abs(x)
			sq += x * x
		}
		return s1, sq
	}
	c1, c2 := norms(c)
	b1, b2 := norms(b)
	return obs + pen.coefValue(c1, c2) + pen.basisValue(b1, b2), test
}

// TestMaskedAccelObjectiveIsDirect: at every iteration of accelerated masked DID (3 shards,
// both forms) the reported objective equals the penalized masked residual computed entry by
// entry from the shards' factors to 1e-9 relative (the Gram form's identity loses about
// eps ||X_o||^2 / objective, as plain DID's), the held-out error equals the direct one to
// 1e-11, and the objective never increases.
func TestMaskedAccelObjectiveIsDirect(t *testing.T) {
	const iters, k, p = 30, 3, 3
	pool := NewPool(2)
	defer pool.Close()
	for _, acc := range maskAccels {
		for _, in := range maskInputs() {
			m, n := in.x.Dims()
			b0, c0 := penaltyStart(m, n, k)
			for _, mo := range accelMaskOptions {
				for _, form := range []Form{FormGram, FormResidual} {
					o := mo.o
					o.Accel, o.Form = acc, form
					name := fmt.Sprintf("%s/%s/%s/%s", acc, in.name, mo.name, form)
					ms := newMachines(t, maskedSpecs(t, in.x, p, DID, k, o, b0, c0, pool), nil)
					last := math.Inf(1)
					driveMachines(t, ms, iters, func(it int) {
						st := ms[0].last
						var c []float64
						for _, mc := range ms {
							c = append(c, mc.Coef()...)
						}
						obj, test := directPenalized(in.x, ms[0].Basis(), c, k, o)
						if d := relDiff(st.Objective, obj); d > 1e-9 {
							t.Errorf("%s: iteration %d: objective %.17g, direct %.17g (%.3g)", name, it, st.Objective, obj, d)
						}
						if o.TestFraction > 0 {
							if d := relDiff(st.TestSSE, test); d > 1e-11 {
								t.Errorf("%s: iteration %d: held-out error %.17g, direct %.17g (%.3g)", name, it, st.TestSSE, test, d)
							}
						}
						if it == 1 {
							last = st.Initial
						}
						if st.Objective > last {
							t.Errorf("%s: iteration %d: objective %.17g rose from %.17g", name, it, st.Objective, last)
						}
						last = st.Objective
					})
					for _, mc := range ms {
						mc.Close()
					}
				}
			}
		}
	}
}

// TestMaskedAccelFewerIterations: on a planted low-rank matrix with 5% of its entries missing
// (with and without a test fraction), accelerated masked DID reaches plain masked DID's
// objective after 100 iterations in fewer iterations.
func TestMaskedAccelFewerIterations(t *testing.T) {
	const iters, k = 100, 5
	x := withNaN(synthDense(60, 1500, k, 31, 0.01), 0.05, 32)
	for _, o := range []Options{{Missing: true}, {Missing: true, TestFraction: 0.1, TestSeed: 6}} {
		cfg := baseConfig(DID, k, StopRule{MaxIter: iters})
		cfg.Options = o
		plain := mustRun(t, x, 3, cfg)
		target := plain.History[len(plain.History)-1].RelErr2
		for _, acc := range maskAccels {
			cfg.Options.Accel = acc
			got := mustRun(t, x, 3, cfg)
			reached := 0
			for _, h := range got.History {
				if h.RelErr2 <= target {
					reached = h.Iteration
					break
				}
			}
			t.Logf("test fraction %v: plain DID's objective after %d iterations (relative %.6g) reached by --accel %s in %d iterations (its objective after %d: %.6g)",
				o.TestFraction, iters, target, acc, reached, iters, got.History[len(got.History)-1].RelErr2)
			if reached == 0 || reached >= iters {
				t.Errorf("test fraction %v: --accel %s did not reach plain DID's objective after %d iterations in fewer (reached at %d)", o.TestFraction, acc, iters, reached)
			}
		}
	}
}

// TestMaskedAccelResumeBitwise: accelerated masked machines resumed from snapshots produce
// bitwise the steps, factors and state of the uninterrupted job, on 1 and 3 shards.
func TestMaskedAccelResumeBitwise(t *testing.T) {
	const at, last = 3, 7
	pool := NewPool(2)
	defer pool.Close()
	dense := synthDense(14, 500, 3, 83, 0.05)
	inputs := []struct {
		name string
		x    Block
		o    Options
	}{
		{"dense", withNaN(dense, 0.1, 1), Options{Missing: true, TestFraction: 0.1, TestSeed: 1}},
		{"sparse", ToCSC(withNaN(sparsify(dense, 0.5, 2), 0.1, 3)), Options{Missing: true, AlphaCoef: 0.01, AlphaBasis: 0.01}},
	}
	for _, acc := range maskAccels {
		for _, in := range inputs {
			for _, p := range []int{1, 3} {
				o := in.o
				o.Accel = acc
				specs := maskedSpecs(t, in.x, p, DID, 3, o, nil, nil, pool)
				ref := newMachines(t, specs, nil)
				snaps := map[int][]Snapshot{}
				refSteps := driveMachines(t, ref, last, func(it int) {
					if it == at || it == last {
						snaps[it] = snapshotAll(t, ref)
					}
				})
				resumed := newMachines(t, specs, snaps[at])
				got := driveMachines(t, resumed, last, nil)
				name := fmt.Sprintf("%s/%s/P=%d", acc, in.name, p)
				sameStepsAfter(t, name, refSteps, got, at, sameMaskedStep)
				for s, snap := range snapshotAll(t, resumed) {
					if d := sameSnapshot(snap, snaps[last][s]); d != "" {
						t.Fatalf("%s: shard %d at iteration %d: %s", name, s, last, d)
					}
				}
			}
		}
	}
}

// TestMaskedAccelNoAllocations: an accelerated masked DID iteration allocates nothing, as a
// plain one.
func TestMaskedAccelNoAllocations(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	for _, k := range []int{3, 10} {
		for _, in := range maskInputs()[:2] {
			for _, mo := range accelMaskOptions {
				o := mo.o
				o.Accel = maskAccelSweeps
				ms := newMachines(t, maskedSpecs(t, in.x, 1, DID, k, o, nil, nil, pool), nil)
				driveMachines(t, ms, 2, nil)
				if a := allocsPerIteration(t, ms[0]); a != 0 {
					t.Errorf("K=%d %s/%s: %.1f allocations per iteration", k, in.name, mo.name, a)
				}
				ms[0].Close()
			}
		}
	}
}

// plainAccelMasked runs accelerated masked DID's updates from b, c (updated in place) on the
// dense x with observed(i, j), written plainly, with o's penalty: each column of C by
// coordinate sweeps on its own G_j and h_j, summed afresh from X and B, further sweeps while
// the column's step exceeds a.Eps^2 times its first; then each row of B likewise on its V_i
// and a_i from the new C, further sweeps over all of B while the whole step exceeds a.Eps^2
// times the first.
func plainAccelMasked(x *Dense, observed func(i, j int) bool, b, c []float64, k, iters int, o Options) {
	m, n := x.Rows, x.Cols
	a := o.Accel
	eps2 := a.Eps * a.Eps
	pen := newPenalty(o, m, n)
	g, h := make([]float64, k*k), make([]float64, k)
	v, w := make([]float64, m*k*k), make([]float64, m*k)
	// sweep runs one coordinate sweep of min y^T G y - 2 h^T y over y >= 0 (y strided) and
	// returns the squared norm of its step.
	sweep := func(y []float64, stride int, g, h []float64) float64 {
		var st float64
		for p := 0; p < k; p++ {
			if !(g[p*k+p] > 0) {
				continue
			}
			s := h[p]
			for q := 0; q < k; q++ {
				s -= g[p*k+q] * y[q*stride]
			}
			nb := math.Max(0, y[p*stride]+s/g[p*k+p])
			st += (nb - y[p*stride]) * (nb - y[p*stride])
			y[p*stride] = nb
		}
		return st
	}
	for it := 0; it < iters; it++ {
		for j := 0; j < n; j++ {
			clear(g)
			clear(h)
			for i := 0; i < m; i++ {
				if !observed(i, j) {
					continue
				}
				for p := 0; p < k; p++ {
					h[p] += b[p*m+i] * x.Data[j*m+i]
					for q := 0; q < k; q++ {
						g[p*k+q] += b[p*m+i] * b[q*m+i]
					}
				}
			}
			for p := 0; p < k; p++ {
				h[p] -= pen.l1C
				g[p*k+p] += pen.l2C
			}
			cj := c[j*k : j*k+k]
			first := sweep(cj, 1, g, h)
			for l, st := 1, first; l < max(a.CSweeps, 1) && st > first*eps2; l++ {
				st = sweep(cj, 1, g, h)
			}
		}
		clear(v)
		clear(w)
		for i := 0; i < m; i++ {
			vi, wi := v[i*k*k:(i+1)*k*k], w[i*k:(i+1)*k]
			for j := 0; j < n; j++ {
				if !observed(i, j) {
					continue
				}
				for p := 0; p < k; p++ {
					wi[p] += c[j*k+p] * x.Data[j*m+i]
					for q := 0; q < k; q++ {
						vi[p*k+q] += c[j*k+p] * c[j*k+q]
					}
				}
			}
			for p := 0; p < k; p++ {
				wi[p] -= pen.l1B
				vi[p*k+p] += pen.l2B
			}
		}
		sweepB := func() float64 {
			var st float64
			for i := 0; i < m; i++ {
				st += sweep(b[i:], m, v[i*k*k:(i+1)*k*k], w[i*k:(i+1)*k])
			}
			return st
		}
		first := sweepB()
		for l, st := 1, first; l < max(a.BSweeps, 1) && st > first*eps2; l++ {
			st = sweepB()
		}
	}
}

// TestMaskedAccelMatchesPlainSolver: accelerated masked DID (1 and 3 shards, both forms)
// against plainAccelMasked from the same start, dense and sparse, with missing and held-out
// entries and penalties: the same iterates to round-off, so the further sweeps run on each
// column's and each row's own restricted Gram matrix and stop where the rule says.
func TestMaskedAccelMatchesPlainSolver(t *testing.T) {
	const iters, k = 20, 3
	for _, acc := range maskAccels {
		for _, in := range maskInputs() {
			x := ToDense(in.x)
			m, n := x.Rows, x.Cols
			b0, c0 := penaltyStart(m, n, k)
			for _, mo := range accelMaskOptions[1:] {
				o := mo.o
				o.Accel = acc
				observed := func(i, j int) bool {
					return !math.IsNaN(x.Data[j*m+i]) && !HeldOut(o.TestSeed, j, i, o.TestFraction)
				}
				b, c := slices.Clone(b0), slices.Clone(c0)
				plainAccelMasked(x, observed, b, c, k, iters, o)
				for _, v := range []struct {
					p    int
					form Form
				}{{1, FormGram}, {3, FormResidual}} {
					cfg := customConfig(DID, k, b0, c0, iters, penaltyCase{})
					cfg.Options = o
					cfg.Options.Form = v.form
					got := mustRun(t, in.x, v.p, cfg)
					name := fmt.Sprintf("%s/%s/%s/P=%d/%s", acc, in.name, mo.name, v.p, v.form)
					if db, dc := maxRelDiff(b, got.B), maxRelDiff(c, got.C); db > 1e-10 || dc > 1e-10 {
						t.Errorf("%s: differs from the plain accelerated solver: B by %.3g, C by %.3g", name, db, dc)
					}
					obj, test := directPenalized(in.x, b, c, k, o)
					if d := relDiff(got.Objective, obj); d > 1e-9 {
						t.Errorf("%s: objective %.15g, plain solver's %.15g", name, got.Objective, obj)
					}
					if d := relDiff(got.TestSSE, test); d > 1e-9 {
						t.Errorf("%s: held-out error %.15g, plain solver's %.15g", name, got.TestSSE, test)
					}
				}
			}
		}
	}
}

// TestMaskedAccelInterrupt interrupts shard 0 of an accelerated masked DID job in iteration 2
// at a look made by each of its loops (the column lanes with their further C sweeps, the
// first B sweep, the further ones, the end of the B update, and sweepB between them), chosen
// from an uninterrupted run: Next returns ErrInterrupted, every loop ends at its first look
// after the interrupt, and the step makes fewer looks than the uninterrupted one. Looking at
// the flag at every row and column changes no bit.
func TestMaskedAccelInterrupt(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	x := withNaN(synthDense(140, 600, 3, 51, 0.05), 0.1, 52)
	o := Options{Missing: true, TestFraction: 0.1, TestSeed: 3, AlphaBasis: 0.01, Accel: maskAccelSweeps}
	specs := maskedSpecs(t, x, 2, DID, 3, o, nil, nil, pool)

	// The uninterrupted run, with the site of every look of shard 0.
	ref := &checkLog{}
	ms := newMachines(t, specs, nil)
	ref.watch(ms[0])
	for _, m := range ms[1:] {
		m.intr.work = 1
	}
	var mu sync.Mutex
	sites := map[int64]string{}
	ms[0].intr.hook = func() {
		ref.look()
		site := checkSite()
		mu.Lock()
		sites[ref.count.Load()] = site
		mu.Unlock()
	}
	run := newStepper(t, ms, ref)
	for run.boundaries[2] == 0 {
		if err := run.round(); err != nil {
			t.Fatalf("uninterrupted run: %v", err)
		}
	}
	plain := mustRun(t, x, 2, Config{Algo: DID, K: 3, Seed: 3, Init: InitSpec{Method: InitRandom}, Options: o, Stop: StopRule{MaxIter: 2}})
	if !sameBits(plain.B, ms[0].Basis()) || !sameBits(plain.C[:len(ms[0].Coef())], ms[0].Coef()) {
		t.Errorf("looking at every row and column changed the bits")
	}
	// Iteration 2's looks by site (ascending); the middle one of each loop is the target.
	bySite := map[string][]int64{}
	for n := run.boundaries[1] + 1; n <= run.boundaries[2]; n++ {
		site := sites[n]
		if i := strings.LastIndex(site, "."); i >= 0 {
			site = site[i+1:]
		}
		bySite[site] = append(bySite[site], n)
	}
	for _, site := range []string{"colLane", "bLane", "sweepB", "bSweepLane", "bDoneLane"} {
		looks := bySite[site]
		if len(looks) == 0 {
			t.Errorf("%s never looked at the flag in iteration 2 (looks by site: %v)", site, siteCounts(bySite))
			continue
		}
		target := looks[len(looks)/2]
		refEnd := int64(0)
		for _, e := range run.ends {
			if e >= target {
				refEnd = e
				break
			}
		}
		log := &checkLog{target: target}
		ms := newMachines(t, specs, nil)
		log.watch(ms[0])
		for _, m := range ms[1:] {
			m.intr.work = 1
		}
		st := newStepper(t, ms, log)
		var err error
		for err == nil && st.boundaries[2] == 0 {
			err = st.round()
		}
		name := fmt.Sprintf("interrupted in %s at look %d", site, target)
		if !errors.Is(err, ErrInterrupted) {
			t.Errorf("%s: %v, want ErrInterrupted", name, err)
			continue
		}
		if after := log.after.Load(); after > 2*maxLanes+2 || log.count.Load() >= refEnd {
			t.Errorf("%s (%s): %d looks found the interrupt, %d in all; the step made %d", name, log.where, after, log.count.Load(), refEnd)
		}
		t.Logf("%s (%s): %d looks found it; %d looks in all, %d uninterrupted", name, log.where, log.after.Load(), log.count.Load(), refEnd)
	}
}

// siteCounts summarises looks by site.
func siteCounts(bySite map[string][]int64) map[string]int {
	c := map[string]int{}
	for s, l := range bySite {
		c[s] = len(l)
	}
	return c
}

// TestMaskedAccelRank10Paths: at rank 10 (the AVX-512 indexed kernels, more than a vector of
// components in the sweeps), accelerated masked DID gives the same bits on every kernel path
// and thread count.
func TestMaskedAccelRank10Paths(t *testing.T) {
	t.Parallel()
	for _, in := range maskInputs()[:2] {
		for _, mo := range accelMaskOptions {
			var ref *Result
			for _, path := range AvailableKernelPaths() {
				for _, threads := range []int{1, 2} {
					cfg := baseConfig(DID, 10, StopRule{MaxIter: 8})
					cfg.Options = mo.o
					cfg.Options.Accel = maskAccelSweeps
					cfg.Threads = threads
					cfg.Options.Kernel = path
					res := mustRun(t, in.x, 2, cfg)
					if ref == nil {
						ref = res
						continue
					}
					if d := sameResult(res, ref); d != "" {
						t.Errorf("%s/%s: path %s, %d threads: %s", in.name, mo.name, path, threads, d)
					}
				}
			}
		}
	}
}

// maskAccelSweeps is AccelAuto's inner sweeps without its extrapolation, which masked DID
// does not have.
var maskAccelSweeps = Accel{CSweeps: AccelAuto.CSweeps, BSweeps: AccelAuto.BSweeps, Eps: AccelAuto.Eps}
