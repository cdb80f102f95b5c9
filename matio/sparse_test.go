package matio

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/didnmf/didnmf/kernels"
)

// The sparse fixtures (testdata/sparse, made by make_sparse_fixtures.py) all hold the 40 x 7
// matrix of sp_f8.npy.

func sparseFixture(name string) string { return filepath.Join("testdata", "sparse", name) }

// widenBlock returns b with float64 values, failing the test on a float32 block when narrow
// is false and on a float64 one when it is true.
func widenBlock(t *testing.T, what string, b kernels.Block, narrow bool) kernels.Block {
	t.Helper()
	if kernels.IsNarrow(b) != narrow {
		t.Fatalf("%s: float32 storage %v, want %v", what, kernels.IsNarrow(b), narrow)
	}
	return kernels.Widen(b)
}

// TestSparseInputsSameBits: every sparse form of the fixture reads, for several ranges and
// every layout, the very blocks of the dense .npy; with ReadOptions.Storage auto or float32,
// they come stored as float32 (the values are counts), the same once widened.
func TestSparseInputsSameBits(t *testing.T) {
	ref, err := Open(sparseFixture("sp_f8.npy"))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	n := ref.Samples()
	ranges := [][2]int{{0, n}, {0, 1}, {n - 1, n}, {5, 17}, {12, 31}, {13, 30}, {29, 40}, {20, 20}}
	for _, spec := range []string{"csr_f4.npz", "csr_f8_stored.npz", "csr_i8_stored.npz", "csc_f4.npz",
		"csc_f8_stored.npz", "csr_unsorted.npz", "tenx_v3", "tenx_v2", "store"} {
		for _, st := range []kernels.Storage{kernels.StorageAsIs, kernels.StorageFloat64, kernels.StorageAuto, kernels.StorageFloat32} {
			t.Run(spec+"/"+st.String(), func(t *testing.T) {
				src, err := OpenWithOptions(os.Open, sparseFixture(spec), ReadOptions{Storage: st})
				if err != nil {
					t.Fatal(err)
				}
				defer src.Close()
				if src.Samples() != n || src.Features() != ref.Features() {
					t.Fatalf("%d x %d, want %d x %d", src.Samples(), src.Features(), n, ref.Features())
				}
				if NaturalLayout(src) != LayoutSparse {
					t.Errorf("natural layout %v, want sparse", NaturalLayout(src))
				}
				narrow := st == kernels.StorageAuto || st == kernels.StorageFloat32
				for _, r := range ranges {
					for _, layout := range []Layout{LayoutAuto, LayoutDense, LayoutSparse, LayoutAutoPath} {
						what := fmt.Sprintf("[%d, %d) %v", r[0], r[1], layout)
						g, err := src.Read(r[0], r[1], layout)
						if err != nil {
							t.Fatalf("%s: %v", what, err)
						}
						w, err := ref.Read(r[0], r[1], layout)
						if err != nil {
							t.Fatal(err)
						}
						if r[0] < r[1] {
							g = widenBlock(t, what, g, narrow)
						}
						sameBlock(t, what, kernels.Widen(g), w)
					}
				}
			})
		}
	}
}

// npyMember returns a version 1.0 .npy file of a 1-D (or, with shape "()", 0-D) array.
func npyMember(descr, shape string, data []byte) []byte {
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape)
	for (10+len(h)+1)%64 != 0 {
		h += " "
	}
	h += "\n"
	var b bytes.Buffer
	b.WriteString(npyMagic + "\x01\x00")
	binary.Write(&b, binary.LittleEndian, uint16(len(h)))
	b.WriteString(h)
	b.Write(data)
	return b.Bytes()
}

// npzMemberSpec is one member of a synthetic .npz.
type npzMemberSpec struct {
	name string
	body []byte
}

// makeNPZ writes members as a zip archive, stored or deflated.
func makeNPZ(t testing.TB, method uint16, members []npzMemberSpec) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range members {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: m.name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(m.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// le returns the little-endian bytes of values (int32, int64, float32, float64 slices).
func le(v any) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, v)
	return b.Bytes()
}

