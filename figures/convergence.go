package figures

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Size of the convergence figure, in points (PNG pixels).
const (
	convergenceWidth  = 1200
	convergenceHeight = 540
	// maxCurvePoints is the most points a curve is drawn with: longer histories are thinned
	// to every s-th point (and the last), which keeps the SVG small and changes nothing seen.
	maxCurvePoints = 4000
	// maxGlyphPoints is the most points that are also drawn as dots.
	maxGlyphPoints = 60
)

// Metric is the error measure a convergence figure plots.
type Metric int

const (
	// RelErr2 is ||X-BC||² / ||X||², the history's rel_err2.
	RelErr2 Metric = iota
	// ObjectiveRatio is ||X-BC||² / ||X-B0C0||², the history's objective_ratio, plotted when
	// the history has no rel_err2.
	ObjectiveRatio
)

// metricName is the metric's name in words.
func metricName(m Metric) string {
	if m == ObjectiveRatio {
		return "objective ratio"
	}
	return "relative error"
}

// String returns the metric's name in report.json.
func (m Metric) String() string {
	if m == ObjectiveRatio {
		return "objective_ratio"
	}
	return "rel_err2"
}

// axisLabel is the metric's axis label.
func (m Metric) axisLabel() string {
	if m == ObjectiveRatio {
		return "objective ratio ||X-BC||² / ||X-B0C0||²"
	}
	return "relative error ||X-BC||² / ||X||²"
}

// ChooseMetric returns the metric a convergence figure of hist plots: RelErr2 when some point
// has a rel_err2 above 0, else ObjectiveRatio (reports written before rel_err2 was recorded).
func ChooseMetric(hist []Point) Metric {
	for _, p := range hist {
		if p.RelErr2 > 0 {
			return RelErr2
		}
	}
	return ObjectiveRatio
}

func (m Metric) value(p Point) float64 {
	if m == ObjectiveRatio {
		return p.ObjectiveRatio
	}
	return p.RelErr2
}

