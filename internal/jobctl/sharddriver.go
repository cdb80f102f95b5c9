package jobctl

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/internal/jobctl/internal/bugs"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

// Shard 0 reports its iterations (IterationDone) to the coordinator, which passes each on to
// the client as progress. In a job without a time limit it sends them in bursts, at the first
// iteration end ShardDriverReportInterval after the last burst or when ShardDriverMaxReports
// wait, instead of one message each way per iteration: on small iterations those two messages
// woke two more processes (coordinator and client) per allreduce, and an allreduce between 3
// processes took about 0.4 ms with them, 0.25 ms without. Every iteration is still reported,
// in order, with the seconds taken at its end; the last ones before a stop at once. A job with
// a time limit reports every iteration at once: the coordinator grants iterations and applies
// the limit from the reports. When a node fails, the coordinator may not have heard of the
// iterations of the last ShardDriverReportInterval: its count of iterations redone is that
// much lower.
const (
	ShardDriverReportInterval = 10 * time.Millisecond
	ShardDriverMaxReports     = 64
)

// ShardDriverConfig is what a shard's driver knows of its shard for the shard's life.
type ShardDriverConfig struct {
	// Job and Shard name the shard; messages of another job or shard are stale.
	Job   string
	Shard int64
	// Node is the address of the shard's node, named in the errors it reports.
	Node string
	// Bugs plants deliberate bugs (jobsim's TestSimulatorFindsPlantedBugs); production leaves
	// it empty.
	Bugs bugs.Set
}

// ShardDriver is the control of one shard actor as a deterministic state machine: which
// assignment (epoch) it serves, when its numeric machine runs (grants, pauses), when it stops
// (its deterministic stop rule, or the coordinator's time limit), when it checkpoints and
// how many uncommitted checkpoints its node keeps, and how shard 0 batches its iteration
// reports. It decides; its runtime computes: the runtime owns the block of X and the kernels
// machine, steps it when Ready says Advance, and feeds back what the machine reached as
// ShardDriverCollective or ShardDriverBoundary. Time comes in the events; the driver reads no
// clock, sends nothing and touches no file.
//
// Feed it events with Step and carry out what Ready returns, in the order of its fields,
// until Ready is empty:
//
//	d := jobctl.NewShardDriver(cfg)
//	d.Step(jobctl.ShardDriverAssign{...})      // Ready.Load: build the machine
//	d.Step(jobctl.ShardDriverBuilt{...})       // the machine is built (from a checkpoint)
//	d.Step(jobctl.ShardDriverStart{...})       // Ready.Advance: step the machine
//	st := machine.Next()                       // then ShardDriverCollective / ShardDriverBoundary
//
// A ShardDriver is not safe for concurrent use: one goroutine (the shard actor's, or a
// simulation's) owns it.
type ShardDriver struct {
	cfg ShardDriverConfig

	epoch      uint64 // the assignment's epoch (0: none yet)
	resumeFrom int64  // the checkpoint the assignment resumes from (0: the start)
	buddy      bool   // checkpoints are copied to a buddy node
	loading    bool   // a Load was asked and its machine is not built yet
	built      bool   // the machine is built: the shard may start

	stopper *kernels.Stopper
	every   int64 // checkpoint_every: > 0 fixed, < 0 automatic, 0 none

	running  bool
	started  time.Time
	granted  int64 // the last iteration the shard may run to (NoGrant: any, -1: paused)
	finishAt int64 // the iteration the coordinator's time limit stops it at (-1: none)
	boundary int64 // the iteration the machine sits at the end of (-1: none)
	finished bool
	lastIter int64
	// initDone is from the start to the end of the initialisation: the later of its last
	// collective's result and the machine's InitEnded (reported with iteration 1). A cluster
	// reports shard 0's; a shard that drew its C later shows in iteration 1's allreduce wait.
	initDone time.Duration

	seq       uint64 // the last collective sent up
	awaiting  bool   // the result of collective seq is awaited
	awaitInit bool   // ... and it is an initialisation collective

	reports    []*messages.IterationDone // shard 0's reports not sent yet
	reportedAt time.Time                 // when it last sent some

	ckptAt  int64               // the iteration the coordinator asked a checkpoint at (automatic cadence)
	writing map[int64]time.Time // checkpoints taken and not reported, by iteration: when they were taken

	ready ShardDriverReady
}

