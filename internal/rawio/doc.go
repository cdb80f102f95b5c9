// Package rawio gives TCP connections reads and writes that are raw non-blocking system
// calls, out of sight of the Go scheduler.
//
// # Why
//
// A node is idle between two collectives (an allreduce every few milliseconds) and busy in
// between. The Go runtime's monitor thread (sysmon) sleeps deeply while every P is idle, and
// when a goroutine then enters a system call through package syscall — the read of the
// message that ends the wait — it is woken, and polls every 20 µs for at least the next
// millisecond, each poll a context switch on a core the node's workers need. On three
// node processes sharing two cores that was 59% of all voluntary context switches, and about
// 200 000 switches in a 10 s run of `node bench --procs 3` (the 1e6 job) instead of 125 000.
//
// A socket of the net package is non-blocking: a read or write returns at once, with
// EAGAIN when it would block, and the net package then parks the goroutine until the
// network poller reports the socket ready. Such a call needs none of what the syscall
// package's bookkeeping (entersyscall, exitsyscall) is for, which is to hand the P to
// another thread while a call blocks. Wrap makes the connection's Read and Write that:
// unix.RawSyscall on the descriptor inside syscall.RawConn's Read and Write, which keep the
// connection's deadlines, its locking and its poller.
//
// Everything else (Close, deadlines, addresses) is the wrapped *net.TCPConn's.
package rawio
