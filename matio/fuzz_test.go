package matio

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/didnmf/didnmf/kernels"

	"github.com/didnmf/didnmf/usererr"
)

// The fuzz targets feed arbitrary bytes through Open and Read, plain and gzip-compressed. They
// must never panic; errors must wrap usererr.ErrUser and start with the path; blocks must have the
// claimed dims, be valid CSC when sparse, hold only finite nonnegative values, and agree
// across layouts and ranges; a file and its gzip-compressed copy must read the same; and
// opening must allocate in proportion to the bytes that are there, never to what a header
// claims. Every file is also opened with ReadOptions Missing, which must accept whatever the
// default accepts, read it the same, and differ only by taking NaN entries (held as NaN, seen
// by MissingSeen) where the default fails. Their committed corpora, in testdata/fuzz, run as
// regression inputs in plain go test.

// maxFuzzEntries bounds how much a fuzz target reads, since a header may legally claim a huge
// matrix.
const maxFuzzEntries = 1 << 18

// openAllocBound is the most Open may allocate for n bytes of input (the file, decompressed).
// The proportional part covers the worst legitimate cases: a .npy header's Python literal
// (about 100 bytes of parsed values per 2 bytes of "1,"), a symmetric pattern .mtx (2 entries
// of 24 bytes per 4-byte line, with slice growth); the constant part, the buffers of the
// readers (gzip's window, two 64 KiB bufio buffers, the line scanner's, the first 64 KiB of a
// decompressed body). A header announcing more than that, say a megabyte of .npy header in a
// gzip of a dozen bytes, must fail before allocating it.
func openAllocBound(n int) uint64 { return 256*uint64(n) + 512<<10 }

// openMeasured opens spec and returns the bytes Open allocated.
func openMeasured(spec string) (Source, error, uint64) {
	return openMeasuredWith(spec, ReadOptions{})
}

// openMeasuredWith is openMeasured opening with opts.
func openMeasuredWith(spec string, opts ReadOptions) (Source, error, uint64) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	src, err := OpenWithOptions(os.Open, spec, opts)
	runtime.ReadMemStats(&after)
	return src, err, after.TotalAlloc - before.TotalAlloc
}

func addSeeds(f *testing.F, files ...string) {
	for _, name := range files {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// noise returns n reproducible bytes that do not compress.
func noise(n int) []byte {
	b := make([]byte, n)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x >> 32)
	}
	return b
}

// npyV3 returns a version 3.0 .npy file with the given header text, as is (no padding).
func npyV3(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint32([]byte("\x93NUMPY\x03\x00"), uint32(len(header)))
	return append(append(b, header...), data...)
}

func FuzzNPY(f *testing.F) {
	addSeeds(f, "c_f8.npy", "f_i2_be.npy", "c_b1.npy", "v3_f8.npy", "bad_neg.npy", "bad_1d.npy", "bad_struct.npy")
	f.Add(npyBytes("{'descr': '>f4', 'fortran_order': True, 'shape': (2, 1), }", []byte{0x3f, 0x80, 0, 0, 0, 0, 0, 0}))
	f.Add(npyBytes("{'descr': '|u1', 'fortran_order': False, 'shape': (3, 2), }", []byte{0, 1, 0, 0, 2, 0}))
	// A header announcing 4 GiB - 1 of header text, and one of a megabyte, with none of it there.
	// NaN (missing values with Missing): quiet, negative and signalling, then an infinity.
	f.Add(npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }",
		[]byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0xf8, 0xff, 1, 0, 0, 0, 0, 0, 0xf0, 0x7f}))
	f.Add(npyBytes("{'descr': '>f4', 'fortran_order': True, 'shape': (2, 2), }", []byte{0x7f, 0xc0, 0, 0, 0, 0, 0, 0, 0xff, 0xc0, 0, 0, 0x7f, 0x80, 0, 0}))
	f.Add([]byte("\x93NUMPY\x02\x00\xff\xff\xff\xff{}"))
	f.Add([]byte("\x93NUMPY\x03\x00\x00\x00\x10\x00{"))
	// A shape with thousands of dimensions: its message must cost time linear in nothing.
	f.Add(npyV3("{'descr': '<f8', 'fortran_order': False, 'shape': ("+strings.Repeat("1,", 3000)+"), }", nil))
	f.Add(npyV3("{'descr': '<f8', 'fortran_order': False, 'shape': ("+strings.Repeat("1,", 3000)+"-1), }", nil))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, gz := fuzzFile(t, dir, "x.npy", data)
		for i, path := range []string{raw.path, gz.path} {
			rows, cols, d, err := ReadNPYMatrix(path)
			if err != nil {
				if !errors.Is(err, usererr.ErrUser) {
					t.Fatalf("ReadNPYMatrix error %q does not wrap usererr.ErrUser", err)
				}
				if r := []fuzzResult{raw, gz}[i]; r.all {
					t.Fatalf("ReadNPYMatrix fails (%v) but Read of every sample succeeded", err)
				}
				continue
			}
			for _, v := range d {
				if !(v >= 0) || math.IsInf(v, 0) {
					t.Fatalf("ReadNPYMatrix returned %v", v)
				}
			}
			r := []fuzzResult{raw, gz}[i]
			if r.openErr != nil || rows != r.n || cols != r.m {
				t.Fatalf("ReadNPYMatrix reads a %d x %d matrix, Open %d x %d (%v)", rows, cols, r.n, r.m, r.openErr)
			}
			if r.readErr == nil && !sameData(d[:len(r.data)], r.data) {
				t.Fatalf("ReadNPYMatrix and Read disagree")
			}
		}
	})
}

