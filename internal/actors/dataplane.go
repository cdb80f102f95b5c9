package actors

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/internal/frame"
	"github.com/didnmf/didnmf/internal/rawio"
	"github.com/didnmf/didnmf/internal/slots"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/pki"
)

// The data plane carries the collectives' messages between nodes: a shard's partial up the
// reduce tree (Partial) and a result down it (Reduced), one of each per shard and iteration.
// Every other message goes through the actor remote (gRPC), as before.
//
// On the remote, a message to another node passes through the sender's endpoint writer and
// gRPC's writer goroutines, HTTP/2 framing, and the receiver's gRPC reader and stream handler
// before the target's mailbox: about six goroutines, several of them woken per message, and
// 0.1-0.3 ms of CPU per allreduce on a loaded 2-core machine. The data plane is one TCP
// connection (mutual TLS, as the remote) from each node to each node it sends collectives to:
//
//   - the sending actor writes the frame itself (see package frame), under the link's lock;
//   - one goroutine per accepted connection reads frames and posts each message to its
//     target's mailbox, stamped with the sender's role and name as the guard stamps the
//     remote's messages.
//
// It is the innermost sender middleware of every actor of the node (see Node.props), so that
// partitions and injected faults apply to its messages as to the others. Whatever it cannot
// send (no link yet, a link that broke, a message too large for a frame) goes through the
// remote instead: the data plane only ever makes a message faster. A node learns where a
// peer's data plane listens from the peer's Pong (DataPlane, told to peers only), asked each
// time it makes a link to it: when it first sends it a collective's message, and again
// Timeouts.DataRetry after a link failed. Until the link is up, those messages take the remote.
//
// A link loses nothing when it breaks. The receiving end acknowledges the frames it has read
// (a count, sent back on the same connection at most every Timeouts.DataAckEvery, or sooner after
// dataAckBytes), and the sending end keeps each frame until it is acknowledged. When the
// link breaks (a write fails, or the connection ends), the frames not acknowledged yet are
// sent again through the remote, in order, before any later message to that node: a frame
// the receiver had read but not acknowledged arrives twice, and the second is dropped as a
// duplicate, as every receiver of the collectives does (see TestDataPlaneLinksBreakMidJob).
// A link whose receiver stops acknowledging (maxKeptBytes of frames waiting, or the oldest
// waiting for Timeouts.DataAckTimeout) is taken down the same way; so is one whose receiver could not
// write an acknowledgement, which closes the connection.
//
// What a node accepts on its data plane port is checked as on the remote: the TLS handshake
// refuses parties without a certificate of the cluster, and a certificate whose role is not
// peer is refused before a frame is read; frames are bounded (maxDataFrame) before anything is
// allocated for them, must be of a known kind addressed to a shard or reducer name, and must
// decode as that kind's protobuf. A frame that fails is dropped and counted (Node.Drops); a
// stream that is out of step (an oversized or malformed frame) is closed. Nothing read can
// panic the process: each connection's goroutine recovers.

// Kinds of data plane frames.
const (
	kindPartial byte = 1
	kindReduced byte = 2
)

// Limits and waits of the data plane.
const (
	// maxDataFrame bounds a frame's length: a chunk of at most chunked.MaxPiece bytes of
	// values, with the other fields of its message.
	maxDataFrame = chunked.MaxPiece + 1<<20
	// maxHandshakes bounds the accepted connections whose TLS handshake is not done yet
	// (anyone who reaches the port can open those, so they get a small share), and
	// maxHandshakesPerIP those from one remote address. When they are all taken, the
	// oldest of the address holding the most is closed for a newcomer (see package slots
	// and handshakes.go): a flood from a few loopback addresses cannot keep peers from
	// linking. The authenticated ones are counted by identity, within the port's budget
	// (see limits_identity.go).
	maxHandshakes      = 64
	maxHandshakesPerIP = 16
	// dataDialTimeout bounds asking a peer for its data plane address and connecting to it.
	dataDialTimeout = 5 * time.Second
	// dataHandshakeTimeout bounds the TLS handshake of an accepted connection: one round
	// trip and a few milliseconds of CPU, so 5 s is ample (see remoteHandshakeTimeout).
	dataHandshakeTimeout = 5 * time.Second
	// dataWriteTimeout bounds a frame's write; a link that takes longer is closed and its
	// messages take the remote.
	dataWriteTimeout = 5 * time.Second
	// keptFrameBuffer is the largest frame buffer a link recycles once its frame is
	// acknowledged (a full chunk's frame fits), and maxFreeBytes the most such buffers a
	// link holds for its next frames.
	keptFrameBuffer = chunked.Bytes + 64<<10
	maxFreeBytes    = 4 << 20
	// maxKeptBytes bounds the frames a link keeps until they are acknowledged: past it,
	// the receiver is not acknowledging, and the link goes down.
	maxKeptBytes = 64 << 20
	// dataAckBytes is how many bytes of frames make the receiving end of a link
	// acknowledge at once.
	dataAckBytes = 4 << 20
	// linkForgetAfter is how long after its retry time a link that went down is forgotten.
	linkForgetAfter = time.Minute
	// ackLen is the length of an acknowledgement: the number of frames read on the
	// connection so far, a little-endian uint64.
	ackLen = 8
)

