package jobctl

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/didnmf/didnmf/messages"
)

// TestJobScenarios runs the coordinator's scenarios in testdata/job, as etcd's raft runs
// its interaction tests: each file drives a Job through a story (a rollback, a takeover, a
// partition that pauses the job) and every command prints what the Job asks its runtime to
// do, so the files read as the control's behaviour without Go. Run with -rewrite after a
// deliberate change, and read the diff.
//
//	job shards=S nodes=(a,b,...) [fanin=F] [checkpoint=E] [quorum=D] [stall=D]
//	place                     every actor of the epoch acknowledges its assignment
//	iteration it=I            shard 0 reports iteration I
//	checkpoint it=I [shards=(s,...)]  shards (all) wrote the checkpoint at I
//	lose node=N [dead]        N leaves the cluster (or is declared dead)
//	join node=N               N joins
//	pongs [silent=(n,...)]    the nodes of the last ping answer (but the silent ones)
//	advance d=D               time passes; due timers fire
//	done it=I                 every shard finished at I; every reducer stopped
//	committed                 the output files are in place (a job with shared outputs)
//	takeover node=N           N's standby takes the job over from the last state it got
//	cancel                    the owner cancels
//	info                      the job's last published JobInfo (or its record once ended), with its events
func TestJobScenarios(t *testing.T) {
	runScenarios(t, "testdata/job", func() func(*testing.T, *datadriven.TestData) string { return (&jobEnv{}).run })
}

// jobEnv is a Job with its world: the clock, the live nodes, what was sent (the last ping,
// the standby's state) and the timers armed.
type jobEnv struct {
	j       *Job
	now     time.Time
	samples int
	nodes   []string
	down    map[string]bool
	timers  []armed
	ping    *PingRequest
	state   map[string]*messages.JobState // the last JobState each node got
	info    *messages.JobInfo             // the last Info published, or the record
}

// armed is a timer the Job asked for, due at a time.
type armed struct {
	at time.Time
	t  Timer
}