func FuzzMTX(f *testing.F) {
	addSeeds(f, "coo.mtx", "array.mtx", "sym.mtx", "sym_array.mtx", "pattern.mtx", "int.mtx")
	f.Add([]byte("%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n1 2 5\n2 1 1\n"))
	f.Add([]byte("%%MatrixMarket matrix array real general\n2 2\n1 2\n3\n-4\n"))
	// NaN values (missing with Missing), in the spellings a file may use, and where they cannot be.
	f.Add([]byte("%%MatrixMarket matrix coordinate real general\n3 2 4\n1 1 nan\n2 2 NaN\n3 1 -nan\n3 2 0\n"))
	f.Add([]byte("%%MatrixMarket matrix array real general\n2 2\nNAN\n+nan\n1\ninf\n"))
	f.Add([]byte("%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n2 1 nan\n3 3 1\n"))
	f.Add([]byte("%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 nan\n"))
	// Size lines claiming billions of entries or values, with one there.
	f.Add([]byte("%%MatrixMarket matrix coordinate real general\n2000000000 2000000000 2000000000\n1 2 5\n"))
	f.Add([]byte("%%MatrixMarket matrix array real general\n2000000000 2000000000\n1\n"))
	f.Add([]byte("%%MatrixMarket matrix coordinate pattern general\n2147483647 2147483647 0\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzFile(t, dir, "x.mtx", data)
	})
}

func FuzzIDX(f *testing.F) {
	f.Add(idxBytes(0x08, []uint32{3, 2, 2}, make([]byte, 12)))
	f.Add(idxBytes(0x0D, []uint32{2, 1}, idxEncode(0x0D, []float64{1, -1})))
	f.Add(idxBytes(0x0E, []uint32{2}, idxEncode(0x0E, []float64{0.5, 2})))
	f.Add(idxBytes(0x0E, []uint32{3, 1}, idxEncode(0x0E, []float64{math.NaN(), 2, math.Copysign(math.NaN(), -1)})))
	f.Add(idxBytes(0x0D, []uint32{2, 2}, idxEncode(0x0D, []float64{1, math.NaN(), 0, math.Inf(1)})))
	f.Add(idxBytes(0x0B, []uint32{1, 3}, idxEncode(0x0B, []float64{1, 0, 300})))
	f.Add(idxBytes(0x0C, []uint32{1 << 31, 1 << 31}, nil))
	f.Add(idxBytes(0x0E, []uint32{1 << 20, 1 << 10}, make([]byte, 16)))
	// A megabyte claimed, a kilobyte there: compressed, enough to pass the inflation bound.
	f.Add(idxBytes(0x08, []uint32{1 << 10, 1 << 10}, noise(1000)))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzFile(t, dir, "x.idx", data)
	})
}

