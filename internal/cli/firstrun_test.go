package cli

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/kernels"
)

// noisyLowRank is a 400 x 30 matrix of planted rank 4 plus noise (samples as rows): real data
// in miniature, where --tol 1e-6 is out of reach.
func noisyLowRank() []float64 {
	rng := kernels.NewRNG(5, 0, 0)
	const n, m, k = 400, 30, 4
	w, h := make([]float64, n*k), make([]float64, k*m)
	for i := range w {
		w[i] = rng.Float64()
	}
	for i := range h {
		h[i] = rng.Float64()
	}
	x := make([]float64, n*m)
	for i := 0; i < n; i++ {
		for j := 0; j < m; j++ {
			v := 0.0
			for l := 0; l < k; l++ {
				v += w[i*k+l] * h[l*m+j]
			}
			x[i*m+j] = v + 0.3*rng.Float64()
		}
	}
	return x
}

// TestDefaultRunStopsWhenTheErrorStops: with the defaults, a run on inexact data ends by the
// stall rule long before --max-iter, says so as success, and reports rel_err2 and the RMSE in
// every history entry; --tol 0 still runs exactly --max-iter iterations.
func TestDefaultRunStopsWhenTheErrorStops(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "x.npy")
	writeNPY(t, in, 400, 30, noisyLowRank())
	out := filepath.Join(dir, "out")
	code, _, stderr := runNode(t, "factorize", "--input", in, "--rank", "4", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r := readReport(t, out)
	if r.StopReason != string(kernels.StopStalled) || !r.Converged || r.Iterations >= r.MaxIter || r.StallTol != defaultStallTol {
		t.Fatalf("stopped by %q after %d of %d iterations (converged %v, stall_tol %g); want the stall rule", r.StopReason, r.Iterations, r.MaxIter, r.Converged, r.StallTol)
	}
	if !strings.HasPrefix(r.Stop, "converged: the error fell by less than 0.01% over the last 10 iterations") || !strings.Contains(stderr, r.Stop) {
		t.Errorf("stop sentence %q (in the last lines: %v)", r.Stop, strings.Contains(stderr, r.Stop))
	}
	if len(r.History) != r.Iterations+1 {
		t.Fatalf("history has %d entries for %d iterations", len(r.History), r.Iterations)
	}
	for _, h := range r.History {
		if !(h.RelErr2 > 0 && h.RelErr2 < 1.5) || !(h.RMSE > 0) {
			t.Fatalf("iteration %d: rel_err2 %g, rmse %g", h.Iteration, h.RelErr2, h.RMSE)
		}
	}
	last := r.History[len(r.History)-1]
	if math.Abs(last.RelErr2-r.RelErr2) > 1e-9*r.RelErr2 {
		t.Errorf("the last history entry's rel_err2 %g is not the report's %g", last.RelErr2, r.RelErr2)
	}
	// RMSE^2 * M * N = rel_err2 * ||X||^2.
	x := noisyLowRank()
	sq := 0.0
	for _, v := range x {
		sq += v * v
	}
	if want := math.Sqrt(r.RelErr2 * sq / float64(len(x))); math.Abs(r.RMSE-want) > 1e-9*want {
		t.Errorf("rmse %g, want %g", r.RMSE, want)
	}
	if !(r.ReadSeconds > 0) || !(r.IterateSeconds > 0) || r.InitSeconds < 0 {
		t.Errorf("read %g s, init %g s, iterate %g s", r.ReadSeconds, r.InitSeconds, r.IterateSeconds)
	}
	if !strings.Contains(stderr, "rel_err2") || !strings.Contains(stderr, "it/s") {
		t.Errorf("the progress and last lines lack rel_err2 or the rate:\n%s", stderr)
	}

	// On actors (--nodes) the same job reports the same errors, bit for bit: the coordinator
	// sums ||X||^2 in shard order as the driver does.
	onNodes := filepath.Join(dir, "nodes")
	for _, o := range []string{out, onNodes} {
		args := []string{"factorize", "--input", in, "--rank", "4", "--out", o, "--shards", "3", "--quiet"}
		if o == onNodes {
			args = append(args, "--nodes", "2")
		}
		if code, _, stderr := runNode(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
	}
	drv, act := readReport(t, out), readReport(t, onNodes)
	if len(drv.History) != len(act.History) || len(drv.History) < 2 {
		t.Fatalf("histories of %d and %d entries", len(drv.History), len(act.History))
	}
	for i := range drv.History {
		if d, a := drv.History[i], act.History[i]; d.RelErr2 != a.RelErr2 || d.RMSE != a.RMSE || a.RelErr2 == 0 {
			t.Fatalf("iteration %d: driver rel_err2 %v rmse %v, actors %v %v", d.Iteration, d.RelErr2, d.RMSE, a.RelErr2, a.RMSE)
		}
	}

	// A result written over another one does not keep the other's pictures.
	if code, _, stderr := runNode(t, "factorize", "--input", in, "--rank", "4", "--out", out, "--plots", "--quiet"); code != 0 {
		t.Fatalf("--plots: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "basis.png")); err != nil {
		t.Fatalf("--plots drew no basis.png: %v", err)
	}

	// --tol 0 without --stall-tol: exactly --max-iter; with --stall-tol given, the stall rule.
	code, _, stderr = runNode(t, "factorize", "--input", in, "--rank", "4", "--out", out, "--tol", "0", "--max-iter", "300", "--quiet")
	if r := readReport(t, out); code != 0 || r.Iterations != 300 || r.StallTol != 0 {
		t.Errorf("--tol 0: exit %d, %d iterations, stall_tol %g: %s", code, r.Iterations, r.StallTol, stderr)
	}
	for _, name := range []string{"basis.png", "convergence.svg"} {
		if _, err := os.Stat(filepath.Join(out, name)); !os.IsNotExist(err) {
			t.Errorf("the earlier result's %s is still there: %v", name, err)
		}
	}
	code, _, stderr = runNode(t, "factorize", "--input", in, "--rank", "4", "--out", out, "--tol", "0", "--stall-tol", "1e-3", "--quiet")
	if r := readReport(t, out); code != 0 || r.StopReason != string(kernels.StopStalled) {
		t.Errorf("--tol 0 --stall-tol 1e-3: exit %d, stopped by %q: %s", code, r.StopReason, stderr)
	}
}

// TestFirstRunInputs: an all-zero matrix and a 1-D IDX file are refused as bad input (exit 2)
// naming the file, and a synthetic spec without seed= takes --seed.
func TestFirstRunInputs(t *testing.T) {
	dir := t.TempDir()
	zero := filepath.Join(dir, "zero.npy")
	writeNPY(t, zero, 20, 5, make([]float64, 100))
	code, _, stderr := runNode(t, "factorize", "--input", zero, "--rank", "2", "--out", filepath.Join(dir, "o1"))
	if code != exitUsage || !strings.Contains(stderr, "zero.npy") || !strings.Contains(stderr, "no nonzero value") {
		t.Errorf("all-zero input: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "o1")); !os.IsNotExist(err) {
		t.Errorf("the refused run left its --out directory: %v", err)
	}

	// On actors the coordinator sees it once every shard has read its block.
	code, _, stderr = runNode(t, "factorize", "--input", zero, "--rank", "2", "--nodes", "2", "--shards", "2", "--out", filepath.Join(dir, "o1"))
	if code != exitUsage || !strings.Contains(stderr, "no nonzero value") {
		t.Errorf("all-zero input on actors: exit %d: %s", code, stderr)
	}

	// --rank 0 is a rank out of range, not a missing one.
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--rank", "0"}, "rank 0 out of range"},
		{nil, "--rank is required"},
	} {
		code, _, stderr = runNode(t, append([]string{"factorize", "--input", zero, "--out", filepath.Join(dir, "o3")}, tt.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d: %s", tt.args, code, stderr)
		}
	}

	labels := filepath.Join(dir, "train-labels-idx1-ubyte")
	raw := []byte{0, 0, 0x08, 1}
	raw = binary.BigEndian.AppendUint32(raw, 4)
	raw = append(raw, 1, 2, 3, 4)
	if err := os.WriteFile(labels, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runNode(t, "factorize", "--input", labels, "--rank", "1", "--out", filepath.Join(dir, "o2"))
	if code != exitUsage || !strings.Contains(stderr, "1-D IDX") || !strings.Contains(stderr, "train-images-idx3-ubyte") {
		t.Errorf("1-D IDX: exit %d: %s", code, stderr)
	}

	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if code, _, stderr := runNode(t, "factorize", "--input", "synthetic:m=5,n=300,k=2", "--seed", "9", "--rank", "2", "--out", a, "--quiet"); code != 0 {
		t.Fatalf("synthetic without seed=: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runNode(t, "factorize", "--input", "synthetic:m=5,n=300,k=2,seed=9", "--seed", "9", "--rank", "2", "--out", b, "--quiet"); code != 0 {
		t.Fatalf("synthetic with seed=9: exit %d: %s", code, stderr)
	}
	for _, f := range []string{"basis.npy", "coef.npy"} {
		x, _ := os.ReadFile(filepath.Join(a, f))
		y, _ := os.ReadFile(filepath.Join(b, f))
		if len(x) == 0 || string(x) != string(y) {
			t.Errorf("%s differs between seed= from --seed 9 and seed=9 given", f)
		}
	}
}