func (e *jobEnv) run(t *testing.T, d *datadriven.TestData) string {
	var out strings.Builder
	step := func(ev any) {
		if err := e.j.Step(e.now, ev); err != nil {
			d.Fatalf(t, "%v", err)
		}
		e.print(&out, e.j.Ready())
	}
	switch d.Cmd {
	case "job":
		var shards int64
		var fanIn, every = 8, int64(0)
		quorum, stall := 20*time.Second, time.Duration(0)
		d.ScanArgs(t, "shards", &shards)
		d.ScanArgs(t, "nodes", &e.nodes)
		d.MaybeScanArgs(t, "fanin", &fanIn)
		d.MaybeScanArgs(t, "checkpoint", &every)
		d.MaybeScanArgs(t, "quorum", &quorum)
		d.MaybeScanArgs(t, "stall", &stall)
		e.now, e.samples, e.down, e.state = t0, 40, map[string]bool{}, map[string]*messages.JobState{}
		cfg := Config{Self: &messages.Pid{Address: e.nodes[0], Id: "host/j-coord"}, Cluster: true, FanIn: fanIn, QuorumWait: quorum, StallTimeout: stall}
		sub := &messages.SubmitJob{JobId: "j", Client: &messages.Pid{Address: "client", Id: "c"},
			Spec: &messages.JobSpec{Algorithm: messages.Algorithm_ALGORITHM_DID, Rank: 2, Shards: shards, CheckpointEvery: every}}
		var err error
		if e.j, err = New(cfg, sub); err != nil {
			return "refused: " + err.Error()
		}
		var nodes []Node
		var pongs []*messages.Pong
		for _, n := range e.nodes {
			nodes = append(nodes, Node{Name: n, Addr: n})
			pongs = append(pongs, &messages.Pong{Address: n, Capacity: 1})
		}
		step(Begin{Samples: e.samples, Features: 10, Reserve: make([]int64, shards), Nodes: nodes, Pongs: pongs, Workers: e.live()})
	case "place":
		for _, p := range append(slices.Clone(e.j.shards), e.j.reducers...) {
			step(&messages.Placed{JobId: "j", Epoch: e.j.epoch, Pid: p, Features: 10, Samples: int64(e.samples), SqNormX: 1})
		}
	case "iteration":
		var it int64
		d.ScanArgs(t, "it", &it)
		e.now = e.now.Add(10 * time.Millisecond)
		step(&messages.IterationDone{JobId: "j", Epoch: e.j.epoch, Iteration: it, Objective: 1 / float64(it+1), Initial: 1, Seconds: float64(it) / 100})
	case "checkpoint":
		var it int64
		d.ScanArgs(t, "it", &it)
		shards := e.allShards()
		d.MaybeScanArgs(t, "shards", &shards)
		for _, s := range shards {
			step(&messages.CheckpointDone{JobId: "j", Epoch: e.j.epoch, Shard: s, Iteration: it, Seconds: 0.001})
		}
	case "lose":
		var n string
		d.ScanArgs(t, "node", &n)
		e.down[n] = true
		step(MemberEvent{Dead: d.HasArg("dead"), Worker: true, Name: n, Addr: n, Workers: e.live()})
	case "join":
		var n string
		d.ScanArgs(t, "node", &n)
		if !slices.Contains(e.nodes, n) {
			e.nodes = append(e.nodes, n)
		}
		delete(e.down, n)
		step(MemberEvent{Join: true, Worker: true, Name: n, Addr: n, Workers: e.live()})
	case "pongs":
		if e.ping == nil {
			d.Fatalf(t, "no ping to answer")
		}
		var silent []string
		d.MaybeScanArgs(t, "silent", &silent)
		pongs := make([]*messages.Pong, len(e.ping.Nodes))
		for i, n := range e.ping.Nodes {
			if !e.down[n] && !slices.Contains(silent, n) {
				pongs[i] = &messages.Pong{Address: n, Capacity: 1}
			}
		}
		p := e.ping
		e.ping = nil
		step(Pongs{Epoch: p.Epoch, Nodes: p.Nodes, Pongs: pongs})
	case "advance":
		var by time.Duration
		d.ScanArgs(t, "d", &by)
		e.now = e.now.Add(by)
		for {
			i := slices.IndexFunc(e.timers, func(a armed) bool { return !a.at.After(e.now) })
			if i < 0 {
				break
			}
			a := e.timers[i]
			e.timers = slices.Delete(e.timers, i, i+1)
			fmt.Fprintf(&out, "timer %s fires\n", timerName(a.t))
			step(TimerFired{Timer: a.t})
		}
	case "done":
		var it int64
		d.ScanArgs(t, "it", &it)
		for _, s := range e.allShards() {
			step(&messages.ShardDone{JobId: "j", Epoch: e.j.epoch, Shard: s, Iteration: it, Stop: "max_iter", Residual: 0.5, SqNormX: 1})
		}
		for range e.j.reducers {
			step(&messages.ReducerDone{JobId: "j", Epoch: e.j.epoch})
		}
	case "committed":
		step(OutputCommitted{})
	case "takeover":
		var n string
		d.ScanArgs(t, "node", &n)
		st := e.state[n]
		if st == nil {
			d.Fatalf(t, "%s got no state to take over from", n)
		}
		cfg := e.j.cfg
		cfg.Self = &messages.Pid{Address: n, Id: "host/j-coord"}
		var err error
		if e.j, err = New(cfg, st.Submit); err != nil {
			return "refused: " + err.Error()
		}
		e.timers, e.ping = nil, nil
		step(TakeOver{State: st, Cause: "the coordinator's node died", Workers: e.live()})
	case "cancel":
		step(Cancel{})
	case "info":
		printInfo(&out, e.info)
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	if out.Len() == 0 {
		return "(nothing)\n"
	}
	return out.String()
}

// live are the nodes up, in the order they came.
func (e *jobEnv) live() []string {
	var out []string
	for _, n := range e.nodes {
		if !e.down[n] {
			out = append(out, n)
		}
	}
	return out
}

func (e *jobEnv) allShards() []int64 {
	out := make([]int64, len(e.j.shards))
	for i := range out {
		out[i] = int64(i)
	}
	return out
}

func timerName(t Timer) string {
	name := map[TimerKind]string{TimerQuorum: "quorum", TimerStall: "stall"}[t.Kind]
	return fmt.Sprintf("%s (epoch %s)", name, EpochString(t.Epoch))
}

// print writes a Ready, an effect a line, and keeps what later commands need.
func (e *jobEnv) print(w *strings.Builder, rd Ready) {
	for _, s := range rd.Sends {
		fmt.Fprintf(w, "%s -> %s\n", describeJobMsg(s.Msg), s.To.Address)
		if st, ok := s.Msg.(*messages.JobState); ok {
			e.state[s.To.Address] = st
		}
	}
	for _, l := range rd.Logs {
		if l.Level >= warn {
			fmt.Fprintf(w, "log %s: %s\n", strings.ToLower(l.Level.String()), l.Msg)
		}
	}
	if p := rd.Pings; p != nil {
		e.ping = p
		fmt.Fprintf(w, "ping %v (epoch %s)\n", p.Nodes, EpochString(p.Epoch))
	}
	for _, t := range rd.Timers {
		e.timers = append(e.timers, armed{at: e.now.Add(t.After), t: t})
		fmt.Fprintf(w, "timer %s in %v\n", timerName(t), t.After)
	}
	if rd.Commit != nil {
		fmt.Fprintf(w, "commit the output (%d iterations, stop %s)\n", rd.Commit.Result.GetIterations(), rd.Commit.Result.GetStop())
	}
	if rd.Info != nil {
		e.info = rd.Info
	}
	if rd.Record != nil {
		e.info = rd.Record
	}
	if rd.Over {
		fmt.Fprintln(w, "over")
	}
}

// printInfo writes what a JobInfo says beyond the progress, and its events with their times
// from the scenario's start.
func printInfo(w *strings.Builder, info *messages.JobInfo) {
	if info == nil {
		fmt.Fprintln(w, "no info published")
		return
	}
	fmt.Fprintf(w, "%s epoch %s, %d x %d, shards on %v, %d recoveries, %d checkpoints, %d history points\n", info.State.Name(),
		EpochString(info.Epoch), info.Samples, info.Features, info.ShardNodes, info.Recoveries, info.Checkpoints, len(info.History))
	fmt.Fprintf(w, "stop rule: %s; submitted at +%dms\n", info.StopRule, info.SubmittedUnixMs-t0.UnixMilli())
	if info.EndedUnixMs != 0 {
		fmt.Fprintf(w, "ended at +%dms: stop %q, error %s %q\n", info.EndedUnixMs-t0.UnixMilli(), info.Stop, info.ErrorKind.Name(), info.Error)
	}
	for _, ev := range info.Events {
		fmt.Fprintf(w, "  +%dms %s it=%d %s\n", ev.UnixMs-t0.UnixMilli(), ev.Kind.Name(), ev.Iteration, ev.Text)
	}
}

// describeJobMsg is a one-line account of a message the control sends.
func describeJobMsg(msg any) string {
	switch m := msg.(type) {
	case *messages.ShardAssignment:
		s := fmt.Sprintf("ShardAssignment shard %d epoch %s cols [%d,%d) buddy %s", m.Shard, EpochString(m.Epoch), m.ColLo, m.ColHi, m.Buddy)
		if m.ResumeFrom > 0 {
			s += fmt.Sprintf(" resume from %d %v", m.ResumeFrom, m.CheckpointAt)
		}
		return s
	case *messages.ReducerAssignment:
		return fmt.Sprintf("ReducerAssignment [%d,%d) level %d epoch %s", m.Lo, m.Hi, m.Level, EpochString(m.Epoch))
	case *messages.StartJob:
		if m.Granted == math.MaxInt64 {
			return fmt.Sprintf("StartJob epoch %s, every iteration granted", EpochString(m.Epoch))
		}
		return fmt.Sprintf("StartJob epoch %s granted %d", EpochString(m.Epoch), m.Granted)
	case *messages.Grant:
		return fmt.Sprintf("Grant epoch %s to %d", EpochString(m.Epoch), m.Granted)
	case *messages.Finish:
		return fmt.Sprintf("Finish epoch %s at %d", EpochString(m.Epoch), m.At)
	case *messages.CheckpointAt:
		return fmt.Sprintf("CheckpointAt epoch %s iteration %d", EpochString(m.Epoch), m.Iteration)
	case *messages.CheckpointCommitted:
		return fmt.Sprintf("CheckpointCommitted iteration %d keep from %d", m.Iteration, m.KeepFrom)
	case *messages.Buddies:
		return fmt.Sprintf("Buddies epoch %s shards %v", EpochString(m.Epoch), m.Shards)
	case *messages.StopJob:
		return fmt.Sprintf("StopJob epoch %s", EpochString(m.Epoch))
	case *messages.JobAccepted:
		return fmt.Sprintf("JobAccepted takeover %v", m.Takeover)
	case *messages.Progress:
		if m.Warning != "" {
			return "Progress warning: " + m.Warning
		}
		return fmt.Sprintf("Progress iteration %d", m.Iteration)
	case *messages.JobState:
		return fmt.Sprintf("JobState epoch %s committed %v shards on %v", EpochString(m.Epoch), m.Committed, m.ShardNodes)
	case *messages.JobResult:
		return fmt.Sprintf("JobResult %d iterations, stop %s, %d recoveries", m.Iterations, m.Stop, len(m.Recoveries))
	case *messages.JobError:
		return fmt.Sprintf("JobError %s: %s", m.Kind, m.Message)
	case *messages.JobRecord:
		return fmt.Sprintf("JobRecord %s", m.Info.State.Name())
	}
	return fmt.Sprintf("%T", msg)
}
