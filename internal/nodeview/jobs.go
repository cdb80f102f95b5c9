package nodeview

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"time"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/internal/actors"
	"github.com/didnmf/didnmf/internal/httpapi"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/usererr"
)

// Jobs implements httpapi.Backend: the newest submitted first, without history or events.
func (v *View) Jobs(ctx context.Context, owner string) ([]httpapi.JobView, error) {
	v.use()
	v.mu.Lock()
	out := make([]httpapi.JobView, 0, len(v.snap.jobs))
	for _, j := range v.snap.jobs {
		if owner != "" && j.Owner != owner {
			continue
		}
		j.History, j.Events, j.Spec = nil, nil, nil
		j.ShardNodes, j.Outputs = slices.Clone(j.ShardNodes), slices.Clone(j.Outputs)
		out = append(out, j)
	}
	v.mu.Unlock()
	slices.SortFunc(out, func(a, b httpapi.JobView) int {
		if c := cmp.Compare(b.SubmittedUnixMs, a.SubmittedUnixMs); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// Job implements httpapi.Backend.
func (v *View) Job(ctx context.Context, id string) (httpapi.JobView, error) {
	v.use()
	v.mu.Lock()
	defer v.mu.Unlock()
	j, ok := v.snap.jobs[id]
	if !ok {
		return httpapi.JobView{}, httpapi.ErrNotFound
	}
	j.History, j.Events = slices.Clone(j.History), slices.Clone(j.Events)
	j.ShardNodes, j.Outputs = slices.Clone(j.ShardNodes), slices.Clone(j.Outputs)
	return j, nil
}

// attachedJob is a job this view submitted: its last record as the members listed it, and
// how it ended, for when no member lists it any more.
type attachedJob struct {
	job *actors.Job
	// Guarded by the view's mu.
	last httpapi.JobView
	end  *httpapi.JobView // set once the job has ended, as this view saw it end
}

// ended tells whether the job has ended (its result or error is in).
func (a *attachedJob) ended() bool {
	select {
	case <-a.job.Done():
		return true
	default:
		return false
	}
}

// merge puts the job's record into jobs (under the view's mu): the members' when one lists
// it, kept as the last; else the record of its end, or the last one.
func (a *attachedJob) merge(jobs map[string]httpapi.JobView, id string) {
	if j, ok := jobs[id]; ok {
		a.last = j
		switch {
		case a.end != nil && j.EndedUnixMs == 0:
			jobs[id] = *a.end // the coordinator still winds it down
		case a.end == nil && j.EndedUnixMs != 0:
			// The members' record says it ended, but this view has not yet written its
			// outputs: it is not over for the API until they can be fetched.
			j.State, j.EndedUnixMs, j.Error, j.Outputs = "running", 0, nil, nil
			jobs[id] = j
		case a.end != nil && a.end.Error != nil && j.Error == nil:
			// The job ended well, but this view could not write its outputs: for the API it
			// failed, and says why (the members' record cannot know).
			j.State, j.Error, j.Outputs = a.end.State, a.end.Error, nil
			jobs[id] = j
		}
		return
	}
	if a.end != nil {
		jobs[id] = *a.end
	} else if a.last.ID != "" {
		jobs[id] = a.last
	}
}

// Submit implements httpapi.Backend: the spec is checked as didnmf.Open checks it for a
// cluster, then by the node's host (against the members) and its coordinator (against the
// data it reads under its data roots); errors that are the user's wrap usererr.ErrUser.
func (v *View) Submit(ctx context.Context, owner string, spec *jobspec.Spec) (string, error) {
	v.use()
	if spec == nil {
		return "", usererr.Errorf("no job spec")
	}
	s := *spec
	switch s.Ingest {
	case "", jobspec.IngestShared:
		s.Ingest = jobspec.IngestShared
	default:
		return "", usererr.Field("ingest", "{ingest} %s: a job submitted over HTTP is read by the nodes under their data roots ({ingest} shared)", s.Ingest)
	}
	s.Detached = s.OutShared != ""
	if !s.Detached && v.outputs == nil {
		return "", usererr.Field("out_shared", "this node keeps no outputs (it has no data directory): give {out_shared}, a directory under the nodes' data roots")
	}
	self := v.srv.Members.Local()
	j, err := didnmf.Open(&s, didnmf.OnCluster(didnmf.ClusterConfig{Cluster: []string{self.Gossip}}))
	if err != nil {
		return "", err
	}
	job, err := v.client.SubmitAs(ctx, self.Meta.Actor, owner, j.Spec.Wire())
	if err != nil {
		var je *actors.JobError
		if errors.As(err, &je) || errors.Is(err, usererr.ErrUser) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return "", err
		}
		return "", fmt.Errorf("submit to node %s: %w", self.Name, err)
	}
	placing := httpapi.JobView{ID: job.ID, Owner: owner, Coordinator: self.Meta.Actor, Algorithm: string(s.Algo),
		Rank: int64(s.Rank), Shards: int64(s.Shards), MaxIter: int64(s.Stop.MaxIter), State: "placing",
		SubmittedUnixMs: time.Now().UnixMilli(), Detached: s.Detached, OutShared: s.OutShared}
	if s.Detached {
		job.Release()
		v.mu.Lock()
		v.listSubmitted(placing)
		v.mu.Unlock()
		return job.ID, nil
	}
	a := &attachedJob{job: job, last: placing}
	v.mu.Lock()
	v.attached[job.ID] = a
	v.listSubmitted(placing)
	v.mu.Unlock()
	v.collect.Add(1)
	go v.collectJob(j, a)
	return job.ID, nil
}

// listSubmitted puts a job just submitted into the published snapshot (under the view's mu)
// until the next refresh lists it, so that the id Submit returns can be followed at once
// (GET /api/v1/jobs/{id} and its events) instead of being unknown until that refresh. A
// detached job may still drop out of a refresh that asked the members before it was
// submitted, for one refresh period.
func (v *View) listSubmitted(j httpapi.JobView) {
	if v.snap.jobs == nil {
		v.snap.jobs = map[string]httpapi.JobView{}
	}
	if _, ok := v.snap.jobs[j.ID]; !ok {
		v.snap.jobs[j.ID] = j
	}
}

// collectJob waits for an attached job, writes its outputs, and records how it ended.
func (v *View) collectJob(j *didnmf.Job, a *attachedJob) {
	defer v.collect.Done()
	res, err := a.job.Wait(context.Background())
	id := a.job.ID
	v.mu.Lock()
	owner := a.last.Owner
	v.mu.Unlock()
	if err == nil && res != nil {
		if werr := v.outputs.write(id, owner, resultOf(j, res)); werr != nil {
			v.log.Error("nodeview: cannot write a job's outputs", "job", id, "err", werr)
			err = fmt.Errorf("the job ended, but its outputs could not be written on node %s: %w", v.srv.Name(), werr)
		}
	}
	v.mu.Lock()
	end := a.last
	end.EndedUnixMs = time.Now().UnixMilli()
	end.ETASeconds = 0
	switch {
	case err == nil:
		end.State, end.Error = "done", nil
	case errors.Is(err, actors.ErrCanceled):
		end.State, end.Error = "canceled", &httpapi.ErrorView{Kind: "canceled", Message: err.Error()}
	default:
		end.State, end.Error = "failed", &httpapi.ErrorView{Kind: "failure", Message: err.Error()}
		var ue *usererr.Error
		if errors.As(err, &ue) {
			end.Error.Kind, end.Error.Field = "user", ue.Field
		}
	}
	if res != nil {
		r := &res.Result
		end.Iteration, end.Seconds, end.RelErr2 = int64(r.Iterations), r.Seconds, r.RelErr2()
		end.Samples, end.Features, end.Stop = int64(r.N), int64(r.M), string(r.StopReason)
		end.ShardNodes = slices.Clone(res.ShardNodes)
		end.Checkpoints, end.Recoveries = res.Checkpoints, int64(len(res.Recoveries))
		end.History = historyOf(r.History)
	}
	finiteJob(&end)
	a.end = &end
	v.forgetEnded()
	v.mu.Unlock()
}

// maxHistory bounds the points of a job's history the view keeps (as the members do).
const maxHistory = 256

// historyOf is a result's history as the API shows it: at most maxHistory points, evenly
// thinned, the last kept.
func historyOf(h []kernels.HistoryPoint) []httpapi.PointView {
	n := len(h)
	if n == 0 {
		return nil
	}
	keep := min(n, maxHistory)
	out := make([]httpapi.PointView, 0, keep)
	for i := range keep {
		idx := n - 1
		if keep > 1 {
			idx = i * (n - 1) / (keep - 1)
		}
		p := h[idx]
		out = append(out, httpapi.PointView{Iteration: int64(p.Iteration), Seconds: p.Seconds, RelErr2: p.RelErr2, TestRelErr2: p.TestRelErr2})
	}
	return out
}

// resultOf is an attached job's result as the root package's writers take it.
func resultOf(j *didnmf.Job, a *actors.Result) *didnmf.Result {
	c := a.Counters
	return &didnmf.Result{Result: a.Result, Job: j, JobID: a.JobID, ShardNodes: a.ShardNodes, Checkpoints: a.Checkpoints,
		CheckpointSeconds: a.CheckpointSeconds, Recoveries: a.Recoveries, MessagesPerIteration: a.MessagesPerIteration,
		BytesPerIteration: a.BytesPerIteration, ReductionsPerIteration: a.ReductionsPerIteration, Storage: a.Storage,
		XBytes: a.XBytes, Threads: a.Threads,
		Traffic: didnmf.Traffic{Messages: c.GetMessages(), Bytes: c.GetBytes(), InitMessages: c.GetInitMessages(), InitBytes: c.GetInitBytes(),
			Reductions: c.GetReductions(), InitReductions: c.GetInitReductions(), Duplicates: c.GetDuplicates(), Stale: c.GetStale(),
			ComputeSeconds: c.GetComputeSeconds(), WaitSeconds: c.GetWaitSeconds()}}
}

// forgetEnded forgets the ended attached jobs beyond KeepOutputs, each the oldest (first
// ended) of the owner holding the most, so that one client's many jobs push out only its own
// (under mu).
func (v *View) forgetEnded() {
	ended := map[string]*attachedJob{}
	for id, a := range v.attached {
		if a.end != nil {
			ended[id] = a
		}
	}
	for len(ended) > v.cfg.KeepOutputs {
		id := evictee(ended, func(a *attachedJob) (string, int64) { return a.last.Owner, a.end.EndedUnixMs })
		delete(ended, id)
		delete(v.attached, id)
	}
}