// NewShardDriver returns the driver of a shard with no assignment yet: Step it the shard's
// assignment (a supervisor's restart of a shard that panicked waits for the coordinator's
// recovery assignment instead).
func NewShardDriver(cfg ShardDriverConfig) *ShardDriver {
	d := &ShardDriver{cfg: cfg}
	d.reset(0, 0, false)
	return d
}

// reset forgets everything of the assignment served so far: a new one begins.
func (d *ShardDriver) reset(epoch uint64, resumeFrom int64, buddy bool) {
	*d = ShardDriver{cfg: d.cfg, epoch: epoch, resumeFrom: resumeFrom, buddy: buddy, boundary: -1, finishAt: -1, ready: d.ready}
}

// ShardDriverLoad asks for the shard's machine to be built on its block of X, for the
// assignment of Epoch: from the start (ResumeFrom 0) or from its checkpoint at iteration
// ResumeFrom. A shard reassigned in place keeps its block when its columns did not change.
// Once built, Step ShardDriverBuilt; a failure is reported to the coordinator (Placed with an
// error), which answers with a new assignment or ends the job.
type ShardDriverLoad struct {
	Epoch      uint64
	ResumeFrom int64
}

// ShardDriverPartial asks for the machine's contribution to the collective it reached to be
// sent up the reduce tree, numbered Seq.
type ShardDriverPartial struct{ Seq uint64 }

// ShardDriverCheckpoint asks for a checkpoint of the machine at the iteration boundary it
// sits at: snapshot it now (before the machine steps again), with the stop rule's History,
// write it into the node's store as the shard's own copy, then drop the shard's own copies
// newer than the node's newest committed checkpoint beyond the newest Keep (commits may stall;
// committed copies go as the coordinator's CheckpointCommitted says). Once written, Step
// ShardDriverCheckpointWritten.
type ShardDriverCheckpoint struct {
	Epoch     uint64
	Iteration int64
	History   []float64
	Keep      int
}

// ShardDriverCopy asks for the checkpoint written at Iteration (its bytes, Data) to be sent to
// the shard's buddy, whose answer comes back as ShardDriverCheckpointStored.
type ShardDriverCopy struct {
	Iteration int64
	Data      []byte
}

// ShardDriverFinish ends the shard's run at the end of Iteration for Reason: its factors go to
// the client (or the shared output), and once they are acknowledged the shard reports
// ShardDone with Iteration and Reason.
type ShardDriverFinish struct {
	Reason    kernels.StopReason
	Iteration int64
}

// ShardDriverReady is what a shard's driver asks its runtime to do after a Step, in the order
// of its fields.
type ShardDriverReady struct {
	// Load, when set, asks for the machine to be (re)built.
	Load *ShardDriverLoad
	// Superseded, when not 0, asks to answer the sender of a stale assignment that this
	// shard serves that later epoch (Placed with Superseded).
	Superseded uint64
	// Stale counts the messages dropped as of another job, shard, epoch or collective.
	Stale int
	// Partial, when set, asks for the machine's pending contribution to be sent up.
	Partial *ShardDriverPartial
	// TakeChunk asks to take the chunk of the awaited result just stepped; once the result is
	// whole (and of the length the collective gives), Step ShardDriverReduced.
	TakeChunk bool
	// Deliver asks for the awaited result, now whole, to be given to the machine.
	Deliver bool
	// Checkpoints and Copies ask for checkpoints to be taken and copied to the buddy.
	Checkpoints []ShardDriverCheckpoint
	Copies      []ShardDriverCopy
	// Sends are messages for the shard's coordinator (IterationDone, CheckpointDone), counted
	// among the shard's messages, in order.
	Sends []proto.Message
	// Finish, when set, ends the run.
	Finish *ShardDriverFinish
	// Advance asks for the machine to be stepped once (kernels.Machine.Next), and what it
	// reached stepped back: ShardDriverCollective, ShardDriverBoundary, or ShardDriverFailed.
	Advance bool
}

// Empty tells whether the Ready asks for nothing.
func (r *ShardDriverReady) Empty() bool {
	return r.Load == nil && r.Superseded == 0 && r.Stale == 0 && r.Partial == nil && !r.TakeChunk && !r.Deliver &&
		len(r.Checkpoints) == 0 && len(r.Copies) == 0 && len(r.Sends) == 0 && r.Finish == nil && !r.Advance
}

// Ready returns what the driver asks for since the last call, and forgets it.
func (d *ShardDriver) Ready() ShardDriverReady {
	r := d.ready
	d.ready = ShardDriverReady{}
	return r
}

// Epoch is the epoch of the assignment the shard serves (0: none yet).
func (d *ShardDriver) Epoch() uint64 { return d.epoch }

