package figures

import (
	"io"
	"path/filepath"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/didnmf/didnmf/internal/atomicfile"
)

// DPI is the resolution of the PNG files: 72 dots per inch, one pixel per point, so that a
// figure of Width x Height points is a PNG of Width x Height pixels and the layouts this
// package gives in pixels (see GridLayout) hold in the PNG exactly.
const DPI = 72

// Figure is a picture ready to be written: its size and how to draw it. The same drawing
// makes the PNG and the SVG file. Make one with Convergence, BasisGrid or TopFeatures.
type Figure struct {
	// Width and Height are the figure's size in points (and in pixels of its PNG).
	Width, Height vg.Length
	draw          func(c draw.Canvas)
}

// Draw draws the figure onto c, which should have the figure's size.
func (f *Figure) Draw(c draw.Canvas) { f.draw(c) }

// WritePNG writes the figure as a PNG image of Width x Height pixels.
func (f *Figure) WritePNG(w io.Writer) error {
	c := vgimg.NewWith(vgimg.UseWH(f.Width, f.Height), vgimg.UseDPI(DPI))
	f.draw(draw.New(c))
	_, err := vgimg.PngCanvas{Canvas: c}.WriteTo(w)
	return err
}

// WriteSVG writes the figure as an SVG image of Width x Height points. Its text names the
// Liberation fonts without embedding them.
func (f *Figure) WriteSVG(w io.Writer) error {
	c := vgsvg.New(f.Width, f.Height)
	f.draw(draw.New(c))
	_, err := c.WriteTo(w)
	return err
}

// Save writes the figure into dir as base.png and base.svg and returns their paths. Each file
// is written under a temporary name and renamed into place, so that a failure leaves no
// partial file and does not touch an earlier one.
func (f *Figure) Save(dir, base string) ([]string, error) {
	var written []string
	for _, out := range []struct {
		ext   string
		write func(io.Writer) error
	}{{".png", f.WritePNG}, {".svg", f.WriteSVG}} {
		path := filepath.Join(dir, base+out.ext)
		if err := atomicfile.Write(path, 0o644, out.write); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	return written, nil
}
