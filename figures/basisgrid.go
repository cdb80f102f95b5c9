package figures

import (
	"fmt"
	"image"
	"image/color"

	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// MaxComponents is the most components a basis figure (BasisGrid or TopFeatures) shows: the
// first MaxComponents, with a note under the title when there are more.
const MaxComponents = 64

// Layout of the basis grid, in pixels of its PNG (points of its SVG).
const (
	gridMargin    = 16
	gridHeader    = headerHeight
	gridTileTitle = 22
	gridGapX      = 16
	gridGapY      = 12
	gridMaxCols   = 10
	gridMaxWidth  = 1600
	gridMinWidth  = 640
	// Tiles are images scaled by an integer factor to at least gridSmall pixels on their long
	// side, shown as they are up to gridLarge, and shrunk (averaging pixels) above it.
	gridSmall = 96
	gridLarge = 384
	// gridMinSide is the least a tile's short side is stretched to (for images of 1 x W).
	gridMinSide = 16
)

// GridLayout is where BasisGrid puts each component's picture: rectangles in pixels of the
// PNG file, origin at the top-left corner. Get it with BasisLayout.
type GridLayout struct {
	// Shown is the number of tiles: min(K, MaxComponents).
	Shown int
	// Cols and Rows of the grid, filled row by row.
	Cols, Rows int
	// TileW and TileH are a tile's size in pixels.
	TileW, TileH int
	// Width and Height are the figure's size in pixels.
	Width, Height int
	// x0 is the left edge of the first column.
	x0 int
}

// BasisLayout returns the layout of BasisGrid's figure of k components that are images of
// h x w pixels. The tiles are the images scaled up by a whole factor to at least 96 pixels on
// their long side (a 28x28 image is a 112x112 tile), shown at their size up to 384 pixels,
// and shrunk to 384 above it; at most 10 a row, the figure at most 1600 pixels wide.
func BasisLayout(k, h, w int) GridLayout {
	tw, th := tileSize(h, w)
	l := GridLayout{Shown: min(max(k, 0), MaxComponents), TileW: tw, TileH: th}
	l.Cols = max(1, min(l.Shown, gridMaxCols, (gridMaxWidth-2*gridMargin+gridGapX)/(tw+gridGapX)))
	l.Rows = max(1, (l.Shown+l.Cols-1)/l.Cols)
	gridW := l.Cols*tw + (l.Cols-1)*gridGapX
	l.Width = max(gridW+2*gridMargin, gridMinWidth)
	l.x0 = (l.Width - gridW) / 2
	l.Height = gridHeader + l.Rows*(gridTileTitle+th+gridGapY) - gridGapY + gridMargin
	return l
}

// tileSize is the size in pixels of the tile of an h x w image.
func tileSize(h, w int) (tw, th int) {
	h, w = max(h, 1), max(w, 1)
	s := max(h, w)
	switch {
	case s < gridSmall:
		f := (gridSmall + s - 1) / s
		tw, th = w*f, h*f
	case s <= gridLarge:
		tw, th = w, h
	default:
		tw, th = int(int64(w)*gridLarge/int64(s)), int(int64(h)*gridLarge/int64(s))
	}
	return max(tw, gridMinSide), max(th, gridMinSide)
}

// Tile returns the rectangle of tile i (component i, 0 <= i < Shown) in the PNG.
func (l GridLayout) Tile(i int) image.Rectangle {
	col, row := i%l.Cols, i/l.Cols
	x := l.x0 + col*(l.TileW+gridGapX)
	y := gridHeader + row*(gridTileTitle+l.TileH+gridGapY) + gridTileTitle
	return image.Rect(x, y, x+l.TileW, y+l.TileH)
}

// BasisGrid draws the basis (m x k, row-major: the k values of feature 0, then of feature 1,
// ...) as k grayscale images of h x w pixels, feature r*w+c being the pixel of row r, column c.
// Each image is scaled to its own maximum, which is white (0 is black), and titled
// "component i+1" (the basis' column i, numbered from 1 as basis.tsv's headers are). title heads the figure. The tiles lie where
// BasisLayout(k, h, w) says. Errors (a basis of the wrong length, h*w != m) wrap ErrInput.
func BasisGrid(title string, basis []float64, m, k, h, w int) (*Figure, error) {
	if m < 1 || k < 1 || len(basis)/k != m || len(basis)%k != 0 {
		return nil, inputErrorf("basis of %d values for %d features x %d components", len(basis), m, k)
	}
	if err := CheckImageShape([2]int{h, w}, m); err != nil {
		return nil, err
	}
	l := BasisLayout(k, h, w)
	tiles := make([]*image.Gray, l.Shown)
	zero := make([]bool, l.Shown)
	for i := range tiles {
		tiles[i], zero[i] = tileImage(basis, k, i, h, w, l.TileW, l.TileH)
	}
	subtitle := fmt.Sprintf("%dx%d images, each scaled to its own maximum (white)", h, w)
	if l.Shown < k {
		subtitle += fmt.Sprintf("; components 0-%d of %d", l.Shown-1, k)
	}
	W, H := vg.Length(l.Width), vg.Length(l.Height)
	return &Figure{Width: W, Height: H, draw: func(c draw.Canvas) {
		fill(c, color.White)
		drawHeader(c, title, subtitle)
		name := textStyle(smallSize, color.Black, text.XCenter, text.YBottom)
		for i, img := range tiles {
			r := l.Tile(i)
			frame := rect(c, vg.Length(r.Min.X-1), vg.Length(r.Min.Y-1), vg.Length(l.TileW+2), vg.Length(l.TileH+2))
			fill(frame, frameColor)
			tc := rect(c, vg.Length(r.Min.X), vg.Length(r.Min.Y), vg.Length(l.TileW), vg.Length(l.TileH))
			tc.DrawImage(tc.Rectangle, img)
			label := fmt.Sprintf("component %d", i+1)
			if zero[i] {
				label += " (zero)"
			}
			c.FillText(name, vg.Point{X: tc.Min.X + tc.Size().X/2, Y: tc.Max.Y + 5}, label)
		}
	}}, nil
}

// tileImage is component i of the basis as a tw x th grayscale image scaled to its maximum;
// each pixel is the mean of the image's pixels it covers (at least the one it falls on). zero
// reports a component that is all 0.
func tileImage(basis []float64, k, i, h, w, tw, th int) (img *image.Gray, zero bool) {
	var top float64
	for f := 0; f < h*w; f++ {
		top = max(top, basis[f*k+i])
	}
	img = image.NewGray(image.Rect(0, 0, tw, th))
	if !(top > 0) {
		return img, true
	}
	span := func(p, out, in int) (lo, hi int) {
		lo = int(int64(p) * int64(in) / int64(out))
		hi = max(int(int64(p+1)*int64(in)/int64(out)), lo+1)
		return lo, min(hi, in)
	}
	for py := 0; py < th; py++ {
		r0, r1 := span(py, th, h)
		for px := 0; px < tw; px++ {
			c0, c1 := span(px, tw, w)
			var sum float64
			for r := r0; r < r1; r++ {
				for c := c0; c < c1; c++ {
					sum += basis[(r*w+c)*k+i]
				}
			}
			v := sum / float64((r1-r0)*(c1-c0)) / top
			img.Pix[py*img.Stride+px] = uint8(min(255, max(0, v*255+0.5)))
		}
	}
	return img, false
}
