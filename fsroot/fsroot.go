// Package fsroot confines a node's file access to the directories its operator allows.
//
// A node runs jobs for clients it does not otherwise trust, often with more rights than they
// have. The paths in a job (its inputs, its initial factors, its shared output directory) are
// therefore only honoured when they lie under one of the node's data roots (`serve
// --data-root DIR`, repeatable), and every file under them is reached through Go's [os.Root],
// so that neither `..` nor a symbolic link can lead out of the root it was resolved in:
//
//   - A path must be absolute. It is cleaned lexically (so `..` cannot climb over a root's
//     name) and must then equal a root or lie under one, compared a whole path element at a
//     time (/data2/x is not under /data). Anything else is refused before any I/O.
//   - The file is then opened, created, renamed or removed by the [os.Root] of that root, with
//     the name relative to it. The OS-level check refuses a symbolic link that points outside
//     the root, a relative one that climbs out with `..` (even one that comes back in), and
//     every absolute symbolic link, even one pointing inside the root: inside a root, link
//     with relative symbolic links.
//   - A file that exists is never replaced, unless the caller says so: [Roots.CreateExclusive]
//     creates with O_EXCL (and does not follow a symbolic link in the last element), and
//     [Roots.Commit] moves a finished temporary file to its final name with link(2), which
//     fails when the name is taken, unless overwrite is set.
//
// Every error of a Roots method is an [*Error] that names the job spec's field the path came
// with (as a {field} of package usererr, which each front end names its way: the CLI's
// --input, the HTTP API's input), the path, and what to do:
//
//	input /etc/shadow is outside the node's data roots (/data, /scratch): use a path under one of them (or start the node with serve --data-root DIR)
//
// A nil *Roots, and the Roots of [Open] with no directories, refuse every path: a node without
// --data-root reads and writes no file of a job. No confinement at all is only had by asking
// for it with [Unconfined] (for a process that acts for its own user, such as the in-process
// nodes of `factorize --nodes`).
//
// Confinement is by directory, not by user: a node reads whatever under its roots its own
// user can read, for any client allowed to submit. Roots should therefore hold only data every
// submitter may see, and a node need not run as root. A hard link is a file like any other: a
// root where untrusted users can write could be given links to files outside it (Linux's
// fs.protected_hardlinks=1 limits that to files they own or can both read and write).
//
// Roots are safe for concurrent use. Their methods' openers plug into matio:
//
//	src, err := matio.OpenAllWith(roots.Opener("input"), inputs)
package fsroot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Roots is the set of directories a node may read and write job files under, each held open
// as an [*os.Root].
type Roots struct {
	unconfined bool
	dirs       []string // the roots as given (cleaned, absolute), for messages
	names      []rootName
	roots      []*os.Root
	closeOnce  sync.Once
	closeErr   error
}

// rootName is one name by which paths under a root are recognised: the root as given, or the
// directory it resolves to when that name goes through symbolic links.
type rootName struct {
	name string   // cleaned absolute name
	dir  string   // the root as given, for messages
	root *os.Root // nil for Unconfined
}

// Open opens dirs as the allowed roots. Each must be an existing directory; a relative one is
// made absolute against the working directory. A root is recognised both by the name given and
// by the directory it resolves to (so with --data-root /shared, a symbolic link to /mnt/nfs,
// /mnt/nfs/x.npy is accepted as well as /shared/x.npy). Open with no dirs gives Roots that
// refuse every path.
func Open(dirs ...string) (*Roots, error) {
	r := &Roots{}
	for _, d := range dirs {
		if d == "" {
			r.Close()
			return nil, errors.New("data root: empty directory name")
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("data root %s: %v", d, err)
		}
		if slices.Contains(r.dirs, abs) {
			continue
		}
		root, err := os.OpenRoot(abs)
		if err != nil {
			r.Close()
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("data root %s: %v", d, err)
		}
		if st, err := root.Stat("."); err != nil || !st.IsDir() {
			root.Close()
			r.Close()
			return nil, fmt.Errorf("data root %s: not a directory", d)
		}
		r.dirs = append(r.dirs, abs)
		r.roots = append(r.roots, root)
		r.names = append(r.names, rootName{name: abs, dir: abs, root: root})
		if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
			r.names = append(r.names, rootName{name: real, dir: abs, root: root})
		}
	}
	// The longest name first: with nested roots, a path belongs to the innermost.
	slices.SortStableFunc(r.names, func(a, b rootName) int { return len(b.name) - len(a.name) })
	return r, nil
}

// Unconfined returns Roots that allow every path, relative ones included, and use the os
// package's functions directly. Only for a process acting for its own user.
func Unconfined() *Roots {
	return &Roots{unconfined: true}
}

// Confined reports whether r confines paths (false only for [Unconfined]).
func (r *Roots) Confined() bool { return r == nil || !r.unconfined }

// Dirs returns the roots, as given to [Open] (made absolute).
func (r *Roots) Dirs() []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.dirs)
}

