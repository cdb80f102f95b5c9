package cli

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
)

// fitBasis factorizes a synthetic matrix of 8 features and returns the result directory.
func fitBasis(t *testing.T, dir string) string {
	t.Helper()
	fit := filepath.Join(dir, "fit")
	if code, _, stderr := runNode(t, "factorize", "--input", "synthetic:m=8,n=4000,k=3,seed=6,noise=0.02", "--rank", "3",
		"--max-iter", "40", "--quiet", "--out", fit); code != 0 {
		t.Fatal(stderr)
	}
	return fit
}

// TestTransformCommand: didnmf transform projects new samples onto a basis: the same coef on
// the driver, on 3 actor systems and through factorize --fix-basis, a report of one exact
// pass whose rel_err2 is the direct reconstruction error, and a penalty that changes it.
func TestTransformCommand(t *testing.T) {
	dir := t.TempDir()
	basis := filepath.Join(fitBasis(t, dir), "basis.npy")
	input := "synthetic:m=8,n=2500,k=3,seed=9,noise=0.05" // new samples
	runs := map[string][]string{
		"driver":      {"transform", "--basis", basis, "--input", input, "--shards", "4"},
		"nodes":       {"transform", "--basis", basis, "--input", input, "--shards", "4", "--nodes", "3"},
		"fix-basis":   {"factorize", "--fix-basis", basis, "--input", input, "--shards", "2"},
		"one shard":   {"transform", "--basis", basis, "--input", input},
		"penalized":   {"transform", "--basis", basis, "--input", input, "--alpha-coef", "0.05", "--l1-ratio", "1"},
		"float64 too": {"transform", "--basis", basis, "--input", input, "--storage", "float64", "--layout", "sparse"},
	}
	outs := map[string]string{}
	for name, args := range runs {
		out := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if code, _, stderr := runNode(t, append(args, "--quiet", "--out", out)...); code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, stderr)
		}
		outs[name] = out
	}
	for _, name := range []string{"nodes", "fix-basis", "one shard", "float64 too"} {
		sameResult(t, outs["driver"], outs[name])
	}
	sameFiles(t, basis, filepath.Join(outs["driver"], "basis.npy"))
	r := readReport(t, outs["driver"])
	if r.Algo != "transform" || r.Iterations != 1 || !r.Converged || r.StopReason != "solved" || r.K != 3 || r.N != 2500 {
		t.Errorf("report: algo %s, %d iterations, converged %v (%s), K %d, N %d", r.Algo, r.Iterations, r.Converged, r.StopReason, r.K, r.N)
	}
	// rel_err2 is the reconstruction error of the samples, computed here from the files.
	_, _, bData, err := matio.ReadNPYMatrix(basis)
	if err != nil {
		t.Fatal(err)
	}
	_, _, cData, err := matio.ReadNPYMatrix(filepath.Join(outs["driver"], "coef.npy"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := matio.Open(input)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	blk, err := src.Read(0, 2500, matio.LayoutDense)
	if err != nil {
		t.Fatal(err)
	}
	x := kernels.ToDense(blk)
	var res, sq float64
	for j := 0; j < 2500; j++ {
		for i := 0; i < 8; i++ {
			v := 0.0
			for p := 0; p < 3; p++ {
				v += bData[i*3+p] * cData[j*3+p]
			}
			d := x.Col(j)[i] - v
			res, sq = res+d*d, sq+x.Col(j)[i]*x.Col(j)[i]
		}
	}
	if got := res / sq; math.Abs(r.RelErr2-got) > 1e-9*got {
		t.Errorf("rel_err2 %v, direct %v", r.RelErr2, got)
	}
	if p := readReport(t, outs["penalized"]); p.AlphaCoef != 0.05 || !(p.RelErr2 > r.RelErr2) {
		t.Errorf("penalized: alpha_coef %v, rel_err2 %v (unpenalized %v)", p.AlphaCoef, p.RelErr2, r.RelErr2)
	}
}

// TestTransformRefuses: what a transform cannot do is said before any work.
func TestTransformRefuses(t *testing.T) {
	dir := t.TempDir()
	basis := filepath.Join(fitBasis(t, dir), "basis.npy")
	notNPY := filepath.Join(dir, "basis.txt")
	if err := os.WriteFile(notNPY, []byte("1 2 3"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no basis", []string{"transform", "--input", "synthetic:m=8,n=100,k=3"}, "--basis is required"},
		{"features differ", []string{"transform", "--basis", basis, "--input", "synthetic:m=9,n=100,k=3"},
			"basis.npy: shape (8, 3), but synthetic:m=9,n=100,k=3,seed=1 has 9 features and the basis's K is 3"},
		{"not a basis", []string{"transform", "--basis", notNPY, "--input", "synthetic:m=8,n=100,k=3"}, "--basis: "},
		{"rank flag", []string{"transform", "--basis", basis, "--rank", "3", "--input", "synthetic:m=8,n=100,k=3"}, "flag provided but not defined: -rank"},
		{"fix-basis with algo", []string{"factorize", "--fix-basis", basis, "--algo", "hals", "--input", "synthetic:m=8,n=100,k=3"},
			"--fix-basis solves the coef exactly for the basis given (NNLS per sample, one pass): --algo does not apply"},
		{"a loss", []string{"transform", "--basis", basis, "--input", "synthetic:m=8,n=100,k=3", "--loss", "kl"},
			"--loss kl: a transform solves every sample's coefficients by nonnegative least squares, for the Frobenius loss only; leave out --loss"},
		{"missing values", []string{"transform", "--basis", basis, "--input", "synthetic:m=8,n=100,k=3", "--missing", "nan"},
			"--missing nan: a transform solves every sample's coefficients from all of its entries; it takes no missing or held-out entries"},
		{"held-out entries", []string{"factorize", "--fix-basis", basis, "--input", "synthetic:m=8,n=100,k=3", "--test-fraction", "0.1"},
			"--test-fraction: a transform solves every sample's coefficients from all of its entries"},
		{"fix-basis with another rank", []string{"factorize", "--fix-basis", basis, "--rank", "2", "--input", "synthetic:m=8,n=100,k=3"},
			"--rank 2: the basis"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runNode(t, append(c.args, "--out", out)...)
			if code != 2 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, %q; want exit 2 and %q", code, stderr, c.want)
			}
		})
	}
}

