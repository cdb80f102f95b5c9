package figures

import (
	"bytes"
	"errors"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"

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
				"against the rank, on a log10 axis", "stability across seeds", "bars ± one standard error", "log scale"},
			[]string{"not defined"}},
		{"one K", sweepSummaries([]int{7}, 3, true), 7, []string{"suggested K=7", "test error"}, nil},
		{"no test set: all NaN", sweepSummaries(ks, 5, false), 6, []string{"no test set: train error only", "train error", "suggested K=6"},
			[]string{"held-out"}},
		{"one seed", sweepSummaries(ks, 1, false), 5, []string{"one seed per rank", "not defined: it needs two seeds or more per rank"},
			[]string{"silhouette of the seeds"}},
		{"K=1 only: no silhouette", sweepSummaries([]int{1}, 4, false), 1, []string{"agreement"}, nil},
		{"K=1 among others: said why it has no silhouette", func() []sweep.RankSummary {
			s := sweepSummaries([]int{1, 2, 3}, 4, true)
			s[0].Stability.Silhouette = math.NaN()
			return s
		}(), 2, []string{"none at K=1: one cluster"}, nil},
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
	k := sweep.Suggest(s).K
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

// svgPoint is a point in an SVG's coordinates.
type svgPoint struct{ x, y float64 }

var (
	svgPathRE   = regexp.MustCompile(`<path d="([^"]*)" style="([^"]*)"`)
	svgNumberRE = regexp.MustCompile(`-?[0-9.]+(?:e-?[0-9]+)?`)
)

// svgPaths returns the vertices of the SVG's paths whose style contains style, in order.
func svgPaths(t *testing.T, svg, style string) [][]svgPoint {
	t.Helper()
	var out [][]svgPoint
	for _, m := range svgPathRE.FindAllStringSubmatch(svg, -1) {
		if !strings.Contains(m[2], style) || strings.Contains(m[1], "A") { // no arcs: circles
			continue
		}
		nums := svgNumberRE.FindAllString(m[1], -1)
		var pts []svgPoint
		for i := 0; i+1 < len(nums); i += 2 {
			x, err1 := strconv.ParseFloat(nums[i], 64)
			y, err2 := strconv.ParseFloat(nums[i+1], 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("path %q: %v %v", m[1], err1, err2)
			}
			pts = append(pts, svgPoint{x, y})
		}
		out = append(out, pts)
	}
	return out
}

// sweepCurve returns the vertices of the test error's curve: the one path in the curve's
// blue, 2 points wide, with more than two vertices (the legend's thumbnail has two).
func sweepCurve(t *testing.T, svg string, n int) []svgPoint {
	t.Helper()
	var curves [][]svgPoint
	for _, p := range svgPaths(t, svg, "stroke:#1F77B4;stroke-width:2") {
		if len(p) > 2 {
			curves = append(curves, p)
		}
	}
	if len(curves) != 1 || len(curves[0]) != n {
		t.Fatalf("want one test-error curve of %d points, found %v", n, curves)
	}
	return curves[0]
}

// decadeSummaries makes one summary per value, at K = 2, 3, ...: test error v, train error
// v/2, two seeds and no stability.
func decadeSummaries(values []float64) []sweep.RankSummary {
	nan := math.NaN()
	var s []sweep.RankSummary
	for i, v := range values {
		s = append(s, sweep.RankSummary{K: i + 2, Runs: 2,
			Train:     sweep.ErrorStats{N: 2, Mean: v / 2, SE: nan},
			Test:      sweep.ErrorStats{N: 2, Mean: v, SE: nan},
			Stability: sweep.Stability{K: i + 2, Seeds: 2, Silhouette: nan, Agreement: nan}})
	}
	return s
}

