package cli

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/matio"
)

// plotResultDir writes a result directory: an m x k basis and a report with a history, a
// recovery and, when shape is set, image_shape.
func plotResultDir(t *testing.T, m, k int, shape []int) string {
	t.Helper()
	dir := t.TempDir()
	basis := make([]float64, m*k)
	for i := range basis {
		basis[i] = float64((i*7919)%101) / 100
	}
	var buf bytes.Buffer
	if err := matio.WriteNPY(&buf, m, k, basis); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "basis.npy"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var hist []map[string]any
	for i := 0; i <= 20; i++ {
		hist = append(hist, map[string]any{"iteration": i, "seconds": 0.1 * float64(i+1),
			"objective_ratio": 1 / float64(i+1), "rel_err2": 0.1 + 0.5/float64(i+1)})
	}
	rep := map[string]any{"algo": "did", "input": []string{"x.npy"}, "m": m, "n": 500, "k": k, "history": hist,
		"recoveries": []map[string]any{{"cause": "node lost", "noticed": 1.1, "resumed": 1.4, "from_iteration": 8, "redone": 2}}}
	if shape != nil {
		rep["image_shape"] = shape
	}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkPlotted checks that stdout lists the four pictures in dir and that they decode.
func checkPlotted(t *testing.T, stdout, dir string) {
	t.Helper()
	var want []string
	for _, n := range []string{"convergence.png", "convergence.svg", "basis.png", "basis.svg"} {
		want = append(want, filepath.Join(dir, n))
	}
	if got := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n"); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("stdout %q, want the paths %v one a line", stdout, want)
	}
	for _, p := range want {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(p, ".png") {
			img, err := png.Decode(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if b := img.Bounds(); b.Dx() < 400 || b.Dx() > 1600 || b.Dy() < 100 {
				t.Errorf("%s: %dx%d pixels", p, b.Dx(), b.Dy())
			}
		} else if !bytes.Contains(data, []byte("<svg")) {
			t.Errorf("%s is not an SVG", p)
		}
	}
}

func TestPlotCommand(t *testing.T) {
	for _, tc := range []struct {
		name  string
		m, k  int
		shape []int    // in the report
		args  []string // beyond --result
		out   bool     // --out to a new directory
	}{
		{"image shape in the report", 64, 4, []int{8, 8}, nil, false},
		{"image shape given", 64, 4, nil, []string{"--image-shape", "8x8"}, false},
		{"not images: bar charts, into --out", 30, 3, nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := plotResultDir(t, tc.m, tc.k, tc.shape)
			args := append([]string{"plot", "--result", dir}, tc.args...)
			outDir := dir
			if tc.out {
				outDir = filepath.Join(t.TempDir(), "figs")
				args = append(args, "--out", outDir)
			}
			code, stdout, stderr := runNode(t, args...)
			if code != exitOK || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			checkPlotted(t, stdout, outDir)
		})
	}
}

// TestPlotFactorizeResult: didnmf plot reads what didnmf factorize writes.
func TestPlotFactorizeResult(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "result")
	code, _, stderr := runNode(t, "factorize", "--input", "synthetic:m=12,n=300,k=3,seed=2", "--rank", "3",
		"--max-iter", "15", "--out", dir, "--quiet")
	if code != exitOK {
		t.Fatalf("factorize: exit %d, %s", code, stderr)
	}
	code, stdout, stderr := runNode(t, "plot", "--result", dir)
	if code != exitOK || stderr != "" {
		t.Fatalf("plot: exit %d, stderr %q", code, stderr)
	}
	checkPlotted(t, stdout, dir)
	// 12 features are 3x4 or 4x3 images as well.
	if code, _, stderr := runNode(t, "plot", "--result", dir, "--image-shape", "3x4", "--out", filepath.Join(dir, "img")); code != exitOK {
		t.Fatalf("plot --image-shape 3x4: exit %d, %s", code, stderr)
	}
}

