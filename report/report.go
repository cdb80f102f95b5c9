// Package report is a job's report.json: one schema, built by one function (Build, from the
// job's spec and what its run measured) whether the job ran in the factorize process, on
// actors in it, on a cluster, or detached on a cluster (where the coordinator writes it).
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
)

// Report is report.json.
type Report struct {
	Algo     string   `json:"algo"`
	Input    []string `json:"input"`
	M        int      `json:"m"`
	N        int      `json:"n"`
	K        int      `json:"k"`
	Shards   int      `json:"shards"`
	Threads  int      `json:"threads"`
	Init     string   `json:"init"`
	Seed     uint64   `json:"seed"`
	Tol      float64  `json:"tol"`
	MaxIter  int      `json:"max_iter"`
	StallTol float64  `json:"stall_tol"`
	// AlphaCoef, AlphaBasis and L1Ratio are the penalties (scikit-learn's alpha_W, alpha_H,
	// l1_ratio), when there are any; Objective is then the penalized objective at the end
	// (||X - BC||^2 plus twice scikit-learn's penalty terms, see kernels.Options), which
	// objective_ratio and the stop rule use, while rel_err2 and rmse stay the plain error.
	AlphaCoef  float64 `json:"alpha_coef,omitempty"`
	AlphaBasis float64 `json:"alpha_basis,omitempty"`
	L1Ratio    float64 `json:"l1_ratio,omitempty"`
	Objective  float64 `json:"objective,omitempty"`
	// Loss is the divergence minimised, when not Frobenius ("kl", "is" or a beta); Objective
	// is then twice scikit-learn's beta divergence (plus any penalty), and rel_err2 and rmse
	// stay the plain squared error.
	Loss string `json:"loss,omitempty"`
	// Missing and held-out entries (--missing nan, --test-fraction): the entries the fit saw
	// (rel_err2 and rmse are over them), the missing ones, and the held-out test set with its
	// error at the end (the history has it at every iteration).
	Observed     int64   `json:"observed,omitempty"`
	Missing      int64   `json:"missing,omitempty"`
	TestFraction float64 `json:"test_fraction,omitempty"`
	TestSeed     uint64  `json:"test_seed,omitempty"`
	TestCount    int64   `json:"test_count,omitempty"`
	TestRelErr2  float64 `json:"test_rel_err2,omitempty"`
	TestRMSE     float64 `json:"test_rmse,omitempty"`
	// Transform is what the job fitted instead of the input's values ("sqrt": their square
	// roots; absent: the values). The errors and factors are then of sqrt(X), and so are the
	// history's test errors, while the final TestRelErr2 and TestRMSE are of the model's
	// square against X (kernels.Options.TestOfSquares): the last history point's differ.
	Transform string `json:"transform,omitempty"`
	// Accel is accelerated DID's inner loops in effect (kernels.Accel's form: "off", "auto" or
	// "C,B,eps"), for the algorithms that have them (did, bcd, hals).
	Accel      string `json:"accel,omitempty"`
	Iterations int    `json:"iterations"`
	// Seconds is the run's wall time from the start of the initialisation (InitSeconds) to
	// the end of the last iteration (IterateSeconds); ReadSeconds is the time this process
	// took to read the input before (0 on a cluster, whose nodes read it).
	Seconds        float64 `json:"seconds"`
	ReadSeconds    float64 `json:"read_seconds"`
	InitSeconds    float64 `json:"init_seconds"`
	IterateSeconds float64 `json:"iterate_seconds"`
	ObjectiveRat   float64 `json:"objective_ratio"`
	// RelErr2 is ||X - BC||^2 / ||X||^2 computed directly from the factors at the end, RMSE
	// sqrt(||X - BC||^2 / (M N)).
	RelErr2 float64 `json:"rel_err2"`
	RMSE    float64 `json:"rmse"`
	// Converged is true when the error stopped moving (--tol or --stall-tol); StopReason is
	// the rule that ended the run (converged, stalled, max-iter, time-limit, canceled) and
	// Stop says it in words.
	Converged  bool   `json:"converged"`
	StopReason string `json:"stop_reason"`
	Stop       string `json:"stop"`
	// ImageShape is [height, width] when the features are the pixels of images (IDX image
	// files, or --image-shape): node plot draws the basis as images.
	ImageShape    []int   `json:"image_shape,omitempty"`
	Collectives   float64 `json:"collectives_per_iteration"`
	FloatsPerIter float64 `json:"floats_per_iteration,omitempty"`
	// Kernel is the kernel path of this process (the nodes of a cluster announce their own).
	Kernel string `json:"kernel"`
	// Storage is how X's values were stored: float32 or float64 when this process ran the job
	// (with XBytes, the bytes of X it held), else the storage asked of the nodes.
	Storage string `json:"storage"`
	XBytes  int64  `json:"x_bytes,omitempty"`
	// Nodes and the message accounting are set for runs on actors (--nodes): measured over
	// the job's actors, not computed from a formula.
	Nodes int `json:"nodes,omitempty"`
	// Cluster and Ingest are set for runs on a running cluster (--cluster); CoefShared is where
	// the shards wrote coef.npy with --out-shared.
	Cluster    string `json:"cluster,omitempty"`
	Ingest     string `json:"ingest,omitempty"`
	CoefShared string `json:"coef_shared,omitempty"`
	// ShardNodes is the actor address of the node each shard ran on (runs on actors).
	ShardNodes []string `json:"shard_nodes,omitempty"`
	// CheckpointEvery, Checkpoints and Recoveries are set for runs on actors: the checkpoint
	// interval, the checkpoints committed, and every rollback after a failure.
	CheckpointEvery string                 `json:"checkpoint_every,omitempty"`
	Checkpoints     int64                  `json:"checkpoints,omitempty"`
	Recoveries      []Recovery             `json:"recoveries,omitempty"`
	MessagesPerIt   *float64               `json:"messages_per_iteration,omitempty"`
	BytesPerIt      *float64               `json:"bytes_per_iteration,omitempty"`
	ReductionsPerIt *float64               `json:"reductions_per_iteration,omitempty"`
	History         []kernels.HistoryPoint `json:"history"`
}