// TestSweepFigureLogAxis checks the error axis numerically: the test error curve's vertices,
// read from the SVG, must sit at heights linear in log10 of their values (to half a pixel),
// so that every decade spans the same distance, and at x positions linear in K.
func TestSweepFigureLogAxis(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []float64
	}{
		{"decades", []float64{1e-2, 1e-3, 1e-4, 1e-5, 1e-6}},
		{"the issue's floor: 30x drop then a drift", []float64{0.3, 0.1, 0.03, 0.001, 0.00097, 0.00095, 0.00094, 0.00093}},
		{"not monotone", []float64{0.5, 0.02, 0.2, 0.002, 0.05}},
		{"within one decade", []float64{0.9, 0.5, 0.3, 0.2, 0.12}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fig, err := Sweep("log", decadeSummaries(tc.values), SweepNote{})
			if err != nil {
				t.Fatal(err)
			}
			_, svg := render(t, fig)
			pts := sweepCurve(t, svg, len(tc.values))
			first, last := pts[0], pts[len(pts)-1]
			l0, l1 := math.Log10(tc.values[0]), math.Log10(tc.values[len(pts)-1])
			perDecade := (last.y - first.y) / (l1 - l0)
			perRank := (last.x - first.x) / float64(len(pts)-1)
			if math.Abs(perDecade) < 20 {
				t.Fatalf("a decade spans %.2f px: the axis is not logarithmic or is squashed", perDecade)
			}
			for i, p := range pts {
				wantY := first.y + perDecade*(math.Log10(tc.values[i])-l0)
				wantX := first.x + perRank*float64(i)
				if math.Abs(p.y-wantY) > 0.5 || math.Abs(p.x-wantX) > 0.5 {
					t.Errorf("point %d (K=%d, %g) at (%.2f, %.2f), want (%.2f, %.2f) on a log axis",
						i, i+2, tc.values[i], p.x, p.y, wantX, wantY)
				}
			}
			if !strings.Contains(svg, "log10 axis") {
				t.Error("the figure does not say that the error axis is logarithmic")
			}
		})
	}
}

// TestSweepFigureDecadesEqual is the check: 0.01→0.001 and 0.001→0.0001 span the
// same height, to a pixel.
func TestSweepFigureDecadesEqual(t *testing.T) {
	fig, err := Sweep("decades", decadeSummaries([]float64{0.01, 0.001, 0.0001, 0.0001}), SweepNote{})
	if err != nil {
		t.Fatal(err)
	}
	_, svg := render(t, fig)
	pts := sweepCurve(t, svg, 4)
	d1, d2 := math.Abs(pts[1].y-pts[0].y), math.Abs(pts[2].y-pts[1].y)
	if math.Abs(d1-d2) > 1 || d1 < 20 {
		t.Errorf("0.01→0.001 spans %.2f px, 0.001→0.0001 spans %.2f px", d1, d2)
	}
}

// TestSweepFigureCapped counts the red triangles: one per series (train, test) at each rank
// with a run that hit a cap, and one in the legend, which counts the runs.
func TestSweepFigureCapped(t *testing.T) {
	values := []float64{0.3, 0.1, 0.01, 0.009, 0.0088, 0.0087} // K = 2..7, 2 runs each
	for _, tc := range []struct {
		name      string
		capped    map[int]int
		triangles int
		legend    string
	}{
		{"none", nil, 0, ""},
		{"zero counts", map[int]int{3: 0}, 0, ""},
		{"the issue's: ranks 5..7", map[int]int{5: 2, 6: 2, 7: 1}, 2*3 + 1, "5 of 12 runs hit the iteration cap or time limit"},
		{"every run", map[int]int{2: 2, 3: 2, 4: 2, 5: 2, 6: 2, 7: 2}, 2*6 + 1, "12 of 12 runs hit the iteration cap or time limit"},
		{"more than the runs, a rank not swept", map[int]int{4: 5, 40: 1}, 2 + 1, "2 of 12 runs hit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fig, err := Sweep("caps", decadeSummaries(values), SweepNote{Suggested: 4, Capped: tc.capped})
			if err != nil {
				t.Fatal(err)
			}
			_, svg := render(t, fig)
			n := 0
			for _, p := range svgPaths(t, svg, "fill:#D62728") {
				if len(p) == 3 {
					n++
				}
			}
			if n != tc.triangles {
				t.Errorf("%d red triangles, want %d", n, tc.triangles)
			}
			if tc.legend == "" {
				if strings.Contains(svg, "hit a cap") || strings.Contains(svg, "hit the iteration cap") {
					t.Error("the figure speaks of caps with none hit")
				}
			} else if !strings.Contains(svg, tc.legend) {
				t.Errorf("SVG lacks %q", tc.legend)
			}
			// The capped ranks' triangles sit on the curve's vertices.
			pts := sweepCurve(t, svg, len(values))
			for _, p := range svgPaths(t, svg, "fill:#D62728") {
				if len(p) != 3 {
					continue
				}
				cx := (p[1].x + p[2].x) / 2
				if !slices.ContainsFunc(pts, func(v svgPoint) bool { return math.Abs(v.x-cx) < 0.5 }) && cx < pts[len(pts)-1].x {
					t.Errorf("a triangle at x=%.2f is at no rank", cx)
				}
			}
		})
	}
}

