package figures

import (
	"errors"
	"fmt"
)

// ErrInput is wrapped by every error of this package that is about its input: a missing,
// truncated or malformed report.json or basis.npy, a field of the wrong type or out of range,
// files that contradict each other, or an image shape that does not fit the features. Test for
// it with errors.Is: the other errors (writing the pictures, say) are failures.
var ErrInput = errors.New("bad input")

// inputError is an error about the input: it wraps ErrInput and, when there is one, the
// underlying cause (an I/O error, or one of matio's errors).
type inputError struct {
	msg   string
	cause error
}

func (e *inputError) Error() string { return e.msg }

func (e *inputError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrInput}
	}
	return []error{ErrInput, e.cause}
}

// inputErrorf returns an error about the input whose message is the formatted text.
func inputErrorf(format string, args ...any) error {
	return &inputError{msg: fmt.Sprintf(format, args...)}
}

// wrapInput marks err, whose message already names the file, as an error about the input.
func wrapInput(err error) error {
	return &inputError{msg: err.Error(), cause: err}
}
