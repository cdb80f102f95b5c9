package figures

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/didnmf/didnmf/sweep"
)

// Size of the sweep figure, in points (PNG pixels).
const (
	sweepWidth  = 1000
	sweepHeight = 900
)

// Colors of the sweep figure: the test error in the curve's blue, the train error lighter.
var (
	sweepTrainColor     = color.RGBA{R: 0x9e, G: 0xc5, B: 0xe5, A: 0xff} // light blue
	sweepStabilityColor = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff} // green
	sweepAgreementColor = color.Gray{Y: 0x80}
	sweepSuggestColor   = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff} // orange
	sweepCapColor       = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff} // red
)

// SweepNote is what a sweep knows beyond its summaries: the rank it suggests, the rule that
// chose it, and which runs stopped at a cap rather than by converging.
type SweepNote struct {
	// Suggested is the suggested rank (0, or a K that is not among the ranks: none marked).
	Suggested int
	// Rule says how Suggested was chosen; it is written, wrapped, under the panels.
	Rule string
	// Capped counts, for each rank, its runs that stopped at the iteration cap or the time
	// limit ("max-iter", "time-limit"): their rank's points are drawn as red triangles.
	Capped map[int]int
	// CannotTell is set when the sweep could not tell the rank (Suggested is then 0): the
	// figure says so in its subtitle. Unreliable, when not empty, says why the suggestion
	// may be wrong; it is written under the rule.
	CannotTell bool
	Unreliable string
}

