package matio

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/didnmf/didnmf/fsroot"
	"github.com/didnmf/didnmf/kernels"

	"github.com/didnmf/didnmf/usererr"
)

// rootFixtures makes a data root holding copies of the good fixtures of testdata and a few
// more files (IDX plain and gzipped, a Fortran-order .npy), next to a readable .npy outside
// it; it returns the root's directory, the names of its input files, and the outside file.
func rootFixtures(t *testing.T) (dir string, names []string, outside string) {
	t.Helper()
	base := t.TempDir()
	dir = filepath.Join(base, "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	put := func(name string, data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), "bad_") || strings.HasSuffix(e.Name(), ".py") {
			continue
		}
		data, err := os.ReadFile(filepath.Join("testdata", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		put(e.Name(), data)
	}
	m, n := 6, 40
	x := genX(m, n, 0.5, 3)
	idx := idxBytes(0x0E, []uint32{uint32(n), uint32(m)}, idxEncode(0x0E, x))
	put("x.idx", idx)
	put("x.idx.gz", gzipBytes(t, idx))
	fortran, err := os.ReadFile(writeNPYOrder(t, "f.npy", m, n, x, true))
	if err != nil {
		t.Fatal(err)
	}
	put("fortran.npy", fortran)
	outside = filepath.Join(base, "secret.npy")
	secret, err := os.ReadFile("testdata/c_f8.npy")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outside, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, names, outside
}

// openRoots opens dirs as data roots for the test.
func openRoots(t *testing.T, dirs ...string) *fsroot.Roots {
	t.Helper()
	r, err := fsroot.Open(dirs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// sameSource fails unless got reads exactly (bitwise, block types and structure) like want.
func sameSource(t *testing.T, got, want Source) {
	t.Helper()
	if got.Name() != want.Name() || got.Samples() != want.Samples() || got.Features() != want.Features() {
		t.Fatalf("%s: %d x %d, want %s: %d x %d", got.Name(), got.Samples(), got.Features(), want.Name(), want.Samples(), want.Features())
	}
	gs, gok := StoredEntries(got)
	ws, wok := StoredEntries(want)
	if gs != ws || gok != wok {
		t.Errorf("%s: StoredEntries %d %v, want %d %v", got.Name(), gs, gok, ws, wok)
	}
	n := want.Samples()
	for _, r := range [][2]int{{0, n}, {0, 1}, {n - 1, n}, {n / 3, n / 2}, {n / 2, n / 2}} {
		for _, layout := range layouts {
			g, err := got.Read(r[0], r[1], layout)
			if err != nil {
				t.Fatalf("%s: Read(%d, %d, %v): %v", got.Name(), r[0], r[1], layout, err)
			}
			w, err := want.Read(r[0], r[1], layout)
			if err != nil {
				t.Fatal(err)
			}
			sameBlock(t, fmt.Sprintf("%s [%d, %d) %v", got.Name(), r[0], r[1], layout), g, w)
		}
	}
}

// TestOpenWithRootSameBits: every format read through a data root (fsroot, and a bare
// os.Root) reads bit for bit like the same file opened directly.
func TestOpenWithRootSameBits(t *testing.T) {
	dir, names, _ := rootFixtures(t)
	roots := openRoots(t, dir)
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	openers := map[string]Opener{
		"fsroot":  roots.Opener("input"),
		"os.Root": func(p string) (*os.File, error) { return root.Open(filepath.Base(p)) },
	}
	for _, name := range names {
		for oname, open := range openers {
			t.Run(name+"/"+oname, func(t *testing.T) {
				path := filepath.Join(dir, name)
				want, err := Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer want.Close()
				got, err := OpenWith(open, path)
				if err != nil {
					t.Fatal(err)
				}
				defer got.Close()
				sameSource(t, got, want)
			})
		}
	}
}

// TestOpenAllWithRoot: stacked inputs (several formats and a synthetic spec, which needs no
// root) read through a root like OpenAll reads them.
func TestOpenAllWithRoot(t *testing.T) {
	dir, _, _ := rootFixtures(t)
	roots := openRoots(t, dir)
	specs := []string{filepath.Join(dir, "c_f8.npy"), filepath.Join(dir, "coo.mtx.gz"), filepath.Join(dir, "f_i2_be.npy.gz"),
		filepath.Join(dir, "array.mtx"), "synthetic:m=5,n=4,k=2,seed=9", filepath.Join(dir, "c_f8.npy")}
	want, err := OpenAll(specs)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	got, err := OpenAllWith(roots.Opener("input"), specs)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	sameSource(t, got, want)
	// A synthetic spec opens no file, even with roots that refuse every path.
	none := openRoots(t)
	syn, err := OpenAllWith(none.Opener("input"), []string{"synthetic:m=5,n=4,k=2,seed=9"})
	if err != nil {
		t.Fatalf("synthetic spec with no roots: %v", err)
	}
	syn.Close()
}

func TestReadNPYMatrixWithRoot(t *testing.T) {
	dir, _, _ := rootFixtures(t)
	roots := openRoots(t, dir)
	for _, name := range []string{"c_f8.npy", "f_f4.npy", "c_f8.npy.gz", "fortran.npy"} {
		path := filepath.Join(dir, name)
		r1, c1, d1, err1 := ReadNPYMatrix(path)
		r2, c2, d2, err2 := ReadNPYMatrixWith(roots.Opener("init_basis"), path)
		if err1 != nil || err2 != nil || r1 != r2 || c1 != c2 || !sameBits(d1, d2) {
			t.Errorf("%s: %d x %d %v vs %d x %d %v, or the data differ", name, r1, c1, err1, r2, c2, err2)
		}
	}
}

// TestOpenWithRefused: what the roots refuse is refused by every reader, before any parsing,
// with an input error that names the flag and the path.
func TestOpenWithRefused(t *testing.T) {
	dir, _, outside := rootFixtures(t)
	base := filepath.Dir(dir)
	roots := openRoots(t, dir)
	if err := os.Symlink(outside, filepath.Join(dir, "abs.npy")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../secret.npy", filepath.Join(dir, "rel.npy")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(base, filepath.Join(dir, "up")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(base+"/data2", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, base+"/data2/x.npy"); err != nil {
		t.Fatal(err)
	}
	// The outside file is a good input: only the confinement refuses it.
	if err := openAndRead(outside); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		err        error
	}{
		{"absolute symlink out", dir + "/abs.npy", fsroot.ErrEscapes},
		{"relative symlink out", dir + "/rel.npy", fsroot.ErrEscapes},
		{"through a symlinked directory", dir + "/up/secret.npy", fsroot.ErrEscapes},
		{"dot-dot", dir + "/../secret.npy", fsroot.ErrOutside},
		{"prefix trick", base + "/data2/x.npy", fsroot.ErrOutside},
		{"outside", outside, fsroot.ErrOutside},
		{"relative", "secret.npy", fsroot.ErrNotAbsolute},
		{"missing", dir + "/missing.npy", fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open := roots.Opener("input")
			_, err := OpenWith(open, tc.path)
			wantInputError(t, err, "input "+tc.path)
			if !errors.Is(err, tc.err) {
				t.Errorf("OpenWith: %v, want %v", err, tc.err)
			}
			_, err = OpenAllWith(open, []string{dir + "/c_f8.npy", "synthetic:m=5,n=4,k=2,seed=9", tc.path})
			if !errors.Is(err, usererr.ErrUser) || !errors.Is(err, tc.err) {
				t.Errorf("OpenAllWith: %v", err)
			}
			_, _, _, err = ReadNPYMatrixWith(roots.Opener("init_coef"), tc.path)
			if !errors.Is(err, usererr.ErrUser) || !errors.Is(err, tc.err) || !strings.Contains(err.Error(), "init_coef ") {
				t.Errorf("ReadNPYMatrixWith: %v", err)
			}
		})
	}
}

// TestOpenerErrors: an Opener's *fs.PathError reads as before ("PATH: cannot open: REASON");
// other errors keep their own text; a nil Opener is refused.
func TestOpenerErrors(t *testing.T) {
	_, err := Open("/nonexistent/x.npy")
	wantInputError(t, err, "/nonexistent/x.npy: cannot open: no such file or directory")
	own := errors.New("x.npy: not today")
	_, err = OpenWith(func(string) (*os.File, error) { return nil, own }, "x.npy")
	wantInputError(t, err)
	if err.Error() != "x.npy: not today" || !errors.Is(err, own) {
		t.Errorf("own error: %v", err)
	}
	_, err = OpenWith(func(string) (*os.File, error) { return nil, nil }, "x.npy")
	wantInputError(t, err, "x.npy: cannot open")
	if _, err := OpenWith(nil, "x.npy"); err == nil {
		t.Error("OpenWith(nil): no error")
	}
	if _, err := OpenAllWith(nil, []string{"x.npy"}); err == nil {
		t.Error("OpenAllWith(nil): no error")
	}
	if _, _, _, err := ReadNPYMatrixWith(nil, "x.npy"); err == nil {
		t.Error("ReadNPYMatrixWith(nil): no error")
	}
	if err := WriteNPYRowsWith(nil, "x.npy", 1, 1, 0, []float64{1}); err == nil {
		t.Error("WriteNPYRowsWith(nil): no error")
	}
}

// sharedCoef runs the shared-coef protocol: the coordinator creates the partial file
// exclusively and prepares it, shards write their rows concurrently through a write opener,
// the coordinator checks it and commits it to final. It returns Commit's error.
func sharedCoef(t *testing.T, roots *fsroot.Roots, part, final string, rows, cols, shards int, data []float64, overwrite bool) error {
	t.Helper()
	f, err := roots.CreateExclusive("out_shared", part, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := PrepareNPYRows(f, rows, cols); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cuts := kernels.ColumnRanges(rows, shards)
	var wg sync.WaitGroup
	for s := range shards {
		wg.Go(func() {
			lo, hi := cuts[s], cuts[s+1]
			if err := WriteNPYRowsWith(roots.WriteOpener("out_shared"), part, rows, cols, lo, data[lo*cols:hi*cols]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	f, err = roots.Open("out_shared", part)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckNPYRows(f, rows, cols); err != nil {
		t.Error(err)
	}
	f.Close()
	return roots.Commit("out_shared", part, final, overwrite)
}

func TestNPYRowsShared(t *testing.T) {
	dir := t.TempDir()
	roots := openRoots(t, dir)
	rows, cols := 1000, 3
	data := genX(cols, rows, 0.8, 5) // row-major rows x cols
	var want bytes.Buffer
	if err := WriteNPY(&want, rows, cols, data); err != nil {
		t.Fatal(err)
	}
	final := dir + "/coef.npy"
	if err := sharedCoef(t, roots, dir+"/.coef.npy.job1.partial", final, rows, cols, 7, data, false); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(final)
	if err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("coef.npy differs from WriteNPY's (%d bytes, want %d): %v", len(got), want.Len(), err)
	}
	// A second job does not replace it without overwrite, and leaves its partial file...
	data2 := genX(cols, rows, 0.8, 6)
	part2 := dir + "/.coef.npy.job2.partial"
	if err := sharedCoef(t, roots, part2, final, rows, cols, 3, data2, false); !errors.Is(err, fsroot.ErrExists) ||
		!strings.Contains(err.Error(), "give overwrite") {
		t.Fatalf("commit over an earlier coef.npy: %v", err)
	}
	if got, _ := os.ReadFile(final); !bytes.Equal(got, want.Bytes()) {
		t.Fatal("the earlier coef.npy changed")
	}
	// ... which a job cannot create again (another job's, or a planted file)...
	if _, err := roots.CreateExclusive("out_shared", part2, 0o644); !errors.Is(err, fsroot.ErrExists) {
		t.Fatalf("creating an existing partial file: %v", err)
	}
	// ... but the job can commit with overwrite.
	if err := roots.Commit("out_shared", part2, final, true); err != nil {
		t.Fatal(err)
	}
	want.Reset()
	WriteNPY(&want, rows, cols, data2)
	if got, _ := os.ReadFile(final); !bytes.Equal(got, want.Bytes()) {
		t.Fatal("coef.npy after overwrite differs")
	}
}

// TestWriteNPYRowsRefuses: the writers of rows create nothing and write only into a file
// prepared for exactly their shape, never through a link out of the root.
func TestWriteNPYRowsRefuses(t *testing.T) {
	base := t.TempDir()
	dir := base + "/out"
	os.Mkdir(dir, 0o755)
	roots := openRoots(t, dir)
	rows, cols := 50, 3
	prepared := func(name string, r, c int) string {
		f, err := roots.CreateExclusive("out_shared", dir+"/"+name, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := PrepareNPYRows(f, r, c); err != nil {
			t.Fatal(err)
		}
		return dir + "/" + name
	}
	// The transposed shape has a header of the same length and the same size.
	transposed := prepared("transposed", cols, rows)
	truncated := prepared("truncated", rows, cols)
	os.Truncate(truncated, 200)
	outside := base + "/victim.npy"
	var victim bytes.Buffer
	WriteNPY(&victim, rows, cols, make([]float64, rows*cols))
	os.WriteFile(outside, victim.Bytes(), 0o600)
	os.Symlink(outside, dir+"/abs")
	os.Symlink("../victim.npy", dir+"/rel")
	os.WriteFile(dir+"/plain.npy", victim.Bytes()[:100], 0o644)
	ones := make([]float64, 10*cols)
	for i := range ones {
		ones[i] = 1
	}
	for _, tc := range []struct {
		name, path string
		lo         int
		is         error  // errors.Is, or nil
		text       string // substring
	}{
		{"absent", dir + "/absent", 0, fs.ErrNotExist, "no such file"},
		{"other shape", transposed, 0, nil, "does not start with the header of a 50 x 3 float64 .npy file"},
		{"truncated", truncated, 0, nil, "has 200 bytes, want 1328"},
		{"not prepared", dir + "/plain.npy", 0, nil, "has 100 bytes"},
		{"absolute symlink out", dir + "/abs", 0, fsroot.ErrEscapes, "out_shared " + dir + "/abs leads outside"},
		{"relative symlink out", dir + "/rel", 0, fsroot.ErrEscapes, "leads outside"},
		{"outside", outside, 0, fsroot.ErrOutside, "is outside"},
		{"rows past the end", prepared("ok", rows, cols), 45, nil, "30 values at row 45 of a 50 x 3 matrix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadFile(tc.path)
			err := WriteNPYRowsWith(roots.WriteOpener("out_shared"), tc.path, rows, cols, tc.lo, ones)
			if err == nil || tc.is != nil && !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("got %v, want %v containing %q", err, tc.is, tc.text)
			}
			if after, _ := os.ReadFile(tc.path); !bytes.Equal(before, after) {
				t.Error("the file changed")
			}
		})
	}
	if got, _ := os.ReadFile(outside); !bytes.Equal(got, victim.Bytes()) {
		t.Error("the file outside changed")
	}
	if _, err := os.Lstat(dir + "/absent"); err == nil {
		t.Error("a writer of rows created a file")
	}
	// PrepareNPYRows wants a new, empty file.
	f, err := roots.OpenFile("out_shared", dir+"/plain.npy", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := PrepareNPYRows(f, rows, cols); err == nil || !strings.Contains(err.Error(), "needs a new, empty regular file") {
		t.Errorf("PrepareNPYRows of a non-empty file: %v", err)
	}
}

// TestWriteNPYRowsAtUnchanged: the path-based writer still creates the file and writes rows.
func TestWriteNPYRowsAtUnchanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "coef.npy")
	rows, cols := 20, 4
	data := genX(cols, rows, 0.7, 8)
	for _, r := range [][2]int{{10, 20}, {0, 10}} {
		if err := WriteNPYRowsAt(path, rows, cols, r[0], data[r[0]*cols:r[1]*cols]); err != nil {
			t.Fatal(err)
		}
	}
	var want bytes.Buffer
	WriteNPY(&want, rows, cols, data)
	if got, _ := os.ReadFile(path); !bytes.Equal(got, want.Bytes()) {
		t.Error("WriteNPYRowsAt's file differs from WriteNPY's")
	}
}