// csrArrays describes a synthetic CSR .npz: its shape and arrays, and the format string.
type csrArrays struct {
	format  string
	n, m    int64
	indptr  []int32
	indices []int32
	data    []float64
}

func (c csrArrays) members() []npzMemberSpec {
	format := c.format
	if format == "" {
		format = "csr"
	}
	return []npzMemberSpec{
		{"indices.npy", npyMember("<i4", fmt.Sprintf("(%d,)", len(c.indices)), le(c.indices))},
		{"indptr.npy", npyMember("<i4", fmt.Sprintf("(%d,)", len(c.indptr)), le(c.indptr))},
		{"format.npy", npyMember("|S3", "()", []byte(format))},
		{"shape.npy", npyMember("<i8", "(2,)", le([]int64{c.n, c.m}))},
		{"data.npy", npyMember("<f8", fmt.Sprintf("(%d,)", len(c.data)), le(c.data))},
	}
}

// goodCSR is a 3 x 4 matrix: [[0 1 0 2] [0 0 0 0] [3 0 4 0]].
func goodCSR() csrArrays {
	return csrArrays{n: 3, m: 4, indptr: []int32{0, 2, 2, 4}, indices: []int32{1, 3, 0, 2}, data: []float64{1, 2, 3, 4}}
}

// TestNPZBuilt: synthetic .npz files, stored and deflated, read as they should or fail naming
// the file, the member, the sample, the feature and the value.
func TestNPZBuilt(t *testing.T) {
	mod := func(f func(*csrArrays)) csrArrays {
		c := goodCSR()
		f(&c)
		return c
	}
	good := []float64{0, 1, 0, 2, 0, 0, 0, 0, 3, 0, 4, 0}
	tests := []struct {
		name    string
		arrays  csrArrays
		members func([]npzMemberSpec) []npzMemberSpec
		missing bool
		want    []float64 // nil: an error containing errs
		errs    []string
	}{
		{name: "good", arrays: goodCSR(), want: good},
		{name: "unsorted-duplicates", arrays: mod(func(c *csrArrays) {
			c.indptr = []int32{0, 3, 3, 6}
			c.indices = []int32{3, 1, 3, 2, 0, 2}
			c.data = []float64{1.5, 1, 0.5, 1, 3, 3}
		}), want: good},
		{name: "duplicates-inexact-sum", arrays: mod(func(c *csrArrays) {
			c.indptr = []int32{0, 3, 3, 5}
			c.indices = []int32{3, 1, 3, 0, 2}
			c.data = []float64{1, 1, 0x1p-30, 3, 4}
		}), want: []float64{0, 1, 0, 1 + 0x1p-30, 0, 0, 0, 0, 3, 0, 4, 0}},
		{name: "explicit-zero", arrays: mod(func(c *csrArrays) {
			c.indptr = []int32{0, 2, 3, 5}
			c.indices = []int32{1, 3, 2, 0, 2}
			c.data = []float64{1, 2, 0, 3, 4}
		}), want: good},
		{name: "csc", arrays: csrArrays{format: "csc", n: 3, m: 4, indptr: []int32{0, 1, 2, 3, 4}, indices: []int32{2, 0, 2, 0}, data: []float64{3, 1, 4, 2}}, want: good},
		{name: "negative", arrays: mod(func(c *csrArrays) { c.data[3] = -4 }), errs: []string{"sample 2, feature 2", "negative value -4"}},
		{name: "nan", arrays: mod(func(c *csrArrays) { c.data[1] = math.NaN() }), errs: []string{"sample 0, feature 3", "NaN value"}},
		{name: "nan-missing", arrays: mod(func(c *csrArrays) { c.data[1] = math.NaN() }), missing: true,
			want: []float64{0, 1, 0, math.NaN(), 0, 0, 0, 0, 3, 0, 4, 0}},
		{name: "inf", arrays: mod(func(c *csrArrays) { c.data[0] = math.Inf(1) }), errs: []string{"sample 0, feature 1", "infinite value"}},
		{name: "index-out-of-range", arrays: mod(func(c *csrArrays) { c.indices[2] = 4 }), errs: []string{"indices.npy", "sample 2", "index 4 out of range [0, 4)"}},
		{name: "index-negative", arrays: mod(func(c *csrArrays) { c.indices[0] = -1 }), errs: []string{"indices.npy", "sample 0", "index -1"}},
		{name: "csc-index-out-of-range", arrays: csrArrays{format: "csc", n: 3, m: 4, indptr: []int32{0, 1, 2, 3, 4}, indices: []int32{2, 0, 3, 0}, data: []float64{3, 1, 4, 2}},
			errs: []string{"indices.npy", "feature 2", "index 3 out of range [0, 3)"}},
		{name: "indptr-decreasing", arrays: mod(func(c *csrArrays) { c.indptr = []int32{0, 3, 2, 4} }), errs: []string{"indptr.npy", "indptr[2] = 2 is less than indptr[1] = 3", "sample 1"}},
		{name: "indptr-not-from-0", arrays: mod(func(c *csrArrays) { c.indptr = []int32{1, 2, 2, 4} }), errs: []string{"indptr[0] = 1"}},
		{name: "indptr-not-to-nnz", arrays: mod(func(c *csrArrays) { c.indptr = []int32{0, 2, 2, 3} }), errs: []string{"indptr[3], is 3", "hold 4 entries"}},
		{name: "indptr-length", arrays: mod(func(c *csrArrays) { c.indptr = []int32{0, 2, 4} }), errs: []string{"indptr.npy", "3 pointers", "has 4"}},
		{name: "data-length", arrays: mod(func(c *csrArrays) { c.data = c.data[:3] }), errs: []string{"indices.npy has 4 entries but data.npy has 3"}},
		{name: "coo", arrays: mod(func(c *csrArrays) { c.format = "coo" }), errs: []string{"format.npy", `"coo"`, "tocsr"}},
		{name: "empty-shape", arrays: mod(func(c *csrArrays) { c.n = 0 }), errs: []string{"empty"}},
		{name: "no-data", arrays: goodCSR(), members: func(m []npzMemberSpec) []npzMemberSpec { return m[:4] }, errs: []string{"no data.npy"}},
		{name: "data-2d", arrays: goodCSR(), members: func(m []npzMemberSpec) []npzMemberSpec {
			m[4].body = npyMember("<f8", "(2, 2)", le([]float64{1, 2, 3, 4}))
			return m
		}, errs: []string{"data.npy", "expected a 1-D array"}},
		{name: "data-short", arrays: goodCSR(), members: func(m []npzMemberSpec) []npzMemberSpec {
			m[4].body = m[4].body[:len(m[4].body)-8]
			return m
		}, errs: []string{"data.npy", "header says 4 float64 values"}},
		{name: "indices-float", arrays: goodCSR(), members: func(m []npzMemberSpec) []npzMemberSpec {
			m[0].body = npyMember("<f4", "(4,)", le([]float32{1, 3, 0, 2}))
			return m
		}, errs: []string{"indices.npy", "expected int32 or int64"}},
		{name: "data-complex", arrays: goodCSR(), members: func(m []npzMemberSpec) []npzMemberSpec {
			m[4].body = npyMember("<c16", "(4,)", make([]byte, 64))
			return m
		}, errs: []string{"data.npy", "complex"}},
		{name: "data-int", arrays: goodCSR(), members: func(m []npzMemberSpec) []npzMemberSpec {
			m[4].body = npyMember("<i2", "(4,)", le([]int16{1, 2, 3, 4}))
			return m
		}, want: good},
		{name: "data-bool", arrays: goodCSR(), members: func(m []npzMemberSpec) []npzMemberSpec {
			m[4].body = npyMember("|b1", "(4,)", []byte{1, 1, 1, 1})
			return m
		}, want: []float64{0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 1, 0}},
		{name: "format-str", arrays: goodCSR(), members: func(m []npzMemberSpec) []npzMemberSpec {
			m[2].body = npyMember("<U3", "()", le([]uint32{'c', 's', 'r'}))
			return m
		}, want: good},
	}
	for _, tc := range tests {
		for _, method := range []uint16{zip.Store, zip.Deflate} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, method), func(t *testing.T) {
				members := tc.arrays.members()
				if tc.members != nil {
					members = tc.members(members)
				}
				path := writeTemp(t, "x.npz", makeNPZ(t, method, members))
				for _, st := range []kernels.Storage{kernels.StorageAsIs, kernels.StorageAuto} {
					src, err := OpenWithOptions(os.Open, path, ReadOptions{Missing: tc.missing, Storage: st})
					var b kernels.Block
					if err == nil {
						b, err = src.Read(0, src.Samples(), LayoutDense)
						if err == nil && tc.missing != MissingSeen(src) {
							t.Errorf("MissingSeen %v, want %v", MissingSeen(src), tc.missing)
						}
						src.Close()
					}
					if tc.want == nil {
						wantInputError(t, err, append([]string{path}, tc.errs...)...)
						continue
					}
					if err != nil {
						t.Fatal(err)
					}
					got := denseData(b)
					// The dense block of X holds sample i's features at [i*m, (i+1)*m).
					if !sameNaN(got, tc.want) {
						t.Errorf("storage %v: got %v, want %v", st, got, tc.want)
					}
				}
			})
		}
	}
}

