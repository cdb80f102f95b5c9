package jobctl

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

// onShardDone records a shard that ended; once all did, at the same iteration and for the
// same reason, the reducers are told to stop.
func (j *Job) onShardDone(m *messages.ShardDone) {
	if m.Error != "" {
		j.fail(kindFailure, m.Error)
		return
	}
	if _, dup := j.done[m.Shard]; dup || m.Shard < 0 || m.Shard >= int64(len(j.shards)) {
		return
	}
	if sse, sq := m.TestSseOfSquares, m.TestSqNormOfSquares; !(sse >= 0 && sq >= 0) || math.IsInf(sse, 0) || math.IsInf(sq, 0) {
		j.fail(kindFailure, fmt.Sprintf("shard %d reported a held-out error of squares %v of %v: not finite numbers >= 0", m.Shard, sse, sq))
		return
	}
	for _, d := range j.done {
		if d.Iteration != m.Iteration || d.Stop != m.Stop {
			j.fail(kindFailure, fmt.Sprintf("shard %d ended at iteration %d (%s), shard %d at %d (%s)", m.Shard, m.Iteration, m.Stop, d.Shard, d.Iteration, d.Stop))
			return
		}
		break
	}
	j.done[m.Shard] = m
	addCounters(&j.counters, m.Counters)
	if len(j.done) < len(j.shards) {
		return
	}
	for _, r := range j.reducers {
		j.send(r, &messages.StopJob{JobId: j.id})
	}
}

// onReducerDone counts the reducers that stopped; the last one completes the job.
func (j *Job) onReducerDone(now time.Time, m *messages.ReducerDone) {
	if len(j.done) < len(j.shards) || j.committing != nil {
		return
	}
	addCounters(&j.counters, m.Counters)
	j.reducerDone++
	if j.reducerDone < len(j.reducers) {
		return
	}
	addCounters(&j.counters, &j.own)
	j.closeHistory(now)
	res := &messages.JobResult{JobId: j.id, M: int64(j.m), N: int64(j.n), K: j.sub.GetSpec().GetRank(), Shards: int64(len(j.shards)),
		Initial: j.initial, Objective: j.objective, Seconds: now.Sub(j.started).Seconds(), IterSeconds: j.iterSec,
		History: j.history, Counters: proto.Clone(&j.counters).(*messages.Counters),
		InitCollectives: j.counters.InitReductions, Collectives: j.counters.Reductions,
		Recoveries: j.ft.recoveries, Checkpoints: j.ft.checkpoints, CheckpointSeconds: j.ft.ckptSeconds,
		Mask: j.mask, TestSse: j.testSSE, Epoch: j.epoch}
	for _, s := range j.shards {
		res.ShardNodes = append(res.ShardNodes, s.Address)
	}
	var sseOfSquares, sqNormOfSquares float64
	for s := int64(0); s < int64(len(j.shards)); s++ {
		d := j.done[s]
		sseOfSquares += d.TestSseOfSquares
		sqNormOfSquares += d.TestSqNormOfSquares
		res.Iterations, res.Stop = d.Iteration, d.Stop
		res.Residual += d.Residual
		res.SqNormX += d.SqNormX
		res.XBytes += d.XBytes
		res.Threads = max(res.Threads, d.Threads)
		res.FloatsPerIteration += d.FloatsPerIteration
		switch {
		case s == 0:
			res.Storage = d.Storage
		case d.Storage != res.Storage:
			res.Storage = "mixed"
		}
	}
	spec := j.sub.GetSpec()
	if spec.GetTransform() == messages.Transform_TRANSFORM_SQRT && res.Mask.GetTest() > 0 {
		// The held-out error on the input's scale (kernels.Options.TestOfSquares), as the
		// in-process driver adds it: the shards' sums in shard order.
		res.TestSse = sseOfSquares
		res.Mask = proto.Clone(res.Mask).(*messages.MaskStats)
		res.Mask.TestSqNorm = sqNormOfSquares
	}
	if spec.GetOutShared() != "" {
		j.committing = res
		j.ready.Commit = &Commit{Dir: spec.GetOutShared(), Detached: spec.GetDetached(), Result: res}
		return
	}
	j.deliver(res)
}

