//go:build unix

package server

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive lock on dir's lock file, so that two nodes never share a data
// directory; the lock goes with the process, even on kill -9.
func lockDir(dir string) (func(), error) {
	path := filepath.Join(dir, "node.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("--data-dir %s %w (%v)", dir, errLocked, err)
	}
	return func() { f.Close() }, nil
}
