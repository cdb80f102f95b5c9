package matio

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/kernels"
)

// symFixture returns S = A[:5,:5] + A[:5,:5]^T as X.
func symFixture() []float64 {
	a := fixtureA(1)
	s := make([]float64, 25)
	for i := 0; i < 5; i++ {
		for j := 0; j < 5; j++ {
			s[i*5+j] = a[i*5+j] + a[j*5+i]
		}
	}
	return s
}

func TestMTXFixtures(t *testing.T) {
	pattern := fixtureA(1)
	for p := range pattern {
		if pattern[p] != 0 {
			pattern[p] = 1
		}
	}
	tests := []struct {
		file   string
		n      int
		want   []float64
		sparse bool // stored as CSC
	}{
		{"coo.mtx", fixN, fixtureA(0.25), true},
		{"coo.mtx.gz", fixN, fixtureA(0.25), true},
		{"array.mtx", fixN, fixtureA(0.25), false},
		{"int.mtx", fixN, fixtureA(1), true},
		{"pattern.mtx", fixN, pattern, true},
		{"sym.mtx", 5, symFixture(), true},
		{"sym_array.mtx", 5, symFixture(), false},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			src, err := Open(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if src.Samples() != tt.n || src.Features() != 5 {
				t.Fatalf("opened as %d x %d", src.Samples(), src.Features())
			}
			for _, layout := range layouts {
				if got := denseData(mustRead(t, src, 0, tt.n, layout)); !sameData(got, tt.want) {
					t.Errorf("layout %v: got %v, want %v", layout, got, tt.want)
				}
			}
			checkRanges(t, src)
		})
	}
}

func TestMTXHandWritten(t *testing.T) {
	tests := []struct {
		name, text string
		n, m       int
		want       []float64 // X column-major = the user's matrix row-major
	}{
		{"comments and blanks", "%%MatrixMarket MATRIX Coordinate REAL General\n% a comment\n\n  \n3 2 2\n% between\n3 2 4.5\n\n1 1 1e0\n",
			3, 2, []float64{1, 0, 0, 0, 0, 4.5}},
		{"unsorted, explicit zero, CRLF", "%%MatrixMarket matrix coordinate real general\r\n2 3 3\r\n2 3 7\r\n1 2 0\r\n1 1 2\r\n",
			2, 3, []float64{2, 0, 0, 0, 0, 7}},
		{"integer array", "%%matrixmarket matrix array integer general\n2 2\n1\n2\n3\n4\n", 2, 2, []float64{1, 3, 2, 4}},
		{"array values on one line", "%%MatrixMarket matrix array real general\n2 3\n1 2 3\t4\n5 6\n", 2, 3, []float64{1, 3, 5, 2, 4, 6}},
		{"symmetric upper triangle", "%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n1 2 5\n2 2 1\n", 2, 2, []float64{0, 5, 5, 1}},
		{"empty samples", "%%MatrixMarket matrix coordinate pattern general\n1000000000 3 1\n999999999 2\n", 1000000000, 3, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := Open(writeTemp(t, "m.mtx", []byte(tt.text)))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if src.Samples() != tt.n || src.Features() != tt.m {
				t.Fatalf("opened as %d x %d, want %d x %d", src.Samples(), src.Features(), tt.n, tt.m)
			}
			if tt.want == nil {
				b := mustRead(t, src, 999000000, 999999999, LayoutAuto)
				if b.NNZ() != 1 || b.Sum() != 1 {
					t.Fatalf("got %d entries summing to %v", b.NNZ(), b.Sum())
				}
				b = mustRead(t, src, 999999990, 1000000000, LayoutDense)
				if got := kernels.ToDense(b).At(1, 8); got != 1 {
					t.Fatalf("entry is %v", got)
				}
				return
			}
			for _, layout := range layouts {
				if got := denseData(mustRead(t, src, 0, tt.n, layout)); !sameData(got, tt.want) {
					t.Errorf("layout %v: got %v, want %v", layout, got, tt.want)
				}
			}
		})
	}
}

