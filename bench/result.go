package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/didnmf/didnmf/kernels"
)

// Result is the line `didnmf bench` prints about one job: its JSON form is the --json line.
type Result struct {
	Algo    string `json:"algo"`
	Input   string `json:"input"`
	M       int    `json:"m"`
	N       int    `json:"n"`
	K       int    `json:"k"`
	Shards  int    `json:"shards"`
	Threads int    `json:"threads"`
	Layout  string `json:"layout"`
	// Kernel is the kernel path; Storage how X's values were stored (float32 or float64) and
	// XBytes the bytes of X (values, and indices of a sparse block).
	Kernel     string  `json:"kernel"`
	Storage    string  `json:"storage"`
	XBytes     int64   `json:"x_bytes"`
	Iterations int     `json:"iterations"`
	SecPerIter float64 `json:"sec_per_iter"`
	// RooflineSec is the larger of the two floors of one iteration, Bound says which it is,
	// and RooflineRatio is SecPerIter over it.
	RooflineSec   float64 `json:"roofline_sec"`
	RooflineRatio float64 `json:"roofline_ratio"`
	Bound         string  `json:"bound"`
	// The memory floor: the median time to move MemoryBytes (every stored entry of X read, C
	// read and written) with vector loads on all threads, and the bandwidth that is.
	MemoryFloorSec float64 `json:"memory_floor_sec"`
	MemoryBytes    int64   `json:"memory_bytes"`
	MemoryGBps     float64 `json:"memory_gbps"`
	// The compute floor: DID's flops of one iteration (Gram form; the same count whatever
	// --algo) at the FMA peak measured on all threads (PeakGFlops, by the widest loop
	// PeakFMA: zmm, ymm or scalar; PeakGFlopsOneThread on one).
	ComputeFloorSec     float64 `json:"compute_floor_sec"`
	FlopsPerIter        float64 `json:"flops_per_iteration"`
	PeakGFlops          float64 `json:"peak_gflops"`
	PeakGFlopsOneThread float64 `json:"peak_gflops_one_thread"`
	PeakFMA             string  `json:"peak_fma"`
	// FMAPeaks has every FMA loop's peak (zmm, ymm or scalar) on one and on all threads.
	FMAPeaks    []FMAPeak `json:"fma_peaks"`
	RelErr2     float64   `json:"rel_err2"`
	Collectives float64   `json:"collectives_per_iteration"`
	GoVersion   string    `json:"go"`
	// With --nodes: the same job on actors, timed in the same run as the driver. ActorRatio is
	// the median over --reps of (actor sec/iter) / (driver sec/iter); OverheadSec is the median
	// of their difference, which on a tiny matrix is the latency of one allreduce.
	Nodes           int     `json:"nodes,omitempty"`
	FanIn           int     `json:"fan_in,omitempty"`
	Reps            int     `json:"reps,omitempty"`
	ActorSecPerIter float64 `json:"actor_sec_per_iter,omitempty"`
	ActorRatio      float64 `json:"actor_ratio,omitempty"`
	OverheadSec     float64 `json:"actor_overhead_sec_per_iter,omitempty"`
	MessagesPerIter float64 `json:"messages_per_iteration,omitempty"`
	BytesPerIter    float64 `json:"bytes_per_iteration,omitempty"`
	// ShardsBusy is the share of the shards' iteration time spent in their steps rather than
	// waiting for the results of collectives (median over --reps): 1 when the messages cost
	// nothing and the shards are balanced.
	ShardsBusy float64 `json:"shards_busy,omitempty"`
	// With --procs: node processes on loopback joined by gossip instead of in-process actor
	// systems (the actor_* figures are then theirs); JoinSec is the median time from a
	// joining node's process start until every node lists it, DetectSec the time from kill -9
	// of one node until every other declared it dead (--detect).
	Procs     int     `json:"procs,omitempty"`
	JoinSec   float64 `json:"join_sec,omitempty"`
	DetectSec float64 `json:"detect_sec,omitempty"`
	// AllreduceSec (with --procs) is the latency of one allreduce between the processes: on a
	// tiny job of the same features, rank, algorithm and shards (AllreduceInput), the median
	// over --reps pairs of (processes' seconds per iteration - the driver's) per collective.
	AllreduceSec   float64 `json:"allreduce_sec,omitempty"`
	AllreduceInput string  `json:"allreduce_input,omitempty"`
	// With --nodes and --checkpoint-overhead: the whole job's time with checkpoints every
	// CheckpointEvery iterations over its time without, median over --reps alternating pairs.
	CheckpointEvery    string  `json:"checkpoint_every,omitempty"`
	CheckpointOverhead float64 `json:"checkpoint_overhead,omitempty"`
	CheckpointsPerJob  int64   `json:"checkpoints_per_job,omitempty"`
}