// String describes the roots for messages: "(/data, /scratch)", "unconfined" or "none".
func (r *Roots) String() string {
	switch {
	case r != nil && r.unconfined:
		return "unconfined"
	case r == nil || len(r.dirs) == 0:
		return "none"
	}
	return "(" + strings.Join(r.dirs, ", ") + ")"
}

// Close closes the roots. Files already opened through them stay open.
func (r *Roots) Close() error {
	if r == nil {
		return nil
	}
	r.closeOnce.Do(func() {
		var errs []error
		for _, root := range r.roots {
			errs = append(errs, root.Close())
		}
		r.closeErr = errors.Join(errs...)
	})
	return r.closeErr
}

// Resolve checks path lexically, without I/O: it must be absolute and, once cleaned, equal a
// root or lie under one. It returns that root and the name relative to it ("." for the root
// itself), through which every access must then go. field names the spec's field the path
// came with in errors, by its wire name ("input"; "": none). Resolve fails with [ErrUnconfined] on [Unconfined] roots, which have no
// [os.Root]: use the other methods, which work on both.
func (r *Roots) Resolve(field, path string) (*os.Root, string, error) {
	if r != nil && r.unconfined {
		return nil, "", r.newError(field, path, ErrUnconfined, "")
	}
	n, rel, err := r.resolve(field, path)
	if err != nil {
		return nil, "", err
	}
	return n.root, rel, nil
}

// resolve is Resolve, returning the root's name too; on Unconfined roots it returns a zero
// rootName and the path unchanged.
func (r *Roots) resolve(field, path string) (rootName, string, error) {
	switch {
	case r == nil:
		return rootName{}, "", r.newError(field, path, ErrNoRoots, "")
	case r.unconfined:
		if path == "" {
			return rootName{}, "", r.newError(field, path, ErrNotAbsolute, "")
		}
		return rootName{}, path, nil
	case path == "" || !filepath.IsAbs(path):
		return rootName{}, "", r.newError(field, path, ErrNotAbsolute, "")
	case len(r.dirs) == 0:
		return rootName{}, "", r.newError(field, path, ErrNoRoots, "")
	}
	p := filepath.Clean(path)
	for _, n := range r.names {
		if rel, ok := within(n.name, p); ok {
			return n, rel, nil
		}
	}
	return rootName{}, "", r.newError(field, path, ErrOutside, "")
}

// within returns p relative to dir when p is dir or lies under it; both are clean and
// absolute.
func within(dir, p string) (string, bool) {
	if p == dir {
		return ".", true
	}
	prefix := dir
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	if rel, ok := strings.CutPrefix(p, prefix); ok && rel != "" {
		return rel, true
	}
	return "", false
}