// Step feeds the driver one event. An event it does not know, or one its runtime could not
// have sent in the driver's state (a boundary while a collective's result is awaited), is an
// error and changes nothing; a message of another job, shard or epoch is counted in
// Ready.Stale and changes nothing.
func (d *ShardDriver) Step(ev any) error {
	switch e := ev.(type) {
	case ShardDriverAssign:
		d.assign(e)
	case ShardDriverBuilt:
		return d.onBuilt(e)
	case ShardDriverStart:
		if d.mine(e.Job, e.Epoch) && d.built && !d.running {
			d.running, d.started, d.granted = true, e.At, e.Granted
			d.ready.Advance = !d.finished
		}
	case ShardDriverGrant:
		if d.mine(e.Job, e.Epoch) {
			d.granted = max(d.granted, e.Granted)
			if d.boundary >= 0 && !d.finished && d.boundary < d.granted {
				d.ready.Advance = true
			}
		}
	case ShardDriverStopAt:
		if d.mine(e.Job, e.Epoch) {
			d.stopAt(e.At)
		}
	case ShardDriverCheckpointAt:
		if d.mine(e.Job, e.Epoch) {
			d.ckptAt = e.Iteration
		}
	case ShardDriverCollective:
		return d.onCollective(e)
	case ShardDriverResultChunk:
		d.onChunk(e)
	case ShardDriverReduced:
		return d.onReduced(e)
	case ShardDriverBoundary:
		return d.onBoundary(e)
	case ShardDriverFailed:
		d.finished = true
	case ShardDriverCheckpointWritten:
		d.onWritten(e)
	case ShardDriverCheckpointStored:
		d.onStored(e)
	default:
		return fmt.Errorf("shard driver: unknown event %T", ev)
	}
	return nil
}

// mine tells whether a message belongs to the shard's job and epoch; others count as stale.
func (d *ShardDriver) mine(job string, epoch uint64) bool {
	if job != d.cfg.Job || epoch != d.epoch {
		d.ready.Stale++
		return false
	}
	return true
}

// assign takes an assignment: a later epoch than the shard serves rolls it back in place to
// the assignment's checkpoint (or its start); an earlier one is answered that it is
// superseded.
func (d *ShardDriver) assign(e ShardDriverAssign) {
	stale := e.Epoch <= d.epoch
	if d.cfg.Bugs.Has(bugs.StaleAssignment) {
		stale = e.Epoch == d.epoch
	}
	if e.Job != d.cfg.Job || e.Shard != d.cfg.Shard || stale {
		d.ready.Stale++
		if e.Job == d.cfg.Job && e.Epoch < d.epoch {
			d.ready.Superseded = d.epoch
		}
		return
	}
	d.reset(e.Epoch, e.ResumeFrom, e.Buddy)
	d.loading = true
	d.ready.Load = &ShardDriverLoad{Epoch: e.Epoch, ResumeFrom: e.ResumeFrom}
}

// onBuilt takes the machine the runtime built for the current assignment, with the stop rule
// and checkpoint cadence of the job's spec and, resuming from a checkpoint, its stop rule's
// history.
func (d *ShardDriver) onBuilt(e ShardDriverBuilt) error {
	if !d.loading {
		return fmt.Errorf("shard driver: a machine built without a load asked for it")
	}
	d.loading, d.built = false, true
	d.every = e.CheckpointEvery
	d.stopper = kernels.NewStopper(e.Rule)
	if d.resumeFrom > 0 {
		if !d.cfg.Bugs.Has(bugs.ResumeWithoutHistory) {
			d.stopper.Restore(e.History)
		}
		d.lastIter = d.resumeFrom
	}
	return nil
}

// stopAt takes the coordinator's Finish: stop at iteration at (its time limit), or, for a
// negative at (it lost its quorum), pause at the next boundary and wait for a recovery
// assignment (a Grant of this epoch never comes).
func (d *ShardDriver) stopAt(at int64) {
	if at < 0 {
		d.granted = -1
		return
	}
	d.finishAt = at
	if d.boundary >= 0 && !d.finished && d.boundary >= d.finishAt {
		d.finish(kernels.StopTimeLimit, time.Time{})
	}
}

// stepping checks that the machine may have been stepped: the shard runs, has not finished
// and awaits no collective's result.
func (d *ShardDriver) stepping(what string) error {
	if !d.running || d.finished || d.awaiting {
		return fmt.Errorf("shard driver: %s while the machine is not stepped (running %v, finished %v, awaiting a result %v)",
			what, d.running, d.finished, d.awaiting)
	}
	return nil
}

