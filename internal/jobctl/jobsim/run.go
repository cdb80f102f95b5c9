package jobsim

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/internal/jobctl/internal/bugs"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

// Options describe one simulated job: the cluster, the job, the network's timing and the
// faults. The zero value of a field takes the default Run documents.
type Options struct {
	// Seed drives every random choice: latencies, which messages the faults hit, when nodes
	// die. A run is a function of its Options.
	Seed uint64
	// Nodes is the cluster's size at the start (default 4); the job's coordinator is on the
	// first.
	Nodes int
	// FanIn is the reduce tree's fan-in (default 2: a tree of several levels).
	FanIn int
	// Latency is a message's base latency (default 200µs; jitter up to as much again);
	// IterCost what an iteration costs a shard (default 2ms); slow nodes take 5 times both.
	Latency, IterCost time.Duration
	// DetectDelay is how long the gossip takes to see a node dead, cut off or back (default
	// 1s); QuorumWait how long a job waits for a majority (default 20s); StallTimeout the
	// control's stall watchdog (default 2s); StreamIdle how long a shard waits for a chunk of
	// its streamed block (default 5s: as actors' defaults, well within the watchdog's wait
	// before a job's first iteration).
	DetectDelay, QuorumWait, StallTimeout, StreamIdle time.Duration
	// Deadline bounds the simulated time (default 10 minutes): a job not ended by then breaks
	// the invariant that every job ends.
	Deadline time.Duration
	// Faults are the faults of this schedule.
	Faults Faults
	// Trace keeps a trace of the run (Outcome.Trace).
	Trace bool
	// Bugs plants deliberate bugs in every machine of the run (TestSimulatorFindsPlantedBugs).
	Bugs bugs.Set
	// TimeLimit is the job's time limit (jobctl.Config.TimeLimit; 0: none): the control grants
	// the shards iterations a few at a time and stops them once it passed, so a job may end
	// before its stop rule, at an iteration the timing decides, with the bits of kernels.Run
	// stopped there (Problem.ReferenceAt).
	TimeLimit time.Duration
}

// Faults are what a schedule breaks.
type Faults struct {
	// Drop, Duplicate and Delay are per-message probabilities (between nodes); Corrupt is
	// per checkpoint copy written.
	Drop, Duplicate, Delay, Corrupt float64
	// ClientDies kills the job's client at a random time: its coordinator must find the
	// lease run out and cancel the job.
	ClientDies bool
	// Stall is the per-message probability that its connection stalls for up to three
	// detection delays (a connection that hangs, then recovers): the message, and those that
	// follow it on its link, arrive that late, often in another epoch.
	Stall float64
	// Kills are nodes killed at random times (not the coordinator's or the standby's unless
	// KillCoordinator or KillStandby); Joins new nodes that join at random times.
	Kills, Joins int
	// KillCoordinator and KillStandby kill the node of the job's coordinator (whichever it is
	// then) and of its standby.
	KillCoordinator, KillStandby bool
	// Partitions cut the cluster in two for a while, then heal it.
	Partitions int
	// Slow nodes take 5 times as long for everything; FullDisks nodes cannot write checkpoints.
	Slow, FullDisks int
	// Rack kills that many consecutive nodes at once (a rack's power or switch), none of them
	// the coordinator's or its standby's.
	Rack int
	// At, when set, is when every fault happens (after the job's acceptance) instead of at
	// random times.
	At time.Duration
	// Forgers are processes with only the gossip key that claim to be members at an actor
	// address no certificate of theirs proves; Duplicates claim a live node's actor address
	// (the coordinator's when there is one) under another name. Each node's admission
	// (cluster.Admission, as the membership runs it) must refuse both: a node that lists one
	// breaks an invariant, since its death would touch the job.
	Forgers, Duplicates int
	// NeverStreams is a client that announces its input (ingest "stream") and sends none of
	// it, or a few chunks of a block and then nothing: the job must fail with the shards'
	// error (jobctl.StreamWatch), every actor stopped, whatever else the schedule breaks.
	NeverStreams bool
	// Restarts are nodes (not the coordinator's or the standby's) whose process dies at a
	// random time and starts again, empty, 2 to 6 detection delays later: with its disk (its
	// checkpoint copies) or without it, as the seed draws.
	Restarts int
	// FillDisks are nodes whose disk fills up at a random time, for 1 to 7 detection delays:
	// their checkpoint writes (own and buddy copies) fail meanwhile.
	FillDisks int
}

