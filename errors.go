package didnmf

import (
	"github.com/didnmf/didnmf/usererr"
)

// IsInput reports whether err is the user's to fix (the CLI exits with status 2 for those):
// errors.Is(err, usererr.ErrUser). An input that cannot be read, a spec a rule refuses (a
// *usererr.Error naming its field), a job a node refused for its input: each is one.
func IsInput(err error) bool { return usererr.Is(err) }

// inputErr marks err as the user's to fix (nil stays nil).
func inputErr(err error) error { return usererr.Wrap(err) }