// TestTransformFewerSamplesThanRank: projecting one sample onto a rank-3 basis works (as
// scikit-learn's transform does), and its coef is the bits of that sample's row in a
// transform of many samples: each sample's NNLS is its own.
func TestTransformFewerSamplesThanRank(t *testing.T) {
	dir := t.TempDir()
	basis := filepath.Join(fitBasis(t, dir), "basis.npy")
	many := filepath.Join(dir, "many.npy")
	if code, _, stderr := runNode(t, "convert", "--input", "synthetic:m=8,n=50,k=3,seed=9,noise=0.05", "--out", many); code != 0 {
		t.Fatal(stderr)
	}
	_, cols, data, err := matio.ReadNPYMatrix(many)
	if err != nil {
		t.Fatal(err)
	}
	const row = 17
	one := filepath.Join(dir, "one.npy")
	writeNPY(t, one, 1, cols, data[row*cols:(row+1)*cols])
	outMany, outOne := filepath.Join(dir, "out-many"), filepath.Join(dir, "out-one")
	for _, r := range [][2]string{{many, outMany}, {one, outOne}} {
		if code, _, stderr := runNode(t, "transform", "--basis", basis, "--input", r[0], "--quiet", "--out", r[1]); code != 0 {
			t.Fatalf("transform %s: exit %d: %s", r[0], code, stderr)
		}
	}
	_, k, cMany, err := matio.ReadNPYMatrix(filepath.Join(outMany, "coef.npy"))
	if err != nil {
		t.Fatal(err)
	}
	n1, k1, cOne, err := matio.ReadNPYMatrix(filepath.Join(outOne, "coef.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if n1 != 1 || k1 != k {
		t.Fatalf("one sample's coef is %d x %d, want 1 x %d", n1, k1, k)
	}
	for j := range k {
		if math.Float64bits(cOne[j]) != math.Float64bits(cMany[row*k+j]) {
			t.Errorf("coef[%d]: one sample %v, its row among many %v", j, cOne[j], cMany[row*k+j])
		}
	}
}
