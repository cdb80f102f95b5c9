package kernels

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseAccel(t *testing.T) {
	cases := []struct {
		in      string
		want    Accel
		wantErr string
	}{
		{"off", Accel{}, ""},
		{"", Accel{}, "want off, auto, x"},
		{"1,1", Accel{}, ""},
		{"auto", AccelAuto, ""},
		{"3,5", Accel{3, 5, AccelAuto.Eps, false}, ""},
		{"2,1,0.3", Accel{2, 1, 0.3, false}, ""},
		{" 4 , 6 , 0.05", Accel{4, 6, 0.05, false}, ""},
		{"x", Accel{Extrapolate: true}, ""},
		{"1,1,x", Accel{Extrapolate: true}, ""},
		{"3,5,x", Accel{3, 5, AccelAuto.Eps, true}, ""},
		{"3,5,0.2,x", Accel{3, 5, 0.2, true}, ""},
		{"3", Accel{}, "want off, auto, x, C,B or C,B,eps"},
		{"3,5,0.1,9", Accel{}, "want off, auto"},
		{"x,3,5", Accel{}, `C sweeps "x" is not an integer`},
		{"x,5", Accel{}, `C sweeps "x" is not an integer`},
		{"3,y", Accel{}, `B sweeps "y" is not an integer`},
		{"3,5,z", Accel{}, `eps "z" is not a number`},
		{"3,5,1", Accel{}, "eps must be a number in (0, 1), got 1"},
		{"1,1,5", Accel{}, "eps must be a number in (0, 1), got 5"}, // no extra sweep reads it, but it is no setting
		{"1,1,NaN", Accel{}, "eps must be a number in (0, 1), got NaN"},
		{"3,5,0", Accel{}, "eps must be a number in (0, 1)"},
		{"3,5,NaN", Accel{}, "eps must be a number in (0, 1), got NaN"},
		{"-1,5", Accel{}, "sweeps must be in 1..100"},
		{"3,101", Accel{}, "sweeps must be in 1..100"},
		{"1000000000000,2", Accel{}, "sweeps must be in 1..100, got C 1000000000000"},
		// One grammar with Python's accel_flag: no other names, no zero counts, ASCII digits.
		{"0,5", Accel{}, "sweeps must be in 1..100, got C 0 and B 5"},
		{"3,0,0.1,x", Accel{}, "sweeps must be in 1..100, got C 3 and B 0"},
		{"on", Accel{}, "want off, auto, x"},
		{"none", Accel{}, "want off, auto, x"},
		{"\uff13,5", Accel{}, "C sweeps \"\uff13\" is not an integer"},
		{"1_0,5", Accel{}, `C sweeps "1_0" is not an integer`},
		{"3,5,0_1", Accel{}, `eps "0_1" is not a number`},
		{"3,5,0x1p-3", Accel{}, `eps "0x1p-3" is not a number`},
		{"+3,5,+.5e-1", Accel{3, 5, 0.05, false}, ""},
	}
	for _, c := range cases {
		got, err := ParseAccel(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseAccel(%q) = %v, %v; want an error containing %q", c.in, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseAccel(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
		if back, err := ParseAccel(got.String()); err != nil || back != got {
			t.Errorf("ParseAccel(%q).String() = %q does not read back: %+v, %v", c.in, got.String(), back, err)
		}
	}
}

func TestValidateAccel(t *testing.T) {
	for _, a := range []Algorithm{DID, BCD, HALS, DBCD, MU, ANLS, ADMM, DADMM, HPCANLS} {
		err := Options{Accel: Accel{CSweeps: 3, BSweeps: 5, Eps: 0.1}}.ValidateAccel(a)
		accel := a == DID || a == BCD || a == HALS
		if accel != (err == nil) {
			t.Errorf("%s: ValidateAccel(auto) = %v", a, err)
		}
		if err != nil && !strings.Contains(err.Error(), "the algorithms that have are did, bcd, hals") {
			t.Errorf("%s: %v does not name the algorithms that take it", a, err)
		}
		if err := (Options{}).ValidateAccel(a); err != nil {
			t.Errorf("%s: ValidateAccel(off) = %v", a, err)
		}
	}
	if err := (Options{Accel: Accel{CSweeps: 3, BSweeps: 2, Eps: 2}}).ValidateAccel(DID); err == nil {
		t.Error("eps 2 accepted")
	}
	for _, c := range []struct {
		algo Algorithm
		opt  Options
		want string
	}{
		{BCD, Options{Accel: Accel{Extrapolate: true}}, "algorithm bcd does not extrapolate (--accel x): only did does"},
		{HALS, Options{Accel: AccelAuto}, "algorithm hals does not extrapolate (--accel auto)"},
		{DID, Options{Accel: AccelAuto, Missing: true}, "did cannot extrapolate (--accel auto) with missing values yet"},
		{DID, Options{Accel: Accel{Extrapolate: true}, TestFraction: 0.1}, "did cannot extrapolate (--accel x) with held-out entries"},
	} {
		if err := c.opt.ValidateAccel(c.algo); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: %v, want %q", c.algo, c.opt, err, c.want)
		}
	}
	if err := (Options{Accel: Accel{CSweeps: 3, BSweeps: 5, Eps: 0.1}, Missing: true}).ValidateAccel(DID); err != nil {
		t.Errorf("inner sweeps with missing values: %v", err)
	}
}

