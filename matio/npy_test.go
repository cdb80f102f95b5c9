package matio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/usererr"
)

func TestNPYFixtures(t *testing.T) {
	ints, floats, bools := fixtureA(1), fixtureA(0.25), fixtureBool()
	tests := []struct {
		file string
		want []float64
	}{
		{"c_f8.npy", floats},
		{"f_f8.npy", floats},
		{"c_f4_be.npy", floats},
		{"f_f4.npy", floats},
		{"f_f8_be.npy", floats},
		{"c_i4.npy", ints},
		{"f_i2_be.npy", ints},
		{"c_i1.npy", ints},
		{"c_u1.npy", ints},
		{"f_u1.npy", ints},
		{"c_u2.npy", ints},
		{"c_u4_be.npy", ints},
		{"c_i8_be.npy", ints},
		{"c_u8.npy", ints},
		{"c_b1.npy", bools},
		{"v2_f8.npy", floats},
		{"v3_f8.npy", floats},
		{"c_f8.npy.gz", floats},
		{"f_i2_be.npy.gz", ints},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", tt.file)
			src, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if src.Samples() != fixN || src.Features() != fixM || src.Name() != path {
				t.Fatalf("got %s %d x %d, want %s %d x %d", src.Name(), src.Samples(), src.Features(), path, fixN, fixM)
			}
			for _, layout := range layouts {
				if got := denseData(mustRead(t, src, 0, fixN, layout)); !sameData(got, tt.want) {
					t.Errorf("layout %v: got %v, want %v", layout, got, tt.want)
				}
			}
			checkRanges(t, src)
			rows, cols, data, err := ReadNPYMatrix(path)
			if err != nil {
				t.Fatal(err)
			}
			if rows != fixN || cols != fixM || !sameData(data, tt.want) {
				t.Errorf("ReadNPYMatrix: got %d x %d %v", rows, cols, data)
			}
		})
	}
}

// testMatrix returns a rows x cols row-major matrix with some zeros and varied values.
func testMatrix(rows, cols int) []float64 {
	data := make([]float64, rows*cols)
	for p := range data {
		if p%3 != 1 {
			data[p] = float64(p%17) * 1.0625 / float64(1+p%5)
		}
	}
	return data
}

func TestWriteNPYRoundTrip(t *testing.T) {
	for _, shape := range [][2]int{{1, 1}, {3, 4}, {4, 3}, {200, 7}, {1, 1000}, {70000, 3}} {
		rows, cols := shape[0], shape[1]
		data := testMatrix(rows, cols)
		var buf bytes.Buffer
		if err := WriteNPY(&buf, rows, cols, data); err != nil {
			t.Fatal(err)
		}
		raw := buf.Bytes()
		hlen := int(binary.LittleEndian.Uint16(raw[8:10]))
		if string(raw[:8]) != "\x93NUMPY\x01\x00" || (10+hlen)%64 != 0 || raw[10+hlen-1] != '\n' {
			t.Fatalf("%v: bad header %q", shape, raw[:10+hlen])
		}
		if len(raw) != 10+hlen+8*rows*cols {
			t.Fatalf("%v: file has %d bytes", shape, len(raw))
		}
		path := writeTemp(t, "m.npy", raw)
		src, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if src.Samples() != rows || src.Features() != cols {
			t.Fatalf("%v: opened as %d x %d", shape, src.Samples(), src.Features())
		}
		if got := denseData(mustRead(t, src, 0, rows, LayoutDense)); !sameData(got, data) {
			t.Errorf("%v: Read differs from what was written", shape)
		}
		checkRanges(t, src)
		src.Close()
		r, c, got, err := ReadNPYMatrix(path)
		if err != nil || r != rows || c != cols || !sameData(got, data) {
			t.Errorf("%v: ReadNPYMatrix gave %d x %d, %v", shape, r, c, err)
		}
	}
}

func TestWriteNPYErrors(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteNPY(&buf, 2, 3, make([]float64, 5)); err == nil {
		t.Error("WriteNPY accepted 5 values for 2 x 3")
	}
	if err := WriteNPY(&buf, -1, 3, nil); err == nil {
		t.Error("WriteNPY accepted a negative shape")
	}
}

// npyBytes builds a .npy file from a header dict and data bytes (version 1.0).
func npyBytes(dict string, data []byte) []byte {
	h := dict + strings.Repeat(" ", 63-(10+len(dict)+63)%64) + "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), byte(len(h)>>8))
	return append(append(b, h...), data...)
}

