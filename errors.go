package didnmf

import (
	"errors"

	"github.com/didnmf/didnmf/actors"
	"github.com/didnmf/didnmf/jobspec"
)

// InputError is an error that is the user's to fix: an input that cannot be read, a spec the
// data refuses, a job a cluster refused for its input. A *jobspec.FieldError, which names the
// spec's field, is one as well (see IsInput).
type InputError struct{ Err error }

// Error returns the underlying error's message.
func (e *InputError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *InputError) Unwrap() error { return e.Err }

// IsInput reports whether err is the user's to fix (the CLI exits with status 2 for those):
// an *InputError, a *jobspec.FieldError, or a job a node refused for its input.
func IsInput(err error) bool {
	var ie *InputError
	var fe *jobspec.FieldError
	var je *actors.JobError
	return errors.As(err, &ie) || errors.As(err, &fe) || (errors.As(err, &je) && je.Kind == actors.KindInput)
}

// inputErr wraps err as an *InputError (nil stays nil).
func inputErr(err error) error {
	if err == nil {
		return nil
	}
	return &InputError{Err: err}
}
