package jobctl

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/didnmf/didnmf/messages"
)

// The events Step takes besides the job's wire messages (*messages.Placed, IterationDone,
// ShardDone, ReducerDone, CheckpointDone, ActorFailed and JobError).

// Node is a node the job may be placed on: its member name (for messages) and actor address.
type Node struct {
	Name, Addr string
}

// Begin starts a new job once its spec was checked against the data: the shape, what each
// shard reserves, the candidate nodes and their answers to a ping.
type Begin struct {
	// Samples and Features are N and M; Density the stored entries over M x N (0: dense or
	// unknown).
	Samples, Features int
	Density           float64
	// Reserve is the memory each shard reserves on its node.
	Reserve []int64
	// Nodes are the candidates: the nodes the spec names (Fixed; shards go round-robin over
	// them), or the cluster's live workers (placed by cluster.Place). Pongs are their answers
	// to a ping, nil for a node that did not answer.
	Nodes []Node
	Pongs []*messages.Pong
	Fixed bool
	// Unreachable, for Fixed nodes, says which did not answer (the job fails).
	Unreachable string
	// Workers are the cluster's live workers (actor addresses) when the job begins.
	Workers []string
	// OwnsPartial is set when the runtime created the job's partial output files: they are
	// removed if the job fails.
	OwnsPartial bool
}

// TakeOver resumes a job from the state its lost coordinator replicated to this node.
type TakeOver struct {
	State *messages.JobState
	// Cause says why (the old coordinator's node left or died).
	Cause   string
	Workers []string
}

// Abort fails the job with an error for its client (a spec the data refutes, a setup that
// failed).
type Abort struct {
	Kind    messages.ErrorKind
	Message string
	// Err, when set, is the error itself: the client's JobError names its field when it is
	// a *usererr.Error (Message is then its message).
	Err error
}

// Cancel is the job's owner canceling it (the runtime checked the sender owns the job). By
// says who, for the job's error ("its owner alice", "node n2"; "": "the client").
type Cancel struct{ By string }

// LeaseRenewed is the job's client renewing its lease (checked as for Cancel).
type LeaseRenewed struct{}

// Tick is the clock: the control checks the client's lease and the node's cap on job time.
type Tick struct{}

// TimerFired is a timer the control asked for (Ready.Timers) coming due.
type TimerFired struct{ Timer Timer }

// Pongs are the answers to a PingRequest: one per node, nil where none came.
type Pongs struct {
	Epoch uint64
	Nodes []string
	Pongs []*messages.Pong
}

// OutputCommitted tells how the commit of the output files (Ready.Commit) went.
type OutputCommitted struct{ Err error }

// MemberEvent is a change of the cluster's membership.
type MemberEvent struct {
	// Join or leave (Join false); Dead for a member declared dead rather than leaving.
	Join, Dead bool
	// Worker is set for a member that runs shards (not a client).
	Worker     bool
	Name, Addr string
	// Workers are the cluster's live workers after the change.
	Workers []string
}

