// Package rankbank is a bank of planted-rank matrices and the harness that sweeps them
// through didnmf's rank sweep, to decide, and then to hold, the rule that `didnmf sweep`
// suggests a rank by.
//
// Each Case is a samples x features matrix X ≈ W·H of planted rank K with noise of a family
// (Gaussian, Poisson and overdispersed negative-binomial counts, uniform), tall or wide,
// dense (.npy) or sparse (.mtx), whose signal stands out of the noise by a visibility v (see
// Case.Visibility: v < 1 is below the noise, where the right answer is "cannot tell"). Full
// is the bank of the benchmark, Reduced the few small cases `go test` runs; Sweep runs a case
// through the real Runner.Sweep in this process, and Score compares the rules (Shipped and
// Candidates) on the same sweeps:
//
//	go test ./internal/rankbank -run '^$' -bench RankBank -benchtime 1x
//
// prints the table of BENCHMARKS.md.
package rankbank

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Defaults are `didnmf sweep`'s defaults (internal/cli), which the bank holds: 5 runs per
// rank, each with its own seed and its own held-out set (5 folds), 10% of the entries held
// out, up to 2000 iterations, tol 1e-6, stall-tol 1e-5.
var Defaults = Options{Seeds: 5, Folds: 5, TestFraction: 0.1, MaxIter: 2000, Tol: 1e-6, StallTol: 1e-5, Parallel: 2}

// near are the ranks a user would sweep around a planted K: max(1, K-4) .. K+4.
func near(k int) []int {
	var r []int
	for x := max(1, k-4); x <= k+4; x++ {
		r = append(r, x)
	}
	return r
}

// wide are 2 .. 2K: does the rule depend on the range?
func wide(k int) []int {
	var r []int
	for x := 2; x <= 2*k; x++ {
		r = append(r, x)
	}
	return r
}

// size is the shape of a case of rank k: larger ranks need more entries to be seen.
func size(k int, tall bool) (samples, features int) {
	f := 1.0
	switch {
	case k > 20:
		f = 2
	case k > 12:
		f = 1.6
	case k > 6:
		f = 1.4
	}
	a, b := int(300*f), int(100*f)
	if tall {
		return a, b
	}
	return b, a
}

// Full is the benchmark's bank: for each planted K of 2, 3, 4, 5, 6, 8, 10, 12, 15, 20 and 30
// and each family, one dense case, tall or wide in turn, at a visibility of 4 (strong), 2,
// 1.25 (barely visible) or 0.4 (below the noise) in turn (negative-binomial counts capped by
// what their overdispersion lets them show, see negBinVisibility), swept over
// max(1,K-4)..K+4; sparse counts (depth 0.5, about a quarter of the entries nonzero,
// visibility 1.25, negative binomial 1.05, tall: 3·300 x 100 and larger) at K = 2, 3, 5 and
// 8; and wide ranges 2..2K at K = 3, 5, 8 and 12. A count case's visibility is measured
// against its draw's noise (Matrix.NoiseEdge), see Generate.
func Full() []Case {
	levels := []float64{4, 2, 1.25, 0.4}
	fams := []Family{Gaussian, Poisson, NegBin, Uniform}
	var out []Case
	seed := uint64(100)
	for ik, k := range []int{2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 30} {
		for jf, fam := range fams {
			tall := (ik+jf)%2 == 0
			n, m := size(k, tall)
			v := levels[(ik+jf)%4]
			if fam == NegBin {
				v = negBinVisibility(k, v)
			}
			seed++
			out = append(out, Case{Family: fam, Samples: n, Features: m, K: k, Visibility: v, Depth: depth(fam, k, false),
				Seed: seed, Ranks: near(k), Range: "near"})
		}
	}
	for _, k := range []int{2, 3, 5, 8} {
		for _, fam := range []Family{Poisson, NegBin} {
			n, m := size(k, true)
			seed++
			v := 1.25
			if fam == NegBin {
				v = 1.05 // at a depth of 0.5 the overdispersion caps K=5 at 1.08
			}
			out = append(out, Case{Family: fam, Samples: 3 * n, Features: m, K: k, Visibility: v, Depth: depth(fam, k, true), Sparse: true,
				Seed: seed, Ranks: near(k), Range: "near"})
		}
	}
	for i, k := range []int{3, 5, 8, 12} {
		fam := fams[i%len(fams)]
		n, m := size(k, i%2 == 1)
		seed++
		v := 2.0
		if fam == NegBin {
			v = negBinVisibility(k, v)
		}
		out = append(out, Case{Family: fam, Samples: n, Features: m, K: k, Visibility: v, Depth: depth(fam, k, false),
			Seed: seed, Ranks: wide(k), Range: "wide"})
	}
	return out
}

