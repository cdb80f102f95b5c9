package cli

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/bench"
	"github.com/didnmf/didnmf/kernels"
)

// table2Rows runs bench --table2 with args and --json and decodes its lines.
func table2Rows(t *testing.T, args ...string) []bench.Table2Row {
	t.Helper()
	code, stdout, stderr := runNode(t, append([]string{"bench", "--table2", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rows []bench.Table2Row
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var r bench.Table2Row
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestTable2Converges: on a small synthetic size every algorithm asked for runs on the paper's
// data shape and settings and reaches the tolerance; DID takes exactly as many iterations as
// DBCD and BCD (the paper's correctness claim: the same updates in another order of
// communication), and HPC-ANLS as many as ANLS.
func TestTable2Converges(t *testing.T) {
	algos := []string{"did", "dbcd", "bcd", "anls", "hpc-anls", "admm", "dadmm"}
	rows := table2Rows(t, "--sizes", "2000", "--algos", strings.Join(algos, ","), "--fashion-mnist", "")
	if len(rows) != len(algos) {
		t.Fatalf("%d rows, want %d", len(rows), len(algos))
	}
	iters := map[string]int{}
	for i, r := range rows {
		info, err := kernels.LookupAlgorithm(kernels.Algorithm(r.Algo))
		if err != nil || r.Algo != algos[i] {
			t.Fatalf("row %d: algo %q, want %q", i, r.Algo, algos[i])
		}
		wantShards := 1
		if info.Distributed {
			wantShards = bench.Table2Shards
		}
		if r.Data != "synthetic 2000" || r.Input != "synthetic:m=5,n=2000,k=3,seed=1" || r.M != 5 || r.N != 2000 || r.K != 3 ||
			r.Shards != wantShards || r.Init != "random" || r.Tol != 1e-6 || r.MaxIter != bench.Table2SyntheticMaxIter || r.Error != "" {
			t.Errorf("row %+v", r)
		}
		if r.StopReason != string(kernels.StopConverged) || r.ObjectiveRatio > 1e-6 || r.Iterations < 10 || r.Iterations >= r.MaxIter {
			t.Errorf("%s: %d iterations, %s at ratio %g; want convergence to 1e-6 within the cap", r.Algo, r.Iterations, r.StopReason, r.ObjectiveRatio)
		}
		if !(r.Seconds > 0) || math.Abs(r.SecPerIter*float64(r.Iterations)-r.Seconds) > 1e-9*r.Seconds {
			t.Errorf("%s: %v seconds, %v per iteration over %d iterations", r.Algo, r.Seconds, r.SecPerIter, r.Iterations)
		}
		if r.PaperRow != "" || r.PaperIterations != 0 {
			t.Errorf("%s: paper figures for a size the paper did not run: %+v", r.Algo, r)
		}
		iters[r.Algo] = r.Iterations
	}
	if iters["did"] != iters["dbcd"] || iters["did"] != iters["bcd"] {
		t.Errorf("iterations did %d, dbcd %d, bcd %d: want the same", iters["did"], iters["dbcd"], iters["bcd"])
	}
	if iters["anls"] != iters["hpc-anls"] {
		t.Errorf("iterations anls %d, hpc-anls %d: want the same", iters["anls"], iters["hpc-anls"])
	}
}

// TestTable2PaperFigures: on a size of the paper every algorithm gets a row, in the order of
// kernels.Algorithms, with the paper's figures beside it (none for MU, which the paper did not
// run), and a cap ends runs that have not converged.
func TestTable2PaperFigures(t *testing.T) {
	rows := table2Rows(t, "--sizes", "1e5", "--max-iter", "3", "--shards", "4", "--fashion-mnist", t.TempDir())
	all := kernels.Algorithms()
	if len(rows) != len(all) {
		t.Fatalf("%d rows, want %d", len(rows), len(all))
	}
	paper := map[string][2]float64{"hals": {1281, 16.88}, "anls": {141, 56.59}, "admm": {170, 45.88}, "bcd": {549, 10.61},
		"hpc-anls": {141, 4.31}, "dadmm": {170, 3.46}, "dbcd": {549, 1.42}, "did": {549, 1.17}}
	for i, r := range rows {
		if r.Algo != string(all[i].Name) || r.Data != "synthetic 1e5" || r.N != 100000 || r.MaxIter != 3 {
			t.Errorf("row %d: %+v", i, r)
		}
		if all[i].Distributed && r.Shards != 4 || !all[i].Distributed && r.Shards != 1 {
			t.Errorf("%s: %d shards", r.Algo, r.Shards)
		}
		if r.Iterations != 3 || r.StopReason != string(kernels.StopMaxIter) || !(r.ObjectiveRatio > 1e-6) || !(r.ObjectiveRatio < 1) {
			t.Errorf("%s: %d iterations, %s at ratio %g; want 3, max-iter, above tol and below the start", r.Algo, r.Iterations, r.StopReason, r.ObjectiveRatio)
		}
		want, ok := paper[r.Algo]
		if !ok {
			if r.PaperRow != "" || r.PaperIterations != 0 || r.PaperSeconds != 0 {
				t.Errorf("%s: paper figures %+v for an algorithm the paper did not run", r.Algo, r)
			}
			continue
		}
		if r.PaperRow != "1e5" || float64(r.PaperIterations) != want[0] || r.PaperSeconds != want[1] {
			t.Errorf("%s: paper %s %d iterations %v s, want 1e5 %v %v", r.Algo, r.PaperRow, r.PaperIterations, r.PaperSeconds, want[0], want[1])
		}
	}
}

// TestTable2Text: the human form has a header, one row per algorithm with the paper's columns,
// and a note for a missing Fashion-MNIST.
func TestTable2Text(t *testing.T) {
	code, stdout, stderr := runNode(t, "bench", "--table2", "--sizes", "1e5", "--algos", "did,mu", "--max-iter", "2", "--fashion-mnist", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "note: fashion-mnist skipped") || !strings.Contains(lines[1], "Table 2") {
		t.Fatalf("output:\n%s", stdout)
	}
	for i, want := range [][]string{{"synthetic 1e5", "did", "16", "2", "549", "1.17", "max-iter"}, {"synthetic 1e5", "mu", "1", "2", " - ", "max-iter"}} {
		for _, w := range want {
			if !strings.Contains(lines[4+i], w) {
				t.Errorf("row %q lacks %q", lines[4+i], w)
			}
		}
	}
}

// TestTable2BadFlags: flags the table chooses itself, bad sizes and algorithms, and table flags
// without --table2 are usage errors.
func TestTable2BadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--table2", "--input", "synthetic:m=5,n=100,k=3,seed=1"},
		{"--table2", "--rank", "3"},
		{"--table2", "--algo", "did"},
		{"--table2", "--sizes", "1.5"},
		{"--table2", "--sizes", "0"},
		{"--table2", "--algos", "did,nope"},
		{"--sizes", "1e5", "--input", "synthetic:m=5,n=100,k=3,seed=1", "--rank", "3"},
	} {
		var o, e bytes.Buffer
		if code := run(append([]string{"bench"}, args...), &o, &e); code != 2 {
			t.Errorf("%v: exit %d (%s), want 2", args, code, e.String())
		}
	}
}

// writeImagesIDX writes n 28 x 28 unsigned-byte images in gzip-compressed IDX, as Fashion-MNIST
// ships them, with about half the pixels zero.
func writeImagesIDX(t *testing.T, path string, n int, seed byte) {
	t.Helper()
	var raw bytes.Buffer
	binary.Write(&raw, binary.BigEndian, []uint32{0x803, uint32(n), 28, 28})
	for i := 0; i < n*28*28; i++ {
		v := byte(i*7+int(seed)*13) ^ byte(i/28)
		if v%2 == 0 {
			v = 0
		}
		raw.WriteByte(v)
	}
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(raw.Bytes())
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, z.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTable2RealRow: the real-data row reads both Fashion-MNIST files as one input, runs at
// K=10 from k-means with the paper's cap of 1000 (or --max-iter), and stands beside the
// paper's MNIST figures.
func TestTable2RealRow(t *testing.T) {
	dir := t.TempDir()
	writeImagesIDX(t, filepath.Join(dir, "train-images-idx3-ubyte.gz"), 40, 1)
	writeImagesIDX(t, filepath.Join(dir, "t10k-images-idx3-ubyte.gz"), 20, 2)
	for _, c := range []struct {
		args    []string
		maxIter int
	}{{nil, bench.Table2RealMaxIter}, {[]string{"--max-iter", "4"}, 4}} {
		rows := table2Rows(t, append([]string{"--sizes", "", "--algos", "did,bcd", "--fashion-mnist", dir, "--tol", "0.5"}, c.args...)...)
		if len(rows) != 2 {
			t.Fatalf("%v: %d rows, want 2", c.args, len(rows))
		}
		for i, r := range rows {
			if r.Data != "fashion-mnist" || r.Algo != []string{"did", "bcd"}[i] || r.M != 784 || r.N != 60 || r.K != bench.Table2RealK ||
				r.Init != "kmeans" || r.MaxIter != c.maxIter || r.Tol != 0.5 || r.Error != "" || r.PaperRow != "MNIST" || r.PaperIterations != 492 {
				t.Errorf("%v: row %+v", c.args, r)
			}
			if r.Iterations < 1 || r.Iterations > c.maxIter || r.StopReason == string(kernels.StopConverged) && r.ObjectiveRatio > 0.5 {
				t.Errorf("%v: %s: %d iterations, %s at ratio %g", c.args, r.Algo, r.Iterations, r.StopReason, r.ObjectiveRatio)
			}
		}
		if rows[0].Iterations != rows[1].Iterations {
			t.Errorf("%v: did %d iterations, bcd %d: want the same", c.args, rows[0].Iterations, rows[1].Iterations)
		}
	}
}