func onesNPY(t *testing.T, rows, cols int) []byte {
	var buf bytes.Buffer
	data := make([]float64, rows*cols)
	for i := range data {
		data[i] = 1
	}
	if err := WriteNPY(&buf, rows, cols, data); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestNPYBadInput(t *testing.T) {
	ones := onesNPY(t, 1000, 5)
	var mixed bytes.Buffer
	if err := WriteNPY(&mixed, 1000, 5, testMatrix(1000, 5)); err != nil {
		t.Fatal(err)
	}
	cutGzip := gzipBytes(t, mixed.Bytes())
	cutGzip = cutGzip[:len(cutGzip)/2]
	huge := npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000, 1000000), }", nil)
	tests := []struct {
		name string
		file string // fixture in testdata, or
		data []byte // bytes written to a temp file called name
		want []string
	}{
		{name: "missing.npy", want: []string{"missing.npy: cannot open: no such file or directory"}},
		{file: "bad_1d.npy", want: []string{"bad_1d.npy: expected a 2-D array (samples x features), got shape (100,)"}},
		{file: "bad_3d.npy", want: []string{"got shape (2, 3, 4)"}},
		{file: "bad_empty.npy", want: []string{"bad_empty.npy: empty matrix: shape (0, 5)"}},
		{file: "bad_c16.npy", want: []string{"bad_c16.npy: unsupported dtype '<c16' (complex); supported: float64, float32, integers"}},
		{file: "bad_f2.npy", want: []string{"unsupported dtype '<f2' (float16)"}},
		{file: "bad_str.npy", want: []string{"unsupported dtype '<U3' (string)"}},
		{file: "bad_struct.npy", want: []string{"unsupported dtype [('x', '<f8'), ('y', '<i4')] (structured)"}},
		{file: "bad_object.npy", want: []string{"unsupported dtype '|O' (object)"}},
		{file: "bad_neg.npy", want: []string{"bad_neg.npy: sample 12, feature 3 (0-based): negative value -0.5 (NMF needs finite nonnegative entries)"}},
		{file: "bad_neg_f.npy", want: []string{"bad_neg_f.npy: sample 12, feature 3 (0-based): negative value -0.5"}},
		{file: "bad_nan.npy", want: []string{"bad_nan.npy: sample 2, feature 1 (0-based): NaN"}},
		{file: "bad_inf.npy", want: []string{"bad_inf.npy: sample 3, feature 2 (0-based): infinite value +Inf"}},
		{file: "bad_negint.npy", want: []string{"sample 1, feature 2 (0-based): negative value -7"}},
		{name: "short.npy", data: ones[:len(ones)-8],
			want: []string{"short.npy: truncated: header says 1000 x 5 float64 (40000 bytes of data) but the file has 39992"}},
		{name: "long.npy", data: append(append([]byte(nil), ones...), 1, 2, 3),
			want: []string{"long.npy: 3 unexpected bytes after the data: header says 1000 x 5 float64 (40000 bytes of data) but the file has 40003"}},
		{name: "huge.npy", data: huge, want: []string{"huge.npy: truncated: header says 1000000 x 1000000 float64 (8000000000000 bytes of data) but the file has 0"}},
		{name: "huge.npy.gz", data: gzipBytes(t, huge), want: []string{"huge.npy.gz: truncated: header says 1000000 x 1000000 float64", "cannot hold"}},
		{name: "shortgz.npy.gz", data: gzipBytes(t, ones[:len(ones)-8]), want: []string{"shortgz.npy.gz: truncated: header says 1000 x 5 float64 (40000 bytes of data) but the decompressed file has 39992"}},
		{name: "longgz.npy.gz", data: gzipBytes(t, append(append([]byte(nil), ones...), 0)), want: []string{"longgz.npy.gz: unexpected bytes after the data"}},
		{name: "cutgz.npy.gz", data: cutGzip, want: []string{"cutgz.npy.gz: read error: unexpected EOF"}},
		{name: "magic.npy", data: []byte("PK\x03\x04 not numpy at all"), want: []string{"magic.npy: not a .npy file"}},
		{name: "tiny.npy", data: []byte("\x93NUM"), want: []string{"tiny.npy: truncated .npy header"}},
		{name: "version.npy", data: []byte("\x93NUMPY\x04\x00\x10\x00{}"), want: []string{"version.npy: unsupported .npy format version 4.0"}},
		{name: "hlen.npy", data: []byte("\x93NUMPY\x02\x00\xff\xff\xff\xff{}"), want: []string{"hlen.npy: truncated: the header is 4294967307 bytes but the file has 14"}},
		{name: "dict.npy", data: npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2)", make([]byte, 32)), want: []string{"dict.npy: bad header", "unexpected end, expected '}'"}},
		{name: "noshape.npy", data: npyBytes("{'descr': '<f8', 'fortran_order': False}", nil), want: []string{"'shape' missing"}},
		{name: "order.npy", data: npyBytes("{'descr': '<f8', 'fortran_order': 0, 'shape': (1, 1)}", make([]byte, 8)), want: []string{"'fortran_order' missing or not True/False"}},
		{name: "negshape.npy", data: npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (-1, 2)}", nil), want: []string{"bad shape (-1, 2)"}},
		{name: "bigshape.npy", data: npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999, 2)}", nil), want: []string{"bad shape"}},
		{name: "overflow.npy", data: npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4000000000, 2000000000)}", nil), want: []string{"is too large"}},
		{name: "empty.npy", data: nil, want: []string{"empty.npy: empty file"}},
		{name: "deep.npy", data: npyBytes(strings.Repeat("(", 100), nil), want: []string{"nested too deeply"}},
	}
	for _, tt := range tests {
		name := tt.name
		if name == "" {
			name = tt.file
		}
		t.Run(name, func(t *testing.T) {
			var path string
			switch {
			case tt.file != "":
				path = filepath.Join("testdata", tt.file)
			case tt.data != nil || name == "empty.npy":
				path = writeTemp(t, name, tt.data)
			default:
				path = filepath.Join(t.TempDir(), name)
			}
			wantInputError(t, openAndRead(path), tt.want...)
		})
	}
}

