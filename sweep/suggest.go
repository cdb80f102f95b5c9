package sweep

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// StabilityMargin is the stability rule's margin: Suggest, without a test set, takes the
// largest K whose silhouette is at least the best silhouette minus StabilityMargin.
const StabilityMargin = 0.05

// Suggest suggests a rank from the summaries and says why, in words a report can print
// ("the smallest K whose mean test error is within one standard error of the lowest ...").
// It uses the first of three rules the summaries allow:
//
//  1. With test errors (some rank with Test.N > 0), the one-standard-error rule (Hastie,
//     Tibshirani and Friedman, The Elements of Statistical Learning, 7.10): the smallest K
//     whose mean test error is at most the lowest mean test error plus its standard error.
//     A larger K does not fit held-out data measurably better, so the simpler model is
//     taken. With one seed per rank there is no standard error: the K of the lowest test
//     error.
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
// The summaries need not be sorted; Suggest returns 0 and "no ranks" for none.
func Suggest(summaries []RankSummary) (k int, rule string) {
	if len(summaries) == 0 {
		return 0, "no ranks were summarized"
	}
	s := slices.Clone(summaries)
	slices.SortStableFunc(s, func(a, b RankSummary) int { return cmp.Compare(a.K, b.K) })
	if k, rule, ok := suggestByTest(s); ok {
		return k, rule
	}
	k, rule, ok := suggestByStability(s)
	if ok {
		return k, rule
	}
	ek, erule := suggestByElbow(s)
	if rule != "" { // why stability was not used
		return ek, erule + "; " + rule
	}
	if slices.ContainsFunc(s, func(r RankSummary) bool { return r.Runs > 1 }) {
		return ek, erule + "; no test set, and no rank with a defined stability"
	}
	return ek, erule + "; no test set, and one seed per rank: no stability"
}

// suggestByTest is the one-standard-error rule (s sorted by K).
func suggestByTest(s []RankSummary) (int, string, bool) {
	best := -1
	for i, r := range s {
		if r.Test.N > 0 && !math.IsNaN(r.Test.Mean) && (best < 0 || r.Test.Mean < s[best].Test.Mean) {
			best = i
		}
	}
	if best < 0 {
		return 0, "", false
	}
	b := s[best].Test
	pick, rule := best, ""
	if math.IsNaN(b.SE) {
		rule = fmt.Sprintf("the K of the lowest mean test error (K=%d: %.4g); one run at that K, so no standard error for the one-standard-error rule",
			s[best].K, b.Mean)
	} else {
		for i, r := range s {
			if r.Test.N > 0 && r.Test.Mean <= b.Mean+b.SE {
				pick = i // the best is one: the loop stops at or before it
				break
			}
		}
		if pick == best {
			rule = fmt.Sprintf("the smallest K whose mean test error is within one standard error of the lowest: the lowest itself (K=%d: %.4g ± %.2g)",
				s[best].K, b.Mean, b.SE)
		} else {
			rule = fmt.Sprintf("the smallest K whose mean test error is within one standard error of the lowest (K=%d: %.4g ± %.2g): K=%d, %.4g",
				s[best].K, b.Mean, b.SE, s[pick].K, s[pick].Test.Mean)
		}
	}
	if best == len(s)-1 && len(s) > 1 {
		rule += "; the lowest is at the largest rank tried: larger ranks may do better"
	}
	return s[pick].K, rule, true
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

// suggestByElbow is the elbow rule (s sorted by K, distinct Ks).
func suggestByElbow(s []RankSummary) (int, string) {
	switch len(s) {
	case 1:
		return s[0].K, fmt.Sprintf("the only rank tried (K=%d)", s[0].K)
	case 2:
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
