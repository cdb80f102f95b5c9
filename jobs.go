package didnmf

import (
	"errors"
	"time"

	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/messages"
)

// JobInfo is a job running on a cluster, as its coordinator last reported it.
type JobInfo struct {
	// ID is the job's id (Runner.Submit returns it); Owner the name its client's certificate
	// gives; Coordinator the member that runs its control.
	ID, Owner, Coordinator string
	Algorithm              Algorithm
	Rank, Shards           int
	// Iteration is the last iteration done, of at most MaxIter.
	Iteration, MaxIter int64
	// State is "placing", "running", "recovering" or "paused" (waiting for a majority).
	State string
	// Seconds since the job started; Objective, Ratio (to the initial objective) and RelErr2
	// (to ||X||^2) at the last iteration; Rate the iterations a second over the last ten.
	Seconds, Objective, Ratio, RelErr2, Rate float64
	// Detached jobs outlive their client and write their outputs into Spec.OutShared.
	Detached bool
}

// ErrNotCluster is returned by the runner's cluster operations (Jobs, Cancel) on a target
// that is not a cluster: the jobs of Local and InProcess are this process's own.
var ErrNotCluster = errors.New("the target is not a cluster (OnCluster)")

// Jobs lists the running jobs of the runner's cluster this client may see: its own (an
// operator's certificate sees all), by id. Members that did not answer within timeout are
// left out and named in the error, which wraps every such member's; the list holds the
// others'.
func (r *Runner) Jobs(timeout time.Duration) ([]JobInfo, error) {
	if r.remote == nil {
		return nil, ErrNotCluster
	}
	wire, errs := r.remote.Jobs(timeout)
	jobs := make([]JobInfo, 0, len(wire))
	for _, w := range wire {
		algo, err := jobspec.AlgorithmOf(w.GetAlgorithm())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		jobs = append(jobs, JobInfo{ID: w.GetJobId(), Owner: w.GetOwner(), Coordinator: w.GetCoordinator(), Algorithm: algo,
			Rank: int(w.GetRank()), Shards: int(w.GetShards()), Iteration: w.GetIteration(), MaxIter: w.GetMaxIter(),
			State: messages.Name(w.GetState()), Seconds: w.GetSeconds(), Objective: w.GetObjective(), Ratio: w.GetRatio(),
			RelErr2: w.GetRelErr2(), Rate: w.GetRate(), Detached: w.GetDetached()})
	}
	return jobs, errors.Join(errs...)
}

// Cancel cancels a job of this client's on the runner's cluster by id (a detached job
// submitted earlier, say) and waits up to timeout for every member to have let it go. A job
// running under Run is canceled by canceling Run's context instead.
func (r *Runner) Cancel(id string, timeout time.Duration) error {
	if r.remote == nil {
		return ErrNotCluster
	}
	return r.remote.Cancel(id, timeout)
}
