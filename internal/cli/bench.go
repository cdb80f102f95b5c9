package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/didnmf/didnmf"

	"github.com/didnmf/didnmf/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/server"
)

// benchResult is the line bench prints.
type benchResult struct {
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
	FMAPeaks    []fmaPeakJSON `json:"fma_peaks"`
	RelErr2     float64       `json:"rel_err2"`
	Collectives float64       `json:"collectives_per_iteration"`
	GoVersion   string        `json:"go"`
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

func cmdBench(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var jf jobFlags
	jf.register(fs)
	iters := fs.Int("iters", 20, "iterations to time (the median is reported)")
	asJSON := fs.Bool("json", false, "print one JSON line")
	reps := fs.Int("roofline-reps", 15, "repetitions of the memory roofline pass (the median is reported)")
	pairs := fs.Int("reps", 3, "with --nodes or --procs: driver/actor run pairs (the median ratio is reported)")
	procs := fs.Int("procs", 0, "time the job on `N` didnmf serve processes on loopback, joined by gossip, against the driver")
	procThreads := fs.Int("proc-threads", 0, "worker threads of each --procs process (0: all cores, or all its --pin CPUs)")
	pin := fs.Bool("pin", false, "with --procs N: run each process on CPUs of its own (serve --cpus), the process's CPUs shared out in order, at least one each, as separate machines would")
	detect := fs.Bool("detect", false, "with --procs: at the end, kill -9 one node and time until the others declare it dead")
	ckptOverhead := fs.Bool("checkpoint-overhead", false, "with --nodes: time whole jobs with checkpoints every --checkpoint-every iterations against jobs without, alternately")
	var t2 table2Options
	table2 := registerTable2(fs, &t2)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: didnmf bench --input SPEC --rank K [--algo A] [--iters N] [--shards P] [--json]\n"+
			"       didnmf bench --table2 [--sizes 1e5,1e6,1e7] [--algos A,B] [--shards P] [--json]\n\n"+
			"times an algorithm's iterations on an input and prints seconds per iteration against the memory\n"+
			"and compute floors of this machine (with --nodes or --procs, also on actors); --table2 runs the\n"+
			"paper's Table 2\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *table2 {
		t2.asJSON, t2.set = *asJSON, map[string]bool{}
		fs.Visit(func(f *flag.Flag) { t2.set[f.Name] = true })
		if !t2.set["stall-tol"] {
			jf.stallTol = 0 // the paper's rule: every algorithm to --tol
		}
		return cmdTable2(&jf, t2, stdout, stderr)
	}
	for _, name := range []string{"sizes", "algos", "fashion-mnist"} {
		if fs.Lookup(name).Value.String() != fs.Lookup(name).DefValue {
			return badInput("--%s is for --table2", name)
		}
	}
	if *iters < 1 || *reps < 1 || *pairs < 1 {
		return badInput("--iters, --reps and --roofline-reps must be >= 1")
	}
	if jf.nodes > 0 && *procs > 0 {
		return badInput("--nodes and --procs exclude each other")
	}
	if *procs < 0 || *procs > 16 || *procThreads < 0 {
		return badInput("--procs must be between 0 and 16 and --proc-threads >= 0")
	}
	// Every flag is checked before the driver runs, which may take long on large data.
	var pinned [][]int
	if *pin {
		if *procs == 0 {
			return badInput("--pin needs --procs")
		}
		var err error
		if pinned, err = shareCPUs(*procs); err != nil {
			return badInput("--pin: %v", err)
		}
	}
	jf.tol, jf.maxIter, jf.stallTol = 0, *iters, 0 // exactly --iters iterations
	j, err := jf.open()
	if err != nil {
		return err
	}
	defer j.src.Close()
	blocks, err := j.readBlocks()
	if err != nil {
		return err
	}
	threads := j.cfg.Threads
	if threads == 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	stopProfiles, profErrs := server.StartProfiles("bench")
	for _, e := range profErrs {
		fmt.Fprintln(stderr, "warning:", e)
	}
	res, err := kernels.Run(context.Background(), blocks, j.cfg)
	stopProfiles()
	if err != nil {
		return err
	}
	spi := median(res.IterSeconds)
	var act *actorBench
	var pb *procsBench
	if jf.nodes > 0 {
		if act, err = benchActors(&jf, j, blocks, *pairs); err != nil {
			return err
		}
		spi = act.driverSec
	} else if *procs > 0 {
		if pb, err = benchProcs(&jf, j, blocks, *procs, *procThreads, pinned, *pairs, *detect); err != nil {
			return err
		}
		act = &pb.actorBench
		spi = act.driverSec
	}
	var ckpt *checkpointBench
	if *ckptOverhead {
		if jf.nodes == 0 || jf.checkpointEvery == 0 {
			return badInput("--checkpoint-overhead needs --nodes N and checkpoints (--checkpoint-every auto or N > 0)")
		}
		if ckpt, err = benchCheckpoints(&jf, j, *pairs); err != nil {
			return err
		}
	}
	roof := measureRooflines(blocks, j.cfg.K, threads, *reps)
	layout := "dense"
	if _, ok := blocks[0].(*kernels.CSC); ok {
		layout = "sparse"
	}
	out := benchResult{Algo: string(j.cfg.Algo), Input: j.src.Name(), M: res.M, N: res.N, K: res.K, Shards: res.Shards,
		Threads: threads, Layout: layout, Iterations: res.Iterations, SecPerIter: spi, RelErr2: res.RelErr2(),
		Collectives: res.Comm.PerIteration, GoVersion: runtime.Version(), Kernel: kernels.ActiveKernelPath().String()}
	out.Storage, out.XBytes = kernels.StoredAs(blocks)
	roof.fill(&out)
	if pb != nil {
		out.Procs, out.JoinSec, out.DetectSec = *procs, pb.joinSec, pb.detectSec
		out.AllreduceSec, out.AllreduceInput = pb.allreduce.sec, pb.allreduce.input
	}
	if act != nil {
		out.Nodes, out.FanIn, out.Reps = jf.nodes, act.fanIn, *pairs
		out.ActorSecPerIter, out.ActorRatio, out.OverheadSec = act.actorSec, act.ratio, act.overhead
		out.MessagesPerIter, out.BytesPerIter, out.ShardsBusy = act.messages, act.bytes, act.busy
	}
	if ckpt != nil {
		out.CheckpointEvery, out.CheckpointOverhead, out.CheckpointsPerJob = jf.checkpointFlag, ckpt.overhead, ckpt.checkpoints
	}
	if *asJSON {
		line, _ := json.Marshal(out)
		fmt.Fprintln(stdout, string(line))
		return nil
	}
	fmt.Fprintf(stdout, "%s on %s (%d x %d, K=%d, %s), %d shard(s), %d thread(s)\n", out.Algo, out.Input, out.N, out.M, out.K, layout, out.Shards, out.Threads)
	fmt.Fprintf(stdout, "  per iteration (median of %d): %.4g s\n", out.Iterations, out.SecPerIter)
	fmt.Fprintf(stdout, "  memory floor: %.4g s (%.4g MB: X's stored entries read, C read and written; %.3g GB/s, median of %d)\n",
		out.MemoryFloorSec, float64(out.MemoryBytes)/1e6, out.MemoryGBps, *reps)
	fmt.Fprintf(stdout, "  compute floor: %.4g s (DID's %.4g flop at the %s FMA peak, %.4g GFLOP/s on %d thread(s), %.4g on one)\n",
		out.ComputeFloorSec, out.FlopsPerIter, out.PeakFMA, out.PeakGFlops, out.Threads, out.PeakGFlopsOneThread)
	fmt.Fprintf(stdout, "  FMA peaks (GFLOP/s, one thread / %d):", out.Threads)
	for _, p := range out.FMAPeaks {
		fmt.Fprintf(stdout, " %s %.4g / %.4g", p.Kind, p.OneThreadGFlops, p.AllThreadsGFlops)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "  bound: %s  ->  per iteration / %s floor = %.2f\n", out.Bound, out.Bound, out.RooflineRatio)
	fmt.Fprintf(stdout, "  rel_err2 after %d iterations: %.4g\n", out.Iterations, out.RelErr2)
	if act != nil {
		where := fmt.Sprintf("%d actor systems", out.Nodes)
		if pb != nil {
			where = fmt.Sprintf("%d node processes", out.Procs)
		}
		fmt.Fprintf(stdout, "  on %s over gRPC (fan-in %d): %.4g s per iteration, %.3fx the driver (median of %d pairs), +%.3g s per iteration\n",
			where, out.FanIn, out.ActorSecPerIter, out.ActorRatio, out.Reps, out.OverheadSec)
		fmt.Fprintf(stdout, "  messages per iteration %.3g, bytes per iteration %.4g\n", out.MessagesPerIter, out.BytesPerIter)
		fmt.Fprintf(stdout, "  shards busy %.0f%% of their iteration time, waiting for collectives' results the rest (median of %d)\n", 100*out.ShardsBusy, out.Reps)
	}
	if ckpt != nil {
		fmt.Fprintf(stdout, "  checkpoints every %s iterations (%d a job): job time %+.2f%% against none (median of %d pairs)\n",
			out.CheckpointEvery, out.CheckpointsPerJob, 100*out.CheckpointOverhead, out.Reps)
	}
	if pb != nil {
		pb.allreduce.print(stdout)
		fmt.Fprintf(stdout, "  gossip: a joining node is listed by all %.3g s after its process started (median)", out.JoinSec)
		if *detect {
			fmt.Fprintf(stdout, "; kill -9 of a node declared dead by all others after %.3g s", out.DetectSec)
		}
		fmt.Fprintln(stdout)
	}
	return nil
}