// TestSweepFigureSuggestedLine checks that the dashed orange line of the suggestion stands at
// the suggested rank's x in both panels, and that the rule is written under them.
func TestSweepFigureSuggestedLine(t *testing.T) {
	values := []float64{0.3, 0.1, 0.01, 0.009, 0.0088, 0.0087, 0.0086} // K = 2..8
	for _, k := range []int{2, 4, 8} {
		t.Run(strconv.Itoa(k), func(t *testing.T) {
			rule := "the smallest K whose mean test error over folds is within one standard error of the least"
			fig, err := Sweep("suggest", decadeSummaries(values), SweepNote{Suggested: k, Rule: rule})
			if err != nil {
				t.Fatal(err)
			}
			_, svg := render(t, fig)
			pts := sweepCurve(t, svg, len(values))
			lines := svgPaths(t, svg, "stroke:#FF7F0E;stroke-width:2;stroke-dasharray")
			if len(lines) != 2 {
				t.Fatalf("%d suggestion lines, want 2 (one per panel)", len(lines))
			}
			for _, l := range lines {
				if len(l) != 2 || l[0].x != l[1].x {
					t.Fatalf("the suggestion line %v is not vertical", l)
				}
				if want := pts[k-2].x; math.Abs(l[0].x-want) > 0.5 {
					t.Errorf("the line at x=%.2f, K=%d is at x=%.2f", l[0].x, k, want)
				}
			}
			if !strings.Contains(svg, "suggested K="+strconv.Itoa(k)) || !strings.Contains(svg, "rule: the smallest K") {
				t.Error("the suggestion or its rule is not written on the figure")
			}
		})
	}
}

func TestWrapText(t *testing.T) {
	ts := textStyle(smallSize+1, noteColor, text.XLeft, text.YTop)
	for _, tc := range []struct {
		s     string
		width vg.Length
		lines int
	}{
		{"", 100, 0},
		{"short", 500, 1},
		{strings.Repeat("the first K whose improvement falls below 5% ", 12), 400, 0},
		{"averyveryveryverylongwordthatdoesnotfit and more", 40, 0},
	} {
		lines := wrapText(ts, tc.s, tc.width)
		if tc.lines > 0 && len(lines) != tc.lines || tc.lines == 0 && tc.s != "" && len(lines) < 2 {
			t.Errorf("%.20q: %d lines", tc.s, len(lines))
		}
		if got, want := strings.Join(lines, " "), strings.Join(strings.Fields(tc.s), " "); got != want {
			t.Errorf("wrapping lost words: %q", got)
		}
		for _, l := range lines {
			if ts.Width(l) > tc.width && strings.Contains(l, " ") {
				t.Errorf("line %q is %v wide, more than %v", l, ts.Width(l), tc.width)
			}
		}
	}
}

var svgTextRE = regexp.MustCompile(`<text x="([-0-9.e]+)" y="([-0-9.e]+)" transform="scale\(1, -1\)"\s*style="[^"]*font-size:12px[^"]*">([^<]*)</text>`)

// TestSweepFigureLabelsApart reads every tick label of the SVG (the 12-point texts that are
// numbers) and checks that no two boxes (the label's width by the font's ascent and descent)
// overlap: labels never overprint, however many ranks or decades the sweep spans.
func TestSweepFigureLabelsApart(t *testing.T) {
	ts := textStyle(tickSize, noteColor, text.XLeft, text.YBottom)
	ext := ts.FontExtents()
	many := make([]float64, 60) // K = 2..61, falling over 8 decades and flat in between
	for i := range many {
		many[i] = math.Pow(10, -float64(min(i, 40))/5) * (1 + 0.01*float64(i%3))
	}
	for _, tc := range []struct {
		name string
		s    []sweep.RankSummary
	}{
		{"the issue's floor", decadeSummaries([]float64{0.3, 0.1, 0.03, 0.001, 0.00097, 0.00095, 0.00094, 0.00093, 0.00092})},
		{"sixty ranks, eight decades", decadeSummaries(many)},
		{"within one decade", decadeSummaries([]float64{0.9, 0.5, 0.3, 0.2, 0.12, 0.11})},
		{"wide rank range", sweepSummaries([]int{300, 1, 150, 40, 2, 77, 199, 250}, 3, true)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fig, err := Sweep("labels", tc.s, SweepNote{Suggested: tc.s[0].K, Capped: map[int]int{tc.s[1].K: 1}})
			if err != nil {
				t.Fatal(err)
			}
			_, svg := render(t, fig)
			type box struct {
				label          string
				x0, x1, y0, y1 float64
			}
			var boxes []box
			for _, m := range svgTextRE.FindAllStringSubmatch(svg, -1) {
				if _, err := strconv.ParseFloat(m[3], 64); err != nil {
					continue // a legend's entry
				}
				x, _ := strconv.ParseFloat(m[1], 64)
				y, _ := strconv.ParseFloat(m[2], 64)
				y = -y // the baseline, upwards
				w := float64(ts.Width(m[3]).Points())
				boxes = append(boxes, box{m[3], x, x + w, y - float64(ext.Descent.Points()), y + float64(ext.Ascent.Points())})
			}
			if len(boxes) < 6 {
				t.Fatalf("%d small texts in the SVG: the pattern no longer reads it", len(boxes))
			}
			const tol = 0.5
			for i, a := range boxes {
				for _, b := range boxes[i+1:] {
					if a.x0 < b.x1-tol && b.x0 < a.x1-tol && a.y0 < b.y1-tol && b.y0 < a.y1-tol {
						t.Errorf("%q and %q overprint: %v, %v", a.label, b.label, a, b)
					}
				}
			}
		})
	}
}

