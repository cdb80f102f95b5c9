package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/usererr"
)

// writeNames writes names, one a line, into dir/file and returns its path.
func writeNames(t *testing.T, dir, file string, names []string) string {
	t.Helper()
	p := filepath.Join(dir, file)
	text := ""
	if len(names) > 0 {
		text = strings.Join(names, "\n") + "\n"
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// nameList is n names: prefix, the index, and a non-ASCII letter.
func nameList(prefix string, n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("%s-%d-β", prefix, i)
	}
	return s
}

// checkTSVTable checks dir/name.tsv against dir/name.npy: the header, each row under its
// name (its index when names is nil), and every value's bits.
func checkTSVTable(t *testing.T, dir, name, first string, names []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name+".tsv"))
	if err != nil {
		t.Fatal(err)
	}
	rows, k, want, err := matio.ReadNPYMatrix(filepath.Join(dir, name+".npy"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	header := []string{first}
	for p := 1; p <= k; p++ {
		header = append(header, "component_"+strconv.Itoa(p))
	}
	if lines[0] != strings.Join(header, "\t") {
		t.Errorf("%s.tsv header %q", name, lines[0])
	}
	if len(lines)-1 != rows {
		t.Fatalf("%s.tsv has %d rows, %s.npy %d", name, len(lines)-1, name, rows)
	}
	for i, l := range lines[1:] {
		f := strings.Split(l, "\t")
		label := strconv.Itoa(i)
		if names != nil {
			label = names[i]
		}
		if len(f) != k+1 || f[0] != label {
			t.Fatalf("%s.tsv row %d: %q, want %q and %d values", name, i, l, label, k)
		}
		for p, s := range f[1:] {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || math.Float64bits(v) != math.Float64bits(want[i*k+p]) {
				t.Fatalf("%s.tsv row %d component %d: %q, the .npy has %v", name, i, p+1, s, want[i*k+p])
			}
		}
	}
}

// TestFactorizeNamesOutputs: factorize and transform write basis.tsv and top_features.tsv
// always, coef.tsv with --coef-tsv, each row under the name its line of --feature-names or
// --sample-names gives (or its index), with the .npy's values to the bit.
func TestFactorizeNamesOutputs(t *testing.T) {
	dir := t.TempDir()
	const m, n = 8, 300
	input := "synthetic:m=8,n=300,k=3,seed=4,noise=0.02"
	features := nameList("gene", m)
	samples := nameList("cell", n)
	fnames := writeNames(t, dir, "features.txt", features)
	snames := writeNames(t, dir, "samples.txt", samples)
	basis := filepath.Join(fitBasis(t, dir), "basis.npy")
	fit := []string{"factorize", "--input", input, "--rank", "3", "--max-iter", "20"}
	for _, tc := range []struct {
		name             string
		args             []string
		features, sample []string
		coefTSV          bool
	}{
		{"numbered", fit, nil, nil, false},
		{"named", append(slices.Clone(fit), "--feature-names", fnames, "--sample-names", snames, "--coef-tsv"), features, samples, true},
		{"features named, coef.tsv numbered", append(slices.Clone(fit), "--feature-names", fnames, "--coef-tsv"), features, nil, true},
		{"on actors", append(slices.Clone(fit), "--nodes", "2", "--shards", "3", "--feature-names", fnames, "--sample-names", snames, "--coef-tsv"), features, samples, true},
		{"transform", []string{"transform", "--basis", basis, "--input", input, "--feature-names", fnames, "--sample-names", snames, "--coef-tsv"}, features, samples, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			code, _, stderr := runNode(t, append(tc.args, "--out", out)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(stderr, "basis.tsv, top_features.tsv") {
				t.Errorf("the summary does not name the .tsv files: %s", stderr)
			}
			checkTSVTable(t, out, "basis", "feature", tc.features)
			top, err := os.ReadFile(filepath.Join(out, "top_features.tsv"))
			if err != nil {
				t.Fatal(err)
			}
			// 3 components x all 8 features (fewer than 20), each feature once per component.
			lines := strings.Split(strings.TrimSuffix(string(top), "\n"), "\n")
			if lines[0] != "component\trank\tfeature\tweight" || len(lines) != 1+3*m {
				t.Fatalf("top_features.tsv: %q", lines)
			}
			for _, l := range lines[1:] {
				f := strings.Split(l, "\t")
				want := f[2]
				if tc.features != nil && !slices.Contains(tc.features, want) {
					t.Errorf("top_features.tsv: %q is not a feature name", l)
				}
			}
			_, err = os.Stat(filepath.Join(out, "coef.tsv"))
			if tc.coefTSV {
				checkTSVTable(t, out, "coef", "sample", tc.sample)
			} else if !errors.Is(err, os.ErrNotExist) {
				t.Errorf("coef.tsv without --coef-tsv: %v", err)
			}
		})
	}
}

// TestNamesFileRefused: a names file that does not fit the input, or flags whose outputs
// this client does not write, exit with status 2, naming the file and the line (and both
// counts when they differ), before anything runs or is written.
func TestNamesFileRefused(t *testing.T) {
	dir := t.TempDir()
	input := "synthetic:m=6,n=50,k=2,seed=2"
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	six := strings.Join(nameList("f", 6), "\n") + "\n"
	long := strings.Repeat("x", maxNameBytes+1)
	base := []string{"factorize", "--input", input, "--rank", "2", "--max-iter", "3"}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"too few", []string{"--feature-names", file("few.txt", "a\nb\nc\n")}, []string{"few.txt:4:", "ends after 3 names", "6 features"}},
		{"too many", []string{"--feature-names", file("many.txt", six+"g\nh\n")}, []string{"many.txt:7:", "8 names", "6 features"}},
		{"a tab", []string{"--feature-names", file("tab.txt", "a\nb\tB\nc\nd\ne\nf\n")}, []string{"tab.txt:2:", "tab"}},
		{"empty file", []string{"--feature-names", file("empty.txt", "")}, []string{"empty.txt:1:", "empty", "6 features"}},
		{"an empty line", []string{"--feature-names", file("blank.txt", "a\nb\n\nd\ne\nf\n")}, []string{"blank.txt:3:", "empty name"}},
		{"not UTF-8", []string{"--feature-names", file("latin1.txt", "a\nb\nc\nd\n\xe9t\xe9\nf\n")}, []string{"latin1.txt:5:", "UTF-8"}},
		{"an escape sequence", []string{"--feature-names", file("esc.txt", "a\nb\n\x1b[2Jc\nd\ne\nf\n")}, []string{"esc.txt:3:", `the name "\x1b[2Jc" holds the control character U+001B`}},
		{"a name too long", []string{"--feature-names", file("long.txt", "a\nb\n"+long+"\nd\ne\nf\n")}, []string{"long.txt:3:", "longer than"}},
		{"a line too long to scan", []string{"--feature-names", file("huge.txt", "a\n"+long+long+"\n")}, []string{"huge.txt:2:", "longer than"}},
		{"no such file", []string{"--feature-names", filepath.Join(dir, "absent.txt")}, []string{"absent.txt", "no such file"}},
		{"sample count", []string{"--coef-tsv", "--sample-names", file("s.txt", six)}, []string{"s.txt:7:", "6 names", "50 samples"}},
		{"--sample-names without --coef-tsv", []string{"--sample-names", file("s2.txt", six)}, []string{"--sample-names", "--coef-tsv"}},
		{"--coef-tsv with --out-shared", []string{"--coef-tsv", "--cluster", "127.0.0.1:1", "--out-shared", filepath.Join(dir, "shared")}, []string{"--coef-tsv", "--out-shared"}},
		{"--feature-names with --detach", []string{"--feature-names", file("d.txt", six), "--cluster", "127.0.0.1:1", "--out-shared", filepath.Join(dir, "shared"), "--detach"}, []string{"--feature-names", "detached"}},
		{"--plots with --detach", []string{"--plots", "--cluster", "127.0.0.1:1", "--out-shared", filepath.Join(dir, "shared"), "--detach"}, []string{"--plots", "didnmf plot"}},
		{"--image-shape with --detach", []string{"--image-shape", "2x3", "--cluster", "127.0.0.1:1", "--out-shared", filepath.Join(dir, "shared"), "--detach"}, []string{"--image-shape", "didnmf plot"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(tc.name, " ", "-"))
			args := append(slices.Clone(base), tc.args...)
			if !slices.Contains(tc.args, "--detach") {
				args = append(args, "--out", out)
			}
			code, _, stderr := runNode(t, args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("the error does not say %q: %s", w, stderr)
				}
			}
			if strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("more than one line: %s", stderr)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("--out %s made: %v", out, err)
			}
		})
	}
}

