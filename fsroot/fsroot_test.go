package fsroot

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/didnmf/didnmf/usererr"
)

// tree makes a temporary directory with two roots, data and scratch, a sibling data2 (the
// prefix trick) and a secret file outside them, and returns its path and the opened roots.
//
//	base/secret                      outside every root
//	base/data2/x.npy                 outside: /data2 is not under /data
//	base/data/x.npy
//	base/data/sub/y.npy
//	base/data/rel -> x.npy           relative link inside: allowed
//	base/data/sub/up -> ../x.npy     relative link climbing to a place still inside: allowed
//	base/data/abs-in -> base/data/x.npy   absolute link, even inside: refused
//	base/data/out -> base/secret     absolute link out: refused
//	base/data/relout -> ../secret    relative link out: refused
//	base/data/dirout -> base         link to a directory outside: refused
//	base/data/dangling -> nothere    dangling relative link
//	base/scratch/z.npy
func tree(t *testing.T) (string, *Roots) {
	t.Helper()
	base := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		p := filepath.Join(base, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, rel string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(base, rel)); err != nil {
			t.Fatal(err)
		}
	}
	write("secret", "secret")
	write("data2/x.npy", "data2")
	write("data/x.npy", "x")
	write("data/sub/y.npy", "y")
	write("scratch/z.npy", "z")
	link("x.npy", "data/rel")
	link("../x.npy", "data/sub/up")
	link(filepath.Join(base, "data/x.npy"), "data/abs-in")
	link(filepath.Join(base, "secret"), "data/out")
	link("../secret", "data/relout")
	link(base, "data/dirout")
	link("nothere", "data/dangling")
	r, err := Open(filepath.Join(base, "data"), filepath.Join(base, "scratch"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return base, r
}

func TestResolveLexical(t *testing.T) {
	base, r := tree(t)
	data := filepath.Join(base, "data")
	for _, tc := range []struct {
		name, path string
		root, rel  string // want: the root's directory and the relative name
		err        error
	}{
		{"file", base + "/data/x.npy", data, "x.npy", nil},
		{"nested", base + "/data/sub/y.npy", data, "sub/y.npy", nil},
		{"other root", base + "/scratch/z.npy", base + "/scratch", "z.npy", nil},
		{"the root itself", base + "/data", data, ".", nil},
		{"trailing slash", base + "/data/sub/", data, "sub", nil},
		{"doubled slashes and dots", base + "//data/./sub//y.npy", data, "sub/y.npy", nil},
		{"dot-dot staying inside", base + "/data/sub/../x.npy", data, "x.npy", nil},
		{"dot-dot-named file", base + "/data/..x", data, "..x", nil},
		{"dot-dot climbing out", base + "/data/../secret", "", "", ErrOutside},
		{"dot-dot climbing out from deep", base + "/data/sub/../../data2/x.npy", "", "", ErrOutside},
		{"prefix trick", base + "/data2/x.npy", "", "", ErrOutside},
		{"absolute outside", "/etc/passwd", "", "", ErrOutside},
		{"parent of the roots", base, "", "", ErrOutside},
		{"filesystem root", "/", "", "", ErrOutside},
		{"relative", "data/x.npy", "", "", ErrNotAbsolute},
		{"relative dot-dot", "../../etc/passwd", "", "", ErrNotAbsolute},
		{"empty", "", "", "", ErrNotAbsolute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, rel, err := r.Resolve("input", tc.path)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || root != nil {
					t.Fatalf("Resolve(%q) = %v, %q, %v; want %v", tc.path, root, rel, err, tc.err)
				}
				if !Refused(err) || !strings.HasPrefix(err.Error(), "input ") {
					t.Errorf("error %q: not a refusal naming the flag", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%q): %v", tc.path, err)
			}
			if root.Name() != tc.root || rel != tc.rel {
				t.Errorf("Resolve(%q) = %s, %q; want %s, %q", tc.path, root.Name(), rel, tc.root, tc.rel)
			}
		})
	}
}

