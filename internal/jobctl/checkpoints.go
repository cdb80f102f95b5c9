package jobctl

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/didnmf/didnmf/internal/jobctl/internal/bugs"
	"github.com/didnmf/didnmf/messages"
)

// KeepCheckpoints is how many committed checkpoints a job keeps to fall back to (a corrupt
// one falls back to an older one).
const KeepCheckpoints = 3

// Automatic checkpoint cadence (checkpoint_every < 0). Checkpoints cost disk and memory
// bandwidth (C is written twice, on the shard's node and its buddy's, each with fsync), so a
// fixed interval is either too often for small, fast iterations or too rare for slow ones.
// The control times them instead: it asks for a checkpoint a few iterations ahead
// (CheckpointAt) once the iterations since the last one took ckptBudget^-1 times what the
// last checkpoint took, so checkpoints cost about ckptBudget of the job's time. The first
// comes after ckptFirst of the job: redoing less than that is cheap, and short jobs do not
// pay for checkpoints at all.
const (
	ckptBudget     = 0.04
	ckptFirst      = 2.0 // seconds
	ckptFirstAfter = 10  // iterations an asked-for checkpoint may take to be committed
	ckptLead       = 2   // iterations ahead of the latest one seen: shards run that far ahead
	ckptMaxWait    = 60 * time.Second
)

// autoCheckpoint asks the shards for a checkpoint when one is due (iteration it just ended,
// at job second now).
func (j *Job) autoCheckpoint(it int64, now float64) {
	f := &j.ft
	if j.sub.GetSpec().GetCheckpointEvery() >= 0 {
		return
	}
	if f.askedAt > 0 && it <= f.askedAt+ckptFirstAfter {
		return // one is under way
	}
	since := now - f.lastCkptTime
	due := f.lastCkptCost == 0 && since >= ckptFirst
	if f.lastCkptCost > 0 {
		due = since*ckptBudget >= f.lastCkptCost || time.Duration(since*float64(time.Second)) >= ckptMaxWait && since*ckptBudget*4 >= f.lastCkptCost
	}
	if !due {
		return
	}
	lead := int64(ckptLead)
	if len(j.iterSec) > 0 {
		if per := j.iterSec[len(j.iterSec)-1]; per > 0 {
			// Message latency and shard 0's report interval (reports come in bursts), in
			// iterations.
			lead += int64((0.005 + j.cfg.ReportInterval.Seconds()) / per)
		}
	}
	f.askedAt = it + lead
	for _, s := range j.shards {
		j.metered(s, &messages.CheckpointAt{JobId: j.id, Epoch: j.epoch, Iteration: f.askedAt})
	}
}

// onCheckpointDone counts a shard's checkpoint; an iteration is committed when every shard
// has written its checkpoint there and had it acknowledged by its buddy. Every node involved
// hears of the commit, and the standby gets the new state.
func (j *Job) onCheckpointDone(now time.Time, m *messages.CheckpointDone) {
	if m.Error != "" {
		delete(j.ft.reported, m.Iteration)
		j.log(warn, "checkpoint failed, not committed", slog.String("error", m.Error))
		j.warn("checkpoint not committed: " + m.Error)
		return
	}
	if m.Iteration <= j.lastCommitted() || m.Shard < 0 || m.Shard >= int64(len(j.shards)) {
		return
	}
	got := j.ft.reported[m.Iteration]
	if got == nil {
		got = map[int64]bool{}
		j.ft.reported[m.Iteration] = got
	}
	if got[m.Shard] {
		return
	}
	got[m.Shard] = true
	j.ft.ckptSeconds += m.Seconds
	j.ft.ckptCost = max(j.ft.ckptCost, m.Seconds)
	if len(got) < len(j.shards) && !j.cfg.Bugs.Has(bugs.EarlyCommit) {
		return
	}
	j.ft.committed = append(j.ft.committed, m.Iteration)
	if len(j.ft.committed) > KeepCheckpoints {
		j.ft.committed = j.ft.committed[1:]
	}
	j.ft.checkpoints++
	j.event(now, messages.JobEventKind_JOB_EVENT_KIND_CHECKPOINT, m.Iteration, fmt.Sprintf("%d shards wrote it", len(j.shards)))
	j.ft.lastCkptCost, j.ft.ckptCost = j.ft.ckptCost, 0
	j.ft.lastCkptTime = now.Sub(j.started).Seconds()
	keepFrom := j.ft.committed[0]
	if j.cfg.Bugs.Has(bugs.KeepOneTooFew) {
		keepFrom = j.ft.committed[min(1, len(j.ft.committed)-1)]
	}
	commit := &messages.CheckpointCommitted{JobId: j.id, Iteration: m.Iteration, KeepFrom: keepFrom, Shards: int64(len(j.shards)), Epoch: j.epoch}
	for _, addr := range j.involvedNodes() {
		if !j.ft.lost[addr] {
			j.send(HostPid(addr), commit)
		}
	}
	for t := range j.ft.reported {
		if t <= m.Iteration {
			delete(j.ft.reported, t)
		}
	}
	j.sendState()
}

// involvedNodes are the nodes that held anything of the job, sorted (a map's order would
// make the sends' order random).
func (j *Job) involvedNodes() []string {
	out := make([]string, 0, len(j.ft.involved))
	for a := range j.ft.involved {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}