// TestReadNamesFile: the forms of a names file that are read: "\r\n" lines, no newline at
// the end, a byte order mark, names with spaces and any letters; a count not known before
// the run.
func TestReadNamesFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		want       int
		names      []string
	}{
		{"lf", "a\nb c\nd\n", 3, []string{"a", "b c", "d"}},
		{"crlf", "a\r\nb\r\nd\r\n", 3, []string{"a", "b", "d"}},
		{"no newline at the end", "a\nb", 2, []string{"a", "b"}},
		{"byte order mark", "\ufeffCD3E\nMS4A1\n", 2, []string{"CD3E", "MS4A1"}},
		{"unicode", "Gène α\n細胞\n", 2, []string{"Gène α", "細胞"}},
		{"count unknown: checked, not kept", "a\nb\nc\n", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(p, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := readNamesFile("--feature-names", p, tc.want, "features")
			if err != nil || !slices.Equal(got, tc.names) {
				t.Errorf("got %q, %v; want %q", got, err, tc.names)
			}
		})
	}
}

// TestPlotLabelsFeatureNames: didnmf plot (and factorize --plots) label each component's
// bars with the names of basis.tsv's rows: the SVG holds, as text, the names that
// top_features.tsv ranks 1 to 10.
func TestPlotLabelsFeatureNames(t *testing.T) {
	dir := t.TempDir()
	const m = 14
	features := nameList("gene & <x>", m)
	fnames := writeNames(t, dir, "features.txt", features)
	out := filepath.Join(dir, "fit")
	if code, _, stderr := runNode(t, "factorize", "--input", "synthetic:m=14,n=400,k=3,seed=5", "--rank", "3", "--max-iter", "30",
		"--feature-names", fnames, "--plots", "--quiet", "--out", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	top, err := os.ReadFile(filepath.Join(out, "top_features.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	replot := filepath.Join(dir, "replot")
	if code, _, stderr := runNode(t, "plot", "--result", out, "--out", replot); code != 0 {
		t.Fatalf("plot: exit %d: %s", code, stderr)
	}
	for _, d := range []string{out, replot} {
		svg, err := os.ReadFile(filepath.Join(d, "basis.svg"))
		if err != nil {
			t.Fatal(err)
		}
		text := string(svg)
		shown := 0
		for _, l := range strings.Split(strings.TrimSuffix(string(top), "\n"), "\n")[1:] {
			f := strings.Split(l, "\t")
			if rank, _ := strconv.Atoi(f[1]); rank > 10 {
				continue
			}
			// vgsvg escapes the text as html.EscapeString does.
			esc := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(f[2])
			if !strings.Contains(text, ">"+esc+"</text>") {
				t.Errorf("%s: component %s's feature %q (rank %s) is not a label", d, f[0], f[2], f[1])
			}
			shown++
		}
		if shown != 30 || strings.Contains(text, ">feature 0</text>") {
			t.Errorf("%s: %d named bars, want 30, and no numbered ones", d, shown)
		}
	}
}

// TestNamesOnACluster: with --cluster and --out-shared this client writes basis.tsv and
// top_features.tsv into --out with the names (checked against the shape only once the nodes
// have read the input); a names file that turns out not to fit exits with status 2, naming
// the file, the line and both counts, and the outputs are written with their rows numbered.
func TestNamesOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	isolateGossip(t)
	b := startJoined(t, []string{"a", "b"})[1]
	dir := t.TempDir()
	x := filepath.Join(dir, "x.npy")
	if code, out := runProc(t, "convert", "--input", "synthetic:m=8,n=4000,k=2,seed=3", "--out", x); code != 0 {
		t.Fatalf("convert: %s", out)
	}
	features := nameList("gene", 8)
	for _, tc := range []struct {
		name  string
		names []string
		code  int
		want  []string // in the error
		rows  []string // basis.tsv's row names (nil: numbered)
	}{
		{"names that fit", features, 0, nil, features},
		{"one name short", features[:7], 2, []string{"few.txt:8:", "ends after 7 names", "8 features", "numbered"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			fnames := writeNames(t, sub, "few.txt", tc.names)
			out := filepath.Join(sub, "out")
			code, stdout, stderr := runNodeProc(t, "factorize", "--cluster", b.Gossip, "--input", x, "--out", out, "--out-shared", filepath.Join(sub, "shared"),
				"--rank", "2", "--shards", "4", "--max-iter", "5", "--tol", "0", "--quiet", "--feature-names", fnames)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s%s", code, tc.code, stdout, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("the error does not say %q: %s", w, stderr)
				}
			}
			checkTSVTable(t, out, "basis", "feature", tc.rows)
			if _, err := os.Stat(filepath.Join(out, "coef.tsv")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("coef.tsv in --out: %v", err)
			}
		})
	}
}