// fmaPeakJSON is one FMA loop's measured peak.
type fmaPeakJSON struct {
	Kind             string  `json:"kind"`
	OneThreadGFlops  float64 `json:"one_thread_gflops"`
	AllThreadsGFlops float64 `json:"all_threads_gflops"`
}

// actorBench is the outcome of timing a job on actors against the driver.
type actorBench struct {
	fanIn                                int
	driverSec, actorSec, ratio, overhead float64
	messages, bytes                      float64
	busy                                 float64 // median share of the shards' time in their steps
}

// benchActors runs the job pairs times with the driver and on an in-process cluster of
// jf.nodes actor systems, alternately, and returns the medians.
func benchActors(jf *jobFlags, j *job, blocks []kernels.Block, pairs int) (*actorBench, error) {
	runner, err := didnmf.NewRunner(j.Target)
	if err != nil {
		return nil, err
	}
	defer runner.Close()
	return timePairs(jf, j, blocks, pairs, func() (*didnmf.Result, error) {
		return runner.Run(context.Background(), j.Job, didnmf.Options{})
	})
}

// checkpointBench is the fault-free cost of checkpoints.
type checkpointBench struct {
	overhead    float64 // median over pairs of (job seconds with checkpoints) / (without) - 1
	checkpoints int64   // committed per job
}

