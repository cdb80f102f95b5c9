package bench

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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
		{"1.00000000000000001e3", nil, true},
		{"2.5e3", []int{2500}, false},
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
	return func(set Table2Set, a kernels.AlgorithmInfo, accel kernels.Accel, shards int) (*didnmf.Job, error) {
		*opened = append(*opened, shards)
		s := jobspec.New(set.Inputs, a.Name, set.K, shards)
		s.Accel = accel
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
	rows, err := RunTable2Set(set, algos, Table2Config{Shards: 4, Threads: 1}, tinyOpener(&opened), func(r Table2Row) { emitted = append(emitted, r) })
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
	_, err = RunTable2Set(SyntheticSet(3, 1), algos[:1], Table2Config{Shards: 4, Threads: 1}, tinyOpener(&opened2), func(Table2Row) {})
	var ue *usererr.Error
	if !errors.As(err, &ue) || ue.Field != "shards" {
		t.Errorf("4 shards of 3 samples: %v, want a usererr about shards", err)
	}
}

// TestRunTable2SetAccel: did, bcd and hals run once per accel setting, in order, each row
// naming its setting (and the job it ran having it); the other algorithms run once, plain.
func TestRunTable2SetAccel(t *testing.T) {
	set := SyntheticSet(300, 1)
	set.MaxIter = 5
	algos, err := ParseAlgos("did,mu,hals")
	if err != nil {
		t.Fatal(err)
	}
	c2 := kernels.Accel{CSweeps: 2, BSweeps: 4, Eps: 0.2}
	var accels []kernels.Accel
	open := func(set Table2Set, a kernels.AlgorithmInfo, accel kernels.Accel, shards int) (*didnmf.Job, error) {
		j, err := tinyOpener(new([]int))(set, a, accel, shards)
		if err == nil && j.Config().Options.Accel != accel {
			t.Errorf("%s: the job's accel is %+v, want %+v", a.Name, j.Config().Options.Accel, accel)
		}
		accels = append(accels, accel)
		return j, err
	}
	rows, err := RunTable2Set(set, algos, Table2Config{Shards: 2, Threads: 1, Accels: []kernels.Accel{{}, kernels.AccelAuto, c2}}, open, func(Table2Row) {})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ algo, accel, label string }{
		{"did", "off", "did"}, {"did", "auto", "did accel auto"}, {"did", "2,4,0.2", "did accel 2,4,0.2"},
		{"mu", "", "mu"},
		{"hals", "off", "hals"}, {"hals", "3,20,0.1", "hals accel 3,20,0.1"}, {"hals", "2,4,0.2", "hals accel 2,4,0.2"},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i, w := range want {
		if r := rows[i]; r.Algo != w.algo || r.Accel != w.accel || r.Label() != w.label || r.Error != "" || r.Iterations != 5 {
			t.Errorf("row %d: %s accel %q (%s), %d iterations, error %q; want %s accel %q (%s)", i, r.Algo, r.Accel, r.Label(), r.Iterations, r.Error, w.algo, w.accel, w.label)
		}
	}
	// The first open reads the data, plain; then one per row.
	sweeps := kernels.AccelAuto
	sweeps.Extrapolate = false // hals runs auto's sweeps: it does not extrapolate
	if wantAccels := []kernels.Accel{{}, {}, kernels.AccelAuto, c2, {}, {}, sweeps, c2}; !slices.Equal(accels, wantAccels) {
		t.Errorf("opened with accels %v, want %v", accels, wantAccels)
	}
}

