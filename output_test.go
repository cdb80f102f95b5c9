package didnmf

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/report"
)

// readTSV reads a .tsv output: its header and rows, split at tabs.
func readTSV(t *testing.T, path string) (header []string, rows [][]string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text, ok := strings.CutSuffix(string(data), "\n")
	if !ok {
		t.Fatalf("%s does not end with a newline", path)
	}
	lines := strings.Split(text, "\n")
	for _, l := range lines[1:] {
		rows = append(rows, strings.Split(l, "\t"))
	}
	return strings.Split(lines[0], "\t"), rows
}

// parseBits parses a .tsv value, failing the test when it is not a number.
func parseBits(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("value %q: %v", s, err)
	}
	return math.Float64bits(v)
}

// checkTable checks a rows x k .tsv (basis.tsv, coef.tsv) against the .npy beside it: the
// header, the row names, and every value's bits.
func checkTable(t *testing.T, dir, name, first string, names []string) {
	t.Helper()
	header, rows := readTSV(t, filepath.Join(dir, name+".tsv"))
	nr, k, want, err := matio.ReadNPYMatrix(filepath.Join(dir, name+".npy"))
	if err != nil {
		t.Fatal(err)
	}
	wantHeader := []string{first}
	for p := 1; p <= k; p++ {
		wantHeader = append(wantHeader, fmt.Sprintf("component_%d", p))
	}
	if !slices.Equal(header, wantHeader) {
		t.Errorf("%s.tsv header %q, want %q", name, header, wantHeader)
	}
	if len(rows) != nr {
		t.Fatalf("%s.tsv: %d rows, want %d", name, len(rows), nr)
	}
	for i, row := range rows {
		label := strconv.Itoa(i)
		if names != nil {
			label = names[i]
		}
		if len(row) != k+1 || row[0] != label {
			t.Fatalf("%s.tsv row %d: %q, want %d values named %q", name, i, row, k, label)
		}
		for p, s := range row[1:] {
			if got := parseBits(t, s); got != math.Float64bits(want[i*k+p]) {
				t.Errorf("%s.tsv row %d component %d: %s, the .npy has %v", name, i, p+1, s, want[i*k+p])
			}
		}
	}
}

// checkTopFeatures checks top_features.tsv against basis.npy, ranking each component's
// features by a full stable sort (largest first, ties by the lower index).
func checkTopFeatures(t *testing.T, dir string, names []string) {
	t.Helper()
	header, rows := readTSV(t, filepath.Join(dir, "top_features.tsv"))
	if !slices.Equal(header, []string{"component", "rank", "feature", "weight"}) {
		t.Errorf("top_features.tsv header %q", header)
	}
	m, k, basis, err := matio.ReadNPYMatrix(filepath.Join(dir, "basis.npy"))
	if err != nil {
		t.Fatal(err)
	}
	top := min(TopFeatures, m)
	if len(rows) != k*top {
		t.Fatalf("top_features.tsv: %d rows, want %d components x %d", len(rows), k, top)
	}
	for p := 0; p < k; p++ {
		order := make([]int, m)
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return basis[order[a]*k+p] > basis[order[b]*k+p] })
		for r := 0; r < top; r++ {
			f := order[r]
			label := strconv.Itoa(f)
			if names != nil {
				label = names[f]
			}
			row := rows[p*top+r]
			want := []string{strconv.Itoa(p + 1), strconv.Itoa(r + 1), label}
			if len(row) != 4 || !slices.Equal(row[:3], want) || parseBits(t, row[3]) != math.Float64bits(basis[f*k+p]) {
				t.Errorf("top_features.tsv row %d: %q, want %q and weight %v", p*top+r, row, want, basis[f*k+p])
			}
		}
	}
}

// knownResult is a result of m features, n samples and k components whose values are hard to
// print exactly (0.1+0.2, subnormals, near the largest float64) and tie within components.
func knownResult(m, n, k int) *Result {
	odd := []float64{0.1 + 0.2, 5e-324, math.MaxFloat64 / 4, 1.0 / 3, 0, 2, 2, 1e-300, 123456789.123456789}
	r := &Result{Result: kernels.Result{M: m, N: n, K: k, B: make([]float64, m*k), C: make([]float64, k*n)}}
	for i := range r.B {
		r.B[i] = odd[(i*7)%len(odd)] * float64(1+i%3)
	}
	for i := range r.C {
		r.C[i] = odd[(i*5)%len(odd)] / float64(1+i%4)
	}
	return r
}