// accelCases are the blocks and settings the accelerated DID tests run: dense (fused and
// column-lane shapes), sparse, penalized, both forms.
type accelCase struct {
	name string
	x    Block
	k    int
	opt  Options
}

func accelCases() []accelCase {
	small := synthDense(5, 3000, 3, 11, 0)   // the paper's shape: the fused kernel
	mid := synthDense(40, 1200, 6, 12, 0.01) // column-lane kernels
	odd := synthDense(13, 900, 5, 13, 0.02)  // the batched path
	sparse := ToCSC(sparsify(synthDense(30, 1500, 4, 14, 0.05), 0.7, 3))
	auto := Options{Accel: AccelAuto}
	return []accelCase{
		{"dense m5 k3", small, 3, auto},
		{"dense m5 k3 eps0.5", small, 3, Options{Accel: Accel{4, 8, 0.5, false}}},
		{"dense m40 k6", mid, 6, auto},
		{"dense m13 k5", odd, 5, Options{Accel: Accel{5, 2, 0.05, false}}},
		{"sparse m30 k4", sparse, 4, auto},
		{"dense m13 k5 residual", odd, 5, Options{Accel: AccelAuto, Form: FormResidual}},
		{"penalized m40 k6", mid, 6, Options{Accel: AccelAuto, AlphaCoef: 0.001, AlphaBasis: 0.002, L1Ratio: 0.4}},
		{"C only", mid, 6, Options{Accel: Accel{3, 1, 0.1, false}}},
		{"B only", mid, 6, Options{Accel: Accel{1, 5, 0.1, false}}},
		{"extrapolation m5 k3", small, 3, Options{Accel: Accel{Extrapolate: true}}},
		{"extrapolation sparse", sparse, 4, Options{Accel: Accel{Extrapolate: true}}},
		{"extrapolation residual", odd, 5, Options{Accel: AccelAuto, Form: FormResidual}},
		{"extrapolation penalized", mid, 6, Options{Accel: Accel{2, 3, 0.2, true}, AlphaCoef: 0.001, AlphaBasis: 0.002, L1Ratio: 0.4}},
	}
}

// TestAccelSameBitsEverywhere: accelerated DID's iterates on a shard count do not depend on
// the thread count or the kernel path (bitwise), and they agree across shard counts to
// round-off, as plain DID's do (the allreduce adds the shards' partials in another grouping).
func TestAccelSameBitsEverywhere(t *testing.T) {
	for _, c := range accelCases() {
		t.Run(c.name, func(t *testing.T) {
			cfg := baseConfig(DID, c.k, StopRule{MaxIter: 25})
			cfg.Options = c.opt
			cfg.Options.Kernel = KernelGeneric
			cfg.Threads = 1
			one := mustRun(t, c.x, 1, cfg)
			for _, shards := range []int{1, 3, 8} {
				cfg.Options.Kernel = KernelGeneric
				cfg.Threads = 1
				ref := mustRun(t, c.x, shards, cfg)
				if d := max(maxRelDiff(one.B, ref.B), maxRelDiff(one.C, ref.C)); d > 1e-11 {
					t.Errorf("%d shards: iterates differ from 1 shard's by %.3g relative", shards, d)
				}
				for _, path := range AvailableKernelPaths() {
					cfg.Options.Kernel = path
					cfg.Threads = 2
					got := mustRun(t, c.x, shards, cfg)
					if !sameBits(got.B, ref.B) || !sameBits(got.C, ref.C) ||
						math.Float64bits(got.Objective) != math.Float64bits(ref.Objective) {
						t.Errorf("%d shards, %s, 2 threads: iterates differ from the generic path on 1 thread (B %.3g, C %.3g relative)",
							shards, path, maxRelDiff(ref.B, got.B), maxRelDiff(ref.C, got.C))
					}
				}
			}
		})
	}
}

