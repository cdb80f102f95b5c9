package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/figures"
	"github.com/didnmf/didnmf/internal/atomicfile"
	"github.com/didnmf/didnmf/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/sweep"
)

// notForSweep are the flags of factorize a sweep does not take: it chooses the rank and the
// seeds itself, and writes its own files (no factors of single runs, no shared output).
var notForSweep = map[string]bool{"rank": true, "seed": true, "init-basis": true, "init-coef": true, "out-shared": true,
	"overwrite": true, "detach": true, "plots": true, "image-shape": true, "feature-names": true, "sample-names": true, "coef-tsv": true}

// maxSweepJobs bounds ranks x seeds.
const maxSweepJobs = 10000

func cmdSweep(args []string, stdout, stderr io.Writer) error {
	all := flag.NewFlagSet("factorize", flag.ContinueOnError)
	var jf jobFlags
	of := registerFactorize(all, &jf)
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	all.VisitAll(func(f *flag.Flag) {
		if !notForSweep[f.Name] {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
	ranks := fs.String("ranks", "", "the ranks to try, `FROM:TO[:STEP]` (e.g. 2:30 or 2:30:2), or a comma-separated list")
	seeds := fs.Int("seeds", 5, "runs per rank, with seeds `SEED`, SEED+1, ...: their spread and the stability of their bases across seeds")
	firstSeed := fs.Uint64("seed", 1, "the first `SEED` (synthetic inputs are generated from it, the same for every run)")
	parallel := fs.Int("parallel", 0, "jobs at once (0: one in this process, one per node with --nodes or per member with --cluster)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: didnmf sweep --input PATH --ranks FROM:TO[:STEP] [--seeds N] --out DIR [flags]\n\n"+
			"chooses the rank: factorizes the input at every rank of --ranks with --seeds seeds each (concurrently on\n"+
			"--nodes or a --cluster, each job surviving node loss like any), and writes into --out sweep.json and\n"+
			"sweep.tsv (the train error, iterations and seconds of every run, and per rank their spread and the\n"+
			"stability of the bases across seeds: cNMF's consensus, a silhouette of the seeds' components), the\n"+
			"consensus basis of every rank (consensus_basis_K.npy, features x K), the suggested rank with the rule\n"+
			"used, and sweep.png/.svg (error and stability against the rank)\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *of.out == "" {
		return badInput("--out is required")
	}
	ks, err := parseRanks(*ranks)
	if err != nil {
		return err
	}
	if *seeds < 1 || *seeds > 1000 {
		return badInput("--seeds must be between 1 and 1000, got %d", *seeds)
	}
	if len(ks)**seeds > maxSweepJobs {
		return badInput("--ranks and --seeds make %d jobs; at most %d", len(ks)**seeds, maxSweepJobs)
	}
	if *parallel < 0 {
		return badInput("--parallel must be >= 0, got %d", *parallel)
	}
	if kernels.InitMethod(jf.init) != kernels.InitRandom && kernels.InitMethod(jf.init) != kernels.InitKMeans && *seeds > 1 {
		return badInput("--init %s does not depend on the seed: --seeds %d would repeat one run; use --init random or kmeans, or --seeds 1", jf.init, *seeds)
	}
	// The first job is opened at the largest rank, so that a rank the data cannot take is
	// refused before anything runs; the others are derived from it (the input is read once).
	jf.seed, jf.rank, jf.rankSet, jf.errOut = *firstSeed, ks[len(ks)-1], true, stderr
	j0, err := jf.open()
	if err != nil {
		return err
	}
	defer j0.Close()
	dir, cleanup, err := prepareOutDir(*of.out)
	if err != nil {
		return err
	}
	runner, err := didnmf.NewRunner(j0.Target)
	if err != nil {
		cleanup()
		if jf.cluster != "" {
			return clusterErr(jf.cluster, err)
		}
		return err
	}
	defer runner.Close()
	p := *parallel
	if p == 0 {
		p = runner.Parallelism()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	type task struct{ k, seed int }
	var tasks []task
	for _, k := range ks {
		for s := 0; s < *seeds; s++ {
			tasks = append(tasks, task{k, int(*firstSeed) + s})
		}
	}
	if !*of.quiet {
		fmt.Fprintf(stderr, "sweep: %s, ranks %s, %d seed(s): %d jobs, %d at once on %s\n", j0.Name(), rankList(ks), *seeds, len(tasks), p, j0.Target)
	}
	type outcome struct {
		run   sweep.Run
		stats *didnmf.Result
		err   error
	}
	results := make([]outcome, len(tasks))
	var mu sync.Mutex
	usageBefore, usageErr := runner.Usage(5 * time.Second)
	done, start := 0, time.Now()
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(p, len(tasks)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t := tasks[i]
				res, err := runSweepJob(ctx, runner, j0.Job, t.k, t.seed, func(err error) {
					if !*of.quiet {
						mu.Lock()
						fmt.Fprintf(stderr, "  K=%d seed %d failed (%v); running it again\n", t.k, t.seed, err)
						mu.Unlock()
					}
				})
				o := outcome{err: err, stats: res}
				if err == nil {
					o.run = sweep.Run{K: t.k, Seed: t.seed, M: res.M, Basis: res.B, TrainRelErr2: res.RelErr2(), TestRelErr2: math.NaN(),
						Iterations: res.Iterations, Seconds: res.Seconds}
					if res.TestCount > 0 {
						o.run.TestRelErr2 = res.TestRelErr2()
					}
				}
				mu.Lock()
				results[i] = o
				done++
				if !*of.quiet && ctx.Err() == nil {
					if err != nil {
						fmt.Fprintf(stderr, "  [%d/%d] K=%d seed %d: failed: %v\n", done, len(tasks), t.k, t.seed, err)
					} else {
						test := ""
						if res.TestCount > 0 {
							test = fmt.Sprintf(", test %.4g", res.TestRelErr2())
						}
						fmt.Fprintf(stderr, "  [%d/%d] K=%d seed %d: %d iterations in %s, rel_err2 %.4g%s (%s elapsed)\n", done, len(tasks), t.k, t.seed,
							res.Iterations, secondsText(res.Seconds), res.RelErr2(), test, secondsText(time.Since(start).Seconds()))
					}
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for i := range tasks {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if ctx.Err() != nil {
		cleanup()
		fmt.Fprintln(stderr, "didnmf: interrupted; the sweep's running jobs were cancelled and nothing was written")
		return errInterrupted
	}
	wall := time.Since(start).Seconds()
	var busy *sweepBusy
	if usageErr == nil {
		if after, err := runner.Usage(5 * time.Second); err == nil {
			b := after.Since(usageBefore, wall)
			busy = &sweepBusy{CPUSeconds: b.CPUSeconds, Cores: b.Cores, Share: b.Share, Missing: slices.Compact(slices.Sorted(slices.Values(slices.Concat(usageBefore.Missing, after.Missing))))}
		}
	}
	var runs []sweep.Run
	var failed []string
	for i, o := range results {
		if o.err != nil {
			failed = append(failed, fmt.Sprintf("K=%d seed %d: %v", tasks[i].k, tasks[i].seed, o.err))
			continue
		}
		runs = append(runs, o.run)
	}
	if len(runs) == 0 {
		cleanup()
		return fmt.Errorf("sweep: every job failed; the first: %s", failed[0])
	}
	summary, err := sweep.Summarize(runs)
	if err != nil {
		cleanup()
		return err
	}
	k, rule := sweep.Suggest(summary)
	rep := sweepReport{Input: jf.inputs, Algo: jf.algo, Ranks: ks, Seeds: *seeds, FirstSeed: *firstSeed, Shards: jf.shards,
		Where: j0.Target.String(), Suggested: k, Rule: rule, Failed: failed, Seconds: wall, Busy: busy}
	for i, o := range results {
		if o.err == nil {
			rep.Runs = append(rep.Runs, sweepRunRow{K: tasks[i].k, Seed: tasks[i].seed, TrainRelErr2: o.run.TrainRelErr2,
				TestRelErr2: jsonNumber(o.run.TestRelErr2), Iterations: o.run.Iterations, Seconds: o.run.Seconds,
				StopReason: string(o.stats.StopReason)})
		}
	}
	for _, s := range summary {
		rep.PerRank = append(rep.PerRank, rankRow(s))
	}
	rep.CappedRanks = []int{}
	for k, n := range cappedByRank(rep.Runs) {
		rep.CappedRuns += n
		rep.CappedRanks = append(rep.CappedRanks, k)
	}
	slices.Sort(rep.CappedRanks)
	if err := writeSweep(dir, rep, summary); err != nil {
		cleanup()
		return err
	}
	if !*of.quiet {
		fmt.Fprintf(stderr, "%d jobs in %s", len(runs), secondsText(wall))
		if busy != nil {
			fmt.Fprintf(stderr, "; the cores were %.0f%% busy (%s of CPU on %d cores)", 100*busy.Share, secondsText(busy.CPUSeconds), busy.Cores)
		}
		fmt.Fprintf(stderr, "\n%s\nsuggested rank: %d (%s)\nwrote sweep.json, sweep.tsv, sweep.png, sweep.svg and consensus_basis_K.npy for each rank into %s\n", cappedLine(rep.Runs), k, rule, dir)
	}
	if len(failed) > 0 {
		return fmt.Errorf("sweep: %d of %d jobs failed (listed in sweep.json); the first: %s", len(failed), len(tasks), failed[0])
	}
	return nil
}

// sweepAttempts is how many times a sweep runs a job that failed for a reason other than its
// input (a cluster that lost the job's coordinator and its standby at once, say): a job is
// deterministic, so a second attempt gives the bits the first would have.
const sweepAttempts = 3

// runSweepJob runs the sweep's job of rank k and seed, again when it failed for a reason
// that is not its input's; retried tells of each retry.
func runSweepJob(ctx context.Context, runner *didnmf.Runner, j0 *didnmf.Job, k, seed int, retried func(error)) (*didnmf.Result, error) {
	j, err := j0.Derive(func(s *jobspec.Spec) { s.Rank, s.Seed = k, uint64(seed) })
	if err != nil {
		return nil, cliErr(err)
	}
	defer j.Close()
	for attempt := 1; ; attempt++ {
		res, err := runner.Run(ctx, j, didnmf.Options{})
		if err == nil {
			return res, nil
		}
		if didnmf.IsInput(err) || ctx.Err() != nil || attempt == sweepAttempts {
			return nil, cliErr(err)
		}
		retried(err)
	}
}

// parseRanks parses --ranks: FROM:TO[:STEP] or a comma-separated list, each rank >= 1.
func parseRanks(s string) ([]int, error) {
	if s == "" {
		return nil, badInput("--ranks is required (e.g. 2:30, 2:30:2 or 3,5,8)")
	}
	bad := func() error {
		return badInput("--ranks %q: want FROM:TO[:STEP] with 1 <= FROM <= TO and STEP >= 1, or a comma-separated list of ranks >= 1", s)
	}
	var ks []int
	if strings.Contains(s, ":") {
		parts := strings.Split(s, ":")
		if len(parts) > 3 {
			return nil, bad()
		}
		v := []int{0, 0, 1}
		for i, p := range parts {
			n, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil {
				return nil, bad()
			}
			v[i] = n
		}
		if v[0] < 1 || v[1] < v[0] || v[2] < 1 || (v[1]-v[0])/v[2] >= maxSweepJobs {
			return nil, bad()
		}
		for k := v[0]; k <= v[1]; k += v[2] {
			ks = append(ks, k)
		}
		return ks, nil
	}
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return nil, bad()
		}
		if len(ks) > 0 && n <= ks[len(ks)-1] {
			return nil, badInput("--ranks %q: list the ranks in increasing order, each once", s)
		}
		ks = append(ks, n)
	}
	if len(ks) > maxSweepJobs {
		return nil, bad()
	}
	return ks, nil
}

// rankList shows the ranks briefly: 2..30 when they are consecutive.
func rankList(ks []int) string {
	if len(ks) > 2 && ks[len(ks)-1]-ks[0] == len(ks)-1 {
		return fmt.Sprintf("%d..%d", ks[0], ks[len(ks)-1])
	}
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = strconv.Itoa(k)
	}
	return strings.Join(s, ",")
}

// sweepReport is sweep.json.
type sweepReport struct {
	Input     []string   `json:"input"`
	Algo      string     `json:"algo"`
	Ranks     []int      `json:"ranks"`
	Seeds     int        `json:"seeds"`
	FirstSeed uint64     `json:"first_seed"`
	Shards    int        `json:"shards"`
	Where     string     `json:"where"`
	Seconds   float64    `json:"seconds"`
	Busy      *sweepBusy `json:"cores_busy,omitempty"`
	Suggested int        `json:"suggested_k"`
	Rule      string     `json:"rule"`
	// CappedRuns counts the runs that stopped at the iteration cap or the time limit, and
	// CappedRanks are their ranks (none: empty), as the console and sweep.png say.
	CappedRuns  int           `json:"capped_runs"`
	CappedRanks []int         `json:"capped_ranks"`
	PerRank     []sweepRank   `json:"ranks_summary"`
	Runs        []sweepRunRow `json:"runs"`
	Failed      []string      `json:"failed,omitempty"`
}

// sweepBusy is how busy the target's cores were during the sweep (didnmf.Busy): this
// process's CPU time on the driver and in-process nodes, the members' processes' on a
// cluster (members that did not answer are listed and not counted).
type sweepBusy struct {
	CPUSeconds float64  `json:"cpu_seconds"`
	Cores      int      `json:"cores"`
	Share      float64  `json:"share"`
	Missing    []string `json:"members_not_counted,omitempty"`
}

// sweepRunRow is one run of sweep.json and sweep.tsv.
type sweepRunRow struct {
	K            int      `json:"k"`
	Seed         int      `json:"seed"`
	TrainRelErr2 float64  `json:"train_rel_err2"`
	TestRelErr2  *float64 `json:"test_rel_err2,omitempty"`
	Iterations   int      `json:"iterations"`
	Seconds      float64  `json:"seconds"`
	StopReason   string   `json:"stop_reason"`
}

// sweepRank is one rank's summary in sweep.json.
type sweepRank struct {
	K              int      `json:"k"`
	Runs           int      `json:"runs"`
	TrainMean      float64  `json:"train_rel_err2_mean"`
	TrainSE        *float64 `json:"train_rel_err2_se,omitempty"`
	TestMean       *float64 `json:"test_rel_err2_mean,omitempty"`
	TestSE         *float64 `json:"test_rel_err2_se,omitempty"`
	Silhouette     *float64 `json:"stability_silhouette,omitempty"`
	Agreement      *float64 `json:"stability_agreement,omitempty"`
	MeanIterations float64  `json:"mean_iterations"`
	MeanSeconds    float64  `json:"mean_seconds"`
	ConsensusBasis string   `json:"consensus_basis"`
}

// jsonNumber is v for JSON, nil for NaN (no value).
func jsonNumber(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// writeSweep writes sweep.json, sweep.tsv, the consensus bases and the picture into dir.
func writeSweep(dir string, rep sweepReport, summary []sweep.RankSummary) error {
	for i, s := range summary {
		if s.Stability.Basis == nil {
			continue
		}
		m := s.Stability.M
		name := fmt.Sprintf("consensus_basis_%d.npy", s.K)
		if err := writeNPYFile(filepath.Join(dir, name), m, s.K, kernels.Transpose(s.Stability.Basis, m, s.K)); err != nil {
			return err
		}
		rep.PerRank[i].ConsensusBasis = name
	}
	// Every file is written whole or not at all (atomicfile), sweep.json last: when it is
	// there, so is the rest.
	err := atomicfile.Write(filepath.Join(dir, "sweep.tsv"), 0o644, func(tw io.Writer) error {
		if _, err := fmt.Fprintln(tw, "k\tseed\ttrain_rel_err2\ttest_rel_err2\titerations\tseconds\tstop_reason"); err != nil {
			return err
		}
		for _, r := range rep.Runs {
			test := "NA"
			if r.TestRelErr2 != nil {
				test = strconv.FormatFloat(*r.TestRelErr2, 'g', 8, 64)
			}
			if _, err := fmt.Fprintf(tw, "%d\t%d\t%.8g\t%s\t%d\t%.4g\t%s\n", r.K, r.Seed, r.TrainRelErr2, test, r.Iterations, r.Seconds, r.StopReason); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	note := figures.SweepNote{Suggested: rep.Suggested, Rule: rep.Rule, Capped: cappedByRank(rep.Runs)}
	fig, err := figures.Sweep(fmt.Sprintf("%s: error and stability against the rank", strings.Join(rep.Input, " + ")), summary, note)
	if err != nil {
		return err
	}
	if _, err = fig.Save(dir, "sweep"); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, "sweep.json"), append(js, '\n'), 0o644)
}

// writeNPYFile writes a rows x cols row-major matrix as .npy.
func writeNPYFile(path string, rows, cols int, data []float64) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error { return matio.WriteNPY(w, rows, cols, data) })
}

// rankRow is one rank's summary for sweep.json.
func rankRow(s sweep.RankSummary) sweepRank {
	r := sweepRank{K: s.K, Runs: s.Runs, TrainMean: s.Train.Mean, MeanIterations: s.MeanIterations, MeanSeconds: s.MeanSeconds,
		Silhouette: jsonNumber(s.Stability.Silhouette), Agreement: jsonNumber(s.Stability.Agreement)}
	if s.Runs > 1 {
		r.TrainSE = jsonNumber(s.Train.SE)
	}
	if s.Test.N > 0 {
		r.TestMean = jsonNumber(s.Test.Mean)
		if s.Test.N > 1 {
			r.TestSE = jsonNumber(s.Test.SE)
		}
	}
	return r
}

// hitCap says whether a run stopped at a cap (the iteration cap or the time limit) rather
// than by converging, stalling or being cancelled.
func hitCap(stopReason string) bool {
	return stopReason == string(kernels.StopMaxIter) || stopReason == string(kernels.StopTimeLimit)
}

// cappedByRank counts, for each rank, the runs that hit a cap.
func cappedByRank(runs []sweepRunRow) map[int]int {
	capped := map[int]int{}
	for _, r := range runs {
		if hitCap(r.StopReason) {
			capped[r.K]++
		}
	}
	return capped
}

// cappedLine is the console's line on the runs that hit a cap: "15 of 24 runs hit the
// iteration cap or time limit (K=5, 6, 7): their errors are not converged" or "no run hit
// the iteration cap or time limit".
func cappedLine(runs []sweepRunRow) string {
	byRank := cappedByRank(runs)
	if len(byRank) == 0 {
		return fmt.Sprintf("no run of %d hit the iteration cap or time limit", len(runs))
	}
	n := 0
	var ks []int
	for k, c := range byRank {
		n += c
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return fmt.Sprintf("%d of %d runs hit the iteration cap or time limit (K=%s): their errors are not converged; "+
		"raise --max-iter (or the time limit) before trusting the suggestion", n, len(runs), rankList(ks))
}