// TestSweepFigureCannotTell: a sweep that cannot tell says so in the subtitle, marks no
// rank, and writes why the suggestion is unreliable under the rule.
func TestSweepFigureCannotTell(t *testing.T) {
	note := SweepNote{Rule: "cannot tell: no rank fits the held-out entries better than the smallest tried", CannotTell: true,
		Unreliable: "4 of 4 runs (K=2, 4) stopped at the iteration cap", Capped: map[int]int{2: 2, 4: 2}}
	fig, err := Sweep("noise", sweepSummaries([]int{2, 4}, 2, true), note)
	if err != nil {
		t.Fatal(err)
	}
	_, svg := render(t, fig)
	for _, want := range []string{"cannot tell the rank", "rule: cannot tell: no rank fits", "unreliable: 4 of 4 runs (K=2, 4)", "4 of 4 runs hit a cap",
		"one held-out set"} {
		if !strings.Contains(svg, want) {
			t.Errorf("sweep.svg lacks %q", want)
		}
	}
	if strings.Contains(svg, "suggested K=") {
		t.Error("a rank is marked suggested")
	}
}

// TestSweepLegendAvoidsPoints: the legends go to the emptiest corner of their panel, so that
// no point of a curve is under them: the PNG has each curve's colour at each of its
// vertices (read from the SVG), in the noise sweep (the test error rising with K to
// the upper right, where the legend used to cover the point at the largest K), in a planted
// sweep (errors falling: the upper right is free) and with points near three corners.
func TestSweepLegendAvoidsPoints(t *testing.T) {
	nan := math.NaN()
	// summaries of 3 seeds and folds; the test errors' standard error is 2% of their mean.
	summaries := func(ks []int, train, test, sil []float64) []sweep.RankSummary {
		var s []sweep.RankSummary
		for i, k := range ks {
			s = append(s, sweep.RankSummary{K: k, Runs: 3, Folds: []int{0, 1, 2},
				Train:     sweep.ErrorStats{N: 3, Mean: train[i], SE: 0.002 * train[i]},
				Test:      sweep.ErrorStats{N: 3, Mean: test[i], SE: 0.02 * test[i]},
				Stability: sweep.Stability{K: k, Seeds: 3, Silhouette: sil[i], Agreement: 1}})
		}
		return s
	}
	for _, tc := range []struct {
		name string
		s    []sweep.RankSummary
		note SweepNote
	}{
		{"noise: the test error rises to the upper right", summaries([]int{1, 2, 3, 4}, // internal/cli's TestSweepCannotTell
			[]float64{0.2364, 0.2157, 0.1962, 0.1781}, []float64{0.2539, 0.2850, 0.3143, 0.3467}, []float64{nan, 0.485, 0.452, 0.286}),
			SweepNote{Rule: "cannot tell", CannotTell: true}},
		{"planted: errors fall", sweepSummaries([]int{2, 3, 4, 5, 6, 7, 8, 9, 10}, 3, true), SweepNote{Suggested: 5, Rule: "x"}},
		{"points near three corners", summaries([]int{2, 3, 4, 5, 6},
			[]float64{0.1, 0.05, 0.03, 0.05, 0.1}, []float64{0.011, 0.05, 0.09, 0.05, 0.011}, []float64{0.9, 0.1, 0.5, 0.1, 0.9}),
			SweepNote{Suggested: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fig, err := Sweep("legend", tc.s, tc.note)
			if err != nil {
				t.Fatal(err)
			}
			pngPath, svg := render(t, fig)
			img := readPNG(t, pngPath)
			h := float64(img.Bounds().Dy())
			// A point's pixel has the colour of a curve or of the mark drawn over it; under
			// the legend's box it would be washed out to near white, or be the legend's text.
			colours := [][3]int{{0x1f, 0x77, 0xb4}, {0x9e, 0xc5, 0xe5}, {0x2c, 0xa0, 0x2c}, {0x80, 0x80, 0x80}, {0xff, 0x7f, 0x0e}, {0xd6, 0x27, 0x28}}
			for _, curve := range []struct{ name, style string }{
				{"test error", "stroke:#1F77B4;stroke-width:2"},
				{"train error", "stroke:#9EC5E5;stroke-width:2"},
				{"silhouette", "stroke:#2CA02C;stroke-width:2"},
				{"agreement", "stroke:#808080;stroke-width:2"},
			} {
				n := 0
				for _, p := range svgPaths(t, svg, curve.style) {
					if len(p) <= 2 { // a legend's thumbnail
						continue
					}
					for i, v := range p {
						r, g, b, _ := img.At(int(v.x), int(h-v.y)).RGBA()
						got := [3]int{int(r >> 8), int(g >> 8), int(b >> 8)}
						if !slices.ContainsFunc(colours, func(c [3]int) bool {
							return max(abs(got[0]-c[0]), abs(got[1]-c[1]), abs(got[2]-c[2])) <= 12
						}) {
							t.Errorf("%s point %d at (%.0f, %.0f): PNG colour %x, no curve's: covered", curve.name, i, v.x, h-v.y, got)
						}
						n++
					}
				}
				if n == 0 {
					t.Errorf("no %s curve found", curve.name)
				}
			}
		})
	}
}