// Drop causes of the data plane.
const (
	dropDataPrefix    = "data plane: "
	dropDataRole      = dropDataPrefix + "not a peer's certificate"
	dropDataEvicted   = dropDataPrefix + "pending TLS handshake evicted for a newcomer"
	dropDataStream    = dropDataPrefix + "malformed stream"
	dropDataKind      = dropDataPrefix + "unknown kind"
	dropDataTarget    = dropDataPrefix + "target not a shard or reducer"
	dropDataMessage   = dropDataPrefix + "not a protobuf message of its kind"
	dropDataHandshake = dropDataPrefix + "TLS handshake failed"
)

// kindOf returns the frame kind of a message the data plane carries, or 0.
func kindOf(msg any) byte {
	switch msg.(type) {
	case *messages.Partial:
		return kindPartial
	case *messages.Reduced:
		return kindReduced
	}
	return 0
}

// messageOf returns an empty message of a frame kind, or nil for an unknown kind.
func messageOf(kind byte) proto.Message {
	switch kind {
	case kindPartial:
		return &messages.Partial{}
	case kindReduced:
		return &messages.Reduced{}
	}
	return nil
}

// dataPlane is a node's data plane: its listener, the connections it accepted, and its links
// to other nodes.
type dataPlane struct {
	n      *Node
	lis    net.Listener
	addr   string      // advertised host:port
	self   string      // the node's actor address, which targets are local to
	server *tls.Config // nil: no TLS (an Insecure node)
	client *tls.Config
	retry  time.Duration // Timeouts.DataRetry
	// ackEvery and ackTimeout are Timeouts.DataAckEvery and DataAckTimeout.
	ackEvery, ackTimeout time.Duration
	// remote sends a message through the actor remote: the sender after the data plane in
	// the middleware chain, set by the first middleware call. Frames a broken link leaves
	// unacknowledged go through it.
	remote atomic.Pointer[actor.SenderFunc]

	mu         sync.Mutex
	closed     bool
	links      map[string]*dataLink // by the actor address of the node they go to
	conns      map[net.Conn]bool    // every open connection, accepted or dialled
	handshakes *slots.Limiter       // the accepted ones not authenticated yet, by remote address
	ids        *identityLimits      // the accepted ones authenticated, by identity
	// wg counts the acceptor and one goroutine per tracked connection (its reader, or the
	// watcher of a link), which ends once close closed the connection.
	wg sync.WaitGroup

	sent, delivered atomic.Int64 // frames written, and frames read and posted to their target
	resent          atomic.Int64 // frames a broken link had not had acknowledged, sent through the remote
}

// linkState is where a link stands.
type linkState uint8

const (
	linkDialling linkState = iota // asking the peer where it listens, and connecting
	linkUp                        // frames go through it
	linkDown                      // failed: messages take the remote until retryAt
)

// dataLink is a connection to another node's data plane, written by the node's actors.
type dataLink struct {
	state   linkState // under dataPlane.mu
	retryAt time.Time // under dataPlane.mu

	wmu       sync.Mutex // serializes frames, and guards what follows
	conn      net.Conn
	broken    bool        // the link went down: nothing more is written on it
	seq       uint64      // frames written
	acked     uint64      // frames the receiver acknowledged
	kept      []keptFrame // the frames written and not acknowledged, in order
	bytes     int         // their bytes
	free      [][]byte    // buffers of acknowledged frames, for the next ones
	freeBytes int         // their capacity
}