// Convergence draws how a run converged: the error (see ChooseMetric) against the iteration
// in the left panel and against the seconds since the job started in the right one, on a
// logarithmic scale. Points whose error is 0 cannot be on a log scale and are left out (the
// scale is linear when no point is above 0). Each rollback is marked: in the left panel a
// dashed red line at the checkpoint iteration the job resumed from, labelled "R1→40" (the
// first rollback, to iteration 40), over a shaded band of the iterations done again; in the
// right panel a dashed line labelled "R1" when the failure was noticed, over a band up to when
// the job resumed. title heads the figure. Errors (an empty history) wrap ErrInput.
func Convergence(title string, hist []Point, recov []Rollback) (*Figure, error) {
	if len(hist) == 0 {
		return nil, inputErrorf("the history is empty: no convergence to plot")
	}
	metric := ChooseMetric(hist)
	pts := thin(hist, maxCurvePoints)
	logScale := false
	for _, p := range pts {
		if metric.value(p) > 0 {
			logScale = true
			break
		}
	}
	var byIter, byTime plotter.XYs
	for _, p := range pts {
		v := metric.value(p)
		if logScale && !(v > 0) {
			continue
		}
		byIter = append(byIter, plotter.XY{X: float64(p.Iteration), Y: v})
		byTime = append(byTime, plotter.XY{X: p.Seconds, Y: v})
	}
	left, err := curvePlot("error by iteration", "iteration", metric, byIter, logScale)
	if err != nil {
		return nil, err
	}
	right, err := curvePlot("error by time", "seconds since the job started", metric, byTime, logScale)
	if err != nil {
		return nil, err
	}
	if len(recov) > 0 {
		var it, tm markers
		for i, r := range recov {
			if !finite(r.Noticed) || !finite(r.Resumed) {
				continue // not from a report (ParseReport refuses them)
			}
			name := fmt.Sprintf("R%d", i+1)
			it.add(float64(r.FromIteration), float64(r.FromIteration)+float64(r.Redone), fmt.Sprintf("%s→%d", name, r.FromIteration))
			tm.add(r.Noticed, r.Resumed, name)
		}
		left.Add(it)
		right.Add(tm)
	}
	for _, p := range []*plot.Plot{left, right} {
		setYRange(p, byIter, logScale)
		widen(&p.X)
	}
	subtitle := fmt.Sprintf("the %s of each iteration (report.json's %s), log scale", metricName(metric), metric)
	if !logScale {
		subtitle = fmt.Sprintf("the %s of each iteration (report.json's %s)", metricName(metric), metric)
	}
	if metric == ObjectiveRatio {
		subtitle += "; the history has no rel_err2"
	}
	if len(recov) > 0 {
		subtitle += "; dashed red: rollback R# to the checkpoint iteration it resumed from; shaded: iterations done again, time until resumed"
	}
	w, h := vg.Length(convergenceWidth), vg.Length(convergenceHeight)
	return &Figure{Width: w, Height: h, draw: func(c draw.Canvas) {
		fill(c, color.White)
		drawHeader(c, title, subtitle)
		pw := (w - 30) / 2
		left.Draw(rect(c, 10, headerHeight, pw, h-headerHeight-10))
		right.Draw(rect(c, 20+pw, headerHeight, pw, h-headerHeight-10))
	}}, nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// thin returns at most max points of hist: every s-th and the last.
func thin(hist []Point, max int) []Point {
	if len(hist) <= max {
		return hist
	}
	s := (len(hist) + max - 2) / (max - 1)
	var out []Point
	for i := 0; i < len(hist); i += s {
		out = append(out, hist[i])
	}
	if out[len(out)-1] != hist[len(hist)-1] {
		out = append(out, hist[len(hist)-1])
	}
	return out
}

// curvePlot is one panel: the curve xy, with dots when it has few points.
func curvePlot(title, xLabel string, metric Metric, xy plotter.XYs, logScale bool) (*plot.Plot, error) {
	p := newPlot(title, xLabel, metric.axisLabel())
	line, err := plotter.NewLine(xy)
	if err != nil {
		return nil, fmt.Errorf("figures: convergence curve: %w", err)
	}
	line.Color, line.Width = curveColor, vg.Points(2)
	p.Add(line, plotter.NewGrid())
	if len(xy) <= maxGlyphPoints {
		dots, err := plotter.NewScatter(xy)
		if err != nil {
			return nil, fmt.Errorf("figures: convergence curve: %w", err)
		}
		dots.GlyphStyle = draw.GlyphStyle{Color: curveColor, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
		p.Add(dots)
	}
	if logScale {
		p.Y.Scale = plot.LogScale{}
	}
	return p, nil
}

// setYRange sets the y axis of p to the values of xy, padded, and picks its ticks.
func setYRange(p *plot.Plot, xy plotter.XYs, logScale bool) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range xy {
		lo, hi = math.Min(lo, v.Y), math.Max(hi, v.Y)
	}
	if !logScale {
		p.Y.Min, p.Y.Max = lo, hi
		widen(&p.Y)
		return
	}
	// In decades: a flat curve gets 0.05 decades (12%) around it, and every range a pad of
	// 5%, as far as float64 goes (the range must stay above 0 and finite). The lowest value
	// (the last error, on a falling curve) gets a label of its own.
	least := lo
	llo, lhi := math.Log10(lo), math.Log10(hi)
	if w := lhi - llo; w < 0.05 {
		llo, lhi = llo-(0.05-w)/2, lhi+(0.05-w)/2
	}
	pad := 0.05 * (lhi - llo)
	if v := math.Pow(10, llo-pad); v > 0 && v < lo {
		lo = v
	}
	if v := math.Pow(10, lhi+pad); !math.IsInf(v, 0) && v > hi {
		hi = v
	}
	p.Y.Min, p.Y.Max = lo, hi
	p.Y.Tick.Marker = logTicks{least: least}
}

// widen gives a linear axis a range its ticks can divide: at least a millionth of its
// magnitude (gonum's ticks panic on a range that float64 cannot tell from a point, such as
// 1e20 to 1e20+1, which is what a single point at 1e20 gets).
func widen(a *plot.Axis) {
	lo, hi := a.Min, a.Max
	if math.IsInf(lo, 0) || math.IsInf(hi, 0) || lo > hi { // no data: the plot's default
		return
	}
	if hi-lo >= 1e-6*max(math.Abs(lo), math.Abs(hi)) && hi > lo {
		return
	}
	mid := lo/2 + hi/2
	d := max(1, math.Abs(mid)*0.01)
	a.Min, a.Max = max(mid-d, -math.MaxFloat64), min(mid+d, math.MaxFloat64)
}

// markers marks rollbacks on a panel: a dashed vertical line at each position, labelled,
// over a shaded band.
type markers struct {
	at, to []float64
	labels []string
}

func (m *markers) add(at, to float64, label string) {
	m.at, m.to, m.labels = append(m.at, at), append(m.to, to), append(m.labels, label)
}

var markerLine = draw.LineStyle{Color: rollbackColor, Width: vg.Points(1.5), Dashes: []vg.Length{vg.Points(6), vg.Points(4)}}

// Plot draws the bands, then the lines and their labels, staggered on three rows.
func (m markers) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	clampX := func(x vg.Length) vg.Length { return max(c.Min.X, min(c.Max.X, x)) }
	for i := range m.at {
		if m.to[i] > m.at[i] {
			x0, x1 := clampX(trX(m.at[i])), clampX(trX(m.to[i]))
			c.FillPolygon(lostColor, []vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}})
		}
	}
	sty := textStyle(smallSize, rollbackColor, text.XLeft, text.YTop)
	for i, at := range m.at {
		x := trX(at)
		if !c.ContainsX(x) {
			continue
		}
		c.StrokeLine2(markerLine, x, c.Min.Y, x, c.Max.Y)
		s := sty
		lx := x + vg.Points(3)
		if lx+sty.Width(m.labels[i]) > c.Max.X {
			s.XAlign, lx = text.XRight, x-vg.Points(3)
		}
		y := c.Max.Y - vg.Points(2+float64(i%3)*1.3*smallSize)
		c.FillText(s, vg.Point{X: lx, Y: y}, m.labels[i])
	}
}

// DataRange widens the x axis to the marks (and leaves the y axis to the curve).
func (m markers) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	for i := range m.at {
		xmin, xmax = math.Min(xmin, m.at[i]), math.Max(xmax, math.Max(m.at[i], m.to[i]))
	}
	return xmin, xmax, math.Inf(1), math.Inf(-1)
}
