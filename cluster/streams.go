package cluster

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

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

// The gossip port is also the cluster's front door for clients (see Config.FrontDoor): the
// first byte of every stream tells a client from gossip. memberlist's streams start with its
// label byte (hasLabelMsg, 244: every node of a didnmf cluster sets the label "didnmf") or,
// from a node without a label, a message type (0 to 13) or an encryption version (0, 1). A
// TLS record starts with its content type, 0x16 (22) for the ClientHello, and a client of a
// cluster without credentials starts with FrontDoorPlain: neither is any of those.
const (
	// FrontDoorPlain is the first byte a client of a cluster without credentials (--insecure)
	// sends to a member's gossip port to ask for the cluster's view.
	FrontDoorPlain byte = 'D'
	// frontDoorTLS is the first byte of a TLS ClientHello (a handshake record).
	frontDoorTLS byte = 0x16
	// firstByteWait bounds the wait for a stream's first byte: a connection that sends
	// nothing gives its slot back after it.
	firstByteWait = 2 * time.Second
)

// limitedStreams wraps a memberlist transport so that its incoming streams are bounded, and
// hands the streams of clients to the front door; it counts the bytes of every packet and
// stream (Membership.GossipBytes). Its methods may be called from any goroutine.
type limitedStreams struct {
	memberlist.Transport
	frontDoor func(net.Conn) // Config.FrontDoor; nil closes clients' streams
	out       chan net.Conn
	stop      chan struct{} // closed by Shutdown
	gone      chan struct{} // closed once the wrapped transport has shut down
	once      sync.Once
	refused   atomic.Int64
	served    *slots.Limiter // the streams memberlist has, by remote address (evicting when full)
	// sent and received count the bytes of the gossip port's packets and streams (the
	// front door's included), as memberlist writes and reads them.
	sent, received atomic.Int64
	packets        chan *memberlist.Packet
}

// limitStreams wraps t and starts passing its streams on: gossip to memberlist, clients'
// streams to frontDoor (nil: closed).
func limitStreams(t memberlist.Transport, frontDoor func(net.Conn)) *limitedStreams {
	l := &limitedStreams{Transport: t, frontDoor: frontDoor, out: make(chan net.Conn), stop: make(chan struct{}), gone: make(chan struct{}), served: slots.New(maxStreams, maxStreamsPerIP),
		packets: make(chan *memberlist.Packet)}
	go l.pass(t.StreamCh())
	go l.count(t.PacketCh())
	return l
}

// count passes the transport's packets on to memberlist, counting their bytes, until
// Shutdown; then it drops those the wrapped transport still receives until it has shut down
// (its listener waits for each to be taken).
func (l *limitedStreams) count(in <-chan *memberlist.Packet) {
	defer func() {
		for {
			select {
			case <-in:
			case <-l.gone:
				return
			}
		}
	}()
	for {
		select {
		case p := <-in:
			l.received.Add(int64(len(p.Buf)))
			select {
			case l.packets <- p:
			case <-l.stop:
				return
			}
		case <-l.stop:
			return
		}
	}
}

// PacketCh implements memberlist.Transport: the packets received, counted.
func (l *limitedStreams) PacketCh() <-chan *memberlist.Packet { return l.packets }

// WriteTo implements memberlist.Transport: a packet sent, counted.
func (l *limitedStreams) WriteTo(b []byte, addr string) (time.Time, error) {
	at, err := l.Transport.WriteTo(b, addr)
	if err == nil {
		l.sent.Add(int64(len(b)))
	}
	return at, err
}

// DialTimeout implements memberlist.Transport: a stream this node opens, counted.
func (l *limitedStreams) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	c, err := l.Transport.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	return &trafficConn{Conn: c, l: l}, nil
}

// trafficConn counts the bytes of a gossip stream in its limitedStreams.
type trafficConn struct {
	net.Conn
	l *limitedStreams
}

func (c *trafficConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.l.received.Add(int64(n))
	return n, err
}

func (c *trafficConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.l.sent.Add(int64(n))
	return n, err
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
			go l.route(&limitedConn{Conn: &trafficConn{Conn: c, l: l}, done: func() { slot.Release() }})
		case <-l.stop:
			return
		}
	}
}

// route reads a stream's first byte (waiting at most firstByteWait) and hands the stream, with
// that byte still to be read, to the front door if it starts a TLS handshake or is
// FrontDoorPlain, or else to memberlist. It runs in a goroutine of the stream's own, so that
// a stream slow to send its first byte holds up no other. The stream keeps its slot until it
// is closed.
func (l *limitedStreams) route(c *limitedConn) {
	var b [1]byte
	_ = c.SetReadDeadline(time.Now().Add(firstByteWait))
	if _, err := io.ReadFull(c, b[:]); err != nil {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	pc := &peekedConn{Conn: c, first: b[0], has: true}
	if b[0] == frontDoorTLS || b[0] == FrontDoorPlain {
		if l.frontDoor == nil {
			c.Close()
			return
		}
		l.frontDoor(pc)
		return
	}
	select {
	case l.out <- pc:
	case <-l.stop:
		c.Close()
	}
}

// peekedConn is a stream whose first byte was read by route: it gives that byte back first.
type peekedConn struct {
	net.Conn
	mu    sync.Mutex
	first byte
	has   bool // first is still to be read
}

func (c *peekedConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if c.has && len(p) > 0 {
		p[0], c.has = c.first, false
		c.mu.Unlock()
		return 1, nil
	}
	c.mu.Unlock()
	return c.Conn.Read(p)
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