// FuzzReadNamesFile feeds readNamesFile arbitrary files and counts: it returns exactly the
// count asked (none when 0: the file is only checked) of non-empty UTF-8 names without tabs
// or line breaks, or a usage error (exit status 2) that names the flag and the file, never
// panics. The seeds are in testdata/fuzz/FuzzReadNamesFile.
func FuzzReadNamesFile(f *testing.F) {
	f.Add([]byte("CD3E\nMS4A1\r\nGène α\n"), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, want uint8) {
		path := filepath.Join(t.TempDir(), "names.txt")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		names, err := readNamesFile("--feature-names", path, int(want), "features")
		if err != nil {
			if !errors.Is(err, usererr.ErrUser) || !strings.HasPrefix(err.Error(), "--feature-names "+path) {
				t.Fatalf("%v: not a usage error naming the flag and the file", err)
			}
			return
		}
		if len(names) != int(want) {
			t.Fatalf("%d names, want %d", len(names), want)
		}
		for _, s := range names {
			if s == "" || len(s) > maxNameBytes || !utf8.ValidString(s) || strings.ContainsAny(s, "\t\r\n") {
				t.Fatalf("accepted name %q", s)
			}
		}
	})
}

// TestTransformKeepsBasisNames: a transform of a basis.npy that factorize wrote with names
// names its features as the basis.tsv beside it does, unless --feature-names says otherwise;
// a basis under another name, or beside a basis.tsv that does not fit, gives numbered rows
// (the latter with a warning).
func TestTransformKeepsBasisNames(t *testing.T) {
	dir := t.TempDir()
	const m = 8
	genes, other := nameList("gene", m), nameList("other", m)
	input := "synthetic:m=8,n=200,k=3,seed=7"
	fit := filepath.Join(dir, "fit")
	if code, _, stderr := runNode(t, "factorize", "--input", input, "--rank", "3", "--max-iter", "20", "--quiet",
		"--feature-names", writeNames(t, dir, "genes.txt", genes), "--out", fit); code != 0 {
		t.Fatalf("factorize: exit %d: %s", code, stderr)
	}
	basis := filepath.Join(fit, "basis.npy")
	data, err := os.ReadFile(basis)
	if err != nil {
		t.Fatal(err)
	}
	renamed := filepath.Join(fit, "mine.npy")
	bad := filepath.Join(dir, "bad")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{renamed: data, filepath.Join(bad, "basis.npy"): data,
		filepath.Join(bad, "basis.tsv"): []byte("feature\tcomponent_1\ngene\t1\n")} {
		if err := os.WriteFile(name, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		args  []string
		names []string
		warn  string
	}{
		{"the basis's names", []string{"--basis", basis}, genes, ""},
		{"--feature-names over them", []string{"--basis", basis, "--feature-names", writeNames(t, dir, "other.txt", other)}, other, ""},
		{"a basis under another name", []string{"--basis", renamed}, nil, ""},
		{"a basis.tsv that does not fit", []string{"--basis", filepath.Join(bad, "basis.npy")}, nil, "basis.tsv:1:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			code, _, stderr := runNode(t, append([]string{"transform", "--input", input, "--out", out}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if (tc.warn == "") == strings.Contains(stderr, "warning") || !strings.Contains(stderr, tc.warn) {
				t.Errorf("stderr %q, want a warning only if saying %q", stderr, tc.warn)
			}
			checkTSVTable(t, out, "basis", "feature", tc.names)
		})
	}
}