func TestNPYErrorDetails(t *testing.T) {
	// A missing file also wraps the fs error.
	_, err := Open(filepath.Join(t.TempDir(), "none.npy"))
	if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, usererr.ErrUser) {
		t.Errorf("missing file: %v does not wrap fs.ErrNotExist and usererr.ErrUser", err)
	}
	// Only the range holding the bad entry fails.
	src, err := Open("testdata/bad_neg.npy")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Read(0, 12, LayoutAuto); err != nil {
		t.Errorf("Read(0, 12): %v", err)
	}
	_, err = src.Read(10, 14, LayoutAuto)
	wantInputError(t, err, "sample 12, feature 3 (0-based)")
	// ReadNPYMatrix speaks of rows and columns.
	_, _, _, err = ReadNPYMatrix("testdata/bad_neg.npy")
	wantInputError(t, err, "testdata/bad_neg.npy: row 12, column 3 (0-based): negative value -0.5")
	_, _, _, err = ReadNPYMatrix("testdata/coo.mtx")
	wantInputError(t, err, "testdata/coo.mtx: not a .npy file")
	// Read outside the range is an error, but not about the input.
	if _, err := src.Read(3, 21, LayoutAuto); err == nil || errors.Is(err, usererr.ErrUser) {
		t.Errorf("Read(3, 21) of 20 samples: %v", err)
	}
	if _, err := src.Read(0, 1, Layout(7)); err == nil {
		t.Errorf("Read with a bad layout succeeded")
	}
}

func TestNPYHeaderVariants(t *testing.T) {
	data := make([]byte, 16)
	binary.BigEndian.PutUint64(data, math.Float64bits(1.5))
	binary.BigEndian.PutUint64(data[8:], math.Float64bits(2))
	for _, dict := range []string{
		`{'descr': '>f8', 'fortran_order': False, 'shape': (1, 2), }`,
		`{"shape":(1,2),"fortran_order":False,"descr":">f8"}`,
		`{'descr': '>f8', 'fortran_order': True, 'shape': (1L, 2L)}`,
		`{'descr': u'>f8', 'fortran_order': False, 'shape': (1, 2), 'extra': [1, (2, 'x')]}`,
		"{ 'descr' : '>f8' ,\n 'fortran_order' : False , 'shape' : ( 1 , 2 , ) , }",
	} {
		path := writeTemp(t, "v.npy", npyBytes(dict, data))
		src, err := Open(path)
		if err != nil {
			t.Errorf("%s: %v", dict, err)
			continue
		}
		got := denseData(mustRead(t, src, 0, 1, LayoutDense))
		if !sameData(got, []float64{1.5, 2}) {
			t.Errorf("%s: got %v", dict, got)
		}
		src.Close()
	}
}

func TestNPYLargeFortranChunks(t *testing.T) {
	// More than one buffer per feature column: 300000 samples x 2 features, Fortran order.
	n := 300000
	data := make([]byte, 8*2*n)
	for f := 0; f < 2; f++ {
		for j := 0; j < n; j++ {
			binary.LittleEndian.PutUint64(data[8*(f*n+j):], math.Float64bits(float64(j%1000+f)))
		}
	}
	path := writeTemp(t, "big.npy", npyBytes("{'descr': '<f8', 'fortran_order': True, 'shape': (300000, 2), }", data))
	src, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	d := denseData(mustRead(t, src, 1, n, LayoutDense))
	for j := 1; j < n; j++ {
		if d[2*(j-1)] != float64(j%1000) || d[2*(j-1)+1] != float64(j%1000+1) {
			t.Fatalf("sample %d: got %v %v", j, d[2*(j-1)], d[2*(j-1)+1])
		}
	}
}

func TestNPYReadAfterClose(t *testing.T) {
	src, err := Open("testdata/c_f8.npy")
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = src.Read(0, 1, LayoutAuto)
	wantInputError(t, err, "testdata/c_f8.npy: read error")
	if _, err := os.Stat("testdata/c_f8.npy"); err != nil {
		t.Fatal(err)
	}
}