// depth is a count family's mean count: 0.5 sparse (about a quarter of the entries
// nonzero); dense, 3 (negative binomial 10) up to K = 8 and 30 above (more programs need more
// counts to be seen).
func depth(f Family, k int, sparse bool) float64 {
	switch {
	case f != Poisson && f != NegBin:
		return 0
	case sparse:
		return 0.5
	case k <= 8 && f == NegBin:
		return 10
	case k <= 8:
		return 3
	}
	return 30
}

// negBinVisibility is the visibility a dense negative-binomial case of rank k gets for the
// level v. Its noise's variance grows as the mean's square (μ + μ²/NegBinDispersion), so
// deeper counts stop helping: at the bank's shapes the most its weakest program can show,
// at any depth, is about 1.75-2.1 of the noise's edge at K <= 8, 1.13 at K = 15 and 1.02 at
// K = 30 (measured on the draws). The strong levels are capped at 1.5 (K <= 8), 1.25
// (K <= 12) and 1.1 (K <= 20), and K = 30 is a case below the noise.
func negBinVisibility(k int, v float64) float64 {
	switch {
	case v < 1:
		return v
	case k <= 8:
		return min(v, 1.5)
	case k <= 12:
		return min(v, 1.25)
	case k <= 20:
		return min(v, 1.1)
	}
	return 0.4
}

// Reduced is the bank `go test` runs: six small cases, a below-noise one among them.
func Reduced() []Case {
	return []Case{
		{Family: Gaussian, Samples: 150, Features: 60, K: 3, Visibility: 2, Seed: 1, Ranks: near(3), Range: "near"},
		{Family: Poisson, Samples: 60, Features: 150, K: 4, Visibility: 4, Depth: 3, Seed: 2, Ranks: near(4), Range: "near"},
		{Family: NegBin, Samples: 150, Features: 60, K: 2, Visibility: 4, Depth: 3, Seed: 3, Ranks: near(2), Range: "near"},
		{Family: Uniform, Samples: 60, Features: 150, K: 5, Visibility: 4, Seed: 4, Ranks: near(5), Range: "near"},
		{Family: Poisson, Samples: 300, Features: 60, K: 3, Visibility: 1.5, Depth: 0.3, Sparse: true, Seed: 5, Ranks: near(3), Range: "near"},
		{Family: Gaussian, Samples: 150, Features: 60, K: 4, Visibility: 0.4, Seed: 6, Ranks: near(4), Range: "near"},
	}
}

// Score is how one rule did on a bank.
type Score struct {
	Rule string
	// Visible counts the cases above the noise, Exact those where the rule found the planted
	// rank, Within1 those within one of it, FalseCannot those where it could not tell.
	Visible, Exact, Within1, FalseCannot int
	// Below counts the cases below the noise, Cannot those where the rule said it cannot tell.
	Below, Cannot int
	// ByFamily is Exact / Visible by family (sparse families apart), ByVisibility by the
	// cases' visibility.
	ByFamily, ByVisibility map[string][2]int
}

