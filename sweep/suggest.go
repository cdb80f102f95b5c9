package sweep

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// StabilityMargin is the stability rule's margin: Suggest, without a test set, takes the
// largest K whose silhouette is at least the best silhouette minus StabilityMargin.
const StabilityMargin = 0.05

// Suggestion is the rank Suggest suggests and why, in words a report prints.
type Suggestion struct {
	// K is the suggested rank; 0 when CannotTell (or there were no ranks).
	K int
	// Rule says how K was chosen (or why none was), with the numbers it used.
	Rule string
	// Name names the rule used: RuleCV, RuleStability or RuleElbow ("" for no ranks, or one:
	// nothing to compare).
	Name string
	// CannotTell is set when the runs do not show which rank the data have: with a test
	// set, no rank fits the held-out entries better than the smallest tried by more than the
	// folds' spread (the signal is below the noise, or the rank is below the smallest
	// tried). Reason says which, in words.
	CannotTell bool
	Reason     string
	// Unreliable, when not empty, says which runs the comparison rests on stopped at a cap
	// (Run.Capped) and so why K may be wrong.
	Unreliable string
}

// The rules' names (Suggestion.Name).
const (
	RuleCV        = "cv-paired-one-se"
	RuleStability = "stability"
	RuleElbow     = "elbow"
)

// Suggest suggests a rank from the summaries and says why, in words a report can print.
// It uses the first of three rules the summaries allow:
//
//  1. With test errors (some rank with Test.N > 0), RuleCV (see below).
//  2. Without test errors but with stability (some rank with a Silhouette, which needs two
//     seeds or more and K >= 2): the largest K whose silhouette is within StabilityMargin
//     (0.05) of the best. This is how cNMF's users read its stability plot: the training
//     error falls with every K, so one takes the most components that the seeds still
//     reproduce. A silhouette near 1 means every seed finds the same components. The margin
//     is absolute, as the silhouette's scale is (from -1 to 1), and small: one component of
//     K that the seeds do not agree on lowers the mean silhouette by about (1-s)/K, s the
//     silhouette of its cluster, which on data of 4 planted components puts K=5 about 0.1
//     below K=4. Beyond K of about 10 such a component can pass unnoticed: check the figure
//     or ClusterSilhouettes. When no silhouette is above 0 no rank is stable, and the third
//     rule is used.
//  3. Otherwise (one seed and no test set), the elbow: the K where the mean train error
//     bends most against K, where its slope changes most (the slope after K minus the slope
//     before it: the second difference when the ranks are evenly spaced). With one or two
//     ranks, or a curve that never bends upwards, the smallest K, said so.
//
// RuleCV, the cross-validated rule, is a one-standard-error rule on paired differences
// over folds. Every fold holds out its own entries, the same at every rank, so the test
// errors of two ranks on one fold differ by what the ranks do and not by which entries
// were held out; the rule compares ranks fold by fold. Let B be the rank of the lowest
// mean test error. For each smaller rank K, d_f is K's test error on fold f minus B's
// (each the test error of the fold's fit: the best of its seeds; a fold whose fit is a
// poor local optimum, PoorFit, is left out at that rank), and the rule takes the smallest
// K whose mean d is at most its standard error over the folds: a larger rank does not fit
// held-out data measurably better. When that K is the smallest rank tried, Suggest cannot tell
// (CannotTell, K = 0): no rank fits the held-out entries better than the smallest by more
// than the folds' spread, which is what a signal below the noise looks like (and also a
// rank below the smallest tried). With one fold there is no spread over folds: the K of the
// lowest mean test error, said so. Runs that stopped at a cap at the ranks the rule compares
// (up to the lowest test error's) are named in Unreliable: their test errors are not those
// of fitted models. Capped runs above that rank are named in the rule only: a rank above the
// data's overfits the held-out entries more as its fit converges (on the planted-rank bank
// their test errors rose from 1000 to 5000 iterations), so converging would not have made
// it the lowest. (Masked fits above the data's rank converge slowly: on the bank they are
// most of the runs that hit the cap.)
//
// Why this rule (the evidence is in the package documentation, "Why this rule"): on a bank
// of planted-rank matrices swept with the CLI's defaults, every rule that reads the test
// errors found nearly the same ranks, as the masked fits' held-out error rises steeply past
// the data's rank; the paired one-SE rule found the planted rank wherever the noise was
// Gaussian or uniform, and said "cannot tell" on every matrix below the noise, where cNMF's
// stability rule never did. It ties with RcppML's minimum; it is shipped for its "cannot
// tell", which rests on the folds' spread. Where it misses (weak programs in count data) it
// errs low or cannot tell, never high.
//
// The summaries need not be sorted; Suggest returns K = 0 and "no ranks" for none, and
// cannot tell (K = 0) for one rank: nothing was compared.
func Suggest(summaries []RankSummary) Suggestion {
	if len(summaries) == 0 {
		return Suggestion{Rule: "no ranks were summarized"}
	}
	s := slices.Clone(summaries)
	slices.SortStableFunc(s, func(a, b RankSummary) int { return cmp.Compare(a.K, b.K) })
	if len(s) == 1 {
		// A rank is chosen by comparing ranks: one alone is no evidence for itself.
		out := Suggestion{CannotTell: true, Reason: fmt.Sprintf("cannot tell: one rank was tried (K=%d), and a rank is chosen by "+
			"comparing ranks: sweep a range of ranks around it", s[0].K)}
		out.Rule = out.Reason
		return out
	}
	if sg, ok := suggestByTest(s); ok {
		return sg
	}
	var out Suggestion
	k, rule, ok := suggestByStability(s)
	if ok {
		out.K, out.Rule, out.Name = k, rule, RuleStability
		out.Unreliable = unreliable(s, s, cappedBases)
		return out
	}
	ek, erule := suggestByElbow(s)
	out.K, out.Name, out.Unreliable = ek, RuleElbow, unreliable(s, s, cappedErrors)
	switch {
	case rule != "": // why stability was not used
		out.Rule = erule + "; " + rule
	case slices.ContainsFunc(s, func(r RankSummary) bool { return r.Runs > 1 }):
		out.Rule = erule + "; no test set, and no rank with a defined stability"
	default:
		out.Rule = erule + "; no test set, and one seed per rank: no stability"
	}
	return out
}