// keptFrame is a frame written on a link and not acknowledged yet: what it takes to send its
// message again through the remote.
type keptFrame struct {
	seq    uint64
	at     time.Time // when it was written
	target *actor.PID
	env    actor.MessageEnvelope // its header and sender (not the message, whose values may be the sender's buffers)
	frame  []byte                // the frame as written
}

// startDataPlane listens on host:port (port 0: any free port) and starts accepting; advertise,
// when set, is the host other nodes reach this one at.
func startDataPlane(n *Node, host string, port int, advertise string, creds *pki.Config) (*dataPlane, error) {
	lis, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("node cannot listen for its data plane on %s:%d: %w", host, port, err)
	}
	if advertise == "" {
		advertise = host
	}
	p := &dataPlane{n: n, lis: lis, addr: net.JoinHostPort(advertise, strconv.Itoa(lis.Addr().(*net.TCPAddr).Port)),
		self: n.system.Address(), retry: n.cfg.Timeouts.DataRetry, ackEvery: n.cfg.Timeouts.DataAckEvery, ackTimeout: n.cfg.Timeouts.DataAckTimeout, links: map[string]*dataLink{}, conns: map[net.Conn]bool{},
		handshakes: slots.New(maxHandshakes, maxHandshakesPerIP), ids: n.limits.data}
	if creds != nil {
		p.server, p.client = creds.Server, creds.Client
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Address returns the host:port peers reach the data plane at.
func (p *dataPlane) Address() string { return p.addr }

// close stops accepting, closes every connection and waits for the goroutines that read
// them to end. A link being made when it closes (dial) may go on asking and connecting for
// up to its timeouts, but then finds the plane closed and closes what it made.
func (p *dataPlane) close() {
	p.mu.Lock()
	p.closed = true
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	p.lis.Close()
	for _, c := range conns { // outside the lock: a TLS close may wait on its peer
		c.Close()
	}
	p.wg.Wait()
}

// track records an open connection and counts the goroutine that will read it (which calls
// untrack, then wg.Done, when it ends). It refuses (and closes) the connection when the plane
// is closed.
func (p *dataPlane) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = true
	p.wg.Add(1)
	return true
}

// untrack closes a connection and forgets it.
func (p *dataPlane) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// middleware is the node's innermost sender middleware: it sends the collectives' messages to
// other nodes over the data plane, and everything else (and whatever the data plane cannot
// send) on to the remote.
func (p *dataPlane) middleware(next actor.SenderFunc) actor.SenderFunc {
	p.remote.CompareAndSwap(nil, &next)
	return func(ctx actor.SenderContext, target *actor.PID, env *actor.MessageEnvelope) {
		if target != nil && target.Address != p.self && p.send(target, env) {
			return
		}
		next(ctx, target, env)
	}
}

// send writes msg to target over the data plane and tells whether it did. It starts making a
// link to target's node when there is none (or the last one failed Timeouts.DataRetry ago).
func (p *dataPlane) send(target *actor.PID, env *actor.MessageEnvelope) bool {
	kind := kindOf(env.Message)
	if kind == 0 {
		return false
	}
	l, up := p.link(target.Address)
	return up && p.write(target, l, kind, env)
}

// link returns the link to the node at address, and whether it is up. It starts making one
// when there is none (or the last one failed Timeouts.DataRetry ago), and returns nil once the plane is
// closed.
func (p *dataPlane) link(address string) (*dataLink, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false
	}
	l := p.links[address]
	if now := time.Now(); l == nil || l.state == linkDown && !now.Before(l.retryAt) {
		p.forgetLocked(now)
		l = &dataLink{state: linkDialling}
		p.links[address] = l
		go p.dial(address, l)
	}
	return l, l.state == linkUp
}

// forgetLocked forgets the links that have been down for linkForgetAfter (under mu): nodes
// that left, or that this one has not sent to since. The map holds the nodes sent to lately.
func (p *dataPlane) forgetLocked(now time.Time) {
	for address, l := range p.links {
		if l.state == linkDown && now.Sub(l.retryAt) > linkForgetAfter {
			delete(p.links, address)
		}
	}
}

