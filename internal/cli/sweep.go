package cli

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/sweep"
)

// notForSweep are the flags of factorize a sweep does not take: it chooses the rank and the
// seeds itself, and writes its own files (no factors of single runs, no shared output).
var notForSweep = map[string]bool{"rank": true, "seed": true, "init-basis": true, "init-coef": true, "out-shared": true,
	"overwrite": true, "detach": true, "plots": true, "image-shape": true, "sample-names": true, "coef-tsv": true}

func cmdSweep(args []string, stdout, stderr io.Writer) error {
	all := flag.NewFlagSet("factorize", flag.ContinueOnError)
	var jf jobFlags
	of := registerFactorize(all, &jf)
	sweepDefaults(all, &jf)
	fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
	all.VisitAll(func(f *flag.Flag) {
		if !notForSweep[f.Name] {
			fs.Var(f.Value, f.Name, cmp.Or(sweepUsage[f.Name], f.Usage))
		}
	})
	sf := registerSweep(fs)
	ranks, seeds, firstSeed, parallel, folds := sf.ranks, sf.seeds, sf.firstSeed, sf.parallel, sf.folds
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: didnmf sweep --input PATH --ranks FROM:TO[:STEP] [--seeds N] [--folds F] --out DIR [--resume] [flags]\n\n"+
			"chooses the rank: factorizes the input at every rank of --ranks with --seeds seeds each (concurrently on\n"+
			"--nodes or a --cluster, each job surviving node loss like any), and writes into --out sweep.json and\n"+
			"sweep.tsv (the train and test errors, iterations and seconds of every run, and per rank their spread and\n"+
			"the stability of the bases across seeds: cNMF's consensus, a silhouette of the seeds' components), the\n"+
			"consensus basis of every rank (consensus_basis_K.npy, features x K, and as text consensus_basis_K.tsv and\n"+
			"each component's top features top_features_K.tsv, their rows named by the input's feature names or\n"+
			"--feature-names), the suggested rank with the rule used, and sweep.png/.svg (error and stability against\n"+
			"the rank).\n\n"+
			"By default the sweep cross-validates: every run holds out --test-fraction (0.1) of the entries, each seed\n"+
			"its own set (fold f holds out the entries of test seed --test-seed + f), and the suggested rank is the\n"+
			"smallest whose test error is within one standard error over the folds (paired) of the lowest; when no rank\n"+
			"does better than the smallest tried by more than that, it says it cannot tell. A fold's test error is that of\n"+
			"its best start (of the lowest train error: with --folds below --seeds a fold has several); a fold whose fit\n"+
			"at a rank is a poor local optimum (its train error far above the rank's other folds') is left out there,\n"+
			"and the rule names it. The runs go to convergence\n"+
			"(--max-iter 2000, --stall-tol 1e-5 by default here); a run that hits a cap makes the suggestion unreliable,\n"+
			"and the sweep says so. --test-fraction 0 turns cross-validation off: the rank is then the largest whose\n"+
			"stability (the silhouette of the seeds' components) is within 0.05 of the best. One rank alone is\n"+
			"compared with nothing: the sweep cannot tell (its consensus is still made).\n\n"+
			"For counts (scRNA-seq, words) with weak programs, use --transform sqrt: the runs then fit sqrt(X), whose noise\n"+
			"is about as large at every mean, and the test error is that of the model's square against X. On count matrices\n"+
			"whose weakest programs lie under the noise's edge it found the planted rank in 77%% of the planted-rank bank's\n"+
			"cases (91%% within one) against 50%% (64%%) for the raw counts, and the same ranks on Gaussian and uniform\n"+
			"noise; where every program stands above the noise, both find it. The train errors and the bases are then of\n"+
			"sqrt(X).\n\n"+
			"Every run is kept in --out DIR/runs as it ends (its basis and numbers). If the sweep is interrupted or its\n"+
			"process dies, the same command with --resume goes on: the runs kept there are not run again (as cNMF's\n"+
			"--skip-completed-runs), and the result is the bits of a sweep never interrupted. Without --resume a sweep\n"+
			"refuses a DIR/runs that holds runs; with it, DIR/runs must hold runs of the same job (input, algorithm,\n"+
			"stop rule, ...: the flags may add ranks or seeds, or raise --max-iter, which runs again only the runs that hit\n"+
			"the old cap). Once the sweep is done, DIR/runs may be removed.\n\nflags:\n")
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
	if *seeds < 1 || *seeds > didnmf.MaxSweepSeeds {
		return badInput("--seeds must be between 1 and %d, got %d", didnmf.MaxSweepSeeds, *seeds)
	}
	if *folds < 0 || *folds > *seeds {
		return badInput("--folds must be between 1 and --seeds (%d), or 0 for one per seed; got %d", *seeds, *folds)
	}
	if *folds > 1 && jf.testFraction == 0 {
		return badInput("--folds %d needs held-out entries: --test-fraction is 0", *folds)
	}
	if a, err := jf.accel.one(); err == nil && a.Extrapolate && jf.testFraction > 0 && !flagGiven(fs, "test-fraction") {
		return badInput("--accel %s: a sweep holds out --test-fraction %g of the entries by default (its cross-validation), and did cannot "+
			"extrapolate with held-out entries yet: use --accel C,B (the inner sweeps alone), or --test-fraction 0 (no cross-validation)", a, jf.testFraction)
	}
	if *folds == 0 { // one held-out set per seed, or none
		*folds = 1
		if jf.testFraction > 0 {
			*folds = *seeds
		}
	}
	opts := didnmf.SweepOptions{Ranks: ks, Seeds: *seeds, Folds: *folds, FirstSeed: *firstSeed, Parallel: *parallel}
	if err := opts.Check(nil); err != nil {
		return err
	}
	// The first job is opened at the largest rank, so that a rank the data cannot take is
	// refused before anything runs; the others are derived from it (the input is read once).
	jf.seed, jf.rank, jf.rankSet, jf.errOut = *firstSeed, ks[len(ks)-1], true, stderr
	j0, err := jf.open()
	if err != nil {
		// The job's rank is --ranks' largest: its errors name --ranks, not factorize's --rank.
		return &withFlags{err, map[string]string{"rank": "--ranks"}}
	}
	defer j0.Close()
	if err := opts.Check(j0.Spec); err != nil {
		return err
	}
	tr := cmp.Or(j0.Spec.Transform, didnmf.TransformNone) // --transform, a job flag
	if w := heldOutWarning(jf.testFraction, j0.m, j0.n, ks[len(ks)-1]); w != "" {
		fmt.Fprintf(stderr, "sweep: warning: %s\n", w) // --quiet too: it is a warning
	}
	// The features' names (the input's, or --feature-names) name the consensus bases' tables.
	names, err := namesFor(of.names, jf.inputs, "", ks[len(ks)-1], j0.m, j0.n, func(msg string) {
		if !*of.quiet {
			fmt.Fprintf(stderr, "didnmf: warning: %s\n", msg)
		}
	})
	if err != nil {
		return err
	}
	dir, cleanup, release, err := prepareOutDir(*of.out, false)
	if err != nil {
		return err
	}
	defer release()
	// The journal: every run is kept in DIR/runs as it ends, so that a sweep killed or
	// interrupted goes on with --resume. Without --resume, runs kept there are refused rather
	// than mixed in or overwritten.
	journal, err := didnmf.OpenSweepJournal(*of.out, j0.Job, opts)
	if err != nil {
		cleanup()
		return err
	}
	kept, err := journal.Runs()
	if err != nil {
		cleanup()
		return err
	}
	if kept > 0 && !*sf.resume {
		cleanup()
		return badInput("--out %s holds %d run(s) of an earlier sweep of this job in %s: give --resume to go on from them (only the runs missing are run), or use another --out",
			*of.out, kept, journal.Dir())
	}
	if _, err := os.Lstat(filepath.Join(dir, "sweep.json")); err == nil && kept == 0 {
		// A finished sweep's results whose runs are gone: this sweep would replace sweep.json
		// and leave the other's per-rank files (consensus_basis_K.npy, .tsv, spectra_K.npy) beside it.
		cleanup()
		return badInput("--out %s holds the results of an earlier sweep (sweep.json) and no runs to go on from: use another --out, or remove that sweep's files first", dir)
	}
	opts.Journal = journal
	if builds, this := journal.Builds(); kept > 0 && (len(builds) == 0 || slices.ContainsFunc(builds, func(b string) bool { return b != this })) {
		fmt.Fprintf(stderr, "sweep: warning: %s\n", otherBuildWarning(kept, journal.Dir(), builds, this))
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !*of.quiet {
		p := cmp.Or(*parallel, runner.Parallelism())
		cv := "no test set"
		if jf.testFraction > 0 {
			cv = fmt.Sprintf("%d fold(s) of %g held out", *folds, jf.testFraction)
		}
		if tr != didnmf.TransformNone {
			cv += ", fitting " + string(tr) + "(X)"
		}
		fmt.Fprintf(stderr, "sweep: %s, ranks %s, %d seed(s), %s: %d jobs, %d at once on %s\n", j0.Name(), rankList(ks), *seeds, cv,
			len(ks)**seeds, p, j0.Target)
		switch {
		case *sf.resume && journal.RaisedFrom() > 0:
			fmt.Fprintf(stderr, "sweep: %s holds %d run(s) of --max-iter %d: those of this sweep's ranks, seeds and folds that stopped before that cap "+
				"are not run again (each is checked and said resumed); those that hit it run again to --max-iter %d\n",
				journal.Dir(), kept, journal.RaisedFrom(), j0.Spec.Stop.MaxIter)
		case *sf.resume:
			fmt.Fprintf(stderr, "sweep: %s holds %d run(s): those of this sweep's ranks, seeds and folds are not run again (each is checked and said resumed)\n",
				journal.Dir(), kept)
		}
		opts.OnRun = func(e didnmf.SweepEvent) {
			switch {
			case e.Retry:
				fmt.Fprintf(stderr, "  K=%d seed %d fold %d failed (%v); running it again\n", e.K, e.Seed, e.Fold, e.Err)
			case e.Err != nil:
				fmt.Fprintf(stderr, "  [%d/%d] K=%d seed %d fold %d: failed: %v\n", e.Done, e.Total, e.K, e.Seed, e.Fold, e.Err)
			case e.Resumed:
				res, test := e.Result, ""
				if res.TestCount > 0 {
					test = fmt.Sprintf(", test %.4g", res.TestRelErr2())
				}
				fmt.Fprintf(stderr, "  [%d/%d] K=%d seed %d fold %d: resumed (%d iterations in %s, rel_err2 %.4g%s, kept in %s)\n", e.Done, e.Total,
					e.K, e.Seed, e.Fold, res.Iterations, secondsText(res.Seconds), res.RelErr2(), test, journal.Dir())
			default:
				res, test, capped := e.Result, "", ""
				if res.TestCount > 0 {
					test = fmt.Sprintf(", test %.4g", res.TestRelErr2())
				}
				if res.StopReason == kernels.StopMaxIter || res.StopReason == kernels.StopTimeLimit {
					capped = fmt.Sprintf(", stopped at the cap (%s): not converged", res.StopReason)
				}
				fmt.Fprintf(stderr, "  [%d/%d] K=%d seed %d fold %d: %d iterations in %s, rel_err2 %.4g%s%s (%s elapsed)\n", e.Done, e.Total, e.K, e.Seed,
					e.Fold, res.Iterations, secondsText(res.Seconds), res.RelErr2(), test, capped, secondsText(e.Elapsed.Seconds()))
			}
			if e.JournalErr != nil {
				fmt.Fprintf(stderr, "  K=%d seed %d fold %d was not kept in %s (%v): a sweep resumed later would run it again\n", e.K, e.Seed, e.Fold,
					journal.Dir(), e.JournalErr)
			}
		}
	}
	sw, err := runner.Sweep(ctx, j0.Job, opts)
	if ctx.Err() != nil {
		cleanup()
		if n, _ := journal.Runs(); n > 0 {
			fmt.Fprintf(stderr, "didnmf: interrupted; the sweep's running jobs were cancelled; %d run(s) that ended are kept in %s: run the same command with --resume to go on from them\n",
				n, journal.Dir())
		} else {
			fmt.Fprintln(stderr, "didnmf: interrupted; the sweep's running jobs were cancelled and nothing was written")
		}
		return errInterrupted
	}
	if err != nil {
		cleanup()
		return err
	}
	sw.FeatureNames = names.Features
	if m := sweepFeatures(sw); names.Features != nil && m > 0 && len(names.Features) != m && !*of.quiet {
		// Known only now when the nodes read the input: the tables are numbered instead.
		fmt.Fprintf(stderr, "didnmf: warning: %d feature names for %d features: the consensus bases' tables number their rows\n", len(names.Features), m)
	}
	if err := sw.Save(dir); err != nil {
		cleanup()
		return err
	}
	rep, failed := sw.Report(), sw.Failed()
	if !*of.quiet {
		fmt.Fprintf(stderr, "%d jobs in %s", len(sw.Runs)-len(failed), secondsText(sw.Seconds))
		if n := sw.ResumedRuns(); n > 0 {
			fmt.Fprintf(stderr, " (%d of them resumed from %s, not run again)", n, journal.Dir())
		}
		if b := sw.Busy; b != nil {
			fmt.Fprintf(stderr, "; the cores were %.0f%% busy (%s of CPU on %d cores)", 100*b.Share, secondsText(b.CPUSeconds), b.Cores)
		}
		fmt.Fprintf(stderr, "\n%s\n%s\nwrote sweep.json, sweep.tsv, sweep.png, sweep.svg, and consensus_basis_K.npy, consensus_basis_K.tsv and top_features_K.tsv for each rank into %s\n",
			cappedLine(rep), suggestionLine(sw.Suggestion), dir)
	} else if sw.Suggestion.Unreliable != "" {
		// --quiet prints nothing but errors and warnings, and this is one.
		fmt.Fprintf(stderr, "sweep: warning: the suggestion is unreliable: %s\n", sw.Suggestion.Unreliable)
	}
	if len(failed) > 0 {
		return fmt.Errorf("sweep: %d of %d jobs failed (listed in sweep.json); the first: K=%d seed %d: %w", len(failed), len(sw.Runs),
			failed[0].K, failed[0].Seed, failed[0].Err)
	}
	return nil
}

