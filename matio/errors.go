package matio

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strings"

	"github.com/didnmf/didnmf/kernels"
)

// ErrInput is wrapped by every error from Open, OpenAll, Read and ReadNPYMatrix (and their
// ...With variants) that is about the input (its content, its format or reading it, including
// I/O errors such as a missing file, and an Opener's refusal). Test for it with errors.Is.
var ErrInput = errors.New("bad input")

// inputError is an error about an input; it wraps ErrInput and, when there is one, the
// underlying cause (an I/O error, say).
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

// InputError returns an error about an input with the message msg that wraps ErrInput and,
// when it is not nil, cause: for packages that read inputs of their own (figures reads
// report.json) and report them as this package does.
func InputError(msg string, cause error) error { return &inputError{msg: msg, cause: cause} }

// inputErrorf returns an error about input name: "name: " followed by the formatted message.
func inputErrorf(name, format string, args ...any) error {
	return &inputError{msg: name + ": " + fmt.Sprintf(format, args...)}
}

// ioError wraps an I/O error met while doing what (e.g. "cannot open", "read error").
func ioError(name, what string, err error) error {
	if err == nil {
		return nil
	}
	var ie *inputError
	if errors.As(err, &ie) {
		return err
	}
	return &inputError{msg: fmt.Sprintf("%s: %s: %v", name, what, causeText(err)), cause: err}
}

// causeText drops the path that os errors repeat, since our message already starts with it.
func causeText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Err != nil {
		return pe.Err.Error()
	}
	return err.Error()
}

// badValue describes a value NMF cannot take, or returns "" when v is finite and nonnegative.
func badValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN value"
	case math.IsInf(v, 0):
		return fmt.Sprintf("infinite value %v", v)
	case v < 0:
		return fmt.Sprintf("negative value %v", v)
	}
	return ""
}

const entryRule = "(NMF needs finite nonnegative entries)"

// ruleFor is entryRule for a sample's bad value described by what (see badValue), with the
// way to keep NaN entries, as missing values, when the value is NaN.
func ruleFor(what string) string {
	if strings.HasPrefix(what, "NaN") {
		return entryRule + ": give --missing nan to read NaN entries as missing values"
	}
	return entryRule
}

// checkDense validates the entries of d, a block of X whose column 0 is sample lo of the file,
// and turns negative zeros into zeros (so that a block has the same bits whether it went
// through CSC form or not). matrix switches the wording from sample/feature to row/column (for
// factor files). With missing (ReadOptions.Missing), a NaN entry is a missing value, stored
// as missingNaN, and sawNaN reports that there was one.
func checkDense(name string, d *kernels.Dense, lo int, matrix, missing bool) (sawNaN bool, err error) {
	for p, v := range d.Data {
		if v >= 0 && v <= math.MaxFloat64 {
			if v == 0 {
				d.Data[p] = 0
			}
			continue
		}
		if isMissing(v, missing) {
			d.Data[p] = missingNaN
			sawNaN = true
			continue
		}
		i, j := p%d.Rows, lo+p/d.Rows
		if matrix {
			return false, inputErrorf(name, "row %d, column %d (0-based): %s %s", j, i, badValue(v), entryRule)
		}
		return false, inputErrorf(name, "sample %d, feature %d (0-based): %s %s", j, i, badValue(v), ruleFor(badValue(v)))
	}
	return sawNaN, nil
}
