package rawio

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// Conn is a TCP connection whose Read and Write are raw non-blocking system calls. Its
// methods may be called from any goroutine, as a *net.TCPConn's; reads wait for each other,
// and so do writes. It has only net.Conn's methods, so that nothing (io.Copy's ReadFrom and
// WriteTo, say) goes around its Read and Write.
type Conn struct {
	net.Conn    // the *net.TCPConn: Close, deadlines, addresses
	read, write op
}

// op is one direction of a Conn: the buffer of the call under way and what it gave, filled
// by fn, which the RawConn's Read or Write (wait) calls until it returns true.
type op struct {
	mu    sync.Mutex
	buf   []byte
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool // made once, as wait is: a closure per call would be allocated
	wait  func(func(fd uintptr) bool) error
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
	rc := &Conn{Conn: tc}
	rc.read.fn, rc.read.wait = rc.read.readOnce, raw.Read
	rc.write.fn, rc.write.wait = rc.write.writeAll, raw.Write
	return rc
}

// Raw reports whether c reads and writes with raw system calls (is a Conn).
func Raw(c net.Conn) bool {
	_, ok := c.(*Conn)
	return ok
}

// Read reads up to len(b) bytes, waiting (under the read deadline) until some arrive. It
// returns io.EOF once the other end has closed its side.
func (c *Conn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, err := c.read.do(b)
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of b, waiting (under the write deadline) while the socket's buffer is
// full. On an error it returns how much was written.
func (c *Conn) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, err := c.write.do(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite // the system call wrote nothing and said nothing
	}
	return n, c.opError("write", err)
}

// do runs o's system call on b, one call at a time, and returns what it transferred and its
// error: the poller's (a deadline, a closed connection) or the system call's.
func (o *op) do(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf, o.n, o.errno = b, 0, 0
	err := o.wait(o.fn)
	n, errno := o.n, o.errno
	o.buf = nil
	if err == nil && errno != 0 {
		err = errno
	}
	return n, err
}

// opError returns err as the net package gives a TCP connection's errors: a system call's
// errno wrapped in a *net.OpError, and the poller's (a deadline, a closed connection), which
// the RawConn names "raw-read" or "raw-write", under the name of the call.
func (c *Conn) opError(name string, err error) error {
	switch e := err.(type) {
	case syscall.Errno:
		return &net.OpError{Op: name, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError(name, e)}
	case *net.OpError:
		named := *e
		named.Op = name
		return &named
	}
	return err
}

// readOnce reads into o.buf from fd, and tells whether it is done: false when nothing has
// arrived yet, so that the poller waits for the socket.
func (o *op) readOnce(fd uintptr) bool {
	for {
		n, e := sysRead(fd, o.buf)
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		o.n, o.errno = n, e
		return true
	}
}

// writeAll writes what is left of o.buf to fd, and tells whether it is done: false when the
// socket's buffer is full, so that the poller waits for room.
func (o *op) writeAll(fd uintptr) bool {
	for o.n < len(o.buf) {
		n, e := sysWrite(fd, o.buf[o.n:])
		switch {
		case e == 0 && n > 0:
			o.n += n
		case e == 0:
			return true // nothing written and no error: Write reports a short write
		case e == syscall.EINTR:
		case e == syscall.EAGAIN:
			return false
		default:
			o.errno = e
			return true
		}
	}
	return true
}
