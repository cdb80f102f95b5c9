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
// raw system calls on the descriptor inside syscall.RawConn's Read and Write, which keep the
// connection's deadlines, its locking and its poller.
//
// The calls are recv and send with MSG_DONTWAIT, so that they never wait even on a
// descriptor someone made blocking (File does): a raw call that waited would hold its P, and
// the next stop of the world (a GC) would never come. Sends raise no SIGPIPE
// (MSG_NOSIGNAL). Everything else (Close, deadlines, addresses) is the wrapped
// *net.TCPConn's; a Conn has no other methods, so nothing goes around its Read and Write.
//
// Under the race detector (and msan, asan) the calls are package syscall's Read and Write,
// whose annotations tell the detector that what a goroutine did before writing to a
// connection happens before what its reader does after reading.
package rawio
