package matio

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/kernels"
)

// The NaNs of the tests, in float64 and float32 bits: quiet, negative (what x86 arithmetic
// makes), and signalling with a payload. Each must read as the one missingNaN.
var (
	nan64Bits = []uint64{0x7ff8000000000000, 0xfff8000000000000, 0x7ff0000000000001}
	nan32Bits = []uint32{0x7fc00000, 0xffc00000, 0x7f800001}
)

// missingM, missingN are the features and samples of missingX.
const missingM, missingN = 4, 6

// missingX returns X (missingM x missingN, column-major, values exact in float32, some zeros)
// with NaN at nanAt, and the flat offsets of its NaNs. kinds[k] picks the bits of NaN k (an
// index into nan64Bits and nan32Bits).
func missingX() (x []float64, nanAt []int) {
	x = make([]float64, missingM*missingN)
	for p := range x {
		if p%5 != 2 {
			x[p] = float64(1+p%7) * 0.25
		}
	}
	// (sample 1, feature 2), (sample 3, feature 0), (sample 4, feature 1), (sample 5, feature 3).
	nanAt = []int{1*missingM + 2, 3*missingM + 0, 4*missingM + 1, 5*missingM + 3}
	for k, p := range nanAt {
		x[p] = math.Float64frombits(nan64Bits[k%len(nan64Bits)])
	}
	return x, nanAt
}

// missingWant returns x with every NaN the canonical missingNaN: what Read returns.
func missingWant(x []float64) []float64 {
	want := make([]float64, len(x))
	for p, v := range x {
		if math.IsNaN(v) {
			v = missingNaN
		}
		want[p] = v
	}
	return want
}

