package fsroot

import (
	"errors"
	"io/fs"
	"os"
)

// The reasons an [*Error] gives; test for them with errors.Is.
var (
	// ErrNotAbsolute: the path is relative (or empty); a node resolves only absolute paths.
	ErrNotAbsolute = errors.New("not an absolute path")
	// ErrOutside: the path does not lie under any of the node's data roots.
	ErrOutside = errors.New("outside the node's data roots")
	// ErrNoRoots: the node has no data roots (a nil *Roots, or Open with no directories).
	ErrNoRoots = errors.New("the node has no data roots")
	// ErrEscapes: the path lies under a root lexically, but the OS found that it leads out of
	// it (a symbolic link pointing outside, an absolute one, or one climbing out with ..).
	ErrEscapes = errors.New("leads outside its data root")
	// ErrExists: the file exists and would have been replaced. errors.Is(err, fs.ErrExist)
	// holds too.
	ErrExists = errors.New("already exists")
	// ErrUnconfined: Resolve was called on Unconfined roots, which have no os.Root.
	ErrUnconfined = errors.New("unconfined roots have no os.Root")

	errNotDirParent = errors.New("its directory is not a directory")
	errIsDir        = errors.New("is a directory")
	errOtherRoot    = errors.New("is in another data root than the temporary file")
)

// Error is every error of Roots' methods: the flag and path it is about, and why.
type Error struct {
	Flag string // where the path came from, e.g. "--input"
	Path string // the path as given
	// Err is one of the Err* reasons above, or the OS's error (a syscall.Errno, say: the
	// *fs.PathError around it is dropped, as Path says which file).
	Err error
	msg string
}

func (e *Error) Error() string { return e.msg }

// Unwrap returns Err, and fs.ErrExist for ErrExists.
func (e *Error) Unwrap() []error {
	if e.Err == ErrExists {
		return []error{e.Err, fs.ErrExist}
	}
	return []error{e.Err}
}

// Refused reports whether err is a refusal of a path by the node's confinement (not absolute,
// outside the roots, no roots, leading out of its root), rather than an I/O error or a file
// that exists.
func Refused(err error) bool {
	return errors.Is(err, ErrNotAbsolute) || errors.Is(err, ErrOutside) || errors.Is(err, ErrNoRoots) || errors.Is(err, ErrEscapes)
}

// newError builds the error for reason; root is the data root involved, when there is one.
func (r *Roots) newError(flag, path string, reason error, root string) *Error {
	if flag == "" {
		flag = "path"
	}
	subject := flag + " " + path
	if path == "" {
		subject = flag + " (empty)"
	}
	var msg string
	switch reason {
	case ErrNotAbsolute:
		msg = subject + " is not an absolute path: a node resolves only absolute paths, under its data roots " + r.String()
	case ErrOutside:
		msg = subject + " is outside the node's data roots " + r.String() + ": use a path under one of them, or start the node with --data-root"
	case ErrNoRoots:
		msg = subject + ": the node has no data roots, so it reads and writes no file of a job: start it with --data-root DIR"
	case ErrEscapes:
		msg = subject + " leads outside the data root " + root + " (through a symbolic link that points outside, is absolute, or climbs out with ..): refused"
	case ErrExists:
		msg = subject + " already exists and this job did not create it: give --overwrite to replace it"
	case ErrUnconfined:
		msg = subject + ": Resolve on unconfined roots (use their Open, OpenFile, ... methods)"
	default:
		msg = subject + " " + reason.Error()
	}
	return &Error{Flag: flag, Path: path, Err: reason, msg: msg}
}

// osError turns an error of an os.Root (or os) operation on path into an *Error: an escape
// from the root becomes ErrEscapes, anything else keeps the OS's reason.
func (r *Roots) osError(flag, path, root string, err error) error {
	inner := err
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		inner = pe.Err
	case errors.As(err, &le):
		inner = le.Err
	}
	// os.Root's error for an escape is not exported; its text is stable (and tested).
	if inner != nil && inner.Error() == "path escapes from parent" {
		return r.newError(flag, path, ErrEscapes, root)
	}
	e := r.newError(flag, path, inner, root)
	e.msg = e.Flag + " " + path + ": " + inner.Error()
	return e
}
