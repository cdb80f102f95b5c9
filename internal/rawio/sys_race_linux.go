//go:build linux && (race || msan || asan)

package rawio

import "syscall"

// Under the race detector (and the memory and address sanitizers) the calls are package
// syscall's: its Read and Write tell the detector that a write to a socket happens before
// the read of its bytes and that the kernel filled the read's buffer, which raw calls
// cannot. Race builds are for finding races, not for speed.

// sysRead is one read of the socket fd into b.
func sysRead(fd uintptr, b []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), b)
	return max(n, 0), errnoOf(err)
}

// sysWrite is one write of b on the socket fd.
func sysWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), b)
	return max(n, 0), errnoOf(err)
}

// errnoOf returns err's errno, 0 for nil.
func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EIO
}
