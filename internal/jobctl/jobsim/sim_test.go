package jobsim

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/jobctl/internal/bugs"
	"github.com/didnmf/didnmf/kernels"
)

var (
	schedules = flag.Int("sim.schedules", 10000, "schedules TestSimulatedJobs runs (fewer under -short)")
	seed      = flag.Uint64("sim.seed", 0, "replay this one schedule (with its trace) instead")
)

// testProblem is DID on a 24 x 40 planted rank-3 matrix, 4 shards, checkpoints every 4,
// until the objective falls by less than half over 8 iterations (after 26 iterations; at most
// 30): a shard that resumes from a checkpoint needs the stop rule's history it saved to stop
// where the fault-free run does.
func testProblem(t testing.TB) *Problem {
	p := NewProblem(kernels.DID, 24, 40, 3, 4, 30, 4)
	p.spec.Stop.StallTol, p.spec.Stop.StallWindow = 0.5, 8
	t.Cleanup(p.Close)
	return p
}

// TestFaultFreeEqualsDriver: a simulated job without faults gives the bits of kernels.Run.
func TestFaultFreeEqualsDriver(t *testing.T) {
	p := testProblem(t)
	ref, err := p.Reference()
	if err != nil {
		t.Fatal(err)
	}
	for _, fanIn := range []int{2, 8} {
		out := Run(p, Options{Seed: 1, FanIn: fanIn})
		if len(out.Violations) > 0 || out.Result == nil {
			t.Fatalf("fan-in %d: %v (error %v)", fanIn, out.Violations, out.Err)
		}
		if !slices.Equal(out.B, ref.B) || !slices.Equal(out.C, ref.C) {
			t.Fatalf("fan-in %d: the simulated job's factors differ from kernels.Run's", fanIn)
		}
		if out.Result.Iterations != int64(ref.Iterations) || out.Stats.Recoveries != 0 {
			t.Fatalf("fan-in %d: %d iterations, %d recoveries; want %d, 0", fanIn, out.Result.Iterations, out.Stats.Recoveries, ref.Iterations)
		}
	}
}

// scheduleFor draws the faults of schedule seed: a mix of message faults, node deaths
// (coordinator and standby included), partitions, slow nodes, corrupt checkpoints, full
// disks and joins.
func scheduleFor(seed uint64) Options {
	r := rand.New(rand.NewPCG(seed, 99))
	pick := func(p float64) bool { return r.Float64() < p }
	var f Faults
	if pick(0.3) {
		f.Drop = 0.002 * r.Float64()
	}
	if pick(0.3) {
		f.Duplicate = 0.05 * r.Float64()
	}
	if pick(0.3) {
		f.Delay = 0.1 * r.Float64()
	}
	if pick(0.2) {
		f.Corrupt = 0.3 * r.Float64()
	}
	if pick(0.4) {
		f.Kills = 1 + r.IntN(2)
	}
	f.KillCoordinator = pick(0.2)
	f.KillStandby = pick(0.15)
	if pick(0.15) {
		f.Partitions = 1
	}
	if pick(0.2) {
		f.Slow = 1
	}
	if pick(0.1) {
		f.FullDisks = 1
	}
	if pick(0.2) {
		f.Joins = 1
	}
	o := Options{Seed: seed, Faults: f, FanIn: []int{2, 8}[r.IntN(2)], Nodes: 3 + r.IntN(3)}
	// Drawn last, so that the other faults of a seed stay what they were before these.
	if pick(0.15) {
		o.Faults.Forgers = 1 + r.IntN(2)
	}
	if pick(0.15) {
		o.Faults.Duplicates = 1 + r.IntN(2)
	}
	if pick(0.2) {
		o.Faults.Stall = 0.01 * r.Float64()
	}
	o.Faults.ClientDies = pick(0.1)
	if pick(0.2) {
		o.Faults.Restarts = 1 + r.IntN(2)
	}
	if pick(0.1) {
		o.Faults.FillDisks = 1
	}
	if pick(0.15) {
		o.TimeLimit = time.Duration(20+r.IntN(80)) * time.Millisecond
	}
	return o
}

// TestSimulatedForgers runs schedules in which forged members (the gossip key, no
// certificate for their claim) and duplicates of a live node's actor address, the
// coordinator's when there is one, claim to join while nodes die, join and partition: every
// node's cluster.Admission refuses them all (a node that lists one breaks an invariant), and
// every job still ends with the fault-free bits or a clear error.
func TestSimulatedForgers(t *testing.T) {
	p := testProblem(t)
	ref, err := p.Reference()
	if err != nil {
		t.Fatal(err)
	}
	n := 400
	if testing.Short() {
		n = 100
	}
	refused := 0
	for s := 1; s <= n; s++ {
		o := scheduleFor(uint64(s))
		o.Faults.Forgers, o.Faults.Duplicates = 2, 2
		out := Run(p, o)
		if !check(t, p, uint64(s), o, out, ref) {
			return
		}
		refused += out.Stats.Refused
	}
	if refused == 0 {
		t.Fatal("no forged claim was refused: the forgers never came")
	}
	t.Logf("%d schedules with 2 forgers and 2 duplicates each: %d claims refused", n, refused)
}