// Sweep draws a rank sweep (sweep.Summarize's summaries, one per rank): two panels that
// share the K axis. The upper one has the mean test error (blue) and train error (light
// blue; blue without a test set) over the seeds of each rank against K, with bars of ± one
// standard error (none with one seed), on a logarithmic (log10) axis when any value is
// above 0. An error of 0 or below has no place on a log axis: such points are left out, and
// the legend names their ranks ("not on the log axis: error ≤ 0 at K=12"); only when no value
// is above 0 is the axis linear. A rank without a test error has no test point. A rank with
// a run that hit a cap (note.Capped) has its points drawn as red triangles instead of dots,
// and the legend counts them ("15 of 24 runs hit the iteration cap or time limit"). The
// lower panel has the stability, the silhouette of the seeds' components (green;
// sweep.Consensus), and the agreement (gray, dashed: the fraction of consensus components
// found exactly once by every seed), from 0 to 1; with one seed a note says that they are not
// defined. A dashed orange line marks note.Suggested in both panels, labelled
// "suggested K=7", when it is one of the ranks, and note.Rule is written, wrapped to the
// figure's width, under the panels, with note.Unreliable after "unreliable:" when set; the
// subtitle says "cannot tell the rank" when note.CannotTell, and how many folds (held-out
// sets) the test error's mean and standard error are over. Tick labels are thinned so that no two overprint. title
// heads the figure. Errors (no summaries) wrap ErrInput.
func Sweep(title string, s []sweep.RankSummary, note SweepNote) (*Figure, error) {
	if len(s) == 0 {
		return nil, inputErrorf("the sweep has no ranks: nothing to plot")
	}
	s = slices.Clone(s)
	slices.SortStableFunc(s, func(a, b sweep.RankSummary) int { return cmp.Compare(a.K, b.K) })
	suggested := note.Suggested

	// The error panel's values, and whether they fit a log scale: they do when any is above
	// 0; the others are left out and named.
	var test, train sweepSeries
	hasTest, oneSeed := false, true
	capped, total := 0, 0
	for _, r := range s {
		k := float64(r.K)
		c := min(note.Capped[r.K], r.Runs)
		capped, total = capped+max(c, 0), total+r.Runs
		train.add(k, r.Train, c > 0)
		if r.Test.N > 0 {
			test.add(k, r.Test, c > 0)
			hasTest = true
		}
		oneSeed = oneSeed && r.Runs <= 1
	}
	logScale := slices.ContainsFunc(train.xy, func(p plotter.XY) bool { return p.Y > 0 }) ||
		slices.ContainsFunc(test.xy, func(p plotter.XY) bool { return p.Y > 0 })
	var offLog []int // ranks with an error ≤ 0, not on the log axis
	if logScale {
		for _, ser := range []*sweepSeries{&train, &test} {
			for _, k := range ser.dropNonPositive() {
				if !slices.Contains(offLog, k) {
					offLog = append(offLog, k)
				}
			}
		}
		slices.Sort(offLog)
	}
	var all plotter.XYs
	for _, ser := range []*sweepSeries{&train, &test} {
		for i, p := range ser.xy {
			all = append(all, p)
			if hi := p.Y + ser.se[i]; finite(hi) {
				all = append(all, plotter.XY{X: p.X, Y: hi})
			}
			if lo := p.Y - ser.se[i]; finite(lo) {
				all = append(all, plotter.XY{X: p.X, Y: lo})
			}
		}
	}
	if logScale { // bars that reach 0 or below do not set the range
		all = slices.DeleteFunc(all, func(p plotter.XY) bool { return !(p.Y > 0) })
	}
	trainColor := color.Color(sweepTrainColor) // lighter than the test error's
	if !hasTest {
		trainColor = curveColor
	}
	errPanel := newPlot("error against the rank", "rank K", "relative error ||X-BC||² / ||X||²")
	if logScale {
		// gonum/plot places a vertical axis's label box at the value halfway between the
		// axis's ends in data units, which on a log axis is near the top: the box juts out
		// and pushes the panel down. The label goes into the title instead.
		errPanel.Y.Scale = plot.LogScale{}
		errPanel.Title.Text = "relative error ||X-BC||² / ||X||² against the rank, on a log10 axis"
		errPanel.Y.Label.Text = ""
	}
	errLegend := &sweepLegend{l: errPanel.Legend}
	errPanel.Add(plotter.NewGrid())
	for _, ser := range []struct {
		s     *sweepSeries
		color color.Color
		name  string
	}{{&train, trainColor, "train error"}, {&test, curveColor, "test error (held-out entries)"}} {
		if len(ser.s.xy) == 0 {
			continue
		}
		thumbs, err := ser.s.plotters(errPanel, ser.color, nil)
		if err != nil {
			return nil, err
		}
		errLegend.add(ser.name, thumbs...)
		errLegend.avoid(ser.s)
	}
	if capped > 0 {
		errLegend.add(fmt.Sprintf("a rank with runs that hit a cap: %d of %d runs hit the iteration cap or time limit", capped, total),
			capThumb{})
	}
	if len(offLog) > 0 {
		errLegend.add(fmt.Sprintf("not on the log axis: error ≤ 0 at K=%s", joinInts(offLog)))
	}
	if len(all) > 0 {
		setYRange(errPanel, all, logScale)
	}
	errLegend.l.Top = true             // errors fall with K: the upper right is most often free
	errLegend.topOffs = -vg.Points(24) // below the suggestion's label

	// The stability panel.
	var sil, agree sweepSeries
	for _, r := range s {
		k := float64(r.K)
		if v := r.Stability.Silhouette; finite(v) {
			sil.xy, sil.se = append(sil.xy, plotter.XY{X: k, Y: v}), append(sil.se, math.NaN())
		}
		if v := r.Stability.Agreement; finite(v) {
			agree.xy, agree.se = append(agree.xy, plotter.XY{X: k, Y: v}), append(agree.se, math.NaN())
		}
	}
	silName := "silhouette of the seeds' components (cNMF)"
	if s[0].K == 1 && !finite(s[0].Stability.Silhouette) {
		silName = "silhouette of the seeds' components (cNMF; none at K=1: one cluster)"
	}
	stPanel := newPlot("stability across seeds", "rank K", "silhouette, agreement")
	stLegend := &sweepLegend{l: stPanel.Legend}
	stPanel.Add(plotter.NewGrid())
	lo := 0.0
	for _, ser := range []struct {
		s      *sweepSeries
		color  color.Color
		dashes []vg.Length
		name   string
	}{{&sil, sweepStabilityColor, nil, silName},
		{&agree, sweepAgreementColor, []vg.Length{vg.Points(6), vg.Points(4)}, "agreement: components found once by every seed"}} {
		if len(ser.s.xy) == 0 {
			continue
		}
		thumbs, err := ser.s.plotters(stPanel, ser.color, ser.dashes)
		if err != nil {
			return nil, err
		}
		stLegend.add(ser.name, thumbs...)
		stLegend.avoid(ser.s)
		for _, p := range ser.s.xy {
			lo = min(lo, p.Y)
		}
	}
	stPanel.Y.Min, stPanel.Y.Max = lo-0.05, 1.05
	stLegend.l.Left = true // stability is highest at small K: the lower left is most often free
	stLegend.topOffs = -vg.Points(24)
	if len(sil.xy) == 0 && len(agree.xy) == 0 {
		note := "not defined: it needs two seeds or more per rank"
		if !oneSeed {
			note = "not defined at these ranks (K = 1 has no silhouette)"
		}
		stPanel.Add(sweepNote{note})
	}

	// The shared K axis, in whole ranks, and the suggestion.
	kmin, kmax := float64(s[0].K), float64(s[len(s)-1].K)
	pad := max(0.5, 0.03*(kmax-kmin))
	if kmin == kmax {
		pad = 1
	}
	marked := slices.ContainsFunc(s, func(r sweep.RankSummary) bool { return r.K == suggested })
	for i, p := range []*plot.Plot{errPanel, stPanel} {
		p.X.Min, p.X.Max = kmin-pad, kmax+pad
		p.X.Tick.Marker = rankTicks{}
		if marked {
			label := ""
			if i == 0 {
				label = fmt.Sprintf("suggested K=%d", suggested)
			}
			m := sweepMark{k: float64(suggested), label: label}
			p.Add(m)
			[]*sweepLegend{errLegend, stLegend}[i].mark = &m
		}
	}
	errPanel.Add(errLegend) // last: over the curves, beside the mark (or under it when it cannot be)
	stPanel.Add(stLegend)

	subtitle := "the mean over the seeds of each rank, bars ± one standard error"
	if oneSeed {
		subtitle = "one seed per rank: no error bars, no stability"
	}
	folds := 0
	for _, r := range s {
		folds = max(folds, len(r.Folds))
	}
	switch {
	case !hasTest:
		subtitle += "; no test set: train error only"
	case folds > 1:
		subtitle += fmt.Sprintf("; test error over %d folds (held-out sets)", folds)
	default:
		subtitle += "; one held-out set: no spread of the test error"
	}
	if logScale {
		subtitle += "; error on a log scale"
	}
	if marked {
		subtitle += fmt.Sprintf("; dashed orange: the suggested rank K=%d", suggested)
	}
	if capped > 0 {
		subtitle += fmt.Sprintf("; red triangles: %d of %d runs hit a cap", capped, total)
	}
	if note.CannotTell {
		subtitle += "; cannot tell the rank"
	}
	w, h := vg.Length(sweepWidth), vg.Length(sweepHeight)
	ruleStyle := textStyle(smallSize+1, noteColor, text.XLeft, text.YTop)
	var ruleLines []string
	if note.Rule != "" {
		ruleLines = wrapText(ruleStyle, "rule: "+note.Rule, w-40)
	}
	if note.Unreliable != "" {
		ruleLines = append(ruleLines, wrapText(ruleStyle, "unreliable: "+note.Unreliable, w-40)...)
	}
	lineH := ruleStyle.FontExtents().Height
	footer := vg.Length(len(ruleLines))*lineH + 10
	return &Figure{Width: w, Height: h, draw: func(c draw.Canvas) {
		fill(c, color.White)
		drawHeader(c, title, subtitle)
		area := rect(c, 10, headerHeight, w-20, h-headerHeight-footer)
		tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(16)}
		canvases := plot.Align([][]*plot.Plot{{errPanel}, {stPanel}}, tiles, area)
		for i, p := range []*plot.Plot{errPanel, stPanel} {
			spaceTicks(p, canvases[i][0])
			p.Draw(canvases[i][0])
		}
		for i, line := range ruleLines {
			c.FillText(ruleStyle, vg.Point{X: c.Min.X + 20, Y: c.Min.Y + footer - 4 - vg.Length(i)*lineH}, line)
		}
	}}, nil
}