// What a rule reads of the runs, for unreliable: the errors (the cross-validated rule and the
// elbow), or the bases (the stability rule).
var (
	cappedErrors = readOf{"errors", "so the comparison of ranks may be wrong"}
	cappedBases  = readOf{"bases", "and the stability rule compares how the seeds' bases agree, so the ranks' stabilities may be misjudged"}
)

// readOf is what a rule reads of a run, and why a capped run's misleads it.
type readOf struct{ what, why string }

// unreliable names the capped runs of the ranks rest, of all the ranks s ("" for none), and
// says why they matter to a rule that reads read of them.
//
// The stability rule reads no error, but it does rest on the capped runs: their bases. On
// synthetic:m=60,n=300,k=4,noise=0.05 swept over K=2..8 with 5 seeds and no test set, 2 of
// the 5 runs at K=4 and all at K=5..8 hit 2000 iterations; run to convergence (up to 11,500
// iterations), K=4's silhouette rose from 0.771 to 0.825 and K=5's from 0.443 to 0.467:
// shifts as large as StabilityMargin, enough to move the rule's pick. So a capped run at any
// rank makes the stability rule's suggestion unreliable too, said in its own terms.
func unreliable(rest, s []RankSummary, read readOf) string {
	n, runs := 0, 0
	var ks []string
	for _, r := range s {
		runs += r.Runs
	}
	for _, r := range rest {
		if r.Capped > 0 {
			n += r.Capped
			ks = append(ks, fmt.Sprint(r.K))
		}
	}
	if n == 0 {
		return ""
	}
	what := read.what
	if n == runs {
		what += " (every run)"
	}
	return fmt.Sprintf("%d of %d runs (K=%s) stopped at the iteration cap or the time limit before converging: their %s are not those of "+
		"fitted models, %s; raise the iteration cap (or the time limit)", n, runs, strings.Join(ks, ", "), what, read.why)
}

