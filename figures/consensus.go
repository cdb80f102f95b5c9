package figures

import (
	"fmt"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/didnmf/didnmf/sweep"
)

// Size of the density figure, in points (PNG pixels), and its number of bins below the
// largest value shown.
const (
	densityWidth  = 900
	densityHeight = 560
	densityBins   = 40
)

// densityFilteredColor fills the bars of the spectra the filter drops.
var densityFilteredColor = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff} // red

// Density draws cNMF's diagnostic of its outlier filter (sweep.DensityFilter): the histogram
// of the spectra's local densities, the bars of the kept spectra (density below the
// threshold) blue and those of the dropped ones red, with the threshold as a dashed orange
// line labelled with the counts. The bins are of equal width, about 1/40 of the range
// from 0 to the larger of the largest density and the threshold, with the threshold on a
// bin edge, so that no bar holds both kept and dropped spectra. title heads the figure.
// Errors (no densities, or a NaN) wrap ErrInput.
func Density(title string, d sweep.Density) (*Figure, error) {
	if len(d.Values) == 0 {
		return nil, inputErrorf("no local densities: nothing to plot")
	}
	hi := d.Threshold
	for _, v := range d.Values {
		if !finite(v) || v < 0 {
			return nil, inputErrorf("local density %v: want a finite value >= 0", v)
		}
		hi = max(hi, v)
	}
	if !finite(hi) || hi <= 0 {
		hi = 1
	}
	kept, dropped := densityHistograms(d.Values, d.Threshold, hi)
	nearest := fmt.Sprintf("the %d nearest spectra", d.Neighbors)
	if d.Neighbors == 1 {
		nearest = "the nearest spectrum"
	}
	p := newPlot("local density: mean distance to "+nearest, "local density", "spectra")
	p.Add(plotter.NewGrid())
	for _, h := range []struct {
		bins []plotter.HistogramBin
		col  color.Color
		name string
	}{{kept, barColor, fmt.Sprintf("kept (density < %g): %d", d.Threshold, d.NumKept)},
		{dropped, densityFilteredColor, fmt.Sprintf("dropped as outliers: %d", len(d.Values)-d.NumKept)}} {
		if len(h.bins) == 0 {
			continue
		}
		hist := &plotter.Histogram{Bins: h.bins, Width: h.bins[0].Max - h.bins[0].Min, FillColor: h.col,
			LineStyle: draw.LineStyle{Color: color.White, Width: vg.Points(0.5)}}
		p.Add(hist)
		p.Legend.Add(h.name, hist)
	}
	p.X.Min = 0
	p.X.Max = hi * 1.05
	// The legend goes to the top corner away from the threshold's label, which is written at
	// the top beside the line.
	p.Legend.Top = true
	p.Legend.Left = d.Threshold > p.X.Max/2
	p.Y.Min = 0
	top := 0.0
	for _, b := range slices.Concat(kept, dropped) {
		top = max(top, b.Weight)
	}
	p.Y.Max = top * 1.25 // room for the legend and the label above the tallest bar
	label := fmt.Sprintf("threshold %g", d.Threshold)
	p.Add(sweepMark{k: d.Threshold, label: label})
	p.Y.Tick.Marker = countTicks{}
	subtitle := fmt.Sprintf("%d spectra; kept %d, dropped %d (cNMF's density filter: kept when the local density is below the threshold)",
		len(d.Values), d.NumKept, len(d.Values)-d.NumKept)
	w, h := vg.Length(densityWidth), vg.Length(densityHeight)
	return &Figure{Width: w, Height: h, draw: func(c draw.Canvas) {
		fill(c, color.White)
		drawHeader(c, title, subtitle)
		area := rect(c, 10, headerHeight, w-20, h-headerHeight-10)
		p.Draw(area)
	}}, nil
}

// densityHistograms bins values into equal bins from 0 past hi, one of whose edges is
// threshold (when it is above 0), and returns the counts of the values below the threshold
// (kept) and of the others (dropped), leaving out empty bins.
func densityHistograms(values []float64, threshold, hi float64) (kept, dropped []plotter.HistogramBin) {
	width := hi / densityBins
	start := 0.0
	if threshold > 0 && threshold <= hi {
		start = threshold - math.Ceil(threshold/width)*width // <= 0, an edge at threshold
	}
	n := int(math.Floor((hi-start)/width)) + 1
	counts := make([][2]float64, n) // kept, dropped
	for _, v := range values {
		b := min(max(int(math.Floor((v-start)/width)), 0), n-1)
		if v < threshold {
			counts[b][0]++
		} else {
			counts[b][1]++
		}
	}
	for b, cnt := range counts {
		lo := start + float64(b)*width
		if cnt[0] > 0 {
			kept = append(kept, plotter.HistogramBin{Min: lo, Max: lo + width, Weight: cnt[0]})
		}
		if cnt[1] > 0 {
			dropped = append(dropped, plotter.HistogramBin{Min: lo, Max: lo + width, Weight: cnt[1]})
		}
	}
	return kept, dropped
}

// countTicks marks an axis of counts at whole numbers: a label every 1, 2, 5, 10, ... so
// that there are at most 10.
type countTicks struct{}

// Ticks returns the ticks of [lo, hi].
func (countTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi >= lo) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return nil
	}
	step := 1.0
	for i := 0; (hi-lo)/step > 10; i++ {
		step *= []float64{2, 2.5, 2}[i%3]
	}
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: fmt.Sprint(int(v))})
	}
	return ticks
}