// sweepUsage are the usages of factorize's flags that mean something else in a sweep.
var sweepUsage = map[string]string{
	"out": "output `DIR`: sweep.json and sweep.tsv (every run's errors, per rank their spread and stability, the suggested rank and " +
		"its rule), consensus_basis_K.npy, consensus_basis_K.tsv and top_features_K.tsv for each rank, sweep.png/.svg, and runs/ (every run as it ends, for --resume)",
	"test-seed": "seed of the first held-out set: fold f holds out the entries of test seed SEED + f (see --folds), the same " +
		"for every rank",
	"quiet": "print nothing but errors and warnings (such as an unreliable suggestion)",
}

// The defaults a sweep changes from factorize's: a sweep cross-validates (10% of the entries
// held out) and runs each fit to convergence of the masked fit before comparing ranks. The
// planted-rank bank (internal/rankbank) chose them: see sweep/doc.go.
const (
	sweepTestFraction = 0.1
	sweepMaxIter      = 2000
	sweepStallTol     = 1e-5
)

// sweepDefaults sets the defaults a sweep changes in factorize's flags (before parsing).
func sweepDefaults(fs *flag.FlagSet, jf *jobFlags) {
	jf.testFraction, jf.maxIter, jf.stallTol = sweepTestFraction, sweepMaxIter, sweepStallTol
	for name, v := range map[string]string{"test-fraction": strconv.FormatFloat(sweepTestFraction, 'g', -1, 64),
		"max-iter": strconv.Itoa(sweepMaxIter), "stall-tol": strconv.FormatFloat(sweepStallTol, 'g', -1, 64)} {
		fs.Lookup(name).DefValue = v
	}
}

