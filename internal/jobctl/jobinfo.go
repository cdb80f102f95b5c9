package jobctl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

// What a job shows of itself: its JobInfo for the node's job board (Ready.Info), its timeline
// of events, and once it ended its record (Ready.Record), which the coordinator sends to its
// own node's host and to its standby's: they keep it for a while (Host's job history). Every
// time in them comes from the events stepped (Step's now): the control reads no clock.

// Bounds on what a JobInfo carries: history points (evenly thinned, the last kept) and events
// (the latest).
const (
	MaxInfoHistory = 256
	MaxInfoEvents  = 64
)

// event adds an event to the job's timeline at now, keeping the latest MaxInfoEvents.
func (j *Job) event(now time.Time, kind messages.JobEventKind, iteration int64, text string) {
	if len(j.events) >= MaxInfoEvents {
		j.events = append(j.events[:0:0], j.events[len(j.events)-MaxInfoEvents+1:]...)
	}
	j.events = append(j.events, &messages.JobEvent{UnixMs: now.UnixMilli(), Kind: kind, Iteration: iteration, Text: text})
}

// ThinHistory returns at most limit points of h in a new slice, evenly spread over it, the
// first and the last always among them (for limit 1: the last); all of them when there are
// not more than limit.
func ThinHistory(h []*messages.HistoryPoint, limit int) []*messages.HistoryPoint {
	if len(h) <= limit {
		return slices.Clone(h)
	}
	if limit <= 1 {
		return slices.Clone(h[len(h)-max(limit, 0):])
	}
	out := make([]*messages.HistoryPoint, limit)
	for i := range limit {
		out[i] = h[i*(len(h)-1)/(limit-1)]
	}
	return out
}

// StopRuleWords is a spec's stop rule as a person reads it, naming no flag or key (the CLI
// and the HTTP API show it alike): "until the error falls to 0.0001% of the initial error or
// by less than 0.01% over 10 iterations; at most 1000 iterations; time limit 1h0m0s". A
// rule with neither convergence test runs its iterations: "50 iterations (no convergence
// test)".
func StopRuleWords(r *messages.StopRule) string {
	if r == nil {
		return "no stop rule"
	}
	var tests, parts []string
	if r.GetTol() > 0 {
		tests = append(tests, "to "+percentWords(r.GetTol())+" of the initial error")
	}
	if r.GetStallTol() > 0 {
		window := kernels.StopRule{StallWindow: int(r.GetStallWindow())}.Window()
		tests = append(tests, fmt.Sprintf("by less than %s over %d iterations", percentWords(r.GetStallTol()), window))
	}
	switch {
	case len(tests) > 0:
		parts = append(parts, "until the error falls "+strings.Join(tests, " or "))
		if r.GetMaxIter() > 0 {
			parts = append(parts, fmt.Sprintf("at most %d iterations", r.GetMaxIter()))
		}
	case r.GetMaxIter() > 0:
		parts = append(parts, fmt.Sprintf("%d iterations (no convergence test)", r.GetMaxIter()))
	}
	if s := r.GetTimeLimitSeconds(); s > 0 {
		parts = append(parts, "time limit "+time.Duration(s*float64(time.Second)).String())
	}
	if len(parts) == 0 {
		return "no stop rule"
	}
	return strings.Join(parts, "; ")
}

// percentWords writes a fraction as a percentage of three significant digits ("0.01%").
func percentWords(f float64) string {
	return strconv.FormatFloat(100*f, 'g', 3, 64) + "%"
}

// info is the job's state at now: everything a JobInfo carries, its history thinned to
// MaxInfoHistory points and its latest events.
func (j *Job) info(now time.Time, state messages.JobPhase) *messages.JobInfo {
	spec := j.sub.GetSpec()
	info := &messages.JobInfo{JobId: j.id, Owner: j.sub.GetOwner(), Coordinator: j.cfg.Self.GetAddress(), Algorithm: spec.GetAlgorithm(),
		Rank: spec.GetRank(), Shards: spec.GetShards(), Iteration: j.ft.lastIter, MaxIter: spec.GetStop().GetMaxIter(),
		Objective: j.objective, Detached: spec.GetDetached(), State: state,
		Samples: int64(j.n), Features: int64(j.m), ShardNodes: append([]string(nil), j.ft.shardNode...),
		StopRule: StopRuleWords(spec.GetStop()), Recoveries: int64(len(j.ft.recoveries)), Checkpoints: j.ft.checkpoints,
		Epoch: j.epoch, OutShared: spec.GetOutShared(), History: ThinHistory(j.history, MaxInfoHistory),
		Events: slices.Clone(j.events), Spec: spec}
	if !j.submitted.IsZero() {
		info.SubmittedUnixMs = j.submitted.UnixMilli()
	}
	if !j.started.IsZero() {
		info.Seconds = now.Sub(j.started).Seconds()
	}
	if j.initial > 0 {
		info.Ratio = j.objective / j.initial
	}
	if h := j.history; len(h) > 1 {
		info.RelErr2 = h[len(h)-1].RelErr2
		from := h[max(len(h)-11, 0)]
		if last := h[len(h)-1]; last.Seconds > from.Seconds {
			info.Rate = float64(last.Iteration-from.Iteration) / (last.Seconds - from.Seconds)
		}
	}
	return info
}

// ended records the job's end at now: an ENDED event, and its record (state done, failed or
// canceled; stop why it stopped, or the error's kind, message, field and template) for the
// runtime (Ready.Record) and for the hosts that keep it: this node's and the standby's. It
// follows the end's StopJobs, which it never holds up on their way.
func (j *Job) ended(now time.Time, state messages.JobPhase, stop string, je *messages.JobError) {
	text := stop
	if je != nil {
		text = je.Message
	}
	j.event(now, messages.JobEventKind_JOB_EVENT_KIND_ENDED, j.ft.lastIter, text)
	rec := j.info(now, state)
	rec.Stop, rec.EndedUnixMs = stop, now.UnixMilli()
	if je != nil {
		rec.ErrorKind, rec.Error, rec.ErrorField, rec.ErrorTemplate = je.Kind, je.Message, je.Field, je.Template
	}
	j.ready.Record = rec
	j.send(HostPid(j.cfg.Self.GetAddress()), &messages.JobRecord{Info: rec})
	if sb := j.ft.standby; sb != "" && sb != j.cfg.Self.GetAddress() {
		j.send(HostPid(sb), &messages.JobRecord{Info: rec})
	}
}