// Tolerable tells whether the job must survive these faults with its result: at most one
// node lost at a time and no partition. Beyond that the job may also end with a clear error.
func (f Faults) Tolerable() bool {
	lost := f.Kills + f.Rack + f.Restarts
	if f.KillCoordinator {
		lost++
	}
	if f.KillStandby {
		lost++
	}
	return lost <= 1 && f.Partitions == 0 && !f.NeverStreams && !f.ClientDies
}

// Problem is the job the simulations run: the matrix, split into shards, and the
// factorization. It is read-only and shared by every run.
type Problem struct {
	x      *kernels.Dense
	spec   spec
	pool   *kernels.Pool
	shards int
	every  int64
	// refs are the references by iteration count (ReferenceAt), computed once each.
	refs map[int]*kernels.Result
}

// spec is the factorization: what every shard's kernels.ShardSpec shares.
type spec struct {
	Algo    kernels.Algorithm
	K       int
	Seed    uint64
	Init    kernels.InitSpec
	Options kernels.Options
	Stop    kernels.StopRule
}

// NewProblem makes a planted rank-k problem of m features and n samples, factorized with algo
// at rank k on p shards for maxIter iterations, checkpointing every `every` iterations.
func NewProblem(algo kernels.Algorithm, m, n, k, p, maxIter int, every int64) *Problem {
	rng := rand.New(rand.NewPCG(7, 11))
	b, c := make([]float64, m*k), make([]float64, k*n)
	for i := range b {
		b[i] = rng.Float64()
	}
	for i := range c {
		c[i] = rng.Float64()
	}
	x := kernels.NewDense(m, n)
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			v := 0.01 * rng.Float64()
			for r := 0; r < k; r++ {
				v += b[r*m+i] * c[j*k+r]
			}
			x.Data[j*m+i] = v
		}
	}
	return &Problem{x: x, pool: kernels.NewPool(1), shards: p, every: every,
		spec: spec{Algo: algo, K: k, Seed: 42, Init: kernels.InitSpec{Method: kernels.InitRandom}, Stop: kernels.StopRule{MaxIter: maxIter}}}
}

// Close releases the problem's worker pool.
func (p *Problem) Close() { p.pool.Close() }

// Reference is the factorization of the problem by kernels.Run, in one process: what every
// simulated run that ends with a result must give, bit for bit.
func (p *Problem) Reference() (*kernels.Result, error) {
	blocks, err := kernels.Split(p.x, p.shards)
	if err != nil {
		return nil, err
	}
	s := p.spec
	return kernels.Run(context.Background(), blocks, kernels.Config{Algo: s.Algo, K: s.K, Seed: s.Seed, Init: s.Init, Options: s.Options, Stop: s.Stop, Threads: 1})
}

// ReferenceAt is the factorization of the problem by kernels.Run stopped after at most
// iterations: what a simulated run that a time limit stopped there must give, bit for bit.
// It is computed once for each count; a Problem is not safe for concurrent use of it.
func (p *Problem) ReferenceAt(iterations int) (*kernels.Result, error) {
	if r := p.refs[iterations]; r != nil {
		return r, nil
	}
	q := *p
	q.spec.Stop.MaxIter = min(iterations, p.spec.Stop.MaxIter)
	r, err := q.Reference()
	if err != nil {
		return nil, err
	}
	if p.refs == nil {
		p.refs = map[int]*kernels.Result{}
	}
	p.refs[iterations] = r
	return r, nil
}

// Outcome is how a simulated job ended.
type Outcome struct {
	// Result or Err is what the client got (nil both: the job did not end by the deadline).
	Result *messages.JobResult
	Err    *messages.JobError
	// B is the basis (M x K) and C the coefficients (K x N, column-major), from the shards of
	// the final epoch, when the job ended with a result.
	B, C []float64
	// End is the simulated time the client got its answer.
	End   time.Duration
	Stats Stats
	// Violations are the invariants the run broke.
	Violations []string
	Trace      []string
}

