package figures

import (
	"bytes"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/recorder"
)

// points turns history(n, withRelErr) into Points.
func points(n int, withRelErr bool) []Point {
	var out []Point
	for _, h := range history(n, withRelErr) {
		p := Point{Iteration: h["iteration"].(int), Seconds: h["seconds"].(float64), ObjectiveRatio: h["objective_ratio"].(float64)}
		if withRelErr {
			p.RelErr2, p.RMSE = h["rel_err2"].(float64), h["rmse"].(float64)
		}
		out = append(out, p)
	}
	return out
}

// render writes fig as PNG and SVG into a temporary directory and returns the decoded PNG's
// path and the SVG text.
func render(t *testing.T, fig *Figure) (pngPath, svg string) {
	t.Helper()
	paths, err := fig.Save(t.TempDir(), "fig")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := fig.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	return paths[0], buf.String()
}

func TestConvergence(t *testing.T) {
	red := [3]int{0xd6, 0x27, 0x28}
	for _, tc := range []struct {
		name  string
		hist  []Point
		recov []Rollback
		// svgHas and svgHasNot are texts the SVG must and must not hold.
		svgHas, svgHasNot []string
	}{
		{"rel_err2", points(40, true), nil,
			[]string{"relative error ||X-BC||² / ||X||²", "iteration", "seconds since the job started", "my run"},
			[]string{"objective ratio", "R1"}},
		{"no rel_err2: objective_ratio", points(40, false), nil,
			[]string{"objective ratio ||X-BC||² / ||X-B0C0||²", "the history has no rel_err2"},
			[]string{"relative error ||"}},
		{"recoveries", points(60, true), []Rollback{
			{FromIteration: 20, Redone: 6, Noticed: 2.7, Resumed: 3.5, Cause: "node lost"},
			{FromIteration: 40, Redone: 2, Noticed: 4.6, Resumed: 5.0}},
			[]string{"R1→20", "R2→40", ">R1<", ">R2<", "dashed red: rollback"}, nil},
		{"a recovery that never resumed", points(10, true), []Rollback{{FromIteration: 5, Noticed: 0.9}},
			[]string{"R1→5"}, nil},
		{"one point", points(0, true), nil, []string{"relative error"}, nil},
		{"flat", []Point{{0, 0, 1, 0.5, 0}, {1, 1, 1, 0.5, 0}, {2, 2, 1, 0.5, 0}}, nil, []string{"relative error"}, nil},
		{"zeros left out", []Point{{0, 0, 1, 0.5, 0}, {1, 1, 0.5, 0, 0}, {2, 2, 0.2, 0.1, 0}}, nil, []string{"log scale"}, nil},
		{"all zero: linear", []Point{{0, 0, 0, 0, 0}, {1, 1, 0, 0, 0}}, nil, []string{"objective ratio"}, []string{"log scale"}},
		{"extreme values", []Point{{0, 0, 1, 1e300, 0}, {1, 1e300, 1, 1e-300, 0}, {1 << 40, 1e-300, 1, 5e-324, 0}}, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fig, err := Convergence("my run", tc.hist, tc.recov)
			if err != nil {
				t.Fatal(err)
			}
			pngPath, svg := render(t, fig)
			img := readPNG(t, pngPath)
			if b := img.Bounds(); b.Dx() != int(fig.Width) || b.Dy() != int(fig.Height) || b.Dx() < 800 || b.Dx() > 1600 {
				t.Errorf("PNG %dx%d, figure %vx%v", b.Dx(), b.Dy(), fig.Width, fig.Height)
			}
			checkNotBlank(t, "convergence.png", img)
			if n := countNear(img, red, 10); (len(tc.recov) > 0) != (n > 100) {
				t.Errorf("%d rollback-red pixels with %d recoveries", n, len(tc.recov))
			}
			for _, s := range tc.svgHas {
				if !strings.Contains(svg, s) {
					t.Errorf("the SVG does not say %q", s)
				}
			}
			for _, s := range tc.svgHasNot {
				if strings.Contains(svg, s) {
					t.Errorf("the SVG says %q", s)
				}
			}
		})
	}
}