func seq(prefix string, n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("%s%d é", prefix, i)
	}
	return s
}

// TestSaveTSV: basis.tsv, top_features.tsv and coef.tsv hold the .npy's values to the bit,
// each row under its name (or its index when there are no names).
func TestSaveTSV(t *testing.T) {
	for _, tc := range []struct {
		name    string
		m, n, k int
		names   Names
		coefTSV bool
	}{
		{"numbered", 30, 7, 3, Names{}, false},
		{"numbered with coef.tsv", 30, 7, 3, Names{}, true},
		{"named", 30, 7, 3, Names{Features: seq("gene", 30), Samples: seq("cell", 7)}, true},
		{"features named, samples numbered", 25, 4, 2, Names{Features: seq("g", 25)}, true},
		{"fewer features than TopFeatures", 5, 3, 4, Names{Features: seq("g", 5)}, false},
		{"one component", 40, 2, 1, Names{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			res := knownResult(tc.m, tc.n, tc.k)
			if err := res.SaveWith(dir, SaveOptions{Report: &report.Report{}, Names: tc.names, CoefTSV: tc.coefTSV}); err != nil {
				t.Fatal(err)
			}
			checkTable(t, dir, "basis", "feature", tc.names.Features)
			checkTopFeatures(t, dir, tc.names.Features)
			_, err := os.Stat(filepath.Join(dir, "coef.tsv"))
			if tc.coefTSV {
				checkTable(t, dir, "coef", "sample", tc.names.Samples)
			} else if !errors.Is(err, os.ErrNotExist) {
				t.Errorf("coef.tsv written without CoefTSV: %v", err)
			}
		})
	}
}

// TestSaveTSVRefuses: names that do not fit, and coef.tsv without the coef, are input errors
// and nothing is written; a stale coef.tsv goes when this result writes none.
func TestSaveTSVRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts SaveOptions
		noC  bool
		want string
	}{
		{"too few feature names", SaveOptions{Names: Names{Features: seq("g", 9)}}, false, "9 feature names for 10 features"},
		{"too many sample names", SaveOptions{Names: Names{Samples: seq("c", 5)}}, false, "5 sample names for 4 samples"},
		{"a tab in a name", SaveOptions{Names: Names{Features: append(seq("g", 9), "a\tb")}}, false, "feature name 9"},
		{"a newline in a name", SaveOptions{Names: Names{Samples: append(seq("c", 3), "x\n")}}, false, "sample name 3"},
		{"an escape in a name", SaveOptions{Names: Names{Features: append(seq("g", 9), "\x1b[31mred")}}, false, `feature name 9 ("\x1b[31mred") holds the control character U+001B`},
		{"coef.tsv without the coef", SaveOptions{CoefTSV: true}, true, "coef.tsv"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			res := knownResult(10, 4, 2)
			if tc.noC {
				res.C = nil
			}
			tc.opts.Report = &report.Report{}
			err := res.SaveWith(dir, tc.opts)
			if !IsInput(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an input error saying %q", err, tc.want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("wrote %v", ents)
			}
		})
	}
	t.Run("stale coef.tsv", func(t *testing.T) {
		dir := t.TempDir()
		res := knownResult(10, 4, 2)
		if err := res.SaveWith(dir, SaveOptions{Report: &report.Report{}, CoefTSV: true}); err != nil {
			t.Fatal(err)
		}
		res.C = nil // as with --out-shared
		if err := res.SaveWith(dir, SaveOptions{Report: &report.Report{}}); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"coef.tsv", "coef.npy"} {
			if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s of the earlier result is still there: %v", name, err)
			}
		}
	})
}

// TestSaveTSVOfARun: a factorization's basis.tsv and top_features.tsv, written by Save, hold
// its basis.npy's bits.
func TestSaveTSVOfARun(t *testing.T) {
	res, err := Run(context.Background(), testSpec(kernels.DID), Local(1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := res.Save(dir, nil); err != nil {
		t.Fatal(err)
	}
	checkTable(t, dir, "basis", "feature", nil)
	checkTopFeatures(t, dir, nil)
}
