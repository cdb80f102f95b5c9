package didnmf

import (
	"math"
	"runtime"
	"strings"

	"gonum.org/v1/gonum/mat"

	"github.com/didnmf/didnmf/internal/actors"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/report"
)

// Result is a finished job: the factors and history of kernels.Result, and what running it
// took where it ran. In kernels.Result's names, M is the number of features, N of samples and
// K the rank: B is the basis (features x K) and C the coefficients (K x samples), both
// column-major; Basis and Coef give them as matrices with samples as rows.
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
	Recoveries                                                      []report.Recovery
	MessagesPerIteration, BytesPerIteration, ReductionsPerIteration float64
	// Traffic is what the job's actors sent and how its shards spent their iterations.
	Traffic Traffic
}

// Traffic is what a job's actors sent, summed over them, and how its shards spent their
// iterations. A run on the driver sends nothing: all zero.
type Traffic struct {
	// Messages and Bytes (protobuf size) sent during iterations, and during initialisation.
	Messages, Bytes, InitMessages, InitBytes int64
	// Reductions and InitReductions are the collectives completed at the root of the reduce
	// tree, during iterations and during initialisation.
	Reductions, InitReductions int64
	// Duplicates and Stale are the duplicate and stale messages dropped.
	Duplicates, Stale int64
	// ComputeSeconds and WaitSeconds are the seconds the shards spent in their steps and
	// waiting for the results of their collectives, summed over shards, iterations only.
	ComputeSeconds, WaitSeconds float64
}

// Busy is the share of the shards' iteration time spent in their steps, compute / (compute +
// wait): how well the cluster kept its shards busy. It is 0 when the traffic holds no such
// time (a run on the driver) or a node reported nonsense (a negative or infinite time).
func (t Traffic) Busy() float64 {
	compute, wait := t.ComputeSeconds, t.WaitSeconds
	if !(compute > 0) || !(wait >= 0) || math.IsInf(compute+wait, 0) {
		return 0
	}
	return compute / (compute + wait)
}

// trafficOf copies a job's counters (nil: none).
func trafficOf(c *messages.Counters) Traffic {
	return Traffic{Messages: c.GetMessages(), Bytes: c.GetBytes(), InitMessages: c.GetInitMessages(), InitBytes: c.GetInitBytes(),
		Reductions: c.GetReductions(), InitReductions: c.GetInitReductions(), Duplicates: c.GetDuplicates(), Stale: c.GetStale(),
		ComputeSeconds: c.GetComputeSeconds(), WaitSeconds: c.GetWaitSeconds()}
}

// Basis returns the basis as a features x K matrix, a copy (Result.B holds it column-major).
// A result without factors gives an empty matrix.
func (r *Result) Basis() *mat.Dense {
	var b mat.Dense
	if r.M > 0 && r.K > 0 && len(r.B) == r.M*r.K {
		b.CloneFrom(mat.NewDense(r.K, r.M, r.B).T())
	}
	return &b
}

// Coef returns the coefficients as a samples x K matrix: sample i's are row i. It shares
// Result.C's memory (C is K x samples column-major, which is samples x K row-major). A result
// without factors (a job that wrote them to a shared directory) gives an empty matrix.
func (r *Result) Coef() *mat.Dense {
	if r.N > 0 && r.K > 0 && len(r.C) == r.N*r.K {
		return mat.NewDense(r.N, r.K, r.C)
	}
	return &mat.Dense{}
}

// fromActors copies an actor run's result.
func fromActors(j *Job, a *actors.Result) *Result {
	return &Result{Result: a.Result, Job: j, JobID: a.JobID, ShardNodes: a.ShardNodes, Checkpoints: a.Checkpoints,
		CheckpointSeconds: a.CheckpointSeconds, Recoveries: a.Recoveries, MessagesPerIteration: a.MessagesPerIteration,
		BytesPerIteration: a.BytesPerIteration, ReductionsPerIteration: a.ReductionsPerIteration, Traffic: trafficOf(a.Counters),
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