// FuzzGzip fuzzes the gzip layer under every format: data is compressed, then damaged as op
// says, and opened under a name chosen by kind (by extension, by MNIST name, or with none, so
// that the format is sniffed). op 0: intact, so it must read exactly like the uncompressed
// file; op 1: cut short, which must fail (the gzip trailer's CRC and length are always read);
// op 2: split into two gzip members at a byte chosen by at, which must read like one; op 3:
// followed by garbage, which must fail. Opening must never allocate more than
// openAllocBound of the bytes there are.
func FuzzGzip(f *testing.F) {
	for kind, name := range []string{"c_f8.npy", "coo.mtx", "", "f_i2_be.npy", ""} {
		data := idxBytes(0x08, []uint32{3, 2, 2}, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
		if name != "" {
			var err error
			if data, err = os.ReadFile(filepath.Join("testdata", name)); err != nil {
				f.Fatal(err)
			}
		}
		for op := range 4 {
			f.Add(data, uint8(kind), uint8(op), uint16(17*op+len(data)/3))
		}
	}
	f.Add([]byte("\x93NUMPY\x03\x00\x00\x00\x10\x00{"), uint8(0), uint8(0), uint16(0))
	f.Add(npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (100000, 1000), }", nil), uint8(3), uint8(3), uint16(4000))
	f.Add(idxBytes(0x0E, []uint32{1 << 20, 1 << 10}, nil), uint8(2), uint8(3), uint16(0xffff))
	f.Add([]byte("%%MatrixMarket matrix coordinate real general\n9 9 81\n1 1 1\n"), uint8(3), uint8(2), uint16(50))
	f.Add([]byte("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 nan\n2 1 3\n"), uint8(1), uint8(0), uint16(0))
	f.Add(npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }", []byte{0, 0, 0xc0, 0x7f, 0, 0, 0x80, 0x3f}), uint8(3), uint8(2), uint16(20))
	dir := f.TempDir()
	names := []string{"x.npy", "x.mtx", "x.idx", "x", "train-images-idx3-ubyte"}
	f.Fuzz(func(t *testing.T, data []byte, kind, op uint8, at uint16) {
		name := names[int(kind)%len(names)]
		if op%4 == 0 {
			fuzzFile(t, dir, name, data)
			return
		}
		z := fastGzip(t, data)
		switch op % 4 {
		case 1:
			z = z[:2+int(at)%(len(z)-2)]
		case 2:
			k := int(at) % (len(data) + 1)
			z = append(fastGzip(t, data[:k]), fastGzip(t, data[k:])...)
		case 3:
			z = append(z, bytes.Repeat([]byte{byte(at >> 8)}, 1+int(at)%64)...)
		}
		path := filepath.Join(dir, name+".gz")
		if err := os.WriteFile(path, z, 0o644); err != nil {
			t.Fatal(err)
		}
		got := openAndCheck(t, path, len(data)+len(z))
		if op%4 != 2 {
			if got.openErr == nil {
				t.Fatalf("damaged gzip stream (op %d) opened as %d x %d", op%4, got.n, got.m)
			}
			return
		}
		// Two members read as one: compare with the single-member file.
		if err := os.WriteFile(path, fastGzip(t, data), 0o644); err != nil {
			t.Fatal(err)
		}
		got.same(t, "two gzip members", "one", openAndCheck(t, path, len(data)+len(z)))
	})
}

func FuzzSyntheticSpec(f *testing.F) {
	f.Add("m=5,n=100,k=3,seed=1")
	f.Add("seed=2,noise=0.01,k=2,n=7,m=3")
	f.Add("m=5,n=0,k=3")
	f.Add("m=1,n=1,k=1,seed=0,noise=1e308")
	f.Add("m=2147483647,n=9223372036854775807,k=1,seed=18446744073709551615")
	f.Add("m=268435456,n=1,k=1,seed=1")
	f.Add("m=5e0,n=1.5e3,k=3,seed=1")
	f.Add("m=5,n=1.00000000000000001e3,k=3,seed=1")
	f.Fuzz(func(t *testing.T, spec string) {
		// Only synthetic specs: an arbitrary string could name any file on the machine.
		spec = syntheticPrefix + spec
		src, err, alloc := openMeasured(spec)
		if bound := 64*uint64(len(spec)) + 64<<10; alloc > bound {
			t.Fatalf("Open of a %d-byte spec allocated %d bytes, more than %d", len(spec), alloc, bound)
		}
		if err != nil {
			checkError(t, spec, err)
			return
		}
		s, err := parseSyntheticSpec(spec)
		if err != nil || s.m != src.Features() || s.n != src.Samples() {
			t.Fatalf("the spec parses differently: %v", err)
		}
		if s.m*s.k > maxFuzzEntries {
			return // B* alone would be too big to make on every run
		}
		if _, err := checkSource(t, src, false); err != nil {
			t.Fatalf("synthetic data fails to read: %v", err)
		}
		m, n, k, b, c, err := SyntheticFactors(spec)
		if err != nil || m != s.m || n != s.n || k != s.k || len(b) != m*k {
			t.Fatalf("SyntheticFactors disagrees with Open: %v", err)
		}
		c(n-1, make([]float64, k))
	})
}

// gzipWriters reuses compressors: a new one allocates most of a megabyte.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.HuffmanOnly)
	return zw
}}

