//go:build linux && !race && !msan && !asan

package rawio

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sysRead is one recv on the socket fd into the non-empty b. MSG_DONTWAIT makes it return
// EAGAIN rather than wait even if the descriptor was made blocking (File does that): a raw
// call that waited would hold its P and stop the world's next stop (GC) for good.
func sysRead(fd uintptr, b []byte) (int, syscall.Errno) {
	r, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), unix.MSG_DONTWAIT, 0, 0)
	return int(r), e
}

// sysWrite is one send of the non-empty b on the socket fd, which does not wait (see sysRead)
// and raises no SIGPIPE on a connection the other end reset.
func sysWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	r, _, e := unix.RawSyscall6(unix.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, 0, 0)
	return int(r), e
}
