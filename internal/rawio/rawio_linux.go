package rawio

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Conn is a TCP connection whose Read and Write are raw non-blocking system calls. Its
// methods may be called from any goroutine, as a *net.TCPConn's; reads wait for each other,
// and so do writes.
type Conn struct {
	*net.TCPConn
	raw syscall.RawConn

	rmu    sync.Mutex
	rbuf   []byte // the buffer of the Read under way
	rn     int
	rerrno syscall.Errno
	readFn func(fd uintptr) bool // made once: a closure per call would be allocated

	wmu     sync.Mutex
	wbuf    []byte // what the Write under way has left to write
	wn      int
	werrno  syscall.Errno
	writeFn func(fd uintptr) bool
}

// Wrap returns c with raw reads and writes when it is a *net.TCPConn, and c otherwise.
func Wrap(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	rc := &Conn{TCPConn: tc, raw: raw}
	rc.readFn, rc.writeFn = rc.readOnce, rc.writeAll
	return rc
}

// Read reads up to len(b) bytes, waiting (under the read deadline) until some arrive. It
// returns io.EOF once the other end has closed its side.
func (c *Conn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.rbuf, c.rn, c.rerrno = b, 0, 0
	err := c.raw.Read(c.readFn)
	n, errno := c.rn, c.rerrno
	c.rbuf = nil
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("read", errno)}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// readOnce reads into c.rbuf from fd, and tells whether it is done: false when nothing has
// arrived yet, so that the poller waits for the socket.
func (c *Conn) readOnce(fd uintptr) bool {
	for {
		r, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&c.rbuf[0])), uintptr(len(c.rbuf)))
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		c.rn, c.rerrno = int(r), e
		return true
	}
}

// Write writes all of b, waiting (under the write deadline) while the socket's buffer is
// full. On an error it returns how much was written.
func (c *Conn) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf, c.wn, c.werrno = b, 0, 0
	err := c.raw.Write(c.writeFn)
	n, errno := c.wn, c.werrno
	c.wbuf = nil
	if err == nil && errno != 0 {
		err = &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("write", errno)}
	}
	return n, err
}

// writeAll writes what is left of c.wbuf to fd, and tells whether it is done: false when
// the socket's buffer is full, so that the poller waits for room.
func (c *Conn) writeAll(fd uintptr) bool {
	for c.wn < len(c.wbuf) {
		left := c.wbuf[c.wn:]
		r, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&left[0])), uintptr(len(left)))
		switch e {
		case 0:
			c.wn += int(r)
		case unix.EINTR:
		case unix.EAGAIN:
			return false
		default:
			c.werrno = e
			return true
		}
	}
	return true
}
