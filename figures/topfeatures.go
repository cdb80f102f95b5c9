package figures

import (
	"fmt"
	"image/color"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/didnmf/didnmf/kernels"
)

// Layout of the top-features figure, in points (PNG pixels).
const (
	barPanelW      = 380
	barPanelBase   = 80 // title, x axis and padding
	barPerFeature  = 22
	barMaxCols     = 4
	barLabelWidth  = 150 // the widest label of a bar: longer names are cut
	barThickness   = 14
	barDefaultTop  = 10
	barMaxTop      = 50
	barFigureTitle = headerHeight
)

// TopIndices returns the top features of component i of the basis (m x k, row-major): the
// indices of its top largest values, largest first, ties broken by the lower index. It returns
// min(top, m) indices.
func TopIndices(basis []float64, m, k, i, top int) []int {
	return kernels.TopIndices(m, top, func(f int) float64 { return basis[f*k+i] })
}

// TopFeatures draws each component of the basis (m x k, row-major) as a horizontal bar chart
// of its top features (TopIndices; top <= 0 means 10, at most 50), largest on top, titled
// "component i+1" (numbered from 1, as basis.tsv's headers), four charts a row, the first MaxComponents components. Features
// are labelled names[j] when names has m entries (a name wider than 150 points is cut, the
// cut marked with an ellipsis, so that labels never reach into the bars or the next chart;
// control characters show as U+FFFD), else "feature j" (0-based). title heads the figure. Errors (a basis of the wrong length) wrap ErrInput.
func TopFeatures(title string, basis []float64, m, k, top int, names []string) (*Figure, error) {
	if m < 1 || k < 1 || len(basis)/k != m || len(basis)%k != 0 {
		return nil, inputErrorf("basis of %d values for %d features x %d components", len(basis), m, k)
	}
	if top <= 0 {
		top = barDefaultTop
	}
	top = min(top, barMaxTop, m)
	if len(names) != m {
		names = nil
	}
	shown := min(k, MaxComponents)
	subtitle := fmt.Sprintf("the %d largest features of each component, largest on top", top)
	if shown < k {
		subtitle += fmt.Sprintf("; components 0-%d of %d", shown-1, k)
	}
	panels := make([]*plot.Plot, shown)
	for i := range panels {
		p, err := barPanel(basis, m, k, i, top, names)
		if err != nil {
			return nil, err
		}
		panels[i] = p
	}
	cols := min(shown, barMaxCols)
	rows := (shown + cols - 1) / cols
	panelH := barPanelBase + barPerFeature*top
	W := vg.Length(max(cols*barPanelW+2*gridMargin, gridMinWidth))
	H := vg.Length(barFigureTitle + rows*panelH + gridMargin)
	x0 := (W - vg.Length(cols*barPanelW)) / 2
	return &Figure{Width: W, Height: H, draw: func(c draw.Canvas) {
		fill(c, color.White)
		drawHeader(c, title, subtitle)
		for i, p := range panels {
			x := x0 + vg.Length((i%cols)*barPanelW)
			y := vg.Length(barFigureTitle + (i/cols)*panelH)
			p.Draw(rect(c, x+4, y, barPanelW-8, vg.Length(panelH)-8))
		}
	}}, nil
}

// barPanel is the bar chart of component i's top features.
func barPanel(basis []float64, m, k, i, top int, names []string) (*plot.Plot, error) {
	idx := TopIndices(basis, m, k, i, top)
	// Bars go bottom-up: the largest is the last.
	vals := make(plotter.Values, len(idx))
	labels := make([]string, len(idx))
	var hi float64
	for n, f := range idx {
		v := basis[f*k+i]
		if !(v >= 0) || math.IsInf(v, 0) { // no bar for NaN, Inf or negative values
			v = 0
		}
		vals[len(idx)-1-n] = v
		hi = max(hi, v)
		label := fmt.Sprintf("feature %d", f)
		if names != nil && names[f] != "" {
			label = fitLabel(names[f], tickStyle(), barLabelWidth)
		}
		labels[len(idx)-1-n] = label
	}
	title := fmt.Sprintf("component %d", i+1)
	if hi == 0 {
		title += " (zero)"
	}
	p := newPlot(title, "weight", "")
	bars, err := plotter.NewBarChart(vals, barThickness)
	if err != nil {
		return nil, fmt.Errorf("figures: bar chart of component %d: %w", i, err)
	}
	bars.Horizontal = true
	bars.Color = barColor
	bars.LineStyle.Width = 0
	p.Add(bars)
	p.NominalY(labels...)
	p.X.Min = 0
	p.X.Max = min(hi*1.05, math.MaxFloat64)
	switch {
	case hi == 0:
		p.X.Max = 1
	case hi < 1e-300: // too small for the ticks to divide
		p.X.Max = 1e-300
	}
	return p, nil
}

// tickStyle is the style of the plots' tick labels (newPlot's).
func tickStyle() draw.TextStyle {
	return textStyle(tickSize, color.Black, text.XLeft, text.YCenter)
}

// fitLabel returns s drawn in sty at most w wide: s itself when it fits, else its longest
// prefix that fits with an ellipsis ("…") after it. Control characters, which a label cannot
// show (nor an SVG hold), become U+FFFD.
func fitLabel(s string, sty draw.TextStyle, w vg.Length) string {
	r := []rune(s)
	for i, c := range r {
		if unicode.IsControl(c) || c == utf8.RuneError {
			r[i] = utf8.RuneError
		}
	}
	s = string(r)
	if sty.Width(s) <= w {
		return s
	}
	// The longest prefix that fits: the width grows with the prefix.
	lo, hi := 0, len(r) // r[:lo]+"…" fits; r[:hi]+"…" does not (or hi == len(r))
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if sty.Width(string(r[:mid])+"…") <= w {
			lo = mid
		} else {
			hi = mid
		}
	}
	return strings.TrimRight(string(r[:lo]), " ") + "…"
}
