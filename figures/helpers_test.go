package figures

import (
	"bytes"
	"encoding/json"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/didnmf/didnmf/matio"
)

// writeBasis writes an m x k row-major basis as dir/basis.npy.
func writeBasis(t *testing.T, dir string, m, k int, basis []float64) {
	t.Helper()
	var buf bytes.Buffer
	if err := matio.WriteNPY(&buf, m, k, basis); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, BasisFile), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeReport writes rep as dir/report.json.
func writeReport(t *testing.T, dir string, rep map[string]any) {
	t.Helper()
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ReportFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// history is a decreasing history of n+1 points; withRelErr adds rel_err2 and rmse.
func history(n int, withRelErr bool) []map[string]any {
	var h []map[string]any
	for i := 0; i <= n; i++ {
		p := map[string]any{"iteration": i, "seconds": 0.05 + 0.1*float64(i),
			"objective_ratio": math.Pow(0.8, float64(i))}
		if withRelErr {
			p["rel_err2"] = 0.02 + 0.5*math.Pow(0.85, float64(i))
			p["rmse"] = 0.1 * math.Pow(0.9, float64(i))
		}
		h = append(h, p)
	}
	return h
}

// readPNG decodes the PNG file at path.
func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

// distinctColors counts the different colors of img.
func distinctColors(img image.Image) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
		}
	}
	return len(seen)
}

// checkNotBlank fails unless img has many colors and no one color covers nearly all of it.
func checkNotBlank(t *testing.T, name string, img image.Image) {
	t.Helper()
	if n := distinctColors(img); n < 20 {
		t.Errorf("%s: only %d distinct colors: blank?", name, n)
	}
	counts := map[[4]uint32]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			counts[[4]uint32{r, g, bl, a}]++
		}
	}
	for c, n := range counts {
		if float64(n) > 0.99*float64(b.Dx()*b.Dy()) {
			t.Errorf("%s: color %v covers %d of %d pixels", name, c, n, b.Dx()*b.Dy())
		}
	}
}

// countNear counts the pixels of img within tol (0-255 per channel) of the color c.
func countNear(img image.Image, c [3]int, tol int) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			d := max(abs(int(r>>8)-c[0]), abs(int(g>>8)-c[1]), abs(int(bl>>8)-c[2]))
			if d <= tol {
				n++
			}
		}
	}
	return n
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// luminance is the gray level (0-1) of pixel x, y.
func luminance(img image.Image, x, y int) float64 {
	r, g, b, _ := img.At(x, y).RGBA()
	return (0.299*float64(r) + 0.587*float64(g) + 0.114*float64(b)) / 0xffff
}

// correlation is Pearson's correlation of a and b (0 when either is constant).
func correlation(a, b []float64) float64 {
	var ma, mb float64
	for i := range a {
		ma += a[i]
		mb += b[i]
	}
	ma /= float64(len(a))
	mb /= float64(len(b))
	var sab, saa, sbb float64
	for i := range a {
		sab += (a[i] - ma) * (b[i] - mb)
		saa += (a[i] - ma) * (a[i] - ma)
		sbb += (b[i] - mb) * (b[i] - mb)
	}
	if saa == 0 || sbb == 0 {
		return 0
	}
	return sab / math.Sqrt(saa*sbb)
}

// sampleTile resamples the tile r of img back to h x w values: the mean luminance of each
// cell.
func sampleTile(img image.Image, r image.Rectangle, h, w int) []float64 {
	out := make([]float64, h*w)
	for i := 0; i < h; i++ {
		y0, y1 := r.Min.Y+i*r.Dy()/h, r.Min.Y+(i+1)*r.Dy()/h
		for j := 0; j < w; j++ {
			x0, x1 := r.Min.X+j*r.Dx()/w, r.Min.X+(j+1)*r.Dx()/w
			var s float64
			n := 0
			for y := y0; y < max(y1, y0+1); y++ {
				for x := x0; x < max(x1, x0+1); x++ {
					s += luminance(img, x, y)
					n++
				}
			}
			out[i*w+j] = s / float64(n)
		}
	}
	return out
}