// Stats count what happened in a run.
type Stats struct {
	Messages, Dropped, Duplicated, Delayed, Lost         int
	Steps, Partials, Checkpoints, Takeovers, Recoveries  int
	StaleAtShards, StaleAtReducers, DuplicatesDropped    int
	Killed, Joined, Partitioned, Corrupted, Coordinators int
	// Orphans are job actors left on live nodes after the job ended (a lost StopJob).
	Orphans int
	// LateAnswers are answers that reached the client after its first (a coordinator cut off
	// in a partition that healed ran the job on, and so did its successor).
	LateAnswers int
	// Unreplicated counts coordinators killed before their standby had the job's state;
	// AnswersLost jobs whose answer was lost on the way and whose coordinator's node, which
	// kept it, died before the client asked again.
	Unreplicated, AnswersLost int
	// Refused counts the forged and duplicate members' claims the nodes refused.
	Refused int
	// Superseded counts the assignments of superseded coordinators that hosts (or shards)
	// answered so.
	Superseded int
	// Restarted counts the nodes that came back, with their disk or without it; WritesRefused
	// the checkpoint writes a full disk refused.
	Restarted, WritesRefused int
	// ResumedFromKeptDisk counts the shards that resumed from a checkpoint copy a node kept
	// on its disk across a restart.
	ResumedFromKeptDisk int
	// StaleWords counts the acceptances and errors of superseded coordinators the client's
	// lease dropped (a coordinator cut off, then healed, whose lease ran out because the
	// client renews its successor cancels the job in its own epoch).
	StaleWords int
	// PrunedBySuperseded counts the copies of checkpoints the acting coordinator committed
	// and may fall back to that a node dropped at the commit of a superseded coordinator
	// running on next to it (see the package doc's known gaps).
	PrunedBySuperseded int
	// Decisions are the wall-clock times the control took (jobctl.Job.Step with its Ready),
	// by the event that started them: placement (Begin), membership changes and the pongs
	// that place lost shards, and all others; ControlMessages are the messages it sent.
	Decisions       map[string]Decision
	ControlMessages int
}

// Decision sums the wall-clock time of the control's steps for one kind of event.
type Decision struct {
	Steps    int
	Total    time.Duration
	Longest  time.Duration
	Messages int
}

// violation records a broken invariant.
func (w *World) violation(format string, args ...any) {
	w.violations = append(w.violations, fmt.Sprintf(format, args...))
}

// corrupts tells whether the checkpoint copy being written is corrupt (the schedule's fault).
func (w *World) corrupts() bool {
	if c := w.opt.Faults.Corrupt; c > 0 && w.rng.Float64() < c {
		w.stats.Corrupted++
		return true
	}
	return false
}

// deposit keeps the factors of a shard that finished at iteration it, as its client would
// receive them.
func (w *World) deposit(a *messages.ShardAssignment, it int64, m *kernels.Machine) {
	if d, ok := w.deposits[a.Shard]; ok && d.epoch > a.Epoch {
		return
	}
	w.deposits[a.Shard] = deposit{epoch: a.Epoch, iter: it, b: slices.Clone(m.Basis()), c: slices.Clone(m.Coef())}
}

