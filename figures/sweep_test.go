package figures

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/sweep"
)

// sweepSummaries makes summaries of ranks ks with seeds seeds each: errors falling to a
// floor at K=5 (test errors rising after it, when test is set) and stability falling after
// it.
func sweepSummaries(ks []int, seeds int, test bool) []sweep.RankSummary {
	nan := math.NaN()
	var out []sweep.RankSummary
	for _, k := range ks {
		x := float64(k)
		train := 0.02 + 0.5*math.Exp(-(x-1)) + 0.01/x
		r := sweep.RankSummary{K: k, Runs: seeds,
			Train:     sweep.ErrorStats{N: seeds, Mean: train, Min: train * 0.98, Max: train * 1.02, SE: nan},
			Test:      sweep.ErrorStats{Mean: nan, Min: nan, Max: nan, SE: nan},
			Stability: sweep.Stability{K: k, Seeds: seeds, Silhouette: nan, Agreement: nan}}
		if seeds > 1 {
			r.Train.SE = 0.01 * train
			r.Stability.Silhouette = math.Max(-0.2, math.Min(0.98, 1.2-0.06*x))
			r.Stability.Agreement = math.Max(0, math.Min(1, 1.5-0.1*x))
			if k == 1 {
				r.Stability.Silhouette = nan
			}
		}
		if test {
			t := train + 0.003 + 0.001*math.Max(0, x-5)
			r.Test = sweep.ErrorStats{N: seeds, Mean: t, Min: t * 0.97, Max: t * 1.03, SE: nan}
			if seeds > 1 {
				r.Test.SE = 0.015 * t
			}
		}
		out = append(out, r)
	}
	return out
}

func TestSweepFigure(t *testing.T) {
	orange := [3]int{0xff, 0x7f, 0x0e}
	ks := []int{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	for _, tc := range []struct {
		name              string
		s                 []sweep.RankSummary
		suggested         int
		svgHas, svgHasNot []string
	}{
		{"typical", sweepSummaries(ks, 5, true), 5,
			[]string{"suggested K=5", "test error (held-out entries)", "train error", "silhouette of the seeds", "agreement", "rank K",
				"error against the rank", "stability across seeds", "bars ± one standard error", "log scale"},
			[]string{"not defined"}},
		{"one K", sweepSummaries([]int{7}, 3, true), 7, []string{"suggested K=7", "test error"}, nil},
		{"no test set: all NaN", sweepSummaries(ks, 5, false), 6, []string{"no test set: train error only", "train error", "suggested K=6"},
			[]string{"held-out"}},
		{"one seed", sweepSummaries(ks, 1, false), 5, []string{"one seed per rank", "not defined: it needs two seeds or more per rank"},
			[]string{"silhouette of the seeds"}},
		{"K=1 only: no silhouette", sweepSummaries([]int{1}, 4, false), 1, []string{"agreement"}, nil},
		{"suggestion not a rank", sweepSummaries(ks, 5, true), 0, nil, []string{"suggested"}},
		{"unsorted, wide range", sweepSummaries([]int{300, 1, 150, 40, 2}, 3, true), 40, []string{"suggested K=40", ">300<"}, nil},
		{"zero errors: left off the log axis, named", func() []sweep.RankSummary {
			s := sweepSummaries(ks, 5, true)
			s[len(s)-1].Train.Mean, s[len(s)-1].Test.Mean = 0, 0
			return s
		}(), 5, []string{"test error", "log scale", "not on the log axis: error ≤ 0 at K=12"}, nil},
		{"all errors zero: linear", func() []sweep.RankSummary {
			s := sweepSummaries(ks, 5, true)
			for i := range s {
				s[i].Train.Mean, s[i].Test.Mean = 0, 0
			}
			return s
		}(), 5, []string{"test error"}, []string{"log scale", "not on the log axis"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fig, err := Sweep("my sweep", tc.s, SweepNote{Suggested: tc.suggested})
			if err != nil {
				t.Fatal(err)
			}
			pngPath, svg := render(t, fig)
			img := readPNG(t, pngPath)
			if b := img.Bounds(); b.Dx() != int(fig.Width) || b.Dy() != int(fig.Height) {
				t.Errorf("PNG %dx%d, figure %vx%v", b.Dx(), b.Dy(), fig.Width, fig.Height)
			}
			checkNotBlank(t, tc.name, img)
			if n := countNear(img, orange, 30); (n > 0) != (tc.suggested > 0) {
				t.Errorf("%d orange pixels, suggested %d", n, tc.suggested)
			}
			for _, s := range append([]string{"my sweep"}, tc.svgHas...) {
				if !strings.Contains(svg, s) {
					t.Errorf("SVG lacks %q", s)
				}
			}
			for _, s := range tc.svgHasNot {
				if strings.Contains(svg, s) {
					t.Errorf("SVG has %q", s)
				}
			}
		})
	}
}

func TestSweepFigureDeterministic(t *testing.T) {
	var out [2]bytes.Buffer
	for i := range out {
		fig, err := Sweep("again", sweepSummaries([]int{2, 4, 6, 8}, 4, true), SweepNote{Suggested: 4, Rule: "r", Capped: map[int]int{6: 2}})
		if err != nil {
			t.Fatal(err)
		}
		if err := fig.WritePNG(&out[i]); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(out[0].Bytes(), out[1].Bytes()) {
		t.Error("two drawings of the same sweep differ")
	}
}

func TestSweepFigureFromSummarize(t *testing.T) {
	// Two well separated components, found by every seed at K=2, split at K=3.
	const m = 40
	var runs []sweep.Run
	for k := 1; k <= 3; k++ {
		for seed := 1; seed <= 3; seed++ {
			b := make([]float64, m*k)
			for p := 0; p < k; p++ {
				for f := 0; f < m; f++ {
					if (f*k/m+seed*p)%k == p%k {
						b[p*m+f] = 1 + 0.01*float64(f%3+seed)
					}
				}
			}
			runs = append(runs, sweep.Run{K: k, Seed: seed, M: m, Basis: b, TrainRelErr2: 0.5 / float64(k*k),
				TestRelErr2: 0.6/float64(k*k) + 0.01*float64(seed), Iterations: 10, Seconds: 1})
		}
	}
	s, err := sweep.Summarize(runs)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := sweep.Suggest(s)
	fig, err := Sweep("from runs", s, SweepNote{Suggested: k})
	if err != nil {
		t.Fatal(err)
	}
	_, svg := render(t, fig)
	if !strings.Contains(svg, "suggested K=") {
		t.Error("no suggestion drawn")
	}
}

func TestSweepFigureEmpty(t *testing.T) {
	for _, s := range [][]sweep.RankSummary{nil, {}} {
		if _, err := Sweep("empty", s, SweepNote{Suggested: 3}); !errors.Is(err, ErrInput) {
			t.Errorf("got %v, want ErrInput", err)
		}
	}
}

func TestRankTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		labels []string
	}{
		{1.5, 5.5, []string{"2", "3", "4", "5"}},
		{-0.5, 30.5, []string{"0", "5", "10", "15", "20", "25", "30"}},
		{6, 8, []string{"6", "7", "8"}},
		{0, 1000, []string{"0", "100", "200", "300", "400", "500", "600", "700", "800", "900", "1000"}},
	} {
		var labels []string
		for _, tk := range (rankTicks{}).Ticks(tc.lo, tc.hi) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if strings.Join(labels, " ") != strings.Join(tc.labels, " ") {
			t.Errorf("[%v, %v]: labels %v, want %v", tc.lo, tc.hi, labels, tc.labels)
		}
	}
}