// write sends one frame on l and keeps it until it is acknowledged; on failure the link goes
// down and false is returned (the message has not been delivered: a frame cut short is
// refused by the reader).
func (p *dataPlane) write(target *actor.PID, l *dataLink, kind byte, env *actor.MessageEnvelope) bool {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.broken {
		return false
	}
	now := time.Now()
	if len(l.kept) > 0 && (l.bytes > maxKeptBytes || now.Sub(l.kept[0].at) > p.ackTimeout) {
		p.down(target.Address, l, fmt.Errorf("the receiver acknowledged none of the last %d frames (%d bytes, the oldest written %v ago)", len(l.kept), l.bytes, now.Sub(l.kept[0].at).Round(time.Millisecond)))
		return false
	}
	var buf []byte
	if n := len(l.free); n > 0 {
		buf, l.free = l.free[n-1][:0], l.free[:n-1]
		l.freeBytes -= cap(buf)
	}
	buf, err := frame.Begin(buf, kind, target.Id)
	if err != nil {
		return false
	}
	if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf, env.Message.(proto.Message)); err != nil || len(buf)-4 > maxDataFrame {
		return false // not for a frame: the remote refuses or splits it
	}
	if err := frame.End(buf); err != nil {
		return false
	}
	_ = l.conn.SetWriteDeadline(now.Add(dataWriteTimeout))
	if _, err := l.conn.Write(buf); err != nil {
		p.down(target.Address, l, err)
		return false
	}
	l.seq++
	k := keptFrame{seq: l.seq, at: now, target: target, env: *env, frame: buf}
	k.env.Message = nil
	l.kept = append(l.kept, k)
	l.bytes += len(buf)
	p.sent.Add(1)
	return true
}

// ack takes the receiver's acknowledgement of its first n frames: they are kept no longer.
func (p *dataPlane) ack(l *dataLink, n uint64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if n <= l.acked || n > l.seq { // a receiver acknowledges only when it read more
		return fmt.Errorf("acknowledged %d frames of %d written, after %d", n, l.seq, l.acked)
	}
	l.acked = n
	done := 0
	for done < len(l.kept) && l.kept[done].seq <= n {
		f := l.kept[done].frame
		l.bytes -= len(f)
		if cap(f) <= keptFrameBuffer && l.freeBytes+cap(f) <= maxFreeBytes {
			l.free = append(l.free, f)
			l.freeBytes += cap(f)
		}
		done++
	}
	left := copy(l.kept, l.kept[done:])
	clear(l.kept[left:]) // nothing of the acknowledged frames stays reachable
	l.kept = l.kept[:left]
	return nil
}

// fail takes a link down; see down.
func (p *dataPlane) fail(address string, l *dataLink, err error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	p.down(address, l, err)
}

// down takes a link down, under its wmu. The frames it had not had acknowledged go again
// through the remote (unless the plane is closing) before the link is marked down: until
// then, senders to its node wait for wmu, so none of their messages overtakes them. Then
// messages take the remote until the link is made again, Timeouts.DataRetry later, and its
// connection is closed.
func (p *dataPlane) down(address string, l *dataLink, err error) {
	if l.broken {
		return
	}
	l.broken = true
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	p.n.logger.Debug("data plane link down", slog.String("to", address), slog.Any("error", err), slog.Int("unacknowledged", len(l.kept)))
	if remote := p.remote.Load(); !closed && remote != nil {
		for _, k := range l.kept {
			f, err := frame.Parse(k.frame) // the link wrote it: it parses
			if msg := messageOf(f.Kind); err == nil && msg != nil && proto.Unmarshal(f.Body, msg) == nil {
				env := k.env
				env.Message = msg
				(*remote)(p.n.system.Root, k.target, &env)
				p.resent.Add(1)
			}
		}
	}
	l.kept, l.free, l.bytes, l.freeBytes = nil, nil, 0, 0
	p.mu.Lock()
	if p.links[address] == l {
		l.state, l.retryAt = linkDown, time.Now().Add(p.retry)
	}
	p.mu.Unlock()
	if l.conn != nil {
		// A TLS close writes a close_notify first: with the link's writes stuck, it would
		// wait (holding wmu) for its deadline.
		_ = l.conn.SetWriteDeadline(time.Now())
		p.untrack(l.conn)
	}
}

