package figures

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// logTicks marks a logarithmic axis with labels at 1, 2 and 5 times the powers of ten, or
// more or fewer of the digits 1 to 9, so that at least three labels fall in the range; the
// other digits get unlabelled ticks. Over more than 12 decades it labels some powers of ten
// only. plot.LogTicks labels only powers of ten, which leaves a range such as 0.02 to 0.5
// with one label.
type logTicks struct {
	// least, when > 0, is a value to label too when no label falls within 25% of it: the
	// lowest point of a curve, the final error.
	least float64
}

var _ plot.Ticker = logTicks{}

// Ticks returns the ticks of [lo, hi] (none unless 0 < lo <= hi < Inf).
func (l logTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := l.ticks(lo, hi)
	if !(l.least >= lo && l.least <= hi) || len(ticks) == 0 {
		return ticks
	}
	for _, t := range ticks {
		if t.Label != "" && t.Value <= 1.25*l.least && t.Value >= l.least/1.25 {
			return ticks
		}
	}
	return append(ticks, plot.Tick{Value: l.least, Label: strconv.FormatFloat(l.least, 'g', 3, 64)})
}

// ticks are the ticks of Ticks without the least value's label.
func (logTicks) ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi >= lo) || math.IsInf(hi, 0) {
		return nil
	}
	e0, e1 := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	var ticks []plot.Tick
	if e1-e0 > 12 {
		step := (e1 - e0 + 7) / 8
		for e := e0; e <= e1; e++ {
			if v := digitPow(1, e); e%step == 0 && v >= lo && v <= hi {
				ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
			}
		}
		return ticks
	}
	sets := [][]bool{
		{1: true},
		{1: true, 2: true, 5: true},
		{1: true, 2: true, 3: true, 5: true},
		{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true, 9: true},
	}
	var labelled []bool
	for _, set := range sets {
		labelled = set
		n := 0
		for e := e0; e <= e1; e++ {
			for d := 1; d < len(set); d++ {
				if v := digitPow(d, e); set[d] && v >= lo && v <= hi {
					n++
				}
			}
		}
		if n >= 3 {
			break
		}
	}
	labels := 0
	for e := e0; e <= e1; e++ {
		for d := 1; d <= 9; d++ {
			v := digitPow(d, e)
			if v < lo || v > hi || v == 0 || math.IsInf(v, 0) {
				continue
			}
			t := plot.Tick{Value: v}
			if d < len(labelled) && labelled[d] {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
				labels++
			}
			ticks = append(ticks, t)
		}
	}
	if labels < 2 {
		// A range inside one step of the digits (0.1286 to 0.1632: a run that starts
		// close to where it ends) has at most one digit power: mark it as a linear axis
		// would; the ticks stand where their values are on the log scale too.
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	return ticks
}

// digitPow is d·10^e, the float64 nearest to it (2e-2 is 0.02, not 2*0.01).
func digitPow(d, e int) float64 {
	v, _ := strconv.ParseFloat(fmt.Sprintf("%de%d", d, e), 64)
	return v
}

// spacedTicks is a Ticker that keeps marker's ticks but drops any label that would overprint
// the label before it (in increasing value) on an axis length long: two labels must be
// apart by half the sum of their extents along the axis, plus gap. It places ticks with
// scale, the axis's own Normalizer, so it thins a log axis by the log positions.
type spacedTicks struct {
	marker plot.Ticker
	scale  plot.Normalizer
	length vg.Length
	extent func(label string) vg.Length // a label's size along the axis
	gap    vg.Length
}

var _ plot.Ticker = spacedTicks{}

// Ticks returns marker's ticks of [lo, hi], in increasing order, with the labels that would
// overprint removed (their ticks stay, unlabelled).
func (s spacedTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := slices.Clone(s.marker.Ticks(lo, hi))
	slices.SortStableFunc(ticks, func(a, b plot.Tick) int { return cmp.Compare(a.Value, b.Value) })
	var lastPos, lastExt vg.Length
	have := false
	for i, t := range ticks {
		if t.Label == "" {
			continue
		}
		pos := s.length * vg.Length(s.scale.Normalize(lo, hi, t.Value))
		ext := s.extent(t.Label)
		if have && pos-lastPos < (ext+lastExt)/2+s.gap {
			ticks[i].Label = ""
			continue
		}
		lastPos, lastExt, have = pos, ext, true
	}
	return ticks
}

// spaceTicks makes p's axes drop tick labels that would overprint when p is drawn on c: the
// y axis by the labels' heights, the x axis by their widths.
func spaceTicks(p *plot.Plot, c draw.Canvas) {
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		if s, ok := a.Tick.Marker.(spacedTicks); ok { // drawn before: measure afresh
			a.Tick.Marker = s.marker
		}
	}
	da := p.DataCanvas(c)
	size := da.Size()
	xs, ys := p.X.Tick.Label, p.Y.Tick.Label
	p.X.Tick.Marker = spacedTicks{marker: p.X.Tick.Marker, scale: p.X.Scale, length: size.X,
		extent: func(l string) vg.Length { return xs.Width(l) }, gap: vg.Points(6)}
	p.Y.Tick.Marker = spacedTicks{marker: p.Y.Tick.Marker, scale: p.Y.Scale, length: size.Y,
		extent: func(l string) vg.Length { return ys.Height(l) }, gap: vg.Points(2)}
}