// TestSimulatedJobs runs thousands of seeded schedules of faults against the control, the
// shards' machines and the reduce tree: every job ends, with the fault-free bits or (under
// faults beyond one lost node) with an error that names why; no collective is combined twice,
// no iteration counted twice; every actor stops. A failing schedule prints its seed: replay
// it with -sim.seed.
func TestSimulatedJobs(t *testing.T) {
	p := testProblem(t)
	ref, err := p.Reference()
	if err != nil {
		t.Fatal(err)
	}
	if *seed != 0 {
		o := scheduleFor(*seed)
		o.Trace = true
		out := Run(p, o)
		for _, l := range out.Trace {
			t.Log(l)
		}
		check(t, p, *seed, o, out, ref)
		return
	}
	n := *schedules
	if testing.Short() {
		n = min(n, 1000)
	}
	start := time.Now()
	total, results, causes, ok := runSchedules(t, p, ref, n)
	if !ok {
		return
	}
	t.Logf("%d schedules in %v: %d results (bitwise the fault-free factors), %d clear errors, by cause: %v", n, time.Since(start).Round(time.Millisecond),
		results, n-results, causes)
	t.Logf("faults: %d kills, %d restarts (%d shards resumed from a copy a disk kept across one), %d joins, %d partitions, %d takeovers, %d recoveries; messages %d (dropped %d, duplicated %d, delayed %d, lost in cuts %d); checkpoint copies %d, corrupt %d; superseded assignments answered %d; orphans %d; late answers %d; coordinators lost before their state reached the standby %d; answers lost with the node keeping them %d; forged members' claims refused %d; superseded coordinators' acceptances and errors the client dropped %d; copies dropped at a superseded coordinator's commit %d",
		total.Killed, total.Restarted, total.ResumedFromKeptDisk, total.Joined, total.Partitioned, total.Takeovers, total.Recoveries, total.Messages, total.Dropped, total.Duplicated, total.Delayed, total.Lost, total.Checkpoints, total.Corrupted, total.Superseded, total.Orphans, total.LateAnswers, total.Unreplicated, total.AnswersLost, total.Refused, total.StaleWords, total.PrunedBySuperseded)
}

// runSchedules runs schedules 1..n on p and checks each against ref: it returns the summed
// stats, how many ended with a result, the errors' causes, and false at the first schedule
// that broke an invariant (reported).
func runSchedules(t *testing.T, p *Problem, ref *kernels.Result, n int) (total Stats, results int, causes map[string]int, ok bool) {
	t.Helper()
	causes = map[string]int{}
	limited := 0
	defer func() {
		if ok {
			t.Logf("%d of the results stopped at their time limit, before their stop rule", limited)
		}
	}()
	for s := 1; s <= n; s++ {
		o := scheduleFor(uint64(s))
		out := Run(p, o)
		if !check(t, p, uint64(s), o, out, ref) {
			return total, results, causes, false
		}
		switch {
		case out.Result != nil:
			results++
			if out.Result.Stop == string(kernels.StopTimeLimit) {
				limited++
			}
		case out.Err == nil:
			causes["the client died"]++
		default:
			causes[cause(out.Err.GetMessage())]++
		}
		add(&total, out.Stats)
	}
	return total, results, causes, true
}

// broken lists the invariants a schedule's outcome broke: p's job under o ended as out; ref
// is p's fault-free run.
func broken(p *Problem, o Options, out Outcome, ref *kernels.Result) []string {
	bad := slices.Clone(out.Violations)
	if r := out.Result; r != nil {
		if o.TimeLimit > 0 && r.Iterations < int64(ref.Iterations) {
			// The time limit stopped it: the fault-free run stopped at that iteration.
			var err error
			if ref, err = p.ReferenceAt(int(r.Iterations)); err != nil {
				return append(bad, err.Error())
			}
			if r.Stop != string(kernels.StopTimeLimit) {
				bad = append(bad, fmt.Sprintf("stopped for %q after %d iterations, before its stop rule, under a time limit", r.Stop, r.Iterations))
			}
		}
		if !slices.Equal(out.B, ref.B) || !slices.Equal(out.C, ref.C) {
			bad = append(bad, "the factors differ from the fault-free run's")
		}
		if r.Iterations != int64(ref.Iterations) {
			bad = append(bad, fmt.Sprintf("%d iterations, the fault-free run did %d", r.Iterations, ref.Iterations))
		}
	}
	return bad
}