// pairedDiff is the mean and standard error, over the folds both have, of a's fold test
// errors minus b's; n is the number of those folds (SE NaN when n < 2).
func pairedDiff(a, b RankSummary) (mean, se float64, n int) {
	var d []float64
	for i, f := range a.Folds {
		if j := slices.Index(b.Folds, f); j >= 0 {
			d = append(d, a.FoldTest[i]-b.FoldTest[j])
		}
	}
	st := errorStats(d)
	return st.Mean, st.SE, st.N
}

// suggestByTest is the cross-validated rule (s sorted by K).
func suggestByTest(s []RankSummary) (Suggestion, bool) {
	var t []RankSummary // the ranks with a test error
	for _, r := range s {
		if r.Test.N > 0 && !math.IsNaN(r.Test.Mean) {
			t = append(t, r)
		}
	}
	if len(t) == 0 {
		return Suggestion{}, false
	}
	best := 0
	for i, r := range t {
		if r.Test.Mean < t[best].Test.Mean {
			best = i
		}
	}
	b := t[best]
	out := Suggestion{Name: RuleCV}
	pick := best
	if b.Test.N < 2 {
		out.Rule = fmt.Sprintf("the K of the lowest mean test error (K=%d: %.4g); one held-out set (fold), so no spread over folds to tell "+
			"which differences are real: use several folds", b.K, b.Test.Mean)
	} else {
		var dm, dse float64
		for i := range best {
			m, se, n := pairedDiff(t[i], b)
			// An overflowing spread (a test error near the largest float) compares nothing.
			if n >= 2 && m <= se && !math.IsInf(se, 0) && !math.IsInf(m, 0) {
				pick, dm, dse = i, m, se
				break
			}
		}
		if pick == best {
			out.Rule = fmt.Sprintf("the smallest K whose test error is within one standard error (over %d folds, paired) of the lowest's: "+
				"the lowest itself (K=%d: %.4g ± %.2g)", b.Test.N, b.K, b.Test.Mean, b.Test.SE)
		} else {
			out.Rule = fmt.Sprintf("the smallest K whose test error is within one standard error (over %d folds, paired) of the lowest's "+
				"(K=%d: %.4g): K=%d, %.4g, worse by %.2g ± %.2g", b.Test.N, b.K, b.Test.Mean, t[pick].K, t[pick].Test.Mean, dm, dse)
		}
	}
	if pick == 0 && len(t) > 1 {
		// Here every capped run counts, above the lowest test error's rank too: below the
		// data's rank a capped run's test error is an unfitted model's, and may be why no
		// rank did better than the smallest (cappedAbove's argument holds only above it).
		out.Unreliable = unreliable(s, s, cappedErrors)
		out.CannotTell = true
		why := fmt.Sprintf("the signal beyond %s is below the noise", components(t[0].K))
		if t[0].K > 1 {
			why += fmt.Sprintf(", or the rank is below %d (sweep smaller ranks)", t[0].K)
		} else {
			why += " (K=1 fits as well as any: nothing beyond one component, such as the matrix's mean, stands out of the noise)"
		}
		if capped, runs := cappedRuns(s); capped > 0 {
			// The runs that did not fit may be why no rank did better: say so first.
			why = fmt.Sprintf("%d of %d runs stopped at the iteration cap or the time limit before they fit, which may be why "+
				"(raise it), or %s", capped, runs, why)
		}
		out.Reason = fmt.Sprintf("cannot tell: no rank fits the held-out entries better than the smallest tried (K=%d, test error %.4g) by more than "+
			"the spread over folds; %s", t[0].K, t[0].Test.Mean, why)
		if p := poorFitsText(t); p != "" {
			out.Reason += "; " + p
		}
		out.Rule = out.Reason // the paired rule's own pick, the smallest rank, is what it cannot tell
		return out, true
	}
	out.K = t[pick].K
	if best == len(t)-1 && len(t) > 1 {
		out.Rule += "; the lowest is at the largest rank tried: larger ranks may do better"
	}
	// A suggestion rests on the ranks up to the lowest test error's; capped runs above it
	// are named, not counted (cappedAbove).
	upToBest := s[:slices.IndexFunc(s, func(r RankSummary) bool { return r.K == b.K })+1]
	out.Unreliable = unreliable(withoutLeftOut(upToBest), s, cappedErrors)
	if above := cappedAbove(s, b.K); above != "" {
		out.Rule += "; " + above
	}
	if p := poorFitsText(t); p != "" {
		out.Rule += "; " + p
	}
	return out, true
}

