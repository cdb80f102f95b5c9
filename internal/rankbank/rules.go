package rankbank

import (
	"cmp"
	"math"
	"slices"

	"github.com/didnmf/didnmf/sweep"
)

// A Rule picks a rank from a sweep's summaries (sorted by K), or cannot tell (k = 0).
type Rule struct {
	Name string
	Pick func(s []sweep.RankSummary) (k int)
}

// Shipped is the rule `didnmf sweep` uses: sweep.Suggest.
var Shipped = Rule{Name: "shipped: " + sweep.RuleCV, Pick: func(s []sweep.RankSummary) int { return sweep.Suggest(s).K }}

// Candidates are the rules the bank compares with the shipped one, on the same sweeps. Each
// cannot tell (0) when its pick is the smallest rank tried, as the shipped rule does: no
// larger rank is shown to do better.
var Candidates = []Rule{
	{"min (RcppML: lowest mean test error)", ruleMin},
	{"one-se over folds (unpaired)", ruleOneSE},
	{"paired one-se", func(s []sweep.RankSummary) int { return rulePairedSE(s, 1) }},
	{"paired two-se", func(s []sweep.RankSummary) int { return rulePairedSE(s, 2) }},
	{"first K improving < 1%", func(s []sweep.RankSummary) int { return ruleThreshold(s, 0.01) }},
	{"first K improving < 5%", func(s []sweep.RankSummary) int { return ruleThreshold(s, 0.05) }},
	{"paired step (next K not better by 2 SE)", func(s []sweep.RankSummary) int { return rulePairedStep(s, 2) }},
	{"cNMF stability (largest K within 0.05 of best silhouette)", ruleStability},
	{"min of median fold error", ruleMedianMin},
}

func sorted(s []sweep.RankSummary) []sweep.RankSummary {
	s = slices.Clone(s)
	slices.SortFunc(s, func(a, b sweep.RankSummary) int { return cmp.Compare(a.K, b.K) })
	return s
}

// orCannot is s[i].K, or 0 when i is the smallest rank.
func orCannot(s []sweep.RankSummary, i int) int {
	if i == 0 {
		return 0
	}
	return s[i].K
}

func argmin(s []sweep.RankSummary, v func(sweep.RankSummary) float64) int {
	best := 0
	for i := range s {
		if v(s[i]) < v(s[best]) {
			best = i
		}
	}
	return best
}

func ruleMin(s []sweep.RankSummary) int {
	s = sorted(s)
	return orCannot(s, argmin(s, func(r sweep.RankSummary) float64 { return r.Test.Mean }))
}

func ruleOneSE(s []sweep.RankSummary) int {
	s = sorted(s)
	b := argmin(s, func(r sweep.RankSummary) float64 { return r.Test.Mean })
	for i := range b {
		if s[i].Test.Mean <= s[b].Test.Mean+s[b].Test.SE {
			return orCannot(s, i)
		}
	}
	return orCannot(s, b)
}

// paired is the mean and standard error over folds of a's fold errors minus b's.
func paired(a, b sweep.RankSummary) (mean, se float64) {
	var d []float64
	for i, f := range a.Folds {
		if j := slices.Index(b.Folds, f); j >= 0 {
			d = append(d, a.FoldTest[i]-b.FoldTest[j])
		}
	}
	if len(d) < 2 {
		return math.NaN(), math.NaN()
	}
	var sum float64
	for _, v := range d {
		sum += v
	}
	mean = sum / float64(len(d))
	var ss float64
	for _, v := range d {
		ss += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(ss/float64(len(d)-1)) / math.Sqrt(float64(len(d)))
}

func rulePairedSE(s []sweep.RankSummary, z float64) int {
	s = sorted(s)
	b := argmin(s, func(r sweep.RankSummary) float64 { return r.Test.Mean })
	for i := range b {
		if m, se := paired(s[i], s[b]); m <= z*se {
			return orCannot(s, i)
		}
	}
	return orCannot(s, b)
}

func ruleThreshold(s []sweep.RankSummary, frac float64) int {
	s = sorted(s)
	for i := 0; i+1 < len(s); i++ {
		if (s[i].Test.Mean-s[i+1].Test.Mean)/s[i].Test.Mean < frac {
			return orCannot(s, i)
		}
	}
	return orCannot(s, len(s)-1)
}

func rulePairedStep(s []sweep.RankSummary, z float64) int {
	s = sorted(s)
	for i := 0; i+1 < len(s); i++ {
		if m, se := paired(s[i], s[i+1]); !(m > z*se) {
			return orCannot(s, i)
		}
	}
	return orCannot(s, len(s)-1)
}

func ruleStability(s []sweep.RankSummary) int {
	s = sorted(s)
	best := -1
	for i, r := range s {
		if !math.IsNaN(r.Stability.Silhouette) && (best < 0 || r.Stability.Silhouette > s[best].Stability.Silhouette) {
			best = i
		}
	}
	if best < 0 {
		return 0
	}
	pick := best
	for i, r := range s {
		if r.Stability.Silhouette >= s[best].Stability.Silhouette-0.05 {
			pick = i
		}
	}
	return orCannot(s, pick)
}

func ruleMedianMin(s []sweep.RankSummary) int {
	s = sorted(s)
	return orCannot(s, argmin(s, func(r sweep.RankSummary) float64 {
		v := slices.Clone(r.FoldTest)
		slices.Sort(v)
		if len(v) == 0 {
			return math.NaN()
		}
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}))
}
