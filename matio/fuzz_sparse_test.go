package matio

import (
	"archive/zip"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/didnmf/didnmf/usererr"
)

// FuzzNPZ feeds arbitrary bytes as a scipy sparse .npz through Open and Read, with the default
// options and with Missing, under the checks of the other readers' targets (fuzz_test.go):
// no panic, input errors naming the file, valid blocks of finite nonnegative values that
// agree across layouts and ranges, and Open allocating in proportion to the bytes there are.
func FuzzNPZ(f *testing.F) {
	addSeeds(f, "sparse/csr_f4.npz", "sparse/csc_f4.npz", "sparse/csr_unsorted.npz", "sparse/bad_index.npz")
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		f.Add(makeNPZ(f, method, goodCSR().members()))
		f.Add(makeNPZ(f, method, csrArrays{format: "csc", n: 3, m: 4, indptr: []int32{0, 1, 2, 3, 4}, indices: []int32{2, 0, 2, 0}, data: []float64{3, 1, 4, 2}}.members()))
	}
	c := goodCSR()
	c.indptr, c.indices, c.data = []int32{0, 3, 3, 6}, []int32{3, 1, 3, 2, 0, 2}, []float64{1.5, 1, 0.5, 1, 3, -3}
	f.Add(makeNPZ(f, zip.Store, c.members()))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "x.npz")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r := openAndCheck(t, path, len(data))
		m := openAndCheckWith(t, path, len(data), ReadOptions{Missing: true})
		r.sameOrMissing(t, m)
	})
}

// FuzzStoreManifest feeds arbitrary bytes as the manifest.json of a block store whose blocks
// are the fixture's: Open and Read must never panic nor open a file outside the store's
// directory, fail with input errors naming the store, the manifest or a block, and read valid
// blocks; ReadNames must do as well.
func FuzzStoreManifest(f *testing.F) {
	addSeeds(f, "sparse/store/manifest.json")
	f.Add([]byte(`{"format": "didnmf-blocks", "version": 1, "shape": [40, 7], "blocks": [{"file": "block-000001.npy", "rows": 17}, {"file": "block-000000.npz", "rows": 13}, {"file": "block-000002.npz", "rows": 10}]}`))
	f.Add([]byte(`{"format": "didnmf-blocks", "version": 1, "shape": [13, 7], "blocks": [{"file": "../store/block-000000.npz", "rows": 13}]}`))
	f.Add([]byte(`{"format": "didnmf-blocks", "version": 1, "shape": [2147483647, 7], "blocks": [{"file": "block-000000.npz", "rows": 2147483647}], "features": "features.tsv", "samples": "block-000001.npy"}`))
	f.Add([]byte(`{"format": "didnmf-blocks", "version": 1, "shape": [13, 7], "blocks": [{"file": "block-000000.npz", "rows": 13}], "samples": "samples.tsv"}`))
	dir := f.TempDir()
	store := filepath.Join(dir, "store")
	if err := os.Mkdir(store, 0o755); err != nil {
		f.Fatal(err)
	}
	entries, err := os.ReadDir(sparseFixture("store"))
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(sparseFixture(filepath.Join("store", e.Name())))
		if err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(store, e.Name()), data, 0o644); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(filepath.Join(store, storeManifest), data, 0o644); err != nil {
			t.Fatal(err)
		}
		open := func(p string) (*os.File, error) {
			if p != store && filepath.Dir(p) != store {
				t.Fatalf("opened %s, outside the store %s", p, store)
			}
			return os.Open(p)
		}
		src, err := OpenWith(open, store)
		if err != nil {
			checkError(t, store, err)
			return
		}
		if _, err := checkSource(t, src, false); err != nil && !strings.Contains(err.Error(), store) {
			t.Fatalf("read error %q does not name the store", err)
		}
		src.Close()
		if _, err := ReadNames(open, []string{store}); err != nil && !errors.Is(err, usererr.ErrUser) {
			t.Fatalf("ReadNames error %q does not wrap usererr.ErrUser", err)
		}
	})
}

// FuzzNames feeds arbitrary bytes as a names file: FILE.features.tsv beside an .npz of 7
// features (tenx false) or the genes.tsv of a 10x directory of 7 genes (tenx true). ReadNames
// must never panic, fail with input errors, and return exactly 7 nonempty UTF-8 names without
// carriage returns (nor tabs, beside an .npz).
func FuzzNames(f *testing.F) {
	f.Add([]byte("f0\nf1\nf2\nf3\nf4\nf5\nf6\n"), false)
	f.Add([]byte("f0\r\nf1\r\nf2\r\nf3\r\nf4\r\nf5\r\nf6"), false)
	f.Add([]byte("f0\nf1\nf2\n\nf4\nf5\nf6\n"), false)
	f.Add([]byte("a\tb\nf1\nf2\nf3\nf4\nf5\nf6\n"), false)
	f.Add([]byte("G0\tg0\tGene Expression\nG1\tg1\nG2\nG3\t\nG4\tg4\nG5\tg5\nG6\tg6\n"), true)
	f.Add([]byte("\xff\n1\n2\n3\n4\n5\n6\n7\n"), true)
	dir := f.TempDir()
	npz, err := os.ReadFile(sparseFixture("csr_f4.npz"))
	if err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x.npz"), npz, 0o644); err != nil {
		f.Fatal(err)
	}
	tenx := filepath.Join(dir, "tenx")
	os.Mkdir(tenx, 0o755)
	for _, name := range []string{"matrix.mtx", "barcodes.tsv"} {
		data, err := os.ReadFile(sparseFixture(filepath.Join("tenx_v2", name)))
		if err != nil {
			f.Fatal(err)
		}
		os.WriteFile(filepath.Join(tenx, name), data, 0o644)
	}
	f.Fuzz(func(t *testing.T, data []byte, tenxFile bool) {
		spec, file := filepath.Join(dir, "x.npz"), filepath.Join(dir, "x.features.tsv")
		if tenxFile {
			spec, file = tenx, filepath.Join(tenx, "genes.tsv")
		}
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		names, err := ReadNames(os.Open, []string{spec})
		if err != nil {
			if !errors.Is(err, usererr.ErrUser) || !strings.HasPrefix(err.Error(), file) && !strings.HasPrefix(err.Error(), spec) {
				t.Fatalf("error %q does not wrap usererr.ErrUser or name the file", err)
			}
			return
		}
		if len(names.Features) != 7 {
			t.Fatalf("%d feature names, want 7", len(names.Features))
		}
		for _, n := range names.Features {
			if n == "" || !utf8.ValidString(n) || strings.ContainsAny(n, "\r\n") || !tenxFile && strings.Contains(n, "\t") {
				t.Fatalf("bad name %q", n)
			}
			base := n
			if tenxFile { // gene symbols are made unique: a repeat is NAME-k
				if i := strings.LastIndexByte(n, '-'); i > 0 && !bytes.Contains(data, []byte(n)) {
					base = n[:i]
				}
			}
			if !bytes.Contains(data, []byte(base)) {
				t.Fatalf("name %q is not in the file", n)
			}
		}
		if tenxFile {
			seen := map[string]bool{}
			for _, n := range names.Features {
				if seen[n] {
					t.Fatalf("gene name %q twice: not made unique", n)
				}
				seen[n] = true
			}
		}
	})
}