// onCommitted sends the result once the output files are in place, or fails the job.
func (j *Job) onCommitted(now time.Time, err error) {
	res := j.committing
	if res == nil || j.over {
		return
	}
	j.committing = nil
	if err != nil {
		j.fail(kindFailure, err.Error())
		return
	}
	j.deliver(res)
}

// deliver sends the client the result and ends the job.
func (j *Job) deliver(res *messages.JobResult) {
	j.ownsPartial = false
	j.answer = res
	j.send(j.client, res)
	j.end()
	j.ended(j.now, messages.JobPhase_JOB_PHASE_DONE, res.Stop, nil)
}

// Answer is what ended the job for its client (a *messages.JobResult or *messages.JobError;
// nil while the job runs, or when it ended without a word to the client). A runtime keeps it
// for a while after the end and sends it again to a client that asks (a lease renewal), in
// case the first was lost.
func (j *Job) Answer() proto.Message { return j.answer }

// fail ends the job with an error that reaches the client, and stops all its actors.
func (j *Job) fail(kind messages.ErrorKind, msg string) { j.failWith(kind, msg, nil) }

// failWith is fail with the error that made msg (nil: none), whose field and template the
// client gets when it is a *usererr.Error.
func (j *Job) failWith(kind messages.ErrorKind, msg string, err error) {
	if j.over {
		return
	}
	j.log(warn, "job ended with an error", slog.String("kind", kind.String()), slog.String("error", msg))
	if j.ownsPartial {
		j.ready.RemovePartials = true
	}
	je := &messages.JobError{JobId: j.id, Kind: kind, Message: msg, Epoch: j.epoch}
	if kind == kindInput {
		je.Field, je.Template = userFields(err)
	}
	if j.client != nil {
		j.answer = je
		j.send(j.client, j.answer)
	}
	state := messages.JobPhase_JOB_PHASE_FAILED
	if kind == kindCanceled {
		state = messages.JobPhase_JOB_PHASE_CANCELED
	}
	j.end()
	j.ended(j.now, state, "", je)
}

// end stops every actor of the job, and has every node that holds anything of it
// (checkpoints, standby state) forget it; the runtime then stops the coordinator.
func (j *Job) end() {
	j.over = true
	j.ready.Over = true
	stop := &messages.StopJob{JobId: j.id, Epoch: j.epoch, Coordinator: j.cfg.Self}
	var sent []string
	tell := func(addr string) {
		if addr != "" && !slices.Contains(sent, addr) {
			sent = append(sent, addr)
			j.send(HostPid(addr), stop)
		}
	}
	for _, h := range j.hosts {
		tell(h)
	}
	for _, a := range j.involvedNodes() {
		tell(a)
	}
	// A node restarted mid-job (a new actor address under an old name) may still keep
	// checkpoints of the job from its former life: every live member forgets the job.
	if j.cfg.Cluster {
		for _, w := range j.workers {
			tell(w)
		}
	}
}

// addCounters adds b into a.
func addCounters(a, b *messages.Counters) {
	if b == nil {
		return
	}
	a.Messages += b.Messages
	a.Bytes += b.Bytes
	a.InitMessages += b.InitMessages
	a.InitBytes += b.InitBytes
	a.Reductions += b.Reductions
	a.InitReductions += b.InitReductions
	a.Duplicates += b.Duplicates
	a.Stale += b.Stale
	a.ComputeSeconds += b.ComputeSeconds
	a.WaitSeconds += b.WaitSeconds
}

// closeHistory completes a history whose last reports were lost on the way (shard 0 reports
// its iterations; a connection that broke loses them): the last point is taken from the
// shards' direct residuals, and the iterations in between share the seconds.
func (j *Job) closeHistory(now time.Time) {
	d := j.done[0]
	if d == nil || d.Iteration <= j.ft.lastIter || len(j.history) == 0 {
		return
	}
	residual := 0.0
	for s := int64(0); s < int64(len(j.shards)); s++ {
		residual += j.done[s].Residual
	}
	seconds := now.Sub(j.started).Seconds()
	gap := d.Iteration - j.ft.lastIter
	for range gap {
		j.iterSec = append(j.iterSec, (seconds-j.lastSec)/float64(gap))
	}
	j.history = append(j.history, j.point(d.Iteration, seconds, kernels.Ratio(residual, j.initial), residual, j.testSSE))
	j.ft.lastIter, j.lastSec, j.objective = d.Iteration, seconds, residual
}
