package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/matio"
)

// consensusInput writes a small planted-rank-3 input as X.npy with its features' and
// samples' names beside it (X.features.tsv, X.samples.tsv), sweeps it at K = 2, 3 with 6
// seeds, and returns the input and the sweep's directory.
func consensusInput(t *testing.T, dir string) (input, sweepDir string) {
	t.Helper()
	input = filepath.Join(dir, "X.npy")
	if code, _, stderr := runNode(t, "convert", "--input", "synthetic:m=12,n=300,k=3,seed=5,noise=0.02", "--out", input); code != 0 {
		t.Fatal(stderr)
	}
	var feats, samples strings.Builder
	for i := 0; i < 12; i++ {
		fmt.Fprintf(&feats, "gene%d\n", i)
	}
	for j := 0; j < 300; j++ {
		fmt.Fprintf(&samples, "cell%d\n", j)
	}
	if err := os.WriteFile(filepath.Join(dir, "X.features.tsv"), []byte(feats.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "X.samples.tsv"), []byte(samples.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	sweepDir = filepath.Join(dir, "sweep")
	if code, _, stderr := runNode(t, "sweep", "--input", input, "--ranks", "2:3", "--seeds", "6", "--max-iter", "100", "--quiet", "--out", sweepDir); code != 0 {
		t.Fatalf("sweep: exit %d: %s", code, stderr)
	}
	return input, sweepDir
}

// TestConsensusCommand: didnmf consensus writes the consensus basis, the usages refit by the
// transform (the same coef bits as didnmf transform --basis on its basis, in this process
// and on 3 actor systems), the .tsv files under the input's names, consensus.json and the
// density figure.
func TestConsensusCommand(t *testing.T) {
	dir := t.TempDir()
	input, sweepDir := consensusInput(t, dir)
	outs := map[string]string{}
	for name, extra := range map[string][]string{
		"driver": nil,
		"nodes":  {"--nodes", "3", "--shards", "3"},
		"keep":   {"--density-threshold", "2"},
	} {
		out := filepath.Join(dir, name)
		args := append([]string{"consensus", "--sweep", sweepDir, "--k", "3", "--input", input, "--out", out}, extra...)
		code, _, stderr := runNode(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, stderr)
		}
		if !strings.Contains(stderr, "consensus of K=3 over 6 runs: kept") || !strings.Contains(stderr, "density_3.png") {
			t.Errorf("%s: stderr %q", name, stderr)
		}
		outs[name] = out
	}
	sameResult(t, outs["driver"], outs["nodes"])
	// The refit is the transform of the input for the consensus basis, to the bit.
	tr := filepath.Join(dir, "transform")
	if code, _, stderr := runNode(t, "transform", "--basis", filepath.Join(outs["driver"], "basis.npy"), "--input", input, "--quiet", "--out", tr); code != 0 {
		t.Fatalf("transform: %s", stderr)
	}
	sameResult(t, outs["driver"], tr)

	out := outs["driver"]
	for _, name := range []string{"basis.npy", "coef.npy", "basis.tsv", "coef.tsv", "top_features.tsv", "report.json", "consensus.json", "density_3.png", "density_3.svg"} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Error(err)
		}
	}
	// The basis is the consensus of the sweep's spectra, columns of sum 1.
	sp, err := didnmf.ReadSpectra(sweepDir, 3)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sp.Consensus(didnmf.ConsensusOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	rows, cols, basis, err := matio.ReadNPYMatrix(filepath.Join(out, "basis.npy"))
	if err != nil || rows != 12 || cols != 3 {
		t.Fatalf("basis.npy: %d x %d, %v", rows, cols, err)
	}
	want := c.Basis()
	for p := 0; p < 3; p++ {
		var s float64
		for f := 0; f < 12; f++ {
			if basis[f*3+p] != want[f*3+p] {
				t.Fatalf("basis.npy (%d, %d) = %v, the consensus's %v", f, p, basis[f*3+p], want[f*3+p])
			}
			s += basis[f*3+p]
		}
		if math.Abs(s-1) > 1e-12 {
			t.Errorf("basis column %d sums to %v, want 1", p, s)
		}
	}
	// Named by the input's names.
	for file, first := range map[string]string{"basis.tsv": "gene0\t", "coef.tsv": "cell0\t"} {
		data, err := os.ReadFile(filepath.Join(out, file))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		if len(lines) < 2 || !strings.HasPrefix(lines[1], first) {
			t.Errorf("%s starts %q, want its first row named %q", file, lines[:min(2, len(lines))], first)
		}
	}
	var rep didnmf.ConsensusReport
	for name, o := range map[string]string{"driver": out, "keep": outs["keep"]} {
		data, err := os.ReadFile(filepath.Join(o, "consensus.json"))
		if err != nil || json.Unmarshal(data, &rep) != nil {
			t.Fatalf("%s: consensus.json: %v", name, err)
		}
		sizes := 0
		for _, s := range rep.ClusterSizes {
			sizes += s
		}
		if rep.K != 3 || rep.Runs != 6 || rep.Components != 18 || rep.Kept+rep.FilteredCount != 18 || sizes != rep.Kept ||
			len(rep.FilteredSpectra) != rep.FilteredCount || rep.Neighbors != 1 || rep.Spectra != "spectra_3.npy" {
			t.Errorf("%s: consensus.json: %+v", name, rep)
		}
		if name == "keep" && (rep.FilteredCount != 0 || rep.DensityThreshold != 2) {
			t.Errorf("--density-threshold 2 dropped %d spectra (threshold %v)", rep.FilteredCount, rep.DensityThreshold)
		}
	}
}