// TestOpenEscapes opens through the roots: what resolves lexically must still not lead out
// through the file system.
func TestOpenEscapes(t *testing.T) {
	base, r := tree(t)
	for _, tc := range []struct {
		name, path string
		want       string // content, or "" for a failure
		err        error
	}{
		{"plain", base + "/data/x.npy", "x", nil},
		{"relative symlink inside", base + "/data/rel", "x", nil},
		{"relative symlink up but inside", base + "/data/sub/up", "x", nil},
		{"dot-dot cleaned inside", base + "/data/sub/../sub/y.npy", "y", nil},
		{"absolute symlink out", base + "/data/out", "", ErrEscapes},
		{"relative symlink out", base + "/data/relout", "", ErrEscapes},
		{"absolute symlink even inside", base + "/data/abs-in", "", ErrEscapes},
		{"through a symlinked directory out", base + "/data/dirout/secret", "", ErrEscapes},
		{"dot-dot out", base + "/data/../secret", "", ErrOutside},
		{"dot-dot out after a symlinked dir", base + "/data/dirout/../../secret", "", ErrOutside},
		{"prefix trick", base + "/data2/x.npy", "", ErrOutside},
		{"missing", base + "/data/missing.npy", "", fs.ErrNotExist},
		{"dangling", base + "/data/dangling", "", fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := r.Open("input", tc.path)
			if tc.err != nil {
				if f != nil {
					f.Close()
				}
				if !errors.Is(err, tc.err) {
					t.Fatalf("Open(%q): %v, want %v", tc.path, err, tc.err)
				}
				var e *Error
				if !errors.As(err, &e) || e.Field != "input" || e.Path != tc.path || !strings.Contains(err.Error(), tc.path) {
					t.Errorf("error %q (%#v) does not name the flag and path", err, e)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open(%q): %v", tc.path, err)
			}
			defer f.Close()
			b, err := io.ReadAll(f)
			if err != nil || string(b) != tc.want {
				t.Errorf("Open(%q) read %q, %v; want %q", tc.path, b, err, tc.want)
			}
		})
	}
	// Stat and Remove refuse the same way, and leave the target alone.
	if _, err := r.Stat("input", base+"/data/out"); !errors.Is(err, ErrEscapes) {
		t.Errorf("Stat through a symlink out: %v", err)
	}
	if err := r.Remove("out_shared", base+"/data/dirout/secret"); !errors.Is(err, ErrEscapes) {
		t.Errorf("Remove through a symlinked directory out: %v", err)
	}
	if _, err := os.Stat(base + "/secret"); err != nil {
		t.Errorf("the secret is gone: %v", err)
	}
}

func TestErrorTexts(t *testing.T) {
	base, r := tree(t)
	roots := "(" + base + "/data, " + base + "/scratch)"
	empty, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	var nilRoots *Roots
	exist := func(*testing.T) error {
		return r.CheckNew("out_shared", base+"/data/x.npy", false)
	}
	for _, tc := range []struct {
		name string
		err  func(*testing.T) error
		want string
	}{
		{"outside", func(*testing.T) error { _, err := r.Open("input", "/etc/shadow"); return err },
			"input /etc/shadow is outside the node's data roots " + roots + ": use a path under one of them (or start the node with serve --data-root DIR)"},
		{"relative", func(*testing.T) error { _, err := r.Open("init_basis", "b.npy"); return err },
			"init_basis b.npy is not an absolute path: a node resolves only absolute paths, under its data roots " + roots},
		{"escapes", func(*testing.T) error { _, err := r.Open("input", base+"/data/out"); return err },
			"input " + base + "/data/out leads outside the data root " + base + "/data (through a symbolic link that points outside, is absolute, or climbs out with ..): refused"},
		{"no roots", func(*testing.T) error { _, err := empty.Open("input", "/data/x.npy"); return err },
			"input /data/x.npy: the node has no data roots, so it reads and writes no file of a job (start it with serve --data-root DIR)"},
		{"nil roots", func(*testing.T) error { _, err := nilRoots.Open("input", "/data/x.npy"); return err },
			"input /data/x.npy: the node has no data roots, so it reads and writes no file of a job (start it with serve --data-root DIR)"},
		{"exists", exist,
			"out_shared " + base + "/data/x.npy already exists and this job did not create it: give overwrite to replace it"},
		{"exists, exclusive", func(*testing.T) error {
			_, err := r.CreateExclusive("out_shared", base+"/data/x.npy", 0o644)
			return err
		}, "out_shared " + base + "/data/x.npy already exists and this job did not create it: refusing to use it (remove it if it is a leftover)"},
		{"missing", func(*testing.T) error { _, err := r.Open("input", base+"/data/nope.npy"); return err },
			"input " + base + "/data/nope.npy: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err(t)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got  %v\nwant %s", err, tc.want)
			}
			// A front end names the fields its way: the path's field leads, and the advice
			// to give overwrite names that field too.
			field, rest, _ := strings.Cut(tc.want, " ")
			want := "<" + field + "> " + strings.Replace(rest, "give overwrite", "give <overwrite>", 1)
			ue := User(err)
			var u *usererr.Error
			if !errors.As(ue, &u) || u.Field != field || !errors.Is(ue, usererr.ErrUser) {
				t.Fatalf("User(err) = %#v: not a *usererr.Error of field %s", ue, field)
			}
			if got := u.Text(func(f string) string { return "<" + f + ">" }); got != want {
				t.Errorf("Text:\ngot  %s\nwant %s", got, want)
			}
			if errors.Is(err, usererr.ErrUser) {
				t.Error("a Roots error itself wraps usererr.ErrUser (a write failing during a run is no user's fault)")
			}
			if got := usererr.FromTemplate(u.Field, u.Template()).Error(); got != tc.want {
				t.Errorf("over the wire: %s", got)
			}
		})
	}
}

