package rankbank

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sync"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/sweep"
)

// The count-loss study: which fit and which held-out error make a count matrix's planted
// rank findable. The bank's sweeps fit the raw counts in the Frobenius loss and compare ranks
// by the held-out squared error; on negative-binomial and sparse counts that error is lower
// at a smaller rank than the planted one. CountStudy fits each case's runs in this process
// (as Runner.Sweep does: one run per rank and seed, seed s holding out fold s mod Folds),
// keeps each run's factors, and computes from them and the held-out set (kernels.HeldOut, a
// pure function of the test seed, the sample and the feature) several held-out errors of the
// same runs; each error then goes through sweep.Summarize and the bank's rules as the test
// error does today.

// Fit is how a study fits a case's matrix.
type Fit string

// The fits.
const (
	// FitRaw fits the counts in the Frobenius loss (DID): what `didnmf sweep` does today.
	FitRaw Fit = "raw"
	// FitSqrt fits √X in the Frobenius loss (DID), a variance-stabilizing transform of
	// counts (zeros stay zeros: a sparse input stays sparse); the model's count is its square.
	// `didnmf sweep --transform sqrt` (didnmf.TransformSqrt) is this fit, read by MetricSSE.
	FitSqrt Fit = "sqrt"
	// FitAnscombe fits Anscombe's 2√(X+3/8) in the Frobenius loss (DID): the exact
	// variance stabilizer of Poisson counts, but every zero becomes 1.22 (dense).
	FitAnscombe Fit = "anscombe"
	// FitKL fits the counts in the generalized Kullback-Leibler divergence (MU): Poisson NMF.
	FitKL Fit = "kl"
)

// Metric names a held-out error the study computes.
type Metric string

// The held-out errors, each a mean over the held-out entries x of the model's count μ
// (max(Y, 0) for FitRaw and FitKL, Y² for FitSqrt, (Y/2)² - 3/8 clipped at 0 for FitAnscombe,
// Y the fitted value).
const (
	// MetricNative is the squared error on the fitted scale: (t(x) - Y)², t the fit's
	// transform. It is what the kernels report as the test error for a Frobenius fit.
	MetricNative Metric = "native"
	// MetricSSE is the squared error of the counts, (x - μ)².
	MetricSSE Metric = "sse"
	// MetricSqrt is the squared error on the square-root scale, (√x - √μ)².
	MetricSqrt Metric = "sqrt-sse"
	// MetricDeviance is the Poisson deviance 2(x log(x/μ) - x + μ), μ at least the floor.
	MetricDeviance Metric = "poisson-deviance"
	// MetricPearson is Pearson's chi-square (x - μ)²/μ, μ at least the floor.
	MetricPearson Metric = "pearson"
)

// Metrics are the study's held-out errors, in the order it reports them.
var Metrics = []Metric{MetricNative, MetricSSE, MetricSqrt, MetricDeviance, MetricPearson}

// MeanFloor is the floor on the model's mean count in the deviance and Pearson's chi-square,
// as a share of the matrix's mean count: a model count of 0 where a count was observed would
// make both infinite.
const MeanFloor = 0.01

// transform is the fit's transform t of a count.
func (f Fit) transform(x float64) float64 {
	switch f {
	case FitSqrt:
		return math.Sqrt(x)
	case FitAnscombe:
		return 2 * math.Sqrt(x+3.0/8)
	}
	return x
}

// mean is the model's count for a fitted value y.
func (f Fit) mean(y float64) float64 {
	switch f {
	case FitSqrt:
		y = max(y, 0)
		return y * y
	case FitAnscombe:
		return max(0, y*y/4-3.0/8)
	}
	return max(y, 0)
}

// StudyRun is one fitted run of a study: its rank, seed and fold, and its held-out errors by
// metric.
type StudyRun struct {
	K, Seed, Fold int
	Capped        bool
	Iterations    int
	Errors        map[Metric]float64
	// Basis is the run's basis (features x K column-major), for sweep.Summarize.
	Basis []float64
}

// StudyOutcome is one case fitted one way: its runs, and per metric the summaries of
// sweep.Summarize over that metric as the test error.
type StudyOutcome struct {
	Case       Case
	Fit        Fit
	Runs       []StudyRun
	Summary    map[Metric][]sweep.RankSummary
	CPUSeconds float64
}

