package sweep

import (
	"cmp"
	"errors"
	"math"
	"slices"

	"github.com/didnmf/didnmf/usererr"
)

// ConsensusSeed is the seed Summarize gives Consensus, the same for every rank, so that a
// summary depends on the runs only.
const ConsensusSeed uint64 = 1

// Run is one factorization of a sweep: its rank, its seed, its fold, its basis and its
// errors.
type Run struct {
	// K is the rank, Seed the seed of the run's initialization.
	K, Seed int
	// Fold numbers the run's held-out set (0, 1, ...): runs of one fold hold out the same
	// entries. A sweep without a test set, or with one held-out set, has every run in fold 0.
	Fold int
	// M is the number of features (the rows of Basis), the same for every run of a sweep.
	M int
	// Basis is the run's basis, M x K column-major: column p (component p) is
	// Basis[p*M:(p+1)*M]. Its scale does not matter: Consensus scales each column to unit
	// norm.
	Basis []float64
	// TrainRelErr2 is the relative error ||X-BC||²/||X||² on the entries the run was fitted
	// to; TestRelErr2 is the same on the held-out entries, NaN when there is no test set.
	TrainRelErr2, TestRelErr2 float64
	// Iterations and Seconds are what the run took.
	Iterations int
	Seconds    float64
	// Capped is set when the run stopped at its iteration cap or time limit rather than by
	// converging: its errors are not those of a fit, and a comparison that rests on them is
	// unreliable (Suggestion.Unreliable).
	Capped bool
}

// ErrorStats sums up one error over the seeds of a rank.
type ErrorStats struct {
	// N is the number of runs with a value (for the test error, those with a test set);
	// the rest are NaN when it is 0.
	N int
	// Mean, Min and Max are over those runs.
	Mean, Min, Max float64
	// SE is the standard error of Mean: the sample standard deviation (with N-1) over √N.
	// It is NaN when N < 2. For the test error, N, Mean and SE are over the folds (see
	// RankSummary.FoldTest), never over the seeds of one held-out set, whose spread is the
	// optimizer's and not the test error's.
	SE float64
}

// RankSummary is what the runs of one rank say: their errors, what they took, and how much
// their bases agree.
type RankSummary struct {
	// K is the rank; Runs the number of runs, and Seeds their seeds, in increasing order.
	K     int
	Runs  int
	Seeds []int
	// Train is the train error (TrainRelErr2) over the runs.
	Train ErrorStats
	// Folds are the folds of the runs with a test error, in increasing order, and FoldTest
	// the test error of each fold's fit, in the same order; both are empty without a test
	// set. A fold's fit is its run with the lowest train error (the lowest seed of a tie), as
	// one keeps the best of several starts: with one seed per fold (the default), its run.
	// A fold whose fit is a PoorFit is not among them.
	Folds    []int
	FoldTest []float64
	// PoorFits are the folds left out of Folds because their fit is a poor local optimum
	// (see PoorFit), in increasing order of fold.
	PoorFits []PoorFit
	// Test is the test error over the folds: Test.N is the number of folds (0 without a
	// test set), Mean the mean of FoldTest and SE its standard error (NaN with one fold);
	// Min and Max are over the runs.
	Test ErrorStats
	// Capped counts the runs that hit their iteration cap or time limit (Run.Capped).
	Capped int
	// MeanIterations and MeanSeconds are the means over the runs.
	MeanIterations, MeanSeconds float64
	// Stability is the consensus of the runs' bases (Consensus, with the bases in the order
	// of Seeds and ConsensusSeed). With one run it is not defined: Silhouette and Agreement
	// are NaN, and Basis is the run's basis with unit-norm columns.
	Stability Stability
}

