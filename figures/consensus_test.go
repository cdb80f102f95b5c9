package figures

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/sweep"
)

// densityOf is a sweep.Density of values for threshold.
func densityOf(values []float64, threshold float64) sweep.Density {
	d := sweep.Density{Neighbors: 3, Threshold: threshold, Values: values, Kept: make([]bool, len(values))}
	for i, v := range values {
		if v < threshold {
			d.Kept[i] = true
			d.NumKept++
		}
	}
	return d
}

// densityBar is a bar of the histogram in the SVG: its left and right x, its base and top y.
type densityBar struct{ x0, x1, y0, y1 float64 }

// densityBars returns the histogram's bars of fill style fill, read from the SVG, left to
// right (the legend's thumbnails, 20 points wide, left out).
func densityBars(t *testing.T, svg, fill string) []densityBar {
	var out []densityBar
	for _, p := range svgPaths(t, svg, fill) {
		if len(p) != 4 {
			continue
		}
		b := densityBar{x0: min(p[0].x, p[2].x), x1: max(p[0].x, p[2].x), y0: min(p[0].y, p[2].y), y1: max(p[0].y, p[2].y)}
		if math.Abs(b.x1-b.x0-20) < 0.01 && b.y1-b.y0 < 12 { // a legend thumbnail
			continue
		}
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b densityBar) int { return int(math.Copysign(1, a.x0-b.x0)) })
	return out
}

// TestDensityFigure checks the histogram numerically: every bar's height, read from the SVG,
// is its count times one scale (to half a pixel), its left edge is linear in its bin's lower
// bound, the threshold line sits at its value on that scale, and the PNG has the bar's
// colour at the bar's place.
func TestDensityFigure(t *testing.T) {
	for _, tc := range []struct {
		name      string
		values    []float64
		threshold float64
	}{
		{"cNMF's default with two outliers", []float64{0.05, 0.06, 0.06, 0.07, 0.07, 0.07, 0.08, 0.1, 0.12, 1.1, 1.2}, 0.5},
		{"threshold 2 keeps all", []float64{0.05, 0.3, 0.3, 0.9, 1.3}, 2},
		{"threshold below every value", []float64{0.4, 0.5, 0.6}, 0.1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := densityOf(tc.values, tc.threshold)
			fig, err := Density("density", d)
			if err != nil {
				t.Fatal(err)
			}
			pngPath, svg := render(t, fig)
			hi := tc.threshold
			for _, v := range tc.values {
				hi = max(hi, v)
			}
			keptBins, droppedBins := densityHistograms(tc.values, tc.threshold, hi)
			kept, dropped := densityBars(t, svg, "fill:#1F77B4"), densityBars(t, svg, "fill:#D62728")
			if len(kept) != len(keptBins) || len(dropped) != len(droppedBins) {
				t.Fatalf("%d blue and %d red bars, want %d and %d", len(kept), len(dropped), len(keptBins), len(droppedBins))
			}
			bars, bins := append(kept, dropped...), append(keptBins, droppedBins...)
			var total float64
			for _, b := range bins {
				total += b.Weight
			}
			if int(total) != len(tc.values) {
				t.Fatalf("the bins count %v values, want %d", total, len(tc.values))
			}
			first := bars[0]
			perCount := (first.y1 - first.y0) / bins[0].Weight
			perUnit := (first.x1 - first.x0) / (bins[0].Max - bins[0].Min)
			if perCount < 10 || perUnit < 100 {
				t.Fatalf("a count spans %.2f px, a unit of density %.2f px", perCount, perUnit)
			}
			for i, b := range bars {
				if math.Abs(b.y0-first.y0) > 0.5 || math.Abs(b.y1-b.y0-perCount*bins[i].Weight) > 0.5 {
					t.Errorf("bar %d (count %v) spans y %.2f..%.2f; want from %.2f, %.2f high", i, bins[i].Weight, b.y0, b.y1, first.y0, perCount*bins[i].Weight)
				}
				if want := first.x0 + perUnit*(bins[i].Min-bins[0].Min); math.Abs(b.x0-want) > 0.5 {
					t.Errorf("bar %d (from %v) at x %.2f, want %.2f", i, bins[i].Min, b.x0, want)
				}
			}
			line := svgPaths(t, svg, "stroke:#FF7F0E;stroke-width:2;stroke-dasharray")
			if len(line) != 1 || len(line[0]) != 2 {
				t.Fatalf("want one threshold line, found %v", line)
			}
			if want := first.x0 + perUnit*(tc.threshold-bins[0].Min); math.Abs(line[0][0].x-want) > 0.5 {
				t.Errorf("threshold %v drawn at x %.2f, want %.2f", tc.threshold, line[0][0].x, want)
			}
			// The PNG: the middle of each bar has its colour (the SVG's y runs up from the
			// bottom; the PNG's down from the top).
			img := readPNG(t, pngPath)
			h := float64(img.Bounds().Dy())
			for i, b := range bars {
				r, g, bl, _ := img.At(int((b.x0+b.x1)/2), int(h-(b.y0+b.y1)/2)).RGBA()
				want := [3]uint32{0x1f, 0x77, 0xb4}
				if i >= len(kept) {
					want = [3]uint32{0xd6, 0x27, 0x28}
				}
				if got := [3]uint32{r >> 8, g >> 8, bl >> 8}; got != want {
					t.Errorf("bar %d: PNG colour %x at its middle, want %x", i, got, want)
				}
			}
			for _, s := range []string{"threshold", "kept", "dropped"} {
				if !strings.Contains(svg, s) {
					t.Errorf("the figure does not say %q", s)
				}
			}
		})
	}
	if _, err := Density("x", sweep.Density{}); err == nil {
		t.Error("no densities: no error")
	}
	if _, err := Density("x", densityOf([]float64{math.NaN()}, 0.5)); err == nil {
		t.Error("NaN density: no error")
	}
}