// joinInts writes ks as "3, 5, 9".
func joinInts(ks []int) string {
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = strconv.Itoa(k)
	}
	return strings.Join(parts, ", ")
}

// wrapText breaks s at spaces into lines no wider than width in style ts (a word wider than
// width gets a line of its own).
func wrapText(ts draw.TextStyle, s string, width vg.Length) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && ts.Width(line+" "+word) > width {
			lines, line = append(lines, line), word
			continue
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// capThumb is the legend's thumbnail of a capped rank's point: a red triangle.
type capThumb struct{}

// Thumbnail draws the triangle.
func (capThumb) Thumbnail(c *draw.Canvas) {
	c.DrawGlyph(capGlyph, vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: (c.Min.Y + c.Max.Y) / 2})
}

// capGlyph marks the points of ranks with a run that hit a cap.
var capGlyph = draw.GlyphStyle{Color: sweepCapColor, Radius: vg.Points(4.5), Shape: draw.PyramidGlyph{}}

// sweepSeries is one curve of the sweep figure: its points and, for each, the half height of
// its bar (NaN: none).
type sweepSeries struct {
	xy     plotter.XYs
	se     []float64
	capped []bool // the point's rank has a run that hit a cap
}

// add adds the mean of st at k, if it is a number, with its standard error; capped says
// that a run of the rank hit a cap.
func (s *sweepSeries) add(k float64, st sweep.ErrorStats, capped bool) {
	if !finite(st.Mean) {
		return
	}
	s.xy, s.se = append(s.xy, plotter.XY{X: k, Y: st.Mean}), append(s.se, st.SE)
	s.capped = append(s.capped, capped)
}

