package kernels

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// shardSpecs returns the specs of a job over p column blocks of x, as Run builds them.
func shardSpecs(t *testing.T, x Block, p int, algo Algorithm, form Form, pool *Pool) []ShardSpec {
	t.Helper()
	blocks, err := Split(x, p)
	if err != nil {
		t.Fatal(err)
	}
	_, n := x.Dims()
	specs := make([]ShardSpec, p)
	off := 0
	for s, b := range blocks {
		specs[s] = ShardSpec{Algo: algo, Shard: s, Shards: p, ColOffset: off, TotalCols: n, X: b, K: 5,
			Seed: 3, Init: InitSpec{Method: InitRandom}, Options: Options{Form: form}, Pool: pool}
		_, bn := b.Dims()
		off += bn
	}
	return specs
}

// newMachines builds one machine per spec, each resuming from snaps[s] when snaps is not nil.
func newMachines(t *testing.T, specs []ShardSpec, snaps []Snapshot) []*Machine {
	t.Helper()
	ms := make([]*Machine, len(specs))
	for s, spec := range specs {
		if snaps != nil {
			spec.Resume = &snaps[s]
		}
		m, err := NewMachine(spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		ms[s] = m
	}
	return ms
}

// driveMachines runs the machines as Run does (nextAll, Collective) until they finish
// iteration last, calling atBoundary after each iteration. It returns each shard's steps
// (Data copied).
func driveMachines(t *testing.T, ms []*Machine, last int, atBoundary func(it int)) [][]Step {
	t.Helper()
	steps := make([]Step, len(ms))
	errs := make([]error, len(ms))
	log := make([][]Step, len(ms))
	for {
		if err := nextAll(ms, steps, errs); err != nil {
			t.Fatal(err)
		}
		for s, st := range steps {
			st.Data = slices.Clone(st.Data)
			log[s] = append(log[s], st)
		}
		if steps[0].Kind == StepIterationDone {
			if atBoundary != nil {
				atBoundary(steps[0].Iteration)
			}
			if steps[0].Iteration >= last {
				return log
			}
			continue
		}
		out, err := Collective(steps)
		if err != nil {
			t.Fatal(err)
		}
		for s, m := range ms {
			m.Deliver(out[s])
		}
	}
}

// snapshotAll snapshots every machine.
func snapshotAll(t *testing.T, ms []*Machine) []Snapshot {
	t.Helper()
	snaps := make([]Snapshot, len(ms))
	for s, m := range ms {
		var err error
		if snaps[s], err = m.Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	return snaps
}

// sameStep reports how two steps differ ("" when bitwise equal).
// sameStepsAfter fails unless every shard's steps got, from a run resumed at the end of
// iteration at, are the reference run's steps after that iteration's boundary (sameStep, and
// extra when not nil: "" when a pair agrees). what names the case in the failure.
func sameStepsAfter(t *testing.T, what string, ref, got [][]Step, at int, extra func(got, want Step) string) {
	t.Helper()
	for s := range got {
		i := slices.IndexFunc(ref[s], func(st Step) bool { return st.Kind == StepIterationDone && st.Iteration == at })
		want := ref[s][i+1:]
		if len(got[s]) != len(want) {
			t.Fatalf("%s: resumed at %d: shard %d made %d steps, want %d", what, at, s, len(got[s]), len(want))
		}
		for j := range want {
			d := sameStep(got[s][j], want[j])
			if d == "" && extra != nil {
				d = extra(got[s][j], want[j])
			}
			if d != "" {
				t.Fatalf("%s: resumed at %d: shard %d step %d: %s", what, at, s, j, d)
			}
		}
	}
}

func sameStep(a, b Step) string {
	switch {
	case a.Kind != b.Kind || a.Op != b.Op || a.Label != b.Label || a.Init != b.Init || a.Iteration != b.Iteration:
		return fmt.Sprintf("%v/%s/%s init=%v it=%d vs %v/%s/%s init=%v it=%d",
			a.Kind, a.Op, a.Label, a.Init, a.Iteration, b.Kind, b.Op, b.Label, b.Init, b.Iteration)
	case !slices.Equal(a.Segments, b.Segments) || !sameBits(a.Data, b.Data):
		return fmt.Sprintf("%s it=%d: data differs", a.Label, a.Iteration)
	case math.Float64bits(a.Objective) != math.Float64bits(b.Objective) || math.Float64bits(a.Initial) != math.Float64bits(b.Initial):
		return fmt.Sprintf("it=%d: objective %v initial %v vs %v %v", a.Iteration, a.Objective, a.Initial, b.Objective, b.Initial)
	}
	return ""
}

// sameSnapshot reports how two snapshots differ ("" when bitwise equal).
func sameSnapshot(a, b Snapshot) string {
	switch {
	case a.Iteration != b.Iteration || math.Float64bits(a.Initial) != math.Float64bits(b.Initial) ||
		math.Float64bits(a.Objective) != math.Float64bits(b.Objective):
		return fmt.Sprintf("iteration %d %v %v vs %d %v %v", a.Iteration, a.Initial, a.Objective, b.Iteration, b.Initial, b.Objective)
	case !sameBits(a.B, b.B):
		return "B differs"
	case !sameBits(a.C, b.C):
		return "C differs"
	case len(a.State) != len(b.State):
		return fmt.Sprintf("%d state slices vs %d", len(a.State), len(b.State))
	}
	for i := range a.State {
		if !sameBits(a.State[i], b.State[i]) {
			return fmt.Sprintf("state %d differs", i)
		}
	}
	return ""
}

// TestResumeBitwise: for every algorithm, shard count, storage and DID form, machines resumed
// from snapshots at iteration t produce bitwise the steps, factors and state of the
// uninterrupted job up to iteration T.
func TestResumeBitwise(t *testing.T) {
	const last = 8
	snapAt := []int{1, 4}
	dense := synthDense(14, 800, 5, 41, 0.05)
	inputs := []struct {
		name string
		x    Block
	}{{"dense", dense}, {"sparse", ToCSC(sparsify(dense, 0.5, 1))}}
	pool := NewPool(2)
	defer pool.Close()
	for _, a := range Algorithms() {
		shards, forms := []int{1}, []Form{FormAuto}
		if a.Distributed {
			shards = []int{1, 3}
		}
		if a.Name == DID {
			forms = []Form{FormResidual, FormGram}
		}
		for _, in := range inputs {
			for _, form := range forms {
				for _, p := range shards {
					name := fmt.Sprintf("%s/%s/%s/P=%d", a.Name, in.name, form, p)
					t.Run(name, func(t *testing.T) {
						specs := shardSpecs(t, in.x, p, a.Name, form, pool)
						ref := newMachines(t, specs, nil)
						snaps := map[int][]Snapshot{}
						refSteps := driveMachines(t, ref, last, func(it int) {
							if it == last || slices.Contains(snapAt, it) {
								snaps[it] = snapshotAll(t, ref)
							}
						})
						for _, at := range snapAt {
							var before []Snapshot
							for _, sn := range snaps[at] {
								before = append(before, *sn.clone())
							}
							resumed := newMachines(t, specs, snaps[at])
							got := driveMachines(t, resumed, last, nil)
							for s := range before {
								if d := sameSnapshot(snaps[at][s], before[s]); d != "" {
									t.Fatalf("resuming changed the snapshot of shard %d: %s", s, d)
								}
							}
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

// TestSnapshotOnlyAtBoundary: Snapshot errors before the first boundary, while a collective
// is pending and after Next moved past a boundary.
func TestSnapshotOnlyAtBoundary(t *testing.T) {
	pool := NewPool(1)
	defer pool.Close()
	spec := shardSpecs(t, synthDense(8, 60, 5, 2, 0), 1, DID, FormGram, pool)[0]
	m := newMachines(t, []ShardSpec{spec}, nil)[0]
	if _, err := m.Snapshot(); err == nil {
		t.Fatal("Snapshot before Next accepted")
	}
	var boundaries int
	for boundaries < 2 {
		st, err := m.Next()
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.Snapshot()
		if st.Kind == StepIterationDone {
			boundaries++
			if err != nil {
				t.Fatalf("Snapshot at the boundary of iteration %d: %v", st.Iteration, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "boundary") {
			t.Fatalf("Snapshot at collective %s accepted (err %v)", st.Label, err)
		}
		out, err := Collective([]Step{st})
		if err != nil {
			t.Fatal(err)
		}
		m.Deliver(out[0])
	}
}

// TestResumeValidation: NewMachine refuses snapshots that do not fit the spec, naming what is
// wrong.
func TestResumeValidation(t *testing.T) {
	pool := NewPool(1)
	defer pool.Close()
	x := synthDense(8, 60, 5, 2, 0.1)
	snapOf := func(algo Algorithm, form Form) (ShardSpec, Snapshot) {
		spec := shardSpecs(t, x, 1, algo, form, pool)[0]
		ms := newMachines(t, []ShardSpec{spec}, nil)
		driveMachines(t, ms, 2, nil)
		return spec, snapshotAll(t, ms)[0]
	}
	dadmm, dadmmSnap := snapOf(DADMM, FormAuto)
	did, didSnap := snapOf(DID, FormGram)
	hals, halsSnap := snapOf(HALS, FormAuto)
	didResidual := did
	didResidual.Form = FormResidual
	cases := []struct {
		name string
		spec ShardSpec
		snap Snapshot
		mod  func(s *Snapshot)
		want string
	}{
		{"iteration 0", dadmm, dadmmSnap, func(s *Snapshot) { s.Iteration = 0 }, "iteration is 0"},
		{"short B", dadmm, dadmmSnap, func(s *Snapshot) { s.B = s.B[1:] }, "basis B has 39 values, want M x K = 8 x 5 = 40"},
		{"long C", dadmm, dadmmSnap, func(s *Snapshot) { s.C = append(s.C, 1) }, "coefficients C of shard 0 have 301 values"},
		{"missing state", dadmm, dadmmSnap, func(s *Snapshot) { s.State = s.State[:1] }, "state has 1 slices, want 2 for dadmm (U_i (M x n_i), Y_i (M x n_i))"},
		{"short Y", dadmm, dadmmSnap, func(s *Snapshot) { s.State[1] = s.State[1][:5] }, "state 1, Y_i (M x n_i) of dadmm, has 5 values, want 480"},
		{"gram cache", did, didSnap, func(s *Snapshot) { s.State[1] = nil }, "V = C_i C_i^T (K x K) of did, has 0 values, want 25"},
		{"residual form", didResidual, didSnap, nil, "want 0 for did (no extra state)"},
		{"stateless", hals, halsSnap, func(s *Snapshot) { s.State = [][]float64{{1}} }, "want 0 for hals (no extra state)"},
	}
	for _, c := range cases {
		spec, snap := c.spec, c.snap
		snap.State = slices.Clone(snap.State)
		if c.mod != nil {
			c.mod(&snap)
		}
		spec.Resume = &snap
		_, err := NewMachine(spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	// The unmodified snapshots are accepted.
	for _, c := range []struct {
		spec ShardSpec
		snap Snapshot
	}{{dadmm, dadmmSnap}, {did, didSnap}, {hals, halsSnap}} {
		c.spec.Resume = &c.snap
		m, err := NewMachine(c.spec)
		if err != nil {
			t.Errorf("%s: valid snapshot refused: %v", c.spec.Algo, err)
			continue
		}
		m.Close()
	}
}

// TestStopperHistoryRestore: a Stopper restored from another's History at any point decides
// every later iteration as the original does, also when given a longer history.
func TestStopperHistoryRestore(t *testing.T) {
	rule := StopRule{MaxIter: 100, StallTol: 1e-3, StallWindow: 3}
	var objs []float64
	for i := 0; i < 60; i++ { // falls fast, then slowly, then stalls
		objs = append(objs, 1+100*math.Pow(0.5, float64(i))+math.Max(0, 0.5-0.01*float64(i)))
	}
	type decision struct {
		stop bool
		why  StopReason
	}
	ref := NewStopper(rule)
	var want []decision
	var hist [][]float64 // hist[i]: History after observing objs[:i]
	for i, o := range objs {
		hist = append(hist, ref.History())
		stop, why := ref.Observe(i+1, o, 200, 0)
		want = append(want, decision{stop, why})
	}
	if !slices.ContainsFunc(want, func(d decision) bool { return d.why == StopStalled }) {
		t.Fatal("the sequence never stalls: the test checks nothing")
	}
	for cut := range objs {
		for _, prior := range [][]float64{hist[cut], objs[:cut]} {
			s := NewStopper(rule)
			s.Restore(prior)
			for i := cut; i < len(objs); i++ {
				stop, why := s.Observe(i+1, objs[i], 200, 0)
				if (decision{stop, why}) != want[i] {
					t.Fatalf("restored at %d from %d objectives: iteration %d decided %v %s, want %v %s",
						cut, len(prior), i+1, stop, why, want[i].stop, want[i].why)
				}
			}
		}
	}
	h := ref.History()
	h[0] = -1
	if ref.History()[0] == -1 {
		t.Error("History returned the Stopper's own slice")
	}
}
