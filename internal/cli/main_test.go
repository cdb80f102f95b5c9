package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"github.com/didnmf/didnmf/report"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/didnmf/didnmf/bench"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/pki"
)

// TestMain lets the test binary act as the node command for subprocess tests.
func TestMain(m *testing.M) {
	if os.Getenv("NODE_TEST_MAIN") == "1" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	// The nodes and clients the tests start find a cluster secret of this run's own, never
	// the user's.
	dir, err := os.MkdirTemp("", "didnmf-test-secret-")
	if err != nil {
		panic(err)
	}
	secretFile := filepath.Join(dir, "cluster.secret")
	if err := pki.WriteSecret(secretFile, pki.NewSecret()); err != nil {
		panic(err)
	}
	os.Setenv(pki.SecretFileEnv, secretFile)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func runNode(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func writeNPY(t *testing.T, path string, rows, cols int, data []float64) {
	t.Helper()
	var buf bytes.Buffer
	if err := matio.WriteNPY(&buf, rows, cols, data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readReport(t *testing.T, dir string) report.Report {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r report.Report
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestFactorizeSynthetic(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	code, _, stderr := runNode(t, "factorize", "--input", "synthetic:m=6,n=3000,k=3,seed=4", "--rank", "3",
		"--shards", "3", "--out", out, "--max-iter", "3000")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rep := readReport(t, out)
	if !rep.Converged || rep.ObjectiveRat > 1e-6 || rep.RelErr2 > 1e-5 || rep.Iterations < 2 || rep.Shards != 3 {
		t.Errorf("report: %+v", rep)
	}
	if len(rep.History) != rep.Iterations+1 || rep.Collectives != 1 {
		t.Errorf("history %d points for %d iterations, %.1f collectives per iteration", len(rep.History), rep.Iterations, rep.Collectives)
	}
	r, c, basis, err := matio.ReadNPYMatrix(filepath.Join(out, "basis.npy"))
	if err != nil || r != 6 || c != 3 {
		t.Fatalf("basis.npy: %d x %d, %v", r, c, err)
	}
	r, c, coef, err := matio.ReadNPYMatrix(filepath.Join(out, "coef.npy"))
	if err != nil || r != 3000 || c != 3 {
		t.Fatalf("coef.npy: %d x %d, %v", r, c, err)
	}
	// The written factors reproduce the data: compare with the synthetic generator.
	src, err := matio.Open("synthetic:m=6,n=3000,k=3,seed=4")
	if err != nil {
		t.Fatal(err)
	}
	x, err := src.Read(0, 3000, matio.LayoutDense)
	if err != nil {
		t.Fatal(err)
	}
	var num, den float64
	for j := 0; j < 3000; j++ {
		for i := 0; i < 6; i++ {
			var v float64
			for p := 0; p < 3; p++ {
				v += basis[i*3+p] * coef[j*3+p]
			}
			xv := x.(interface{ At(int, int) float64 }).At(i, j)
			num += (xv - v) * (xv - v)
			den += xv * xv
		}
	}
	if math.Abs(num/den-rep.RelErr2) > 1e-9 {
		t.Errorf("rel_err2 from the files %.6g, report says %.6g", num/den, rep.RelErr2)
	}
	outputs := []string{"basis.npy", "basis.tsv", "coef.npy", "report.json", "top_features.tsv"}
	for _, name := range outputs {
		if st, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Error(err)
		} else if st.Mode().Perm() != 0o644 {
			t.Errorf("%s has mode %v", name, st.Mode().Perm())
		}
	}
	entries, _ := os.ReadDir(out)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, outputs) {
		t.Errorf("out dir has %q, want %q", names, outputs)
	}
}

// TestFactorizeSameJobSameBits: two runs of the same job write identical files (report aside,
// which has timings).
func TestFactorizeSameJobSameBits(t *testing.T) {
	dir := t.TempDir()
	var files [2][2][]byte
	for i := range files {
		out := filepath.Join(dir, string(rune('a'+i)))
		code, _, stderr := runNode(t, "factorize", "--input", "synthetic:m=8,n=2000,k=4,seed=2,noise=0.01", "--rank", "4",
			"--shards", "4", "--out", out, "--max-iter", "50", "--quiet", "--threads", []string{"1", "2"}[i])
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		files[i][0], _ = os.ReadFile(filepath.Join(out, "basis.npy"))
		files[i][1], _ = os.ReadFile(filepath.Join(out, "coef.npy"))
	}
	if !bytes.Equal(files[0][0], files[1][0]) || !bytes.Equal(files[0][1], files[1][1]) {
		t.Error("the same job gave different factors")
	}
}

func TestFactorizeCustomInitAndNPYInput(t *testing.T) {
	dir := t.TempDir()
	// X = B C, samples as rows: (N, M) = (50, 4).
	n, m, k := 50, 4, 2
	x := make([]float64, n*m)
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			x[j*m+i] = float64(1+i) + float64(j%5)*float64(i%2)
		}
	}
	in := filepath.Join(dir, "x.npy")
	writeNPY(t, in, n, m, x)
	b0 := make([]float64, m*k)
	c0 := make([]float64, n*k)
	for i := range b0 {
		b0[i] = 1
	}
	for i := range c0 {
		c0[i] = 0.5
	}
	writeNPY(t, filepath.Join(dir, "b0.npy"), m, k, b0)
	writeNPY(t, filepath.Join(dir, "c0.npy"), n, k, c0)
	out := filepath.Join(dir, "out")
	code, _, stderr := runNode(t, "factorize", "--input", in, "--rank", "2", "--init", "custom",
		"--init-basis", filepath.Join(dir, "b0.npy"), "--init-coef", filepath.Join(dir, "c0.npy"), "--out", out, "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if rep := readReport(t, out); rep.Init != "custom" || rep.RelErr2 > 1e-4 {
		t.Errorf("report %+v", rep)
	}
}

// TestBadInput: every bad input is refused with exit 2, a message naming the problem, and no
// output written.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.npy")
	writeNPY(t, good, 20, 4, func() []float64 {
		v := make([]float64, 80)
		for i := range v {
			v[i] = float64(i%7) + 1
		}
		return v
	}())
	neg := filepath.Join(dir, "neg.npy")
	negData := make([]float64, 80)
	for i := range negData {
		negData[i] = 1
	}
	negData[4*7+2] = -3
	writeNPY(t, neg, 20, 4, negData)
	nan := filepath.Join(dir, "nan.npy")
	nanData := append([]float64(nil), negData...)
	nanData[4*7+2] = math.NaN()
	writeNPY(t, nan, 20, 4, nanData)
	trunc := filepath.Join(dir, "trunc.npy")
	raw, _ := os.ReadFile(good)
	os.WriteFile(trunc, raw[:len(raw)-8], 0o644)
	wrongB := filepath.Join(dir, "b.npy")
	writeNPY(t, wrongB, 3, 2, make([]float64, 6))
	okC := filepath.Join(dir, "c.npy")
	writeNPY(t, okC, 20, 2, make([]float64, 40))
	empty := filepath.Join(dir, "empty.npy")
	writeNPY(t, empty, 0, 4, nil)
	// A FIFO with no writer hangs a blocking open; a directory named like a file is no file.
	fifo := filepath.Join(dir, "fifo.npy")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	aDir := filepath.Join(dir, "dir.npy")
	if err := os.Mkdir(aDir, 0o755); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"negative", []string{"--input", neg, "--rank", "2"}, "sample 7, feature 2"},
		{"nan", []string{"--input", nan, "--rank", "2"}, "NaN"},
		{"truncated", []string{"--input", trunc, "--rank", "2"}, "truncated"},
		{"missing file", []string{"--input", filepath.Join(dir, "nope.npy"), "--rank", "2"}, "nope.npy"},
		{"empty", []string{"--input", empty, "--rank", "1"}, "empty"},
		{"input a FIFO", []string{"--input", fifo, "--rank", "2"}, fifo + ": not a regular file: it is a FIFO (named pipe)"},
		{"input a directory", []string{"--input", aDir, "--rank", "2"}, aDir + ": is a directory, but neither a didnmf block store"},
		{"init basis a FIFO", []string{"--input", good, "--rank", "2", "--init", "custom", "--init-basis", fifo, "--init-coef", okC}, fifo + ": not a regular file: it is a FIFO"},
		{"feature names a FIFO", []string{"--input", good, "--rank", "2", "--feature-names", fifo}, "--feature-names " + fifo + ": not a regular file: it is a FIFO"},
		{"init basis a directory", []string{"--input", good, "--rank", "2", "--init", "custom", "--init-basis", aDir, "--init-coef", okC}, aDir + ": is a directory, not a file"},
		{"rank 0", []string{"--input", good, "--rank", "0"}, "rank 0 out of range"},
		{"rank negative", []string{"--input", good, "--rank", "-1"}, "rank -1 out of range"},
		{"rank too big", []string{"--input", good, "--rank", "5"}, "min(M, N)"},
		{"unknown algo", []string{"--input", good, "--rank", "2", "--algo", "svd"}, `unknown algorithm "svd"`},
		{"unknown flag", []string{"--input", good, "--rank", "2", "--frobnicate"}, "frobnicate"},
		{"shards > n", []string{"--input", good, "--rank", "2", "--shards", "21"}, "more than the 20 samples"},
		{"shards on hals", []string{"--input", good, "--rank", "2", "--algo", "hals", "--shards", "2"}, "runs on one shard"},
		{"tol negative", []string{"--input", good, "--rank", "2", "--tol", "-1"}, "tol"},
		{"tol nan", []string{"--input", good, "--rank", "2", "--tol", "NaN"}, "tol"},
		{"init basis shape", []string{"--input", good, "--rank", "2", "--init", "custom", "--init-basis", wrongB, "--init-coef", okC}, "has 4 features and --rank is 2: want features x K = (4, 2)"},
		{"init custom missing", []string{"--input", good, "--rank", "2", "--init", "custom"}, "needs both"},
		{"unknown init", []string{"--input", good, "--rank", "2", "--init", "svd"}, `unknown init "svd"`},
		{"bad synthetic", []string{"--input", "synthetic:m=5,n=0,k=3,seed=1", "--rank", "2"}, "n must be"},
		{"positional", []string{"--input", good, "--rank", "2", "extra"}, "unexpected argument"},
		{"unknown kernel", []string{"--input", good, "--rank", "2", "--kernel", "sse4"}, `unknown kernel "sse4" (known: auto, generic, avx2, avx512)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(c.name, " ", "-"))
			code, _, stderr := runNode(t, append([]string{"factorize", "--out", out, "--quiet"}, c.args...)...)
			if code != 2 {
				t.Errorf("exit %d, want 2 (stderr %q)", code, stderr)
			}
			if !strings.Contains(stderr, c.want) {
				t.Errorf("stderr %q does not mention %q", stderr, c.want)
			}
			if _, err := os.Stat(out); err == nil {
				entries, _ := os.ReadDir(out)
				t.Errorf("output dir left behind with %d entries", len(entries))
			}
		})
	}
	// An existing output directory keeps its old results when a run fails.
	out := filepath.Join(dir, "keep")
	if code, _, e := runNode(t, "factorize", "--input", good, "--rank", "2", "--out", out, "--quiet"); code != 0 {
		t.Fatal(e)
	}
	before, _ := os.ReadFile(filepath.Join(out, "coef.npy"))
	if code, _, _ := runNode(t, "factorize", "--input", neg, "--rank", "2", "--out", out, "--quiet"); code != 2 {
		t.Fatal("bad run accepted")
	}
	after, _ := os.ReadFile(filepath.Join(out, "coef.npy"))
	entries, _ := os.ReadDir(out)
	if !bytes.Equal(before, after) || len(entries) != 5 {
		t.Errorf("a failed run touched the previous results (%d entries)", len(entries))
	}
}

// TestExitCodesInProcess runs the real binary entry point in a subprocess.
func TestExitCodesInProcess(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"factorize", "--input", "synthetic:m=3,n=30,k=2,seed=1", "--rank", "9", "--out", t.TempDir()}, 2},
		{[]string{"nonsense"}, 2},
		{[]string{"help"}, 0},
		{[]string{"factorize", "--input", "synthetic:m=3,n=30,k=2,seed=1", "--rank", "2", "--out", t.TempDir(), "--quiet"}, 0},
	} {
		cmd := exec.Command(exe, c.args...)
		cmd.Env = append(os.Environ(), "NODE_TEST_MAIN=1")
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code {
			t.Errorf("%v: exit %d, want %d", c.args, code, c.code)
		}
	}
}

func TestBenchJSON(t *testing.T) {
	code, stdout, stderr := runNode(t, "bench", "--input", "synthetic:m=5,n=20000,k=3,seed=1", "--rank", "3", "--iters", "5", "--json", "--roofline-reps", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r bench.Result
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v: %q", err, stdout)
	}
	if r.Iterations != 5 || r.SecPerIter <= 0 || r.RooflineSec <= 0 || r.RooflineRatio <= 0 || r.M != 5 || r.N != 20000 || r.K != 3 {
		t.Errorf("bench result %+v", r)
	}
	// The floors: X (8 bytes a value) and C (read and written, 16*K bytes a column); DID's
	// 2*5*4 + 2*5*4 + 2*9 + 3*4 = 110 flops a column at K=3 (padded to 4); the larger floor is
	// the roofline and names the bound.
	if r.MemoryBytes != 20000*(5*8+16*3) || r.FlopsPerIter != 20000*110 {
		t.Errorf("memory bytes %d, flops %v; want %d and %d", r.MemoryBytes, r.FlopsPerIter, 20000*(5*8+16*3), 20000*110)
	}
	if !(r.MemoryFloorSec > 0) || !(r.ComputeFloorSec > 0) || !(r.MemoryGBps > 0) || !(r.PeakGFlops > 0) || !(r.PeakGFlopsOneThread > 0) ||
		(r.PeakFMA != "zmm" && r.PeakFMA != "ymm" && r.PeakFMA != "scalar") {
		t.Errorf("floors %+v", r)
	}
	best := 0
	for _, p := range r.FMAPeaks {
		if !(p.OneThreadGFlops > 0) || !(p.AllThreadsGFlops > 0) || p.AllThreadsGFlops > r.PeakGFlops {
			t.Errorf("FMA peak %+v, best %v", p, r.PeakGFlops)
		}
		if p.Kind == r.PeakFMA && p.AllThreadsGFlops == r.PeakGFlops && p.OneThreadGFlops == r.PeakGFlopsOneThread {
			best++
		}
	}
	if best != 1 {
		t.Errorf("FMA peaks %+v: the best, %s at %v, should be one of them", r.FMAPeaks, r.PeakFMA, r.PeakGFlops)
	}
	if want := max(r.MemoryFloorSec, r.ComputeFloorSec); r.RooflineSec != want {
		t.Errorf("roofline_sec %v, want the larger floor %v", r.RooflineSec, want)
	}
	if want := map[bool]string{true: "memory", false: "compute"}[r.MemoryFloorSec >= r.ComputeFloorSec]; r.Bound != want {
		t.Errorf("bound %q with memory floor %v and compute floor %v", r.Bound, r.MemoryFloorSec, r.ComputeFloorSec)
	}
	if math.Abs(r.RooflineRatio-r.SecPerIter/r.RooflineSec) > 1e-9*r.RooflineRatio {
		t.Errorf("roofline_ratio %v, want %v", r.RooflineRatio, r.SecPerIter/r.RooflineSec)
	}
	if gbps := float64(r.MemoryBytes) / r.MemoryFloorSec / 1e9; math.Abs(r.MemoryGBps-gbps) > 1e-9*gbps {
		t.Errorf("memory_gbps %v, want %v", r.MemoryGBps, gbps)
	}
	if sec := r.FlopsPerIter / (r.PeakGFlops * 1e9); math.Abs(r.ComputeFloorSec-sec) > 1e-9*sec {
		t.Errorf("compute_floor_sec %v, want %v", r.ComputeFloorSec, sec)
	}
}

// TestConvertRoundTrip: convert writes the same matrix in each format.
func TestConvertRoundTrip(t *testing.T) {
	dir := t.TempDir()
	spec := "synthetic:m=4,n=37,k=2,seed=9"
	src, _ := matio.Open(spec)
	x, _ := src.Read(0, 37, matio.LayoutDense)
	want := x.(interface{ At(int, int) float64 })
	for _, f := range []string{"npy", "npy-t", "raw"} {
		out := filepath.Join(dir, "x."+f)
		if code, _, e := runNode(t, "convert", "--input", spec, "--out", out, "--format", f); code != 0 {
			t.Fatalf("%s: %s", f, e)
		}
		if f == "raw" {
			raw, _ := os.ReadFile(out)
			if len(raw) != 37*4*8 {
				t.Errorf("raw: %d bytes", len(raw))
			}
			continue
		}
		r, c, data, err := matio.ReadNPYMatrix(out)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for j := 0; j < 37; j++ {
			for i := 0; i < 4; i++ {
				got := data[j*4+i]
				if f == "npy-t" {
					if r != 4 || c != 37 {
						t.Fatalf("npy-t shape %d x %d", r, c)
					}
					got = data[i*37+j]
				}
				if got != want.At(i, j) {
					t.Fatalf("%s: entry (%d, %d) = %v, want %v", f, j, i, got, want.At(i, j))
				}
			}
		}
	}
	if code, _, _ := runNode(t, "convert", "--input", spec, "--out", filepath.Join(dir, "y"), "--format", "csv"); code != 2 {
		t.Error("unknown format accepted")
	}
}

func TestParseFlagsArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		max  int
		want []string
		bad  bool
	}{
		{[]string{"--cluster", "a:1", "j1"}, 1, []string{"j1"}, false},
		{[]string{"j1", "--cluster", "a:1"}, 1, []string{"j1"}, false},
		{[]string{"--cluster", "a:1"}, 1, nil, false},
		{[]string{"j1", "j2", "--cluster", "a:1"}, 1, nil, true},
		{[]string{"--cluster", "a:1", "j1"}, 0, nil, true},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		cluster := fs.String("cluster", "", "")
		got, err := parseFlagsArgs(fs, c.args, c.max, io.Discard)
		if (err != nil) != c.bad || !c.bad && (!slices.Equal(got, c.want) || *cluster != "a:1") {
			t.Errorf("%q (max %d): %q, cluster %q, %v", c.args, c.max, got, *cluster, err)
		}
	}
}