// dropNonPositive removes the points at or below 0 (which a log axis cannot place) and
// returns their ranks.
func (s *sweepSeries) dropNonPositive() []int {
	var dropped []int
	j := 0
	for i, p := range s.xy {
		if !(p.Y > 0) {
			dropped = append(dropped, int(p.X))
			continue
		}
		s.xy[j], s.se[j], s.capped[j] = p, s.se[i], s.capped[i]
		j++
	}
	s.xy, s.se, s.capped = s.xy[:j], s.se[:j], s.capped[:j]
	return dropped
}

// plotters adds the series to p as a line with dots and its bars, and returns the line and
// dots for the legend.
func (s *sweepSeries) plotters(p *plot.Plot, col color.Color, dashes []vg.Length) ([]plot.Thumbnailer, error) {
	line, err := plotter.NewLine(s.xy)
	if err != nil {
		return nil, fmt.Errorf("figures: sweep curve: %w", err)
	}
	line.Color, line.Width, line.Dashes = col, vg.Points(2), dashes
	dots, err := plotter.NewScatter(s.xy)
	if err != nil {
		return nil, fmt.Errorf("figures: sweep curve: %w", err)
	}
	circle := draw.GlyphStyle{Color: col, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}
	dots.GlyphStyle = circle
	dots.GlyphStyleFunc = func(i int) draw.GlyphStyle {
		if i < len(s.capped) && s.capped[i] {
			return capGlyph
		}
		return circle
	}
	p.Add(sweepBars{xy: s.xy, se: s.se, color: col}, line, dots)
	return []plot.Thumbnailer{line, dots}, nil
}

// sweepBars draws a vertical bar with caps from y-se to y+se at each point with a finite se
// above 0, cut to the panel (on a log scale, a bar down to 0 or below runs to the bottom).
type sweepBars struct {
	xy    plotter.XYs
	se    []float64
	color color.Color
}

// Plot draws the bars.
func (b sweepBars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	sty := draw.LineStyle{Color: b.color, Width: vg.Points(1.5)}
	_, logScale := p.Y.Scale.(plot.LogScale)
	for i, pt := range b.xy {
		if !finite(b.se[i]) || !(b.se[i] > 0) {
			continue
		}
		x := trX(pt.X)
		if !c.ContainsX(x) {
			continue
		}
		yl, yh := c.Min.Y, min(c.Max.Y, trY(pt.Y+b.se[i]))
		if lo := pt.Y - b.se[i]; !logScale || lo > 0 {
			yl = max(c.Min.Y, trY(lo))
		}
		c.StrokeLine2(sty, x, yl, x, yh)
		for _, y := range []vg.Length{yl, yh} {
			if y > c.Min.Y && y < c.Max.Y {
				c.StrokeLine2(sty, x-vg.Points(4), y, x+vg.Points(4), y)
			}
		}
	}
}

// sweepMark marks the suggested rank: a dashed vertical line, labelled at its top when label
// is not empty.
type sweepMark struct {
	k     float64
	label string
}

// sweepMarkWidth is the width of the mark's line.
const sweepMarkWidth = 2

// line strokes the mark's line, when its K is in c, and returns its x (ok false: not in c).
func (m sweepMark) line(c draw.Canvas, p *plot.Plot) (x vg.Length, ok bool) {
	trX, _ := p.Transforms(&c)
	x = trX(m.k)
	if !c.ContainsX(x) {
		return x, false
	}
	sty := draw.LineStyle{Color: sweepSuggestColor, Width: vg.Points(sweepMarkWidth), Dashes: []vg.Length{vg.Points(7), vg.Points(4)}}
	c.StrokeLine2(sty, x, c.Min.Y, x, c.Max.Y)
	return x, true
}

