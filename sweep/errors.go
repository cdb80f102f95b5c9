package sweep

import (
	"errors"
	"fmt"
)

// ErrInput is wrapped by every error of this package: all of them are about the input (a
// basis of the wrong length, a rank below 1, a NaN, two runs of the same rank and seed).
// Test for it with errors.Is.
var ErrInput = errors.New("bad input")

// inputError is an error about the input: its message, and ErrInput underneath.
type inputError struct{ msg string }

func (e *inputError) Error() string { return "sweep: " + e.msg }
func (e *inputError) Unwrap() error { return ErrInput }

// inputErrorf returns an error about the input whose message is the formatted text.
func inputErrorf(format string, args ...any) error {
	return &inputError{msg: fmt.Sprintf(format, args...)}
}
