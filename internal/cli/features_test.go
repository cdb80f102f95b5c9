package cli

import (
	"bytes"
	"math"
	"slices"
	"strings"

	"os"
	"path/filepath"
	"testing"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
)

// jobFeatures are the job options beyond the plain fit, each of which must give the driver's
// bits on actors: on 3 in-process actor systems (TestFeaturesOnNodes) and on the cluster of
// processes (TestClusterOfProcesses). Each entry's flags are added to featureJob.
var jobFeatures = []struct {
	name  string
	flags []string
	check func(t *testing.T, out string)
}{
	{"penalties", []string{"--alpha-coef", "0.002", "--alpha-basis", "0.001", "--l1-ratio", "0.5"}, func(t *testing.T, out string) {
		r := readReport(t, out)
		if r.AlphaCoef != 0.002 || r.AlphaBasis != 0.001 || r.L1Ratio != 0.5 || !(r.Objective > 0) {
			t.Errorf("report: alpha_coef %v, alpha_basis %v, l1_ratio %v, objective %v", r.AlphaCoef, r.AlphaBasis, r.L1Ratio, r.Objective)
		}
	}},
	{"kl loss", []string{"--algo", "mu", "--loss", "kl"}, func(t *testing.T, out string) {
		if r := readReport(t, out); r.Loss != "kl" || r.Algo != "mu" || !(r.Objective > 0) {
			t.Errorf("report: loss %q, algo %s, objective %v", r.Loss, r.Algo, r.Objective)
		}
	}},
	{"beta 1.5 loss, penalized", []string{"--algo", "mu", "--loss", "1.5", "--alpha-coef", "0.001"}, func(t *testing.T, out string) {
		if r := readReport(t, out); r.Loss != "1.5" || r.AlphaCoef != 0.001 {
			t.Errorf("report: loss %q, alpha_coef %v", r.Loss, r.AlphaCoef)
		}
	}},
	{"held-out test set", []string{"--test-fraction", "0.1", "--test-seed", "7"}, func(t *testing.T, out string) {
		r := readReport(t, out)
		last := r.History[len(r.History)-1]
		all := int64(r.M) * int64(r.N)
		if r.TestFraction != 0.1 || r.TestSeed != 7 || r.TestCount < all/20 || r.TestCount > all*3/20 || !(r.TestRelErr2 > 0) ||
			r.Observed+r.TestCount != all || last.TestRelErr2 != r.TestRelErr2 || r.History[0].TestCount != r.TestCount {
			t.Errorf("report: test fraction %v seed %v, %d held out, %d observed, test rel_err2 %v (history's last %v)",
				r.TestFraction, r.TestSeed, r.TestCount, r.Observed, r.TestRelErr2, last.TestRelErr2)
		}
	}},
	{"kl loss, held-out test set", []string{"--algo", "mu", "--loss", "kl", "--test-fraction", "0.1"}, func(t *testing.T, out string) {
		if r := readReport(t, out); r.Loss != "kl" || r.TestCount == 0 || !(r.TestRelErr2 > 0) || r.History[0].TestCount != r.TestCount {
			t.Errorf("report: loss %q, %d held out, test rel_err2 %v", r.Loss, r.TestCount, r.TestRelErr2)
		}
	}},
	{"sqrt transform, held-out test set", []string{"--transform", "sqrt", "--test-fraction", "0.1"}, func(t *testing.T, out string) {
		// The fit is of sqrt(X): the history's test errors are too, the job's last one is the
		// model's square's against X (computed by the shards where the data are).
		r := readReport(t, out)
		last := r.History[len(r.History)-1]
		if r.Transform != "sqrt" || r.TestCount == 0 || !(r.TestRelErr2 > 0) || !(last.TestRelErr2 > 0) || last.TestRelErr2 == r.TestRelErr2 {
			t.Errorf("report: transform %q, %d held out, test rel_err2 %v (the last iteration's, of sqrt(X): %v)", r.Transform, r.TestCount, r.TestRelErr2, last.TestRelErr2)
		}
	}},
	{"l1 penalty, alpha-basis same", []string{"--alpha-coef", "0.01", "--l1-ratio", "1", "--algo", "dbcd"}, func(t *testing.T, out string) {
		if r := readReport(t, out); r.AlphaBasis != 0.01 {
			t.Errorf("--alpha-basis same: report alpha_basis %v, want 0.01", r.AlphaBasis)
		}
	}},
}

// featureJob is the job jobFeatures run: small, exactly 20 iterations.
func featureJob(input string) []string {
	return []string{"--input", input, "--rank", "3", "--shards", "5", "--max-iter", "20", "--tol", "0", "--quiet"}
}

// TestFeaturesOnNodes: every job feature gives the driver's files on 3 actor systems.
func TestFeaturesOnNodes(t *testing.T) {
	dir := t.TempDir()
	input := "synthetic:m=8,n=3000,k=3,seed=6,noise=0.05"
	plain := filepath.Join(dir, "plain")
	if code, _, stderr := runNode(t, append([]string{"factorize", "--out", plain}, featureJob(input)...)...); code != 0 {
		t.Fatal(stderr)
	}
	for _, f := range jobFeatures {
		t.Run(f.name, func(t *testing.T) {
			job := append(featureJob(input), f.flags...)
			golden, out := filepath.Join(dir, f.name+"-golden"), filepath.Join(dir, f.name+"-nodes")
			if code, _, stderr := runNode(t, append([]string{"factorize", "--out", golden}, job...)...); code != 0 {
				t.Fatal(stderr)
			}
			if code, _, stderr := runNode(t, append([]string{"factorize", "--nodes", "3", "--out", out}, job...)...); code != 0 {
				t.Fatal(stderr)
			}
			sameResult(t, golden, out)
			if a, _ := os.ReadFile(filepath.Join(golden, "coef.npy")); bytes.Equal(a, mustRead(t, filepath.Join(plain, "coef.npy"))) {
				t.Errorf("%v changed nothing: the plain job's coef", f.flags)
			}
			f.check(t, golden)
			f.check(t, out)
		})
	}
}