// Plot draws the mark.
func (m sweepMark) Plot(c draw.Canvas, p *plot.Plot) {
	x, ok := m.line(c, p)
	if !ok {
		return
	}
	if m.label == "" {
		return
	}
	ts := textStyle(smallSize+1, sweepSuggestColor, text.XLeft, text.YTop)
	lx := x + vg.Points(4)
	if lx+ts.Width(m.label) > c.Max.X {
		ts.XAlign, lx = text.XRight, x-vg.Points(4)
	}
	c.FillText(ts, vg.Point{X: lx, Y: c.Max.Y - vg.Points(4)}, m.label)
}

// sweepLegend draws a legend on a translucent white box, over the curves (a plot's own legend
// has no box, and is drawn under nothing), in the corner of its panel that covers the fewest
// of the panel's points, then does not cross the suggestion's mark, then covers the fewest
// stretches of its curves and bars (ties go to the corner its Legend's Top and Left name,
// then to the top right, top left, bottom left and bottom right), so that no point hides
// under it when a corner is free, and the mark's line is not broken by it. When every corner
// crosses the mark (a legend wider than the room beside it), the mark's line is drawn again
// over the box, under the legend's entries.
type sweepLegend struct {
	l       plot.Legend
	names   []string
	series  []*sweepSeries
	mark    *sweepMark // the suggestion's (nil: none)
	topOffs vg.Length  // moves the legend down in a top corner (below the suggestion's label)
}

// add adds an entry.
func (g *sweepLegend) add(name string, thumbs ...plot.Thumbnailer) {
	g.l.Add(name, thumbs...)
	g.names = append(g.names, name)
}

// avoid adds a series whose points and curve the legend should not cover.
func (g *sweepLegend) avoid(s *sweepSeries) { g.series = append(g.series, s) }

// legendPad is the room between the legend's text and the edge of its box, and between the
// box and the panel's edges.
const legendPad = 4

// Plot draws the legend, if it has entries.
func (g *sweepLegend) Plot(c draw.Canvas, p *plot.Plot) {
	n := len(g.names)
	if n == 0 {
		return
	}
	var width, enth vg.Length
	sty := g.l.TextStyle
	for _, name := range g.names {
		width = max(width, g.l.ThumbnailWidth+sty.Width(" "+name)+sty.Width(" "))
		enth = max(enth, sty.Rectangle(name).Max.Y)
	}
	height := vg.Length(n)*enth + vg.Length(n-1)*g.l.Padding + sty.FontExtents().Descent
	// box is the legend's box in a corner, its padding included.
	box := func(top, left bool) vg.Rectangle {
		r := vg.Rectangle{Min: vg.Point{X: c.Max.X - width - 2*legendPad, Y: c.Min.Y + 2*legendPad}}
		if left {
			r.Min.X = c.Min.X + 2*legendPad
		}
		if top {
			r.Min.Y = c.Max.Y - height - 2*legendPad + g.topOffs
		}
		r.Min.X, r.Min.Y = r.Min.X-legendPad, r.Min.Y-legendPad
		r.Max = vg.Point{X: r.Min.X + width + 2*legendPad, Y: r.Min.Y + height + 2*legendPad}
		return r
	}
	type corner struct{ top, left bool }
	corners := []corner{{g.l.Top, g.l.Left}, {true, false}, {true, true}, {false, true}, {false, false}}
	best, bestCost := corners[0], math.Inf(1)
	for _, cn := range corners {
		if cost := g.cover(c, p, box(cn.top, cn.left)); cost < bestCost {
			best, bestCost = cn, cost
		}
	}
	b := box(best.top, best.left)
	c.FillPolygon(color.NRGBA{R: 0xff, G: 0xff, B: 0xff, A: 0xe0}, []vg.Point{b.Min, {X: b.Max.X, Y: b.Min.Y}, b.Max, {X: b.Min.X, Y: b.Max.Y}})
	if g.crossesMark(c, p, b) {
		g.mark.line(c, p) // the same dashes over the box: the line is whole
	}
	l := g.l
	l.Top, l.Left = best.top, best.left
	// The legend draws its entries from the canvas's edge: moved in to the box.
	l.XOffs, l.YOffs = -2*legendPad, 2*legendPad
	if best.left {
		l.XOffs = 2 * legendPad
	}
	if best.top {
		l.YOffs = g.topOffs - 2*legendPad
	}
	l.Draw(c)
}