// Study fits case c the way fit says at every rank of c.Ranks with o's seeds, folds, test
// fraction and stop rule, o.Parallel runs at once, and computes every Metric of every run.
func Study(ctx context.Context, c Case, fit Fit, dir string, o Options) (*StudyOutcome, error) {
	x, err := c.Generate()
	if err != nil {
		return nil, err
	}
	n, m := c.Samples, c.Features
	tx := &Matrix{X: make([]float64, len(x.X))}
	var mean float64
	for i, v := range x.X {
		tx.X[i] = fit.transform(v)
		mean += v
	}
	mean /= float64(len(x.X))
	floor := MeanFloor * mean
	tc := c
	if fit == FitAnscombe {
		tc.Sparse = false // every zero is 1.22: dense
	}
	tmp, err := os.MkdirTemp(dir, "study")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	path, err := tc.Write(tmp, tx)
	if err != nil {
		return nil, err
	}
	algo := didnmf.DID
	if fit == FitKL {
		algo = didnmf.MU
	}
	spec := didnmf.NewSpec([]string{path}, algo, c.Ranks[len(c.Ranks)-1], 1)
	if fit == FitKL {
		spec.Loss = kernels.LossKL
	}
	spec.TestFraction = o.TestFraction
	spec.Stop.MaxIter, spec.Stop.Tol, spec.Stop.StallTol = o.MaxIter, o.Tol, o.StallTol
	t := didnmf.Local(1)
	j0, err := didnmf.Open(spec, t)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", c.Name(), fit, err)
	}
	defer j0.Close()
	r, err := didnmf.NewRunner(t)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	type job struct{ k, s int }
	var jobs []job
	for _, k := range c.Ranks {
		for s := range o.Seeds {
			jobs = append(jobs, job{k, s})
		}
	}
	out := &StudyOutcome{Case: c, Fit: fit, Runs: make([]StudyRun, len(jobs)), Summary: map[Metric][]sweep.RankSummary{}}
	folds := max(o.Folds, 1)
	next := make(chan int)
	errs := make(chan error, len(jobs))
	var wg sync.WaitGroup
	for range max(o.Parallel, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				jb := jobs[i]
				fold := jb.s % folds
				j, err := j0.Derive(func(s *didnmf.Spec) { s.Rank, s.Seed, s.TestSeed = jb.k, uint64(1+jb.s), s.TestSeed+uint64(fold) })
				if err != nil {
					errs <- err
					continue
				}
				res, err := r.Run(ctx, j, didnmf.Options{})
				testSeed := j.Spec.TestSeed
				j.Close()
				if err != nil {
					errs <- fmt.Errorf("%s (%s) K=%d seed %d: %w", c.Name(), fit, jb.k, 1+jb.s, err)
					continue
				}
				run := StudyRun{K: jb.k, Seed: 1 + jb.s, Fold: fold, Iterations: res.Iterations, Basis: res.B,
					Capped: res.StopReason == kernels.StopMaxIter || res.StopReason == kernels.StopTimeLimit}
				run.Errors = heldOutErrors(x.X, n, m, res.B, res.C, jb.k, testSeed, o.TestFraction, fit, floor)
				out.Runs[i] = run
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	for _, mt := range Metrics {
		var runs []sweep.Run
		for _, run := range out.Runs {
			runs = append(runs, sweep.Run{K: run.K, Seed: run.Seed, Fold: run.Fold, M: m, Basis: run.Basis, TrainRelErr2: 0,
				TestRelErr2: run.Errors[mt], Iterations: run.Iterations, Capped: run.Capped})
		}
		s, err := sweep.Summarize(runs)
		if err != nil {
			return nil, fmt.Errorf("%s (%s, %s): %w", c.Name(), fit, mt, err)
		}
		for i := range s { // the bases are not scored
			s[i].Stability.Basis, s[i].Stability.Labels = nil, nil
		}
		out.Summary[mt] = s
	}
	for i := range out.Runs {
		out.Runs[i].Basis = nil
	}
	return out, nil
}

// heldOutErrors is every Metric of a run over the held-out entries of test seed and
// fraction: x is the counts (samples x features row-major), b features x k and c k x
// samples, both column-major, fitted the way fit says.
func heldOutErrors(x []float64, n, m int, b, c []float64, k int, testSeed uint64, frac float64, fit Fit, floor float64) map[Metric]float64 {
	var sum [5]float64
	count := 0
	for j := range n {
		cj := c[j*k : (j+1)*k]
		for i := range m {
			if !kernels.HeldOut(testSeed, j, i, frac) {
				continue
			}
			var y float64
			for p, cv := range cj {
				y += b[p*m+i] * cv
			}
			xv := x[j*m+i]
			mu := fit.mean(y)
			d := fit.transform(xv) - y
			sum[0] += d * d
			sum[1] += (xv - mu) * (xv - mu)
			s := math.Sqrt(xv) - math.Sqrt(mu)
			sum[2] += s * s
			mf := max(mu, floor)
			dev := mf - xv
			if xv > 0 {
				dev += xv * math.Log(xv/mf)
			}
			sum[3] += 2 * dev
			sum[4] += (xv - mf) * (xv - mf) / mf
			count++
		}
	}
	out := map[Metric]float64{}
	for i, mt := range Metrics {
		out[mt] = sum[i] / float64(max(count, 1))
	}
	return out
}

// StudyScore is a rule's score on the study's outcomes of one fit and one metric.
type StudyScore struct {
	Fit    Fit
	Metric Metric
	Score
}

// ScoreStudy scores rule on every (fit, metric) of the outcomes, in the order the fits first
// appear and Metrics' order.
func ScoreStudy(outs []*StudyOutcome, rule Rule) []StudyScore {
	var fits []Fit
	for _, o := range outs {
		if !slices.Contains(fits, o.Fit) {
			fits = append(fits, o.Fit)
		}
	}
	var scores []StudyScore
	for _, f := range fits {
		for _, mt := range Metrics {
			var as []*Outcome
			for _, o := range outs {
				if o.Fit == f {
					as = append(as, &Outcome{Case: o.Case, Summary: o.Summary[mt]})
				}
			}
			sc := Scores(as, []Rule{rule})[0]
			scores = append(scores, StudyScore{Fit: f, Metric: mt, Score: sc})
		}
	}
	return scores
}

// WriteStudyTable writes the scores as a Markdown table: per (fit, held-out error), exact,
// within one, cannot tell (visible: wrong; below the noise: right), and the exact share by
// family and by visibility.
func WriteStudyTable(w io.Writer, scores []StudyScore) {
	leads := make([][]string, len(scores))
	plain := make([]Score, len(scores))
	for i, s := range scores {
		leads[i], plain[i] = []string{fmt.Sprint(s.Fit), fmt.Sprint(s.Metric)}, s.Score
	}
	writeScores(w, []string{"fit", "held-out error"}, leads, plain)
}