// TestConfinementIsExplicit: nothing but Unconfined allows everything.
func TestConfinementIsExplicit(t *testing.T) {
	base, _ := tree(t)
	empty, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	var nilRoots *Roots
	for name, r := range map[string]*Roots{"nil": nilRoots, "no dirs": empty} {
		if !r.Confined() {
			t.Errorf("%s: not confined", name)
		}
		if _, _, err := r.Resolve("input", base+"/data/x.npy"); !errors.Is(err, ErrNoRoots) {
			t.Errorf("%s: Resolve: %v", name, err)
		}
		if _, err := r.CreateExclusive("out_shared", base+"/data/new", 0o644); !errors.Is(err, ErrNoRoots) {
			t.Errorf("%s: CreateExclusive: %v", name, err)
		}
		if err := r.Close(); err != nil {
			t.Errorf("%s: Close: %v", name, err)
		}
	}
	u := Unconfined()
	if u.Confined() || u.String() != "unconfined" {
		t.Errorf("Unconfined: Confined %v, %s", u.Confined(), u)
	}
	for _, p := range []string{base + "/secret", base + "/data/out", base + "/data/../secret"} {
		f, err := u.Open("input", p)
		if err != nil {
			t.Errorf("Unconfined Open(%s): %v", p, err)
			continue
		}
		f.Close()
	}
	t.Chdir(base)
	if f, err := u.Open("input", "secret"); err != nil {
		t.Errorf("Unconfined relative Open: %v", err)
	} else {
		f.Close()
	}
	if _, _, err := u.Resolve("input", base+"/secret"); !errors.Is(err, ErrUnconfined) {
		t.Errorf("Unconfined Resolve: %v", err)
	}
}

