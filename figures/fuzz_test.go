package figures

import (
	"errors"
	"image"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
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

// FuzzReadBasisTSVNames feeds ReadBasisTSVNames arbitrary files of a 3 x 2 basis: it returns
// 3 valid UTF-8 names without tabs, nil, or an error wrapping ErrInput, never panics; the
// names it returns label bars no wider than a label may be. The seeds are in
// testdata/fuzz/FuzzReadBasisTSVNames.
func FuzzReadBasisTSVNames(f *testing.F) {
	f.Add([]byte("feature\tcomponent_1\tcomponent_2\na\t1\t2\nb\t0\t0\nc\t1e-300\t5\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), BasisTSVFile)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		names, err := ReadBasisTSVNames(path, 3, 2)
		if err != nil {
			if !errors.Is(err, ErrInput) {
				t.Fatalf("%v does not wrap ErrInput", err)
			}
			return
		}
		if names == nil {
			return
		}
		if len(names) != 3 {
			t.Fatalf("%d names for 3 features", len(names))
		}
		sty := tickStyle()
		for _, s := range names {
			if !utf8.ValidString(s) || strings.ContainsAny(s, "\t\n") {
				t.Fatalf("accepted name %q", s)
			}
			if l := fitLabel(s, sty, barLabelWidth); sty.Width(l) > barLabelWidth || !utf8.ValidString(l) {
				t.Fatalf("label %q of %q is %v wide", l, s, sty.Width(l))
			}
		}
	})
}