// TestAccelObjectiveExactAndMonotone: the tracked objective is ||X - BC||^2 (plus the
// penalties) of the factors, and it never increases.
func TestAccelObjectiveExactAndMonotone(t *testing.T) {
	for _, c := range accelCases() {
		t.Run(c.name, func(t *testing.T) {
			prev := math.Inf(1)
			for _, iters := range []int{1, 2, 5, 12, 30} {
				cfg := baseConfig(DID, c.k, StopRule{MaxIter: iters})
				cfg.Options = c.opt
				res := mustRun(t, c.x, 3, cfg)
				want := ResidualSq(c.x, res.B, res.C, c.k, nil)
				if c.opt.AlphaCoef != 0 || c.opt.AlphaBasis != 0 {
					m, n := c.x.Dims()
					pen := newPenalty(c.opt, m, n)
					want += pen.coefPenalty(res.C, nil) + pen.basisPenalty(res.B, nil)
				}
				if d := math.Abs(res.Objective-want) / want; d > 1e-9 {
					t.Errorf("%d iterations: tracked objective %.17g, recomputed %.17g (%.3g relative)", iters, res.Objective, want, d)
				}
				if !c.opt.Accel.Extrapolate && res.Objective > prev*(1+1e-12) {
					t.Errorf("%d iterations: objective %.17g rose from %.17g", iters, res.Objective, prev)
				}
				prev = res.Objective
			}
		})
	}
}

// TestAccelFewerIterations: accelerated DID reaches plain DID's 300-iteration objective in
// fewer iterations (the paper's shape, exact data, and a noisy one).
func TestAccelFewerIterations(t *testing.T) {
	for _, c := range []struct {
		name string
		x    Block
		k    int
	}{
		{"m5 k3 exact", synthDense(5, 4000, 3, 21, 0), 3},
		{"m40 k6 noisy", synthDense(40, 1500, 6, 22, 0.05), 6},
	} {
		plain := baseConfig(DID, c.k, StopRule{MaxIter: 300})
		ref := mustRun(t, c.x, 2, plain)
		acc := plain
		acc.Options.Accel = AccelAuto
		acc.Stop = StopRule{MaxIter: 300}
		res := mustRun(t, c.x, 2, acc)
		at := -1
		for _, h := range res.History {
			if h.Ratio*ref.Initial <= ref.Objective {
				at = h.Iteration
				break
			}
		}
		t.Logf("%s: plain's 300-iteration objective %.6g reached by accelerated DID at iteration %d", c.name, ref.Objective, at)
		if at < 0 || at >= 300 {
			t.Errorf("%s: accelerated DID did not reach plain's 300-iteration objective %.6g in 300 iterations (its own: %.6g)",
				c.name, ref.Objective, res.Objective)
		}
	}
}

// TestAccelResumeBitwise: a run resumed from a snapshot of accelerated DID (inner sweeps,
// extrapolation, both) takes bitwise the original's steps.
func TestAccelResumeBitwise(t *testing.T) {
	const last = 12
	snapAt := []int{1, 2, 5, 9}
	dense := synthDense(14, 800, 5, 41, 0.05)
	pool := NewPool(2)
	defer pool.Close()
	for _, a := range []Accel{AccelAuto, {Extrapolate: true}, {CSweeps: 3, BSweeps: 4, Eps: 0.2}} {
		for _, in := range []struct {
			name string
			x    Block
		}{{"dense", dense}, {"sparse", ToCSC(sparsify(dense, 0.5, 1))}} {
			for _, form := range []Form{FormGram, FormResidual} {
				for _, p := range []int{1, 3} {
					t.Run(fmt.Sprintf("%s/%s/%s/P=%d", a, in.name, form, p), func(t *testing.T) {
						specs := shardSpecs(t, in.x, p, DID, form, pool)
						for s := range specs {
							specs[s].Accel = a
						}
						ref := newMachines(t, specs, nil)
						snaps := map[int][]Snapshot{}
						refSteps := driveMachines(t, ref, last, func(it int) {
							if it == last || slices.Contains(snapAt, it) {
								snaps[it] = snapshotAll(t, ref)
							}
						})
						for _, at := range snapAt {
							resumed := newMachines(t, specs, snaps[at])
							got := driveMachines(t, resumed, last, nil)
							sameStepsAfter(t, "snapshot", refSteps, got, at, nil)
							for s, snap := range snapshotAll(t, resumed) {
								if d := sameSnapshot(snap, snaps[last][s]); d != "" {
									t.Fatalf("resumed at %d: shard %d at iteration %d: %s", at, s, last, d)
								}
							}
						}
					})
				}
			}
		}
	}
}

