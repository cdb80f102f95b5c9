package matio

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/kernels"
)

// streamM is the number of features of the generated stream sources.
const streamM = 6

// genX returns an m x n X (column-major) with about the given density of nonzeros; some of
// its zeros are negative zeros, which Read must return as zeros.
func genX(m, n int, density float64, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 7))
	x := make([]float64, m*n)
	for p := range x {
		switch {
		case rng.Float64() < density:
			x[p] = rng.Float64() * 10
		case rng.IntN(3) == 0:
			x[p] = math.Copysign(0, -1)
		}
	}
	return x
}

// writeNPYOrder writes X (m x n) as an (n, m) float64 .npy file, C or Fortran order.
func writeNPYOrder(t *testing.T, name string, m, n int, x []float64, fortran bool) string {
	t.Helper()
	data := x
	if fortran {
		// Fortran order stores the user's columns (X's rows) one after the other.
		data = kernels.Transpose(x, m, n)
	}
	var buf bytes.Buffer
	if err := WriteNPY(&buf, n, m, data); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if fortran {
		b = bytes.Replace(b, []byte("'fortran_order': False,"), []byte("'fortran_order': True, "), 1)
	}
	return writeTemp(t, name, b)
}

// writeIDX writes X (m x n) as an n x m float64 IDX file.
func writeIDX(t *testing.T, name string, m, n int, x []float64) string {
	t.Helper()
	return writeTemp(t, name, idxBytes(0x0E, []uint32{uint32(n), uint32(m)}, idxEncode(0x0E, x)))
}

// writeMTXArray writes X (m x n) as an n x m MatrixMarket array file.
func writeMTXArray(t *testing.T, name string, m, n int, x []float64) string {
	t.Helper()
	var sb strings.Builder
	fmt.Fprintf(&sb, "%%%%MatrixMarket matrix array real general\n%d %d\n", n, m)
	for f := 0; f < m; f++ {
		for s := 0; s < n; s++ {
			sb.WriteString(strconv.FormatFloat(x[s*m+f], 'g', -1, 64) + "\n")
		}
	}
	return writeTemp(t, name, []byte(sb.String()))
}

// writeMTXCoord writes X (m x n) as an n x m MatrixMarket coordinate file holding its
// nonzeros and its negative zeros (explicit zeros, which Read drops), in reverse order.
func writeMTXCoord(t *testing.T, name string, m, n int, x []float64) string {
	t.Helper()
	var lines []string
	for p := len(x) - 1; p >= 0; p-- {
		if x[p] != 0 || math.Signbit(x[p]) {
			lines = append(lines, fmt.Sprintf("%d %d %s", p/m+1, p%m+1, strconv.FormatFloat(x[p], 'g', -1, 64)))
		}
	}
	text := fmt.Sprintf("%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n%s\n", n, m, len(lines), strings.Join(lines, "\n"))
	return writeTemp(t, name, []byte(text))
}

