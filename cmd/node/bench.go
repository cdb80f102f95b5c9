package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/didnmf/didnmf/kernels"
)

// benchResult is the line bench prints.
type benchResult struct {
	Algo          string  `json:"algo"`
	Input         string  `json:"input"`
	M             int     `json:"m"`
	N             int     `json:"n"`
	K             int     `json:"k"`
	Shards        int     `json:"shards"`
	Threads       int     `json:"threads"`
	Layout        string  `json:"layout"`
	Iterations    int     `json:"iterations"`
	SecPerIter    float64 `json:"sec_per_iter"`
	RooflineSec   float64 `json:"roofline_sec"`
	RooflineRatio float64 `json:"roofline_ratio"`
	RelErr2       float64 `json:"rel_err2"`
	Collectives   float64 `json:"collectives_per_iteration"`
	GoVersion     string  `json:"go"`
}

func cmdBench(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var jf jobFlags
	jf.register(fs)
	iters := fs.Int("iters", 20, "iterations to time (the median is reported)")
	asJSON := fs.Bool("json", false, "print one JSON line")
	reps := fs.Int("roofline-reps", 15, "repetitions of the roofline kernel (the median is reported)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: node bench --input SPEC --rank K [--algo A] [--iters N] [--shards P] [--json]\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *iters < 1 || *reps < 1 {
		return badInput("--iters and --roofline-reps must be >= 1")
	}
	jf.tol, jf.maxIter = 0, *iters
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
	res, err := kernels.Run(context.Background(), blocks, j.cfg)
	if err != nil {
		return err
	}
	roof := rooflineSeconds(blocks, j.cfg.K, threads, *reps)
	spi := median(res.IterSeconds)
	layout := "dense"
	if _, ok := blocks[0].(*kernels.CSC); ok {
		layout = "sparse"
	}
	out := benchResult{Algo: string(j.cfg.Algo), Input: j.src.Name(), M: res.M, N: res.N, K: res.K, Shards: res.Shards,
		Threads: threads, Layout: layout, Iterations: res.Iterations, SecPerIter: spi, RooflineSec: roof,
		RooflineRatio: spi / roof, RelErr2: res.RelErr2(), Collectives: res.Comm.PerIteration, GoVersion: runtime.Version()}
	if *asJSON {
		line, _ := json.Marshal(out)
		fmt.Fprintln(stdout, string(line))
		return nil
	}
	fmt.Fprintf(stdout, "%s on %s (%d x %d, K=%d, %s), %d shard(s), %d thread(s)\n", out.Algo, out.Input, out.N, out.M, out.K, layout, out.Shards, out.Threads)
	fmt.Fprintf(stdout, "  per iteration (median of %d): %.4g s\n", out.Iterations, out.SecPerIter)
	fmt.Fprintf(stdout, "  roofline (stream X, read+write C once): %.4g s  ->  ratio %.2f\n", out.RooflineSec, out.RooflineRatio)
	fmt.Fprintf(stdout, "  rel_err2 after %d iterations: %.4g\n", out.Iterations, out.RelErr2)
	return nil
}

// rooflineSeconds times the memory floor of one iteration over all blocks: every stored entry
// of X read once and C read and written once, with the same number of threads.
func rooflineSeconds(blocks []kernels.Block, k, threads, reps int) float64 {
	pool := kernels.NewPool(threads)
	defer pool.Close()
	type bufs struct{ src, dst []float64 }
	b := make([]bufs, len(blocks))
	for s, bl := range blocks {
		_, n := bl.Dims()
		b[s] = bufs{make([]float64, k*n), make([]float64, k*n)}
	}
	times := make([]float64, reps)
	for r := range times {
		t := time.Now()
		for s, bl := range blocks {
			kernels.Roofline(bl, k, b[s].src, b[s].dst, pool)
		}
		times[r] = time.Since(t).Seconds()
	}
	return median(times)
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
