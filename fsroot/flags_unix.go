//go:build unix

package fsroot

import (
	"os"
	"syscall"
)

// readFlags opens for reading without blocking on a FIFO; reads of regular files are
// unaffected.
const readFlags = os.O_RDONLY | syscall.O_NONBLOCK