// TestInputNamesInOutputs: the names an input carries reach basis.tsv and coef.tsv: a 10x
// directory's gene symbols and barcodes, an .npz's names files beside it, a block store's;
// --feature-names is over them; an input with none numbers its rows.
func TestInputNamesInOutputs(t *testing.T) {
	const data = "../../matio/testdata/sparse/"
	dir := t.TempDir()
	flagNames := filepath.Join(dir, "features.txt")
	var lines []string
	for i := range 7 {
		lines = append(lines, fmt.Sprintf("gene-%d", i))
	}
	if err := os.WriteFile(flagNames, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, input string
		extra       []string
		feature0    string // basis.tsv's first row's name
		sample0     string // coef.tsv's first row's name ("": no coef.tsv)
	}{
		{name: "10x", input: data + "tenx_v3", feature0: "f0", sample0: "s0"},
		{name: "npz beside", input: data + "csr_f4.npz", feature0: firstLine(t, data+"csr_f4.features.tsv"), sample0: firstLine(t, data+"csr_f4.samples.tsv")},
		{name: "flag over 10x", input: data + "tenx_v3", extra: []string{"--feature-names", flagNames}, feature0: "gene-0", sample0: "s0"},
		{name: "store", input: data + "store", feature0: "f0", sample0: "s0"},
		{name: "none", input: data + "csr_f8_stored.npz", feature0: "0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
			args := append([]string{"factorize", "--input", c.input, "--rank", "2", "--max-iter", "5", "--quiet", "--out", out}, c.extra...)
			if c.sample0 != "" {
				args = append(args, "--coef-tsv")
			}
			if code, _, stderr := runNode(t, args...); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			basis := strings.Split(string(mustRead(t, filepath.Join(out, "basis.tsv"))), "\n")
			if got, _, _ := strings.Cut(basis[1], "\t"); got != c.feature0 {
				t.Errorf("basis.tsv's first feature is %q, want %q", got, c.feature0)
			}
			if c.sample0 != "" {
				coef := strings.Split(string(mustRead(t, filepath.Join(out, "coef.tsv"))), "\n")
				if got, _, _ := strings.Cut(coef[1], "\t"); got != c.sample0 {
					t.Errorf("coef.tsv's first sample is %q, want %q", got, c.sample0)
				}
			}
		})
	}
}

