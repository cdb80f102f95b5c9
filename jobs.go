package didnmf

import (
	"errors"
	"time"

	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/messages"
)

// JobInfo is a job on a cluster: running, as its coordinator last reported it, or ended, as
// the record its coordinator's node (and its standby's) keeps for a while (Runner.AllJobs).
type JobInfo struct {
	// ID is the job's id (Runner.Submit returns it); Owner the name its client's certificate
	// gives; Coordinator the member that runs its control.
	ID, Owner, Coordinator string
	Algorithm              Algorithm
	Rank, Shards           int
	// Samples and Features are the data's size (0 until the job is placed); ShardNodes the
	// actor address of each shard's member, by shard.
	Samples, Features int
	ShardNodes        []string
	// Iteration is the last iteration done, of at most MaxIter.
	Iteration, MaxIter int64
	// State is "placing", "running", "recovering" or "paused" (waiting for a majority) while
	// the job runs; "done", "failed" or "canceled" once it ended.
	State string
	// Seconds since the job started (for an ended job: until it ended); Objective, Ratio (to
	// the initial objective) and RelErr2 (to ||X||^2) at the last iteration; Rate the
	// iterations a second over the last ten.
	Seconds, Objective, Ratio, RelErr2, Rate float64
	// Detached jobs outlive their client and write their outputs into Spec.OutShared, which
	// OutShared repeats.
	Detached  bool
	OutShared string
	// StopRule is the spec's stop rule in words.
	StopRule string
	// Submitted is when the job was submitted; Ended when it ended (zero while it runs).
	Submitted, Ended time.Time
	// Stop is why a job that is done stopped (e.g. "max_iter", "tol", "time_limit").
	Stop string
	// ErrorKind, Error and ErrorField are why a failed or canceled job ended: the error's
	// kind ("input": yours to fix, ErrorField naming the spec's field at fault; "failure";
	// "canceled"; ...) and its message.
	ErrorKind, Error, ErrorField string
	// Recoveries and Checkpoints count the job's rollbacks and committed checkpoints so far;
	// Epoch is its coordinator's epoch.
	Recoveries, Checkpoints int64
	Epoch                   uint64
}

// IsEnded tells whether the job ended (done, failed or canceled).
func (j JobInfo) IsEnded() bool { return !j.Ended.IsZero() }

// ErrNotCluster is returned by the runner's cluster operations (Jobs, Cancel) on a target
// that is not a cluster: the jobs of Local and InProcess are this process's own.
var ErrNotCluster = errors.New("the target is not a cluster (OnCluster)")

// Jobs lists the running jobs of the runner's cluster this client may see: its own (an
// operator's certificate sees all), by id. Members that did not answer within timeout are
// left out and named in the error, which wraps every such member's; the list holds the
// others'.
func (r *Runner) Jobs(timeout time.Duration) ([]JobInfo, error) {
	return r.listJobs(false, timeout)
}

// AllJobs is Jobs with the jobs that ended too: the records the members keep of the jobs
// they coordinated (or stood by for), for a bounded time and count (serve's --history-time
// and --history-max), with their outcome (State "done", "failed" or "canceled", Stop or
// Error).
func (r *Runner) AllJobs(timeout time.Duration) ([]JobInfo, error) {
	return r.listJobs(true, timeout)
}

// listJobs lists the cluster's jobs, and with ended the ended ones.
func (r *Runner) listJobs(ended bool, timeout time.Duration) ([]JobInfo, error) {
	if r.remote == nil {
		return nil, ErrNotCluster
	}
	wire, errs := r.remote.ListJobs(&messages.ListJobs{Ended: ended}, timeout)
	jobs := make([]JobInfo, 0, len(wire))
	for _, w := range wire {
		algo, err := jobspec.AlgorithmOf(w.GetAlgorithm())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		j := JobInfo{ID: w.GetJobId(), Owner: w.GetOwner(), Coordinator: w.GetCoordinator(), Algorithm: algo,
			Rank: int(w.GetRank()), Shards: int(w.GetShards()), Samples: int(w.GetSamples()), Features: int(w.GetFeatures()),
			ShardNodes: w.GetShardNodes(), Iteration: w.GetIteration(), MaxIter: w.GetMaxIter(),
			State: messages.Name(w.GetState()), Seconds: w.GetSeconds(), Objective: w.GetObjective(), Ratio: w.GetRatio(),
			RelErr2: w.GetRelErr2(), Rate: w.GetRate(), Detached: w.GetDetached(), OutShared: w.GetOutShared(), StopRule: w.GetStopRule(),
			Stop: w.GetStop(), Error: w.GetError(), ErrorField: w.GetErrorField(), Recoveries: w.GetRecoveries(),
			Checkpoints: w.GetCheckpoints(), Epoch: w.GetEpoch()}
		if w.GetErrorKind() != messages.ErrorKind_ERROR_KIND_UNSPECIFIED {
			j.ErrorKind = w.GetErrorKind().Name()
		}
		if ms := w.GetSubmittedUnixMs(); ms != 0 {
			j.Submitted = time.UnixMilli(ms)
		}
		if ms := w.GetEndedUnixMs(); ms != 0 {
			j.Ended = time.UnixMilli(ms)
		}
		jobs = append(jobs, j)
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