// suggestionLine is the console's line on the suggested rank: "suggested rank: 6 (rule)",
// or "suggested rank: cannot tell: reason", and what makes it unreliable.
func suggestionLine(s sweep.Suggestion) string {
	line := fmt.Sprintf("suggested rank: %d (%s)", s.K, s.Rule)
	if s.CannotTell {
		line = "suggested rank: " + s.Reason // "cannot tell: ..."
	}
	if s.Unreliable != "" {
		line += "\nthe suggestion is unreliable: " + s.Unreliable +
			"\n(the same command with --resume and a higher --max-iter keeps the runs that converged and runs only the capped ones again)"
	}
	return line
}

// sweepFlags are sweep's own flags, beside the factorize flags it shares.
type sweepFlags struct {
	ranks     *string
	seeds     *int
	firstSeed *uint64
	parallel  *int
	folds     *int
	resume    *bool
}

// registerSweep adds the flags of sweep's own to fs.
func registerSweep(fs *flag.FlagSet) sweepFlags {
	var f sweepFlags
	f.ranks = fs.String("ranks", "", "the ranks to try, `FROM:TO[:STEP]` (e.g. 2:30 or 2:30:2), or a comma-separated list")
	f.seeds = fs.Int("seeds", 5, "`N` runs per rank, with seeds --seed, --seed+1, ...: their spread and the stability of their bases across seeds")
	f.firstSeed = fs.Uint64("seed", 1, "the first `SEED` (synthetic inputs are generated from it, the same for every run)")
	f.parallel = fs.Int("parallel", 0, "jobs at once (0: one in this process, one per node with --nodes or per member with --cluster)")
	f.resume = fs.Bool("resume", false, "go on from the runs an earlier sweep of the same job kept in --out DIR/runs (it was interrupted or killed): only the runs missing are run, as cNMF's --skip-completed-runs; without it, a DIR/runs that holds runs is refused")
	f.folds = fs.Int("folds", 0, "held-out sets per rank, `F` <= --seeds: the run of seed SEED+s holds out fold s mod F (test seed --test-seed + fold), and the test error's standard error is over the folds; 0: one per seed with a --test-fraction, 1 without")
	return f
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
		if v[0] < 1 || v[1] < v[0] || v[2] < 1 {
			return nil, bad()
		}
		if n := (v[1]-v[0])/v[2] + 1; n > didnmf.MaxSweepRuns {
			return nil, tooManyRanks(s, n)
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
		if len(ks) > didnmf.MaxSweepRuns {
			return nil, tooManyRanks(s, strings.Count(s, ",")+1)
		}
	}
	return ks, nil
}

