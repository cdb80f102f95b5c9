// Command accelbank is issue 35's bank of problems for deciding accelerated DID: for each
// problem it runs plain DID for -ref iterations (its objective there is the target), then every
// -settings value of --accel (the plain one included), and reports, per setting, the passes
// over X and the seconds (medians of -repeats runs) to reach the target, and the passes,
// seconds and rel_err2 at the default stop (--tol 1e-6 / the problem's cap, --stall-tol 1e-5
// of the fit as factorize runs it). Every run of a problem reads the same bytes, in this
// process, on -shards shards and -threads threads.
//
//	go run ./bench/accelbank -problems all -json > bank.jsonl
//	go run ./bench/accelbank -problems syn1e5,fmnist10 -settings 'off;auto;1,5' -repeats 1
//
// Problems: syn1e5, syn1e6, syn1e7 (the paper's synthetic M=5, K=3, to tol 1e-6, random
// init); fmnist10, fmnist40 (Fashion-MNIST's 70000 images, K=10 and 40, k-means init);
// counts (a 2%-dense planted count matrix, K=20, from -counts, written by bench/sweepscale);
// countsdense (the same read as dense blocks); text (a 1%-dense text-like count matrix, K=10,
// from -text, also written by bench/sweepscale);
// missing (Fashion-MNIST K=10 with 5% of its entries NaN, fitted as missing values);
// penalized (Fashion-MNIST K=10, --alpha-coef 0.01 --l1-ratio 0.5 on both factors).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
)

// problem is one row group of the bank.
type problem struct {
	name    string
	inputs  []string
	k       int
	init    kernels.InitMethod
	tol     float64
	maxIter int
	opt     kernels.Options
	nanFrac float64 // share of entries made NaN (missing values)
	dense   bool    // read as dense blocks whatever the input's density
}

// result is one line of the bank's output.
type result struct {
	Problem  string `json:"problem"`
	Setting  string `json:"accel"`
	Seed     uint64 `json:"seed"`
	M        int    `json:"m"`
	N        int    `json:"n"`
	K        int    `json:"k"`
	RefIters int    `json:"ref_iterations"`
	// Target is plain DID's objective after RefIters iterations.
	Target float64 `json:"target_objective"`
	// ToTarget: the passes (iterations) and seconds (median over the repeats) to reach it.
	PassesToTarget int `json:"passes_to_target"`
	// PassesToNear is the first pass at or below Target x (1 + -near) (0: not reached): on
	// a problem plain DID has converged on before RefIters, the target itself is its
	// objective's rounding floor, which another path to the same minimum may never touch.
	PassesToNear    int     `json:"passes_to_near"`
	SecondsToTarget float64 `json:"seconds_to_target"`
	Reached         bool    `json:"reached"`
	// At the default stop.
	PassesToStop  int       `json:"passes_to_stop"`
	SecondsToStop float64   `json:"seconds_to_stop"`
	Stop          string    `json:"stop"`
	RelErr2       float64   `json:"rel_err2"`
	TimesToTarget []float64 `json:"times_to_target"`
	TimesToStop   []float64 `json:"times_to_stop"`
}