// benchCheckpoints runs the job pairs times on actors with and without checkpoints,
// alternately, and compares the whole jobs' times (a median per iteration would not see
// checkpoints that cost only on their own iterations).
func benchCheckpoints(jf *jobFlags, j *job, pairs int) (*checkpointBench, error) {
	runner, err := didnmf.NewRunner(j.Target)
	if err != nil {
		return nil, err
	}
	defer runner.Close()
	noneSpec := *j.spec
	noneSpec.CheckpointEvery = 0
	none, err := didnmf.Open(&noneSpec, j.Target)
	if err != nil {
		return nil, err
	}
	defer none.Close()
	out := &checkpointBench{}
	var ratios []float64
	for r := 0; r < pairs; r++ {
		with, err := runner.Run(context.Background(), j.Job, didnmf.Options{})
		if err != nil {
			return nil, err
		}
		without, err := runner.Run(context.Background(), none, didnmf.Options{})
		if err != nil {
			return nil, err
		}
		ratios = append(ratios, with.Seconds/without.Seconds-1)
		out.checkpoints = with.Checkpoints
	}
	out.overhead = median(ratios)
	return out, nil
}

// timePairs runs the job pairs times with the driver and with runActors, alternately, and
// returns the medians.
func timePairs(jf *jobFlags, j *job, blocks []kernels.Block, pairs int, runActors func() (*didnmf.Result, error)) (*actorBench, error) {
	out := &actorBench{fanIn: jf.fanIn}
	if out.fanIn == 0 {
		out.fanIn = jobspec.DefaultFanIn
	}
	var drv, act, ratios, over, busy []float64
	for r := 0; r < pairs; r++ {
		res, err := kernels.Run(context.Background(), blocks, j.cfg)
		if err != nil {
			return nil, err
		}
		ares, err := runActors()
		if err != nil {
			return nil, err
		}
		d, a := median(res.IterSeconds), median(ares.IterSeconds)
		drv, act = append(drv, d), append(act, a)
		ratios, over = append(ratios, a/d), append(over, a-d)
		out.messages, out.bytes = ares.MessagesPerIteration, ares.BytesPerIteration
		busy = append(busy, ares.Traffic.Busy())
	}
	out.driverSec, out.actorSec, out.ratio, out.overhead, out.busy = median(drv), median(act), median(ratios), median(over), median(busy)
	return out, nil
}

// rooflines are the two floors of one iteration over all blocks.
type rooflines struct {
	memSec, computeSec float64
	bytes              int64
	flops              float64
	peak               kernels.FMAPeak
}

// measureRooflines times the memory floor of one iteration over all blocks (every stored entry
// of X read once, C read and written once; the median of reps passes) and computes the compute
// floor (DID's flops at the FMA peak), with the same number of threads as the job.
func measureRooflines(blocks []kernels.Block, k, threads, reps int) rooflines {
	pool := kernels.NewPool(threads)
	defer pool.Close()
	var r rooflines
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
		r.bytes += kernels.RooflineBytes(bl, k)
		r.flops += kernels.DIDFlops(bl, k)
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
	r.memSec = median(times)
	r.peak = kernels.MeasureFMAPeak(pool)
	r.computeSec = r.flops / r.peak.Best().All
	return r
}

// fill sets the roofline fields of out from r and out.SecPerIter.
func (r rooflines) fill(out *benchResult) {
	best := r.peak.Best()
	out.MemoryFloorSec, out.MemoryBytes, out.MemoryGBps = r.memSec, r.bytes, float64(r.bytes)/r.memSec/1e9
	out.ComputeFloorSec, out.FlopsPerIter = r.computeSec, r.flops
	out.PeakGFlops, out.PeakGFlopsOneThread, out.PeakFMA = best.All/1e9, best.OneCore/1e9, best.Kind
	for _, p := range r.peak.Rates {
		out.FMAPeaks = append(out.FMAPeaks, fmaPeakJSON{p.Kind, p.OneCore / 1e9, p.All / 1e9})
	}
	out.Bound, out.RooflineSec = "memory", r.memSec
	if r.computeSec > r.memSec {
		out.Bound, out.RooflineSec = "compute", r.computeSec
	}
	out.RooflineRatio = out.SecPerIter / out.RooflineSec
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := slices.Clone(x)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
