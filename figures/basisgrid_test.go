package figures

import (
	"image"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/didnmf/didnmf/internal/atomicfile"
)

// planted returns n distinct s x s pictures, values in [0, 1]: a horizontal bar, a vertical
// bar, a diagonal cross, a ring, a filled square in a corner, and a checkerboard.
func planted(s int) [][]float64 {
	pics := make([][]float64, 6)
	for i := range pics {
		pics[i] = make([]float64, s*s)
	}
	c := float64(s-1) / 2
	for r := 0; r < s; r++ {
		for col := 0; col < s; col++ {
			at := r*s + col
			if r >= s/2-1 && r <= s/2 {
				pics[0][at] = 1
			}
			if col >= s/4 && col < s/4+2 {
				pics[1][at] = 1
			}
			if r == col || r == s-1-col {
				pics[2][at] = 1
			}
			if d := math.Hypot(float64(r)-c, float64(col)-c); d > float64(s)/4 && d < float64(s)/4+2 {
				pics[3][at] = 1
			}
			if r < s/3 && col >= s-s/3 {
				pics[4][at] = 1
			}
			if (r/(s/4)+col/(s/4))%2 == 0 {
				pics[5][at] = 1
			}
		}
	}
	return pics
}

// plantedBasis is the m x k row-major basis whose column i is pics[i] times 0.3*(i+1) plus a
// little noise (so that each tile is scaled to its own maximum).
func plantedBasis(pics [][]float64) []float64 {
	m, k := len(pics[0]), len(pics)
	rng := rand.New(rand.NewPCG(1, 2))
	basis := make([]float64, m*k)
	for f := 0; f < m; f++ {
		for i := 0; i < k; i++ {
			basis[f*k+i] = pics[i][f]*0.3*float64(i+1) + 0.03*rng.Float64()
		}
	}
	return basis
}

func TestBasisGridPlantedImages(t *testing.T) {
	for _, tc := range []struct {
		name string
		h, w int
		// reportShape puts the shape in report.json; otherwise it is given in Options.
		reportShape bool
	}{
		{"8x8 from the report", 8, 8, true},
		{"16x16 from the options", 16, 16, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pics := planted(tc.h)
			m, k := tc.h*tc.w, len(pics)
			writeBasis(t, dir, m, k, plantedBasis(pics))
			rep := map[string]any{"m": m, "n": 100, "k": k, "algo": "did", "history": history(5, true)}
			var opts Options
			if tc.reportShape {
				rep["image_shape"] = []int{tc.h, tc.w}
			} else {
				opts.ImageShape = [2]int{tc.h, tc.w}
			}
			writeReport(t, dir, rep)
			written, err := WriteResult(dir, "", opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(written) != 4 || written[2] != filepath.Join(dir, "basis.png") {
				t.Fatalf("written %v", written)
			}
			img := readPNG(t, written[2])
			l := BasisLayout(k, tc.h, tc.w)
			if b := img.Bounds(); b.Dx() != l.Width || b.Dy() != l.Height {
				t.Fatalf("basis.png is %dx%d, layout says %dx%d", b.Dx(), b.Dy(), l.Width, l.Height)
			}
			if l.TileW < 64 || l.TileH < 64 || l.Width > 1600 {
				t.Errorf("layout %+v: tiles under 64 px or figure over 1600 px", l)
			}
			checkNotBlank(t, "basis.png", img)
			for i := range pics {
				got := sampleTile(img, l.Tile(i), tc.h, tc.w)
				for j := range pics {
					c := correlation(got, pics[j])
					if i == j && c < 0.9 {
						t.Errorf("tile %d: correlation %.3f with its planted picture, want > 0.9", i, c)
					}
					if i != j && c > 0.6 {
						t.Errorf("tile %d: correlation %.3f with planted picture %d, want it low", i, c, j)
					}
				}
			}
		})
	}
}

func TestBasisLayout(t *testing.T) {
	for _, tc := range []struct {
		k, h, w                   int
		cols, rows, shown, tw, th int
	}{
		{k: 10, h: 28, w: 28, cols: 10, rows: 1, shown: 10, tw: 112, th: 112},
		{k: 20, h: 28, w: 28, cols: 10, rows: 2, shown: 20, tw: 112, th: 112},
		{k: 3, h: 8, w: 8, cols: 3, rows: 1, shown: 3, tw: 96, th: 96},
		{k: 200, h: 16, w: 16, cols: 10, rows: 7, shown: MaxComponents, tw: 96, th: 96},
		{k: 4, h: 200, w: 300, cols: 4, rows: 1, shown: 4, tw: 300, th: 200},
		{k: 5, h: 1000, w: 500, cols: 5, rows: 1, shown: 5, tw: 192, th: 384},
		{k: 2, h: 1, w: 784, cols: 2, rows: 1, shown: 2, tw: 384, th: 16},
	} {
		l := BasisLayout(tc.k, tc.h, tc.w)
		if l.Cols != tc.cols || l.Rows != tc.rows || l.Shown != tc.shown || l.TileW != tc.tw || l.TileH != tc.th {
			t.Errorf("BasisLayout(%d, %d, %d) = %+v, want cols %d rows %d shown %d tile %dx%d",
				tc.k, tc.h, tc.w, l, tc.cols, tc.rows, tc.shown, tc.tw, tc.th)
		}
		if l.Width > 1600 {
			t.Errorf("BasisLayout(%d, %d, %d): %d px wide", tc.k, tc.h, tc.w, l.Width)
		}
		// Tiles lie inside the figure and do not overlap.
		for i := 0; i < l.Shown; i++ {
			r := l.Tile(i)
			if !r.In(image.Rect(0, 0, l.Width, l.Height)) {
				t.Errorf("BasisLayout(%d, %d, %d): tile %d %v outside %dx%d", tc.k, tc.h, tc.w, i, r, l.Width, l.Height)
			}
			if i > 0 && r.Overlaps(l.Tile(i-1)) {
				t.Errorf("BasisLayout(%d, %d, %d): tiles %d and %d overlap", tc.k, tc.h, tc.w, i-1, i)
			}
		}
	}
}

func TestBasisGridZeroComponentAndBadInput(t *testing.T) {
	pics := planted(8)
	basis := plantedBasis(pics[:2])
	for f := 0; f < 64; f++ {
		basis[f*2+1] = 0 // component 1 is all zero
	}
	fig, err := BasisGrid("t", basis, 64, 2, 8, 8)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "b.png")
	if err := atomicfile.Write(path, 0o644, fig.WritePNG); err != nil {
		t.Fatal(err)
	}
	img := readPNG(t, path)
	l := BasisLayout(2, 8, 8)
	for _, v := range sampleTile(img, l.Tile(1), 8, 8) {
		if v > 0.01 {
			t.Fatalf("the zero component's tile has a pixel of gray %.3f, want black", v)
		}
	}
	for _, tc := range []struct {
		name       string
		basis      []float64
		m, k, h, w int
	}{
		{"short basis", basis[:10], 64, 2, 8, 8},
		{"shape of another size", basis, 64, 2, 8, 7},
		{"no components", nil, 64, 0, 8, 8},
	} {
		if _, err := BasisGrid("t", tc.basis, tc.m, tc.k, tc.h, tc.w); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}