// check reports a schedule's broken invariants and whether it passed.
func check(t *testing.T, p *Problem, s uint64, o Options, out Outcome, ref *kernels.Result) bool {
	t.Helper()
	if bad := broken(p, o, out, ref); len(bad) > 0 {
		t.Errorf("schedule %d (%+v) broke: %v\nreplay: go test ./internal/jobctl/jobsim -run TestSimulatedJobs -sim.seed %d -v", s, o.Faults, bad, s)
		return false
	}
	return true
}

func add(a *Stats, b Stats) {
	a.Messages += b.Messages
	a.Dropped += b.Dropped
	a.Duplicated += b.Duplicated
	a.Delayed += b.Delayed
	a.Lost += b.Lost
	a.Killed += b.Killed
	a.Joined += b.Joined
	a.Partitioned += b.Partitioned
	a.Takeovers += b.Takeovers
	a.Recoveries += b.Recoveries
	a.Corrupted += b.Corrupted
	a.Orphans += b.Orphans
	a.StaleWords += b.StaleWords
	a.LateAnswers += b.LateAnswers
	a.Unreplicated += b.Unreplicated
	a.AnswersLost += b.AnswersLost
	a.Refused += b.Refused
	a.Restarted += b.Restarted
	a.ResumedFromKeptDisk += b.ResumedFromKeptDisk
	a.Superseded += b.Superseded
	a.PrunedBySuperseded += b.PrunedBySuperseded
	a.Checkpoints += b.Checkpoints
}

// TestReplay: a schedule run twice gives the same run, event for event.
func TestReplay(t *testing.T) {
	p := testProblem(t)
	for _, s := range []uint64{3, 17, 12345} {
		o := scheduleFor(s)
		o.Trace = true
		a, b := Run(p, o), Run(p, o)
		a.Stats.Decisions, b.Stats.Decisions = nil, nil // wall-clock times
		if !slices.Equal(a.Trace, b.Trace) || a.End != b.End || !reflect.DeepEqual(a.Stats, b.Stats) {
			t.Fatalf("schedule %d: two runs differ", s)
		}
	}
}

// TestSimulatedAlgorithms runs schedules of faults on the other distributed algorithms, whose
// shards carry state across iterations (DBCD's residual, DADMM's duals, HPC-ANLS's norm) and
// use other collectives (reduce-scatter, all-gather): the fault-free bits, or a clear error.
func TestSimulatedAlgorithms(t *testing.T) {
	n := 600
	if testing.Short() {
		n = 100
	}
	for _, algo := range []kernels.Algorithm{kernels.DBCD, kernels.DADMM, kernels.HPCANLS} {
		t.Run(string(algo), func(t *testing.T) {
			p := NewProblem(algo, 24, 40, 3, 4, 16, 4)
			t.Cleanup(p.Close)
			ref, err := p.Reference()
			if err != nil {
				t.Fatal(err)
			}
			_, results, causes, ok := runSchedules(t, p, ref, n)
			if ok {
				t.Logf("%s: %d schedules, %d results bitwise the fault-free factors, %d clear errors (%v)", algo, n, results, n-results, causes)
			}
		})
	}
}

// cause names the reason an error gives, for the counts TestSimulatedJobs reports.
func cause(msg string) string {
	for _, c := range []struct{ has, name string }{
		{"without a majority", "no majority within the quorum wait"},
		{"no node took the job over", "coordinator and standby lost"},
		{"no node is left", "no node left"},
		{"recovered", "too many recoveries"},
		{"fit on no live node", "no room on the live nodes"},
	} {
		if strings.Contains(msg, c.has) {
			return c.name
		}
	}
	return msg
}