// FMAPeak is one FMA loop's measured peak.
type FMAPeak struct {
	Kind             string  `json:"kind"`
	OneThreadGFlops  float64 `json:"one_thread_gflops"`
	AllThreadsGFlops float64 `json:"all_threads_gflops"`
}

// NewResult describes the driver's run res of algo on blocks (its input named input, on
// threads threads), timed at secPerIter seconds per iteration, against the floors roof.
func NewResult(input string, algo kernels.Algorithm, res *kernels.Result, blocks []kernels.Block, threads int, secPerIter float64, roof Rooflines) Result {
	out := Result{Algo: string(algo), Input: input, M: res.M, N: res.N, K: res.K, Shards: res.Shards,
		Threads: threads, Layout: LayoutOf(blocks), Iterations: res.Iterations, SecPerIter: secPerIter, RelErr2: res.RelErr2(),
		Collectives: res.Comm.PerIteration, GoVersion: runtime.Version(), Kernel: kernels.ActiveKernelPath().String()}
	out.Storage, out.XBytes = kernels.StoredAs(blocks)
	roof.Fill(&out)
	return out
}

// LayoutOf says how blocks are held: "sparse" (CSC) or "dense".
func LayoutOf(blocks []kernels.Block) string {
	if len(blocks) > 0 {
		if _, ok := blocks[0].(*kernels.CSC); ok {
			return "sparse"
		}
	}
	return "dense"
}

// SetActors records the job's timing on actors (nodes in-process actor systems, 0 on
// processes), over reps pairs.
func (r *Result) SetActors(a *ActorTiming, nodes, reps int) {
	r.Nodes, r.FanIn, r.Reps = nodes, a.FanIn, reps
	r.ActorSecPerIter, r.ActorRatio, r.OverheadSec = a.ActorSec, a.Ratio, a.Overhead
	r.MessagesPerIter, r.BytesPerIter, r.ShardsBusy = a.Messages, a.Bytes, a.Busy
}

// SetProcs records what a run on procs node processes measured.
func (r *Result) SetProcs(procs int, p *ProcsTiming) {
	r.Procs, r.JoinSec, r.DetectSec = procs, p.JoinSec, p.DetectSec
	r.AllreduceSec, r.AllreduceInput = p.Allreduce.Sec, p.Allreduce.Input
}

// SetCheckpoints records the cost of checkpoints every `every` iterations (as the flag gave
// it).
func (r *Result) SetCheckpoints(every string, c *CheckpointCost) {
	r.CheckpointEvery, r.CheckpointOverhead, r.CheckpointsPerJob = every, c.Overhead, c.Checkpoints
}

// Rooflines are the two floors of one iteration over all blocks.
type Rooflines struct {
	// MemorySec is the median time to move Bytes (every stored entry of X read, C read and
	// written) with vector loads; ComputeSec is Flops (DID's, Gram form) at the best of Peak.
	MemorySec, ComputeSec float64
	Bytes                 int64
	Flops                 float64
	Peak                  kernels.FMAPeak
}

// MeasureRooflines times the memory floor of one iteration over all blocks (every stored entry
// of X read once, C read and written once; the median of reps passes, after one untimed) and
// computes the compute floor (DID's flops at the FMA peak), with the same number of threads as
// the job.
func MeasureRooflines(blocks []kernels.Block, k, threads, reps int) Rooflines {
	pool := kernels.NewPool(threads)
	defer pool.Close()
	var r Rooflines
	type bufs struct{ src, dst []float64 }
	b := make([]bufs, len(blocks))
	for s, bl := range blocks {
		_, n := bl.Dims()
		b[s] = bufs{make([]float64, k*n), make([]float64, k*n)}
		// Fresh buffers are the kernel's zero page until written: reading them would come
		// from one cached page, and the first writes would fault. Write both first.
		for i := range b[s].src {
			b[s].src[i], b[s].dst[i] = 1, 2
		}
		r.Bytes += kernels.RooflineBytes(bl, k)
		r.Flops += kernels.DIDFlops(bl, k)
	}
	for s, bl := range blocks { // warm-up pass, not timed
		kernels.MemoryRoofline(bl, k, b[s].src, b[s].dst, pool)
	}
	times := make([]float64, reps)
	for i := range times {
		t := time.Now()
		for s, bl := range blocks {
			kernels.MemoryRoofline(bl, k, b[s].src, b[s].dst, pool)
		}
		times[i] = time.Since(t).Seconds()
	}
	r.MemorySec = Median(times)
	r.Peak = kernels.MeasureFMAPeak(pool)
	r.ComputeSec = r.Flops / r.Peak.Best().All
	return r
}