// streamSources returns the sources of the stream tests, by name, with their natural layouts.
func streamSources(t *testing.T) []struct {
	name    string
	src     Source
	natural Layout
} {
	t.Helper()
	m := streamM
	dense, sparse := genX(m, 23, 0.9, 1), genX(m, 31, 0.3, 2)
	paths := map[string]string{
		"npy C dense":        writeNPYOrder(t, "cd.npy", m, 23, dense, false),
		"npy C sparse":       writeNPYOrder(t, "cs.npy", m, 31, sparse, false),
		"npy F dense":        writeNPYOrder(t, "fd.npy", m, 23, dense, true),
		"npy F sparse":       writeNPYOrder(t, "fs.npy", m, 31, sparse, true),
		"idx dense":          writeIDX(t, "d.idx", m, 23, dense),
		"idx sparse":         writeIDX(t, "s.idx", m, 31, sparse),
		"mtx array":          writeMTXArray(t, "a.mtx", m, 29, genX(m, 29, 0.85, 3)),
		"mtx array sparse":   writeMTXArray(t, "as.mtx", m, 29, genX(m, 29, 0.2, 4)),
		"mtx coord sparse":   writeMTXCoord(t, "cs.mtx", m, 37, genX(m, 37, 0.2, 5)),
		"mtx coord dense":    writeMTXCoord(t, "cd.mtx", m, 19, genX(m, 19, 0.95, 6)),
		"mtx coord midrange": writeMTXCoord(t, "cm.mtx", m, 40, genX(m, 40, 0.7, 7)),
	}
	syn := "synthetic:m=6,n=40,k=2,seed=3"
	specs := []struct {
		name    string
		specs   []string
		natural Layout
	}{
		{"npy C dense", []string{paths["npy C dense"]}, LayoutDense},
		{"npy C sparse", []string{paths["npy C sparse"]}, LayoutDense},
		{"npy F dense", []string{paths["npy F dense"]}, LayoutDense},
		{"npy F sparse", []string{paths["npy F sparse"]}, LayoutDense},
		{"idx dense", []string{paths["idx dense"]}, LayoutDense},
		{"idx sparse", []string{paths["idx sparse"]}, LayoutDense},
		{"mtx array", []string{paths["mtx array"]}, LayoutDense},
		{"mtx array sparse", []string{paths["mtx array sparse"]}, LayoutDense},
		{"mtx coord sparse", []string{paths["mtx coord sparse"]}, LayoutSparse},
		{"mtx coord dense", []string{paths["mtx coord dense"]}, LayoutSparse},
		{"mtx coord midrange", []string{paths["mtx coord midrange"]}, LayoutSparse},
		{"synthetic", []string{syn}, LayoutDense},
		{"synthetic noise", []string{"synthetic:m=6,n=17,k=3,seed=5,noise=0.5"}, LayoutDense},
		{"fixture c_f8.npy", []string{"testdata/c_f8.npy"}, LayoutDense},
		{"fixture f_f4.npy", []string{"testdata/f_f4.npy"}, LayoutDense},
		{"fixture c_b1.npy", []string{"testdata/c_b1.npy"}, LayoutDense},
		{"fixture array.mtx", []string{"testdata/array.mtx"}, LayoutDense},
		{"fixture coo.mtx", []string{"testdata/coo.mtx"}, LayoutSparse},
		{"fixture pattern.mtx", []string{"testdata/pattern.mtx"}, LayoutSparse},
		{"fixture sym.mtx", []string{"testdata/sym.mtx"}, LayoutSparse},
		{"stack dense parts", []string{paths["npy C sparse"], paths["npy F dense"], paths["idx sparse"], paths["mtx array"], syn}, LayoutDense},
		{"stack mixed", []string{paths["npy C dense"], paths["mtx coord sparse"], paths["npy F sparse"], paths["mtx coord dense"], syn}, LayoutSparse},
		{"stack sparse parts", []string{paths["mtx coord sparse"], paths["mtx coord midrange"]}, LayoutSparse},
	}
	out := make([]struct {
		name    string
		src     Source
		natural Layout
	}, len(specs))
	for i, s := range specs {
		src, err := OpenAll(s.specs)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		t.Cleanup(func() { src.Close() })
		out[i].name, out[i].src, out[i].natural = s.name, src, s.natural
	}
	return out
}

// streamRanges returns ranges to read from a source with n samples: whole, edges, inner,
// empty, and (for stacks) ranges that cross or sit inside parts.
func streamRanges(n int) [][2]int {
	return [][2]int{{0, n}, {0, 1}, {n - 1, n}, {n / 3, 2 * n / 3}, {n / 2, n / 2}, {1, n - 2},
		{min(n, 20), min(n, 50)}, {min(n, 24), min(n, 30)}, {min(n, 30), min(n, 90)}}
}