// TestSweepLegendClearsSuggestedLine: the legend's box does not cross the dashed line of the
// suggested rank in either panel (it was drawn over it, breaking the line where the legend's
// corner was that of the suggestion: at the largest K above, at the smallest below), wherever
// the suggestion is among the ranks. Positions are read from the SVG: each panel's legend box
// (translucent white) against the line whose height overlaps it.
func TestSweepLegendClearsSuggestedLine(t *testing.T) {
	capped := map[int]int{6: 2}
	for _, tc := range []struct {
		name string
		ks   []int
		k    int
		note SweepNote
	}{
		{name: "largest K", ks: []int{3, 4, 5, 6, 7}, k: 7},
		{name: "smallest K", ks: []int{3, 4, 5, 6, 7}, k: 3},
		{name: "middle K", ks: []int{3, 4, 5, 6, 7}, k: 5},
		{name: "next to largest", ks: []int{3, 4, 5, 6, 7}, k: 6},
		{name: "two ranks", ks: []int{4, 5}, k: 5},
		{name: "many ranks, largest", ks: []int{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, k: 12},
		{name: "a wide legend (capped runs)", ks: []int{3, 4, 5, 6, 7}, k: 7, note: SweepNote{Capped: capped}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			note := tc.note
			note.Suggested, note.Rule = tc.k, "x"
			fig, err := Sweep("legend and mark", sweepSummaries(tc.ks, 3, true), note)
			if err != nil {
				t.Fatal(err)
			}
			_, svg := render(t, fig)
			lines := svgPaths(t, svg, "stroke:#FF7F0E;stroke-width:2;stroke-dasharray")
			boxes := svgPaths(t, svg, "fill:#FFFFFF;fill-opacity")
			if len(lines) != 2 || len(boxes) != 2 {
				t.Fatalf("%d suggestion lines and %d legend boxes, want 2 of each", len(lines), len(boxes))
			}
			for i, b := range boxes {
				bx0, bx1 := min(b[0].x, b[2].x), max(b[0].x, b[2].x)
				by0, by1 := min(b[0].y, b[2].y), max(b[0].y, b[2].y)
				for _, l := range lines {
					ly0, ly1 := min(l[0].y, l[1].y), max(l[0].y, l[1].y)
					if ly1 < by0 || ly0 > by1 {
						continue // the other panel's line
					}
					// The line is 2 points wide: 1 on each side of its x.
					if l[0].x+1 >= bx0 && l[0].x-1 <= bx1 {
						t.Errorf("legend box %d, x %.1f to %.1f, y %.1f to %.1f, crosses the suggested K=%d line at x=%.1f", i, bx0, bx1, by0, by1, tc.k, l[0].x)
					}
				}
			}
		})
	}
}
