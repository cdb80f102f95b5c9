package didnmf

import (
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/didnmf/didnmf/actors"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/report"
)

// Result is a finished job: the factors and history of kernels.Result, and what running it
// took where it ran.
type Result struct {
	kernels.Result
	// Job is the job that ran.
	Job *Job
	// JobID is the job's id on actors ("" on the driver).
	JobID string
	// ReadSeconds is the time this process took to open and read the input (driver only: on
	// actors the shards read it as part of the run).
	ReadSeconds float64
	// Threads is the number of worker threads of this process (a cluster's nodes have their
	// own).
	Threads int
	// Storage and XBytes say how this process stored X ("float32", "float64" or "mixed",
	// and the bytes of its values and indices); on actors Storage is the storage asked of
	// the nodes and XBytes 0.
	Storage string
	XBytes  int64
	// The rest is set for runs on actors: the node each shard ran on by shard id, the
	// committed checkpoints and the time shards spent on them, every rollback after a
	// failure, and per iteration the messages, their protobuf bytes and the collectives
	// completed, measured over the job's actors.
	ShardNodes                                                      []string
	Checkpoints                                                     int64
	CheckpointSeconds                                               float64
	Recoveries                                                      []*messages.Recovery
	MessagesPerIteration, BytesPerIteration, ReductionsPerIteration float64
	Counters                                                        *messages.Counters
}

// fromActors copies an actor run's result.
func fromActors(j *Job, a *actors.Result) *Result {
	return &Result{Result: a.Result, Job: j, JobID: a.JobID, ShardNodes: a.ShardNodes, Checkpoints: a.Checkpoints,
		CheckpointSeconds: a.CheckpointSeconds, Recoveries: a.Recoveries, MessagesPerIteration: a.MessagesPerIteration,
		BytesPerIteration: a.BytesPerIteration, ReductionsPerIteration: a.ReductionsPerIteration, Counters: a.Counters,
		Storage: j.Spec.Storage.String()}
}

// Report returns report.json's content for the result: the run (report.New) and what the job
// and its target say. The caller adds what only it knows (the image shape).
func (r *Result) Report() *report.Report {
	j := r.Job
	s := j.Spec
	rep := report.New(&r.Result, s.Stop)
	rep.Algo, rep.Input, rep.Init, rep.Seed = string(s.Algo), s.Inputs, string(s.Init), s.Seed
	rep.Threads, rep.ReadSeconds = r.Threads, r.ReadSeconds
	if s.Algo == kernels.Transform && r.StopReason == kernels.StopMaxIter {
		// One pass is the exact solution: nothing was cut short.
		rep.Converged, rep.StopReason = true, "solved"
		rep.Stop = "solved: the exact nonnegative least squares of every sample for the basis given, in one pass"
	}
	if s.Loss != kernels.LossFrobenius {
		rep.Loss, rep.Objective = s.Loss.String(), r.Objective
	}
	if s.Missing || s.TestFraction > 0 {
		rep.Observed, rep.Missing = r.Observed, r.Missing
	}
	if s.TestFraction > 0 {
		rep.TestFraction, rep.TestSeed, rep.TestCount = s.TestFraction, s.TestSeed, r.TestCount
		rep.TestRelErr2, rep.TestRMSE = r.TestRelErr2(), r.TestRMSE()
	}
	if s.AlphaCoef != 0 || s.AlphaBasis != 0 {
		rep.AlphaCoef, rep.AlphaBasis, rep.L1Ratio, rep.Objective = s.AlphaCoef, s.AlphaBasis, s.L1Ratio, r.Objective
	}
	rep.Kernel, rep.Storage, rep.XBytes = kernels.ActiveKernelPath().String(), r.Storage, r.XBytes
	if !j.Target.OnActors() {
		return rep
	}
	rep.Nodes = j.Target.Nodes
	rep.ShardNodes = r.ShardNodes
	rep.CheckpointEvery = "auto"
	if s.CheckpointEvery >= 0 {
		rep.CheckpointEvery = strconv.FormatInt(s.CheckpointEvery, 10)
	}
	rep.Checkpoints, rep.Recoveries = r.Checkpoints, r.Recoveries
	if c := j.Target.Cluster; c != nil {
		rep.Cluster, rep.Ingest = strings.Join(c.Cluster, ","), s.Ingest
	}
	if s.OutShared != "" {
		rep.CoefShared = filepath.Join(s.OutShared, "coef.npy")
	}
	rep.MessagesPerIt, rep.BytesPerIt, rep.ReductionsPerIt = &r.MessagesPerIteration, &r.BytesPerIteration, &r.ReductionsPerIteration
	return rep
}

// threadsOf returns the worker threads a target's process runs (0: all cores).
func threadsOf(t Target) int {
	if t.Threads > 0 {
		return t.Threads
	}
	return runtime.GOMAXPROCS(0)
}