// sameBlock fails unless got and want have the same type, dims, values (bits) and structure.
func sameBlock(t *testing.T, what string, got, want kernels.Block) {
	t.Helper()
	switch w := want.(type) {
	case *kernels.Dense:
		g, ok := got.(*kernels.Dense)
		if !ok {
			t.Fatalf("%s: got %T, want *kernels.Dense", what, got)
		}
		if g.Rows != w.Rows || g.Cols != w.Cols || !sameBits(g.Data, w.Data) {
			t.Fatalf("%s: dense blocks differ", what)
		}
	case *kernels.CSC:
		g, ok := got.(*kernels.CSC)
		if !ok {
			t.Fatalf("%s: got %T, want *kernels.CSC", what, got)
		}
		if g.Rows != w.Rows || g.Cols != w.Cols || len(g.ColPtr) != len(w.ColPtr) {
			t.Fatalf("%s: CSC shapes differ: %d x %d (%d pointers), want %d x %d (%d)", what,
				g.Rows, g.Cols, len(g.ColPtr), w.Rows, w.Cols, len(w.ColPtr))
		}
		for j := range w.ColPtr {
			if g.ColPtr[j] != w.ColPtr[j] {
				t.Fatalf("%s: column pointer %d is %d, want %d", what, j, g.ColPtr[j], w.ColPtr[j])
			}
		}
		lo, hi := w.ColPtr[0], w.ColPtr[w.Cols]
		if !sameBits(g.Val[lo:hi], w.Val[lo:hi]) {
			t.Fatalf("%s: CSC values differ", what)
		}
		for p := lo; p < hi; p++ {
			if g.RowIdx[p] != w.RowIdx[p] {
				t.Fatalf("%s: row index %d is %d, want %d", what, p, g.RowIdx[p], w.RowIdx[p])
			}
		}
	default:
		t.Fatalf("%s: want has type %T", what, want)
	}
}

// sameBits reports whether a and b hold exactly the same bits.
func sameBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// piece is a flat piece of dense data at an offset of the block.
type piece struct {
	off  int
	vals []float64
}

// streamBlock reads [lo, hi) of src in chunks of at most maxValues values in its natural
// layout, cuts dense chunks into flat pieces of at most pieceLen values, shuffles the pieces,
// and feeds everything to a BlockBuilder.
func streamBlock(t *testing.T, src Source, lo, hi int, layout Layout, maxValues, pieceLen int, seed uint64) kernels.Block {
	t.Helper()
	return streamBlockWith(t, src, lo, hi, layout, maxValues, pieceLen, seed, nil)
}

