package matio

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/kernels"
)

// The fuzz targets feed arbitrary bytes through Open and Read. They must never panic; errors
// must wrap ErrInput and start with the path; blocks must have the claimed dims, be valid
// CSC when sparse, hold only finite nonnegative values, and agree across ranges.

// maxFuzzEntries bounds how much a fuzz target reads, since a header may legally claim a huge
// matrix.
const maxFuzzEntries = 1 << 18

func addSeeds(f *testing.F, files ...string) {
	for _, name := range files {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

func FuzzNPY(f *testing.F) {
	addSeeds(f, "c_f8.npy", "f_i2_be.npy", "c_b1.npy", "v3_f8.npy", "bad_neg.npy", "bad_1d.npy", "bad_struct.npy")
	f.Add(npyBytes("{'descr': '>f4', 'fortran_order': True, 'shape': (2, 1), }", []byte{0x3f, 0x80, 0, 0, 0, 0, 0, 0}))
	f.Add(npyBytes("{'descr': '|u1', 'fortran_order': False, 'shape': (3, 2), }", []byte{0, 1, 0, 0, 2, 0}))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := fuzzFile(t, "x.npy", data)
		if _, _, d, err := ReadNPYMatrix(path); err == nil {
			for _, v := range d {
				if !(v >= 0) || math.IsInf(v, 0) {
					t.Fatalf("ReadNPYMatrix returned %v", v)
				}
			}
		} else if !errors.Is(err, ErrInput) {
			t.Fatalf("ReadNPYMatrix error %q does not wrap ErrInput", err)
		}
	})
}

func FuzzMTX(f *testing.F) {
	addSeeds(f, "coo.mtx", "array.mtx", "sym.mtx", "sym_array.mtx", "pattern.mtx", "int.mtx")
	f.Add([]byte("%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n1 2 5\n2 1 1\n"))
	f.Add([]byte("%%MatrixMarket matrix array real general\n2 2\n1 2\n3\n-4\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzFile(t, "x.mtx", data)
	})
}

func FuzzIDX(f *testing.F) {
	f.Add(idxBytes(0x08, []uint32{3, 2, 2}, make([]byte, 12)))
	f.Add(idxBytes(0x0D, []uint32{2, 1}, idxEncode(0x0D, []float64{1, -1})))
	f.Add(idxBytes(0x0E, []uint32{2}, idxEncode(0x0E, []float64{0.5, 2})))
	f.Add(idxBytes(0x0B, []uint32{1, 3}, idxEncode(0x0B, []float64{1, 0, 300})))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzFile(t, "x.idx", data)
	})
}

func FuzzSyntheticSpec(f *testing.F) {
	f.Add("m=5,n=100,k=3,seed=1")
	f.Add("seed=2,noise=0.01,k=2,n=7,m=3")
	f.Add("m=5,n=0,k=3")
	f.Add("m=1,n=1,k=1,seed=0,noise=1e308")
	f.Fuzz(func(t *testing.T, spec string) {
		// Only synthetic specs: an arbitrary string could name any file on the machine.
		spec = syntheticPrefix + spec
		src, err := Open(spec)
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
		checkSource(t, src)
		m, n, k, b, c, err := SyntheticFactors(spec)
		if err != nil || m != s.m || n != s.n || k != s.k || len(b) != m*k {
			t.Fatalf("SyntheticFactors disagrees with Open: %v", err)
		}
		c(n-1, make([]float64, k))
	})
}

// fuzzFile opens data as a file called name, and gzip-compressed as name.gz. It returns the
// path of the uncompressed file.
func fuzzFile(t *testing.T, name string, data []byte) string {
	dir := t.TempDir()
	raw, gz := filepath.Join(dir, name), filepath.Join(dir, name+".gz")
	if os.WriteFile(raw, data, 0o644) != nil || os.WriteFile(gz, gzipBytes(t, data), 0o644) != nil {
		t.Fatal("cannot write the input")
	}
	for _, path := range []string{raw, gz} {
		src, err := Open(path)
		if err != nil {
			checkError(t, path, err)
			continue
		}
		checkSource(t, src)
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return raw
}

func checkError(t *testing.T, name string, err error) {
	t.Helper()
	if !errors.Is(err, ErrInput) {
		t.Fatalf("error %q does not wrap ErrInput", err)
	}
	if !strings.HasPrefix(err.Error(), name) {
		t.Fatalf("error %q does not start with %q", err, name)
	}
}

// checkSource reads a bounded prefix of src in every layout, and its two halves.
func checkSource(t *testing.T, src Source) {
	t.Helper()
	n, m := src.Samples(), src.Features()
	if n < 1 || m < 1 {
		t.Fatalf("opened with %d samples and %d features", n, m)
	}
	if m > maxFuzzEntries {
		return
	}
	hi := min(n, maxFuzzEntries/m)
	var full []float64
	for _, layout := range layouts {
		b, err := src.Read(0, hi, layout)
		if err != nil {
			checkError(t, src.Name(), err)
			return
		}
		checkBlock(t, b, m, hi, layout)
		d := kernels.ToDense(b).Data
		for _, v := range d {
			if !(v >= 0) || math.IsInf(v, 0) {
				t.Fatalf("Read returned %v", v)
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
}