func main() {
	problems := flag.String("problems", "all", "comma-separated problems: syn1e5, syn1e6, syn1e7, fmnist10, fmnist40, counts, countsdense, text, missing, penalized and -extra's names (all: every one)")
	settings := flag.String("settings", "off;auto", "--accel values to compare, separated by ';'")
	repeats := flag.Int("repeats", 3, "runs of each setting (the seconds are their median)")
	ref := flag.Int("ref", 300, "plain DID's iterations that set the target")
	shards := flag.Int("shards", 2, "shards")
	threads := flag.Int("threads", 2, "threads")
	fm := flag.String("fashion-mnist", "/usr/share/datasets/fashion-mnist", "Fashion-MNIST's directory")
	counts := flag.String("counts", "/tmp/accelbank/counts.npz", "the count matrix (go run ./bench/sweepscale -rows 50000 -cols 5000 -k 20 -out FILE)")
	text := flag.String("text", "/tmp/accelbank/text.npz", "the text-like count matrix (go run ./bench/sweepscale -rows 20000 -cols 10000 -k 10 -density 0.01 -out FILE)")
	asJSON := flag.Bool("json", false, "one JSON line per problem and setting")
	trace := flag.Int("trace", 0, "print each setting's rel_err2 for this many iterations instead of the bank")
	stallWindow := flag.Int("stall-window", 0, "the default stop's stall window (0: kernels' default)")
	flag.Float64Var(&nearTol, "near", 1e-9, "the relative distance to the target within which passes_to_near counts it reached")
	flag.Uint64Var(&seed, "seed", 1, "the runs' seed (their random initialisation)")
	extra := flag.String("extra", "", "further problems, separated by ';': NAME=INPUT@K (random init, to tol 1e-6, at most 1000 passes), e.g. 'noisy=synthetic:m=50,n=100000,k=5,seed=1,noise=3@5'")
	toStop := flag.Bool("stop", true, "also run each setting to the default stop (false: to the target only)")
	flag.Parse()
	fmFiles := []string{filepath.Join(*fm, "train-images-idx3-ubyte.gz"), filepath.Join(*fm, "t10k-images-idx3-ubyte.gz")}
	syn := func(n int) []string { return []string{fmt.Sprintf("synthetic:m=5,n=%d,k=3,seed=1", n)} }
	pen := kernels.Options{AlphaCoef: 0.01, AlphaBasis: 0.01, L1Ratio: 0.5}
	all := []problem{
		{name: "syn1e5", inputs: syn(100000), k: 3, init: kernels.InitRandom, tol: 1e-6, maxIter: 5000},
		{name: "syn1e6", inputs: syn(1000000), k: 3, init: kernels.InitRandom, tol: 1e-6, maxIter: 5000},
		{name: "syn1e7", inputs: syn(10000000), k: 3, init: kernels.InitRandom, tol: 1e-6, maxIter: 5000},
		{name: "fmnist10", inputs: fmFiles, k: 10, init: kernels.InitKMeans, tol: 1e-6, maxIter: 1000},
		{name: "fmnist40", inputs: fmFiles, k: 40, init: kernels.InitKMeans, tol: 1e-6, maxIter: 1000},
		{name: "counts", inputs: []string{*counts}, k: 20, init: kernels.InitRandom, tol: 1e-6, maxIter: 1000},
		{name: "countsdense", inputs: []string{*counts}, k: 20, init: kernels.InitRandom, tol: 1e-6, maxIter: 1000, dense: true},
		{name: "text", inputs: []string{*text}, k: 10, init: kernels.InitRandom, tol: 1e-6, maxIter: 1000},
		{name: "missing", inputs: fmFiles, k: 10, init: kernels.InitRandom, tol: 1e-6, maxIter: 1000, opt: kernels.Options{Missing: true}, nanFrac: 0.05},
		{name: "penalized", inputs: fmFiles, k: 10, init: kernels.InitKMeans, tol: 1e-6, maxIter: 1000, opt: pen},
	}
	for _, e := range strings.Split(*extra, ";") {
		if strings.TrimSpace(e) == "" {
			continue
		}
		p, err := parseExtra(e)
		if err != nil {
			fail(err)
		}
		all = append(all, p)
	}
	var chosen []problem
	for _, p := range all {
		if *problems == "all" || slices.Contains(strings.Split(*problems, ","), p.name) {
			chosen = append(chosen, p)
		}
	}
	if *problems != "all" {
		for _, name := range strings.Split(*problems, ",") {
			if !slices.ContainsFunc(all, func(p problem) bool { return p.name == name }) {
				fail(fmt.Errorf("-problems: no problem %q (see -h)", name))
			}
		}
	}
	var accels []kernels.Accel
	for _, s := range strings.Split(*settings, ";") {
		a, err := kernels.ParseAccel(s)
		if err != nil {
			fail(err)
		}
		accels = append(accels, a)
	}
	stallWin = *stallWindow
	for _, p := range chosen {
		if *trace > 0 {
			if err := traceProblem(p, accels, *trace, *shards, *threads); err != nil {
				fail(fmt.Errorf("%s: %w", p.name, err))
			}
			continue
		}
		if err := runProblem(p, accels, *repeats, *ref, *shards, *threads, *asJSON, *toStop); err != nil {
			fail(fmt.Errorf("%s: %w", p.name, err))
		}
	}
}