// fastGzip compresses data (Huffman only: cheap enough to run on every fuzz input).
func fastGzip(t testing.TB, data []byte) []byte {
	t.Helper()
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	var buf bytes.Buffer
	zw.Reset(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// fuzzResult is what opening and reading a fuzzed file gave.
type fuzzResult struct {
	path    string
	openErr error
	n, m    int
	readErr error     // from the reads of checkSource
	data    []float64 // samples [0, hi) of X, when read
	all     bool      // every sample was read without error
}

// same fails unless r and o (of the same content) opened and read alike.
func (r fuzzResult) same(t *testing.T, what, other string, o fuzzResult) {
	t.Helper()
	if (r.openErr == nil) != (o.openErr == nil) {
		t.Fatalf("%s and %s open differently: %v; %v", what, other, r.openErr, o.openErr)
	}
	if r.openErr != nil {
		return
	}
	if r.n != o.n || r.m != o.m || (r.readErr == nil) != (o.readErr == nil) {
		t.Fatalf("%s is %d x %d (read: %v), %s %d x %d (read: %v)", what, r.n, r.m, r.readErr, other, o.n, o.m, o.readErr)
	}
	if !sameData(r.data, o.data) {
		t.Fatalf("%s and %s read different values", what, other)
	}
}

// fuzzFile writes data to dir as a file called name, and gzip-compressed as name.gz, opens
// and reads both, with the default options and with Missing, and checks that they read
// alike. It returns both results of the default options.
func fuzzFile(t *testing.T, dir, name string, data []byte) (raw, gz fuzzResult) {
	rawPath, gzPath := filepath.Join(dir, name), filepath.Join(dir, name+".gz")
	z := fastGzip(t, data)
	if os.WriteFile(rawPath, data, 0o644) != nil || os.WriteFile(gzPath, z, 0o644) != nil {
		t.Fatal("cannot write the input")
	}
	raw = openAndCheck(t, rawPath, len(data))
	gz = openAndCheck(t, gzPath, len(data)+len(z))
	missing := ReadOptions{Missing: true}
	rawM := openAndCheckWith(t, rawPath, len(data), missing)
	gzM := openAndCheckWith(t, gzPath, len(data)+len(z), missing)
	raw.sameOrMissing(t, rawM)
	gz.sameOrMissing(t, gzM)
	// A file that is itself gzip data is decompressed once from the first and twice from the
	// second, so only the others must agree.
	if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		raw.same(t, rawPath, gzPath, gz)
		rawM.same(t, rawPath+" (missing)", gzPath+" (missing)", gzM)
	}
	return raw, gz
}

// sameOrMissing fails unless m, the same file opened with Missing, accepts all that r (opened
// without) accepts and reads it alike, and fails only where r fails.
func (r fuzzResult) sameOrMissing(t *testing.T, m fuzzResult) {
	t.Helper()
	if m.openErr != nil {
		if r.openErr == nil {
			t.Fatalf("%s opens without Missing but not with it: %v", r.path, m.openErr)
		}
		return
	}
	if r.openErr != nil {
		// Only a NaN, in a MatrixMarket file (read whole by Open), fails the default alone.
		if !strings.Contains(r.openErr.Error(), "NaN value") {
			t.Fatalf("%s opens with Missing but not without it, not for a NaN: %v", r.path, r.openErr)
		}
		return
	}
	if r.n != m.n || r.m != m.m {
		t.Fatalf("%s is %d x %d without Missing, %d x %d with it", r.path, r.n, r.m, m.n, m.m)
	}
	switch {
	case r.readErr == nil && m.readErr != nil:
		t.Fatalf("%s reads without Missing but not with it: %v", r.path, m.readErr)
	case r.readErr == nil && !sameData(r.data, m.data):
		t.Fatalf("%s reads different values with Missing", r.path)
	case r.readErr != nil && m.readErr == nil && !strings.Contains(r.readErr.Error(), "NaN value"):
		t.Fatalf("%s reads with Missing but not without it, not for a NaN: %v", r.path, r.readErr)
	}
}

// openAndCheck opens path, whose content is n bytes (decompressed and compressed), checks
// what Open allocated, its error, and what checkSource reads.
func openAndCheck(t *testing.T, path string, n int) fuzzResult {
	t.Helper()
	return openAndCheckWith(t, path, n, ReadOptions{})
}

// openAndCheckWith is openAndCheck opening with opts.
func openAndCheckWith(t *testing.T, path string, n int, opts ReadOptions) fuzzResult {
	t.Helper()
	res := fuzzResult{path: path}
	src, err, alloc := openMeasuredWith(path, opts)
	if bound := openAllocBound(n); alloc > bound {
		t.Fatalf("Open of %d bytes allocated %d bytes, more than %d (err = %v)", n, alloc, bound, err)
	}
	if err != nil {
		checkError(t, path, err)
		res.openErr = err
		return res
	}
	defer func() {
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	res.n, res.m = src.Samples(), src.Features()
	res.data, res.readErr = checkSource(t, src, opts.Missing)
	res.all = res.readErr == nil && res.m <= maxFuzzEntries && len(res.data) == res.n*res.m
	return res
}

func checkError(t *testing.T, name string, err error) {
	t.Helper()
	if !errors.Is(err, usererr.ErrUser) {
		t.Fatalf("error %q does not wrap usererr.ErrUser", err)
	}
	if !strings.HasPrefix(err.Error(), name) {
		t.Fatalf("error %q does not start with %q", err, name)
	}
}

// checkSource reads a bounded prefix of src in every layout, and its two halves. It returns
// what it read of samples [0, hi) as X's columns, or the error of the first read, which must
// be about the input. missing says src was opened with Missing: its blocks may hold NaN (the
// one NaN of missingNaN, stored in CSC form), and MissingSeen must say whether they did.
func checkSource(t *testing.T, src Source, missing bool) ([]float64, error) {
	t.Helper()
	n, m := src.Samples(), src.Features()
	if n < 1 || m < 1 {
		t.Fatalf("opened with %d samples and %d features", n, m)
	}
	if m > maxFuzzEntries {
		return nil, nil
	}
	hi := min(n, maxFuzzEntries/m)
	var full []float64
	for _, layout := range layouts {
		b, err := src.Read(0, hi, layout)
		if err != nil {
			checkError(t, src.Name(), err)
			if full != nil {
				t.Fatalf("Read(0, %d, %v) failed after another layout succeeded: %v", hi, layout, err)
			}
			return nil, err
		}
		checkBlock(t, b, m, hi, layout)
		d := kernels.ToDense(b).Data
		for _, v := range d {
			if isMissing(v, missing) && (math.Float64bits(v) == math.Float64bits(missingNaN) ||
				math.Float64bits(v) == math.Float64bits(float64(float32(missingNaN)))) {
				continue // the missing value, stored in float64 or float32 (widened)
			}
			if !(v >= 0) || math.IsInf(v, 0) {
				t.Fatalf("Read returned %v (missing %v)", v, missing)
			}
		}
		if full == nil {
			full = d
		} else if !sameData(full, d) {
			t.Fatalf("layout %v reads different values", layout)
		}
	}
	mid := hi / 2
	for _, r := range [][2]int{{0, mid}, {mid, hi}} {
		b, err := src.Read(r[0], r[1], LayoutAuto)
		if err != nil {
			t.Fatalf("Read(%d, %d) failed after Read(0, %d) succeeded: %v", r[0], r[1], hi, err)
		}
		checkBlock(t, b, m, r[1]-r[0], LayoutAuto)
		if !sameData(kernels.ToDense(b).Data, full[r[0]*m:r[1]*m]) {
			t.Fatalf("Read(%d, %d) differs from the slice of Read(0, %d)", r[0], r[1], hi)
		}
	}
	if seen := MissingSeen(src); seen != (missing && slices.ContainsFunc(full, math.IsNaN)) && !(seen && hi < n) {
		// A source knows of NaN it has not returned only when it read more than hi samples.
		t.Fatalf("MissingSeen = %v with missing %v", seen, missing)
	}
	return full, nil
}