// sameNaN compares values, NaN equal to NaN.
func sameNaN(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) {
			return false
		}
	}
	return true
}

// TestSparseBadFixtures: the bad fixtures fail with an input error naming the file and the place.
func TestSparseBadFixtures(t *testing.T) {
	tests := []struct {
		file string
		opts ReadOptions
		errs []string
	}{
		{"bad_negative.npz", ReadOptions{}, []string{"negative value -2", "sample 1, feature"}},
		{"bad_nan.npz", ReadOptions{}, []string{"NaN value", "sample 2, feature 3"}},
		{"bad_index.npz", ReadOptions{}, []string{"indices.npy", "sample 1 (0-based), entry 3", "index 9 out of range [0, 7)"}},
		{"bad_h5ad.h5ad", ReadOptions{}, []string{"HDF5", "python3 -m didnmf convert " + sparseFixture("bad_h5ad.h5ad") + " " + sparseFixture("bad_h5ad.didnmf")}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			err := openAndReadWith(sparseFixture(tc.file), tc.opts)
			wantInputError(t, err, append([]string{sparseFixture(tc.file)}, tc.errs...)...)
		})
	}
	// NaN is read as missing with ReadOptions.Missing.
	if err := openAndReadWith(sparseFixture("bad_nan.npz"), ReadOptions{Missing: true}); err != nil {
		t.Errorf("bad_nan.npz with Missing: %v", err)
	}
	// An HDF5 file is recognised by its magic whatever its name.
	data, err := os.ReadFile(sparseFixture("bad_h5ad.h5ad"))
	if err != nil {
		t.Fatal(err)
	}
	p := writeTemp(t, "matrix.dat", data)
	wantInputError(t, openAndReadWith(p, ReadOptions{}), "HDF5", "python3 -m didnmf convert")
	// A corrupt zip: a truncated .npz, and one with a flipped byte in deflated data.
	good, err := os.ReadFile(sparseFixture("csr_f4.npz"))
	if err != nil {
		t.Fatal(err)
	}
	wantInputError(t, openAndReadWith(writeTemp(t, "cut.npz", good[:len(good)/2]), ReadOptions{}), "cut.npz", "not a valid .npz (zip) archive")
	for i := 100; i < len(good)-200; i += 37 {
		bad := bytes.Clone(good)
		bad[i] ^= 0x55
		p := writeTemp(t, "flip.npz", bad)
		if err := openAndReadWith(p, ReadOptions{}); err != nil {
			wantInputError(t, err, p)
		}
	}
}