// streamBlockWith is streamBlock with a builder built with opts (NewBlockBuilder when nil).
func streamBlockWith(t *testing.T, src Source, lo, hi int, layout Layout, maxValues, pieceLen int, seed uint64, opts *ReadOptions) kernels.Block {
	t.Helper()
	natural, m := NaturalLayout(src), src.Features()
	var bb *BlockBuilder
	var err error
	if opts == nil {
		bb, err = NewBlockBuilder(m, hi-lo, natural, layout)
	} else {
		bb, err = NewBlockBuilderWithOptions(m, hi-lo, natural, layout, *opts)
	}
	if err != nil {
		t.Fatal(err)
	}
	var pieces []piece
	for _, r := range DenseChunks(m, lo, hi, maxValues) {
		blk, err := src.Read(r.Lo, r.Hi, natural)
		if err != nil {
			t.Fatal(err)
		}
		switch x := blk.(type) {
		case *kernels.Dense:
			if natural != LayoutDense {
				t.Fatalf("natural %v read gave %T", natural, blk)
			}
			base := (r.Lo - lo) * m
			for k := 0; k < len(x.Data); k += pieceLen {
				pieces = append(pieces, piece{base + k, x.Data[k:min(len(x.Data), k+pieceLen)]})
			}
		case *kernels.CSC:
			if natural != LayoutSparse {
				t.Fatalf("natural %v read gave %T", natural, blk)
			}
			p0 := x.ColPtr[0]
			ptr := make([]int64, x.Cols+1)
			for j := range ptr {
				ptr[j] = int64(x.ColPtr[j] - p0)
			}
			p1 := x.ColPtr[x.Cols]
			if err := bb.AddSparse(r.Lo-lo, ptr, x.RowIdx[p0:p1], x.Val[p0:p1]); err != nil {
				t.Fatalf("AddSparse(%d): %v", r.Lo-lo, err)
			}
			if got := bb.Received(); got != r.Hi-lo {
				t.Fatalf("after columns up to %d, Received = %d", r.Hi-lo, got)
			}
		}
	}
	rng := rand.New(rand.NewPCG(seed, 11))
	rng.Shuffle(len(pieces), func(i, j int) { pieces[i], pieces[j] = pieces[j], pieces[i] })
	sum := 0
	for i, pc := range pieces {
		if bb.Complete() {
			t.Fatalf("complete before piece %d of %d", i, len(pieces))
		}
		if err := bb.AddDense(pc.off, pc.vals); err != nil {
			t.Fatalf("AddDense(%d, %d values): %v", pc.off, len(pc.vals), err)
		}
		sum += len(pc.vals)
		if i == len(pieces)/2 {
			// A duplicate is refused and changes nothing.
			if err := bb.AddDense(pc.off, pc.vals); err == nil || !strings.Contains(err.Error(), "overlap") {
				t.Fatalf("duplicate piece: err = %v, want an overlap error", err)
			}
		}
		if bb.Received() != sum {
			t.Fatalf("Received = %d after %d values", bb.Received(), sum)
		}
	}
	if !bb.Complete() {
		t.Fatalf("incomplete after all chunks: received %d", bb.Received())
	}
	b, err := bb.Block()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNaturalLayout(t *testing.T) {
	for _, s := range streamSources(t) {
		if got := NaturalLayout(s.src); got != s.natural {
			t.Errorf("%s: NaturalLayout = %v, want %v", s.name, got, s.natural)
		}
	}
	if got := NaturalLayout(foreignSource{}); got != LayoutDense {
		t.Errorf("foreign source: NaturalLayout = %v, want dense", got)
	}
}

// foreignSource is a Source from outside the package.
type foreignSource struct{ Source }

// TestShapeOfNatural checks that Shape(Read(natural), layout) is Read(layout), bit for bit,
// and that Read never returns a negative zero.
func TestShapeOfNatural(t *testing.T) {
	for _, s := range streamSources(t) {
		n := s.src.Samples()
		for _, r := range streamRanges(n) {
			lo, hi := r[0], r[1]
			nat, err := s.src.Read(lo, hi, NaturalLayout(s.src))
			if err != nil {
				t.Fatal(err)
			}
			for _, layout := range layouts {
				want := mustRead(t, s.src, lo, hi, layout)
				what := fmt.Sprintf("%s [%d, %d) %v", s.name, lo, hi, layout)
				sameBlock(t, what, Shape(nat, layout), want)
				if d, ok := want.(*kernels.Dense); ok {
					for p, v := range d.Data {
						if math.Signbit(v) {
							t.Fatalf("%s: value %d is %v", what, p, v)
						}
					}
				}
			}
		}
	}
}

func TestBlockBuilderStream(t *testing.T) {
	chunkings := []struct {
		name               string
		maxValues, pieceLn int
	}{
		{"one sample, one value", 1, 1},
		{"uneven", 3*streamM + 1, streamM - 1},
		{"columns over pieces", 7 * streamM, 2*streamM + 3},
		{"whole", 1 << 20, 1 << 20},
	}
	for _, s := range streamSources(t) {
		n := s.src.Samples()
		for _, r := range streamRanges(n) {
			for _, layout := range layouts {
				want := mustRead(t, s.src, r[0], r[1], layout)
				for i, c := range chunkings {
					what := fmt.Sprintf("%s [%d, %d) %v, %s", s.name, r[0], r[1], layout, c.name)
					got := streamBlock(t, s.src, r[0], r[1], layout, c.maxValues, c.pieceLn, uint64(i))
					sameBlock(t, what, got, want)
				}
			}
		}
	}
}

func TestDenseChunks(t *testing.T) {
	tests := []struct {
		name                    string
		rows, lo, hi, maxValues int
		want                    []SampleRange
	}{
		{"even", 2, 0, 6, 4, []SampleRange{{0, 2}, {2, 4}, {4, 6}}},
		{"uneven", 3, 5, 12, 7, []SampleRange{{5, 7}, {7, 9}, {9, 11}, {11, 12}}},
		{"sample over max", 10, 3, 6, 4, []SampleRange{{3, 4}, {4, 5}, {5, 6}}},
		{"all in one", 3, 2, 5, 1000, []SampleRange{{2, 5}}},
		{"zero max", 3, 0, 2, 0, []SampleRange{{0, 1}, {1, 2}}},
		{"negative max", 3, 0, 2, -5, []SampleRange{{0, 1}, {1, 2}}},
		{"no rows", 0, 4, 9, 3, []SampleRange{{4, 9}}},
		{"empty", 3, 4, 4, 10, nil},
		{"reversed", 3, 5, 4, 10, nil},
		{"negative lo", 3, -1, 4, 10, nil},
		{"near MaxInt", 1, math.MaxInt - 3, math.MaxInt, math.MaxInt, []SampleRange{{math.MaxInt - 3, math.MaxInt}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DenseChunks(tt.rows, tt.lo, tt.hi, tt.maxValues)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("DenseChunks(%d, %d, %d, %d) = %v, want %v", tt.rows, tt.lo, tt.hi, tt.maxValues, got, tt.want)
			}
		})
	}
}