// tooManyRanks is the error for --ranks s that gives n ranks, more than a sweep runs jobs.
func tooManyRanks(s string, n int) error {
	return badInput("--ranks %q gives %d ranks: a sweep runs at most %d jobs (ranks x --seeds)", s, n, didnmf.MaxSweepRuns)
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

// cappedLine is the console's line on the runs that hit a cap: "15 of 24 runs hit the
// iteration cap or time limit (K=5, 6, 7): their fits did not converge", with what that
// means for the suggestion, or "no run hit the iteration cap or time limit".
func cappedLine(rep didnmf.SweepReport) string {
	runs, byRank := rep.Runs, rep.CappedByRank()
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
	line := fmt.Sprintf("%d of %d runs hit the iteration cap or time limit (K=%s): their fits did not converge", n, len(runs), rankList(ks))
	switch {
	case rep.CannotTell && rep.RuleName == sweep.RuleCV:
		// Every capped run counts then, at any rank (sweep.Suggest): below the data's rank an
		// unfitted run may be why no rank did better.
		return line + "; the sweep cannot tell the rank, and they may be why (below)"
	case rep.Unreliable == "" && rep.RuleName == sweep.RuleCV:
		why := "they are above the rank of the lowest test error"
		if left := cappedLeftOut(rep); left == n {
			why = "the rule left them out, far from their ranks' other fits (below)"
		} else if left > 0 {
			why += ", or the rule left them out, far from their ranks' other fits (below)"
		}
		return line + "; " + why + ", and the suggestion does not rest on them"
	case rep.RuleName == sweep.RuleCV:
		return line + "; the suggestion rests on those up to the rank of the lowest test error, and is unreliable (below)"
	}
	return line + "; raise --max-iter (or the time limit) before trusting the suggestion"
}

// heldOutWarning says when a held-out fraction f leaves the fits too little to fit: each
// sample keeps about (1-f) of its m features' entries and each feature (1-f) of the n
// samples', and a rank k fit has k unknowns in each sample's usage and in each feature's
// weights. With fewer observed entries than that the fits interpolate what is left and their
// test errors compare nothing (a fresh-eye review: --test-fraction 0.99 left 19 entries to
// 360 unknowns, and the sweep suggested a rank as usual); past half, each fit sees less
// than it is tested on. "" when neither (or the shape is not known here: a cluster's nodes
// read the input).
func heldOutWarning(f float64, m, n, k int) string {
	if f <= 0 || m <= 0 || n <= 0 {
		return ""
	}
	perSample, perFeature := (1-f)*float64(m), (1-f)*float64(n)
	var short []string
	if perSample < float64(k) {
		short = append(short, fmt.Sprintf("each sample about %.3g observed entries", perSample))
	}
	if perFeature < float64(k) {
		short = append(short, fmt.Sprintf("each feature about %.3g", perFeature))
	}
	switch {
	case len(short) > 0:
		return fmt.Sprintf("--test-fraction %g leaves %s, fewer than the %d unknowns a rank-%d fit has in each: the fits interpolate "+
			"what is left, and their test errors cannot compare ranks; lower --test-fraction (0.1 by default), or sweep smaller ranks",
			f, strings.Join(short, " and "), k, k)
	case f > 0.5:
		return fmt.Sprintf("--test-fraction %g holds out most of the entries: each fit sees less than it is tested on, and the test errors "+
			"are those of models fitted on a fraction of the data; lower --test-fraction (0.1 by default)", f)
	}
	return ""
}

// cappedLeftOut counts the capped fits the rule left out as poor (ranks_summary's poor_fits).
func cappedLeftOut(rep didnmf.SweepReport) int {
	n := 0
	for _, r := range rep.PerRank {
		for _, p := range r.PoorFits {
			if p.Capped {
				n++
			}
		}
	}
	return n
}

// otherBuildWarning says that the kept runs of a sweep resumed by build this were recorded by
// builds among which are others (or by one that did not record its build): their kernels may
// give other bits, so the sweep is not bitwise one run in one sitting. The builds come from a
// file and are printed quoted.
func otherBuildWarning(kept int, dir string, builds []string, this string) string {
	by := "a didnmf that did not record its build"
	if len(builds) > 0 {
		q := make([]string, len(builds))
		for i, b := range builds {
			q[i] = strconv.Quote(b)
		}
		by = "didnmf " + strings.Join(q, ", ")
	}
	return fmt.Sprintf("the %d run(s) kept in %s were made by %s, and this is %q: the runs still to go are made by this build's kernels, "+
		"whose bits may differ from the build(s) that made the kept ones, so this sweep is not bitwise one run in a single sitting "+
		"(for that, run it again from the start with one build)", kept, dir, by, this)
}

// sweepFeatures is the number of features of a sweep's runs (0 when no rank has a basis).
func sweepFeatures(sw *didnmf.SweepResult) int {
	for _, r := range sw.Summary {
		if r.Stability.M > 0 {
			return r.Stability.M
		}
	}
	return 0
}