// withoutLeftOut is s with each rank's Capped less its capped fits left out as poor
// (PoorFit.Capped): the rule does not rest on them, and names them (poorFitsText).
func withoutLeftOut(s []RankSummary) []RankSummary {
	out := slices.Clone(s)
	for i := range out {
		for _, p := range out[i].PoorFits {
			if p.Capped && out[i].Capped > 0 {
				out[i].Capped--
			}
		}
	}
	return out
}

// poorFitsText names the folds left out as poor fits (RankSummary.PoorFits) at the ranks
// s, "" for none.
func poorFitsText(s []RankSummary) string {
	var names []string
	n := 0
	capped := 0
	for _, r := range s {
		for _, p := range r.PoorFits {
			if p.Capped {
				capped++
			}
			if n++; len(names) < 4 {
				how := ""
				if p.Capped {
					how = "stopped at the cap, "
				}
				names = append(names, fmt.Sprintf("K=%d fold %d (seed %d: %s%.4g against a median of %.4g)", r.K, p.Fold, p.Seed, how, p.Train, p.Median))
			}
		}
	}
	switch {
	case n == 0:
		return ""
	case n > len(names):
		names = append(names, fmt.Sprintf("and %d more", n-len(names)))
	}
	var what string
	switch {
	case n == 1 && capped == 1:
		what = "1 fit left out, its train error far above its rank's other folds': it stopped at the iteration cap, still on its way"
	case n == 1:
		what = "1 fit left out as a poor local optimum (its train error far above its rank's other folds')"
	case capped == n:
		what = fmt.Sprintf("%d fits left out, their train errors far above their ranks' other folds': they stopped at the iteration cap, still on their way", n)
	case capped > 0:
		what = fmt.Sprintf("%d fits left out, their train errors far above their ranks' other folds' (%d stopped at the iteration cap, "+
			"still on their way; the others are poor local optima)", n, capped)
	default:
		what = fmt.Sprintf("%d fits left out as poor local optima (their train errors far above their ranks' other folds')", n)
	}
	const seeds = "a sweep of more seeds than folds fits each fold from several starts and keeps the best"
	hint := "; " + seeds
	if capped == n {
		hint = "; raise the iteration cap"
	} else if capped > 0 {
		hint = "; raise the iteration cap, and " + seeds
	}
	return fmt.Sprintf("%s: %s%s", what, strings.Join(names, ", "), hint)
}

// cappedRuns counts the runs of s that stopped at a cap, and all the runs of s.
func cappedRuns(s []RankSummary) (capped, runs int) {
	for _, r := range s {
		capped += r.Capped
		runs += r.Runs
	}
	return capped, runs
}