// Run simulates one job on problem p under opt and checks its invariants.
func Run(p *Problem, opt Options) Outcome {
	opt = opt.withDefaults()
	w := &World{opt: opt, rng: rand.New(rand.NewPCG(opt.Seed, 0x5eed)), nodes: map[string]*node{}, group: map[string]int{},
		deposits: map[int64]deposit{}, written: map[ckptKey]bool{}, committed: map[int64]bool{}, held: map[ckptKey]map[string]bool{}, sentTo: map[ckptKey][]string{}, epochOwners: map[uint64]*coordinator{}, supersededCommits: map[*messages.CheckpointCommitted]bool{}, views: map[string]map[string]bool{}, links: map[[2]string]time.Duration{},
		adm: map[string]*cluster.Admission{}, lists: map[string]map[string]cluster.Member{}, started: map[string]int64{}}
	w.data = p
	w.client = &client{w: w, lease: jobctl.NewLeaseClient(jobctl.LeaseConfig{JobID: "jsim", Renew: leaseRenew, Quorum: opt.QuorumWait, Bugs: opt.Bugs})}
	for i := range opt.Nodes {
		w.addNode(fmt.Sprintf("n%d", i))
	}
	for _, a := range w.order {
		w.views[a] = map[string]bool{}
		for _, b := range w.order {
			if b != a && w.admit(a, w.claim(b)) != "" {
				w.violation("%s refused the member %s at the start", a, b)
			}
			w.see(a, b, true)
		}
	}
	// The client submits the job to the first node.
	sub := &messages.SubmitJob{JobId: "jsim", OwnerToken: ownerToken, Client: &messages.Pid{Address: clientAddr, Id: clientAddr},
		Spec: &messages.JobSpec{Algorithm: jobspec.WireAlgorithm(p.spec.Algo), Rank: int64(p.spec.K), Shards: int64(p.shards), CheckpointEvery: p.every,
			Seed: p.spec.Seed, Inputs: []string{"sim"}}}
	first := w.nodes[w.order[0]]
	first.submit(sub, "owner")
	c := first.coords[jobctl.ChildPid(first.addr, jobctl.CoordinatorName(sub.JobId)).Id]
	if c == nil {
		panic("the host refused the simulated job") // the simulation's own job: a bug of the test
	}
	w.after(0, func() {
		reserve := make([]int64, p.shards)
		b := jobctl.Begin{Samples: p.x.Cols, Features: p.x.Rows, Reserve: reserve, Workers: w.liveWorkers(first.addr)}
		for i, a := range b.Workers {
			b.Nodes = append(b.Nodes, jobctl.Node{Name: a, Addr: a})
			b.Pongs = append(b.Pongs, &messages.Pong{Address: a, Nonce: uint64(i), Capacity: 1})
		}
		c.step(b)
	})
	for w.q.Len() > 0 && w.q.peek().at <= opt.Deadline {
		e := heap.Pop(&w.q).(*event)
		w.clock = e.at
		e.do()
		if len(w.violations) > 0 {
			break
		}
	}
	return w.outcome()
}

// withDefaults fills in the zero fields.
func (o Options) withDefaults() Options {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.Nodes <= 0 {
		o.Nodes = 4
	}
	if o.FanIn <= 0 {
		o.FanIn = 2
	}
	def(&o.Latency, 200*time.Microsecond)
	def(&o.IterCost, 2*time.Millisecond)
	def(&o.DetectDelay, time.Second)
	def(&o.QuorumWait, 20*time.Second)
	def(&o.StallTimeout, 2*time.Second)
	def(&o.StreamIdle, 5*time.Second)
	def(&o.Deadline, 10*time.Minute)
	return o
}

