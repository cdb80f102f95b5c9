package bench

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/usererr"
)

func TestParseSizes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		bad  bool
	}{
		{"1e5,1e6", []int{100000, 1000000}, false},
		{" 2000 , ,30", []int{2000, 30}, false},
		{"", nil, false},
		{"1.5", nil, true},
		{"0", nil, true},
		{"2e9", nil, true},
		{"many", nil, true},
	} {
		got, err := ParseSizes(tc.in)
		if (err != nil) != tc.bad || !slices.Equal(got, tc.want) {
			t.Errorf("ParseSizes(%q) = %v, %v; want %v (error: %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestSizeName(t *testing.T) {
	for n, want := range map[int]string{1: "1", 10: "1e1", 100000: "1e5", 2000: "2000", 1000000: "1e6", 110: "110"} {
		if got := SizeName(n); got != want {
			t.Errorf("SizeName(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseAlgos(t *testing.T) {
	all, err := ParseAlgos(" ")
	if err != nil || len(all) != len(kernels.Algorithms()) {
		t.Errorf("ParseAlgos(\"\"): %d, %v; want every algorithm", len(all), err)
	}
	two, err := ParseAlgos("did, mu")
	if err != nil || len(two) != 2 || two[0].Name != kernels.DID || two[1].Name != kernels.MU {
		t.Errorf("ParseAlgos(did, mu): %v, %v", two, err)
	}
	if _, err := ParseAlgos("did,nope"); err == nil {
		t.Error("ParseAlgos(did,nope): no error")
	}
}

// TestPaperFigure: the paper's figures by row and algorithm; none for MU or a row it did not
// run.
func TestPaperFigure(t *testing.T) {
	for _, tc := range []struct {
		row   string
		algo  kernels.Algorithm
		iters int
		secs  float64
		ok    bool
	}{
		{"1e5", kernels.DID, 549, 1.17, true},
		{"1e7", kernels.HALS, 596, 587.47, true},
		{"MNIST", kernels.ANLS, 197, 395.61, true},
		{"1e5", kernels.MU, 0, 0, false},
		{"2000", kernels.DID, 0, 0, false},
	} {
		it, s, ok := PaperFigure(tc.row, tc.algo)
		if it != tc.iters || s != tc.secs || ok != tc.ok {
			t.Errorf("PaperFigure(%s, %s) = %d, %v, %v", tc.row, tc.algo, it, s, ok)
		}
	}
	if s := SyntheticSet(100000, 7); s.Data != "synthetic 1e5" || s.PaperRow != "1e5" || s.Inputs[0] != "synthetic:m=5,n=100000,k=3,seed=7" ||
		s.K != Table2SyntheticK || s.MaxIter != Table2SyntheticMaxIter || s.Init != kernels.InitRandom {
		t.Errorf("SyntheticSet(1e5) = %+v", s)
	}
	if s := SyntheticSet(2000, 1); s.PaperRow != "" {
		t.Errorf("SyntheticSet(2000) = %+v: a row the paper did not run", s)
	}
	dir := t.TempDir()
	if _, missing := FashionMNISTSet(dir); len(missing) != 2 {
		t.Errorf("FashionMNISTSet of an empty directory: missing %v", missing)
	}
	for _, f := range []string{"train-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if s, missing := FashionMNISTSet(dir); len(missing) != 0 || s.PaperRow != "MNIST" || s.K != Table2RealK || s.Init != kernels.InitKMeans || len(s.Inputs) != 2 {
		t.Errorf("FashionMNISTSet: %+v, missing %v", s, missing)
	}
}

// tinyOpener opens the table's runs as didnmf.Open does for the command, to the tolerance.
func tinyOpener(opened *[]int) Opener {
	return func(set Table2Set, a kernels.AlgorithmInfo, shards int) (*didnmf.Job, error) {
		*opened = append(*opened, shards)
		s := jobspec.New(set.Inputs, a.Name, set.K, shards)
		s.Init, s.Stop = set.Init, kernels.StopRule{Tol: 1e-6, MaxIter: set.MaxIter}
		return didnmf.Open(s, didnmf.InProcess(0, 1))
	}
}

// TestRunTable2Set: a tiny synthetic set, every row of it: the data read once on one shard,
// distributed algorithms (DID, DBCD, MU) on the shards asked for, the others (BCD) on one;
// DID, DBCD and BCD take the same iterations to the tolerance (the paper's claim); rows are
// emitted as they end.
func TestRunTable2Set(t *testing.T) {
	set := SyntheticSet(300, 1)
	algos, err := ParseAlgos("did,dbcd,bcd,mu")
	if err != nil {
		t.Fatal(err)
	}
	set.MaxIter = 3000
	var opened []int
	var emitted []Table2Row
	rows, err := RunTable2Set(set, algos, 4, 1, tinyOpener(&opened), func(r Table2Row) { emitted = append(emitted, r) })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(opened, []int{1, 4, 4, 1, 4}) || len(rows) != 4 || len(emitted) != 4 {
		t.Fatalf("opened %v, %d rows, %d emitted", opened, len(rows), len(emitted))
	}
	for i, r := range rows {
		if r != emitted[i] || r.Algo != string(algos[i].Name) || r.Data != "synthetic 300" || r.M != 5 || r.N != 300 || r.K != 3 || r.Layout != "dense" ||
			r.Tol != 1e-6 || r.MaxIter != 3000 || r.Init != "random" || r.Error != "" || r.PaperRow != "" || r.Threads != 1 {
			t.Errorf("row %d: %+v", i, r)
		}
		if r.Algo != "mu" && (r.StopReason != string(kernels.StopConverged) || r.ObjectiveRatio > 1e-6) {
			t.Errorf("%s: %s at ratio %g after %d iterations", r.Algo, r.StopReason, r.ObjectiveRatio, r.Iterations)
		}
	}
	if rows[0].Iterations != rows[1].Iterations || rows[0].Iterations != rows[2].Iterations || rows[0].Shards != 4 || rows[2].Shards != 1 {
		t.Errorf("did %d iterations on %d shards, dbcd %d, bcd %d on %d", rows[0].Iterations, rows[0].Shards, rows[1].Iterations, rows[2].Iterations, rows[2].Shards)
	}
	// More shards than samples is the user's to fix, named by its field.
	var opened2 []int
	_, err = RunTable2Set(SyntheticSet(3, 1), algos[:1], 4, 1, tinyOpener(&opened2), func(Table2Row) {})
	var ue *usererr.Error
	if !errors.As(err, &ue) || ue.Field != "shards" {
		t.Errorf("4 shards of 3 samples: %v, want a usererr about shards", err)
	}
}

// TestTable2Text: the header and the rows of the text table, with and without the paper's
// figures, and a failed run.
func TestTable2Text(t *testing.T) {
	var w bytes.Buffer
	WriteTable2Header(&w, 1e-6, 16, 2)
	WriteTable2Row(&w, Table2Row{Data: "synthetic 1e5", Algo: "did", Shards: 16, Iterations: 549, Seconds: 1.5, SecPerIter: 0.002, StopReason: "converged",
		ObjectiveRatio: 9e-7, PaperRow: "1e5", PaperIterations: 549, PaperSeconds: 1.17})
	WriteTable2Row(&w, Table2Row{Data: "synthetic 1e5", Algo: "mu", Shards: 1, Iterations: 2, Seconds: 0.25, SecPerIter: 0.125, StopReason: "max-iter", ObjectiveRatio: 0.5})
	WriteTable2Row(&w, Table2Row{Data: "fashion-mnist", Algo: "admm", Shards: 1, Error: "boom", PaperRow: "MNIST", PaperIterations: 199, PaperSeconds: 610.65})
	want := []string{
		"Table 2 of Gao & Chu (AAAI 2018) on this machine: tol 1e-06, distributed algorithms on P=16 shards, 2 thread(s);",
		"paper: P=16 nodes of one core each; its real-data row is MNIST digits (Fashion-MNIST here has the same shape). seconds: the iterations, without the initialisation.",
		"data               algo      shards   iters   paper    seconds    paper s      s/iter  stop",
		"synthetic 1e5      did           16     549     549      1.500       1.17       0.002  converged (ratio 9e-07)",
		"synthetic 1e5      mu             1       2       -      0.250          -       0.125  max-iter (ratio 0.5)",
		"fashion-mnist      admm           1       -     199          -     610.65           -  error: boom",
	}
	if got := strings.TrimSuffix(w.String(), "\n"); got != strings.Join(want, "\n") {
		t.Errorf("text\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}