// openAndReadWith opens spec with opts and reads all of it in every layout.
func openAndReadWith(spec string, opts ReadOptions) error {
	src, err := OpenWithOptions(os.Open, spec, opts)
	if err != nil {
		return err
	}
	defer src.Close()
	for _, layout := range layouts {
		if _, err := src.Read(0, src.Samples(), layout); err != nil {
			return err
		}
	}
	return nil
}

// copyDir copies the files of a fixture directory into a new temporary one.
func copyDir(t *testing.T, from string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestTenXBad: a 10x directory whose names files do not match its matrix, or lack one.
func TestTenXBad(t *testing.T) {
	tests := []struct {
		name string
		edit func(dir string)
		errs []string
	}{
		{"genes-short", func(dir string) {
			os.WriteFile(filepath.Join(dir, "genes.tsv"), []byte("G1\tg1\nG2\tg2\n"), 0o644)
		}, []string{"genes.tsv", "2 lines", "7 features"}},
		{"barcodes-long", func(dir string) {
			os.WriteFile(filepath.Join(dir, "barcodes.tsv"), []byte(strings.Repeat("AC\n", 41)), 0o644)
		}, []string{"barcodes.tsv", "more than 40 lines", "40 samples"}},
		{"no-barcodes", func(dir string) { os.Remove(filepath.Join(dir, "barcodes.tsv")) }, []string{"barcodes.tsv.gz or barcodes.tsv"}},
		{"duplicate", func(dir string) {
			os.WriteFile(filepath.Join(dir, "matrix.mtx"), []byte("%%MatrixMarket matrix coordinate integer general\n7 40 2\n1 2 1\n1 2 3\n"), 0o644)
		}, []string{"matrix.mtx:4", "duplicate entry (row 1, column 2), first given at line 3"}},
		{"no-matrix", func(dir string) { os.Remove(filepath.Join(dir, "matrix.mtx")) }, []string{"neither a didnmf block store", "matrix.mtx"}},
		{"negative", func(dir string) {
			data, _ := os.ReadFile(filepath.Join(dir, "matrix.mtx"))
			lines := strings.Split(string(data), "\n")
			for i, l := range lines {
				if i > 2 && l != "" {
					f := strings.Fields(l)
					lines[i] = f[0] + " " + f[1] + " -" + f[2]
					break
				}
			}
			os.WriteFile(filepath.Join(dir, "matrix.mtx"), []byte(strings.Join(lines, "\n")), 0o644)
		}, []string{"matrix.mtx:", "negative value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, sparseFixture("tenx_v2"))
			tc.edit(dir)
			wantInputError(t, openAndReadWith(dir, ReadOptions{}), append([]string{dir}, tc.errs...)...)
		})
	}
}

// TestNPZConcurrentRanges: ranges of one .npz read at once by sources of their own, as a
// node's shards read them, give the blocks a lone Read gives, stored and deflated, with
// small shared chunks so that readers join, wait for and leave shared streams.
func TestNPZConcurrentRanges(t *testing.T) {
	defer func(c int64) { sharedChunk = c }(sharedChunk)
	sharedChunk = 1000
	const n, m = 600, 37
	c := csrArrays{n: n, m: m, indptr: []int32{0}}
	x := uint32(7)
	for i := 0; i < n; i++ {
		for j := 0; j < m; j++ {
			x = x*1664525 + 1013904223
			if x>>28 < 5 {
				c.indices = append(c.indices, int32(j))
				c.data = append(c.data, float64(x>>20&0xff)/4)
			}
		}
		c.indptr = append(c.indptr, int32(len(c.indices)))
	}
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		path := writeTemp(t, "c.npz", makeNPZ(t, method, c.members()))
		ref, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		want := denseData(mustRead(t, ref, 0, n, LayoutDense))
		ref.Close()
		for round := 0; round < 20; round++ {
			shards := 2 + round%5
			var wg sync.WaitGroup
			got := make([][]float64, shards)
			errs := make([]error, shards)
			for s := 0; s < shards; s++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					lo, hi := s*n/shards, (s+1)*n/shards
					src, err := OpenWithOptions(os.Open, path, ReadOptions{Storage: kernels.StorageAuto})
					if err != nil {
						errs[s] = err
						return
					}
					defer src.Close()
					b, err := src.Read(lo, hi, LayoutSparse)
					if err == nil {
						got[s] = denseData(kernels.Widen(b))
					}
					errs[s] = err
				}()
			}
			wg.Wait()
			for s := 0; s < shards; s++ {
				lo, hi := s*n/shards, (s+1)*n/shards
				if errs[s] != nil {
					t.Fatalf("method %d, %d shards, shard %d: %v", method, shards, s, errs[s])
				}
				if !sameData(got[s], want[lo*m:hi*m]) {
					t.Fatalf("method %d, %d shards: shard %d read other values", method, shards, s)
				}
			}
		}
	}
}

