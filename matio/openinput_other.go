//go:build !unix

package matio

import "os"

// openNonBlocking opens path read-only; where there are no FIFOs to block on, as os.Open.
func openNonBlocking(path string) (*os.File, error) {
	return os.Open(path)
}
