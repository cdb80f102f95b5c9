package jobctl

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/messages"
)

// TestShardDriverData runs the scenarios in testdata/sharddriver: one file per behavior of a
// shard's driver, each command an event (or a run of the numeric stand-in below), and the
// output what the driver asked for (its Ready). See testdata/sharddriver/README.txt for the
// commands.
func TestShardDriverData(t *testing.T) {
	runScenarios(t, "testdata/sharddriver", func() func(*testing.T, *datadriven.TestData) string { return newShardDriverEnv().handle })
}

// shardDriverToy is a cheap numeric stand-in for a shard's kernels machine: a fresh one makes
// one initialisation collective, then every iteration makes one collective and ends; its
// objective falls by Decay each iteration from Initial (100).
type shardDriverToy struct {
	it       int64
	init     bool // the initialisation collective is still to come
	inColl   bool // the iteration's collective was made: the boundary comes next
	decay    float64
	objInit  float64
	collSeen int
}

// next is what the machine reaches when stepped.
func (m *shardDriverToy) next() any {
	if m.init {
		m.init = false
		return ShardDriverCollective{Iteration: 0, Init: true}
	}
	if !m.inColl {
		m.inColl = true
		return ShardDriverCollective{Iteration: m.it + 1}
	}
	m.inColl = false
	m.it++
	return ShardDriverBoundary{Iteration: m.it, Objective: m.objInit * math.Pow(m.decay, float64(m.it)), Initial: m.objInit}
}

// shardDriverEnv is the world of one driver in a scenario: a clock the scenario moves, the
// stand-in machine, and what was asked for that the scenario may answer.
type shardDriverEnv struct {
	d    *ShardDriver
	now  time.Time
	iter time.Duration // how long an iteration takes on the stand-in
	m    *shardDriverToy
	// waiting is set when the last Ready asked to step the machine and the scenario did not;
	// held when a run held the machine at a boundary the driver asked to step on from.
	waiting, held bool
}

func newShardDriverEnv() *shardDriverEnv {
	return &shardDriverEnv{d: NewShardDriver(ShardDriverConfig{Job: "j", Shard: 0, Node: "n1"}), now: t0, iter: time.Millisecond}
}

// handle runs one command.
func (h *shardDriverEnv) handle(t *testing.T, td *datadriven.TestData) string {
	var out strings.Builder
	job, epoch := "j", h.d.Epoch()
	td.MaybeScanArgs(t, "job", &job)
	td.MaybeScanArgs(t, "epoch", &epoch)
	switch td.Cmd {
	case "new":
		var shard int64
		td.MaybeScanArgs(t, "shard", &shard)
		*h = *newShardDriverEnv()
		h.d = NewShardDriver(ShardDriverConfig{Job: "j", Shard: shard, Node: "n1"})
		return "ok (the clock at 0)"
	case "tick":
		var d string
		td.ScanArgs(t, "d", &d)
		h.now = h.now.Add(h.duration(t, d))
		return fmt.Sprintf("now %v", h.now.Sub(t0))
	case "assign":
		var shard, resume int64
		td.MaybeScanArgs(t, "shard", &shard)
		td.MaybeScanArgs(t, "resume", &resume)
		h.step(t, &out, ShardDriverAssign{Job: job, Shard: shard, Epoch: epoch, ResumeFrom: resume, Buddy: td.HasArg("buddy")})
	case "built":
		var e ShardDriverBuilt
		e.Rule.MaxIter = 1000
		td.MaybeScanArgs(t, "max-iter", &e.Rule.MaxIter)
		td.MaybeScanArgs(t, "tol", &e.Rule.Tol)
		td.MaybeScanArgs(t, "stall-tol", &e.Rule.StallTol)
		td.MaybeScanArgs(t, "stall-window", &e.Rule.StallWindow)
		td.MaybeScanArgs(t, "every", &e.CheckpointEvery)
		if arg, ok := td.Arg("history"); ok {
			for i := range arg.Vals {
				var v float64
				arg.Scan(t, i, &v)
				e.History = append(e.History, v)
			}
		}
		// The stand-in is built with the driver's machine: from the start, or at the
		// iteration resumed from (no initialisation then).
		h.m = &shardDriverToy{it: h.d.resumeFrom, init: h.d.resumeFrom == 0, decay: 0.5, objInit: 100}
		td.MaybeScanArgs(t, "decay", &h.m.decay)
		if td.HasArg("iter") {
			var d string
			td.ScanArgs(t, "iter", &d)
			h.iter = h.duration(t, d)
		}
		h.step(t, &out, e)
	case "start":
		granted := h.granted(t, td)
		h.step(t, &out, ShardDriverStart{Job: job, Epoch: epoch, Granted: granted, At: h.now})
	case "grant":
		h.step(t, &out, ShardDriverGrant{Job: job, Epoch: epoch, Granted: h.granted(t, td)})
	case "finish":
		var at int64
		td.ScanArgs(t, "at", &at)
		h.step(t, &out, ShardDriverStopAt{Job: job, Epoch: epoch, At: at})
	case "checkpoint-at":
		var it int64
		td.ScanArgs(t, "it", &it)
		h.step(t, &out, ShardDriverCheckpointAt{Job: job, Epoch: epoch, Iteration: it})
	case "chunk":
		seq, lo := h.d.seq, h.d.cfg.Shard
		td.MaybeScanArgs(t, "seq", &seq)
		td.MaybeScanArgs(t, "lo", &lo)
		h.step(t, &out, ShardDriverResultChunk{Job: job, Epoch: epoch, Seq: seq, Lo: lo, Hi: lo + 1})
	case "reduced":
		h.step(t, &out, ShardDriverReduced{At: h.now})
	case "written", "stored":
		var it int64
		td.ScanArgs(t, "it", &it)
		var err error
		if td.HasArg("error") {
			var msg string
			td.ScanArgs(t, "error", &msg)
			err = errors.New(msg)
		}
		if td.Cmd == "written" {
			h.step(t, &out, ShardDriverCheckpointWritten{Epoch: epoch, Iteration: it, Data: []byte("ckpt"), Err: err, At: h.now})
		} else {
			h.step(t, &out, ShardDriverCheckpointStored{Job: job, Shard: h.d.cfg.Shard, Iteration: it, Err: err, At: h.now})
		}
	case "fail":
		h.step(t, &out, ShardDriverFailed{})
	case "bogus":
		h.step(t, &out, struct{ What string }{"bogus"})
	case "boundary":
		// The end of an iteration fed as is, whatever the driver asked.
		var it int64
		td.ScanArgs(t, "it", &it)
		h.step(t, &out, ShardDriverBoundary{Iteration: it, Objective: 1, Initial: 2, At: h.now})
	case "step":
		// One step of the stand-in machine, as Ready.Advance asked.
		h.held = false
		h.step(t, &out, h.machineStep())
	case "run":
		h.run(t, td, &out)
	default:
		t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	}
	return out.String()
}