// Summarize groups the runs by rank and sums up each rank: one RankSummary per rank, in
// increasing order of K. The order of runs does not matter: each rank's runs are taken in
// the order of their seeds, then folds. The test error's spread is over folds: each fold's
// fit is its best run (of the lowest train error), a fold whose fit is a PoorFit is left
// out, and the standard error is that of the mean over the folds. Errors wrap usererr.ErrUser: no runs; a K or M below 1; a negative fold;
// runs of different M; two runs of the same K, Seed and Fold; a basis that is not M x K or holds a NaN
// or an infinity; a train error that is not a finite number >= 0, a test error that is
// negative or infinite (NaN is "no test set"); negative Iterations; Seconds not a finite
// number >= 0.
func Summarize(runs []Run) ([]RankSummary, error) {
	if len(runs) == 0 {
		return nil, inputErrorf("summarize: no runs")
	}
	m := runs[0].M
	for i, r := range runs {
		switch {
		case r.K < 1:
			return nil, inputErrorf("summarize: run %d (seed %d): K must be >= 1, got %d", i, r.Seed, r.K)
		case r.Fold < 0:
			return nil, inputErrorf("summarize: run %d (K=%d, seed %d): fold %d, want >= 0", i, r.K, r.Seed, r.Fold)
		case r.M < 1:
			return nil, inputErrorf("summarize: run %d (K=%d, seed %d): M must be >= 1, got %d", i, r.K, r.Seed, r.M)
		case r.M != m:
			return nil, inputErrorf("summarize: run %d (K=%d, seed %d) has M=%d, run 0 M=%d: runs of one sweep share their features", i, r.K, r.Seed, r.M, m)
		case r.M > math.MaxInt/r.K || len(r.Basis) != r.M*r.K:
			return nil, inputErrorf("summarize: run %d (K=%d, seed %d): the basis has %d values, want M*K = %d*%d", i, r.K, r.Seed, len(r.Basis), r.M, r.K)
		case !(r.TrainRelErr2 >= 0) || math.IsInf(r.TrainRelErr2, 0):
			return nil, inputErrorf("summarize: run %d (K=%d, seed %d): train error %v, want a finite number >= 0", i, r.K, r.Seed, r.TrainRelErr2)
		case r.TestRelErr2 < 0 || math.IsInf(r.TestRelErr2, 0):
			return nil, inputErrorf("summarize: run %d (K=%d, seed %d): test error %v, want a finite number >= 0 or NaN (no test set)", i, r.K, r.Seed, r.TestRelErr2)
		case r.Iterations < 0:
			return nil, inputErrorf("summarize: run %d (K=%d, seed %d): %d iterations", i, r.K, r.Seed, r.Iterations)
		case !(r.Seconds >= 0) || math.IsInf(r.Seconds, 0):
			return nil, inputErrorf("summarize: run %d (K=%d, seed %d): seconds %v, want a finite number >= 0", i, r.K, r.Seed, r.Seconds)
		}
		for j, v := range r.Basis {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, inputErrorf("summarize: run %d (K=%d, seed %d): basis value %v at feature %d of column %d", i, r.K, r.Seed, v, j%r.M, j/r.M)
			}
		}
	}
	sorted := make([]*Run, len(runs))
	for i := range runs {
		sorted[i] = &runs[i]
	}
	slices.SortStableFunc(sorted, func(a, b *Run) int {
		return cmp.Or(cmp.Compare(a.K, b.K), cmp.Compare(a.Seed, b.Seed), cmp.Compare(a.Fold, b.Fold))
	})
	for i := 1; i < len(sorted); i++ {
		if a, b := sorted[i-1], sorted[i]; a.K == b.K && a.Seed == b.Seed && a.Fold == b.Fold {
			return nil, inputErrorf("summarize: two runs of K=%d, seed %d and fold %d", a.K, a.Seed, a.Fold)
		}
	}
	var out []RankSummary
	for lo := 0; lo < len(sorted); {
		hi := lo
		for hi < len(sorted) && sorted[hi].K == sorted[lo].K {
			hi++
		}
		group := sorted[lo:hi]
		lo = hi
		k := group[0].K
		rs := RankSummary{K: k, Runs: len(group)}
		train, test := make([]float64, 0, len(group)), make([]float64, 0, len(group))
		bases := make([][]float64, len(group))
		var iters, secs float64
		for i, r := range group {
			if i == 0 || r.Seed != group[i-1].Seed {
				rs.Seeds = append(rs.Seeds, r.Seed)
			}
			train = append(train, r.TrainRelErr2)
			if !math.IsNaN(r.TestRelErr2) {
				test = append(test, r.TestRelErr2)
			}
			bases[i] = r.Basis
			iters += float64(r.Iterations)
			secs += r.Seconds
			if r.Capped {
				rs.Capped++
			}
		}
		rs.Train = errorStats(train)
		rs.Folds, rs.FoldTest, rs.PoorFits = foldFits(group)
		rs.Test = errorStats(rs.FoldTest)
		if len(test) > 0 {
			rs.Test.Min, rs.Test.Max = slices.Min(test), slices.Max(test)
		}
		rs.MeanIterations, rs.MeanSeconds = iters/float64(len(group)), secs/float64(len(group))
		st, err := Consensus(bases, m, k, ConsensusSeed)
		if err != nil {
			var ue *usererr.Error
			if !errors.As(err, &ue) {
				return nil, err
			}
			inner := *ue
			inner.Where = "" // "sweep: " once
			return nil, inputErrorf("summarize: K=%d: %s", k, inner.Error())
		}
		rs.Stability = st
		out = append(out, rs)
	}
	return out, nil
}

