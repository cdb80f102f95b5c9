package didnmf

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/didnmf/didnmf/internal/buildinfo"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/sweep"
	"github.com/didnmf/didnmf/usererr"
)

// A rank sweep runs a job at every rank of a list with several seeds each, concurrently on
// the runner's target, and summarizes the runs per rank (package sweep): the error's spread,
// the stability of the bases across seeds, a suggested rank.

// MaxSweepRuns bounds the runs of a sweep (ranks x seeds).
const MaxSweepRuns = 10000

// MaxSweepSeeds bounds the seeds per rank.
const MaxSweepSeeds = 1000

// SweepAttempts is how many times a sweep runs a job that failed for a reason other than its
// input (a cluster that lost the job's coordinator and its standby at once, say): a job is
// deterministic, so another attempt gives the bits the first would have.
const SweepAttempts = 3

// SweepOptions says which runs a sweep makes and how many at once.
type SweepOptions struct {
	// Ranks are the ranks to try, increasing, each at least 1.
	Ranks []int
	// Seeds is the runs per rank, with seeds FirstSeed, FirstSeed+1, ... (1 to MaxSweepSeeds).
	Seeds     int
	FirstSeed uint64
	// Folds is the number of held-out sets (0 is 1), at most Seeds; more than one needs the
	// job's test fraction. The run of seed index s (seed FirstSeed+s) holds out fold
	// s mod Folds, the entries of test seed spec.TestSeed + fold: with Folds = Seeds every run
	// has its own seed and its own held-out set, as RcppML's replicates do, and the test
	// error's spread over the folds is the test error's, not the optimizer's (package sweep,
	// Summarize). The CLI's default is one fold per seed (see internal/cli's sweep).
	Folds int
	// Parallel is how many jobs run at once (0: Runner.Parallelism).
	Parallel int
	// Transform is what the runs fit and hold out instead of the input's values: "" or
	// TransformNone the job's own (its Spec.Transform, by default none: the values),
	// TransformSqrt their square roots (for counts: see SweepTransform). Whoever reads the
	// input applies it: this process, or the nodes of --nodes or a cluster.
	Transform SweepTransform
	// OnRun, when set, is told of every run that ends or is tried again, one call at a time,
	// and of every run the Journal had recorded (Resumed), before the others run.
	OnRun func(SweepEvent)
	// Journal, when set, keeps the runs as they end (Record) and gives back those an earlier
	// sweep of the same job recorded (Done), which are then not run again: a sweep whose
	// process died goes on where it stopped (OpenSweepJournal keeps them in files).
	Journal SweepJournal
}

// SweepJournal keeps a sweep's runs as they end, so that a sweep of the same job run again
// (after its process was killed, say) skips them, as cNMF's --skip-completed-runs does. A run
// is known by its rank, seed and fold: those and the job make its bits (a job is
// deterministic), so the journal must hold runs of one job only (FileSweepJournal checks it).
type SweepJournal interface {
	// Done returns the run of rank k, seed and fold an earlier sweep of the same job
	// recorded (nil, nil when none), with its basis, errors and stop reason (C, History and
	// Job may be nil: Runner.Sweep sets Job). An error (a record that cannot be trusted) fails
	// the sweep before any run starts. Runner.Sweep calls it once for each of its runs, one
	// call at a time, before it runs anything and never at the same time as Record.
	Done(k, seed, fold int) (*Result, error)
	// Record keeps a run that ended with a result (never a failed or cancelled one; its C is
	// nil). Calls come one at a time, from the sweep's workers, each before OnRun is told of
	// the run; res must not be kept past the call. An error loses nothing of the sweep: the
	// run's result is kept in memory and the error reported with it (SweepEvent.JournalErr).
	Record(k, seed, fold int, res *Result) error
}