// parseExtra reads one -extra problem, NAME=INPUT@K.
func parseExtra(e string) (problem, error) {
	name, rest, ok := strings.Cut(strings.TrimSpace(e), "=")
	at := strings.LastIndex(rest, "@")
	if !ok || name == "" || at < 1 {
		return problem{}, fmt.Errorf("-extra %q: want NAME=INPUT@K", e)
	}
	k, err := strconv.Atoi(rest[at+1:])
	if err != nil || k < 1 {
		return problem{}, fmt.Errorf("-extra %q: rank %q is not a positive integer", e, rest[at+1:])
	}
	return problem{name: name, inputs: []string{rest[:at]}, k: k, init: kernels.InitRandom, tol: 1e-6, maxIter: 1000}, nil
}

// seed is -seed; nearTol is -near.
var (
	seed    uint64
	nearTol float64
)

// stallWin is -stall-window.
var stallWin int

func fail(err error) {
	fmt.Fprintln(os.Stderr, "accelbank:", err)
	os.Exit(2)
}

// readProblem reads a problem's blocks (NaN-holed for the missing-values problem).
func readProblem(p problem, shards, threads int) (blocks []kernels.Block, m, n int, err error) {
	spec := didnmf.NewSpec(p.inputs, kernels.DID, p.k, shards)
	spec.Init = p.init
	spec.Missing = p.opt.Missing
	if p.dense {
		spec.Layout = matio.LayoutDense
	}
	if p.nanFrac > 0 {
		spec.Storage = kernels.StorageFloat64 // withNaN writes into float64 blocks
	}
	job, err := didnmf.Open(spec, didnmf.Local(threads))
	if err != nil {
		return nil, 0, 0, err
	}
	blocks, err = job.ReadBlocks()
	m, n = job.Features, job.Samples
	job.Close()
	if err != nil {
		return nil, 0, 0, err
	}
	if p.nanFrac > 0 {
		blocks = withNaN(blocks, p.nanFrac)
	}
	return blocks, m, n, nil
}

// traceProblem prints each setting's rel_err2 over the first iters iterations.
func traceProblem(p problem, accels []kernels.Accel, iters, shards, threads int) error {
	blocks, _, _, err := readProblem(p, shards, threads)
	if err != nil {
		return err
	}
	for _, a := range accels {
		c := kernels.Config{Algo: kernels.DID, K: p.k, Seed: seed, Init: kernels.InitSpec{Method: p.init}, Options: p.opt, Threads: threads}
		c.Options.Accel = a
		c.Stop = kernels.StopRule{MaxIter: iters}
		res, err := kernels.Run(context.Background(), blocks, c)
		if err != nil {
			return err
		}
		fmt.Printf("%s %s:", p.name, a)
		for _, h := range res.History {
			fmt.Printf(" %.6g", h.RelErr2)
		}
		fmt.Println()
	}
	return nil
}