func TestPlotBadInput(t *testing.T) {
	good := plotResultDir(t, 64, 4, nil)
	noReport := t.TempDir()
	badReport := plotResultDir(t, 64, 4, nil)
	if err := os.WriteFile(filepath.Join(badReport, "report.json"), []byte(`{"m": 64, "k": 4, "history": [{"itera`), 0o644); err != nil {
		t.Fatal(err)
	}
	wrongTypes := plotResultDir(t, 64, 4, nil)
	if err := os.WriteFile(filepath.Join(wrongTypes, "report.json"), []byte(`{"m": "64", "k": 4}`), 0o644); err != nil {
		t.Fatal(err)
	}
	sweepOut := t.TempDir() // a sweep's --out: sweep.json, no report.json
	if err := os.WriteFile(filepath.Join(sweepOut, "sweep.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sweepOut, "sweep.png"), []byte(`png`), 0o644); err != nil {
		t.Fatal(err)
	}
	// A sweep's --out whose sweep.png was removed: with its runs kept, --resume draws it again.
	sweepNoPNG, sweepNoRuns := t.TempDir(), t.TempDir()
	for _, d := range []string{sweepNoPNG, sweepNoRuns} {
		if err := os.WriteFile(filepath.Join(d, "sweep.json"), []byte(`{}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(sweepNoPNG, "runs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sweepNoPNG, "runs", "journal.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	running := t.TempDir() // a sweep's --out before its end: runs/ and no sweep.json
	if err := os.MkdirAll(filepath.Join(running, "runs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(running, "runs", "journal.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	noBasis := plotResultDir(t, 64, 4, nil)
	os.Remove(filepath.Join(noBasis, "basis.npy"))
	aFile := filepath.Join(good, "basis.npy")
	for _, tc := range []struct {
		name string
		args []string
		want string // in the one line on stderr
	}{
		{"no --result", nil, "--result is required"},
		{"--result missing", []string{"--result", filepath.Join(good, "nope")}, "no such directory"},
		{"--result a file", []string{"--result", aFile}, "not a directory"},
		{"no report.json", []string{"--result", noReport}, "report.json: no such file"},
		{"a sweep's --out", []string{"--result", sweepOut}, "is a sweep's --out (sweep.json, no report.json): its figure is " + filepath.Join(sweepOut, "sweep.png")},
		{"a sweep's --out without its figure", []string{"--result", sweepNoPNG}, "its figure, sweep.png, is not there: the same didnmf sweep command with --resume draws it again"},
		{"a sweep's --out without its figure or runs", []string{"--result", sweepNoRuns}, "its figure, sweep.png, is not there, and the runs that would draw it again were removed"},
		{"a running sweep's --out", []string{"--result", running}, "is a sweep's --out without its sweep.json: the sweep is still running, or was stopped"},
		{"truncated report.json", []string{"--result", badReport}, "report.json: truncated JSON"},
		{"report.json of wrong types", []string{"--result", wrongTypes}, "report.json: m: want an integer, got a string"},
		{"no basis.npy", []string{"--result", noBasis}, "basis.npy"},
		{"--image-shape 28x", []string{"--result", good, "--image-shape", "28x"}, `--image-shape "28x": want HxW`},
		{"--image-shape 0x5", []string{"--result", good, "--image-shape", "0x5"}, `--image-shape "0x5": want HxW`},
		{"--image-shape of another size", []string{"--result", good, "--image-shape", "8x7"}, "--image-shape 8x7: 56 pixels, but the basis of"},
		{"an argument", []string{"--result", good, "extra"}, `"extra"`},
		{"an unknown flag", []string{"--result", good, "--shape", "8x8"}, "-shape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runNode(t, append([]string{"plot"}, tc.args...)...)
			if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one line saying %q", code, stdout, stderr, tc.want)
			}
		})
	}
	if entries, _ := os.ReadDir(good); len(entries) != 2 {
		t.Errorf("bad input wrote into the result directory: %d entries", len(entries))
	}
}

func TestPlotHelp(t *testing.T) {
	dir := plotResultDir(t, 64, 4, nil)
	code, stdout, stderr := runNode(t, "plot", "-h", "--result", dir)
	help := stdout + stderr
	if code != exitOK || !strings.HasPrefix(help, "usage: didnmf plot") || !strings.Contains(help, "-image-shape") {
		t.Errorf("plot -h: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if stdout != "" && stderr != "" {
		t.Errorf("plot -h printed on both stdout and stderr")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("plot -h wrote files: %d entries", len(entries))
	}
}
