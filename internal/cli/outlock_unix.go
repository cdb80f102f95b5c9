//go:build unix

package cli

import (
	"os"
	"syscall"
)

// lockOutDir takes an exclusive lock on the directory dir itself (flock on its descriptor: no
// file is left in it), so that two commands never write into one --out at once; the lock goes
// with the process, even on kill -9. held is true when another process holds it.
func lockOutDir(dir string) (unlock func(), held bool, err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if err == syscall.EWOULDBLOCK {
			return nil, true, nil
		}
		return nil, false, err
	}
	return func() { f.Close() }, false, nil
}