// outcome checks the invariants of a finished run and reports it.
func (w *World) outcome() Outcome {
	c := w.client
	out := Outcome{Result: c.result, Err: c.err, End: c.at, Stats: w.stats, Trace: w.trace}
	out.Stats.Coordinators = w.coordinators
	switch {
	case c.dead && w.sentAnswer == nil:
		// No coordinator answered (the coordinator and its standby died too): the hosts must
		// have forgotten the job's actors as orphans.
		for _, a := range w.order {
			if n := w.nodes[a]; n.alive && len(n.shards)+len(n.reducers)+len(n.coords) > 0 && w.opt.Faults.Drop == 0 && w.opt.Faults.Partitions == 0 {
				w.violation("the job of a client that died neither ended nor was forgotten within %v of simulated time (%s keeps its actors)", w.opt.Deadline, a)
				break
			}
		}
	case c.dead:
		if e, ok := w.sentAnswer.(*messages.JobError); ok && !excused(e.Message) && !strings.Contains(e.Message, "sent no word") {
			w.violation("the job of a client that died failed with another error: %s", e.Message)
		}
	case c.answers == 0:
		w.violation("the job did not end within %v of simulated time", w.opt.Deadline)
	}
	if r := c.result; r != nil {
		for s := range int64(w.data.shards) {
			d, ok := w.deposits[s]
			if !ok {
				w.violation("shard %d handed over no factors", s)
				continue
			}
			if d.iter != r.Iterations {
				w.violation("shard %d handed over its factors at iteration %d, the result has %d iterations", s, d.iter, r.Iterations)
			}
			if s == 0 {
				out.B = d.b
			} else if !slices.Equal(d.b, out.B) {
				w.violation("shard %d's replica of B differs from shard 0's", s)
			}
			out.C = append(out.C, d.c...)
		}
		// Every iteration once, in order; one missing only where a report was lost.
		for i, h := range r.History {
			if i > 0 && h.Iteration <= r.History[i-1].Iteration {
				w.violation("history entry %d is iteration %d after %d: an iteration counted twice", i, h.Iteration, r.History[i-1].Iteration)
				break
			}
		}
		if last := r.History[len(r.History)-1].Iteration; last != r.Iterations || int64(len(r.IterSeconds)) != r.Iterations {
			w.violation("history ends at iteration %d with %d iteration times, for %d iterations", last, len(r.IterSeconds), r.Iterations)
		}
		// Shard 0 sends its reports in bursts (jobctl.ShardDriverReportInterval): a checkpoint
		// may be committed before the reports of its last iterations came, and a recovery to it
		// (a takeover's included) then has no history point for them.
		if int64(len(r.History)) != r.Iterations+1 && w.opt.Faults.Drop == 0 && w.stats.Lost == 0 && len(r.Recoveries) == 0 {
			w.violation("history has %d entries for %d iterations, no report was lost and the job never recovered", len(r.History), r.Iterations)
		}
		out.Stats.Recoveries = len(r.Recoveries)
	}
	c.checkLease()
	if e := c.err; e != nil && w.opt.Faults.Tolerable() && !w.unreplicated && !w.answerLost {
		w.violation("the job failed under tolerable faults: %s", e.Message)
	}
	if c.result != nil && w.opt.Faults.NeverStreams {
		w.violation("the job of a client that never streams ended with a result")
	}
	if e := c.err; e != nil && w.opt.Faults == (Faults{NeverStreams: true}) {
		// Nothing else broke: the shards' error ends the job, a few waits after it began.
		if !strings.Contains(e.Message, "Timeouts.StreamIdle") {
			w.violation("the job of a client that never streams failed with another error: %s", e.Message)
		}
		if c.at > 5*w.opt.StreamIdle {
			w.violation("the job of a client that never streams ended at %v, past 5 waits for a chunk (%v)", c.at, w.opt.StreamIdle)
		}
	}
	if e := c.err; e != nil && !excused(e.Message) {
		w.violation("the job failed without naming a cause the promise allows: %s", e.Message)
	}
	// No reservation outlives its job: a live node reserves for the job's actors what those
	// that still run on it hold (after the end, none but those a lost StopJob left).
	for _, a := range w.order {
		if n := w.nodes[a]; n.alive {
			if held := n.held(); n.reserved != held {
				w.violation("node %s reserves %d bytes of its memory for the job's actors, the actors it runs hold %d: a reservation outlived its actor",
					a, n.reserved, held)
			}
		}
	}
	// Every actor of the job stopped (on nodes that heard of its end).
	for _, a := range w.order {
		n := w.nodes[a]
		if !n.alive {
			continue
		}
		left := len(n.shards) + len(n.reducers) + len(n.coords)
		if left > 0 && (c.answers > 0 || w.sentAnswer != nil) {
			out.Stats.Orphans += left
			if w.opt.Faults.Drop == 0 && w.opt.Faults.Partitions == 0 {
				w.violation("node %s keeps %d actors of the ended job", a, left)
			}
		}
	}
	out.Violations = w.violations
	return out
}

// excused tells whether a job's error names a cause under which the promise allows it to
// fail: no majority, every copy of a checkpoint and the start lost, no node left, a fault
// that kept coming back.
func excused(msg string) bool {
	for _, s := range []string{"Timeouts.StreamIdle", "not a majority", "without a majority", "no node is left", "recovered", "fit on no live node", "no node took the job over", "no answer reached this client", "no member of the cluster answers"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
