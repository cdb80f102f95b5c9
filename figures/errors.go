package figures

import (
	"github.com/didnmf/didnmf/usererr"
)

// ErrInput is wrapped by every error of this package that is about its input: a missing,
// truncated or malformed report.json or basis.npy, a field of the wrong type or out of range,
// files that contradict each other, or an image shape that does not fit the features. Test for
// it with errors.Is: the other errors (writing the pictures, say) are failures. It is
// usererr.ErrUser, the one error of what is the user's to fix: a bad result directory is bad
// input as a bad matrix file is.
var ErrInput = usererr.ErrUser

// inputErrorf returns an error about the input whose message is the formatted text.
func inputErrorf(format string, args ...any) error {
	return usererr.Errorf(format, args...)
}

// wrapInput marks err, whose message already names the file, as an error about the input.
func wrapInput(err error) error {
	return usererr.New(err.Error(), err)
}