func TestMTXBadInput(t *testing.T) {
	const coo = "%%MatrixMarket matrix coordinate real general\n"
	tests := []struct {
		name, text string
		want       []string
	}{
		{"negative", coo + "% c\n13 5 3\n1 1 1\n13 4 -2\n2 2 1\n", []string{"m.mtx:5: row 13, column 4: negative value -2 (NMF needs finite nonnegative entries)"}},
		{"nan", coo + "3 3 1\n2 3 nan\n", []string{"m.mtx:3: row 2, column 3: NaN"}},
		{"inf", coo + "3 3 1\n2 3 1e999\n", []string{"m.mtx:3: row 2, column 3: infinite value +Inf"}},
		{"array negative", "%%MatrixMarket matrix array real general\n2 2\n1\n2\n-3\n4\n", []string{"m.mtx:5: row 1, column 2: negative value -3"}},
		{"duplicate", coo + "3 4 3\n3 4 1\n1 1 1\n3 4 2\n", []string{"m.mtx:5: duplicate entry (row 3, column 4), first given at line 3"}},
		{"symmetric duplicate", "%%MatrixMarket matrix coordinate real symmetric\n4 4 2\n4 3 1\n3 4 2\n", []string{"m.mtx:4: entry (row 3, column 4) duplicates entry (row 4, column 3) given at line 3"}},
		{"truncated", coo + "3 4 3\n3 4 1\n1 1 1\n", []string{"m.mtx: truncated: the size line (line 2) promises 3 entries but the file has only 2"}},
		{"too many", coo + "3 4 1\n3 4 1\n1 1 1\n", []string{"m.mtx:4: more entries than the 1 the size line (line 2) promises"}},
		{"array truncated", "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n", []string{"m.mtx: truncated: the size line (line 2) promises 4 values but the file has only 3"}},
		{"array too many", "%%MatrixMarket matrix array real general\n1 2\n1\n2\n3\n", []string{"m.mtx:5: more values than the 2"}},
		{"row range", coo + "3 4 1\n4 1 1\n", []string{"m.mtx:3: row \"4\" out of range 1..3"}},
		{"column zero", coo + "3 4 1\n1 0 1\n", []string{"m.mtx:3: column \"0\" out of range 1..4"}},
		{"bad value", coo + "3 4 1\n1 1 x\n", []string{"m.mtx:3: bad value \"x\""}},
		{"bad integer", "%%MatrixMarket matrix coordinate integer general\n3 4 1\n1 1 1.5\n", []string{"m.mtx:3: bad integer value \"1.5\""}},
		{"missing value", coo + "3 4 1\n1 1\n", []string{"m.mtx:3: expected \"row column value\""}},
		{"complex", "%%MatrixMarket matrix coordinate complex general\n", []string{"m.mtx:1: unsupported MatrixMarket field \"complex\""}},
		{"hermitian", "%%MatrixMarket matrix coordinate real hermitian\n", []string{"unsupported MatrixMarket symmetry \"hermitian\""}},
		{"skew", "%%MatrixMarket matrix coordinate real skew-symmetric\n", []string{"unsupported MatrixMarket symmetry \"skew-symmetric\""}},
		{"vector", "%%MatrixMarket vector coordinate real general\n", []string{"unsupported MatrixMarket object \"vector\""}},
		{"array pattern", "%%MatrixMarket matrix array pattern general\n", []string{"pattern field needs the coordinate format"}},
		{"no banner", "3 4 1\n1 1 1\n", []string{"m.mtx:1: not a MatrixMarket file"}},
		{"short banner", "%%MatrixMarket matrix coordinate\n", []string{"m.mtx:1: bad header"}},
		{"no size", coo + "% only comments\n", []string{"m.mtx: truncated: no size line"}},
		{"bad size", coo + "3 x 1\n", []string{"m.mtx:2: bad size line \"3 x 1\""}},
		{"empty", coo + "0 4 0\n", []string{"m.mtx:2: empty matrix: 0 x 4"}},
		{"too many entries", coo + "2 2 5\n", []string{"m.mtx:2: 5 entries do not fit in a 2 x 2 matrix"}},
		{"non-square symmetric", "%%MatrixMarket matrix coordinate real symmetric\n2 3 1\n", []string{"a symmetric matrix must be square, not 2 x 3"}},
		{"huge", coo + "99999999999 3 1\n", []string{"is too large"}},
		{"empty file", "", []string{"m.mtx:1: not a MatrixMarket file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeTemp(t, "m.mtx", []byte(tt.text))
			if tt.text == "" {
				wantInputError(t, openAndRead(path), "m.mtx: empty file")
				return
			}
			wantInputError(t, openAndRead(path), tt.want...)
			gz := writeTemp(t, "m.mtx.gz", gzipBytes(t, []byte(tt.text)))
			var wantGz []string
			for _, w := range tt.want {
				wantGz = append(wantGz, strings.ReplaceAll(w, "m.mtx", "m.mtx.gz"))
			}
			wantInputError(t, openAndRead(gz), wantGz...)
		})
	}
}

func TestMTXAutoLayout(t *testing.T) {
	// Column 0 of X is full, column 1 empty: each alone is dense / sparse under LayoutAuto.
	src, err := Open(writeTemp(t, "m.mtx", []byte("%%MatrixMarket matrix coordinate real general\n2 4 4\n1 1 1\n1 2 2\n1 3 3\n1 4 4\n")))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, ok := mustRead(t, src, 0, 1, LayoutAuto).(*kernels.Dense); !ok {
		t.Error("a full column read sparse under LayoutAuto")
	}
	if _, ok := mustRead(t, src, 1, 2, LayoutAuto).(*kernels.CSC); !ok {
		t.Error("an empty column read dense under LayoutAuto")
	}
}