func TestNewBlockBuilderErrors(t *testing.T) {
	tests := []struct {
		name            string
		rows, cols      int
		natural, layout Layout
		want            string // "" for no error
	}{
		{"ok dense", 3, 4, LayoutDense, LayoutAuto, ""},
		{"ok empty", 0, 0, LayoutSparse, LayoutDense, ""},
		{"ok huge sparse", math.MaxInt32, 1 << 41, LayoutSparse, LayoutSparse, ""},
		{"ok huge sparse auto", math.MaxInt32, 1 << 41, LayoutSparse, LayoutAuto, ""},
		{"negative rows", -1, 4, LayoutDense, LayoutAuto, "negative size"},
		{"negative cols", 3, -4, LayoutSparse, LayoutAuto, "negative size"},
		{"too many rows", math.MaxInt32 + 1, 1, LayoutSparse, LayoutSparse, "more than 2147483647 features"},
		{"natural auto", 3, 4, LayoutAuto, LayoutAuto, "neither dense nor sparse"},
		{"natural unknown", 3, 4, Layout(9), LayoutAuto, "neither dense nor sparse"},
		{"unknown layout", 3, 4, LayoutDense, Layout(-1), "unknown layout -1"},
		{"dense too large", 1 << 21, 1 << 40, LayoutDense, LayoutSparse, "too large"},
		{"wanted dense too large", math.MaxInt32, 1 << 41, LayoutSparse, LayoutDense, "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewBlockBuilder(tt.rows, tt.cols, tt.natural, tt.layout)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestBlockBuilderErrors(t *testing.T) {
	// The block: 3 features x 4 samples.
	full := []float64{1, 0, 2, 0, 0, 3, 4, 5, 0, 0, 0, 6}
	ptr := []int64{0, 2, 3, 5, 6}
	rows := []int32{0, 2, 2, 0, 1, 2}
	vals := []float64{1, 2, 3, 4, 5, 6}
	dense := func(t *testing.T) *BlockBuilder {
		b, err := NewBlockBuilder(3, 4, LayoutDense, LayoutAuto)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.AddDense(3, full[3:6]); err != nil {
			t.Fatal(err)
		}
		if err := b.AddDense(9, full[9:]); err != nil {
			t.Fatal(err)
		}
		return b
	}
	sparse := func(t *testing.T) *BlockBuilder {
		b, err := NewBlockBuilder(3, 4, LayoutSparse, LayoutSparse)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.AddSparse(0, ptr[:2], rows[:2], vals[:2]); err != nil {
			t.Fatal(err)
		}
		return b
	}
	taken := func(t *testing.T) *BlockBuilder {
		b := dense(t)
		b.AddDense(0, full[:3])
		b.AddDense(6, full[6:9])
		if _, err := b.Block(); err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name  string
		setup func(*testing.T) *BlockBuilder
		call  func(*BlockBuilder) error
		want  string
	}{
		{"dense negative offset", dense, func(b *BlockBuilder) error { return b.AddDense(-1, []float64{1}) }, "values [-1, 0) outside"},
		{"dense offset past end", dense, func(b *BlockBuilder) error { return b.AddDense(13, nil) }, "outside the 3 x 4 block's [0, 12)"},
		{"dense piece past end", dense, func(b *BlockBuilder) error { return b.AddDense(11, []float64{1, 2}) }, "values [11, 13) outside"},
		{"dense overlap", dense, func(b *BlockBuilder) error { return b.AddDense(1, full[1:5]) }, "values [1, 5) overlap values [3, 5) already received"},
		{"dense duplicate", dense, func(b *BlockBuilder) error { return b.AddDense(9, full[9:]) }, "overlap values [9, 12)"},
		{"dense NaN", dense, func(b *BlockBuilder) error { return b.AddDense(6, []float64{1, math.NaN()}) }, "sample 2 of the block, feature 1 (0-based): NaN value"},
		{"dense negative", dense, func(b *BlockBuilder) error { return b.AddDense(0, []float64{1, 2, -0.5}) },
			"sample 0 of the block, feature 2 (0-based): negative value -0.5 (NMF needs finite nonnegative entries)"},
		{"dense infinite", dense, func(b *BlockBuilder) error { return b.AddDense(8, []float64{math.Inf(1)}) }, "sample 2 of the block, feature 2 (0-based): infinite value +Inf"},
		{"dense incomplete", dense, func(b *BlockBuilder) error { _, err := b.Block(); return err }, "incomplete: 6 of 12 values received"},
		{"sparse data to dense", dense, func(b *BlockBuilder) error { return b.AddSparse(0, ptr[:2], rows[:2], vals[:2]) }, "sparse data for a builder of dense data"},
		{"dense after taken", taken, func(b *BlockBuilder) error { return b.AddDense(0, nil) }, "already taken"},
		{"block after taken", taken, func(b *BlockBuilder) error { _, err := b.Block(); return err }, "already taken"},
		{"sparse skips a column", sparse, func(b *BlockBuilder) error { return b.AddSparse(2, []int64{0, 2}, rows[3:5], vals[3:5]) }, "columns from 2, want column 1 next"},
		{"sparse repeats a column", sparse, func(b *BlockBuilder) error { return b.AddSparse(0, []int64{0, 2}, rows[:2], vals[:2]) }, "columns from 0, want column 1 next"},
		{"sparse no pointers", sparse, func(b *BlockBuilder) error { return b.AddSparse(1, nil, nil, nil) }, "no column pointers"},
		{"sparse too many columns", sparse, func(b *BlockBuilder) error { return b.AddSparse(1, []int64{0, 0, 0, 0, 0}, nil, nil) }, "columns [1, 5) outside the block's 4 columns"},
		{"sparse lengths differ", sparse, func(b *BlockBuilder) error { return b.AddSparse(1, []int64{0, 1}, rows[2:3], nil) }, "1 row indices but 0 values"},
		{"sparse pointers from 1", sparse, func(b *BlockBuilder) error { return b.AddSparse(1, []int64{1, 1}, rows[2:3], vals[2:3]) }, "pointers run from 1 to 1, want 0 to 1"},
		{"sparse pointers short", sparse, func(b *BlockBuilder) error { return b.AddSparse(1, []int64{0, 1}, rows[2:4], vals[2:4]) }, "pointers run from 0 to 1, want 0 to 2"},
		{"sparse pointers decrease", sparse, func(b *BlockBuilder) error { return b.AddSparse(1, []int64{0, 2, 1, 2}, rows[2:4], vals[2:4]) },
			"column 2 of the block: pointers decrease (2 then 1)"},
		{"sparse row out of range", sparse, func(b *BlockBuilder) error {
			return b.AddSparse(1, []int64{0, 1, 2}, []int32{2, 3}, []float64{1, 1})
		}, "column 2 of the block: row index 3 out of range [0, 3)"},
		{"sparse negative row", sparse, func(b *BlockBuilder) error { return b.AddSparse(1, []int64{0, 1}, []int32{-1}, []float64{1}) }, "row index -1 out of range"},
		{"sparse rows not increasing", sparse, func(b *BlockBuilder) error {
			return b.AddSparse(1, []int64{0, 1, 3}, []int32{2, 1, 1}, []float64{1, 1, 1})
		}, "column 2 of the block: row index 1 after 1 (rows must increase)"},
		{"sparse negative value", sparse, func(b *BlockBuilder) error {
			return b.AddSparse(1, []int64{0, 1, 3}, []int32{2, 0, 2}, []float64{1, 1, -2})
		}, "sample 2 of the block, feature 2 (0-based): negative value -2"},
		{"sparse NaN", sparse, func(b *BlockBuilder) error { return b.AddSparse(1, []int64{0, 1}, []int32{1}, []float64{math.NaN()}) }, "sample 1 of the block, feature 1 (0-based): NaN value"},
		{"sparse incomplete", sparse, func(b *BlockBuilder) error { _, err := b.Block(); return err }, "incomplete: 1 of 4 columns received"},
		{"dense data to sparse", sparse, func(b *BlockBuilder) error { return b.AddDense(0, full[:1]) }, "dense data for a builder of sparse data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.setup(t)
			before := b.Received()
			err := tt.call(b)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
			if b.Received() != before {
				t.Fatalf("Received went from %d to %d on an error", before, b.Received())
			}
			if b.taken {
				return
			}
			// The failed call changed nothing: the rest of the block completes it.
			if b.natural == LayoutDense {
				for _, r := range [][2]int{{0, 3}, {6, 9}} {
					if err := b.AddDense(r[0], full[r[0]:r[1]]); err != nil {
						t.Fatal(err)
					}
				}
			} else if err := b.AddSparse(1, []int64{0, 1, 3, 4}, rows[2:], vals[2:]); err != nil {
				t.Fatal(err)
			}
			got, err := b.Block()
			if err != nil {
				t.Fatal(err)
			}
			want := Shape(&kernels.Dense{Rows: 3, Cols: 4, Data: full}, b.layout)
			sameBlock(t, "completed block", got, want)
		})
	}
}

// TestBlockBuilderZeros checks that explicit zeros and negative zeros end up as Read gives
// them: dropped from CSC, +0 in dense data.
func TestBlockBuilderZeros(t *testing.T) {
	negZero := math.Copysign(0, -1)
	for _, layout := range layouts {
		b, err := NewBlockBuilder(2, 2, LayoutSparse, layout)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.AddSparse(0, []int64{0, 2, 3}, []int32{0, 1, 1}, []float64{0, 3, negZero}); err != nil {
			t.Fatal(err)
		}
		got, err := b.Block()
		if err != nil {
			t.Fatal(err)
		}
		want := Shape(&kernels.CSC{Rows: 2, Cols: 2, ColPtr: []int{0, 1, 1}, RowIdx: []int32{1}, Val: []float64{3}}, layout)
		sameBlock(t, "sparse "+layout.String(), got, want)

		d, err := NewBlockBuilder(2, 2, LayoutDense, layout)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.AddDense(0, []float64{negZero, 3, 0, negZero}); err != nil {
			t.Fatal(err)
		}
		got, err = d.Block()
		if err != nil {
			t.Fatal(err)
		}
		want = Shape(&kernels.Dense{Rows: 2, Cols: 2, Data: []float64{0, 3, 0, 0}}, layout)
		sameBlock(t, "dense "+layout.String(), got, want)
	}
}

// TestReadNegativeZero checks that Read returns a negative zero of an .npy file as a zero.
func TestReadNegativeZero(t *testing.T) {
	x := []float64{1, math.Copysign(0, -1), 2, 0}
	for _, fortran := range []bool{false, true} {
		path := writeNPYOrder(t, fmt.Sprintf("nz%v.npy", fortran), 2, 2, x, fortran)
		src, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		got := mustRead(t, src, 0, 2, LayoutDense).(*kernels.Dense)
		src.Close()
		if !sameBits(got.Data, []float64{1, 0, 2, 0}) {
			t.Errorf("fortran %v: Read gave %v", fortran, got.Data)
		}
	}
}

func TestShapeNil(t *testing.T) {
	if got := Shape(nil, LayoutAuto); got != nil {
		t.Errorf("Shape(nil) = %v", got)
	}
}

func TestStoredEntries(t *testing.T) {
	dir := t.TempDir()
	coord := filepath.Join(dir, "c.mtx")
	if err := os.WriteFile(coord, []byte("%%MatrixMarket matrix coordinate real general\n4 3 3\n1 1 1\n2 2 0\n4 3 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		specs []string
		n     int64
		ok    bool
	}{
		{[]string{coord}, 2, true}, // the explicit zero is not stored
		{[]string{"synthetic:m=3,n=10,k=2,seed=1"}, 0, false},
		{[]string{coord, "synthetic:m=3,n=10,k=2,seed=1"}, 32, true},
	} {
		src, err := OpenAll(c.specs)
		if err != nil {
			t.Fatal(err)
		}
		n, ok := StoredEntries(src)
		src.Close()
		if n != c.n || ok != c.ok {
			t.Errorf("%v: StoredEntries = %d, %v; want %d, %v", c.specs, n, ok, c.n, c.ok)
		}
	}
}