// npyEncode encodes X (m x n) as the user's (n, m) .npy array of dtype descr ("<f8", ">f8",
// "<f4", ">f4") in C or Fortran order. float32 NaNs take the bits of nan32Bits in order.
func npyEncode(descr string, fortran bool, m, n int, x []float64) []byte {
	data := x // C order: the user's rows (X's columns) one after the other
	if fortran {
		data = kernels.Transpose(x, m, n)
	}
	var order binary.ByteOrder = binary.LittleEndian
	if descr[0] == '>' {
		order = binary.BigEndian
	}
	size := int(descr[2] - '0')
	out := make([]byte, size*len(data))
	k := 0
	for i, v := range data {
		if size == 8 {
			order.PutUint64(out[8*i:], math.Float64bits(v))
			continue
		}
		bits := math.Float32bits(float32(v))
		if math.IsNaN(v) {
			bits = nan32Bits[k%len(nan32Bits)]
			k++
		}
		order.PutUint32(out[4*i:], bits)
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': (%d, %d), }", descr, map[bool]string{false: "False", true: "True"}[fortran], n, m)
	return npyBytes(dict, out)
}

// missingOn is the option of these tests.
var missingOn = ReadOptions{Missing: true}

// openMissing opens path with Missing.
func openMissing(t *testing.T, path string) Source {
	t.Helper()
	src, err := OpenWithOptions(os.Open, path, missingOn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// checkMissingRead reads all of src in every layout and checks the values against want (NaN
// where missing), that a CSC block stores the NaN entries, and the ranges.
func checkMissingRead(t *testing.T, src Source, want []float64) {
	t.Helper()
	n, m := src.Samples(), src.Features()
	nans := 0
	for _, v := range want {
		if math.IsNaN(v) {
			nans++
		}
	}
	for _, layout := range layouts {
		b := mustRead(t, src, 0, n, layout)
		if got := denseData(b); !sameBits(got, want) {
			t.Errorf("layout %v: got %v, want %v", layout, got, want)
		}
		if c, ok := b.(*kernels.CSC); ok {
			stored := 0
			for p := c.ColPtr[0]; p < c.ColPtr[c.Cols]; p++ {
				if math.IsNaN(c.Val[p]) {
					stored++
				}
			}
			if stored != nans {
				t.Errorf("layout %v: the CSC block stores %d NaN entries, want %d", layout, stored, nans)
			}
		}
		// Shape of the natural layout is the block of every layout, NaN bits included.
		sameBlock(t, "Shape of natural "+layout.String(), Shape(mustRead(t, src, 0, n, NaturalLayout(src)), layout), b)
	}
	if !MissingSeen(src) {
		t.Errorf("MissingSeen is false after reading %d NaNs", nans)
	}
	if m > 0 {
		checkRanges(t, src)
	}
}

func TestMissingNPY(t *testing.T) {
	x, nanAt := missingX()
	want := missingWant(x)
	first := fmt.Sprintf("sample %d, feature %d (0-based): NaN value (NMF needs finite nonnegative entries)", nanAt[0]/missingM, nanAt[0]%missingM)
	for _, descr := range []string{"<f8", ">f8", "<f4", ">f4"} {
		for _, fortran := range []bool{false, true} {
			for _, gz := range []bool{false, true} {
				data := npyEncode(descr, fortran, missingM, missingN, x)
				name := "m.npy"
				if gz {
					data, name = gzipBytes(t, data), "m.npy.gz"
				}
				t.Run(fmt.Sprintf("%s fortran=%v gz=%v", descr, fortran, gz), func(t *testing.T) {
					path := writeTemp(t, name, data)
					// The default refuses the first NaN, as always.
					wantInputError(t, openAndRead(path), name+": "+first)
					src := openMissing(t, path)
					if MissingSeen(src) {
						t.Error("MissingSeen before any Read")
					}
					// A range without NaN reads as usual and sees none.
					if got := denseData(mustRead(t, src, 0, 1, LayoutAuto)); !sameBits(got, want[:missingM]) {
						t.Errorf("Read(0, 1) = %v", got)
					}
					if MissingSeen(src) {
						t.Error("MissingSeen after reading a range without NaN")
					}
					checkMissingRead(t, src, want)
					// Factors never take missing values.
					_, _, _, err := ReadNPYMatrix(path)
					wantInputError(t, err, fmt.Sprintf("row %d, column %d (0-based): NaN value", nanAt[0]/missingM, nanAt[0]%missingM))
				})
			}
		}
	}
}

// TestMissingStillRefused checks that Missing takes only NaN: an infinite or negative entry
// after a NaN gives the default's message, in every reader.
func TestMissingStillRefused(t *testing.T) {
	x, _ := missingX()
	for _, bad := range []struct {
		v    float64
		what string
	}{{math.Inf(1), "infinite value +Inf"}, {math.Inf(-1), "infinite value -Inf"}, {-0.5, "negative value -0.5"}} {
		y := append([]float64(nil), x...)
		y[5*missingM+1] = bad.v // sample 5, feature 1, after NaNs
		msg := "sample 5, feature 1 (0-based): " + bad.what + " (NMF needs finite nonnegative entries)"
		mtxMsg := "row 6, column 2: " + bad.what + " (NMF needs finite nonnegative entries)"
		files := []struct {
			name string
			data []byte
			want string
		}{
			{"c.npy", npyEncode("<f8", false, missingM, missingN, y), "c.npy: " + msg},
			{"f.npy", npyEncode(">f8", true, missingM, missingN, y), "f.npy: " + msg},
			{"c4.npy.gz", gzipBytes(t, npyEncode("<f4", false, missingM, missingN, y)), "c4.npy.gz: " + msg},
			{"f.idx", idxBytes(0x0E, []uint32{missingN, missingM}, idxEncode(0x0E, y)), "f.idx: " + msg},
			// Array values run over the samples of feature 0, then feature 1: sample 5 of
			// feature 1 is value 1*6+5, on line 3+11.
			{"a.mtx", []byte(mtxArrayText(missingM, missingN, y, "nan")), "a.mtx:14: " + mtxMsg},
			{"c.mtx.gz", gzipBytes(t, []byte(mtxCoordText(missingM, missingN, y, "NaN"))), "c.mtx.gz:"},
		}
		for _, f := range files {
			t.Run(f.name+" "+bad.what, func(t *testing.T) {
				path := writeTemp(t, f.name, f.data)
				src, err := OpenWithOptions(os.Open, path, missingOn)
				if err == nil {
					defer src.Close()
					_, err = src.Read(0, src.Samples(), LayoutAuto)
				}
				wantInputError(t, err, f.want)
				if strings.Contains(f.name, ".mtx") {
					wantInputError(t, err, mtxMsg)
				}
			})
		}
	}
}

// mtxArrayText writes X (m x n) as an n x m MatrixMarket array file, NaN as nan.
func mtxArrayText(m, n int, x []float64, nan string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%%%%MatrixMarket matrix array real general\n%d %d\n", n, m)
	for f := 0; f < m; f++ {
		for s := 0; s < n; s++ {
			sb.WriteString(mtxToken(x[s*m+f], nan) + "\n")
		}
	}
	return sb.String()
}

// mtxCoordText writes X (m x n) as an n x m MatrixMarket coordinate file of its nonzeros (NaN
// as nan), and an explicit zero.
func mtxCoordText(m, n int, x []float64, nan string) string {
	var lines []string
	for p, v := range x {
		if v != 0 || p == 2 {
			lines = append(lines, fmt.Sprintf("%d %d %s", p/m+1, p%m+1, mtxToken(v, nan)))
		}
	}
	return fmt.Sprintf("%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n%s\n", n, m, len(lines), strings.Join(lines, "\n"))
}

func mtxToken(v float64, nan string) string {
	if math.IsNaN(v) {
		return nan
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func TestMissingMTX(t *testing.T) {
	x, _ := missingX()
	want := missingWant(x)
	const coo = "%%MatrixMarket matrix coordinate real general\n"
	tests := []struct {
		name, text string
		want       []float64 // nil: want of missingX
		off        string    // the default's error
	}{
		{"coordinate nan", mtxCoordText(missingM, missingN, x, "nan"), nil, "row 2, column 3: NaN value (NMF needs finite nonnegative entries)"},
		{"coordinate NaN", mtxCoordText(missingM, missingN, x, "NaN"), nil, "row 2, column 3: NaN value"},
		{"coordinate NAN", mtxCoordText(missingM, missingN, x, "NAN"), nil, "row 2, column 3: NaN value"},
		{"coordinate -nan", mtxCoordText(missingM, missingN, x, "-nan"), nil, "row 2, column 3: NaN value"},
		{"coordinate +NaN", mtxCoordText(missingM, missingN, x, "+NaN"), nil, "row 2, column 3: NaN value"},
		{"array nan", mtxArrayText(missingM, missingN, x, "nan"), nil, "m.mtx:6: row 4, column 1: NaN value"},
		{"array -nan", mtxArrayText(missingM, missingN, x, "-nan"), nil, "m.mtx:6: row 4, column 1: NaN value"},
		{"array NaN", mtxArrayText(missingM, missingN, x, "NaN"), nil, "m.mtx:6: row 4, column 1: NaN value"},
		{"symmetric coordinate", "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n2 1 nan\n3 3 2\n1 1 1\n", []float64{1, missingNaN, 0, missingNaN, 0, 0, 0, 0, 2},
			"m.mtx:3: row 2, column 1: NaN value"},
		{"symmetric array", "%%MatrixMarket matrix array real symmetric\n2 2\n1\nnan\n0\n", []float64{1, missingNaN, missingNaN, 0},
			"m.mtx:4: row 2, column 1: NaN value"},
		{"only NaN", coo + "2 2 1\n2 2 NaN\n", []float64{0, 0, 0, missingNaN}, "m.mtx:3: row 2, column 2: NaN value"},
	}
	for _, tt := range tests {
		w := tt.want
		if w == nil {
			w = want
		}
		for _, gz := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s gz=%v", tt.name, gz), func(t *testing.T) {
				data, name := []byte(tt.text), "m.mtx"
				if gz {
					data, name = gzipBytes(t, data), "m.mtx.gz"
				}
				path := writeTemp(t, name, data)
				_, err := Open(path)
				wantInputError(t, err, name+":", strings.ReplaceAll(tt.off, "m.mtx", name))
				src := openMissing(t, path)
				if !MissingSeen(src) {
					t.Error("MissingSeen false for a MatrixMarket file with NaN, before any Read")
				}
				if n, ok := StoredEntries(src); ok && NaturalLayout(src) == LayoutSparse {
					nz := 0
					for _, v := range w {
						if v != 0 {
							nz++
						}
					}
					if int(n) != nz {
						t.Errorf("StoredEntries = %d, want %d (NaN entries count)", n, nz)
					}
				}
				checkMissingRead(t, src, w)
			})
		}
	}
}

func TestMissingMTXErrors(t *testing.T) {
	const coo = "%%MatrixMarket matrix coordinate real general\n"
	const intCoo = "%%MatrixMarket matrix coordinate integer general\n"
	tests := []struct {
		name, text string
		off, on    string // errors without and with Missing
	}{
		{"integer nan", intCoo + "2 2 1\n1 1 nan\n", `m.mtx:3: bad integer value "nan"`,
			`m.mtx:3: bad integer value "nan" (an integer field cannot hold NaN: declare the field real to mark missing values with nan)`},
		{"integer -NaN", "%%MatrixMarket matrix array integer general\n1 1\n-NaN\n", `m.mtx:3: bad integer value "-NaN"`,
			`bad integer value "-NaN" (an integer field cannot hold NaN`},
		{"integer other", intCoo + "2 2 1\n1 1 x\n", `m.mtx:3: bad integer value "x"`, `m.mtx:3: bad integer value "x"`},
		{"not nan", coo + "2 2 1\n1 1 nana\n", `m.mtx:3: bad value "nana"`, `m.mtx:3: bad value "nana"`},
		{"double sign", coo + "2 2 1\n1 1 --nan\n", `m.mtx:3: bad value "--nan"`, `m.mtx:3: bad value "--nan"`},
		{"pattern has no values", "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1 nan\n", `m.mtx:3: expected "row column"`, `m.mtx:3: expected "row column"`},
		{"inf", coo + "2 2 2\n1 1 nan\n2 1 inf\n", "m.mtx:3: row 1, column 1: NaN value", "m.mtx:4: row 2, column 1: infinite value +Inf (NMF needs finite nonnegative entries)"},
		{"negative", coo + "2 2 2\n1 1 nan\n2 1 -1\n", "m.mtx:3: row 1, column 1: NaN value", "m.mtx:4: row 2, column 1: negative value -1 (NMF needs finite nonnegative entries)"},
		{"duplicate nan", coo + "2 2 2\n1 1 nan\n1 1 nan\n", "m.mtx:3: row 1, column 1: NaN value", "m.mtx:4: duplicate entry (row 1, column 1), first given at line 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeTemp(t, "m.mtx", []byte(tt.text))
			wantInputError(t, openAndRead(path), tt.off)
			_, err := OpenWithOptions(os.Open, path, missingOn)
			wantInputError(t, err, tt.on)
			if err := openAndRead(path); strings.Contains(err.Error(), "(an integer") {
				t.Errorf("the default gives the hint: %v", err)
			}
		})
	}
}

func TestMissingIDX(t *testing.T) {
	x, nanAt := missingX()
	for _, typ := range []byte{0x0D, 0x0E} {
		t.Run(fmt.Sprintf("type %#x", typ), func(t *testing.T) {
			path := writeTemp(t, "m.idx", idxBytes(typ, []uint32{missingN, missingM}, idxEncode(typ, x)))
			wantInputError(t, openAndRead(path), fmt.Sprintf("m.idx: sample %d, feature %d (0-based): NaN value", nanAt[0]/missingM, nanAt[0]%missingM))
			checkMissingRead(t, openMissing(t, path), missingWant(x))
		})
	}
}

func TestMissingStack(t *testing.T) {
	x, _ := missingX()
	want := missingWant(x)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	npy := write("a.npy", npyEncode("<f4", true, missingM, missingN, x))
	coo := write("b.mtx.gz", gzipBytes(t, []byte(mtxCoordText(missingM, missingN, x, "nan"))))
	arr := write("c.mtx", []byte(mtxArrayText(missingM, missingN, x, "NaN")))
	idx := write("d.idx", idxBytes(0x0E, []uint32{missingN, missingM}, idxEncode(0x0E, x)))
	clean := write("e.npy", npyEncode("<f8", false, missingM, 2, fixtureA(1)[:2*missingM]))
	syn := "synthetic:m=4,n=3,k=2,seed=1"
	synSrc, err := Open(syn)
	if err != nil {
		t.Fatal(err)
	}
	synData := denseData(mustRead(t, synSrc, 0, 3, LayoutDense))
	synSrc.Close()
	tests := []struct {
		name  string
		specs []string
		want  []float64
		off   string // the default's error, from OpenAll or Read
	}{
		{"npy + idx", []string{npy, idx}, append(append([]float64(nil), want...), want...), "a.npy: sample 1, feature 2 (0-based): NaN value"},
		{"clean + npy + synthetic", []string{clean, npy, syn}, append(append(fixtureA(1)[:2*missingM:2*missingM], want...), synData...), "a.npy: sample 1, feature 2"},
		{"mtx coordinate + npy", []string{npy, coo}, append(append([]float64(nil), want...), want...), "b.mtx.gz:9: row 2, column 3: NaN value"},
		{"every kind", []string{clean, coo, arr, npy, idx, syn},
			append(append(append(append(append(fixtureA(1)[:2*missingM:2*missingM], want...), want...), want...), want...), synData...),
			"b.mtx.gz:9: row 2, column 3: NaN value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := OpenAll(tt.specs)
			if err == nil {
				_, err = src.Read(0, src.Samples(), LayoutAuto)
				src.Close()
			}
			wantInputError(t, err, tt.off)
			src, err = OpenAllWithOptions(os.Open, tt.specs, missingOn)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			checkMissingRead(t, src, tt.want)
			// Every part got the option: each one's block reads on its own, and Stream agrees.
			for _, layout := range layouts {
				got := streamBlockWith(t, src, 1, src.Samples()-1, layout, 9, 5, 3, &missingOn)
				sameBlock(t, "streamed "+layout.String(), got, mustRead(t, src, 1, src.Samples()-1, layout))
			}
		})
	}
	// Without any NaN, MissingSeen stays false.
	src, err := OpenAllWithOptions(os.Open, []string{clean, syn}, missingOn)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	mustRead(t, src, 0, src.Samples(), LayoutSparse)
	if MissingSeen(src) {
		t.Error("MissingSeen without NaN")
	}
}