// Run is what a finished run measured, wherever it ran: the factors' summary and history,
// and what running it took. The run's process (the driver, or the client of a job on actors)
// fills it in; for a detached job the coordinator does, from the job's result message.
type Run struct {
	kernels.Result
	// ReadSeconds is the time this process took to read the input (0 on actors, whose
	// shards read it as part of the run).
	ReadSeconds float64
	// Threads is the number of worker threads that ran the job: the driver's, or on actors
	// the most of any node a shard ran on.
	Threads int
	// Storage and XBytes are how X was stored where it ran: "float32", "float64" or "mixed",
	// and the bytes of its values and indices (summed over the shards on actors).
	Storage string
	XBytes  int64
	// OnActors is set for a run on actors; Nodes is then the number of in-process actor
	// systems (0 on a cluster), and Cluster the cluster's addresses as its client was given
	// them ("" when none is known).
	OnActors bool
	Nodes    int
	Cluster  string
	// The rest is set for runs on actors: the node each shard ran on by shard id, the
	// committed checkpoints, every rollback after a failure, and per iteration the messages,
	// their protobuf bytes and the collectives completed, measured over the job's actors.
	ShardNodes                                                      []string
	Checkpoints                                                     int64
	Recoveries                                                      []Recovery
	MessagesPerIteration, BytesPerIteration, ReductionsPerIteration float64
}