// SweepEvent is a run of a sweep that ended (Err nil: with Result, which like SweepRun's
// has no coefficients), failed and runs again (Retry), or was found in the sweep's journal
// (Resumed).
type SweepEvent struct {
	K, Seed, Fold int
	// Done of Total runs have ended (a retry is not an end; a resumed run is).
	Done, Total int
	Retry       bool
	// Resumed says that the run was not run: its Result is the one the journal recorded
	// (SweepOptions.Journal's Done).
	Resumed bool
	Result  *Result
	Err     error
	// JournalErr is why the journal could not keep a run that ended (SweepJournal.Record's
	// error): the sweep has its result, but a sweep resumed later would run it again.
	JournalErr error
	// Elapsed is the time since the sweep began.
	Elapsed time.Duration
}

// SweepRun is one run of a sweep: its result, or why it failed. The result holds the run's
// basis, errors, stop reason and history but not its coefficients (Result.C is nil): a
// sweep's memory grows with its runs' bases (features x K each), not with the samples.
type SweepRun struct {
	K, Seed int
	// Fold is the run's held-out set: its test seed is the job's TestSeed + Fold.
	Fold   int
	Result *Result
	Err    error
	// Resumed says that the run's result came from the sweep's journal (an earlier sweep of
	// the same job ran it) instead of being run.
	Resumed bool
}

// Capped tells whether the run ended at its iteration cap or time limit rather than by
// converging (false for a failed run).
func (r SweepRun) Capped() bool {
	return r.Err == nil && r.Result != nil && (r.Result.StopReason == kernels.StopMaxIter || r.Result.StopReason == kernels.StopTimeLimit)
}

// SweepResult is a sweep's outcome.
type SweepResult struct {
	// Inputs, Algo, Accel and Shards are the job's; Where its target; Ranks, Seeds and
	// FirstSeed the sweep's options.
	Inputs    []string
	Algo      string
	Accel     kernels.Accel
	Shards    int
	Where     string
	Ranks     []int
	Seeds     int
	FirstSeed uint64
	// Folds is the sweep's number of held-out sets (1 without a test set).
	Folds int
	// Transform is what the runs fitted (SweepOptions.Transform; TransformNone for none):
	// their train errors, histories, bases and consensus spectra are of the transformed
	// values. With TransformSqrt a run's TestSSE and TestSqNorm (and so the test error the
	// summary and the rule read) are of the input's values: the held-out squared error of
	// the model's square (see TransformSqrt).
	Transform SweepTransform
	// Runs are every run, by rank then seed; a run that failed has Err set.
	Runs []SweepRun
	// Summary is the runs that ended with a result, summarized per rank; Suggestion the
	// rank suggested from it and why (sweep.Suggest), and Suggested and Rule its K (0 when it
	// cannot tell) and rule, in words.
	Summary    []sweep.RankSummary
	Suggestion sweep.Suggestion
	Suggested  int
	Rule       string
	// Seconds is the sweep's wall time.
	Seconds float64
	// Busy is how busy the target's cores were during the sweep, and BusyMissing the cluster
	// members that did not answer (not counted); Busy is nil when no reading could be had.
	Busy        *Busy
	BusyMissing []string
	// Builds are the didnmf builds (internal/buildinfo's ID: version or commit, and Go
	// version) of the sweeps that made its runs: for resumed runs, those the journal names
	// (when it is a FileSweepJournal and names any), then this process's when it ran a run.
	// Runs made by other builds may differ in their bits.
	Builds []string
	// FeatureNames, when set (one a feature), name the rows of the consensus bases' tables
	// Save writes (consensus_basis_K.tsv, top_features_K.tsv); else the rows are numbered.
	// Sweep does not set it: the caller knows the input's names (the CLI's namesFor).
	FeatureNames []string
}

// Failed lists the runs that failed.
func (s *SweepResult) Failed() []SweepRun {
	var out []SweepRun
	for _, r := range s.Runs {
		if r.Err != nil {
			out = append(out, r)
		}
	}
	return out
}