// TestMissingBuilder streams sources with NaN through a BlockBuilder built with Missing: the
// block is Read's, bit for bit, in every layout; a builder without refuses the NaN.
func TestMissingBuilder(t *testing.T) {
	x, _ := missingX()
	paths := map[string]string{
		"npy C f8":    writeTemp(t, "c.npy", npyEncode("<f8", false, missingM, missingN, x)),
		"npy F f4":    writeTemp(t, "f.npy", npyEncode(">f4", true, missingM, missingN, x)),
		"idx":         writeTemp(t, "d.idx", idxBytes(0x0E, []uint32{missingN, missingM}, idxEncode(0x0E, x))),
		"mtx array":   writeTemp(t, "a.mtx", []byte(mtxArrayText(missingM, missingN, x, "nan"))),
		"mtx coord":   writeTemp(t, "c.mtx", []byte(mtxCoordText(missingM, missingN, x, "NaN"))),
		"mtx coord 2": writeTemp(t, "c2.mtx", []byte(mtxCoordText(missingM, missingN, x, "-nan"))),
	}
	for name, path := range paths {
		t.Run(name, func(t *testing.T) {
			src := openMissing(t, path)
			for _, layout := range append(layouts, LayoutAutoPath) {
				for _, r := range [][2]int{{0, missingN}, {1, 5}, {3, 4}} {
					for _, maxValues := range []int{1, 7, 100} {
						got := streamBlockWith(t, src, r[0], r[1], layout, maxValues, 3, uint64(maxValues), &missingOn)
						sameBlock(t, fmt.Sprintf("%v [%d, %d) by %d", layout, r[0], r[1], maxValues), got, mustRead(t, src, r[0], r[1], layout))
					}
				}
			}
			// A builder without Missing refuses the first NaN chunk.
			natural := NaturalLayout(src)
			blk := mustRead(t, src, 0, missingN, natural)
			b, err := NewBlockBuilder(missingM, missingN, natural, LayoutAuto)
			if err != nil {
				t.Fatal(err)
			}
			if d, ok := blk.(*kernels.Dense); ok {
				err = b.AddDense(0, d.Data)
			} else {
				c := blk.(*kernels.CSC)
				ptr := make([]int64, len(c.ColPtr))
				for j, p := range c.ColPtr {
					ptr[j] = int64(p)
				}
				err = b.AddSparse(0, ptr, c.RowIdx, c.Val)
			}
			if err == nil || !strings.Contains(err.Error(), "sample 1 of the block, feature 2 (0-based): NaN value (NMF needs finite nonnegative entries)") {
				t.Errorf("a builder without Missing: err = %v", err)
			}
		})
	}
}

