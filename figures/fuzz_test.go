package figures

import (
	"errors"
	"image"
	"math"
	"testing"
)

// FuzzParseReport feeds ParseReport arbitrary bytes: it must return a report that keeps its
// promises or an error wrapping ErrInput, never panic; a report it accepts must draw.
// The seeds are in testdata/fuzz/FuzzParseReport.
func FuzzParseReport(f *testing.F) {
	f.Add([]byte(`{"m": 4, "k": 2, "image_shape": [2, 2], "history": [{"iteration": 0, "seconds": 0, "objective_ratio": 1}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseReport("report.json", data)
		if err != nil {
			if !errors.Is(err, ErrInput) {
				t.Fatalf("%v does not wrap ErrInput", err)
			}
			return
		}
		if r.M < 1 || r.K < 1 || r.M > MaxBasisValues/r.K || r.N < 0 {
			t.Fatalf("accepted sizes m=%d n=%d k=%d", r.M, r.N, r.K)
		}
		if r.ImageShape != [2]int{} {
			if r.ImageShape[0]*r.ImageShape[1] != r.M {
				t.Fatalf("accepted image_shape %v for m=%d", r.ImageShape, r.M)
			}
			l := BasisLayout(r.K, r.ImageShape[0], r.ImageShape[1])
			for i := 0; i < l.Shown; i++ {
				if !l.Tile(i).In(image.Rect(0, 0, l.Width, l.Height)) {
					t.Fatalf("tile %d outside the figure", i)
				}
			}
		}
		for _, p := range r.History {
			for _, v := range []float64{p.Seconds, p.ObjectiveRatio, p.RelErr2, p.RMSE} {
				if !(v >= 0) || math.IsInf(v, 0) {
					t.Fatalf("accepted history value %v", v)
				}
			}
		}
		if len(r.History) > 0 {
			fig, err := Convergence("fuzz", r.History, r.Recoveries)
			if err != nil {
				t.Fatalf("Convergence of an accepted report: %v", err)
			}
			drawRecorded(fig)
		}
	})
}