// cappedAbove says how many runs above rank k hit a cap ("" for none). The rule does not rest
// on them as it does on the ranks up to the lowest test error's: a rank above the data's
// overfits the held-out entries more as its fit converges (on the planted-rank bank, their
// test errors rose from 1000 to 5000 iterations), so a converged run there would have done no
// better than the capped one.
func cappedAbove(s []RankSummary, k int) string {
	n := 0
	var ks []string
	for _, r := range s {
		if r.K > k && r.Capped > 0 {
			n += r.Capped
			ks = append(ks, fmt.Sprint(r.K))
		}
	}
	if n == 0 {
		return ""
	}
	runs := "runs"
	if n == 1 {
		runs = "run"
	}
	return fmt.Sprintf("%d %s above K=%d (K=%s) stopped at the iteration cap or the time limit: on the planted-rank bank, ranks above "+
		"the data's fitted the held-out entries worse as their fits converged, so the suggestion does not rest on them (to check, raise "+
		"the cap)", n, runs, k, strings.Join(ks, ", "))
}

// components is "one component" or "K components".
func components(k int) string {
	if k == 1 {
		return "one component"
	}
	return fmt.Sprintf("%d components", k)
}

// suggestByStability is the stability rule (s sorted by K). When there are silhouettes but
// none above 0 it returns false and why.
func suggestByStability(s []RankSummary) (int, string, bool) {
	best := -1
	for i, r := range s {
		if sil := r.Stability.Silhouette; !math.IsNaN(sil) && (best < 0 || sil > s[best].Stability.Silhouette) {
			best = i
		}
	}
	if best < 0 {
		return 0, "", false
	}
	top := s[best].Stability.Silhouette
	if !(top > 0) {
		return 0, fmt.Sprintf("no rank is stable across seeds (the best silhouette is %.3g, at K=%d)", top, s[best].K), false
	}
	limit := top - StabilityMargin
	pick := best
	for i, r := range s {
		if r.Stability.Silhouette >= limit {
			pick = i
		}
	}
	p := s[pick]
	var rule string
	if pick == best {
		rule = fmt.Sprintf("the largest K whose stability (silhouette of the seeds' components) is within %.2f of the best: the best itself (K=%d: %.3f); no test set",
			StabilityMargin, p.K, top)
	} else {
		rule = fmt.Sprintf("the largest K whose stability (silhouette of the seeds' components) is within %.2f of the best (K=%d: %.3f, so at least %.3f): K=%d, %.3f; no test set",
			StabilityMargin, s[best].K, top, limit, p.K, p.Stability.Silhouette)
	}
	if pick == len(s)-1 && len(s) > 1 {
		rule += "; it is the largest rank tried: larger ranks may be stable too"
	}
	return p.K, rule, true
}

// suggestByElbow is the elbow rule (s sorted by K, distinct Ks, two at least: Suggest cannot
// tell from one).
func suggestByElbow(s []RankSummary) (int, string) {
	if len(s) == 2 {
		return s[0].K, fmt.Sprintf("the smaller of two ranks (K=%d): an elbow of the train error needs three", s[0].K)
	}
	best, bestD := -1, 0.0
	for i := 1; i+1 < len(s); i++ {
		k0, k1, k2 := float64(s[i-1].K), float64(s[i].K), float64(s[i+1].K)
		if k0 == k1 || k1 == k2 {
			continue // not from Summarize, which gives each K once
		}
		e0, e1, e2 := s[i-1].Train.Mean, s[i].Train.Mean, s[i+1].Train.Mean
		if d := (e2-e1)/(k2-k1) - (e1-e0)/(k1-k0); d > bestD {
			best, bestD = i, d
		}
	}
	if best < 0 {
		return s[0].K, fmt.Sprintf("the smallest K (K=%d): the mean train error does not bend upwards anywhere, so it has no elbow", s[0].K)
	}
	return s[best].K, fmt.Sprintf("the elbow of the train error: the K where the mean train error bends most against K, the largest change of its slope (K=%d: %.4g)",
		s[best].K, s[best].Train.Mean)
}
