package jobctl

import (
	"fmt"
	"time"

	"github.com/didnmf/didnmf/internal/jobctl/internal/bugs"
	"github.com/didnmf/didnmf/messages"
)

// A shard checkpoints at every checkpoint_every-th iteration boundary, or, with the automatic
// cadence (checkpoint_every < 0), at the iteration the coordinator asks (CheckpointAt, see
// Job's autoCheckpoint). It snapshots its machine and the stop rule's history, writes them into
// its node's store and has its buddy keep a copy; only then does it report the checkpoint
// (CheckpointDone, with the seconds it took) to the coordinator, which commits an iteration when
// every shard reported it and keeps the last KeepCheckpoints committed ones.

// A node keeps a shard's uncommitted checkpoints (own copies and buddy copies alike) up to a
// bound, for when commits stall (a node that cannot store them, a lost buddy): with fixed
// intervals shards may run that many checkpoints ahead of the commits; with the automatic
// cadence checkpoints are seconds apart and commits follow within milliseconds, so a few
// suffice.
const (
	shardDriverMaxUncommitted     = 20
	shardDriverMaxUncommittedAuto = 3
)

// ShardDriverUncommittedKept is how many uncommitted checkpoints of a shard a node keeps (the
// newest ones, beyond the newest committed) for a job that checkpoints every `every`
// iterations (negative: automatic).
func ShardDriverUncommittedKept(every int64) int {
	if every < 0 {
		return shardDriverMaxUncommittedAuto
	}
	return shardDriverMaxUncommitted
}

// checkpointDue tells whether the shard checkpoints at the end of iteration it.
func (d *ShardDriver) checkpointDue(it int64) bool {
	return d.every > 0 && it%d.every == 0 || d.every < 0 && it == d.ckptAt
}

// checkpoint asks for a checkpoint at the boundary of iteration it, taken at `at`.
func (d *ShardDriver) checkpoint(it int64, at time.Time) {
	if d.writing == nil {
		d.writing = map[int64]time.Time{}
	}
	d.writing[it] = at
	d.ready.Checkpoints = append(d.ready.Checkpoints, ShardDriverCheckpoint{Epoch: d.epoch, Iteration: it,
		History: d.stopper.History(), Keep: ShardDriverUncommittedKept(d.every)})
}

// onWritten takes a checkpoint written on the shard's node: it goes to the buddy, or, with no
// buddy (or on an error), is reported at once.
func (d *ShardDriver) onWritten(e ShardDriverCheckpointWritten) {
	if e.Epoch != d.epoch {
		return
	}
	if e.Err != nil || !d.buddy {
		d.reportCheckpoint(e.Iteration, e.Err, e.At.Sub(d.writing[e.Iteration]))
		return
	}
	d.ready.Copies = append(d.ready.Copies, ShardDriverCopy{Iteration: e.Iteration, Data: e.Data})
	if d.cfg.Bugs.Has(bugs.ReportBeforeBuddy) {
		d.reportCheckpoint(e.Iteration, nil, e.At.Sub(d.writing[e.Iteration]))
	}
}

// onStored takes the buddy's answer about a checkpoint this assignment took.
func (d *ShardDriver) onStored(e ShardDriverCheckpointStored) {
	if e.Job != d.cfg.Job || e.Shard != d.cfg.Shard {
		return
	}
	taken, ok := d.writing[e.Iteration]
	if !ok {
		return
	}
	d.reportCheckpoint(e.Iteration, e.Err, e.At.Sub(taken))
}

// reportCheckpoint tells the coordinator about a checkpoint: kept on the node and its buddy,
// in took, or why not.
func (d *ShardDriver) reportCheckpoint(it int64, err error, took time.Duration) {
	delete(d.writing, it)
	done := &messages.CheckpointDone{JobId: d.cfg.Job, Epoch: d.epoch, Shard: d.cfg.Shard, Iteration: it, Seconds: took.Seconds()}
	if err != nil {
		done.Error = fmt.Sprintf("shard %d on node %s: checkpoint at iteration %d: %v", d.cfg.Shard, d.cfg.Node, it, err)
	}
	d.ready.Sends = append(d.ready.Sends, done)
}