// PoorFitSpread and PoorFitGap decide which folds' fits are poor local optima (PoorFit).
//
// Every fold holds out its own entries, so the folds' train errors at one rank differ a
// little even when every fit is as good as the others: by 0.2-3% (max over min) on the
// planted-rank bank's 100 x 300 to 600 x 200 matrices, by about 0.1% on a 20,000 x 400
// one. A start that falls into a worse optimum stands out from that spread: in a fresh-eye
// review, one of five folds of K=5 on a planted-5 matrix of 20,000 x 400 fitted to 0.2950
// against 0.2813-0.2816 (135 times the folds' median absolute deviation, 4.8% above their
// median), and its test error alone turned the suggestion into "cannot tell". A fold's fit
// is poor when its train error is above the rank's median (over the folds' fits) by more
// than PoorFitSpread times the median absolute deviation and by more than PoorFitGap of the
// median: the first keeps the folds' own spread (10 median absolute deviations are about 6.7
// standard deviations of a normal spread), the second keeps a difference too small to
// matter: on the 200,000 x 20,000 counts of issue 34's sweep (planted 15, ten folds a
// rank), the worst fits at K=8 and K=11 stood 15 and 19 deviations above their medians,
// but by 0.3% and 0.2%; at K >= 12 every fit was within 0.04% and 5.2 deviations. Fewer than half the folds can be poor, as the median is over them all;
// with fewer than three folds none is judged.
const (
	PoorFitSpread = 10
	PoorFitGap    = 0.01
)

// PoorFit is a fold whose fit at one rank fitted the training entries far worse than the
// rank's other folds' fits: a poor local optimum of that start (see PoorFitSpread). Its
// test error is that of a worse model than the rank's, and would pass for the held-out
// set's difficulty in the comparison of ranks, so Summarize leaves the fold out of the
// rank's Folds and FoldTest (the other ranks keep it); more seeds per fold (a sweep's
// Folds below its Seeds) let each fold keep its best start instead.
type PoorFit struct {
	// Fold is the fold; Seed the seed of its fit.
	Fold, Seed int
	// Train is the fit's train error, Median the median over the rank's folds' fits
	// (this one included).
	Train, Median float64
	// Capped is set when the fit stopped at its iteration cap or time limit (Run.Capped):
	// not an optimum but a fit still on its way, left out all the same, as its test error
	// is not a fitted model's either.
	Capped bool
}

// foldFits is the folds of the runs with a test error, increasing, each one's fit's test
// error (its run of the lowest train error, group being in seed order), and the folds left
// out as poor fits.
func foldFits(group []*Run) (folds []int, tests []float64, poor []PoorFit) {
	var fits []*Run
	for _, f := range foldsOf(group) {
		var best *Run
		for _, r := range group {
			if r.Fold == f && !math.IsNaN(r.TestRelErr2) && (best == nil || r.TrainRelErr2 < best.TrainRelErr2) {
				best = r
			}
		}
		fits = append(fits, best)
	}
	train := make([]float64, len(fits))
	for i, r := range fits {
		train[i] = r.TrainRelErr2
	}
	median, mad := medianAbsDev(train)
	for _, r := range fits {
		if len(fits) >= 3 && r.TrainRelErr2-median > PoorFitSpread*mad && r.TrainRelErr2-median > PoorFitGap*median {
			poor = append(poor, PoorFit{Fold: r.Fold, Seed: r.Seed, Train: r.TrainRelErr2, Median: median, Capped: r.Capped})
			continue
		}
		folds, tests = append(folds, r.Fold), append(tests, r.TestRelErr2)
	}
	return folds, tests, poor
}

// foldsOf is the folds of the runs with a test error, increasing.
func foldsOf(group []*Run) []int {
	var folds []int
	for _, r := range group {
		if !math.IsNaN(r.TestRelErr2) {
			folds = append(folds, r.Fold)
		}
	}
	slices.Sort(folds)
	return slices.Compact(folds)
}

// medianAbsDev is the median of v and the median of the absolute deviations from it (NaN
// and NaN for none).
func medianAbsDev(v []float64) (median, mad float64) {
	if len(v) == 0 {
		return math.NaN(), math.NaN()
	}
	median = medianOf(v)
	dev := make([]float64, len(v))
	for i, e := range v {
		dev[i] = math.Abs(e - median)
	}
	return median, medianOf(dev)
}

// medianOf is the median of v (not empty), v left as it was.
func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return sortedMedian(s)
}

// sortedMedian is the median of sorted values (not empty): the mean of the middle two of an
// even number.
func sortedMedian(s []float64) float64 {
	h := len(s) / 2
	if len(s)%2 == 1 {
		return s[h]
	}
	return (s[h-1] + s[h]) / 2
}

// errorStats sums up the values v.
func errorStats(v []float64) ErrorStats {
	nan := math.NaN()
	st := ErrorStats{N: len(v), Mean: nan, Min: nan, Max: nan, SE: nan}
	if len(v) == 0 {
		return st
	}
	st.Min, st.Max = v[0], v[0]
	var s float64
	for _, e := range v {
		s += e
		st.Min, st.Max = min(st.Min, e), max(st.Max, e)
	}
	st.Mean = s / float64(len(v))
	if len(v) >= 2 {
		var ss float64
		for _, e := range v {
			ss += (e - st.Mean) * (e - st.Mean)
		}
		st.SE = math.Sqrt(ss/float64(len(v)-1)) / math.Sqrt(float64(len(v)))
	}
	return st
}
