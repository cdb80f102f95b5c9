package jobctl

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

// GrantWindow is how many iterations shards may run ahead of the control in a job with a time
// limit (without one, shards run freely and stop by their own deterministic rule).
const GrantWindow = 4

// NoGrant means "no limit": shards of a job without a time limit run without grants.
const NoGrant = math.MaxInt64

// publishEvery is how often the job board gets news (unless forced).
const publishEvery = 200 * time.Millisecond

// onPlaced counts the shards and reducers that took their assignments; once all did, the job
// (re)starts.
func (j *Job) onPlaced(now time.Time, m *messages.Placed) {
	if m.CheckpointError != "" {
		// No valid copy of that checkpoint is left: fall back to the one before (or the start).
		bad := j.lastCommitted()
		j.ft.committed = j.ft.committed[:max(len(j.ft.committed)-1, 0)]
		j.log(warn, "checkpoint unusable, falling back to an older one", slog.Int64("iteration", bad), slog.String("error", m.CheckpointError))
		j.failure(now, CauseCheckpoint, fmt.Sprintf("checkpoint at iteration %d unusable (%s)", bad, m.CheckpointError), nil)
		return
	}
	if m.Error != "" {
		j.fail(kindInput, m.Error)
		return
	}
	// A shard that read a different number of features than the coordinator saw (the file
	// changed in between, or nodes see different files under one path) would compute garbage.
	if m.Samples > 0 && m.Features != int64(j.m) {
		j.fail(kindInput, fmt.Sprintf("%s read %d features, the coordinator saw %d: do all nodes see the same input?", m.Actor, m.Features, j.m))
		return
	}
	j.placed++
	if len(j.sqNorms) != len(j.shards) {
		j.sqNorms = make([]float64, len(j.shards))
	}
	if i, ok := j.shardOf[m.Pid.GetId()]; ok && j.shards[i].Address == m.Pid.GetAddress() {
		j.sqNorms[i] = m.SqNormX
	}
	if j.placed < len(j.shards)+len(j.reducers) {
		return
	}
	j.sqNormX = 0
	for _, v := range j.sqNorms { // in shard order, as the driver sums: the same bits
		j.sqNormX += v
	}
	if j.sqNormX == 0 {
		j.fail(kindInput, kernels.ErrZeroMatrix.Error())
		return
	}
	j.running = true
	resume := j.lastCommitted()
	if j.ft.recovering == nil {
		resume = 0
	}
	if j.ft.recovering == nil || j.started.IsZero() {
		j.started = now // the job starts (a takeover before the first start included)
		if r := j.ft.recovering; r != nil && !j.ft.noticedAt.IsZero() {
			r.Noticed = j.ft.noticedAt.Sub(now).Seconds() // noticed during the setup: before the start
		}
		j.ft.noticedAt = time.Time{}
		j.event(now, messages.JobEventKind_JOB_EVENT_KIND_STARTED, resume,
			fmt.Sprintf("%d shards on %d nodes", len(j.shards), len(uniqueStrings(j.ft.shardNode))))
	}
	j.ft.epochAt = now.Sub(j.started).Seconds()
	j.ft.lastIter = resume
	j.granted = NoGrant
	if j.cfg.TimeLimit > 0 {
		j.granted = resume + GrantWindow
	}
	for _, s := range j.shards {
		j.metered(s, &messages.StartJob{JobId: j.id, Epoch: j.epoch, Granted: j.granted})
	}
	j.initPhase = false
	j.sendState()
}

// warn sends the client news it should see although the job goes on.
func (j *Job) warn(msg string) {
	j.send(j.client, &messages.Progress{JobId: j.id, Iteration: j.ft.lastIter, Warning: msg})
}

