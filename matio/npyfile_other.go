//go:build !linux

package matio

import "os"

// startWriteback does nothing where sync_file_range does not exist.
func startWriteback(f *os.File, off, n int64) {}
