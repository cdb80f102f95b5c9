package matio

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing [off, off+n) of f to the disk now, without
// waiting for it (sync_file_range with SYNC_FILE_RANGE_WRITE). It is advice: an error (a file
// system without it) changes nothing, and fsync still decides durability.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