// onIteration records an iteration shard 0 finished, passes it on to the client, asks for a
// checkpoint when one is due, and grants iterations or applies the time limit.
func (j *Job) onIteration(now time.Time, m *messages.IterationDone) {
	defer j.publish(now, messages.JobPhase_JOB_PHASE_RUNNING, false)
	if m.Iteration <= j.ft.lastIter {
		j.counters.Stale++ // an iteration of this epoch seen already: never counted twice
		return
	}
	// Reports lost on the way (a connection that broke) leave a gap: the iterations in it
	// share the seconds, and the history has no point for them.
	gap := m.Iteration - j.ft.lastIter - 1
	if !j.reportAt.IsZero() {
		j.slowest = max(j.slowest, now.Sub(j.reportAt)/time.Duration(gap+1))
	} else {
		// The epoch's first report: its seconds run from the shard's start, so they hold
		// the initialisation (or the restore) and the first iteration.
		j.slowest = max(j.slowest, time.Duration(m.Seconds*float64(time.Second)))
	}
	j.reportAt = now
	j.ft.lastIter = m.Iteration
	seconds := j.ft.epochAt + m.Seconds
	if j.ft.recovering != nil {
		j.ft.recovering.Resumed = now.Sub(j.started).Seconds()
		j.ft.recoveries = append(j.ft.recoveries, j.ft.recovering)
		j.log(slog.LevelInfo, "job resumed", uint64Attr("epoch", j.epoch),
			slog.Float64("recovery seconds", j.ft.recovering.Resumed-j.ft.recovering.Noticed))
		j.event(now, messages.JobEventKind_JOB_EVENT_KIND_RECOVERED, j.ft.recovering.FromIteration,
			fmt.Sprintf("resumed from iteration %d in epoch %s after %.1f s", j.ft.recovering.FromIteration, EpochString(j.epoch),
				j.ft.recovering.Resumed-j.ft.recovering.Noticed))
		j.ft.recovering = nil
	}
	if m.Mask != nil {
		j.mask = m.Mask
	}
	if len(j.history) == 0 {
		j.history = append(j.history, j.point(0, m.InitSeconds, 1, m.Initial, m.InitialTestSse))
		j.lastSec = m.InitSeconds
	}
	ratio := kernels.Ratio(m.Objective, m.Initial)
	j.testSSE = m.TestSse
	point := j.point(m.Iteration, seconds, ratio, m.Objective, m.TestSse)
	re, rmse := point.RelErr2, point.Rmse
	j.history = append(j.history, point)
	for range gap + 1 {
		j.iterSec = append(j.iterSec, (seconds-j.lastSec)/float64(gap+1))
	}
	j.lastSec = seconds
	j.initial, j.objective = m.Initial, m.Objective
	j.metered(j.client, &messages.Progress{JobId: j.id, Iteration: m.Iteration, Seconds: seconds, Ratio: ratio, Objective: m.Objective,
		RelErr2: re, Rmse: rmse, InitSeconds: j.history[0].Seconds, TestSse: point.TestSse, TestRelErr2: point.TestRelErr2,
		TestRmse: point.TestRmse, TestCount: point.TestCount})
	if m.Stop == "" {
		j.autoCheckpoint(m.Iteration, seconds)
	}
	if m.Stop != "" || j.timeUp || j.cfg.TimeLimit == 0 {
		return
	}
	if now.Sub(j.started) >= j.cfg.TimeLimit {
		j.timeUp = true
		for _, s := range j.shards {
			j.metered(s, &messages.Finish{JobId: j.id, Epoch: j.epoch, At: j.granted})
		}
		return
	}
	if m.Iteration >= j.granted-GrantWindow/2 {
		j.granted = m.Iteration + GrantWindow
		for _, s := range j.shards {
			j.metered(s, &messages.Grant{JobId: j.id, Epoch: j.epoch, Granted: j.granted})
		}
	}
}

// announce tells the client that this coordinator has the job, in its epoch: when the job
// is placed or taken over, and again at every tick until the client's first renewal.
func (j *Job) announce() {
	j.announced = true
	j.send(j.client, &messages.JobAccepted{JobId: j.id, Coordinator: j.cfg.Self, Samples: int64(j.n), Features: int64(j.m),
		Takeover: j.ft.takenOver, Epoch: j.epoch})
}

// onTick cancels the job when its client stopped renewing its lease, or when it ran past the
// node's cap on job time; until the client's first renewal, it tells the client again that
// this coordinator has the job.
func (j *Job) onTick(now time.Time) {
	if j.over || !j.begun {
		return
	}
	_ = j.lease.Step(LeaseTick{At: now})
	rd := j.lease.Ready()
	if end := rd.End; end != nil {
		j.log(warn, "canceling a job whose client is gone", slog.Duration("lease", j.cfg.Lease))
		j.fail(kindCanceled, end.Reason)
		return
	}
	if rd.Announce && j.announced {
		j.announce() // no renewal came since: the client may not have heard of this coordinator
	}
	if j.cfg.MaxJobTime > 0 && !j.started.IsZero() && now.Sub(j.started) > j.cfg.MaxJobTime {
		j.fail(kindCanceled, fmt.Sprintf("job %s canceled: it ran past the node's --max-job-time of %v", j.id, j.cfg.MaxJobTime))
	}
}

// publish tells the node's job board how the job stands (at most every publishEvery unless
// forced).
func (j *Job) publish(now time.Time, state messages.JobPhase, force bool) {
	if j.over || (!force && now.Sub(j.published) < publishEvery) {
		return
	}
	j.published = now
	j.ready.Info = j.info(now, state)
}

// point is the history point of an iteration with this objective and held-out error: the
// errors over ||X||^2 and M N, or over the observed entries of a masked job, with its test
// set's figures.
func (j *Job) point(iteration int64, seconds, ratio, objective, testSSE float64) *messages.HistoryPoint {
	p := &messages.HistoryPoint{Iteration: iteration, Seconds: seconds, Ratio: ratio}
	if j.mask == nil {
		p.RelErr2, p.Rmse = kernels.Errors(objective, j.sqNormX, j.m, j.n)
		return p
	}
	p.RelErr2, p.Rmse = kernels.ObservedErrors(objective, j.mask.ObservedSqNorm, j.mask.Observed)
	if j.mask.Test > 0 {
		p.TestSse, p.TestCount = testSSE, j.mask.Test
		p.TestRelErr2, p.TestRmse = kernels.ObservedErrors(testSSE, j.mask.TestSqNorm, j.mask.Test)
	}
	return p
}