// crossesMark tells whether the box r crosses the line of the legend's mark, with a margin
// of the line's width on each side.
func (g *sweepLegend) crossesMark(c draw.Canvas, p *plot.Plot, r vg.Rectangle) bool {
	if g.mark == nil {
		return false
	}
	trX, _ := p.Transforms(&c)
	x := trX(g.mark.k)
	return c.ContainsX(x) && x+vg.Points(sweepMarkWidth) >= r.Min.X && x-vg.Points(sweepMarkWidth) <= r.Max.X
}

// markCost is the cost of a legend crossing the suggestion's mark: less than a point hidden,
// more than the curves under any legend box.
const markCost = 500

// cover is how much of the series a legend in box r would hide: 1000 for each point (with
// its glyph), markCost when r crosses the suggestion's mark, and 1 for each of the samples,
// 2 points apart, of the curves and bars under r.
func (g *sweepLegend) cover(c draw.Canvas, p *plot.Plot, r vg.Rectangle) float64 {
	trX, trY := p.Transforms(&c)
	in := func(x, y vg.Length, margin vg.Length) bool {
		return x >= r.Min.X-margin && x <= r.Max.X+margin && y >= r.Min.Y-margin && y <= r.Max.Y+margin
	}
	segment := func(x0, y0, x1, y1 vg.Length) float64 {
		steps := int(math.Hypot(float64(x1-x0), float64(y1-y0))/2) + 1
		n := 0.0
		for i := 0; i <= steps; i++ {
			f := vg.Length(float64(i) / float64(steps))
			if in(x0+f*(x1-x0), y0+f*(y1-y0), 0) {
				n++
			}
		}
		return n
	}
	cost := 0.0
	if g.crossesMark(c, p, r) {
		cost += markCost
	}
	for _, s := range g.series {
		for i, pt := range s.xy {
			x, y := trX(pt.X), trY(pt.Y)
			if in(x, y, capGlyph.Radius) {
				cost += 1000
			}
			if i > 0 {
				cost += segment(trX(s.xy[i-1].X), trY(s.xy[i-1].Y), x, y)
			}
			if se := s.se[i]; finite(se) && se > 0 {
				hi, lo := min(c.Max.Y, trY(pt.Y+se)), c.Min.Y
				if _, logScale := p.Y.Scale.(plot.LogScale); !logScale || pt.Y-se > 0 {
					lo = max(c.Min.Y, trY(pt.Y-se))
				}
				cost += segment(x, lo, x, hi)
			}
		}
	}
	return cost
}

// sweepNote writes a note in the middle of a panel that has no data.
type sweepNote struct{ text string }

// Plot writes the note.
func (n sweepNote) Plot(c draw.Canvas, _ *plot.Plot) {
	ts := textStyle(labelSize, noteColor, text.XCenter, text.YCenter)
	c.FillText(ts, vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: (c.Min.Y + c.Max.Y) / 2}, n.text)
}

// rankTicks marks an axis of ranks at whole numbers: a label every 1, 2, 5, 10, 20, ...
// ranks, so that there are at most 15, and an unlabelled tick at every rank between them
// when there are not too many.
type rankTicks struct{}

// Ticks returns the ticks of [lo, hi].
func (rankTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi >= lo) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return nil
	}
	step := 1.0
	for i := 0; (hi-lo)/step > 15; i++ {
		step *= []float64{2, 2.5, 2}[i%3] // 1, 2, 5, 10, 20, 50, ...
	}
	var ticks []plot.Tick
	first, last := math.Ceil(lo), math.Floor(hi)
	if last-first > 200 { // labels only
		for k := math.Ceil(lo/step) * step; k <= hi; k += step {
			ticks = append(ticks, plot.Tick{Value: k, Label: strconv.Itoa(int(k))})
		}
		return ticks
	}
	for k := first; k <= last; k++ {
		if math.Mod(k, step) == 0 {
			ticks = append(ticks, plot.Tick{Value: k, Label: strconv.Itoa(int(k))})
		} else if step > 1 {
			ticks = append(ticks, plot.Tick{Value: k})
		}
	}
	return ticks
}
