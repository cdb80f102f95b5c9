package figures

import (
	"fmt"

	"github.com/didnmf/didnmf/matio"
)

// ErrInput is wrapped by every error of this package that is about its input: a missing,
// truncated or malformed report.json or basis.npy, a field of the wrong type or out of range,
// files that contradict each other, or an image shape that does not fit the features. Test for
// it with errors.Is: the other errors (writing the pictures, say) are failures. It is matio's:
// a bad result directory is bad input as a bad matrix file is.
var ErrInput = matio.ErrInput

// inputErrorf returns an error about the input whose message is the formatted text.
func inputErrorf(format string, args ...any) error {
	return matio.InputError(fmt.Sprintf(format, args...), nil)
}

// wrapInput marks err, whose message already names the file, as an error about the input.
func wrapInput(err error) error {
	return matio.InputError(err.Error(), err)
}
