package matio

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strings"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/usererr"
)

// Every error from Open, OpenAll, Read and ReadNPYMatrix (and their ...With variants) that is
// about the input (its content, its format or reading it, including I/O errors such as a
// missing file, and an Opener's refusal) is a *usererr.Error: errors.Is(err, usererr.ErrUser)
// tells it from a failure.

// inputErrorf returns an error about input name: "name: " followed by the formatted message.
func inputErrorf(name, format string, args ...any) error {
	return usererr.At(name, format, args...)
}

// ioError wraps an I/O error met while doing what (e.g. "cannot open", "read error").
func ioError(name, what string, err error) error {
	if err == nil {
		return nil
	}
	if usererr.Is(err) {
		return err
	}
	return usererr.New(fmt.Sprintf("%s: %s: %v", name, what, causeText(err)), err)
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
// way to keep NaN entries, as missing values, when the value is NaN: the job spec's field
// named {missing} (package usererr), which each front end names its way (the CLI's
// "--missing nan"). It holds no '%' and no value: the callers put it in their format.
func ruleFor(what string) string {
	if strings.HasPrefix(what, "NaN") {
		return entryRule + ": to read NaN entries as missing values, give {missing}"
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
		return false, inputErrorf(name, "sample %d, feature %d (0-based): %s "+ruleFor(badValue(v)), j, i, badValue(v))
	}
	return sawNaN, nil
}
