package matio

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func seq(prefix string, n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return s
}

// TestReadNames: names from every source, stacked, or absent.
func TestReadNames(t *testing.T) {
	feats, samps := seq("f", 7), seq("s", 40)
	both := append(slices.Clone(samps), samps...)
	tests := []struct {
		name  string
		specs []string
		want  Names
	}{
		{"beside-npz", []string{sparseFixture("csr_f4.npz")}, Names{feats, samps}},
		{"tenx-v3", []string{sparseFixture("tenx_v3")}, Names{feats, samps}},
		{"tenx-v2", []string{sparseFixture("tenx_v2")}, Names{feats, samps}},
		{"store", []string{sparseFixture("store")}, Names{feats, samps}},
		{"none", []string{sparseFixture("sp_f8.npy")}, Names{}},
		{"synthetic", []string{"synthetic:m=7,n=40,k=2,seed=1"}, Names{}},
		{"stacked", []string{sparseFixture("store"), sparseFixture("tenx_v3")}, Names{feats, both}},
		{"stacked-partly", []string{sparseFixture("store"), sparseFixture("sp_f8.npy")}, Names{Features: feats}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadNames(os.Open, tc.specs)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Features, tc.want.Features) || !slices.Equal(got.Samples, tc.want.Samples) ||
				(got.Features == nil) != (tc.want.Features == nil) || (got.Samples == nil) != (tc.want.Samples == nil) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReadNamesBad: names files that do not fit the matrix.
func TestReadNamesBad(t *testing.T) {
	npz, err := os.ReadFile(sparseFixture("csr_f4.npz"))
	if err != nil {
		t.Fatal(err)
	}
	lines := func(names []string) string { return strings.Join(names, "\n") + "\n" }
	tests := []struct {
		name, features, samples string
		errs                    []string
	}{
		{"short", lines(seq("f", 6)), "", []string{"x.features.tsv", "6 lines", "7 features"}},
		{"long", lines(seq("f", 8)), "", []string{"x.features.tsv", "more than 7 lines", "7 features"}},
		{"tab", "", lines(append(seq("s", 39), "a\tb")), []string{"x.samples.tsv:40", "holds a tab"}},
		{"empty", lines(append(seq("f", 6)[:3], "", "f4", "f5", "f6")), "", []string{"x.features.tsv:4", "empty name"}},
		{"not-utf8", lines(append(seq("f", 6), "\xff")), "", []string{"x.features.tsv:7", "not UTF-8"}},
		{"escape", lines(append(seq("f", 6), "\x1b[31mred")), "", []string{"x.features.tsv:7", `the name "\x1b[31mred" holds the control character U+001B`}},
		{"C1 control", "", lines(append(seq("s", 39), "a\u0085b")), []string{"x.samples.tsv:40", "holds the control character U+0085"}},
		{"long-line", strings.Repeat("x", maxNameLine+1) + "\n", "", []string{"x.features.tsv:1", "longer than"}},
		{"no-final-newline", strings.TrimSuffix(lines(seq("f", 7)), "\n"), "", nil},
		{"crlf", strings.ReplaceAll(lines(seq("f", 7)), "\n", "\r\n"), "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "x.npz")
			os.WriteFile(p, npz, 0o644)
			if tc.features != "" {
				os.WriteFile(filepath.Join(dir, "x.features.tsv"), []byte(tc.features), 0o644)
			}
			if tc.samples != "" {
				os.WriteFile(filepath.Join(dir, "x.samples.tsv"), []byte(tc.samples), 0o644)
			}
			got, err := ReadNames(os.Open, []string{p})
			if tc.errs == nil {
				if err != nil || !slices.Equal(got.Features, seq("f", 7)) {
					t.Errorf("got %v, %v", got, err)
				}
				return
			}
			wantInputError(t, err, tc.errs...)
		})
	}
	// Stacked inputs whose features disagree.
	dir := t.TempDir()
	p := filepath.Join(dir, "y.npz")
	os.WriteFile(p, npz, 0o644)
	os.WriteFile(filepath.Join(dir, "y.features.tsv"), []byte(lines(append(seq("f", 6), "other"))), 0o644)
	_, err = ReadNames(os.Open, []string{sparseFixture("csr_f4.npz"), p})
	wantInputError(t, err, p, `feature 6 (0-based) is named "other"`, sparseFixture("csr_f4.npz"), `"f6"`)
}

// TestMakeUnique: duplicated gene symbols become unique as scanpy's read_10x_mtx makes them
// (the second and later occurrences get -1, -2, ..., skipping a suffix already taken).
func TestMakeUnique(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"A", "B", "C"}, []string{"A", "B", "C"}},
		{[]string{"A", "A", "A"}, []string{"A", "A-1", "A-2"}},
		{[]string{"A", "A-1", "A"}, []string{"A", "A-1", "A-2"}},
		{[]string{"TBCE", "B", "TBCE", "B"}, []string{"TBCE", "B", "TBCE-1", "B-1"}},
		{nil, nil},
	} {
		got := makeUnique(slices.Clone(c.in))
		if !slices.Equal(got, c.want) {
			t.Errorf("makeUnique(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