// Build returns report.json's content for a job's spec and its run: the one place a report is
// made, for runs on the driver, on actors, on a cluster, detached (by the coordinator) and
// for transform. The caller adds only what the spec and the run cannot say (the image shape).
func Build(spec *jobspec.Spec, run *Run) *Report {
	res := &run.Result
	r := &Report{M: res.M, N: res.N, K: res.K, Shards: res.Shards, Tol: spec.Stop.Tol, MaxIter: spec.Stop.MaxIter, StallTol: spec.Stop.StallTol,
		Iterations: res.Iterations, Seconds: res.Seconds, ObjectiveRat: kernels.Ratio(res.Objective, res.Initial),
		RelErr2: res.RelErr2(), Converged: res.StopReason == kernels.StopConverged || res.StopReason == kernels.StopStalled,
		StopReason: string(res.StopReason), Stop: StopSentence(res.StopReason, spec.Stop.For(spec.Accel), res.History),
		Collectives: res.Comm.PerIteration, FloatsPerIter: res.Comm.FloatsPerIteration, History: res.History}
	if r.History == nil {
		r.History = []kernels.HistoryPoint{}
	}
	if len(res.History) > 0 {
		r.InitSeconds = res.History[0].Seconds
		r.IterateSeconds = max(res.Seconds-r.InitSeconds, 0)
	}
	_, r.RMSE = kernels.Errors(res.Residual, res.SqNormX, res.M, res.N)
	r.Algo, r.Input, r.Init, r.Seed = string(spec.Algo), spec.Inputs, string(spec.Init), spec.Seed
	r.Threads, r.ReadSeconds = run.Threads, run.ReadSeconds
	if spec.Algo == kernels.Transform && res.StopReason == kernels.StopMaxIter {
		// One pass is the exact solution: nothing was cut short.
		r.Converged, r.StopReason = true, "solved"
		r.Stop = "solved: the exact nonnegative least squares of every sample for the basis given, in one pass"
	}
	if spec.Loss != kernels.LossFrobenius {
		r.Loss, r.Objective = spec.Loss.String(), res.Objective
	}
	if spec.Missing || spec.TestFraction > 0 {
		r.Observed, r.Missing = res.Observed, res.Missing
	}
	if spec.TestFraction > 0 {
		r.TestFraction, r.TestSeed, r.TestCount = spec.TestFraction, spec.TestSeed, res.TestCount
		r.TestRelErr2, r.TestRMSE = res.TestRelErr2(), res.TestRMSE()
	}
	if spec.AlphaCoef != 0 || spec.AlphaBasis != 0 {
		r.AlphaCoef, r.AlphaBasis, r.L1Ratio, r.Objective = spec.AlphaCoef, spec.AlphaBasis, spec.L1Ratio, res.Objective
	}
	if slices.Contains(kernels.AccelAlgorithms(), spec.Algo) || spec.Accel.On() {
		r.Accel = spec.Accel.String()
	}
	if spec.Transform.On() {
		r.Transform = string(spec.Transform)
	}
	r.Kernel, r.Storage, r.XBytes = kernels.ActiveKernelPath().String(), run.Storage, run.XBytes
	if !run.OnActors {
		return r
	}
	r.Nodes, r.ShardNodes = run.Nodes, run.ShardNodes
	r.CheckpointEvery = "auto"
	if spec.CheckpointEvery >= 0 {
		r.CheckpointEvery = strconv.FormatInt(spec.CheckpointEvery, 10)
	}
	r.Checkpoints, r.Recoveries = run.Checkpoints, run.Recoveries
	if run.Nodes == 0 {
		// A cluster's: its nodes took the input as the spec's ingest says.
		r.Cluster, r.Ingest = run.Cluster, spec.Ingest
	}
	if spec.OutShared != "" {
		r.CoefShared = filepath.Join(spec.OutShared, "coef.npy")
	}
	r.MessagesPerIt, r.BytesPerIt, r.ReductionsPerIt = &run.MessagesPerIteration, &run.BytesPerIteration, &run.ReductionsPerIteration
	return r
}

// Recovery is one rollback of a job on actors after a failure, as report.json lists it.
type Recovery struct {
	// Epoch is the epoch the job went on in; Cause what happened ("node lost", "actor
	// panic", "coordinator lost", ...).
	Epoch uint64 `json:"epoch,omitempty"`
	Cause string `json:"cause,omitempty"`
	// Noticed and Resumed are seconds since the job started: when the failure was noticed
	// (negative for a node lost while the job was set up, before it started), and when the
	// first iteration after the rollback completed.
	Noticed float64 `json:"noticed,omitempty"`
	Resumed float64 `json:"resumed,omitempty"`
	// FromIteration is the checkpoint's iteration the job resumed from, Redone the
	// iterations done before the failure that had to be done again.
	FromIteration int64 `json:"from_iteration,omitempty"`
	Redone        int64 `json:"redone,omitempty"`
}