func TestOpenRoots(t *testing.T) {
	base, _ := tree(t)
	if err := os.Symlink(filepath.Join(base, "data"), filepath.Join(base, "alias")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		dirs []string
		err  string // "" for success
	}{
		{"missing", []string{base + "/nope"}, "data root " + base + "/nope: no such file or directory"},
		{"a file", []string{base + "/secret"}, "data root " + base + "/secret: not a directory"},
		{"empty name", []string{""}, "data root: empty directory name"},
		{"one bad of two", []string{base + "/data", base + "/nope"}, "data root " + base + "/nope: no such file or directory"},
		{"duplicates", []string{base + "/data", base + "/data/"}, ""},
		{"nested", []string{base + "/data", base + "/data/sub"}, ""},
		{"through a symlink", []string{base + "/alias"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Open(tc.dirs...)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("Open: %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			switch tc.name {
			case "duplicates":
				if len(r.Dirs()) != 1 {
					t.Errorf("Dirs %v", r.Dirs())
				}
			case "nested":
				// The innermost root holds the path.
				root, rel, err := r.Resolve("input", base+"/data/sub/y.npy")
				if err != nil || root.Name() != base+"/data/sub" || rel != "y.npy" {
					t.Errorf("Resolve: %v %q %v", root, rel, err)
				}
			case "through a symlink":
				// Recognised by its name and by the directory it resolves to.
				for _, p := range []string{base + "/alias/x.npy", base + "/data/x.npy"} {
					f, err := r.Open("input", p)
					if err != nil {
						t.Errorf("Open(%s): %v", p, err)
						continue
					}
					f.Close()
				}
				if _, err := r.Open("input", base+"/data/out"); !errors.Is(err, ErrEscapes) {
					t.Errorf("symlink out under the resolved name: %v", err)
				}
			}
		})
	}
	// A relative root is taken against the working directory.
	t.Chdir(base)
	r, err := Open("data")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if d := r.Dirs(); len(d) != 1 || d[0] != filepath.Join(base, "data") {
		t.Errorf("Dirs %v", d)
	}
}

func TestCreateExclusive(t *testing.T) {
	base, r := tree(t)
	for _, tc := range []struct {
		name, path string
		err        error
	}{
		{"new", base + "/data/new.partial", nil},
		{"new in a subdirectory", base + "/data/sub/new.partial", nil},
		{"existing file", base + "/data/x.npy", ErrExists},
		{"dangling symlink", base + "/data/dangling", ErrExists},
		{"symlink out", base + "/data/out", ErrExists},
		{"through a symlinked directory out", base + "/data/dirout/new", ErrEscapes},
		{"outside", base + "/data2/new", ErrOutside},
		{"missing directory", base + "/data/nodir/new", fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := r.CreateExclusive("out_shared", tc.path, 0o644)
			if tc.err != nil {
				if f != nil {
					f.Close()
				}
				if !errors.Is(err, tc.err) {
					t.Fatalf("CreateExclusive(%s): %v, want %v", tc.path, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString("new"); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Nothing was created or changed outside, nor through the links.
	for p, want := range map[string]string{base + "/secret": "secret", base + "/data/x.npy": "x"} {
		if b, err := os.ReadFile(p); err != nil || string(b) != want {
			t.Errorf("%s: %q %v", p, b, err)
		}
	}
	for _, p := range []string{base + "/nothere", base + "/data/nothere", base + "/new"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created", p)
		}
	}
	_, err := r.CreateExclusive("out_shared", base+"/data/x.npy", 0o644)
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("ErrExists is not fs.ErrExist: %v", err)
	}
}

func TestCommit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		final     string // relative to base
		existing  bool   // final exists before
		overwrite bool
		err       error // of Commit
		checkErr  error // of CheckNew
	}{
		{"new name", "data/coef.npy", false, false, nil, nil},
		{"new name, overwrite", "data/coef.npy", false, true, nil, nil},
		{"existing, no overwrite", "data/coef.npy", true, false, ErrExists, ErrExists},
		{"existing, overwrite", "data/coef.npy", true, true, nil, nil},
		{"existing symlink out, no overwrite", "data/out", false, false, ErrExists, ErrExists},
		{"dangling symlink, no overwrite", "data/dangling", false, false, ErrExists, ErrExists},
		{"another root", "scratch/coef.npy", false, false, errOtherRoot, nil},
		{"outside", "data2/coef.npy", false, true, ErrOutside, ErrOutside},
		{"through a symlinked directory out", "data/dirout/coef.npy", false, true, ErrEscapes, ErrEscapes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, r := tree(t)
			tmp := base + "/data/.coef.npy.job.partial"
			final := base + "/" + tc.final
			f, err := r.CreateExclusive("out_shared", tmp, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString("result")
			f.Close()
			if tc.existing {
				if err := os.WriteFile(final, []byte("earlier"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.CheckNew("out_shared", final, tc.overwrite); tc.checkErr == nil && err != nil || !errors.Is(err, tc.checkErr) {
				t.Errorf("CheckNew: %v, want %v", err, tc.checkErr)
			}
			err = r.Commit("out_shared", tmp, final, tc.overwrite)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("Commit: %v, want %v", err, tc.err)
				}
				if b, err := os.ReadFile(tmp); err != nil || string(b) != "result" {
					t.Errorf("the temporary file after a refused commit: %q %v", b, err)
				}
				if b, err := os.ReadFile(base + "/secret"); err != nil || string(b) != "secret" {
					t.Errorf("secret: %q %v", b, err)
				}
				if tc.existing {
					if b, _ := os.ReadFile(final); string(b) != "earlier" {
						t.Errorf("the earlier file was replaced: %q", b)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Commit: %v", err)
			}
			if b, err := os.ReadFile(final); err != nil || string(b) != "result" {
				t.Errorf("final: %q %v", b, err)
			}
			if _, err := os.Lstat(tmp); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the temporary file is still there: %v", err)
			}
		})
	}
}

func TestCheckNew(t *testing.T) {
	base, r := tree(t)
	for _, tc := range []struct {
		name, path string
		overwrite  bool
		err        error
	}{
		{"absent", base + "/data/coef.npy", false, nil},
		{"present", base + "/data/x.npy", false, ErrExists},
		{"present, overwrite", base + "/data/x.npy", true, nil},
		{"a directory", base + "/data/sub", true, errIsDir},
		{"no directory", base + "/data/nodir/coef.npy", false, fs.ErrNotExist},
		{"directory is a file", base + "/data/x.npy/coef.npy", false, errNotDirParent},
		{"directory leads out", base + "/data/dirout/coef.npy", false, ErrEscapes},
		{"outside", "/tmp/coef.npy", true, ErrOutside},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := r.CheckNew("out_shared", tc.path, tc.overwrite)
			if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
				t.Errorf("CheckNew(%s, %v): %v, want %v", tc.path, tc.overwrite, err, tc.err)
			}
		})
	}
}

