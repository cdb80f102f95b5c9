package matio

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/didnmf/didnmf/fsroot"
)

// fixtureManifest is testdata/sparse/store/manifest.json as a map, to edit.
func fixtureManifest(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(sparseFixture("store/manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func writeManifest(t *testing.T, dir string, m any) {
	t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, storeManifest), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestStoreManifestLies: a manifest that lies, or breaks the format, fails naming the manifest
// or the block and where it is.
func TestStoreManifestLies(t *testing.T) {
	block := func(m map[string]any, i int) map[string]any { return m["blocks"].([]any)[i].(map[string]any) }
	tests := []struct {
		name   string
		edit   func(m map[string]any)
		atOpen bool // fails at Open, else at Read
		errs   []string
	}{
		{"rows-sum", func(m map[string]any) { block(m, 1)["rows"] = 16 }, true, []string{"manifest.json", "the blocks hold 39 rows but the shape says 40"}},
		{"rows-past", func(m map[string]any) { block(m, 1)["rows"] = 30 }, true, []string{"block 1", "go past the 40 samples"}},
		{"rows-zero", func(m map[string]any) { block(m, 0)["rows"] = 0 }, true, []string{"block 0", "0 rows"}},
		{"escape", func(m map[string]any) { block(m, 0)["file"] = "../block-000000.npz" }, true, []string{"block 0", "not a plain file name"}},
		{"absolute", func(m map[string]any) { block(m, 0)["file"] = "/etc/passwd.npy" }, true, []string{"not a plain file name"}},
		{"dotdot", func(m map[string]any) { block(m, 0)["file"] = ".." }, true, []string{"not a file name"}},
		{"not-a-block", func(m map[string]any) { block(m, 0)["file"] = "samples.tsv" }, true, []string{"expected a .npz or .npy block"}},
		{"twice", func(m map[string]any) { block(m, 2)["file"] = "block-000000.npz" }, true, []string{"listed twice"}},
		{"features-escape", func(m map[string]any) { m["features"] = "../x.tsv" }, true, []string{"features", "not a plain file name"}},
		{"unknown-key", func(m map[string]any) { m["colour"] = "red" }, true, []string{`unknown field "colour"`}},
		{"format", func(m map[string]any) { m["format"] = "zarr" }, true, []string{`format "zarr"`}},
		{"version", func(m map[string]any) { m["version"] = 2 }, true, []string{"version 2"}},
		{"no-version", func(m map[string]any) { delete(m, "version") }, true, []string{"no version"}},
		{"shape-3", func(m map[string]any) { m["shape"] = []int{40, 7, 1} }, true, []string{"shape (40, 7, 1)"}},
		{"shape-float", func(m map[string]any) { m["shape"] = []float64{40, 7.5} }, true, []string{"bad manifest"}},
		{"features-wrong", func(m map[string]any) { m["shape"] = []int{40, 8} }, false, []string{"block-000000.npz", "is 13 x 7", "block 0 holds 13 rows (samples [0, 13)) of 8 features"}},
		{"rows-swapped", func(m map[string]any) {
			block(m, 0)["rows"], block(m, 1)["rows"] = 17, 13
		}, false, []string{"block-000000.npz", "is 13 x 7", "block 0 holds 17 rows"}},
		{"missing-block", func(m map[string]any) { block(m, 2)["file"] = "block-000009.npz" }, false, []string{"block-000009.npz", "cannot open", "block 2 of the store"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, sparseFixture("store"))
			m := fixtureManifest(t)
			tc.edit(m)
			writeManifest(t, dir, m)
			src, err := Open(dir)
			if tc.atOpen {
				wantInputError(t, err, append([]string{dir}, tc.errs...)...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			_, err = src.Read(0, src.Samples(), LayoutAuto)
			wantInputError(t, err, append([]string{dir}, tc.errs...)...)
		})
	}
	// Not JSON, trailing data, too large.
	for name, text := range map[string]string{
		"not-json": "{", "trailing": `{"format": "didnmf-blocks"} {}`,
		"huge": `{"format": "` + strings.Repeat("x", maxManifest) + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := copyDir(t, sparseFixture("store"))
			os.WriteFile(filepath.Join(dir, storeManifest), []byte(text), 0o644)
			_, err := Open(dir)
			wantInputError(t, err, filepath.Join(dir, storeManifest))
		})
	}
}

// TestStoreBadBlock: an entry error in a block names the block, its sample and the store's.
func TestStoreBadBlock(t *testing.T) {
	dir := copyDir(t, sparseFixture("store"))
	// Block 0 of the store becomes bad_negative.npz cut to 13 rows? Simpler: put a 40-row
	// block in and say so in the manifest.
	data, err := os.ReadFile(sparseFixture("bad_negative.npz"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "bad.npz"), data, 0o644)
	writeManifest(t, dir, map[string]any{"format": "didnmf-blocks", "version": 1, "shape": []int{53, 7},
		"blocks": []any{map[string]any{"file": "block-000000.npz", "rows": 13}, map[string]any{"file": "bad.npz", "rows": 40}}})
	src, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Read(0, 13, LayoutAuto); err != nil {
		t.Fatalf("the good block: %v", err)
	}
	_, err = src.Read(0, 53, LayoutAuto)
	wantInputError(t, err, filepath.Join(dir, "bad.npz"), "sample 1, feature", "negative value -2", "block 1 of the store", "the store's sample 13")
}

// TestStoreLazy: a Read opens only the blocks its range overlaps, through the Opener, and
// every path it opens lies in the store's directory.
func TestStoreLazy(t *testing.T) {
	dir, err := filepath.Abs(sparseFixture("store"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var opened []string
	open := func(p string) (*os.File, error) {
		mu.Lock()
		opened = append(opened, filepath.Base(p))
		mu.Unlock()
		if filepath.Dir(p) != dir && p != dir {
			t.Errorf("opened %s, outside the store", p)
		}
		return os.Open(p)
	}
	src, err := OpenWith(open, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if want := []string{"store", "manifest.json"}; !slices.Equal(opened, want) {
		t.Errorf("Open opened %v, want %v", opened, want)
	}
	for _, tc := range []struct {
		lo, hi int
		want   []string
	}{{0, 5, []string{"block-000000.npz"}}, {13, 30, []string{"block-000001.npy"}}, {12, 31, []string{"block-000000.npz", "block-000001.npy", "block-000002.npz"}}, {35, 40, []string{"block-000002.npz"}}} {
		opened = nil
		if _, err := src.Read(tc.lo, tc.hi, LayoutAuto); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(opened, tc.want) {
			t.Errorf("Read(%d, %d) opened %v, want %v", tc.lo, tc.hi, opened, tc.want)
		}
	}
}

// TestStoreConfined: read through a node's data roots, a store reads like the fixture, and a
// block that is a symbolic link leading out of the root is refused.
func TestStoreConfined(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	store := filepath.Join(root, "store")
	if err := os.Mkdir(store, 0o755); err != nil {
		t.Fatal(err)
	}
	from := copyDir(t, sparseFixture("store"))
	entries, _ := os.ReadDir(from)
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(from, e.Name()))
		dst := store
		if e.Name() == "block-000002.npz" {
			dst = outside
		}
		os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644)
	}
	roots, err := fsroot.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer roots.Close()
	open := roots.Opener("input")
	src, err := OpenWith(open, store)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Read(0, 30, LayoutAuto); err != nil {
		t.Fatalf("blocks inside the root: %v", err)
	}
	if err := os.Symlink(filepath.Join(outside, "block-000002.npz"), filepath.Join(store, "block-000002.npz")); err != nil {
		t.Fatal(err)
	}
	_, err = src.Read(30, 40, LayoutAuto)
	wantInputError(t, err, "block-000002.npz", "leads outside")
	if !errors.Is(err, fsroot.ErrEscapes) {
		t.Errorf("error %v is not fsroot.ErrEscapes", err)
	}
	// ReadNames goes through the roots too.
	names, err := ReadNames(open, []string{store})
	if err != nil {
		t.Fatal(err)
	}
	if len(names.Features) != 7 || len(names.Samples) != 40 {
		t.Errorf("names %d features, %d samples, want 7, 40", len(names.Features), len(names.Samples))
	}
}

// TestSparseInputsThroughRoots: every sparse form read through a node's data roots reads bit
// for bit like the same input opened directly.
func TestSparseInputsThroughRoots(t *testing.T) {
	dir, err := filepath.Abs(sparseFixture(""))
	if err != nil {
		t.Fatal(err)
	}
	roots := openRoots(t, dir)
	for _, name := range []string{"csr_f4.npz", "csr_f8_stored.npz", "csc_f4.npz", "tenx_v3", "tenx_v2", "store"} {
		p := filepath.Join(dir, name)
		want, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := OpenWith(roots.Opener("input"), p)
		if err != nil {
			t.Fatalf("%s through the roots: %v", name, err)
		}
		sameSource(t, got, want)
		got.Close()
		want.Close()
		gn, err := ReadNames(roots.Opener("input"), []string{p})
		if err != nil {
			t.Fatal(err)
		}
		wn, _ := ReadNames(os.Open, []string{p})
		if !slices.Equal(gn.Features, wn.Features) || !slices.Equal(gn.Samples, wn.Samples) {
			t.Errorf("%s: names through the roots differ", name)
		}
	}
	// Outside the roots: refused.
	_, err = OpenWith(roots.Opener("input"), filepath.Dir(dir))
	wantInputError(t, err, "outside the node's data roots")
}