// TestClientThatNeverStreams: a client that announces its input and sends none of it (or a
// few chunks, then nothing) has its job fail with the shards' error (jobctl.StreamWatch),
// within a few waits for a chunk when nothing else breaks, every actor stopped; mixed with the
// other faults of the schedules, the job still ends, never with a result, with a clear error.
func TestClientThatNeverStreams(t *testing.T) {
	p := testProblem(t)
	n := 300
	if testing.Short() {
		n = 60
	}
	causes := map[string]int{}
	for s := uint64(1); s <= uint64(n); s++ {
		o := Options{Seed: s, Faults: Faults{NeverStreams: true}}
		if s%2 == 0 {
			o = scheduleFor(s)
			o.Faults.NeverStreams = true
			o.Faults.ClientDies = false // the client must live to hear the error
		}
		out := Run(p, o)
		if len(out.Violations) > 0 {
			t.Fatalf("seed %d (%+v): %v", s, o.Faults, out.Violations)
		}
		if out.Err == nil {
			t.Fatalf("seed %d (%+v): the job ended without an error", s, o.Faults)
		}
		cause := "other"
		if strings.Contains(out.Err.Message, "Timeouts.StreamIdle") {
			cause = "stream idle"
		}
		causes[cause]++
	}
	if causes["stream idle"] < n/2 {
		t.Errorf("causes %v: want the stream's error in at least every schedule without other faults", causes)
	}
	t.Logf("%d schedules: %v", n, causes)
}

// TestSimulatorFindsPlantedBugs proves the simulator bites: each deliberate bug of package
// bugs, planted in the production machines the simulation runs, must break an invariant
// within biteBudget schedules of TestSimulatedJobs's mix. It logs how many schedules each
// took.
func TestSimulatorFindsPlantedBugs(t *testing.T) {
	const biteBudget = 2000
	p := testProblem(t)
	ref, err := p.Reference()
	if err != nil {
		t.Fatal(err)
	}
	// Every fourth schedule runs an algorithm with other collectives (reduce-scatter,
	// all-gather) than DID's.
	others := []kernels.Algorithm{kernels.DBCD, kernels.DADMM, kernels.HPCANLS}
	problems, refs := []*Problem{p}, []*kernels.Result{ref}
	for _, a := range others {
		q := NewProblem(a, 24, 40, 3, 4, 16, 4)
		t.Cleanup(q.Close)
		r, err := q.Reference()
		if err != nil {
			t.Fatal(err)
		}
		problems, refs = append(problems, q), append(refs, r)
	}
	// A bug behind another fence of the production code is planted with that fence's bug:
	// the host answers a stale assignment before the shard's driver could take it.
	behind := map[bugs.Set]bugs.Set{bugs.StaleAssignment: bugs.HostStaleAssignment}
	width := 0
	for _, b := range bugs.All() {
		width = max(width, len(fmt.Sprintf("%q", b|behind[b])))
	}
	for _, b := range bugs.All() {
		found := 0
		var why []string
		for s := 1; s <= biteBudget && found == 0; s++ {
			o := scheduleFor(uint64(s))
			o.Bugs = b | behind[b]
			i := 0
			if s%4 == 0 {
				i = 1 + (s/4)%len(others)
			}
			if bad := broken(problems[i], o, Run(problems[i], o), refs[i]); len(bad) > 0 {
				found, why = s, bad
			}
		}
		if found == 0 {
			t.Errorf("bug %q: no schedule of %d broke an invariant", b, biteBudget)
			continue
		}
		t.Logf("bug %-*q found by schedule %4d: %s", width, b|behind[b], found, why[0])
	}
}

// TestEachFaultAlone runs schedules with one fault of each kind the simulator added for the
// shard driver, alone: each must happen (its count is not zero) and every job must end with
// the fault-free bits (at its time limit's iteration for a time-limited job), as these faults
// are tolerable.
func TestEachFaultAlone(t *testing.T) {
	p := testProblem(t)
	ref, err := p.Reference()
	if err != nil {
		t.Fatal(err)
	}
	n := 100
	if testing.Short() {
		n = 30
	}
	for _, tc := range []struct {
		name     string
		opt      Options
		happened func(Stats, *Outcome) int
	}{
		{"a node restarts", Options{Faults: Faults{Restarts: 1}}, func(s Stats, _ *Outcome) int { return s.Restarted }},
		{"a disk fills up", Options{Faults: Faults{FillDisks: 1, At: 10 * time.Millisecond}}, func(s Stats, _ *Outcome) int { return s.WritesRefused }},
		{"a time limit", Options{TimeLimit: 40 * time.Millisecond}, func(_ Stats, o *Outcome) int {
			if o.Result != nil && o.Result.Stop == string(kernels.StopTimeLimit) {
				return 1
			}
			return 0
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			happened := 0
			for s := uint64(1); s <= uint64(n); s++ {
				o := tc.opt
				o.Seed = s
				out := Run(p, o)
				if !check(t, p, s, o, out, ref) {
					return
				}
				if out.Result == nil {
					t.Fatalf("seed %d: the job failed under a tolerable fault: %v", s, out.Err)
				}
				happened += tc.happened(out.Stats, &out)
			}
			if happened == 0 {
				t.Fatalf("in %d schedules the fault never happened", n)
			}
			t.Logf("%d schedules: the fault counted %d times", n, happened)
		})
	}
}