// sameResult fails unless the result directories hold the same basis.npy and coef.npy.
func sameResult(t *testing.T, a, b string) {
	t.Helper()
	for _, name := range []string{"basis.npy", "coef.npy"} {
		if _, err := os.Stat(filepath.Join(a, name)); err != nil {
			continue // a job that writes no such file (transform writes no basis)
		}
		sameFiles(t, filepath.Join(a, name), filepath.Join(b, name))
	}
}

// mustRead returns the file's bytes.
func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestISLossRefusesZeros: Itakura-Saito needs X > 0 everywhere, as scikit-learn does; a zero
// is refused with its sample and feature, in this process and on actors alike (exit 2).
func TestISLossRefusesZeros(t *testing.T) {
	dir := t.TempDir()
	x := filepath.Join(dir, "x.npy")
	data := make([]float64, 30*4) // 30 samples x 4 features, row-major
	for i := range data {
		data[i] = 1 + float64(i%7)
	}
	data[12*4+2] = 0 // sample 12, feature 2
	f, err := os.Create(x)
	if err != nil {
		t.Fatal(err)
	}
	if err := matio.WriteNPY(f, 30, 4, data); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, nodes := range []string{"0", "2"} {
		code, _, stderr := runNode(t, "factorize", "--input", x, "--rank", "2", "--algo", "mu", "--loss", "is", "--shards", "3",
			"--nodes", nodes, "--out", filepath.Join(dir, "out"+nodes))
		if code != 2 || !strings.Contains(stderr, "sample 12, feature 2") {
			t.Errorf("--nodes %s: exit %d, %q; want exit 2 naming sample 12, feature 2", nodes, code, stderr)
		}
	}
}

// nanInput writes a 600 x 8 (samples x features) .npy of a rank-3 matrix with about 5% of
// its entries NaN, and returns its path and the number of NaNs.
func nanInput(t *testing.T, dir string) (string, int) {
	t.Helper()
	src, err := matio.Open("synthetic:m=8,n=600,k=3,seed=4,noise=0.05")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	blk, err := src.Read(0, 600, matio.LayoutDense)
	if err != nil {
		t.Fatal(err)
	}
	data := append([]float64(nil), kernels.ToDense(blk).Data...) // column-major M x N = row-major N x M
	nans := 0
	for i := range data {
		if (i*7919)%20 == 3 {
			data[i], nans = math.NaN(), nans+1
		}
	}
	path := filepath.Join(dir, "x-nan.npy")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := matio.WriteNPY(f, 600, 8, data); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return path, nans
}

// TestMissingValues: --missing nan fits around NaN entries (did, dbcd, hals, and mu with the
// Frobenius and KL losses), with the driver's bits on 3 actor systems, reports what it saw,
// and without the flag a NaN is refused naming its place.
func TestMissingValues(t *testing.T) {
	dir := t.TempDir()
	x, nans := nanInput(t, dir)
	job := []string{"factorize", "--input", x, "--rank", "3", "--shards", "3", "--max-iter", "30", "--tol", "0", "--quiet", "--missing", "nan"}
	for _, run := range [][]string{{"did"}, {"dbcd"}, {"hals"}, {"mu"}, {"mu", "--loss", "kl"}} {
		algo, shards := strings.Join(run, " "), "3"
		if run[0] == "hals" {
			shards = "1"
		}
		name := strings.NewReplacer(" ", "", "-", "").Replace(algo)
		limit := 0.01 // MU converges slower: 30 iterations reach about 0.0115 here
		if run[0] == "mu" {
			limit = 0.05
		}
		golden, nodes := filepath.Join(dir, name+"-golden"), filepath.Join(dir, name+"-nodes")
		args := append(append(slices.Clone(job), "--algo"), run...)
		args = append(args, "--shards", shards)
		if code, _, stderr := runNode(t, append(args, "--out", golden)...); code != 0 {
			t.Fatalf("%s: %s", algo, stderr)
		}
		if code, _, stderr := runNode(t, append(args, "--nodes", "3", "--out", nodes)...); code != 0 {
			t.Fatalf("%s on 3 nodes: %s", algo, stderr)
		}
		sameResult(t, golden, nodes)
		for _, out := range []string{golden, nodes} {
			r := readReport(t, out)
			if r.Missing != int64(nans) || r.Observed != 600*8-int64(nans) || !(r.RelErr2 > 0 && r.RelErr2 < limit) {
				t.Errorf("%s %s: missing %d (want %d), observed %d, rel_err2 %v", algo, filepath.Base(out), r.Missing, nans, r.Observed, r.RelErr2)
			}
		}
	}
	code, _, stderr := runNode(t, "factorize", "--input", x, "--rank", "3", "--out", filepath.Join(dir, "refused"))
	if code != 2 || !strings.Contains(stderr, "NaN value") || !strings.Contains(stderr, "to read NaN entries as missing values, give --missing nan") {
		t.Errorf("a NaN without --missing nan: exit %d, %q", code, stderr)
	}
	code, _, stderr = runNode(t, "factorize", "--input", x, "--rank", "3", "--missing", "nan", "--algo", "anls", "--out", filepath.Join(dir, "anls"))
	if code != 2 || !strings.Contains(stderr, "the algorithms that can are did, dbcd, bcd, hals") {
		t.Errorf("--missing nan with anls: exit %d, %q", code, stderr)
	}
}