// fsys is what Roots do with files: an *os.Root, or the os package for Unconfined.
type fsys interface {
	OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error)
	Stat(name string) (fs.FileInfo, error)
	Lstat(name string) (fs.FileInfo, error)
	Remove(name string) error
	Link(oldname, newname string) error
	Rename(oldname, newname string) error
	MkdirAll(name string, perm fs.FileMode) error
}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}
func (osFS) Stat(name string) (fs.FileInfo, error)  { return os.Stat(name) }
func (osFS) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(name) }
func (osFS) Remove(name string) error               { return os.Remove(name) }
func (osFS) Link(oldname, newname string) error     { return os.Link(oldname, newname) }
func (osFS) Rename(oldname, newname string) error   { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(name string, perm fs.FileMode) error {
	return os.MkdirAll(name, perm)
}

// at resolves path to the file system and name to use.
func (r *Roots) at(field, path string) (fsys, string, rootName, error) {
	n, rel, err := r.resolve(field, path)
	if err != nil {
		return nil, "", n, err
	}
	if r.unconfined {
		return osFS{}, rel, n, nil
	}
	return n.root, rel, n, nil
}

// Open opens path for reading. On Unix it opens without blocking, so that a FIFO cannot hang
// the node (a reader must still check that it got a regular file, as matio does).
func (r *Roots) Open(field, path string) (*os.File, error) {
	return r.OpenFile(field, path, readFlags, 0)
}

// OpenFile opens path with the flags and permissions of [os.OpenFile], through its root.
func (r *Roots) OpenFile(field, path string, mode int, perm fs.FileMode) (*os.File, error) {
	fsys, rel, n, err := r.at(field, path)
	if err != nil {
		return nil, err
	}
	f, err := fsys.OpenFile(rel, mode, perm)
	if err != nil {
		if mode&os.O_EXCL != 0 && errors.Is(err, fs.ErrExist) {
			// Not --overwrite's business: a new file's name is taken, by a leftover or a plant.
			e := r.newError(field, path, ErrExists, n.dir).withMessage(" already exists and this job did not create it: refusing to use it (remove it if it is a leftover)")
			return nil, e
		}
		return nil, r.osError(field, path, n.dir, err)
	}
	return f, nil
}

// Opener returns [Roots.Open] for paths given as field, in the form matio.OpenWith takes.
func (r *Roots) Opener(field string) func(path string) (*os.File, error) {
	return func(path string) (*os.File, error) { return r.Open(field, path) }
}

// WriteOpener returns an opener of existing files for reading and writing (never creating
// one), for matio.WriteNPYRowsWith.
func (r *Roots) WriteOpener(field string) func(path string) (*os.File, error) {
	return func(path string) (*os.File, error) { return r.OpenFile(field, path, os.O_RDWR, 0) }
}

// CreateExclusive creates path, which must not exist (O_EXCL: not even as a symbolic link),
// for reading and writing. When it exists the error wraps [ErrExists].
func (r *Roots) CreateExclusive(field, path string, perm fs.FileMode) (*os.File, error) {
	return r.OpenFile(field, path, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
}

// Stat returns the FileInfo of path, following symbolic links inside its root.
func (r *Roots) Stat(field, path string) (fs.FileInfo, error) {
	fsys, rel, n, err := r.at(field, path)
	if err != nil {
		return nil, err
	}
	st, err := fsys.Stat(rel)
	if err != nil {
		return nil, r.osError(field, path, n.dir, err)
	}
	return st, nil
}

// CheckNew checks, before any work, that path could be made by [Roots.Commit]: it resolves,
// its directory exists in its root, and, unless overwrite, nothing has the name yet (the
// error then wraps [ErrExists]). Commit checks again: a file appearing in between is still
// not replaced.
func (r *Roots) CheckNew(field, path string, overwrite bool) error {
	fsys, rel, n, err := r.at(field, path)
	if err != nil {
		return err
	}
	if st, err := fsys.Stat(filepath.Dir(rel)); err != nil {
		return r.osError(field, path, n.dir, err)
	} else if !st.IsDir() {
		return r.newError(field, path, errNotDirParent, n.dir)
	}
	st, err := fsys.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return r.osError(field, path, n.dir, err)
	case st.IsDir():
		return r.newError(field, path, errIsDir, n.dir)
	case !overwrite:
		return r.newError(field, path, ErrExists, n.dir)
	}
	return nil
}

// MkdirAll makes the directory path and any parents it lacks, through its root (so that
// neither a symbolic link nor `..` can make one outside it); a directory that exists is fine.
func (r *Roots) MkdirAll(field, path string, perm fs.FileMode) error {
	fsys, rel, n, err := r.at(field, path)
	if err != nil {
		return err
	}
	if err := fsys.MkdirAll(rel, perm); err != nil {
		return r.osError(field, path, n.dir, err)
	}
	return nil
}

// Remove removes path (not following a symbolic link in its last element).
func (r *Roots) Remove(field, path string) error {
	fsys, rel, n, err := r.at(field, path)
	if err != nil {
		return err
	}
	if err := fsys.Remove(rel); err != nil {
		return r.osError(field, path, n.dir, err)
	}
	return nil
}

// Commit gives the file tmp its final name, in the same root. Unless overwrite is set it never
// replaces a file: it links tmp to final, which fails when final exists (the error wraps
// [ErrExists] and tmp stays), then removes tmp. On a file system without hard links it checks
// that final does not exist and renames, which a file created in between could race. With
// overwrite it renames, atomically replacing any file named final.
func (r *Roots) Commit(field, tmp, final string, overwrite bool) error {
	fsys, relTmp, nt, err := r.at(field, tmp)
	if err != nil {
		return err
	}
	_, relFinal, nf, err := r.at(field, final)
	if err != nil {
		return err
	}
	if nt.root != nf.root {
		return r.newError(field, final, errOtherRoot, nf.dir)
	}
	return r.commit(fsys, field, relTmp, relFinal, final, nf.dir, overwrite)
}

// commit is Commit in fsys, with names relative to it; final and root are for messages.
func (r *Roots) commit(fsys fsys, field, relTmp, relFinal, final, root string, overwrite bool) error {
	if overwrite {
		if err := fsys.Rename(relTmp, relFinal); err != nil {
			return r.osError(field, final, root, err)
		}
		return nil
	}
	err := fsys.Link(relTmp, relFinal)
	switch {
	case err == nil:
		_ = fsys.Remove(relTmp) // final is in place; a leftover second name of it is harmless
		return nil
	case errors.Is(err, fs.ErrExist):
		return r.newError(field, final, ErrExists, root)
	case !errors.Is(err, errors.ErrUnsupported) && !errors.Is(err, fs.ErrPermission):
		return r.osError(field, final, root, err)
	}
	// No hard links here (EPERM, EOPNOTSUPP): check, then rename.
	if _, err := fsys.Lstat(relFinal); err == nil {
		return r.newError(field, final, ErrExists, root)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return r.osError(field, final, root, err)
	}
	if err := fsys.Rename(relTmp, relFinal); err != nil {
		return r.osError(field, final, root, err)
	}
	return nil
}