// onCollective sends the machine's contribution to a collective up the tree.
func (d *ShardDriver) onCollective(e ShardDriverCollective) error {
	if err := d.stepping("a collective"); err != nil {
		return err
	}
	d.boundary = -1
	d.seq++
	d.awaiting, d.awaitInit = true, e.Init
	d.ready.Partial = &ShardDriverPartial{Seq: d.seq}
	return nil
}

// onChunk takes a chunk of the awaited collective's result; a chunk of another one is stale.
func (d *ShardDriver) onChunk(e ShardDriverResultChunk) {
	if !d.mine(e.Job, e.Epoch) {
		return
	}
	if !d.awaiting || e.Seq != d.seq || e.Lo != d.cfg.Shard || e.Hi != d.cfg.Shard+1 {
		d.ready.Stale++
		return
	}
	d.ready.TakeChunk = true
}

// onReduced resumes the machine with the awaited result.
func (d *ShardDriver) onReduced(e ShardDriverReduced) error {
	if !d.awaiting {
		return fmt.Errorf("shard driver: a result of collective %d when none is awaited", d.seq)
	}
	d.awaiting = false
	if d.finished {
		return nil // it failed meanwhile: the machine stays where it is
	}
	if d.awaitInit {
		d.initDone = e.At.Sub(d.started)
	}
	d.ready.Deliver = true
	d.ready.Advance = true
	return nil
}

// onBoundary decides at the end of an iteration: whether the stop rule ends the run, whether
// to checkpoint, whether shard 0 reports now or holds its report, and whether the machine
// steps on, waits for a grant, or finishes.
func (d *ShardDriver) onBoundary(e ShardDriverBoundary) error {
	if err := d.stepping("an iteration boundary"); err != nil {
		return err
	}
	d.boundary, d.lastIter = e.Iteration, e.Iteration
	if e.Iteration == 1 && e.InitEnded.Sub(d.started) > d.initDone && !e.InitEnded.After(e.At) { // zero InitEnded: far before
		d.initDone = e.InitEnded.Sub(d.started)
	}
	stop, why := d.stopper.Observe(int(e.Iteration), e.Objective, e.Initial, 0)
	if !stop && d.checkpointDue(e.Iteration) {
		d.checkpoint(e.Iteration, e.At)
	}
	if d.cfg.Shard == 0 {
		d.report(e, stop, why)
	}
	switch {
	case stop:
		d.finish(why, e.At)
	case d.finishAt >= 0 && d.boundary >= d.finishAt:
		d.finish(kernels.StopTimeLimit, e.At)
	case d.boundary >= d.granted && !d.cfg.Bugs.Has(bugs.PastGrant):
		// wait for a Grant or a Finish
	default:
		d.ready.Advance = true
	}
	return nil
}

// report queues shard 0's report of an iteration and sends the queue when it is due: at a
// stop, in a job with grants or a time limit (the coordinator decides from the reports), or
// in bursts of ShardDriverMaxReports or every ShardDriverReportInterval.
func (d *ShardDriver) report(e ShardDriverBoundary, stop bool, why kernels.StopReason) {
	done := &messages.IterationDone{JobId: d.cfg.Job, Epoch: d.epoch, Shard: d.cfg.Shard, Iteration: e.Iteration,
		Objective: e.Objective, Initial: e.Initial, Seconds: e.At.Sub(d.started).Seconds(), InitSeconds: d.initDone.Seconds()}
	if e.Mask != nil {
		done.Mask, done.TestSse, done.InitialTestSse = e.Mask, e.TestSSE, e.InitialTestSSE
	}
	if stop {
		done.Stop = string(why)
	}
	d.reports = append(d.reports, done)
	if stop || d.granted != NoGrant || d.finishAt >= 0 || len(d.reports) >= ShardDriverMaxReports || e.At.Sub(d.reportedAt) >= ShardDriverReportInterval {
		d.flushReports(e.At)
	}
}

// flushReports sends the reports held, oldest first.
func (d *ShardDriver) flushReports(at time.Time) {
	for _, r := range d.reports {
		d.ready.Sends = append(d.ready.Sends, r)
	}
	d.reports = nil
	d.reportedAt = at
}

// finish ends the run at the current boundary: the held reports go first.
func (d *ShardDriver) finish(why kernels.StopReason, at time.Time) {
	d.flushReports(at)
	d.finished = true
	d.ready.Finish = &ShardDriverFinish{Reason: why, Iteration: d.lastIter}
}
