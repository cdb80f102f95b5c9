package actors

import (
	"context"
	"errors"
	"net"
	"sync"
)

// dialedConns are the connections a node's remote has dialed, so that closing the node closes
// them. protoactor's remote, shut down without grace (Node.Close), stops its server but leaves
// the endpoint writers' gRPC connections open: a client process that connects and closes
// again (a Go program, a sweep, the tests) would keep one stream open at every node it talked
// to, and each node counts a client's streams against its identity's bound (limits_identity.go).
// Its methods may be called from any goroutine.
type dialedConns struct {
	mu     sync.Mutex
	conns  map[*dialedConn]struct{}
	closed bool
}

// errNodeClosed refuses a dial of a node that is closed.
var errNodeClosed = errors.New("the node is closed")

// dial dials addr with next and keeps the connection until it is closed.
func (d *dialedConns) dial(ctx context.Context, addr string, next func(context.Context, string) (net.Conn, error)) (net.Conn, error) {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, errNodeClosed
	}
	c, err := next(ctx, addr)
	if err != nil {
		return nil, err
	}
	dc := &dialedConn{Conn: c, d: d}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		c.Close()
		return nil, errNodeClosed
	}
	if d.conns == nil {
		d.conns = map[*dialedConn]struct{}{}
	}
	d.conns[dc] = struct{}{}
	return dc, nil
}

// closeAll closes every connection dialed and refuses new dials.
func (d *dialedConns) closeAll() {
	d.mu.Lock()
	d.closed = true
	conns := d.conns
	d.conns = nil
	d.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
}

// open is how many dialed connections are open.
func (d *dialedConns) open() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns)
}

// dialedConn forgets itself when closed.
type dialedConn struct {
	net.Conn
	d    *dialedConns
	once sync.Once
}

func (c *dialedConn) Close() error {
	c.once.Do(func() {
		c.d.mu.Lock()
		delete(c.d.conns, c)
		c.d.mu.Unlock()
	})
	return c.Conn.Close()
}
