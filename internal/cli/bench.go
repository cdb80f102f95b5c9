package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"

	"github.com/didnmf/didnmf/bench"
	"github.com/didnmf/didnmf/internal/server"
	"github.com/didnmf/didnmf/kernels"
)

// cmdBench runs `didnmf bench`: it parses the flags, opens the job, and prints what package
// bench measures of it (--table2: cmdTable2).
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
	for _, name := range []string{"sizes", "algos", "fashion-mnist", "time-cap"} {
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
	spi := bench.Median(res.IterSeconds)
	var act *bench.ActorTiming
	var pt *bench.ProcsTiming
	if jf.nodes > 0 {
		if act, err = bench.TimeActors(j.Job, blocks, *pairs); err != nil {
			return err
		}
		spi = act.DriverSec
	} else if *procs > 0 {
		if pt, err = benchProcs(&jf, j, blocks, *procs, *procThreads, pinned, *pairs, *detect); err != nil {
			return err
		}
		act = &pt.ActorTiming
		spi = act.DriverSec
	}
	var ckpt *bench.CheckpointCost
	if *ckptOverhead {
		if jf.nodes == 0 || jf.checkpointEvery == 0 {
			return badInput("--checkpoint-overhead needs --nodes N and checkpoints (--checkpoint-every auto or N > 0)")
		}
		if ckpt, err = bench.CheckpointOverhead(j.Job, *pairs); err != nil {
			return err
		}
	}
	roof := bench.MeasureRooflines(blocks, j.cfg.K, threads, *reps)
	out := bench.Report{Result: bench.NewResult(j.src.Name(), j.cfg.Algo, res, blocks, threads, spi, roof), RooflineReps: *reps,
		OnActors: act != nil, Checkpoints: ckpt != nil, Detect: *detect}
	if pt != nil {
		out.SetProcs(*procs, pt)
		out.Allreduce = &pt.Allreduce
	}
	if act != nil {
		out.SetActors(act, jf.nodes, *pairs)
	}
	if ckpt != nil {
		out.SetCheckpoints(jf.checkpointFlag, ckpt)
	}
	if *asJSON {
		return out.WriteJSON(stdout)
	}
	out.WriteText(stdout)
	return nil
}

// benchProcs starts n `didnmf serve` processes of this executable on loopback (each on its
// cpus, when pinned), times the job on them (bench.Procs.TimeProcs, with the allreduce probe
// opened from the job's flags) and stops them.
func benchProcs(jf *jobFlags, j *job, blocks []kernels.Block, n, threads int, cpus [][]int, pairs int, detect bool) (*bench.ProcsTiming, error) {
	o := bench.ProcsOptions{N: n, Threads: threads}
	for _, c := range cpus {
		o.CPUs = append(o.CPUs, cpuListString(c))
	}
	procs, err := bench.StartProcs(o)
	if err != nil {
		return nil, err
	}
	defer procs.Close()
	pf := *jf
	pf.inputs = stringList{bench.ProbeInput(j.m, j.shards, j.cfg.K)}
	pf.init, pf.initBasis, pf.initCoef = string(kernels.InitRandom), "", ""
	pf.tol, pf.maxIter, pf.timeLimit, pf.stallTol = 0, bench.ProbeIterations, 0, 0
	probe, err := pf.open()
	if err != nil {
		return nil, fmt.Errorf("allreduce probe: %w", err)
	}
	defer probe.src.Close()
	return procs.TimeProcs(j.Job, blocks, probe.Job, pairs, detect)
}