// Fill sets the roofline fields of out from r and out.SecPerIter: the floors, the peaks, the
// bound (the larger floor) and the ratio of SecPerIter to it.
func (r Rooflines) Fill(out *Result) {
	best := r.Peak.Best()
	out.MemoryFloorSec, out.MemoryBytes, out.MemoryGBps = r.MemorySec, r.Bytes, float64(r.Bytes)/r.MemorySec/1e9
	out.ComputeFloorSec, out.FlopsPerIter = r.ComputeSec, r.Flops
	out.PeakGFlops, out.PeakGFlopsOneThread, out.PeakFMA = best.All/1e9, best.OneCore/1e9, best.Kind
	out.FMAPeaks = nil
	for _, p := range r.Peak.Rates {
		out.FMAPeaks = append(out.FMAPeaks, FMAPeak{p.Kind, p.OneCore / 1e9, p.All / 1e9})
	}
	out.Bound, out.RooflineSec = "memory", r.MemorySec
	if r.ComputeSec > r.MemorySec {
		out.Bound, out.RooflineSec = "compute", r.ComputeSec
	}
	out.RooflineRatio = out.SecPerIter / out.RooflineSec
}

// Report is a Result with what its text form says besides.
type Report struct {
	Result
	// RooflineReps is the number of passes the memory floor is the median of.
	RooflineReps int
	// OnActors is set when the job was timed on actors too (SetActors), Checkpoints when the
	// cost of checkpoints was (SetCheckpoints).
	OnActors, Checkpoints bool
	// Allreduce is the probe of a run on processes (SetProcs; nil: none), Detect set when the
	// time to declare a killed node dead was measured.
	Allreduce *AllreduceProbe
	Detect    bool
}

// WriteJSON writes the result as one JSON line.
func (r *Report) WriteJSON(w io.Writer) error {
	line, err := json.Marshal(r.Result)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(line))
	return err
}

// WriteText writes the result for a reader: the time per iteration against the floors, then
// what was measured on actors, of checkpoints and on processes.
func (r *Report) WriteText(w io.Writer) {
	out := &r.Result
	fmt.Fprintf(w, "%s on %s (%d x %d, K=%d, %s), %d shard(s), %d thread(s)\n", out.Algo, out.Input, out.N, out.M, out.K, out.Layout, out.Shards, out.Threads)
	fmt.Fprintf(w, "  per iteration (median of %d): %.4g s\n", out.Iterations, out.SecPerIter)
	fmt.Fprintf(w, "  memory floor: %.4g s (%.4g MB: X's stored entries read, C read and written; %.3g GB/s, median of %d)\n",
		out.MemoryFloorSec, float64(out.MemoryBytes)/1e6, out.MemoryGBps, r.RooflineReps)
	fmt.Fprintf(w, "  compute floor: %.4g s (DID's %.4g flop at the %s FMA peak, %.4g GFLOP/s on %d thread(s), %.4g on one)\n",
		out.ComputeFloorSec, out.FlopsPerIter, out.PeakFMA, out.PeakGFlops, out.Threads, out.PeakGFlopsOneThread)
	fmt.Fprintf(w, "  FMA peaks (GFLOP/s, one thread / %d):", out.Threads)
	for _, p := range out.FMAPeaks {
		fmt.Fprintf(w, " %s %.4g / %.4g", p.Kind, p.OneThreadGFlops, p.AllThreadsGFlops)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  bound: %s  ->  per iteration / %s floor = %.2f\n", out.Bound, out.Bound, out.RooflineRatio)
	fmt.Fprintf(w, "  rel_err2 after %d iterations: %.4g\n", out.Iterations, out.RelErr2)
	if r.OnActors {
		where := fmt.Sprintf("%d actor systems", out.Nodes)
		if r.Allreduce != nil {
			where = fmt.Sprintf("%d node processes", out.Procs)
		}
		fmt.Fprintf(w, "  on %s over gRPC (fan-in %d): %.4g s per iteration, %.3fx the driver (median of %d pairs), +%.3g s per iteration\n",
			where, out.FanIn, out.ActorSecPerIter, out.ActorRatio, out.Reps, out.OverheadSec)
		fmt.Fprintf(w, "  messages per iteration %.3g, bytes per iteration %.4g\n", out.MessagesPerIter, out.BytesPerIter)
		fmt.Fprintf(w, "  shards busy %.0f%% of their iteration time, waiting for collectives' results the rest (median of %d)\n", 100*out.ShardsBusy, out.Reps)
	}
	if r.Checkpoints {
		fmt.Fprintf(w, "  checkpoints every %s iterations (%d a job): job time %+.2f%% against none (median of %d pairs)\n",
			out.CheckpointEvery, out.CheckpointsPerJob, 100*out.CheckpointOverhead, out.Reps)
	}
	if r.Allreduce != nil {
		r.Allreduce.WriteText(w)
		fmt.Fprintf(w, "  gossip: a joining node is listed by all %.3g s after its process started (median)", out.JoinSec)
		if r.Detect {
			fmt.Fprintf(w, "; kill -9 of a node declared dead by all others after %.3g s", out.DetectSec)
		}
		fmt.Fprintln(w)
	}
}
