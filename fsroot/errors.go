package fsroot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/didnmf/didnmf/usererr"
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

// Error is every error of Roots' methods: the job spec's field and path it is about, and why.
//
// Its message names the field as {field} (see package usererr): Error reads it as the field's
// own name ("input /etc/shadow is outside ..."), and the *usererr.Error of UserError lets a
// front end name it its way (the CLI's "--input", the HTTP API's "input").
type Error struct {
	Field string // the spec's field the path came with, by its wire name ("input"), or ""
	Path  string // the path as given
	// Err is one of the Err* reasons above, or the OS's error (a syscall.Errno, say: the
	// *fs.PathError around it is dropped, as Path says which file).
	Err error
	// format and args make the message, with the field as {field} (usererr.Field's form).
	format string
	args   []any
}

func (e *Error) Error() string { return e.UserError().Error() }

// UserError returns e as the user's to fix: a *usererr.Error about e's field whose message is
// e's, with the field named as {field}, and e as its cause (so errors.Is(err, ErrOutside) still
// holds). A refused path or a missing file is the user's to fix when the job is checked; Roots'
// errors themselves do not wrap usererr.ErrUser, as a write failing during a run is not.
func (e *Error) UserError() *usererr.Error {
	ue := usererr.Field(e.Field, e.format, e.args...)
	ue.Err = e
	return ue
}

// User returns err's *usererr.Error when err is (or wraps) an *Error (see UserError), and err
// as it is otherwise.
func User(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Error() == err.Error() {
		return e.UserError()
	}
	return err
}

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
// field is the spec's field (a wire name, e.g. "input"; "": a path of no field).
func (r *Roots) newError(field, path string, reason error, root string) *Error {
	subject, args := subjectOf(field, path)
	var format string
	switch reason {
	case ErrNotAbsolute:
		format, args = subject+" is not an absolute path: a node resolves only absolute paths, under its data roots %s", append(args, r.String())
	case ErrOutside:
		// Advice to the node's operator names serve's flag, whatever front end the job came by.
		format, args = subject+" is outside the node's data roots %s: use a path under one of them (or start the node with serve --data-root DIR)", append(args, r.String())
	case ErrNoRoots:
		format = subject + ": the node has no data roots, so it reads and writes no file of a job (start it with serve --data-root DIR)"
	case ErrEscapes:
		format, args = subject+" leads outside the data root %s (through a symbolic link that points outside, is absolute, or climbs out with ..): refused", append(args, root)
	case ErrExists:
		format = subject + " already exists and this job did not create it: give {overwrite} to replace it"
	case ErrUnconfined:
		format = subject + ": Resolve on unconfined roots (use their Open, OpenFile, ... methods)"
	default:
		format, args = subject+" %s", append(args, reason.Error())
	}
	return &Error{Field: field, Path: path, Err: reason, format: format, args: args}
}

// subjectOf returns the start of a message about path of field: a format naming the field as
// {field} (or "path" for none), and its arguments.
func subjectOf(field, path string) (string, []any) {
	name := "{" + field + "}"
	if field == "" {
		name = "path"
	}
	if path == "" {
		return name + " (empty)", nil
	}
	return name + " %s", []any{path}
}

// withMessage sets e's message to the subject (field and path) followed by the formatted rest.
func (e *Error) withMessage(format string, args ...any) *Error {
	subject, sargs := subjectOf(e.Field, e.Path)
	e.format, e.args = subject+"%s", append(sargs, fmt.Sprintf(format, args...))
	return e
}

// osError turns an error of an os.Root (or os) operation on path into an *Error: an escape
// from the root becomes ErrEscapes, anything else keeps the OS's reason.
func (r *Roots) osError(field, path, root string, err error) error {
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
		return r.newError(field, path, ErrEscapes, root)
	}
	return r.newError(field, path, inner, root).withMessage(": %v", inner)
}
