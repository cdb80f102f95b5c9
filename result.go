package didnmf

import (
	"runtime"
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
	// Threads is the number of worker threads that ran the job: this process's, or on actors
	// the most of any node a shard ran on.
	Threads int
	// Storage and XBytes say how X was stored where the job ran ("float32", "float64" or
	// "mixed", and the bytes of its values and indices, summed over the shards on actors).
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
		Storage: a.Storage, XBytes: a.XBytes, Threads: a.Threads}
}

// Report returns report.json's content for the result (report.Build of the job's spec and
// the run). The caller adds what only it knows (the image shape).
func (r *Result) Report() *report.Report {
	run := &report.Run{Result: r.Result, ReadSeconds: r.ReadSeconds, Threads: r.Threads, Storage: r.Storage, XBytes: r.XBytes,
		OnActors: r.Job.Target.OnActors(), Nodes: r.Job.Target.Nodes, ShardNodes: r.ShardNodes, Checkpoints: r.Checkpoints,
		Recoveries: r.Recoveries, MessagesPerIteration: r.MessagesPerIteration, BytesPerIteration: r.BytesPerIteration,
		ReductionsPerIteration: r.ReductionsPerIteration}
	if c := r.Job.Target.Cluster; c != nil {
		run.Cluster = strings.Join(c.Cluster, ",")
	}
	return report.Build(r.Job.Spec, run)
}

// threadsOf returns the worker threads a target's process runs (0: all cores).
func threadsOf(t Target) int {
	if t.Threads > 0 {
		return t.Threads
	}
	return runtime.GOMAXPROCS(0)
}