// TestConcurrentWriters: several goroutines write through one Roots.
func TestConcurrentWriters(t *testing.T) {
	base, r := tree(t)
	tmp := base + "/data/shared.partial"
	f, err := r.CreateExclusive("out_shared", tmp, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			f, err := r.WriteOpener("out_shared")(tmp)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{'a' + byte(i)}, int64(i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if b, _ := os.ReadFile(tmp); string(b) != "abcdefgh" {
		t.Errorf("got %q", b)
	}
	// WriteOpener never creates.
	if _, err := r.WriteOpener("out_shared")(base + "/data/absent"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("WriteOpener of an absent file: %v", err)
	}
}

// noLinks is a file system without hard links (as some network file systems are).
type noLinks struct {
	*os.Root
	err error
}

func (n noLinks) Link(oldname, newname string) error {
	return &os.LinkError{Op: "linkat", Old: oldname, New: newname, Err: n.err}
}

// TestCommitWithoutLinks: where link(2) is refused, Commit checks and renames, still
// refusing to replace a file without overwrite.
func TestCommitWithoutLinks(t *testing.T) {
	for _, linkErr := range []error{fs.ErrPermission, errors.ErrUnsupported} {
		for _, tc := range []struct {
			name     string
			existing bool
			err      error
		}{
			{"new name", false, nil},
			{"existing", true, ErrExists},
		} {
			t.Run(fmt.Sprint(linkErr, "/", tc.name), func(t *testing.T) {
				base, r := tree(t)
				root, _, err := r.Resolve("out_shared", base+"/data")
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(base+"/data/tmp", []byte("result"), 0o644)
				if tc.existing {
					os.WriteFile(base+"/data/coef.npy", []byte("earlier"), 0o644)
				}
				err = r.commit(noLinks{root, linkErr}, "out_shared", "tmp", "coef.npy", base+"/data/coef.npy", base+"/data", false)
				want := "result"
				if tc.existing {
					want = "earlier"
				}
				if !errors.Is(err, tc.err) || tc.err == nil && err != nil {
					t.Fatalf("commit: %v, want %v", err, tc.err)
				}
				if b, _ := os.ReadFile(base + "/data/coef.npy"); string(b) != want {
					t.Errorf("coef.npy holds %q, want %q", b, want)
				}
			})
		}
	}
}