// Write writes the report as indented JSON.
func (r *Report) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// StopSentence says in words which rule ended a run, as a user reads it, naming no flag or
// key (the CLI and the HTTP API write the same report): "converged: ..." for the two rules
// that mean the error stopped moving (tol, stall tol), and for the limits (the iteration
// limit, the time limit) whether the error was still falling when they cut the run short.
func StopSentence(why kernels.StopReason, rule kernels.StopRule, hist []kernels.HistoryPoint) string {
	window := rule.StallWindow
	if window == 0 {
		window = 10
	}
	switch why {
	case kernels.StopConverged:
		return fmt.Sprintf("converged: the error fell to %s of the initial error (tol %g)", percent(rule.Tol), rule.Tol)
	case kernels.StopStalled:
		return fmt.Sprintf("converged: the error fell by less than %s over the last %d iterations (stall tol %g)", percent(rule.StallTol), window, rule.StallTol) + settled(rule, hist)
	case kernels.StopCanceled:
		return "interrupted: the factors are the last finished iteration's, partly updated by the interrupted one (still nonnegative); the errors are those of these factors"
	}
	limit := fmt.Sprintf("stopped at the iteration limit (%d)", rule.MaxIter)
	if why == kernels.StopTimeLimit {
		limit = fmt.Sprintf("stopped at the time limit (%v)", rule.TimeLimit)
	}
	settle := settled(rule, hist)
	if fall, span, ok := recentFall(hist, window); ok {
		window = span
		if fall < max(rule.StallTol, jobspec.DefaultStallTol) {
			return fmt.Sprintf("%s; the error had stopped falling (by %s over the last %d iterations)%s", limit, percent(fall), window, settle)
		}
		return fmt.Sprintf("%s while the error was still falling (by %s over the last %d iterations): raise it, or accept the result%s", limit, percent(fall), window, settle)
	}
	return limit + settle
}

// settled says what an extrapolating run's end (rule.Settle > 0, kernels.StopRule.For) did
// about its overshoots: the iterations it took past its iteration cap to end at its
// lowest error, or that it ended above it (at the time limit, or with Settle spent), with
// the lowest; "" when neither.
func settled(rule kernels.StopRule, hist []kernels.HistoryPoint) string {
	if rule.Settle == 0 || len(hist) == 0 {
		return "" // a monotone run: a rise is round-off
	}
	last := hist[len(hist)-1]
	lowest := last
	for _, h := range hist {
		if h.Ratio < lowest.Ratio {
			lowest = h
		}
	}
	if lowest.Ratio < last.Ratio {
		return fmt.Sprintf("; its last iteration overshot (accelerated DID's extrapolation): its error is above the run's lowest, rel_err2 %.4g at iteration %d, "+
			"and the factors are the last iteration's", lowest.RelErr2, lowest.Iteration)
	}
	if extra := last.Iteration - rule.MaxIter; extra > 0 {
		more := "1 more iteration"
		if extra > 1 {
			more = fmt.Sprintf("%d more iterations", extra)
		}
		return fmt.Sprintf("; it took %s past the limit to end at its lowest error, not on an overshoot of its extrapolation", more)
	}
	return ""
}

// recentFall is the relative fall of the error over the last window iterations of a history,
// or over all of it when it is shorter, and the number of iterations that is (false for a
// history of one point, or an error of 0).
func recentFall(hist []kernels.HistoryPoint, window int) (float64, int, bool) {
	span := min(window, len(hist)-1)
	if span < 1 {
		return 0, 0, false
	}
	old, now := hist[len(hist)-1-span].Ratio, hist[len(hist)-1].Ratio
	if old <= 0 {
		return 0, 0, false
	}
	return (old - now) / old, span, true
}

// percent writes a fraction as a percentage with as many digits as it needs: 1e-4 is "0.01%",
// 0.005 "0.5%", 1e-6 "0.0001%".
func percent(f float64) string {
	return fmt.Sprintf("%.3g%%", 100*f)
}
