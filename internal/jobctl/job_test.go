package jobctl

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/messages"
)

// harness drives one Job on a clock the test moves, and keeps what it asked for.
type harness struct {
	t      *testing.T
	j      *Job
	now    time.Time
	sends  []Send
	timers []Timer
	rd     Ready
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newHarness begins a job of 4 shards on the nodes a, b and c (a cluster; the coordinator on
// a), checkpointing every 5 iterations, and acknowledges every placement: the job runs.
func newHarness(t *testing.T, cfg Config) *harness {
	h := beginHarness(t, cfg)
	h.placeAll()
	return h
}

// beginHarness is newHarness before any placement is acknowledged: the job is set up.
func beginHarness(t *testing.T, cfg Config) *harness {
	cfg.Self = &messages.Pid{Address: "a", Id: "host/j-coord"}
	cfg.Cluster = true
	if cfg.FanIn == 0 {
		cfg.FanIn = 8
	}
	sub := &messages.SubmitJob{JobId: "j", Client: &messages.Pid{Address: "client", Id: "c"},
		Spec: &messages.JobSpec{Algorithm: messages.Algorithm_ALGORITHM_DID, Rank: 2, Shards: 4, CheckpointEvery: 5}}
	j, err := New(cfg, sub)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, j: j, now: t0}
	nodes := []Node{{"a", "a"}, {"b", "b"}, {"c", "c"}}
	pongs := []*messages.Pong{{Address: "a", Capacity: 1}, {Address: "b", Capacity: 1}, {Address: "c", Capacity: 1}}
	h.step(Begin{Samples: 40, Features: 10, Reserve: make([]int64, 4), Nodes: nodes, Pongs: pongs, Workers: []string{"a", "b", "c"}})
	return h
}

// step feeds an event and keeps the Ready.
func (h *harness) step(ev any) Ready {
	if err := h.j.Step(h.now, ev); err != nil {
		h.t.Fatal(err)
	}
	h.rd = h.j.Ready()
	h.sends = append(h.sends, h.rd.Sends...)
	h.timers = append(h.timers, h.rd.Timers...)
	return h.rd
}

// placeAll acknowledges every assignment of the current epoch.
func (h *harness) placeAll() {
	for _, p := range append(append([]*messages.Pid{}, h.j.shards...), h.j.reducers...) {
		h.step(&messages.Placed{JobId: "j", Epoch: h.j.epoch, Pid: p, Features: 10, Samples: 10, SqNormX: 1})
	}
	if !h.j.running {
		h.t.Fatalf("the job does not run after every placement was acknowledged")
	}
}

// sent counts the messages of a type sent since the harness started.
func sent[T any](h *harness) int {
	n := 0
	for _, s := range h.sends {
		if _, ok := s.Msg.(T); ok {
			n++
		}
	}
	return n
}

func (h *harness) iteration(it int64, epoch uint64) {
	h.now = h.now.Add(10 * time.Millisecond)
	h.step(&messages.IterationDone{JobId: "j", Epoch: epoch, Iteration: it, Objective: 1 / float64(it+1), Initial: 1, Seconds: float64(it) / 100})
}

func TestStaleAndForeignMessagesChangeNothing(t *testing.T) {
	h := newHarness(t, Config{})
	h.iteration(1, 1)
	for _, tc := range []struct {
		name string
		msg  any
	}{
		{"another job's iteration", &messages.IterationDone{JobId: "x", Epoch: 1, Iteration: 2}},
		{"an old epoch's iteration", &messages.IterationDone{JobId: "j", Epoch: 0, Iteration: 2}},
		{"a repeated iteration", &messages.IterationDone{JobId: "j", Epoch: 1, Iteration: 1}},
		{"an old epoch's shard done", &messages.ShardDone{JobId: "j", Epoch: 0, Shard: 0, Error: "boom"}},
		{"a checkpoint of a shard out of range", &messages.CheckpointDone{JobId: "j", Epoch: 1, Shard: 9, Iteration: 5}},
		{"another job's error", &messages.JobError{JobId: "x", Message: "boom"}},
	} {
		h.step(tc.msg)
		if h.j.over || h.j.ft.lastIter != 1 || len(h.j.history) != 2 || len(h.j.ft.reported) != 0 {
			t.Fatalf("%s changed the job: over %v, iteration %d, %d history points", tc.name, h.j.over, h.j.ft.lastIter, len(h.j.history))
		}
	}
}

// TestASupersededPlacementEndsThisControl: a host's Placed.Superseded (a later epoch than the
// job's here: another coordinator took the job over) ends this coordinator's control without
// a stop to any actor, whether it answers a shard or a reducer assignment: the host answers
// both (testdata/host/fencing.txt).
func TestASupersededPlacementEndsThisControl(t *testing.T) {
	for _, actor := range []string{"shard 0", "reducer [0, 4)"} {
		h := newHarness(t, Config{})
		stops := sent[*messages.StopJob](h)
		if rd := h.step(&messages.Placed{JobId: "j", Actor: actor, Epoch: 1, Superseded: 2}); !rd.Over || !h.j.over {
			t.Fatalf("%s superseded by epoch 2: the job's control goes on", actor)
		}
		if got := sent[*messages.StopJob](h); got != stops {
			t.Fatalf("%s superseded: %d StopJob sent, want none (the successor runs the actors)", actor, got-stops)
		}
	}
}

func TestCheckpointCommitsWhenEveryShardReported(t *testing.T) {
	h := newHarness(t, Config{})
	for s := int64(0); s < 4; s++ {
		if got := sent[*messages.CheckpointCommitted](h); got != 0 {
			t.Fatalf("committed after %d of 4 shards", s)
		}
		h.step(&messages.CheckpointDone{JobId: "j", Epoch: 1, Shard: s, Iteration: 5})
		h.step(&messages.CheckpointDone{JobId: "j", Epoch: 1, Shard: s, Iteration: 5}) // a duplicate counts once
	}
	if h.j.lastCommitted() != 5 || sent[*messages.CheckpointCommitted](h) == 0 {
		t.Fatalf("checkpoint 5 not committed (committed %v)", h.j.ft.committed)
	}
}

func TestReportGapsAreCountedOnce(t *testing.T) {
	h := newHarness(t, Config{})
	h.iteration(1, 1)
	h.iteration(4, 1) // 2 and 3 lost on the way
	h.iteration(3, 1) // late: stale
	if h.j.ft.lastIter != 4 || len(h.j.iterSec) != 4 || len(h.j.history) != 3 {
		t.Fatalf("after a gap: iteration %d, %d iteration times, %d history points", h.j.ft.lastIter, len(h.j.iterSec), len(h.j.history))
	}
}

func TestLostNodeRollsBackInANewEpoch(t *testing.T) {
	h := newHarness(t, Config{QuorumWait: time.Minute})
	for s := int64(0); s < 4; s++ {
		h.step(&messages.CheckpointDone{JobId: "j", Epoch: 1, Shard: s, Iteration: 5})
	}
	h.iteration(6, 1)
	rd := h.step(MemberEvent{Addr: "b", Name: "b", Dead: true, Workers: []string{"a", "c"}})
	if h.j.epoch != 2 || rd.Pings == nil || len(rd.Pings.Nodes) != 2 {
		t.Fatalf("after losing b: epoch %d, pings %+v", h.j.epoch, rd.Pings)
	}
	rd = h.step(Pongs{Epoch: 2, Nodes: rd.Pings.Nodes, Pongs: []*messages.Pong{{Address: "a", Capacity: 1}, {Address: "c", Capacity: 1}}})
	for _, s := range rd.Sends {
		if a, ok := s.Msg.(*messages.ShardAssignment); ok {
			if s.To.Address == "b" || a.ResumeFrom != 5 || a.Epoch != 2 {
				t.Fatalf("assignment %v to %s after losing b", a, s.To.Address)
			}
		}
	}
	h.placeAll()
	h.iteration(6, 2)
	if len(h.j.ft.recoveries) != 1 || h.j.ft.recoveries[0].FromIteration != 5 || h.j.ft.recoveries[0].Redone != 1 {
		t.Fatalf("recoveries %v", h.j.ft.recoveries)
	}
}

// TestNodeLostDuringSetupTimesItsRecovery: a node lost while the job is set up (no start
// yet to count seconds from) is noticed at a negative time once the job starts, and its
// recovery takes the seconds it took. (Its seconds were once counted from the zero time:
// noticed 9.2e9 s after the start, recovered in -9.2e9 s, in the log, the report and the
// convergence figure's time axis.)
func TestNodeLostDuringSetupTimesItsRecovery(t *testing.T) {
	h := beginHarness(t, Config{QuorumWait: time.Minute})
	h.now = h.now.Add(3 * time.Second)
	rd := h.step(MemberEvent{Addr: "b", Name: "b", Dead: true, Workers: []string{"a", "c"}})
	if rd.Pings == nil {
		t.Fatalf("losing b during the setup: no pings")
	}
	h.now = h.now.Add(2 * time.Second) // the pongs, the placement: the job starts 2 s after b was lost
	rd = h.step(Pongs{Epoch: h.j.epoch, Nodes: rd.Pings.Nodes, Pongs: []*messages.Pong{{Address: "a", Capacity: 1}, {Address: "c", Capacity: 1}}})
	h.placeAll()
	h.iteration(1, h.j.epoch) // 10 ms later
	if len(h.j.ft.recoveries) != 1 {
		t.Fatalf("recoveries %v, want 1", h.j.ft.recoveries)
	}
	r := h.j.ft.recoveries[0]
	if math.Abs(r.Noticed-(-2)) > 1e-9 || math.Abs(r.Resumed-0.01) > 1e-9 {
		t.Errorf("noticed %v s, resumed %v s after the start; want -2 and 0.01", r.Noticed, r.Resumed)
	}
	var found bool
	for _, e := range h.j.events {
		if e.GetKind() == messages.JobEventKind_JOB_EVENT_KIND_RECOVERED {
			found = true
			if !strings.Contains(e.GetText(), "after 2.0 s") {
				t.Errorf("the recovery's event: %q, want it to say after 2.0 s", e.GetText())
			}
		}
	}
	if !found {
		t.Errorf("no recovered event in %v", h.j.events)
	}
}

func TestNoQuorumPausesThenFails(t *testing.T) {
	h := newHarness(t, Config{QuorumWait: time.Minute})
	h.step(MemberEvent{Addr: "b", Name: "b", Dead: true, Workers: []string{"a", "c"}})
	h.step(Pongs{Epoch: h.j.epoch, Nodes: []string{"a", "c"}, Pongs: []*messages.Pong{{Capacity: 1}, {Capacity: 1}}})
	rd := h.step(MemberEvent{Addr: "c", Name: "c", Dead: true, Workers: []string{"a"}})
	if !h.j.ft.paused || len(rd.Timers) != 1 || rd.Timers[0].Kind != TimerQuorum {
		t.Fatalf("with 1 of 3 nodes: paused %v, timers %v", h.j.ft.paused, rd.Timers)
	}
	h.now = h.now.Add(time.Minute)
	rd = h.step(TimerFired{Timer: rd.Timers[0]})
	if !rd.Over || sent[*messages.JobError](h) != 1 {
		t.Fatalf("the quorum wait ended without failing the job")
	}
	// The job's nodes are told to stop it, then the failed job's record goes to the hosts
	// that keep it.
	if e := h.sends[len(h.sends)-1]; e.Msg.(*messages.JobRecord).GetInfo().GetState() != messages.JobPhase_JOB_PHASE_FAILED {
		t.Fatalf("last message %v", e.Msg)
	}
	if sent[*messages.StopJob](h) == 0 {
		t.Fatalf("no StopJob sent")
	}
}

func TestStallRollsBack(t *testing.T) {
	h := newHarness(t, Config{StallTimeout: time.Second})
	h.iteration(1, 1)
	var stall *Timer
	for _, s := range h.timers {
		if s.Kind == TimerStall {
			stall = &s
		}
	}
	if stall == nil {
		t.Fatalf("no stall timer armed while the job runs (timers %v)", h.timers)
	}
	h.now = h.now.Add(2 * time.Second)
	h.step(TimerFired{Timer: *stall})
	if h.j.epoch != 2 || h.j.ft.recovering == nil || !strings.Contains(h.j.ft.recovering.Cause, "no progress") {
		t.Fatalf("a stalled job did not roll back: epoch %d, recovering %v", h.j.epoch, h.j.ft.recovering)
	}
}

func TestTakeOverStartsANewGeneration(t *testing.T) {
	h := newHarness(t, Config{})
	st := h.sends[len(h.sends)-1].Msg.(*messages.JobState) // sent to the standby when the job started
	cfg := Config{Self: &messages.Pid{Address: "b", Id: "host/j-coord"}, Cluster: true, FanIn: 8}
	j, err := New(cfg, st.Submit)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Step(t0, TakeOver{State: st, Cause: "a died", Workers: []string{"b", "c"}}); err != nil {
		t.Fatal(err)
	}
	rd := j.Ready()
	if j.epoch>>EpochGenShift != 1 || EpochString(j.epoch) != "1.1" {
		t.Fatalf("takeover epoch %d (%s)", j.epoch, EpochString(j.epoch))
	}
	accepted := false
	for _, s := range rd.Sends {
		if a, ok := s.Msg.(*messages.JobAccepted); ok && a.Takeover && s.To.Address == "client" {
			accepted = true
		}
	}
	if !accepted || rd.Pings == nil {
		t.Fatalf("takeover told the client %v, pinged %v", accepted, rd.Pings)
	}
}

// TestConfigIsChecked: New refuses a configuration that would build a wrong tree or has no
// coordinator to name, naming the field.
func TestConfigIsChecked(t *testing.T) {
	self := &messages.Pid{Address: "a", Id: "host/j-coord"}
	sub := &messages.SubmitJob{JobId: "j"}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" when valid
	}{
		{"valid", Config{Self: self, FanIn: 2}, ""},
		{"fan-in 8", Config{Self: self, FanIn: 8}, ""},
		{"no self", Config{FanIn: 2}, "Config.Self"},
		{"fan-in 0", Config{Self: self}, "Config.FanIn 0"},
		{"fan-in 1", Config{Self: self, FanIn: 1}, "Config.FanIn 1"},
		{"fan-in 6", Config{Self: self, FanIn: 6}, "not a power of two"},
		{"negative lease", Config{Self: self, FanIn: 2, Lease: -time.Second}, "Config.Lease"},
		{"negative stall", Config{Self: self, FanIn: 2, StallTimeout: -1}, "Config.StallTimeout"},
	} {
		_, err := New(tc.cfg, sub)
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := New(Config{Self: self, FanIn: 2}, &messages.SubmitJob{}); err == nil {
		t.Error("a submission without a job id was taken")
	}
}

// TestStepRefusesUnknownEvents: an event the control does not take is an error, never
// dropped in silence.
func TestStepRefusesUnknownEvents(t *testing.T) {
	h := newHarness(t, Config{})
	for _, ev := range []any{struct{}{}, &messages.Ping{}, "begin"} {
		if err := h.j.Step(h.now, ev); err == nil || !strings.Contains(err.Error(), "takes no") {
			t.Errorf("%T: %v", ev, err)
		}
	}
}

// TestReadyTellsEachRecoveryOnceWithItsCause checks Ready.Recoveries: a recovery that begins
// is told once, by the class of its cause; a second cause joining a recovery under way is
// not told again.
func TestReadyTellsEachRecoveryOnceWithItsCause(t *testing.T) {
	for _, c := range []struct {
		name string
		ev   any
		want RecoveryCause
	}{
		{"node dead", MemberEvent{Addr: "b", Name: "b", Dead: true, Workers: []string{"a", "c"}}, CauseNodeDead},
		{"node left", MemberEvent{Addr: "b", Name: "b", Workers: []string{"a", "c"}}, CauseNodeLeft},
		{"actor panic", &messages.ActorFailed{JobId: "j", Role: messages.ActorRole_ACTOR_ROLE_SHARD, Shard: 1, Node: "b", Reason: "boom"}, CauseActorPanic},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, Config{QuorumWait: time.Minute})
			h.iteration(3, 1)
			if rd := h.step(c.ev); !slices.Equal(rd.Recoveries, []RecoveryCause{c.want}) {
				t.Fatalf("Ready.Recoveries %v, want [%s]", rd.Recoveries, c.want)
			}
			// Another node lost while the recovery waits for its pings: the same recovery.
			if rd := h.step(MemberEvent{Addr: "c", Name: "c", Dead: true, Workers: []string{"a"}}); len(rd.Recoveries) != 0 {
				t.Fatalf("a cause joining a recovery under way told again: %v", rd.Recoveries)
			}
		})
	}
}

// TestShardDoneWithHostileSquaresFailsTheJob: a shard's held-out sums of squares (transform
// sqrt) that are NaN, infinite or negative fail the job, naming the shard, instead of becoming
// its test error.
func TestShardDoneWithHostileSquaresFailsTheJob(t *testing.T) {
	for _, c := range []struct{ sse, sq float64 }{{math.NaN(), 1}, {1, math.Inf(1)}, {-1, 1}, {1, -0.5}} {
		h := newHarness(t, Config{})
		h.iteration(1, 1)
		h.step(&messages.ShardDone{JobId: "j", Epoch: 1, Shard: 2, Iteration: 1, Stop: "converged", TestSseOfSquares: c.sse, TestSqNormOfSquares: c.sq})
		je, _ := h.j.answer.(*messages.JobError)
		if !h.j.over || je == nil || !strings.Contains(je.Message, "shard 2 reported a held-out error of squares") {
			t.Errorf("sums %v of %v: over %v, answer %v", c.sse, c.sq, h.j.over, h.j.answer)
		}
	}
}