// TestStallFollowsLowest: the stall rule follows the lowest objective so far, so one rise (an
// extrapolation's restart) inside the window does not stop a run that is still improving, and
// a monotone sequence stops where it always did.
func TestStallFollowsLowest(t *testing.T) {
	rule := StopRule{MaxIter: 1000, StallTol: 1e-3, StallWindow: 3}
	cases := []struct {
		name string
		objs []float64
		stop int // the iteration it stops after (0: none)
	}{
		{"monotone, stalls", []float64{100, 90, 89.99, 89.98, 89.97, 89.96}, 5},
		{"monotone, improving", []float64{100, 90, 80, 70, 60, 50}, 0},
		{"a rise while improving", []float64{100, 90, 80, 95, 60, 50}, 0},
		{"a rise above the window's start", []float64{100, 90, 80, 120, 70, 60}, 0},
		{"a rise, then flat", []float64{100, 50, 60, 50, 50, 50, 50}, 5},
	}
	for _, c := range cases {
		s := NewStopper(rule)
		stopped := 0
		for i, o := range c.objs {
			if stop, reason := s.Observe(i+1, o, 1000, 0); stop {
				if reason != StopStalled {
					t.Fatalf("%s: stopped for %s", c.name, reason)
				}
				stopped = i + 1
				break
			}
		}
		if stopped != c.stop {
			t.Errorf("%s: stopped after %d, want %d", c.name, stopped, c.stop)
		}
	}
}

// TestExtrapolationRestartsAboveLowest: the extrapolation restarts whenever an objective is
// above the lowest so far, not only when it rose from the one before: after an overshoot, the
// iterations that come down again but stay above the best are restarts too (Ang & Gillis's
// comparison with the previous objective alone counted them as successes and grew beta from a
// bad point).
func TestExtrapolationRestartsAboveLowest(t *testing.T) {
	x := newExtrapolation(AccelAuto, 2, 1, 1)
	x.begin([]float64{1, 1}, []float64{1})
	b := extrapBeta0
	for i, c := range []struct {
		obj     float64
		restart bool
	}{
		{10, false}, {8, false}, {12, true}, {9, true}, {8, false}, {math.NaN(), true}, {7.5, false},
	} {
		x.finish(c.obj)
		if x.restart != c.restart {
			t.Fatalf("objective %d (%g): restart %v, want %v", i, c.obj, x.restart, c.restart)
		}
		if c.restart && x.beta != b/extrapShrink || !c.restart && !(x.beta > b) {
			t.Fatalf("objective %d (%g): beta %g after %g, restart %v", i, c.obj, x.beta, b, c.restart)
		}
		b = x.beta
	}
	if x.best != 7.5 {
		t.Fatalf("lowest objective %g, want 7.5", x.best)
	}
}

// TestAccelForms reads testdata/accel_forms.tsv, the table Python's accel_flag is tested
// against too (python/tests/test_accel.py): each form reads as its setting, or is refused.
func TestAccelForms(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "accel_forms.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		form, want, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("accel_forms.tsv:%d: no tab in %q", i+1, line)
		}
		n++
		got, err := ParseAccel(form)
		switch {
		case want == "-" && err == nil:
			t.Errorf("ParseAccel(%q) = %v; want it refused", form, got)
		case want != "-" && (err != nil || got.String() != want):
			t.Errorf("ParseAccel(%q) = %v, %v; want %s", form, got, err, want)
		}
	}
	if n < 30 {
		t.Errorf("accel_forms.tsv: %d forms; want at least 30", n)
	}
}