// TestRunTable2SetTimeCap: a run longer than the cap stops there, its row saying so with the
// iterations it did; a run within it is not capped.
func TestRunTable2SetTimeCap(t *testing.T) {
	set := SyntheticSet(20000, 1)
	set.MaxIter = 1 << 30
	algos, err := ParseAlgos("mu")
	if err != nil {
		t.Fatal(err)
	}
	open := func(set Table2Set, a kernels.AlgorithmInfo, accel kernels.Accel, shards int) (*didnmf.Job, error) {
		s := jobspec.New(set.Inputs, a.Name, set.K, shards)
		s.Init, s.Stop = set.Init, kernels.StopRule{Tol: 0, MaxIter: set.MaxIter} // never converges
		return didnmf.Open(s, didnmf.InProcess(0, 1))
	}
	start := time.Now()
	rows, err := RunTable2Set(set, algos, Table2Config{Shards: 1, Threads: 1, TimeCap: 300 * time.Millisecond}, open, func(Table2Row) {})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Minute {
		t.Errorf("a 300ms cap took %v", took)
	}
	if r := rows[0]; r.Capped != "300ms" || r.StopReason != StopCapped || r.Error != "" || r.Iterations < 1 || !(r.ObjectiveRatio < 1) {
		t.Errorf("capped row %+v", r)
	}
	var w bytes.Buffer
	WriteTable2Row(&w, rows[0])
	if !strings.Contains(w.String(), "capped at 300ms (ratio") {
		t.Errorf("capped row reads %q", w.String())
	}
	set.MaxIter = 3
	rows, err = RunTable2Set(set, algos, Table2Config{Shards: 1, Threads: 1, TimeCap: time.Hour}, tinyOpener(new([]int)), func(Table2Row) {})
	if err != nil || rows[0].Capped != "" || rows[0].StopReason != string(kernels.StopMaxIter) {
		t.Errorf("uncapped row %+v, %v", rows[0], err)
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
	WriteTable2Row(&w, Table2Row{Data: "synthetic 1e5", Algo: "did", Accel: "off", Shards: 16, Iterations: 549, Seconds: 1.5, SecPerIter: 0.002, StopReason: "converged",
		ObjectiveRatio: 9e-7})
	WriteTable2Row(&w, Table2Row{Data: "synthetic 1e5", Algo: "did", Accel: "auto", Shards: 16, Iterations: 200, Seconds: 0.6, SecPerIter: 0.003, StopReason: "converged",
		ObjectiveRatio: 9e-7})
	WriteTable2Row(&w, Table2Row{Data: "synthetic 1e8", Algo: "anls", Shards: 1, Iterations: 7, Seconds: 590, SecPerIter: 84.3, StopReason: StopCapped, Capped: "10m0s",
		ObjectiveRatio: 0.01, PaperRow: "1e8", PaperIterations: 163, PaperSeconds: 43197.12})
	WriteTable2Row(&w, Table2Row{Data: "synthetic 1e8", Algo: "admm", Shards: 1, StopReason: StopCapped, Capped: "1s"})
	want := []string{
		"Table 2 of Gao & Chu (AAAI 2018) on this machine: tol 1e-06, distributed algorithms on P=16 shards, 2 thread(s);",
		"paper: P=16 nodes of one core each; its real-data row is MNIST digits (Fashion-MNIST here has the same shape). seconds: the iterations, without the initialisation.",
		"data               algo                 shards   iters   paper    seconds    paper s      s/iter  stop",
		"synthetic 1e5      did                      16     549     549      1.500       1.17       0.002  converged (ratio 9e-07)",
		"synthetic 1e5      mu                        1       2       -      0.250          -       0.125  max-iter (ratio 0.5)",
		"fashion-mnist      admm                      1       -     199          -     610.65           -  error: boom",
		"synthetic 1e5      did                      16     549       -      1.500          -       0.002  converged (ratio 9e-07)",
		"synthetic 1e5      did accel auto           16     200       -      0.600          -       0.003  converged (ratio 9e-07)",
		"synthetic 1e8      anls                      1       7     163    590.000   43197.12        84.3  capped at 10m0s (ratio 0.01)",
		"synthetic 1e8      admm                      1       -       -          -          -           -  capped at 1s in the initialisation",
	}
	if got := strings.TrimSuffix(w.String(), "\n"); got != strings.Join(want, "\n") {
		t.Errorf("text\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}

// TestRunTable2SetRefusedRow: a row whose job this machine refuses (here dbcd, as dadmm at
// N=1e8 is refused for memory) is a row with the refusal as its error, and the rows after it
// still run.
func TestRunTable2SetRefusedRow(t *testing.T) {
	set := SyntheticSet(300, 1)
	set.MaxIter = 50
	algos, err := ParseAlgos("did,dbcd,bcd")
	if err != nil {
		t.Fatal(err)
	}
	tiny := tinyOpener(new([]int))
	refusal := usererr.Field("input", "synthetic 300 needs about 20 GiB of memory; this machine has 18 GiB available")
	open := func(s Table2Set, a kernels.AlgorithmInfo, accel kernels.Accel, shards int) (*didnmf.Job, error) {
		if a.Name == kernels.DBCD {
			return nil, refusal
		}
		return tiny(s, a, accel, shards)
	}
	rows, err := RunTable2Set(set, algos, Table2Config{Shards: 2, Threads: 1}, open, func(Table2Row) {})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3: %+v", len(rows), rows)
	}
	if rows[1].Algo != "dbcd" || rows[1].Error != refusal.Error() || rows[1].Iterations != 0 {
		t.Errorf("the refused row: %+v", rows[1])
	}
	for _, i := range []int{0, 2} {
		if rows[i].Error != "" || rows[i].Iterations == 0 {
			t.Errorf("row %d (%s) after a refused row: %+v", i, rows[i].Algo, rows[i])
		}
	}
	var text bytes.Buffer
	WriteTable2Row(&text, rows[1])
	if !strings.Contains(text.String(), "error: "+refusal.Error()) {
		t.Errorf("the refused row reads %q", text.String())
	}
}
