package figures

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// imageResult writes a result directory of 6 planted 8x8 components with recoveries.
func imageResult(t *testing.T, shapeInReport bool) string {
	t.Helper()
	dir := t.TempDir()
	pics := planted(8)
	writeBasis(t, dir, 64, len(pics), plantedBasis(pics))
	rep := map[string]any{"m": 64, "n": 1000, "k": len(pics), "algo": "did", "input": []string{"x.npy"},
		"history": history(30, true),
		"recoveries": []map[string]any{{"epoch": 1, "cause": "node lost", "noticed": 1.2, "resumed": 1.6,
			"from_iteration": 8, "redone": 3}}}
	if shapeInReport {
		rep["image_shape"] = []int{8, 8}
	}
	writeReport(t, dir, rep)
	return dir
}

func TestWriteResult(t *testing.T) {
	dir := imageResult(t, true)
	out := filepath.Join(t.TempDir(), "new", "figs")
	written, err := WriteResult(dir, out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, n := range []string{"convergence.png", "convergence.svg", "basis.png", "basis.svg"} {
		want = append(want, filepath.Join(out, n))
	}
	if strings.Join(written, " ") != strings.Join(want, " ") {
		t.Fatalf("written %v, want %v", written, want)
	}
	for _, p := range written {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(p, ".svg") && !bytes.Contains(data, []byte("<svg")) {
			t.Errorf("%s is not an SVG", p)
		}
	}
	conv := readPNG(t, written[0])
	checkNotBlank(t, "convergence.png", conv)
	if n := countNear(conv, [3]int{0xd6, 0x27, 0x28}, 10); n < 100 {
		t.Errorf("convergence.png: %d rollback-red pixels: the recovery is not marked", n)
	}
	// Nothing else was written, and no temporary file is left.
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 4 {
		t.Errorf("%d files in the output directory", len(entries))
	}
	// The same input gives the same bytes.
	again, err := WriteResult(dir, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range written {
		a, _ := os.ReadFile(written[i])
		b, _ := os.ReadFile(again[i])
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs", filepath.Base(written[i]))
		}
	}
	// No --out: into the result directory.
	written, err = WriteResult(dir, "", Options{})
	if err != nil || len(written) != 4 || filepath.Dir(written[0]) != dir {
		t.Errorf("into the result directory: %v, %v", written, err)
	}
}

func TestWriteResultNoHistory(t *testing.T) {
	dir := t.TempDir()
	writeBasis(t, dir, 64, 6, plantedBasis(planted(8)))
	writeReport(t, dir, map[string]any{"m": 64, "k": 6})
	var warned []string
	written, err := WriteResult(dir, "", Options{ImageShape: [2]int{8, 8}, Warn: func(s string) { warned = append(warned, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 2 || filepath.Base(written[0]) != "basis.png" {
		t.Errorf("written %v", written)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "no history") {
		t.Errorf("warnings %q", warned)
	}
}

func TestWriteResultBadInput(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		opts  Options
		want  []string
	}{
		{"no report", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, ReportFile)) }, Options{},
			[]string{"report.json: no such file"}},
		{"no basis", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, BasisFile)) }, Options{},
			[]string{"basis.npy", "cannot open"}},
		{"basis of another shape", func(t *testing.T, dir string) { writeBasis(t, dir, 64, 5, make([]float64, 320)) }, Options{},
			[]string{"basis.npy: shape (64, 5), but the report says m=64 features x k=6 components"}},
		{"basis not a .npy", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, BasisFile), []byte("%%MatrixMarket matrix array real general\n1 1\n1\n"), 0o644)
		}, Options{}, []string{"basis.npy"}},
		{"basis truncated", func(t *testing.T, dir string) {
			data, _ := os.ReadFile(filepath.Join(dir, BasisFile))
			os.WriteFile(filepath.Join(dir, BasisFile), data[:len(data)-9], 0o644)
		}, Options{}, []string{"basis.npy"}},
		{"image shape option of another size", nil, Options{ImageShape: [2]int{8, 7}},
			[]string{"image shape 8x7 has 56 pixels, but the basis has 64 features"}},
		{"report truncated", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, ReportFile), []byte(`{"m": 64, "k": 6, "history": [`), 0o644)
		}, Options{}, []string{"report.json: truncated JSON"}},
		{"huge m in the report", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, ReportFile), []byte(`{"m": 9007199254740992, "k": 6}`), 0o644)
		}, Options{}, []string{"report.json: m, k"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := imageResult(t, false)
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			out := t.TempDir()
			written, err := WriteResult(dir, out, tc.opts)
			if err == nil {
				t.Fatalf("no error; wrote %v", written)
			}
			if !errors.Is(err, ErrInput) {
				t.Errorf("%v does not wrap ErrInput", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
			if entries, _ := os.ReadDir(out); len(entries) != 0 || len(written) != 0 {
				t.Errorf("wrote %v after an input error", written)
			}
		})
	}
}