// dial asks the node at address where its data plane listens, connects to it and puts the
// link up; on failure the link goes down.
func (p *dataPlane) dial(address string, l *dataLink) {
	conn, err := p.connect(address)
	if err == nil {
		if !p.track(conn) {
			err = errors.New("data plane closed")
		}
	}
	if err != nil {
		p.fail(address, l, err)
		return
	}
	p.mu.Lock()
	l.conn, l.state = conn, linkUp
	p.mu.Unlock()
	// The other way, the link carries only the receiver's acknowledgements. Reading them
	// also sees at once when the peer closes the link (or it breaks, or close closes it),
	// which takes it down rather than at the next write.
	go func() {
		defer p.wg.Done()
		var b [ackLen]byte
		for {
			_, err := io.ReadFull(conn, b[:])
			if err == nil {
				err = p.ack(l, binary.LittleEndian.Uint64(b[:]))
			}
			if err != nil {
				p.fail(address, l, err)
				return
			}
		}
	}()
}

// connect asks the node at address for its data plane's address and connects to it, checking
// (with TLS) that the other end holds a peer's certificate, and in a cluster (Members) the
// certificate of the member at address.
func (p *dataPlane) connect(address string) (net.Conn, error) {
	res, err := p.n.system.Root.RequestFuture(actor.NewPID(address, HostName), &messages.Ping{}, dataDialTimeout).Result()
	if err != nil {
		return nil, fmt.Errorf("asking %s for its data plane: %w", address, err)
	}
	pong, ok := res.(*messages.Pong)
	if !ok || pong.DataPlane == "" {
		return nil, fmt.Errorf("%s has no data plane", address)
	}
	host, _, err := net.SplitHostPort(pong.DataPlane)
	if err != nil {
		return nil, fmt.Errorf("%s: data plane address %q: %w", address, pong.DataPlane, err)
	}
	raw, err := (&net.Dialer{Timeout: dataDialTimeout}).Dial("tcp", pong.DataPlane)
	if err != nil {
		return nil, err
	}
	raw = observe(rawio.Wrap(raw), p.n.cfg.Observer, PlaneData)
	if p.client == nil {
		return raw, nil
	}
	cfg := p.client.Clone()
	cfg.ServerName = host
	c := tls.Client(raw, cfg)
	_ = c.SetDeadline(time.Now().Add(dataDialTimeout))
	if err := c.Handshake(); err != nil {
		raw.Close()
		return nil, fmt.Errorf("data plane of %s: %w", address, err)
	}
	_ = c.SetDeadline(time.Time{})
	role, name := roleOf(c.ConnectionState())
	if role != pki.RolePeer {
		raw.Close()
		return nil, fmt.Errorf("data plane of %s: the certificate is not a peer's", address)
	}
	if p.n.cfg.Members != nil {
		// In a cluster, the node at address is a member: its data plane holds its name.
		if member, ok := p.n.senders.memberAt(address); !ok || name != member {
			raw.Close()
			return nil, fmt.Errorf("data plane of %s: the certificate is %q's, not the member's at that address", address, name)
		}
	}
	return c, nil
}

// accept accepts connections until the listener closes.
func (p *dataPlane) accept() {
	defer p.wg.Done()
	for {
		c, err := p.lis.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors, say: try again shortly (the node's logger lets one such
			// line through a second, see lograte.go).
			p.n.logger.Error("data plane cannot accept a connection", slog.Any("error", err))
			time.Sleep(10 * time.Millisecond)
			continue
		}
		c = observe(rawio.Wrap(c), p.n.cfg.Observer, PlaneData)
		if !p.track(c) {
			continue
		}
		// Its handshake holds a slot, evicted (the connection closed) for a newcomer when
		// they are all taken; read gives it back once the handshake is done.
		slot := p.handshakes.Take(slots.RemoteIP(c), func() {
			p.n.guard.drop(dropDataEvicted, 1)
			c.Close()
		})
		go p.read(c, slot)
	}
}

// read authenticates an accepted connection and delivers its frames until it ends. slot is
// its handshake's, given back once the handshake is done.
func (p *dataPlane) read(raw net.Conn, slot *slots.Slot) {
	defer p.wg.Done()
	defer p.untrack(raw)
	defer func() {
		if r := recover(); r != nil {
			p.n.guard.drop(dropPanic, 1)
			p.n.logger.Error("recovered a panic in the data plane", slog.Any("panic", r))
		}
	}()
	defer slot.Release() // a panic in the handshake
	who, conn, ok := p.authenticate(raw)
	slot.Release()
	if !ok {
		return
	}
	if p.server != nil { // with credentials: counted by identity
		release, cause := p.ids.takeConn(identity{role: who.role, name: who.name})
		if cause != "" {
			p.n.guard.drop(dropDataPrefix+cause, 1)
			return
		}
		defer release()
	}
	a := newAcker(conn, p.ackEvery)
	defer a.stop()
	p.frames(conn, who, a)
}

