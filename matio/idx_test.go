package matio

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// idxBytes builds an IDX file.
func idxBytes(typ byte, dims []uint32, data []byte) []byte {
	b := []byte{0, 0, typ, byte(len(dims))}
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, d)
	}
	return append(b, data...)
}

// idxEncode encodes values big-endian in IDX type typ.
func idxEncode(typ byte, vals []float64) []byte {
	var b []byte
	for _, v := range vals {
		switch typ {
		case 0x08, 0x09:
			b = append(b, byte(int8(v)))
		case 0x0B:
			b = binary.BigEndian.AppendUint16(b, uint16(int16(v)))
		case 0x0C:
			b = binary.BigEndian.AppendUint32(b, uint32(int32(v)))
		case 0x0D:
			b = binary.BigEndian.AppendUint32(b, math.Float32bits(float32(v)))
		case 0x0E:
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(v))
		}
	}
	return b
}

func TestIDX(t *testing.T) {
	ints, floats := fixtureA(1), fixtureA(0.25)
	images := []uint32{fixN, 1, fixM} // 7 images of 1 x 5 pixels
	tests := []struct {
		name string
		typ  byte
		dims []uint32
		want []float64
	}{
		{"u8.idx", 0x08, images, ints},
		{"i8-idx3-ubyte", 0x09, images, ints},
		{"i16.idx", 0x0B, []uint32{fixN, fixM}, ints},
		{"i32.idx.gz", 0x0C, images, ints},
		{"f32.idx", 0x0D, images, floats},
		{"f64-idx3-ubyte.gz", 0x0E, images, floats},
		{"anyname.bin", 0x08, images, ints},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := idxBytes(tt.typ, tt.dims, idxEncode(tt.typ, tt.want))
			if filepath.Ext(tt.name) == ".gz" {
				data = gzipBytes(t, data)
			}
			src, err := Open(writeTemp(t, tt.name, data))
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			n, m := fixN, fixM
			if h, w, ok := ImageShape(src); ok != (len(tt.dims) == 3) || ok && (h != 1 || w != fixM) {
				t.Errorf("ImageShape = %d, %d, %v; want 1, %d for a 3-D file", h, w, ok, fixM)
			}
			if src.Samples() != n || src.Features() != m {
				t.Fatalf("opened as %d x %d, want %d x %d", src.Samples(), src.Features(), n, m)
			}
			for _, layout := range layouts {
				if got := denseData(mustRead(t, src, 0, n, layout)); !sameData(got, tt.want) {
					t.Errorf("layout %v: got %v", layout, got)
				}
			}
			checkRanges(t, src)
		})
	}
}

func TestIDXBadInput(t *testing.T) {
	neg := fixtureA(1)
	neg[2*fixM+4] = -3
	nan := fixtureA(1)
	nan[6*fixM+1] = math.NaN()
	good := idxBytes(0x08, []uint32{fixN, fixM}, idxEncode(0x08, fixtureA(1)))
	tiny := idxBytes(0x08, []uint32{1000000, 1000000}, nil)
	tests := []struct {
		name string
		data []byte
		want []string
	}{
		{"neg.idx", idxBytes(0x09, []uint32{fixN, fixM}, idxEncode(0x09, neg)), []string{"neg.idx: sample 2, feature 4 (0-based): negative value -3"}},
		{"nan.idx", idxBytes(0x0D, []uint32{fixN, fixM}, idxEncode(0x0D, nan)), []string{"nan.idx: sample 6, feature 1 (0-based): NaN"}},
		{"short.idx", good[:len(good)-1], []string{"short.idx: truncated: header says 7 x 5 uint8 (35 bytes of data) but the file has 34"}},
		{"long.idx", append(append([]byte(nil), good...), 9), []string{"long.idx: 1 unexpected bytes after the data: header says 7 x 5 uint8 (35 bytes of data) but the file has 36"}},
		{"short.idx.gz", gzipBytes(t, good[:len(good)-1]), []string{"short.idx.gz: truncated: header says 7 x 5 uint8 (35 bytes of data) but the decompressed file has 34"}},
		{"tiny-idx2-ubyte.gz", gzipBytes(t, tiny), []string{"tiny-idx2-ubyte.gz: truncated: header says 1000000 x 1000000 uint8", "cannot hold"}},
		{"tiny.idx", tiny, []string{"tiny.idx: truncated: header says 1000000 x 1000000 uint8 (1000000000000 bytes of data) but the file has 0"}},
		{"type.idx", idxBytes(0x07, []uint32{1}, []byte{1}), []string{"type.idx: unsupported IDX data type 0x07"}},
		{"magic.idx", []byte{1, 2, 3, 4, 5}, []string{"magic.idx: not an IDX file (magic bytes 01 02 03 04"}},
		{"ndims.idx", []byte{0, 0, 8, 0}, []string{"ndims.idx: IDX header has 0 dimensions"}},
		{"header.idx", []byte{0, 0, 8, 3, 0, 0}, []string{"header.idx: truncated IDX header"}},
		{"zero.idx", idxBytes(0x08, []uint32{0, 28, 28}, nil), []string{"zero.idx: empty matrix: shape 0 x 28 x 28"}},
		{"wide.idx", idxBytes(0x08, []uint32{1, 65536, 65536}, nil), []string{"more than 2147483647 features"}},
		// A vector (MNIST's labels file) is not a matrix: refused like a 1-D .npy, with the
		// images file suggested when the name follows the distribution's.
		{"train-labels-idx1-ubyte", idxBytes(0x08, []uint32{3}, []byte{1, 2, 3}), []string{"1-D IDX file of 3 values", "train-images-idx3-ubyte"}},
		{"vector.idx", idxBytes(0x08, []uint32{3}, []byte{1, 2, 3}), []string{"1-D IDX file of 3 values", "give an images file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantInputError(t, openAndRead(writeTemp(t, tt.name, tt.data)), tt.want...)
		})
	}
}