// Scores scores each rule on the outcomes.
func Scores(outs []*Outcome, rules []Rule) []Score {
	var out []Score
	for _, r := range rules {
		sc := Score{Rule: r.Name, ByFamily: map[string][2]int{}, ByVisibility: map[string][2]int{}}
		for _, o := range outs {
			k := r.Pick(o.Summary)
			fam := string(o.Case.Family)
			if o.Case.Sparse {
				fam += "-sparse"
			}
			if o.Case.BelowNoise() {
				sc.Below++
				if k == 0 {
					sc.Cannot++
				}
				continue
			}
			sc.Visible++
			vis := fmt.Sprintf("v=%g", o.Case.Visibility)
			f, v := sc.ByFamily[fam], sc.ByVisibility[vis]
			f[1]++
			v[1]++
			switch {
			case k == 0:
				sc.FalseCannot++
			case k == o.Case.K:
				sc.Exact++
				sc.Within1++
				f[0]++
				v[0]++
			case k == o.Case.K-1 || k == o.Case.K+1:
				sc.Within1++
			}
			sc.ByFamily[fam], sc.ByVisibility[vis] = f, v
		}
		out = append(out, sc)
	}
	return out
}

func pct(a, b int) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%% (%d/%d)", 100*float64(a)/float64(b), a, b)
}

// WriteTable writes the scores as a Markdown table: exact, within one, cannot tell, and the
// exact share by family and by visibility.
func WriteTable(w io.Writer, scores []Score) {
	leads := make([][]string, len(scores))
	for i, s := range scores {
		leads[i] = []string{s.Rule}
	}
	writeScores(w, []string{"rule"}, leads, scores)
}

// writeScores writes one Markdown row a score: its lead cells (under the lead headers), exact,
// within one, cannot tell (below the noise: right; visible: wrong), and the exact share by
// family and by visibility, over the families and visibilities any score has.
func writeScores(w io.Writer, lead []string, leads [][]string, scores []Score) {
	var fams, viss []string
	for _, s := range scores {
		for f := range s.ByFamily {
			if !slices.Contains(fams, f) {
				fams = append(fams, f)
			}
		}
		for v := range s.ByVisibility {
			if !slices.Contains(viss, v) {
				viss = append(viss, v)
			}
		}
	}
	slices.Sort(fams)
	slices.Sort(viss)
	cols := slices.Concat(lead, []string{"exact", "within ±1", "cannot tell, below the noise", "cannot tell, visible (wrong)"}, fams, viss)
	fmt.Fprintf(w, "| %s |\n", strings.Join(cols, " | "))
	fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(cols)))
	for i, s := range scores {
		cells := slices.Concat(leads[i], []string{pct(s.Exact, s.Visible), pct(s.Within1, s.Visible), pct(s.Cannot, s.Below), pct(s.FalseCannot, s.Visible)})
		for _, f := range fams {
			cells = append(cells, pct(s.ByFamily[f][0], s.ByFamily[f][1]))
		}
		for _, v := range viss {
			cells = append(cells, pct(s.ByVisibility[v][0], s.ByVisibility[v][1]))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}

// WriteCases writes a line per case: what the shipped rule picked, the folds left out as
// poor fits (sweep.PoorFit; K=5/4 is fold 4 at K=5), and the curve.
func WriteCases(w io.Writer, outs []*Outcome) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "case\tdensity\tpicked\tcapped\tmax iters\tseconds\tpoor fits\ttest error by K")
	for _, o := range outs {
		var curve, poor []string
		for _, s := range o.Summary {
			curve = append(curve, fmt.Sprintf("%d:%.4g", s.K, s.Test.Mean))
			for _, p := range s.PoorFits {
				poor = append(poor, fmt.Sprintf("K=%d/%d", s.K, p.Fold))
			}
		}
		if poor == nil {
			poor = []string{"-"}
		}
		pick := fmt.Sprint(o.Suggestion.K)
		if o.Suggestion.CannotTell {
			pick = "cannot tell"
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t%d/%d\t%d\t%.1f\t%s\t%s\n", o.Case.Name(), o.Matrix.Density, pick, o.Capped, o.Runs, o.Iterations, o.Seconds,
			strings.Join(poor, ","), strings.Join(curve, " "))
	}
	tw.Flush()
}
