package figures

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Font sizes in points (pixels in the PNG files).
const (
	figureTitleSize = 18
	panelTitleSize  = 15
	labelSize       = 14
	tickSize        = 12
	smallSize       = 12
)

// Colors of the figures.
var (
	curveColor    = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}  // blue
	rollbackColor = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}  // red
	lostColor     = color.NRGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0x30} // translucent red
	barColor      = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	frameColor    = color.Gray{Y: 0xa0}
	noteColor     = color.Gray{Y: 0x50}
)

// headerHeight is the height of a figure's title and subtitle, in points.
const headerHeight = 64

// drawHeader draws a figure's title and, below it, its subtitle (if any), centred on c, each
// shrunk to fit the width.
func drawHeader(c draw.Canvas, title, subtitle string) {
	w := c.Size().X
	line := func(s string, size vg.Length, col color.Color, y vg.Length) {
		s = truncate(s, 240)
		sty := textStyle(size, col, text.XCenter, text.YCenter)
		if tw := sty.Width(s); tw > w-20 {
			sty.Font.Size = max(8, size*(w-20)/tw)
		}
		c.FillText(sty, vg.Point{X: c.Min.X + w/2, Y: c.Max.Y - y}, s)
	}
	line(title, figureTitleSize, color.Black, 22)
	if subtitle != "" {
		line(subtitle, smallSize+1, noteColor, 48)
	}
}

// sans is the font of all text, at size points.
func sans(size vg.Length) font.Font {
	return font.Font{Typeface: "Liberation", Variant: "Sans", Size: size}
}

// textStyle is a plain text style in the sans font, aligned by xa, ya.
func textStyle(size vg.Length, c color.Color, xa text.XAlignment, ya text.YAlignment) draw.TextStyle {
	return draw.TextStyle{Color: c, Font: sans(size), XAlign: xa, YAlign: ya, Handler: plot.DefaultTextHandler}
}

// newPlot returns a plot with the fonts of this package.
func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = sans(panelTitleSize)
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = sans(labelSize)
		a.Tick.Label.Font = sans(tickSize)
	}
	p.Legend.TextStyle.Font = sans(smallSize)
	return p
}

// rect returns the rectangle of c that lies x points from the left and y points from the top
// of c, w points wide and h points high: layouts are computed from the top-left corner, as in
// the PNG, and vg's origin is the bottom-left corner.
func rect(c draw.Canvas, x, y, w, h vg.Length) draw.Canvas {
	top := c.Max.Y
	sub := c
	sub.Rectangle = vg.Rectangle{
		Min: vg.Point{X: c.Min.X + x, Y: top - y - h},
		Max: vg.Point{X: c.Min.X + x + w, Y: top - y},
	}
	return sub
}

// fill paints all of c with col.
func fill(c draw.Canvas, col color.Color) {
	c.SetColor(col)
	c.Fill(c.Rectangle.Path())
}

// truncate shortens s to at most n runes, marking the cut with "...".
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}
