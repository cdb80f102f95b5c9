//go:build !unix

package pki

import "io/fs"

// fileOwner is unknown on this system.
func fileOwner(fs.FileInfo) (int, bool) { return 0, false }
