package sweep

import (
	"github.com/didnmf/didnmf/usererr"
)

// Every error of this package is about the input (a basis of the wrong length, a rank below
// 1, a NaN, two runs of the same rank and seed): a *usererr.Error, whose message starts with
// "sweep: ". Test for it with errors.Is(err, usererr.ErrUser).

// inputErrorf returns an error about the input whose message is "sweep: " and the formatted
// text.
func inputErrorf(format string, args ...any) error {
	return usererr.At("sweep", format, args...)
}