func TestFashionMNIST(t *testing.T) {
	const dir = "/usr/share/datasets/fashion-mnist"
	for _, f := range []struct {
		name string
		n, m int
	}{
		{"train-images-idx3-ubyte.gz", 60000, 784},
		{"t10k-images-idx3-ubyte.gz", 10000, 784},
	} {
		path := filepath.Join(dir, f.name)
		if _, err := os.Stat(path); err != nil {
			t.Skipf("%s not present", path)
		}
		src, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if src.Samples() != f.n || src.Features() != f.m {
			t.Fatalf("%s: %d x %d, want %d x %d", f.name, src.Samples(), src.Features(), f.n, f.m)
		}
		b := mustRead(t, src, 0, f.n, LayoutAuto)
		d := denseData(b)
		maxv := 0.0
		for _, v := range d {
			maxv = max(maxv, v)
		}
		if want := 255.0; maxv != want {
			t.Errorf("%s: max %v, want %v", f.name, maxv, want)
		}
		part := denseData(mustRead(t, src, 1234, 2345, LayoutSparse))
		if !sameData(part, d[1234*f.m:2345*f.m]) {
			t.Errorf("%s: Read(1234, 2345) differs from the full read", f.name)
		}
		src.Close()
	}
}

// TestPeekImageShape: the image shape from the headers alone agrees with the opened files',
// and is refused for anything else (a 2-D IDX file, a .npy, a missing file, disagreeing
// shapes).
func TestPeekImageShape(t *testing.T) {
	img := writeTemp(t, "a-idx3-ubyte.gz", gzipBytes(t, idxBytes(0x08, []uint32{2, 3, 4}, make([]byte, 24))))
	img2 := writeTemp(t, "b.idx", idxBytes(0x08, []uint32{1, 3, 4}, make([]byte, 12)))
	other := writeTemp(t, "c.idx", idxBytes(0x08, []uint32{1, 4, 3}, make([]byte, 12)))
	flat := writeTemp(t, "d.idx", idxBytes(0x08, []uint32{2, 12}, make([]byte, 24)))
	tests := []struct {
		specs []string
		h, w  int
		ok    bool
	}{
		{[]string{img}, 3, 4, true},
		{[]string{img, img2}, 3, 4, true},
		{[]string{img, other}, 0, 0, false},
		{[]string{flat}, 0, 0, false},
		{[]string{filepath.Join(t.TempDir(), "missing.idx")}, 0, 0, false},
		{[]string{"synthetic:m=5,n=10,k=2,seed=1"}, 0, 0, false},
		{nil, 0, 0, false},
	}
	for _, tt := range tests {
		h, w, ok := PeekImageShape(tt.specs)
		if h != tt.h || w != tt.w || ok != tt.ok {
			t.Errorf("PeekImageShape(%v) = %d, %d, %v; want %d, %d, %v", tt.specs, h, w, ok, tt.h, tt.w, tt.ok)
		}
		if !tt.ok || len(tt.specs) == 0 {
			continue
		}
		src, err := OpenAll(tt.specs)
		if err != nil {
			t.Fatal(err)
		}
		if oh, ow, ook := ImageShape(src); oh != h || ow != w || !ook {
			t.Errorf("ImageShape of the opened %v = %d, %d, %v; the headers say %d, %d", tt.specs, oh, ow, ook, h, w)
		}
		src.Close()
	}
}