// Check tells what is wrong with the options for a sweep of spec's job, as the user's error
// naming the field ("ranks", "seeds", "folds", "parallel"): the ranks increasing and >= 1, the
// seeds between 1 and MaxSweepSeeds and their last at most math.MaxInt64 (and the folds' last
// test seed at most math.MaxUint64), at most MaxSweepRuns runs, the folds between 0 and the
// seeds and more than one only with a test fraction, and more than one seed only for an
// initialisation that depends on it.
func (o SweepOptions) Check(spec *Spec) error {
	if len(o.Ranks) == 0 {
		return usererr.Field("ranks", "{ranks}: no rank to try")
	}
	for i, k := range o.Ranks {
		if k < 1 || i > 0 && k <= o.Ranks[i-1] {
			return usererr.Field("ranks", "{ranks} %v: list the ranks in increasing order, each once and >= 1", o.Ranks)
		}
	}
	if o.Seeds < 1 || o.Seeds > MaxSweepSeeds {
		return usererr.Field("seeds", "{seeds} must be between 1 and %d, got %d", MaxSweepSeeds, o.Seeds)
	}
	if o.FirstSeed > math.MaxInt64-uint64(o.Seeds-1) { // a run's seed is an int
		return usererr.Field("first_seed", "{first_seed} %d: its %d seeds must stay at most %d", o.FirstSeed, o.Seeds, int64(math.MaxInt64))
	}
	if spec != nil && spec.TestFraction > 0 && spec.TestSeed > math.MaxUint64-uint64(max(o.Folds, 1)-1) {
		return usererr.Field("test_seed", "{test_seed} %d: its %d folds' test seeds must stay at most %d", spec.TestSeed, max(o.Folds, 1), uint64(math.MaxUint64))
	}
	if n := len(o.Ranks) * o.Seeds; n > MaxSweepRuns {
		return usererr.Field("ranks", "{ranks} and {seeds} make %d runs; at most %d", n, MaxSweepRuns)
	}
	if o.Folds < 0 || o.Folds > o.Seeds {
		return usererr.Field("folds", "{folds} must be between 1 and {seeds} (%d), got %d", o.Seeds, o.Folds)
	}
	if o.Folds > 1 && spec != nil && !(spec.TestFraction > 0) {
		return usererr.Field("folds", "{folds} %d needs held-out entries: set {test_fraction}", o.Folds)
	}
	if o.Parallel < 0 {
		return usererr.Field("parallel", "{parallel} must be >= 0, got %d", o.Parallel)
	}
	if o.Transform != "" && o.Transform != TransformNone && o.Transform != TransformSqrt {
		return usererr.Field("transform", "{transform} %q: want none or sqrt", string(o.Transform))
	}
	if spec != nil && spec.Init != kernels.InitRandom && spec.Init != kernels.InitKMeans && o.Seeds > 1 {
		return usererr.Field("seeds", "{init} %s does not depend on the seed: {seeds} %d would repeat one run; use {init} random or kmeans, or {seeds} 1",
			spec.Init, o.Seeds)
	}
	return nil
}