// TestConsensusCommandBadInput: a sweep directory that is missing, not what its sweep.json
// says, or of another input is exit 2 with one message naming the file; nothing is refit.
func TestConsensusCommandBadInput(t *testing.T) {
	dir := t.TempDir()
	input, good := consensusInput(t, dir)
	copySweep := func(t *testing.T) string {
		d := t.TempDir()
		for _, name := range []string{"sweep.json", "spectra_2.npy", "spectra_3.npy"} {
			data, err := os.ReadFile(filepath.Join(good, name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	writeSpectra := func(rows, cols int, last float64) func(t *testing.T, d string) {
		return func(t *testing.T, d string) {
			data := make([]float64, rows*cols)
			for i := range data {
				data[i] = 0.3
			}
			data[len(data)-1] = last
			f, err := os.Create(filepath.Join(d, "spectra_3.npy"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := matio.WriteNPY(f, rows, cols, data); err != nil {
				t.Fatal(err)
			}
		}
	}
	fewNames := filepath.Join(dir, "few.names")
	if err := os.WriteFile(fewNames, []byte("a\nb\nc\nd\ne\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		edit  func(t *testing.T, d string)
		args  []string // instead of --k 3 --input X
		names string   // in the message: the file (relative to the sweep dir) or text
		want  string
	}{
		{name: "missing sweep.json", edit: func(t *testing.T, d string) { os.Remove(filepath.Join(d, "sweep.json")) }, names: "sweep.json", want: "cannot read the sweep's report"},
		{name: "missing spectra", edit: func(t *testing.T, d string) { os.Remove(filepath.Join(d, "spectra_3.npy")) }, names: "spectra_3.npy", want: "no such file"},
		{name: "wrong shape", edit: writeSpectra(12, 15, 0.3), names: "spectra_3.npy", want: "shape 12 x 15"},
		{name: "NaN", edit: writeSpectra(12, 18, math.NaN()), names: "spectra_3.npy", want: "NaN"},
		{name: "K not in the sweep", args: []string{"--k", "5", "--input", input}, names: "sweep.json", want: "no rank K = 5"},
		{name: "another input", args: []string{"--k", "3", "--input", "synthetic:m=9,n=50,k=2,seed=1"}, names: "--input synthetic:m=9,n=50,k=2,seed=1", want: "has 50 samples and 9 features; the sweep"},
		{name: "threshold keeps too few", args: []string{"--k", "3", "--input", input, "--density-threshold", "1e-12"}, names: "sweep", want: "fewer than K = 3"},
		{name: "no neighbour", args: []string{"--k", "3", "--input", input, "--local-neighborhood-size", "0.1"}, names: "sweep", want: "makes 0 neighbours"},
		{name: "no --k", args: []string{"--input", input}, names: "--k", want: "--k is required"},
		// The names are checked before the clustering, whose own error (too few kept) would
		// otherwise come first.
		{name: "a names file that does not fit, before the clustering", args: []string{"--k", "3", "--input", input, "--density-threshold", "1e-12",
			"--feature-names", fewNames}, names: "--feature-names", want: "ends after 5 names"},
		// The fit's own flags, which the refit (a transform) has no use for, in consensus's words.
		{name: "a loss", args: []string{"--k", "3", "--input", input, "--loss", "kl"}, names: "--loss kl",
			want: "consensus refits the usages by nonnegative least squares for the consensus basis (a transform), for the Frobenius loss only"},
		{name: "missing values", args: []string{"--k", "3", "--input", input, "--missing", "nan"}, names: "--missing nan",
			want: "a transform solves every sample's coefficients from all of its entries; it takes no missing or held-out entries"},
		{name: "held-out entries", args: []string{"--k", "3", "--input", input, "--test-fraction", "0.5"}, names: "--test-fraction",
			want: "it takes no missing or held-out entries; leave out --test-fraction"},
		{name: "threshold inf", args: []string{"--k", "3", "--input", input, "--density-threshold", "inf"}, names: "--density-threshold", want: "must be a number > 0"},
		{name: "threshold 0", args: []string{"--k", "3", "--input", input, "--density-threshold", "0"}, names: "--density-threshold", want: "must be a number > 0"},
		{name: "neighbourhood 0", args: []string{"--k", "3", "--input", input, "--local-neighborhood-size", "0"}, names: "--local-neighborhood-size", want: "in (0, 1]"},
		{name: "zero spectra", edit: func(t *testing.T, d string) {
			f, err := os.Create(filepath.Join(d, "spectra_3.npy"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := matio.WriteNPY(f, 12, 18, make([]float64, 12*18)); err != nil {
				t.Fatal(err)
			}
		}, names: "spectra_3.npy", want: "columns are zero"},
		{name: "FIFO", edit: func(t *testing.T, d string) {
			os.Remove(filepath.Join(d, "sweep.json"))
			if err := syscall.Mkfifo(filepath.Join(d, "sweep.json"), 0o644); err != nil {
				t.Skip(err)
			}
		}, names: "sweep.json", want: "not a regular file"},
		{name: "spectra a FIFO", edit: func(t *testing.T, d string) {
			os.Remove(filepath.Join(d, "spectra_3.npy"))
			if err := syscall.Mkfifo(filepath.Join(d, "spectra_3.npy"), 0o644); err != nil {
				t.Skip(err)
			}
		}, names: "spectra_3.npy", want: "not a regular file: it is a FIFO"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := copySweep(t)
			if c.edit != nil {
				c.edit(t, d)
			}
			args := c.args
			if args == nil {
				args = []string{"--k", "3", "--input", input}
			}
			out := filepath.Join(t.TempDir(), "out")
			code, stdout, stderr := runNode(t, append([]string{"consensus", "--sweep", d, "--quiet", "--out", out}, args...)...)
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, c.names) {
				t.Errorf("exit %d, stderr %q; want exit 2 naming %q and saying %q", code, stderr, c.names, c.want)
			}
			if strings.Contains(c.names, ".") && !strings.Contains(stderr, filepath.Join(d, c.names)) {
				t.Errorf("stderr %q does not name %s", stderr, filepath.Join(d, c.names))
			}
			if _, err := os.Stat(filepath.Join(out, "coef.npy")); err == nil {
				t.Error("coef.npy written")
			}
		})
	}
	t.Run("out is the sweep", func(t *testing.T) {
		d := copySweep(t)
		code, _, stderr := runNode(t, "consensus", "--sweep", d, "--quiet", "--out", d+"/.", "--k", "3", "--input", input)
		if code != exitUsage || !strings.Contains(stderr, "is the --sweep directory") {
			t.Errorf("exit %d, stderr %q; want exit 2 refusing to write into the sweep", code, stderr)
		}
		if _, err := os.Stat(filepath.Join(d, "coef.npy")); err == nil {
			t.Error("coef.npy written into the sweep")
		}
	})
}

// TestConsensusOfASqrtSweep: the consensus of a sweep with --transform sqrt refits the usages
// on sqrt(X), in this process and on 3 actor systems (the same files), as didnmf transform
// --transform sqrt does for the consensus basis; consensus.json and report.json say sqrt.
// --transform sqrt against a plain sweep's spectra is refused.
func TestConsensusOfASqrtSweep(t *testing.T) {
	dir := t.TempDir()
	input, plainSweep := consensusInput(t, dir)
	sweepDir := sqrtSweepOf(t, dir, input)
	outs := map[string]string{}
	for name, extra := range map[string][]string{"driver": nil, "nodes": {"--nodes", "3", "--shards", "3"}} {
		out := filepath.Join(dir, name)
		if code, _, stderr := runNode(t, append([]string{"consensus", "--sweep", sweepDir, "--k", "3", "--input", input, "--quiet", "--out", out}, extra...)...); code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, stderr)
		}
		outs[name] = out
	}
	sameResult(t, outs["driver"], outs["nodes"])
	tr := filepath.Join(dir, "transform")
	if code, _, stderr := runNode(t, "transform", "--basis", filepath.Join(outs["driver"], "basis.npy"), "--input", input, "--transform", "sqrt", "--quiet", "--out", tr); code != 0 {
		t.Fatalf("transform: %s", stderr)
	}
	sameResult(t, outs["driver"], tr)
	if r := readReport(t, outs["driver"]); r.Transform != "sqrt" {
		t.Errorf("report.json: transform %q", r.Transform)
	}
	if data, err := os.ReadFile(filepath.Join(outs["driver"], "consensus.json")); err != nil || !strings.Contains(string(data), `"transform": "sqrt"`) {
		t.Errorf("consensus.json does not say sqrt (%v): %s", err, data)
	}
	code, _, stderr := runNode(t, "consensus", "--sweep", plainSweep, "--k", "3", "--input", input, "--transform", "sqrt", "--out", filepath.Join(dir, "mixed"))
	if code != 2 || !strings.Contains(stderr, "fitted --transform none (its spectra "+filepath.Join(plainSweep, "spectra_3.npy")+" are of the input's values)") {
		t.Errorf("--transform sqrt on a plain sweep's spectra: exit %d, %q", code, stderr)
	}
}

// TestConsensusInputOfTheSweep: consensus refits the sweep's own input, read as the sweep
// read it. An input with other samples or other features than the sweep's (its runs'
// records say how many, and sweep.json once they are removed) is refused with exit 2, naming the input, the sweep and its input
// and what differs (not the consensus basis consensus writes); so is an explicit --transform
// other than the sweep's, either way, naming both. Leaving --transform out, or giving the
// sweep's, refits; an input of the sweep's shape in another file is refit, with a warning
// naming the file the sweep read.
func TestConsensusInputOfTheSweep(t *testing.T) {
	dir := t.TempDir()
	input, plain := consensusInput(t, dir)
	sqrtSweep := sqrtSweepOf(t, dir, input)
	convert := func(spec, name string) string {
		path := filepath.Join(dir, name)
		if code, _, stderr := runNode(t, "convert", "--input", spec, "--out", path); code != 0 {
			t.Fatal(stderr)
		}
		return path
	}
	moreSamples := convert("synthetic:m=12,n=500,k=3,seed=5,noise=0.02", "X500.npy")
	fewerFeatures := convert("synthetic:m=9,n=300,k=3,seed=5,noise=0.02", "X9.npy")
	otherMatrix := convert("synthetic:m=12,n=300,k=3,seed=8,noise=0.02", "other.npy")
	both := convert("synthetic:m=9,n=500,k=3,seed=5,noise=0.02", "X9x500.npy")
	// README says a done sweep's runs/ may be removed: sweep.json says the shape too.
	noRuns := filepath.Join(dir, "no-runs")
	copyDir(t, plain, noRuns)
	if err := os.RemoveAll(filepath.Join(noRuns, "runs")); err != nil {
		t.Fatal(err)
	}
	// sweep.json edited to say another transform than the runs' journal: refused, not refit.
	disagree := filepath.Join(dir, "disagree")
	copyDir(t, plain, disagree)
	rep := mustRead(t, filepath.Join(disagree, "sweep.json"))
	if err := os.WriteFile(filepath.Join(disagree, "sweep.json"), bytes.Replace(rep, []byte(`"transform": "none"`), []byte(`"transform": "sqrt"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link.npy")
	if err := os.Symlink(input, link); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name         string
		sweep, input string
		extra        []string
		code         int
		want         []string // in stderr
		not          []string // not in stderr
	}{
		{name: "more samples", sweep: plain, input: moreSamples, code: exitUsage,
			want: []string{"--input " + moreSamples + " has 500 samples", "the sweep " + plain, input, "300 samples", "didnmf transform --basis"}, not: []string{"consensus_basis"}},
		{name: "more samples, the sweep's runs removed", sweep: noRuns, input: moreSamples, code: exitUsage,
			want: []string{"--input " + moreSamples + " has 500 samples", "the sweep " + noRuns, "300 samples"}},
		{name: "the sweep's runs removed", sweep: noRuns, input: input, not: []string{"warning"}},
		{name: "sweep.json and the journal disagree", sweep: disagree, input: input, code: exitUsage,
			want: []string{filepath.Join(disagree, "sweep.json") + `: transform "sqrt", but the runs' journal`, "says none"}},
		{name: "fewer features", sweep: plain, input: fewerFeatures, code: exitUsage,
			want: []string{"--input " + fewerFeatures + " has 9 features", "the sweep " + plain, input, "12 features"}, not: []string{"consensus_basis"}},
		{name: "both", sweep: plain, input: both, code: exitUsage,
			want: []string{"--input " + both + " has 500 samples and 9 features", input, "300 samples and 12 features"}},
		{name: "--transform none on a sqrt sweep", sweep: sqrtSweep, input: input, extra: []string{"--transform", "none"}, code: exitUsage,
			want: []string{"--transform none", "the sweep " + sqrtSweep + " fitted --transform sqrt"}},
		{name: "--transform sqrt on a plain sweep", sweep: plain, input: input, extra: []string{"--transform", "sqrt"}, code: exitUsage,
			want: []string{"--transform sqrt", "the sweep " + plain + " fitted --transform none"}},
		{name: "--transform sqrt on a sqrt sweep", sweep: sqrtSweep, input: input, extra: []string{"--transform", "sqrt"}, not: []string{"warning"}},
		{name: "--transform none on a plain sweep", sweep: plain, input: input, extra: []string{"--transform", "none"}, not: []string{"warning"}},
		{name: "no --transform on a sqrt sweep", sweep: sqrtSweep, input: input, not: []string{"warning"}},
		{name: "the input by another path", sweep: plain, input: link, not: []string{"warning"}},
		{name: "another matrix of the sweep's shape", sweep: plain, input: otherMatrix,
			want: []string{"warning: --input " + otherMatrix + " is not the file the sweep " + plain + " read, " + input}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{"consensus", "--sweep", c.sweep, "--k", "3", "--input", c.input, "--out", out}, c.extra...)
			code, stdout, stderr := runNode(t, args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s", code, c.code, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not say %q", stderr, w)
				}
			}
			for _, w := range c.not {
				if strings.Contains(stderr, w) {
					t.Errorf("stderr %q says %q", stderr, w)
				}
			}
			_, err := os.Stat(out)
			if c.code != 0 && (stdout != "" || err == nil) {
				t.Errorf("refused, yet wrote %s (%v) or stdout %q", out, err, stdout)
			}
			if c.code == 0 && err != nil {
				t.Error(err)
			}
		})
	}
}

// sqrtSweepOf sweeps input at rank 3 with 6 seeds and --transform sqrt into dir/sqrt-sweep and
// returns that directory.
func sqrtSweepOf(t *testing.T, dir, input string) string {
	t.Helper()
	out := filepath.Join(dir, "sqrt-sweep")
	if code, _, stderr := runNode(t, "sweep", "--input", input, "--ranks", "3", "--seeds", "6", "--max-iter", "100", "--transform", "sqrt", "--quiet", "--out", out); code != 0 {
		t.Fatalf("sweep: exit %d: %s", code, stderr)
	}
	return out
}

// TestConsensusWarnsWhatItCannotCheck: an input of the sweep's shape that is another
// synthetic spec than the sweep's, or that cannot be checked because the sweep's input file
// is gone, is refit with a warning saying which; the sweep's own spec gives none.
func TestConsensusWarnsWhatItCannotCheck(t *testing.T) {
	dir := t.TempDir()
	const spec = "synthetic:m=12,n=60,k=3,seed=5,noise=0.02"
	sweepOf := func(name, input string) string {
		out := filepath.Join(dir, name)
		if code, _, stderr := runNode(t, "sweep", "--input", input, "--ranks", "3", "--seeds", "4", "--max-iter", "50", "--test-fraction", "0", "--quiet", "--out", out); code != 0 {
			t.Fatalf("sweep: exit %d: %s", code, stderr)
		}
		return out
	}
	synth := sweepOf("synth", spec)
	gone := filepath.Join(dir, "gone.npy")
	if code, _, stderr := runNode(t, "convert", "--input", spec, "--out", gone); code != 0 {
		t.Fatal(stderr)
	}
	ofGone := sweepOf("of-gone", gone)
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.npy")
	if code, _, stderr := runNode(t, "convert", "--input", "synthetic:m=12,n=60,k=3,seed=6,noise=0.02", "--out", other); code != 0 {
		t.Fatal(stderr)
	}
	for _, c := range []struct {
		name, sweep, input, want string // want "": no warning
	}{
		{"the sweep's spec", synth, spec, ""},
		{"the sweep's spec, its keys reordered", synth, "synthetic:seed=5,noise=0.02,k=3,n=60,m=12", ""},
		{"another spec", synth, "synthetic:m=12,n=60,k=3,seed=6,noise=0.02",
			"warning: --input synthetic:m=12,n=60,k=3,seed=6,noise=0.02 is not the input the sweep " + synth + " read, " + spec},
		{"a file for a spec", synth, other, "warning: --input " + other + " is not the input the sweep " + synth + " read, " + spec},
		{"the sweep's file gone", ofGone, other, "warning: --input " + other + " cannot be checked against the file the sweep " + ofGone + " read, " + gone + ", which is gone"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runNode(t, "consensus", "--sweep", c.sweep, "--k", "3", "--input", c.input, "--out", filepath.Join(t.TempDir(), "out"))
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if c.want == "" && strings.Contains(stderr, "warning") || c.want != "" && !strings.Contains(stderr, c.want) {
				t.Errorf("stderr %q; want the warning %q", stderr, c.want)
			}
		})
	}
}