// runProblem reads the problem once and runs the reference and every setting on it.
func runProblem(p problem, accels []kernels.Accel, repeats, ref, shards, threads int, asJSON, toStop bool) error {
	blocks, m, n, err := readProblem(p, shards, threads)
	if err != nil {
		return err
	}
	base := kernels.Config{Algo: kernels.DID, K: p.k, Seed: seed, Init: kernels.InitSpec{Method: p.init}, Options: p.opt, Threads: threads}
	cfg := base
	cfg.Stop = kernels.StopRule{MaxIter: ref}
	res, err := kernels.Run(context.Background(), blocks, cfg)
	if err != nil {
		return err
	}
	target := res.Objective
	if !asJSON {
		fmt.Printf("%s (%d x %d, K=%d): plain DID's %d-iteration objective %.6g (rel_err2 %.6g)\n", p.name, m, n, p.k, ref, target, res.RelErr2())
		fmt.Printf("  %-12s %8s %10s %8s %10s %10s  %s\n", "accel", "passes", "s", "passes", "s", "rel_err2", "stop")
		fmt.Printf("  %-12s %8s %10s %8s %10s %10s\n", "", "to target", "", "to stop", "", "")
	}
	for _, a := range accels {
		if err := (kernels.Options{Accel: a, Missing: p.opt.Missing}).ValidateAccel(kernels.DID); err != nil {
			if !asJSON {
				fmt.Printf("  %-12s refused: %v\n", a, err)
			}
			continue
		}
		r := result{Problem: p.name, Setting: a.String(), Seed: seed, M: m, N: n, K: p.k, RefIters: ref, Target: target}
		for rep := 0; rep < repeats; rep++ {
			// To the target: stop at the first iteration at or below it.
			c := base
			c.Options.Accel = a
			c.Stop = kernels.StopRule{MaxIter: max(4*ref, p.maxIter)}
			ctx, cancel := context.WithCancel(context.Background())
			reachedAt, reachedSec := -1, 0.0
			t0 := time.Now()
			_, err := kernels.Run(ctx, blocks, c, func(pr kernels.Progress) {
				if r.PassesToNear == 0 && pr.Iteration > 0 && pr.Objective <= target*(1+nearTol) {
					r.PassesToNear = pr.Iteration
				}
				if reachedAt < 0 && pr.Iteration > 0 && pr.Objective <= target {
					reachedAt, reachedSec = pr.Iteration, time.Since(t0).Seconds()-pr.InitSeconds
					cancel()
				}
			})
			cancel()
			if err != nil && reachedAt < 0 && !strings.Contains(err.Error(), "cancel") {
				return err
			}
			if reachedAt > 0 {
				r.Reached, r.PassesToTarget = true, reachedAt
				r.TimesToTarget = append(r.TimesToTarget, reachedSec)
			}
			if !toStop {
				continue
			}
			// To the default stop.
			c.Stop = kernels.StopRule{Tol: p.tol, MaxIter: p.maxIter, StallTol: 1e-5, StallWindow: stallWin}
			res, err := kernels.Run(context.Background(), blocks, c)
			if err != nil {
				return err
			}
			var iterSec float64
			for _, s := range res.IterSeconds {
				iterSec += s
			}
			r.PassesToStop, r.Stop, r.RelErr2 = res.Iterations, string(res.StopReason), res.RelErr2()
			r.TimesToStop = append(r.TimesToStop, iterSec)
		}
		r.SecondsToTarget, r.SecondsToStop = median(r.TimesToTarget), median(r.TimesToStop)
		if asJSON {
			// JSON has no NaN: a median of no run (the target not reached, or no run to
			// the stop) is written as -1.
			for _, v := range []*float64{&r.SecondsToTarget, &r.SecondsToStop, &r.RelErr2} {
				if math.IsNaN(*v) {
					*v = -1
				}
			}
			line, err := json.Marshal(r)
			if err != nil {
				return err
			}
			fmt.Println(string(line))
			continue
		}
		to := "not reached"
		if r.Reached {
			to = fmt.Sprintf("%8d %10.3f", r.PassesToTarget, r.SecondsToTarget)
		}
		if !toStop { // -stop=false: no run to the stop
			fmt.Printf("  %-12s %19s %8s %10s %10s  %s\n", r.Setting, to, "-", "-", "-", "not run (-stop=false)")
			continue
		}
		fmt.Printf("  %-12s %19s %8d %10.3f %10.6g  %s\n", r.Setting, to, r.PassesToStop, r.SecondsToStop, r.RelErr2, r.Stop)
	}
	return nil
}

// withNaN returns copies of dense blocks with a deterministic share of entries NaN.
func withNaN(blocks []kernels.Block, frac float64) []kernels.Block {
	out := make([]kernels.Block, len(blocks))
	col := 0
	for s, b := range blocks {
		d, ok := b.(*kernels.Dense)
		if !ok || d.Data == nil {
			fail(fmt.Errorf("missing: the input is not a dense float64 block"))
		}
		c := &kernels.Dense{Rows: d.Rows, Cols: d.Cols, Data: slices.Clone(d.Data)}
		for j := 0; j < c.Cols; j++ {
			r := kernels.NewRNG(99, 7, uint64(col+j))
			for i := 0; i < c.Rows; i++ {
				if r.Float64() < frac {
					c.Data[j*c.Rows+i] = math.NaN()
				}
			}
		}
		col += c.Cols
		out[s] = c
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