// Step feeds the control one event at time now. Messages of another job, or of an epoch that
// ended, are dropped here (counted as stale where they count): the handlers see only current
// ones. An event the control does not take is an error.
func (j *Job) Step(now time.Time, ev any) error {
	epoch := j.epoch
	defer j.watch(now, epoch)
	j.now = now
	if j.submitted.IsZero() {
		j.submitted = now
	}
	switch e := ev.(type) {
	case Begin:
		j.begin(now, e)
	case TakeOver:
		j.takeOver(now, e)
	case Abort:
		j.failWith(e.Kind, e.Message, e.Err)
	case Cancel:
		by := e.By
		if by == "" {
			by = "the client"
		}
		j.fail(messages.ErrorKind_ERROR_KIND_CANCELED, "job canceled by "+by)
	case LeaseRenewed:
		_ = j.lease.Step(LeaseRenewalCame{At: now})
	case Tick:
		j.onTick(now)
	case TimerFired:
		j.onTimer(now, e.Timer)
	case Pongs:
		j.onPongs(now, e)
	case OutputCommitted:
		j.onCommitted(now, e.Err)
	case MemberEvent:
		j.onMember(now, e)
	case *messages.Placed:
		if e.JobId == j.id && !j.over && e.Superseded > j.epoch {
			j.superseded(e.Superseded)
			return nil
		}
		if e.JobId == j.id && !j.over && e.Ended {
			j.log(warn, "the job ended already on a node it was placed on: another coordinator ran it (a partition that healed)",
				slog.String("node", e.GetPid().GetAddress()), slog.String("actor", e.Actor))
			j.end() // ended is final: the actors this one placed stop too
			return nil
		}
		if j.accept(now, e.JobId, e.Epoch) && !j.running {
			j.onPlaced(now, e)
		}
	case *messages.IterationDone:
		if j.accept(now, e.JobId, e.Epoch) && j.running {
			j.onIteration(now, e)
		}
	case *messages.ShardDone:
		if j.accept(now, e.JobId, e.Epoch) {
			j.onShardDone(e)
		}
	case *messages.ReducerDone:
		if j.accept(now, e.JobId, e.Epoch) {
			j.onReducerDone(now, e)
		}
	case *messages.CheckpointDone:
		if j.accept(now, e.JobId, e.Epoch) {
			j.onCheckpointDone(now, e)
		}
	case *messages.ActorFailed:
		if e.JobId == j.id && !j.over {
			what := e.Actor
			switch e.Role {
			case messages.ActorRole_ACTOR_ROLE_SHARD:
				what = fmt.Sprintf("shard %d (%s)", e.Shard, e.Actor)
			case messages.ActorRole_ACTOR_ROLE_REDUCER:
				what = "reducer " + e.Actor
			}
			j.failure(now, CauseActorPanic, what+" panicked on node "+e.Node+" ("+e.Reason+")", nil)
		}
	case *messages.JobError:
		if e.JobId == j.id {
			j.fail(e.Kind, e.Message)
		}
	default:
		return fmt.Errorf("jobctl: a job takes no %T", ev)
	}
	return nil
}

// accept tells whether a message of job and epoch is for this job's current epoch, while it
// runs; such a message is progress (see the stall watchdog).
func (j *Job) accept(now time.Time, job string, epoch uint64) bool {
	if job != j.id || epoch != j.epoch || j.over {
		return false
	}
	j.progressAt = now
	return true
}

// superseded ends this control without a word to the client: another coordinator took the
// job over (this one was cut off, or thought to be dead).
func (j *Job) superseded(theirs uint64) {
	j.log(warn, "superseded by a coordinator that took the job over", uint64Attr("epoch", j.epoch), uint64Attr("theirs", theirs))
	j.quit()
}

// quit ends this control and nothing else: the job is another coordinator's (or ended). It
// stops none of the job's actors: a host that has not heard of the successor yet would take
// a stop from this one, and the successor would find the job ended.
func (j *Job) quit() {
	j.over = true
	j.ready.Over = true
}

// watch arms the stall timer while the job's actors are placed or run (not while it waits
// for a quorum, for pings or for its output), and marks a new epoch as progress.
func (j *Job) watch(now time.Time, before uint64) {
	if j.epoch != before {
		j.progressAt, j.reportAt = now, time.Time{}
	}
	if j.cfg.StallTimeout <= 0 || j.stallArmed || !j.watched() {
		return
	}
	j.stallArmed = true
	after := j.stallAfter()
	if j.stallNext > 0 {
		after = min(after, j.stallNext)
		j.stallNext = 0
	}
	j.ready.Timers = append(j.ready.Timers, Timer{Kind: TimerStall, Epoch: j.epoch, After: after})
}

// watched tells whether the job should be progressing now.
func (j *Job) watched() bool {
	return j.begun && !j.over && !j.ft.paused && j.ft.pending == nil && j.committing == nil && j.shards != nil
}

// stallAfter is how long the job may go without progress: StallTimeout, or StallFactor of
// its slowest iteration or initialisation (recoveries left out). Before the epoch's first
// report the shards may be initialising, which can take minutes at a high rank and shows no
// progress: StallFactor times StallTimeout then.
func (j *Job) stallAfter() time.Duration {
	floor := j.cfg.StallTimeout
	if j.reportAt.IsZero() {
		floor *= StallFactor
	}
	return max(floor, StallFactor*j.slowest)
}

// onStall rolls the job back when it did not progress for stallAfter, and checks again
// later otherwise.
func (j *Job) onStall(now time.Time) {
	j.stallArmed = false
	if !j.watched() {
		return
	}
	quiet := now.Sub(j.progressAt)
	if quiet >= j.stallAfter() {
		j.failure(now, CauseStall, fmt.Sprintf("the job made no progress for %v (a message lost?)", quiet.Round(time.Millisecond)), nil)
		return
	}
	j.stallNext = j.stallAfter() - quiet // check again when it would be due
}
