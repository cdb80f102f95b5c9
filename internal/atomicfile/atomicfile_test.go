package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// entries returns the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// TestWrite: a write that succeeds replaces the file with the new content and permissions; one
// that fails at any point leaves the old file as it was and no temporary file behind.
func TestWrite(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name  string
		write func(path string) error
		want  string // the file's content after ("old": unchanged)
		err   error
	}{
		{"WriteFile", func(p string) error { return WriteFile(p, []byte("new"), 0o640) }, "new", nil},
		{"Write", func(p string) error {
			return Write(p, 0o640, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err })
		}, "new", nil},
		{"Write failing", func(p string) error {
			return Write(p, 0o640, func(w io.Writer) error { io.WriteString(w, "half"); return boom })
		}, "old", boom},
		{"Create, Commit", func(p string) error {
			f, err := Create(p, 0o640)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := f.Write([]byte("new")); err != nil {
				return err
			}
			return f.Commit()
		}, "new", nil},
		{"Create, Sync, Commit", func(p string) error {
			f, err := Create(p, 0o640)
			if err != nil {
				return err
			}
			defer f.Close()
			f.Write([]byte("new"))
			if err := f.Sync(); err != nil {
				return err
			}
			if _, err := f.Write([]byte("late")); err == nil {
				return errors.New("a write after Sync was taken")
			}
			return f.Commit()
		}, "new", nil},
		{"WriteNew over a file", func(p string) error { return WriteNew(p, []byte("new"), 0o640) }, "old", fs.ErrExist},
		{"WriteNew of a new file", func(p string) error {
			if err := os.Remove(p); err != nil {
				return err
			}
			return WriteNew(p, []byte("new"), 0o640)
		}, "new", nil},
		{"Create, Close without Commit", func(p string) error {
			f, err := Create(p, 0o640)
			if err != nil {
				return err
			}
			f.Write([]byte("new"))
			f.Close()
			if err := f.Commit(); err == nil {
				return errors.New("Commit after Close succeeded")
			}
			return boom
		}, "old", boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "out.json")
			if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			err := tt.write(path)
			if !errors.Is(err, tt.err) {
				t.Fatalf("error %v, want %v", err, tt.err)
			}
			got, rerr := os.ReadFile(path)
			if rerr != nil || string(got) != tt.want {
				t.Errorf("content %q (%v), want %q", got, rerr, tt.want)
			}
			if names := entries(t, dir); len(names) != 1 {
				t.Errorf("the directory holds %v, want only out.json", names)
			}
			if st, err := os.Stat(path); err == nil && tt.want == "new" && st.Mode().Perm() != 0o640 {
				t.Errorf("permissions %v, want 0640", st.Mode().Perm())
			}
		})
	}
}

// TestCreateMissingDirectory: a directory that does not exist is an error naming the file.
func TestCreateMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "out.json")
	if err := WriteFile(path, []byte("x"), 0o644); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("error %v, want one wrapping os.ErrNotExist", err)
	}
}

// TestIsTemp: the temporary files are recognised as such, final names are not.
func TestIsTemp(t *testing.T) {
	dir := t.TempDir()
	f, err := Create(filepath.Join(dir, "coef.npy"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, want := range map[string]bool{filepath.Base(f.OS().Name()): true, "coef.npy": false, ".hidden": false, "iter-5.ckpt": false} {
		if got := IsTemp(name); got != want {
			t.Errorf("IsTemp(%q) = %v, want %v", name, got, want)
		}
	}
}