// TestTenXArrayAndSymmetric: a 10x directory whose matrix.mtx is an array file, or symmetric,
// reads its columns as the samples too.
func TestTenXArrayAndSymmetric(t *testing.T) {
	tests := []struct {
		name, mtx string
		n, m      int
		want      []float64 // X, sample by sample
	}{
		// genes x cells = [[1 2 3] [4 5 6]]: cell j holds genes (1+j, 4+j).
		{"array", "%%MatrixMarket matrix array real general\n2 3\n1\n4\n2\n5\n3\n6\n", 3, 2, []float64{1, 4, 2, 5, 3, 6}},
		{"coordinate", "%%MatrixMarket matrix coordinate integer general\n2 3 3\n1 1 1\n2 3 6\n1 2 2\n", 3, 2, []float64{1, 0, 2, 0, 0, 6}},
		{"symmetric", "%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n2 1 5\n2 2 1\n", 2, 2, []float64{0, 5, 5, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "matrix.mtx"), []byte(tc.mtx), 0o644)
			os.WriteFile(filepath.Join(dir, "features.tsv"), []byte(strings.Repeat("G\tg\tGene Expression\n", tc.m)), 0o644)
			os.WriteFile(filepath.Join(dir, "barcodes.tsv"), []byte(strings.Repeat("AAAC-1\n", tc.n)), 0o644)
			src, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if src.Samples() != tc.n || src.Features() != tc.m {
				t.Fatalf("%d x %d, want %d x %d", src.Samples(), src.Features(), tc.n, tc.m)
			}
			checkRanges(t, src)
			if got := denseData(mustRead(t, src, 0, tc.n, LayoutDense)); !sameData(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNPZStorageInexact: with Storage float32 or auto, a block with a value float32 cannot
// hold comes as float64, whole, for kernels.ApplyStorage to keep (auto) or refuse (float32,
// naming the value); every other block of the same file still comes as float32.
func TestNPZStorageInexact(t *testing.T) {
	c := goodCSR()
	c.data[2] = 0.1 // sample 2, feature 0
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		path := writeTemp(t, "x.npz", makeNPZ(t, method, c.members()))
		for _, st := range []kernels.Storage{kernels.StorageAuto, kernels.StorageFloat32} {
			src, err := OpenWithOptions(os.Open, path, ReadOptions{Storage: st})
			if err != nil {
				t.Fatal(err)
			}
			b, err := src.Read(0, 3, LayoutSparse)
			if err != nil {
				t.Fatal(err)
			}
			if kernels.IsNarrow(b) || b.(*kernels.CSC).Val[2] != 0.1 {
				t.Errorf("%v: the block with 0.1 is not float64 or lost the value", st)
			}
			_, err = kernels.ApplyStorage(b, st)
			var ie *kernels.InexactError
			if st == kernels.StorageFloat32 && (!errors.As(err, &ie) || ie.Col != 2 || ie.Row != 0 || ie.Value != 0.1) {
				t.Errorf("float32: ApplyStorage gives %v, want an InexactError at sample 2, feature 0", err)
			}
			if b, err := src.Read(0, 2, LayoutSparse); err != nil || !kernels.IsNarrow(b) {
				t.Errorf("%v: samples [0, 2) not float32 (%v)", st, err)
			}
			src.Close()
		}
	}
}
