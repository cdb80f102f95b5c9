package matio

import (
	"compress/gzip"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/kernels"

	"github.com/didnmf/didnmf/usererr"
)

// The fixtures in testdata hold the 7 x 5 matrix A of make_fixtures.py.
const fixN, fixM = 7, 5

// fixtureA returns A[i][j] = ((5*i + j) * 7) % 11, scaled, as X (M x N column-major), which is
// A row-major.
func fixtureA(scale float64) []float64 {
	x := make([]float64, fixN*fixM)
	for p := range x {
		x[p] = float64((p*7)%11) * scale
	}
	return x
}

// fixtureBool returns A % 2 as X.
func fixtureBool() []float64 {
	x := fixtureA(1)
	for p := range x {
		x[p] = math.Mod(x[p], 2)
	}
	return x
}

var layouts = []Layout{LayoutAuto, LayoutDense, LayoutSparse}

// mustRead reads [lo, hi) and checks the block's type and dims.
func mustRead(t *testing.T, src Source, lo, hi int, layout Layout) kernels.Block {
	t.Helper()
	b, err := src.Read(lo, hi, layout)
	if err != nil {
		t.Fatalf("%s: Read(%d, %d, %v): %v", src.Name(), lo, hi, layout, err)
	}
	checkBlock(t, b, src.Features(), hi-lo, layout)
	return b
}

// checkBlock checks dims, type for the layout, and CSC structure.
func checkBlock(t testing.TB, b kernels.Block, m, n int, layout Layout) {
	t.Helper()
	if r, c := b.Dims(); r != m || c != n {
		t.Fatalf("block is %d x %d, want %d x %d", r, c, m, n)
	}
	switch x := b.(type) {
	case *kernels.Dense:
		if layout == LayoutSparse {
			t.Fatalf("layout sparse gave a dense block")
		}
		if len(x.Data) != m*n {
			t.Fatalf("dense block has %d values, want %d", len(x.Data), m*n)
		}
	case *kernels.CSC:
		if layout == LayoutDense {
			t.Fatalf("layout dense gave a CSC block")
		}
		if err := x.Validate(); err != nil {
			t.Fatalf("invalid CSC: %v", err)
		}
		for p := x.ColPtr[0]; p < x.ColPtr[x.Cols]; p++ {
			if x.Val[p] == 0 {
				t.Fatalf("CSC stores an explicit zero")
			}
		}
	default:
		t.Fatalf("unknown block type %T", b)
	}
}

// sameData reports whether a and b hold the same bits.
func sameData(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) && !(a[i] == 0 && b[i] == 0) {
			return false
		}
	}
	return true
}

func denseData(b kernels.Block) []float64 { return kernels.ToDense(b).Data }

// wantInputError checks that err wraps usererr.ErrUser and contains every substring.
func wantInputError(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", subs)
	}
	if !errors.Is(err, usererr.ErrUser) {
		t.Errorf("error %q does not wrap usererr.ErrUser", err)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
}

// openAndRead opens spec and reads all of it, returning the first error.
func openAndRead(spec string) error {
	src, err := Open(spec)
	if err != nil {
		return err
	}
	defer src.Close()
	_, err = src.Read(0, src.Samples(), LayoutAuto)
	return err
}

// writeTemp writes data to a file called name in a temporary directory and returns its path.
func writeTemp(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// gzipBytes compresses data (Huffman only: cheap enough to run on every fuzz input).
func gzipBytes(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf strings.Builder
	zw, err := gzip.NewWriterLevel(&buf, gzip.HuffmanOnly)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return []byte(buf.String())
}

// checkRanges checks that Read(lo, hi) equals the same columns of Read(0, N) in every layout.
func checkRanges(t *testing.T, src Source) {
	t.Helper()
	n := src.Samples()
	full := denseData(mustRead(t, src, 0, n, LayoutDense))
	m := src.Features()
	ranges := [][2]int{{0, n}, {0, 1}, {n - 1, n}, {n / 3, n / 2}, {n / 2, n / 2}, {1, n}}
	for _, r := range ranges {
		for _, layout := range layouts {
			got := denseData(mustRead(t, src, r[0], r[1], layout))
			if !sameData(got, full[r[0]*m:r[1]*m]) {
				t.Errorf("%s: Read(%d, %d, %v) differs from the slice of Read(0, %d)", src.Name(), r[0], r[1], layout, n)
			}
		}
	}
}
