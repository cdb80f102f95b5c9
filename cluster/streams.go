package cluster

import (
	"net"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/memberlist"

	"github.com/didnmf/didnmf/internal/slots"
)

// Anyone who reaches a node's gossip port can open TCP connections to it. memberlist serves
// each in a goroutine of its own until Timing.TCPTimeout, whatever the connection carries
// (the gossip is encrypted, so a party without the key gets nothing else from it), and sets
// no bound on how many it serves at once: a party opening connections faster than they time
// out would take every descriptor of the node's process.
//
// limitedStreams therefore hands memberlist at most maxStreams connections at a time, and
// maxStreamsPerIP from one address (see package slots). When they are all taken, a newcomer
// is not refused: the oldest connection of the address holding the most is closed instead,
// or, when the newcomer's own address holds its share, that address's oldest
// (Membership.RefusedStreams counts them). An address is a weak identity (every local user
// owns 127.0.0.0/8: idle connections from 127.0.0.2-.5 held every slot and kept clients and
// members out), so a flood only pushes out its own connections while a member's push/pull or
// a client's request gets its slot. Memberlist's own deadline (Timing.TCPTimeout, 2 s)
// bounds how long a connection that sends nothing holds one. A node's own gossip uses a few:
// a push/pull with a peer every interval, a join, the TCP fallback of a probe.
const (
	maxStreams      = 128
	maxStreamsPerIP = 32
)

// limitedStreams wraps a memberlist transport so that its incoming streams are bounded. Its
// methods may be called from any goroutine.
type limitedStreams struct {
	memberlist.Transport
	out     chan net.Conn
	stop    chan struct{} // closed by Shutdown
	gone    chan struct{} // closed once the wrapped transport has shut down
	once    sync.Once
	refused atomic.Int64
	served  *slots.Limiter // the streams memberlist has, by remote address (evicting when full)
}

// limitStreams wraps t and starts passing its streams on.
func limitStreams(t memberlist.Transport) *limitedStreams {
	l := &limitedStreams{Transport: t, out: make(chan net.Conn), stop: make(chan struct{}), gone: make(chan struct{}), served: slots.New(maxStreams, maxStreamsPerIP)}
	go l.pass(t.StreamCh())
	return l
}

// pass hands memberlist the streams within the limits until Shutdown, then closes those the
// wrapped transport still accepts until it has shut down (its listener waits for each to be
// taken).
func (l *limitedStreams) pass(in <-chan net.Conn) {
	defer func() {
		for {
			select {
			case c := <-in:
				c.Close()
			case <-l.gone:
				return
			}
		}
	}()
	for {
		select {
		case c := <-in:
			slot := l.served.Take(slots.RemoteIP(c), func() {
				l.refused.Add(1)
				c.Close()
			})
			select {
			case l.out <- &limitedConn{Conn: c, done: func() { slot.Release() }}:
			case <-l.stop:
				c.Close()
				return
			}
		case <-l.stop:
			return
		}
	}
}

// StreamCh implements memberlist.Transport: the streams within the limits.
func (l *limitedStreams) StreamCh() <-chan net.Conn { return l.out }

// Shutdown implements memberlist.Transport. It may be called more than once.
func (l *limitedStreams) Shutdown() error {
	first := false
	l.once.Do(func() { close(l.stop); first = true })
	err := l.Transport.Shutdown()
	if first {
		close(l.gone)
	}
	return err
}

// limitedConn gives its stream's slot back when memberlist closes it (once).
type limitedConn struct {
	net.Conn
	once sync.Once
	done func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.done)
	return err
}