// granted reads a grant: an iteration, or "none" for NoGrant.
func (h *shardDriverEnv) granted(t *testing.T, td *datadriven.TestData) int64 {
	var g string
	td.ScanArgs(t, "granted", &g)
	if g == "none" {
		return NoGrant
	}
	var n int64
	if _, err := fmt.Sscan(g, &n); err != nil {
		t.Fatalf("%s: granted=%q: %v", td.Pos, g, err)
	}
	return n
}

func (h *shardDriverEnv) duration(t *testing.T, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// machineStep steps the stand-in: the time an iteration takes passes at each boundary.
func (h *shardDriverEnv) machineStep() any {
	ev := h.m.next()
	if b, ok := ev.(ShardDriverBoundary); ok {
		h.now = h.now.Add(h.iter)
		b.At = h.now
		return b
	}
	return ev
}

// step feeds one event and prints what the driver asked for.
func (h *shardDriverEnv) step(t *testing.T, out *strings.Builder, ev any) {
	if err := h.d.Step(ev); err != nil {
		fmt.Fprintf(out, "error: %v\n", err)
	}
	rd := h.d.Ready()
	h.note(rd)
	h.print(out, rd, "")
}

// note keeps whether a Ready asked to step the machine.
func (h *shardDriverEnv) note(rd ShardDriverReady) {
	h.waiting = rd.Advance
	if rd.Load != nil || rd.Finish != nil {
		h.held = false // a machine rebuilt, or a run ended: nothing to step on from
	}
}

// run plays the stand-in machine while the driver asks it to step, serving every collective
// at once (a result of the right collective, whole), and prints, for each iteration
// boundary, what the driver asked for there. It stops when the driver asks for nothing more
// (it waits for a grant, or finished), or at iteration until=N, and says where the shard is.
// With verbose it prints every collective too.
func (h *shardDriverEnv) run(t *testing.T, td *datadriven.TestData, out *strings.Builder) {
	until := int64(-1)
	td.MaybeScanArgs(t, "until", &until)
	verbose := td.HasArg("verbose")
	defer h.where(out)
	if h.held {
		h.waiting, h.held = true, false // on from where the last run held the machine
	}
	for h.waiting {
		ev := h.machineStep()
		if err := h.d.Step(ev); err != nil {
			fmt.Fprintf(out, "error: %v\n", err)
			return
		}
		rd := h.d.Ready()
		h.note(rd)
		switch e := ev.(type) {
		case ShardDriverCollective:
			if rd.Partial == nil {
				t.Fatalf("%s: a collective without a partial sent up", td.Pos)
			}
			if verbose {
				fmt.Fprintf(out, "collective %d (init %v): partial seq=%d\n", e.Iteration, e.Init, rd.Partial.Seq)
			}
			if err := h.d.Step(ShardDriverResultChunk{Job: h.d.cfg.Job, Epoch: h.d.epoch, Seq: rd.Partial.Seq, Lo: h.d.cfg.Shard, Hi: h.d.cfg.Shard + 1}); err != nil {
				t.Fatal(err)
			}
			if taken := h.d.Ready(); !taken.TakeChunk {
				t.Fatalf("%s: the chunk of collective %d was not taken", td.Pos, rd.Partial.Seq)
			}
			if err := h.d.Step(ShardDriverReduced{At: h.now}); err != nil {
				t.Fatal(err)
			}
			rd = h.d.Ready()
			h.note(rd)
			if !rd.Deliver || !rd.Advance {
				t.Fatalf("%s: a whole result not delivered", td.Pos)
			}
		case ShardDriverBoundary:
			h.print(out, rd, fmt.Sprintf("it %d", e.Iteration))
			if e.Iteration == until && h.waiting {
				h.waiting, h.held = false, true
				fmt.Fprintf(out, "(the machine is held at the end of %d: the driver asked to step it)\n", until)
				return
			}
		}
	}
}

// where says where the shard is after a run, unless the run ended or is held.
func (h *shardDriverEnv) where(out *strings.Builder) {
	d := h.d
	switch {
	case d.finished || !h.waiting && d.boundary >= 0 && d.boundary < d.granted && (d.finishAt < 0 || d.boundary < d.finishAt):
	case d.awaiting:
		fmt.Fprintf(out, "(awaits the result of collective %d)\n", d.seq)
	case d.granted < 0:
		fmt.Fprintf(out, "(paused at the end of %d)\n", d.boundary)
	case d.boundary >= 0:
		fmt.Fprintf(out, "(waits at the end of %d: granted up to %d)\n", d.boundary, d.granted)
	}
}

// print writes a Ready, one effect a line, after a heading when given (an iteration); a
// Ready that asks for nothing prints "(nothing)" without a heading, and nothing with one
// unless verbose printing asked for it.
func (h *shardDriverEnv) print(out *strings.Builder, rd ShardDriverReady, heading string) {
	var lines []string
	if rd.Load != nil {
		lines = append(lines, fmt.Sprintf("load epoch=%d from=%d", rd.Load.Epoch, rd.Load.ResumeFrom))
	}
	if rd.Superseded != 0 {
		lines = append(lines, fmt.Sprintf("answer: superseded by epoch %d", rd.Superseded))
	}
	if rd.Stale != 0 {
		lines = append(lines, fmt.Sprintf("stale %d", rd.Stale))
	}
	if rd.Partial != nil {
		lines = append(lines, fmt.Sprintf("partial seq=%d", rd.Partial.Seq))
	}
	if rd.TakeChunk {
		lines = append(lines, "take chunk")
	}
	if rd.Deliver {
		lines = append(lines, "deliver")
	}
	for _, c := range rd.Checkpoints {
		l := fmt.Sprintf("checkpoint it=%d epoch=%d keep-uncommitted=%d", c.Iteration, c.Epoch, c.Keep)
		if len(c.History) > 0 {
			l += fmt.Sprintf(" history=%v", c.History)
		}
		lines = append(lines, l)
	}
	for _, c := range rd.Copies {
		lines = append(lines, fmt.Sprintf("copy it=%d to buddy", c.Iteration))
	}
	lines = append(lines, shardDriverSends(rd.Sends)...)
	if rd.Finish != nil {
		lines = append(lines, fmt.Sprintf("finish %s at %d", rd.Finish.Reason, rd.Finish.Iteration))
	}
	if rd.Advance {
		lines = append(lines, "advance")
	}
	if heading != "" {
		if len(lines) == 1 && lines[0] == "advance" {
			return // an iteration like any other
		}
		fmt.Fprintf(out, "%s: %s\n", heading, strings.Join(lines, "; "))
		return
	}
	if len(lines) == 0 {
		lines = []string{"(nothing)"}
	}
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
}

// shardDriverSends describes messages to the coordinator; a run of reports of consecutive
// iterations without news reads as one line.
func shardDriverSends(sends []proto.Message) []string {
	var lines []string
	for i := 0; i < len(sends); i++ {
		switch m := sends[i].(type) {
		case *messages.IterationDone:
			j := i
			for j+1 < len(sends) {
				next, ok := sends[j+1].(*messages.IterationDone)
				if !ok || next.Stop != "" || next.Iteration != sends[j].(*messages.IterationDone).Iteration+1 {
					break
				}
				j++
			}
			last := sends[j].(*messages.IterationDone)
			l := fmt.Sprintf("report it=%d obj=%.4g secs=%.3f", m.Iteration, m.Objective, m.Seconds)
			if j > i {
				l = fmt.Sprintf("report it=%d..%d (%d) secs=%.3f..%.3f", m.Iteration, last.Iteration, j-i+1, m.Seconds, last.Seconds)
			}
			if m.InitSeconds > 0 && i == 0 {
				l += fmt.Sprintf(" init=%.3f", m.InitSeconds)
			}
			if last.Stop != "" {
				l += " stop=" + last.Stop
			}
			lines = append(lines, l)
			i = j
		case *messages.CheckpointDone:
			l := fmt.Sprintf("checkpoint-done it=%d epoch=%d secs=%.3f", m.Iteration, m.Epoch, m.Seconds)
			if m.Error != "" {
				l += fmt.Sprintf(" error=%q", m.Error)
			}
			lines = append(lines, l)
		default:
			lines = append(lines, fmt.Sprintf("send %T", m))
		}
	}
	return lines
}