// frames delivers the frames of an authenticated stream until it ends or is out of step,
// counting each frame read (delivered or dropped) with a, when a is not nil.
func (p *dataPlane) frames(conn io.Reader, who party, a *acker) {
	r := frame.NewReader(conn, maxDataFrame)
	for {
		f, err := r.Next()
		if err != nil {
			if errors.Is(err, frame.ErrTooLarge) || errors.Is(err, frame.ErrMalformed) {
				p.n.guard.drop(dropDataStream, 1)
			}
			return
		}
		p.deliver(f, who)
		if a != nil {
			a.read(len(f.Body))
		}
	}
}

// acker acknowledges the frames read on an accepted connection: their count, written back on
// the connection Timeouts.DataAckEvery after the first frame not acknowledged, or at once when
// dataAckBytes of them are waiting. Its methods may be called from any goroutine.
type acker struct {
	conn  net.Conn
	timer *time.Timer
	every time.Duration // how long a frame waits for its acknowledgement

	mu      sync.Mutex
	frames  uint64 // frames read
	acked   uint64 // frames acknowledged
	waiting int    // bytes of frames read and not acknowledged
	armed   bool   // timer runs
	stopped bool
	buf     [ackLen]byte
}

func newAcker(conn net.Conn, every time.Duration) *acker {
	a := &acker{conn: conn, every: every}
	a.timer = time.AfterFunc(time.Hour, a.flush)
	a.timer.Stop()
	return a
}

// read counts a frame of n bytes read and delivered (or dropped).
func (a *acker) read(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.frames++
	a.waiting += n
	switch {
	case a.waiting >= dataAckBytes:
		a.writeLocked()
	case !a.armed:
		a.armed = true
		a.timer.Reset(a.every)
	}
}

// flush acknowledges every frame read so far.
func (a *acker) flush() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.armed = false
	a.writeLocked()
}

func (a *acker) writeLocked() {
	if a.stopped || a.frames == a.acked {
		return
	}
	binary.LittleEndian.PutUint64(a.buf[:], a.frames)
	_ = a.conn.SetWriteDeadline(time.Now().Add(dataWriteTimeout))
	if _, err := a.conn.Write(a.buf[:]); err != nil {
		// The sender would keep its frames until it gave up waiting: close the
		// connection, which ends the reader here and takes the link down there.
		a.stopped = true
		a.conn.Close()
		return
	}
	a.acked, a.waiting = a.frames, 0
}

// stop ends acknowledgements: the connection is done.
func (a *acker) stop() {
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
	a.timer.Stop()
}

// authenticate runs the TLS handshake of an accepted connection and checks that the other end
// is a peer; without TLS (an Insecure node) everyone is.
func (p *dataPlane) authenticate(raw net.Conn) (party, net.Conn, bool) {
	if p.server == nil {
		return newParty(pki.RolePeer, "insecure"), raw, true
	}
	c := tls.Server(raw, p.server)
	_ = c.SetDeadline(time.Now().Add(dataHandshakeTimeout))
	if err := c.Handshake(); err != nil {
		p.n.guard.drop(dropDataHandshake, 1)
		return party{}, nil, false
	}
	_ = c.SetDeadline(time.Time{})
	role, name := roleOf(c.ConnectionState())
	if role != pki.RolePeer {
		p.n.guard.drop(dropDataRole, 1)
		return party{}, nil, false
	}
	return newParty(role, name), c, true
}

// deliver checks a frame and posts its message to its target, stamped with the sender.
func (p *dataPlane) deliver(f frame.Frame, who party) {
	msg := messageOf(f.Kind)
	switch {
	case msg == nil:
		p.n.guard.drop(dropDataKind, 1)
		return
	case !isDataTarget(f.Target):
		p.n.guard.drop(dropDataTarget, 1)
		return
	}
	if err := proto.Unmarshal(f.Body, msg); err != nil {
		p.n.guard.drop(dropDataMessage, 1)
		return
	}
	p.n.system.Root.Send(actor.NewPID(p.self, f.Target), &actor.MessageEnvelope{Header: who.stamp.HeaderData, Message: msg})
	p.delivered.Add(1)
}