func firstLine(t *testing.T, path string) string {
	t.Helper()
	line, _, _ := strings.Cut(string(mustRead(t, path)), "\n")
	return line
}

// TestDuplicateNamesWarn: names that repeat are taken (gene symbols do), with one warning
// naming the first repeat and its two lines; unique names give none.
func TestDuplicateNamesWarn(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, features string
		want           string
	}{
		{"unique", "a\nb\nc\nd\ne\nf\n", ""},
		{"repeats", "a\nb\nc\nb\na\nb\n", `didnmf: warning: 3 feature name(s) repeat an earlier one (the first: "b", names 2 and 4): those rows of basis.tsv and top_features.tsv cannot be told apart by name`},
	} {
		names := filepath.Join(dir, c.name+".txt")
		if err := os.WriteFile(names, []byte(c.features), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, c.name)
		code, _, stderr := runNode(t, "factorize", "--input", "synthetic:m=6,n=50,k=2,seed=2", "--rank", "2", "--max-iter", "3",
			"--feature-names", names, "--out", out)
		if code != 0 || !strings.Contains(stderr, c.want) || (c.want == "" && strings.Contains(stderr, "repeat")) {
			t.Errorf("%s: exit %d:\n%s", c.name, code, stderr)
		}
		if tsv := string(mustRead(t, filepath.Join(out, "basis.tsv"))); !strings.Contains(tsv, "\nf\t") && !strings.Contains(tsv, "\nb\t") {
			t.Errorf("%s: basis.tsv does not carry the names:\n%s", c.name, tsv)
		}
	}
}

// TestSweepNamesItsTables: a sweep writes each rank's consensus basis as text
// (consensus_basis_K.tsv, the .npy's bits) and its top features (top_features_K.tsv), rows
// named by the input's feature names, by --feature-names over them, or numbered, and
// sweep.json says whether they are named.
func TestSweepNamesItsTables(t *testing.T) {
	const data = "../../matio/testdata/sparse/"
	dir := t.TempDir()
	flagNames := writeNames(t, dir, "features.txt", nameList("gene", 7))
	for _, c := range []struct {
		name, input string
		extra       []string
		names       []string // nil: numbered
	}{
		{name: "10x", input: data + "tenx_v3", names: []string{"f0", "f1", "f2", "f3", "f4", "f5", "f6"}}, // features.tsv.gz's names
		{name: "flag over 10x", input: data + "tenx_v3", extra: []string{"--feature-names", flagNames}, names: nameList("gene", 7)},
		{name: "none", input: data + "csr_f8_stored.npz"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
			args := append([]string{"sweep", "--input", c.input, "--ranks", "2", "--seeds", "2", "--test-fraction", "0", "--max-iter", "20", "--quiet", "--out", out}, c.extra...)
			if code, _, stderr := runNode(t, args...); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			names := c.names
			checkTSVTable(t, out, "consensus_basis_2", "feature", names)
			top := strings.Split(strings.TrimSpace(string(mustRead(t, filepath.Join(out, "top_features_2.tsv")))), "\n")
			if top[0] != "component\trank\tfeature\tweight" || len(top) < 3 {
				t.Fatalf("top_features_2.tsv: %q", top)
			}
			f := strings.Split(top[1], "\t")
			if names != nil && !slices.Contains(names, f[2]) || names == nil && f[2] == "" {
				t.Errorf("top_features_2.tsv's first feature %q is not one of the names", f[2])
			}
			var rep struct {
				Named bool `json:"named_features"`
			}
			if err := json.Unmarshal(mustRead(t, filepath.Join(out, "sweep.json")), &rep); err != nil || rep.Named != (names != nil) {
				t.Errorf("sweep.json named_features %v (%v); want %v", rep.Named, err, names != nil)
			}
		})
	}
}