func TestMissingBuilderValues(t *testing.T) {
	nan := math.Float64frombits(nan64Bits[1]) // negative: stored as missingNaN
	tests := []struct {
		name string
		add  func(*BlockBuilder) error
		want string // "" for no error
	}{
		{"dense NaN", func(b *BlockBuilder) error { return b.AddDense(0, []float64{1, nan, 0, math.Copysign(0, -1)}) }, ""},
		{"dense infinite", func(b *BlockBuilder) error { return b.AddDense(0, []float64{nan, 1, math.Inf(1), 0}) },
			"sample 1 of the block, feature 0 (0-based): infinite value +Inf (NMF needs finite nonnegative entries)"},
		{"dense negative", func(b *BlockBuilder) error { return b.AddDense(0, []float64{nan, 1, 2, -3}) },
			"sample 1 of the block, feature 1 (0-based): negative value -3 (NMF needs finite nonnegative entries)"},
		{"sparse NaN", func(b *BlockBuilder) error {
			return b.AddSparse(0, []int64{0, 2, 3}, []int32{0, 1, 1}, []float64{1, nan, 0})
		}, ""},
		{"sparse infinite", func(b *BlockBuilder) error {
			return b.AddSparse(0, []int64{0, 1, 2}, []int32{1, 0}, []float64{nan, math.Inf(-1)})
		}, "sample 1 of the block, feature 0 (0-based): infinite value -Inf"},
		{"sparse negative", func(b *BlockBuilder) error {
			return b.AddSparse(0, []int64{0, 1, 2}, []int32{1, 0}, []float64{nan, -1})
		}, "sample 1 of the block, feature 0 (0-based): negative value -1"},
	}
	for _, tt := range tests {
		for _, layout := range layouts {
			t.Run(tt.name+" "+layout.String(), func(t *testing.T) {
				natural := LayoutDense
				if strings.HasPrefix(tt.name, "sparse") {
					natural = LayoutSparse
				}
				b, err := NewBlockBuilderWithOptions(2, 2, natural, layout, missingOn)
				if err != nil {
					t.Fatal(err)
				}
				err = tt.add(b)
				if tt.want != "" {
					if err == nil || !strings.Contains(err.Error(), tt.want) {
						t.Fatalf("err = %v, want %q", err, tt.want)
					}
					if b.Received() != 0 {
						t.Fatalf("a failed chunk was received")
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				got, err := b.Block()
				if err != nil {
					t.Fatal(err)
				}
				want := Shape(&kernels.Dense{Rows: 2, Cols: 2, Data: []float64{1, missingNaN, 0, 0}}, layout)
				sameBlock(t, "block", got, want)
			})
		}
	}
	if _, err := NewBlockBuilderWithOptions(-1, 2, LayoutDense, LayoutAuto, missingOn); err == nil ||
		!strings.Contains(err.Error(), "matio: NewBlockBuilderWithOptions: negative size") {
		t.Errorf("NewBlockBuilderWithOptions(-1, ...): %v", err)
	}
}

// TestMissingStorage checks what kernels does with the NaNs matio reads: narrowing to float32
// (auto and float32 storage) keeps them NaN at their places, dense and CSC, and ToCSC of a
// dense block, float64 or float32, stores them.
func TestMissingStorage(t *testing.T) {
	x, nanAt := missingX()
	src := openMissing(t, writeTemp(t, "m.npy", npyEncode("<f4", false, missingM, missingN, x)))
	for _, layout := range []Layout{LayoutDense, LayoutSparse} {
		for _, storage := range []kernels.Storage{kernels.StorageAuto, kernels.StorageFloat32} {
			b, err := kernels.ApplyStorage(mustRead(t, src, 0, missingN, layout), storage)
			if err != nil {
				t.Fatalf("%v %v: %v", layout, storage, err)
			}
			if !kernels.IsNarrow(b) {
				t.Errorf("%v %v: NaN kept the block from float32 storage", layout, storage)
			}
			d := kernels.ToDense(b).Data
			for p, v := range d {
				if math.IsNaN(v) != math.IsNaN(x[p]) || !math.IsNaN(v) && v != x[p] {
					t.Errorf("%v %v: entry %d is %v, want %v", layout, storage, p, v, x[p])
				}
			}
			if c := kernels.ToCSC(b); c.NNZ() != kernels.ToCSC(mustRead(t, src, 0, missingN, LayoutDense)).NNZ() {
				t.Errorf("%v %v: ToCSC of the narrow block stores %d entries", layout, storage, c.NNZ())
			}
		}
	}
	c := kernels.ToCSC(mustRead(t, src, 0, missingN, LayoutDense))
	for _, p := range nanAt {
		j, i := p/missingM, int32(p%missingM)
		found := false
		for q := c.ColPtr[j]; q < c.ColPtr[j+1]; q++ {
			found = found || c.RowIdx[q] == i && math.IsNaN(c.Val[q])
		}
		if !found {
			t.Errorf("ToCSC dropped the NaN at sample %d, feature %d", j, i)
		}
	}
}

func TestOpenWithOptionsNilOpener(t *testing.T) {
	if _, err := OpenWithOptions(nil, "x.npy", missingOn); err == nil || !strings.Contains(err.Error(), "nil Opener") {
		t.Errorf("OpenWithOptions(nil): %v", err)
	}
	if _, err := OpenAllWithOptions(nil, []string{"x.npy"}, missingOn); err == nil || !strings.Contains(err.Error(), "nil Opener") {
		t.Errorf("OpenAllWithOptions(nil): %v", err)
	}
	if _, err := OpenAllWithOptions(os.Open, nil, missingOn); err == nil {
		t.Error("OpenAllWithOptions of no spec succeeded")
	}
	// Synthetic data takes the option and holds no NaN.
	src, err := OpenWithOptions(os.Open, "synthetic:m=3,n=4,k=2,seed=1", missingOn)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	mustRead(t, src, 0, 4, LayoutAuto)
	if MissingSeen(src) {
		t.Error("MissingSeen for synthetic data")
	}
}
