package actors

import (
	"sync"

	"golang.org/x/sys/unix"
)

// raiseDescriptorLimit raises the process's soft limit of open descriptors (RLIMIT_NOFILE)
// to its hard limit, once, and returns the soft limit then in force. Go's runtime does the
// same at start on Linux; doing it here again keeps it true when something lowered the limit
// since. The budgets of the node's ports are fractions of it (see budgets).
func raiseDescriptorLimit() uint64 {
	raiseOnce.Do(func() {
		var r unix.Rlimit
		if unix.Getrlimit(unix.RLIMIT_NOFILE, &r) != nil {
			nofile = defaultDescriptors
			return
		}
		if r.Cur < r.Max {
			raised := r
			raised.Cur = raised.Max
			if unix.Setrlimit(unix.RLIMIT_NOFILE, &raised) == nil {
				r = raised
			}
		}
		nofile = r.Cur
	})
	return nofile
}

var (
	raiseOnce sync.Once
	nofile    uint64
)

// defaultDescriptors is the descriptor limit assumed when it cannot be read.
const defaultDescriptors = 1024