func TestConvergenceEmpty(t *testing.T) {
	if _, err := Convergence("t", nil, nil); !errors.Is(err, ErrInput) {
		t.Errorf("empty history: %v", err)
	}
}

// TestConvergenceCallerValues: values no report holds (ParseReport refuses them), from a
// caller of Convergence, give an error or a figure, not a panic.
func TestConvergenceCallerValues(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hist  []Point
		recov []Rollback
	}{
		{"negative", []Point{{0, 0, -1e20, 0, 0}}, nil},
		{"NaN", []Point{{0, math.NaN(), 1, 0.5, 0}, {1, 1, 1, 0.4, 0}}, nil},
		{"Inf", []Point{{0, 0, 1, math.Inf(1), 0}, {1, 1, 1, 0.4, 0}}, nil},
		{"NaN rollback", points(5, true), []Rollback{{FromIteration: 2, Noticed: math.NaN(), Resumed: math.Inf(1)}}},
		{"negative iterations", []Point{{-5, -3, 1, 0.5, 0}, {-4, -2, 1, 0.4, 0}}, []Rollback{{FromIteration: -9, Redone: -3}}},
	} {
		fig, err := Convergence(tc.name, tc.hist, tc.recov)
		if err == nil {
			render(t, fig)
		}
	}
}

func TestThin(t *testing.T) {
	hist := points(10000, true)
	got := thin(hist, 4000)
	if len(got) > 4000 || len(got) < 3000 {
		t.Errorf("thin to 4000: %d points", len(got))
	}
	if got[0] != hist[0] || got[len(got)-1] != hist[len(hist)-1] {
		t.Errorf("thin lost the first or the last point")
	}
	if len(thin(hist[:50], 4000)) != 50 {
		t.Errorf("thin changed a short history")
	}
}

func TestLogTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   []string // labels
	}{
		{0.02, 0.5, []string{"0.02", "0.05", "0.1", "0.2", "0.5"}},
		{0.3, 0.9, []string{"0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"}},
		{1e-6, 1, []string{"1e-06", "1e-05", "0.0001", "0.001", "0.01", "0.1", "1"}},
		{0.15, 2.5, []string{"0.2", "0.5", "1", "2"}},
		// A range with at most one digit power (the demo's Fashion-MNIST run from its k-means
		// start) gets linear ticks, not a bare axis.
		{0.1286, 0.1632, []string{"0.13", "0.14", "0.15", "0.16"}},
		{1e-300, 1e300, []string{"1e-300", "1e-225", "1e-150", "1e-75", "1", "1e+75", "1e+150", "1e+225", "1e+300"}},
	} {
		var got []string
		for _, tk := range (logTicks{}).Ticks(tc.lo, tc.hi) {
			if tk.Value < tc.lo || tk.Value > tc.hi {
				t.Errorf("Ticks(%g, %g): tick %g outside", tc.lo, tc.hi, tk.Value)
			}
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("Ticks(%g, %g) labels %v, want %v", tc.lo, tc.hi, got, tc.want)
		}
	}
	// The final error gets a label when no label is near it (0.2 is too far from 0.1138).
	var labels []string
	for _, tk := range (logTicks{least: 0.1138}).Ticks(0.108, 0.65) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if !slices.Contains(labels, "0.114") {
		t.Errorf("the final error 0.1138 has no label: %v", labels)
	}
	for _, r := range [][2]float64{{0, 1}, {-1, 1}, {1, math.Inf(1)}, {math.NaN(), 1}, {2, 1}} {
		if ticks := (logTicks{}).Ticks(r[0], r[1]); ticks != nil {
			t.Errorf("Ticks(%g, %g) = %v, want none", r[0], r[1], ticks)
		}
	}
}

// drawRecorded draws fig onto a recording canvas: everything but the rasterizing, cheaply.
func drawRecorded(fig *Figure) {
	c := &recorder.Canvas{}
	fig.Draw(draw.NewCanvas(c, fig.Width, fig.Height))
}

func TestConvergenceSavesNothingOnBadDir(t *testing.T) {
	fig, err := Convergence("t", points(3, true), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fig.Save(filepath.Join(t.TempDir(), "missing", "dir"), "c"); err == nil {
		t.Error("saved into a directory that does not exist")
	}
	drawRecorded(fig)
}
