// Package atomicfile writes a file whole or not at all: into a temporary file in the final
// file's directory, which is synced, given its permissions and closed, then renamed over the
// final name, and the directory synced so that the name lasts too. A failure at any step
// removes the temporary file and leaves any earlier file of that name as it was.
//
// WriteFile and Write write a file in one call; Create returns a File to stream into (a large
// .npy written block by block), which Commit puts in place and Close, before Commit, removes.
// Every file the project writes whole goes through here; the shared output of a cluster's
// shards, confined to the node's data roots, goes through fsroot.Roots.Commit instead.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// tempInfix is in the name of every temporary file: "." + the final name + tempInfix +
// random characters.
const tempInfix = ".tmp-"

// IsTemp reports whether name (a base name) is one of this package's temporary files, a
// leftover of a process that died while writing.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tempInfix)
}

// WriteFile writes data to path atomically with the permissions perm.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Write writes path atomically with the permissions perm: write gets a buffered writer on the
// temporary file. Every error, write's too (after which nothing is written), names path.
func Write(path string, perm fs.FileMode, write func(io.Writer) error) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		return f.wrap(err)
	}
	if err := bw.Flush(); err != nil {
		return f.wrap(err)
	}
	return f.Commit()
}

// WriteNew is WriteFile for a file that must not exist yet: when path exists the error wraps
// fs.ErrExist and nothing is written (a key, say, that must never replace another).
func WriteNew(path string, data []byte, perm fs.FileMode) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return f.wrap(err)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	tmp := f.f.Name()
	exists := &fs.PathError{Op: "create", Path: path, Err: fs.ErrExist}
	err = os.Link(tmp, path)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrExist):
		return exists
	case errors.Is(err, errors.ErrUnsupported) || errors.Is(err, fs.ErrPermission):
		// No hard links here (EPERM, EOPNOTSUPP): check, then rename, which a file created
		// in between could race.
		if _, err := os.Lstat(path); err == nil {
			return exists
		} else if !errors.Is(err, fs.ErrNotExist) {
			return f.wrap(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return f.wrap(err)
		}
	default:
		return f.wrap(err)
	}
	// In place under its final name; Close removes the temporary name, if still there.
	f.Close()
	if err := SyncDir(filepath.Dir(path)); err != nil {
		return f.wrap(err)
	}
	return nil
}

// File is a file being written under a temporary name. It is not safe for concurrent use.
type File struct {
	f      *os.File
	path   string
	perm   fs.FileMode
	synced bool // the data is synced and the temporary file closed
	done   bool // committed or removed
}

// Create creates a temporary file in path's directory, which becomes path on Commit with the
// permissions perm.
func Create(path string, perm fs.FileMode) (*File, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+tempInfix+"*")
	if err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	return &File{f: tmp, path: path, perm: perm}, nil
}

// Write writes p to the temporary file.
func (f *File) Write(p []byte) (int, error) {
	if f.synced || f.done {
		return 0, f.wrap(os.ErrClosed)
	}
	return f.f.Write(p)
}

// OS returns the temporary file, for what Write cannot do (seek, write at an offset). The
// caller must not close it.
func (f *File) OS() *os.File { return f.f }

// Path returns the file's final name.
func (f *File) Path() string { return f.path }

// Sync makes the data durable and closes the temporary file with its permissions; only
// Rename, Commit and Close may follow. Commit syncs when Sync was not called: Sync is for a
// caller that writes several files and commits them together once all are written.
func (f *File) Sync() error {
	if f.synced {
		return nil
	}
	if f.done {
		return f.wrap(os.ErrClosed)
	}
	err := errors.Join(f.f.Chmod(f.perm), f.f.Sync())
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	f.synced = true
	if err != nil {
		f.remove()
		return f.wrap(err)
	}
	return nil
}

// Rename is Commit without the directory sync: the file has its final name, which a crash
// may still undo until the caller syncs the directory (SyncDir). For a caller that must hold
// a lock around the rename itself.
func (f *File) Rename() error {
	if err := f.Sync(); err != nil {
		return err
	}
	if f.done {
		return f.wrap(os.ErrClosed)
	}
	if err := os.Rename(f.f.Name(), f.path); err != nil {
		f.remove()
		return f.wrap(err)
	}
	f.done = true
	return nil
}

// Commit puts the file in place: synced, renamed to its final name (replacing any file of
// that name), and the directory synced.
func (f *File) Commit() error {
	if err := f.Rename(); err != nil {
		return err
	}
	if err := SyncDir(filepath.Dir(f.path)); err != nil {
		return f.wrap(err)
	}
	return nil
}

// Close removes the temporary file unless it was committed; it is safe to defer, and to call
// more than once.
func (f *File) Close() error {
	if f.done {
		return nil
	}
	if !f.synced {
		f.f.Close()
		f.synced = true
	}
	f.remove()
	return nil
}

// remove removes the temporary file, which is closed.
func (f *File) remove() {
	if !f.done {
		os.Remove(f.f.Name())
		f.done = true
	}
}

// wrap names the final file in an error.
func (f *File) wrap(err error) error { return fmt.Errorf("writing %s: %w", f.path, err) }

// SyncDir syncs the directory dir, making the entries created, renamed or removed in it
// durable. File systems that do not support syncing a directory (EINVAL) are tolerated.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if errors.Is(err, syscall.EINVAL) {
		err = nil
	}
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