// Sweep runs the job j0 (opened at any rank, best the largest, so that a rank the data
// cannot take is refused before anything runs) at every rank and seed of o, o.Parallel at a
// time, each failed run again up to SweepAttempts times unless it failed for its input, and
// summarizes the runs. With o.Journal it first asks the journal for every run, and uses the
// result of each one it recorded instead of running it (SweepRun.Resumed); a run that ends is
// recorded before OnRun is told. Canceling ctx cancels the running jobs and returns ctx's
// error (the runs that ended before are in the journal). A run that fails for its input or
// its settings (a *usererr.Error: a NaN in the data, a bad value) ends the sweep at once: the
// other runs would fail alike, so the running ones are canceled, none is started, OnRun is
// not told of the failure, and Sweep returns that error, naming the run. It fails when every
// run failed, or when the journal cannot tell a run (its error, before anything runs);
// otherwise the failed runs are in the result.
func (r *Runner) Sweep(parent context.Context, j0 *Job, o SweepOptions) (*SweepResult, error) {
	if err := o.Check(j0.Spec); err != nil {
		return nil, err
	}
	p := o.Parallel
	if p == 0 {
		p = r.Parallelism()
	}
	tr := sweepTransformOf(j0, o)
	out := &SweepResult{Inputs: j0.Spec.Inputs, Algo: string(j0.Spec.Algo), Accel: j0.Spec.Accel, Shards: j0.Spec.Shards, Where: r.target.String(),
		Ranks: o.Ranks, Seeds: o.Seeds, FirstSeed: o.FirstSeed, Folds: max(o.Folds, 1), Transform: cmp.Or(tr, TransformNone)}
	for _, k := range o.Ranks {
		for s := range o.Seeds {
			out.Runs = append(out.Runs, SweepRun{K: k, Seed: int(o.FirstSeed) + s, Fold: s % out.Folds})
		}
	}
	if o.Journal != nil {
		for i := range out.Runs {
			if err := resumeRun(o.Journal, j0, tr, &out.Runs[i]); err != nil {
				return nil, err
			}
		}
	}
	// ctx is canceled by the parent or by a run that failed for its input (inputErr).
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var inputErr error
	usageBefore, usageErr := r.Usage(5 * time.Second)
	start := time.Now()
	var mu sync.Mutex // OnRun's and Record's calls, and done
	done := 0
	tell := func(e SweepEvent) {
		if o.OnRun == nil {
			return
		}
		if !e.Retry {
			done++
		}
		e.Done, e.Total, e.Elapsed = done, len(out.Runs), time.Since(start)
		o.OnRun(e)
	}
	for _, run := range out.Runs {
		if run.Resumed {
			tell(SweepEvent{K: run.K, Seed: run.Seed, Fold: run.Fold, Resumed: true, Result: run.Result})
		}
	}
	// ended records a run that ended with a result and tells OnRun of it (not of a run the
	// cancel cut short); a retry is only told.
	ended := func(run *SweepRun, e SweepEvent) {
		mu.Lock()
		defer mu.Unlock()
		if !e.Retry && usererr.Is(e.Err) && ctx.Err() == nil {
			inputErr = fmt.Errorf("sweep: K=%d seed %d fold %d failed, and every run would: %w", run.K, run.Seed, run.Fold, e.Err)
			cancel()
			return
		}
		if !e.Retry && run.Err == nil && o.Journal != nil && run.Result.StopReason != kernels.StopCanceled {
			e.JournalErr = o.Journal.Record(run.K, run.Seed, run.Fold, run.Result)
		}
		if e.Retry || ctx.Err() == nil {
			tell(e)
		}
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(p, len(out.Runs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				run := &out.Runs[i]
				run.Result, run.Err = r.sweepRun(ctx, j0, tr, run.K, run.Seed, run.Fold, func(err error) {
					ended(run, SweepEvent{K: run.K, Seed: run.Seed, Fold: run.Fold, Retry: true, Err: err})
				})
				ended(run, SweepEvent{K: run.K, Seed: run.Seed, Fold: run.Fold, Result: run.Result, Err: run.Err})
			}
		}()
	}
feed:
	for i := range out.Runs {
		if out.Runs[i].Resumed {
			continue
		}
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := parent.Err(); err != nil {
		return nil, err
	}
	if inputErr != nil {
		return nil, inputErr
	}
	out.Seconds = time.Since(start).Seconds()
	out.Builds = sweepBuilds(o.Journal, out.Runs)
	if usageErr == nil {
		if after, err := r.Usage(5 * time.Second); err == nil {
			b := after.Since(usageBefore, out.Seconds)
			out.Busy = &b
			out.BusyMissing = slices.Compact(slices.Sorted(slices.Values(slices.Concat(usageBefore.Missing, after.Missing))))
		}
	}
	var runs []sweep.Run
	for _, run := range out.Runs {
		if run.Err == nil {
			runs = append(runs, sweepRunOf(run))
		}
	}
	if len(runs) == 0 {
		first := out.Runs[0]
		return nil, fmt.Errorf("sweep: every job failed; the first: K=%d seed %d: %w", first.K, first.Seed, first.Err)
	}
	var err error
	if out.Summary, err = sweep.Summarize(runs); err != nil {
		return nil, err
	}
	out.Suggestion = sweep.Suggest(out.Summary)
	out.Suggested, out.Rule = out.Suggestion.K, out.Suggestion.Rule
	return out, nil
}

// ResumedRuns counts the runs whose results came from the sweep's journal (SweepRun.Resumed).
func (s *SweepResult) ResumedRuns() int {
	n := 0
	for _, r := range s.Runs {
		if r.Resumed {
			n++
		}
	}
	return n
}

// sweepTransformOf is what the runs of a sweep of j0 fit: o's transform, or the job's own.
func sweepTransformOf(j0 *Job, o SweepOptions) SweepTransform {
	if o.Transform.On() {
		return o.Transform
	}
	return j0.Spec.Transform
}

// sweepSpec is the spec of the sweep's run of rank k, seed and fold: j0's with that rank and
// seed, test seed j0's + fold, and the sweep's transform tr.
func sweepSpec(j0 *Job, tr SweepTransform, k, seed, fold int) Spec {
	s := *j0.Spec
	s.Rank, s.Seed, s.TestSeed, s.Transform = k, uint64(seed), s.TestSeed+uint64(fold), tr
	return s
}

// resumeRun asks the journal for run and, when it recorded it, makes its result the run's
// (Resumed), after checking that it is a result of that run of j0: its rank, its basis's
// length and, when this process read the input, its features.
func resumeRun(jn SweepJournal, j0 *Job, tr SweepTransform, run *SweepRun) error {
	res, err := jn.Done(run.K, run.Seed, run.Fold)
	if err != nil || res == nil {
		return err
	}
	if res.K != run.K || res.M < 1 || len(res.B) != res.M*res.K || j0.Features > 0 && res.M != j0.Features {
		return fmt.Errorf("sweep journal: its run of K=%d seed %d fold %d has K=%d and a %d-value basis of %d features, not the job's (%d features)",
			run.K, run.Seed, run.Fold, res.K, len(res.B), res.M, j0.Features)
	}
	spec := sweepSpec(j0, tr, run.K, run.Seed, run.Fold)
	res.Job, res.C = &Job{Spec: &spec, Target: j0.Target}, nil
	run.Result, run.Resumed = res, true
	return nil
}

// sweepRun runs the sweep's job of rank k, seed and fold (test seed j0's + fold) on the input
// read through tr (the job's transform, Spec.Transform), again when it failed for a reason that is not its input's; retried tells
// of each retry. The result it returns has no coefficients (C nil).
func (r *Runner) sweepRun(ctx context.Context, j0 *Job, tr SweepTransform, k, seed, fold int, retried func(error)) (*Result, error) {
	j, err := j0.Derive(func(s *Spec) { *s = sweepSpec(j0, tr, k, seed, fold) })
	if err != nil {
		return nil, err
	}
	defer j.Close()
	for attempt := 1; ; attempt++ {
		res, err := r.Run(ctx, j, Options{})
		if err == nil {
			// The sweep keeps a run's basis, errors and history, never its coefficients:
			// C is K x samples, and a sweep's runs would hold them all (260 runs over
			// 200,000 samples: GBs) for nothing it summarizes or saves.
			res.C = nil
			return res, nil
		}
		if usererr.Is(err) || ctx.Err() != nil || attempt == SweepAttempts {
			return nil, err
		}
		retried(err)
	}
}

// sweepRunOf is what package sweep summarizes of a run.
func sweepRunOf(run SweepRun) sweep.Run {
	res := run.Result
	out := sweep.Run{K: run.K, Seed: run.Seed, Fold: run.Fold, M: res.M, Basis: res.B, TrainRelErr2: res.RelErr2(), TestRelErr2: math.NaN(),
		Iterations: res.Iterations, Seconds: res.Seconds, Capped: run.Capped()}
	if res.TestCount > 0 {
		out.TestRelErr2 = res.TestRelErr2()
	}
	return out
}

// sweepBuilds are the builds of a sweep's runs (SweepResult.Builds): for resumed runs, the
// ones jn names when it can (FileSweepJournal.Builds), then this process's when it ran any.
func sweepBuilds(jn SweepJournal, runs []SweepRun) []string {
	var builds []string
	if slices.ContainsFunc(runs, func(r SweepRun) bool { return r.Resumed }) {
		if b, ok := jn.(interface{ Builds() ([]string, string) }); ok {
			builds, _ = b.Builds()
		}
	}
	this := buildinfo.ID()
	if slices.ContainsFunc(runs, func(r SweepRun) bool { return !r.Resumed }) && !slices.Contains(builds, this) {
		builds = append(builds, this)
	}
	return builds
}
