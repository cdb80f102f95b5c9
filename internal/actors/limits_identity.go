package actors

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/pki"
)

// Connections whose TLS handshake is done belong to parties with a certificate of the
// cluster, but a client's certificate is no reason to let it hold what it likes: with one,
// ~20,000 held connections took a node to its descriptor limit (memberlist's accepts then
// failed with EMFILE) and 1.4 GB, and one HTTP/2 connection with many streams, each sending
// most of a large message and never finishing it, took gigabytes. So, on the actor port and
// the data port, once a handshake is done:
//
//   - connections are counted per identity (role and certificate common name) and in all;
//     one past its identity's share, or past the port's budget, is closed at once (counted,
//     dropIdentityConns and dropPortConns). A client identity holds at most
//     maxClientConns; a peer identity maxPeerConns; clients together at most half of the
//     port's budget, so that the other half is always there for peers.
//   - the port's budget comes from the process's descriptor limit (raised at start to the hard
//     limit, see raiseDescriptorLimit): a quarter of it for the actor port and an eighth
//     for the data port, capped at maxActorConns and maxDataConns, so that the two together
//     leave well over half of the descriptors to the gossip, checkpoints and the rest.
//   - on the actor port, HTTP/2 takes at most maxStreamsPerConn streams a connection
//     (grpc.MaxConcurrentStreams; protoactor opens one per connection, its endpoint
//     writer's Receive stream), and an identity at most maxClientStreams (a client) or
//     maxPeerStreams (a peer) across its connections: the stream past it is refused
//     (counted, dropIdentityStreams) before its handler reads a byte of it. A connection with
//     no stream open for maxConnIdle is closed, giving its identity's slot back.
//
// The bytes a stream holds before its message is whole are bounded by maxGRPCMessage (gRPC
// reads a message as it arrives, up to its announced length, refused past the limit) and,
// between messages, by the stream's flow-control window (grpcWindow, smaller). So what one
// connection can make the node hold is maxStreamsPerConn × maxGRPCMessage (4 × 32 MiB =
// 128 MiB), and one client identity, whatever its connections, maxClientStreams ×
// maxGRPCMessage (64 × 32 MiB = 2 GiB), as one peer identity (maxPeerStreams, the same).
//
// A client identity is not one process: in the cluster-secret mode every client process of
// a user has the same certificate name (the login name), and each holds a connection and a
// stream at every node it talks to for as long as it runs (a `factorize --cluster` for the
// whole job). So the client shares are sized for many processes of one user at once, 64
// (they were 16 connections and 8 streams, and a user's 9th concurrent job was refused
// at every node); a client refused past its share sees its pings go unanswered (client.go's
// "unreachable" error says so).
const (
	maxClientConns    = 64
	maxPeerConns      = 32
	maxClientStreams  = 64
	maxPeerStreams    = 64
	maxStreamsPerConn = 4
	maxActorConns     = 4096
	maxDataConns      = 1024
	// maxHeaderList bounds the headers of a stream (protoactor's are a few hundred bytes;
	// gRPC's default is 16 MiB).
	maxHeaderList = 64 << 10
)

// maxConnIdle is how long the actor port keeps a connection on which no stream is open (a
// protoactor connection always has its endpoint's stream open): one held for nothing gives
// its identity's slot back then.
const maxConnIdle = 2 * time.Minute

// Drop causes of the identity limits.
const (
	dropIdentityConns   = "too many connections of one identity"
	dropPortConns       = "too many connections to the port"
	dropIdentityStreams = "too many streams of one identity"
)

// errTooManyConns refuses an authenticated connection past its identity's share or the
// port's budget.
var errTooManyConns = errors.New("too many connections")

// identity is who holds a certificate: its role and common name.
type identity struct {
	role pki.Role
	name string
}

// connBudget is what the authenticated connections of a port may hold.
type connBudget struct {
	total     int // every connection of the port
	clients   int // of them, clients' together (the rest is kept for peers)
	perClient int // one client identity's
	perPeer   int // one peer identity's
}

// budgets returns the connection budgets of the actor port and the data port for a process
// allowed nofile descriptors (see the comment above maxClientConns).
func budgets(nofile uint64) (actor, data connBudget) {
	share := func(div uint64, floor, ceil int) int {
		return int(min(max(nofile/div, uint64(floor)), uint64(ceil)))
	}
	actorTotal := share(4, 64, maxActorConns)
	actor = connBudget{total: actorTotal, clients: actorTotal / 2, perClient: maxClientConns, perPeer: maxPeerConns}
	// The data plane refuses clients' certificates before it counts them: peers only.
	data = connBudget{total: share(8, 32, maxDataConns), clients: 0, perClient: 0, perPeer: maxPeerConns}
	return actor, data
}

// identityLimits counts the authenticated connections of a port by identity, and (on the
// actor port) their streams. Its methods may be called from any goroutine.
type identityLimits struct {
	budget connBudget

	mu      sync.Mutex
	total   int
	clients int
	conns   map[identity]int
	streams map[identity]int
}

func newIdentityLimits(b connBudget) *identityLimits {
	return &identityLimits{budget: b, conns: map[identity]int{}, streams: map[identity]int{}}
}

// takeConn counts a connection of id and returns the func that gives it back (call it once),
// or the cause of its refusal.
func (l *identityLimits) takeConn(id identity) (release func(), cause string) {
	client := id.role != pki.RolePeer
	per := l.budget.perPeer
	if client {
		per = l.budget.perClient
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.conns[id] >= per:
		return nil, dropIdentityConns
	case l.total >= l.budget.total || client && l.clients >= l.budget.clients:
		return nil, dropPortConns
	}
	l.conns[id]++
	l.total++
	if client {
		l.clients++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.conns[id]--; l.conns[id] <= 0 {
				delete(l.conns, id)
			}
			l.total--
			if client {
				l.clients--
			}
		})
	}, ""
}

// takeStream counts a stream of id and tells whether it is within the identity's share; a
// stream taken is given back with giveStream.
func (l *identityLimits) takeStream(id identity) bool {
	per := maxPeerStreams
	if id.role != pki.RolePeer {
		per = maxClientStreams
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.streams[id] >= per {
		return false
	}
	l.streams[id]++
	return true
}

func (l *identityLimits) giveStream(id identity) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.streams[id]--; l.streams[id] <= 0 {
		delete(l.streams, id)
	}
}

// counts returns the connections held in all and by clients (for tests).
func (l *identityLimits) counts() (total, clients int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.clients
}

// countedConn gives its identity's slot back when gRPC closes it (once).
type countedConn struct {
	net.Conn
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// identityOf returns the identity of a verified TLS connection's other end (role 0 when it has
// no verified certificate).
func identityOf(info credentials.AuthInfo) identity {
	t, ok := info.(credentials.TLSInfo)
	if !ok {
		return identity{}
	}
	role, name := roleOf(t.State)
	return identity{role: role, name: name}
}

// nodeLimits are the limits of a node's ports (see above and handshakes.go).
type nodeLimits struct {
	actor *identityLimits // the actor port's authenticated connections and streams
	data  *identityLimits // the data port's
	drop  func(cause string)
	// open: the node runs without credentials, whose parties have no identity.
	open bool
	// largest is the largest gRPC message received, when measured (tests).
	largest atomic.Int64
}

// newNodeLimits makes a node's limits from the process's descriptor limit, raising it first.
func newNodeLimits(open bool, drop func(string)) *nodeLimits {
	actor, data := budgets(raiseDescriptorLimit())
	return &nodeLimits{actor: newIdentityLimits(actor), data: newIdentityLimits(data), drop: drop, open: open}
}

// measureMessages, when set before a node starts, makes it record the largest gRPC message
// it receives (nodeLimits.largest); tests measure the real messages with it.
var measureMessages atomic.Bool

// serverOptions are the gRPC server options of the limits: streams a connection, headers, and
// the stream interceptor that bounds an identity's streams (outermost, before the guard's).
func (l *nodeLimits) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxConcurrentStreams(maxStreamsPerConn), grpc.MaxHeaderListSize(maxHeaderList),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: maxConnIdle}),
		grpc.ChainStreamInterceptor(l.stream)}
}

// stream refuses a stream past its identity's share, and runs the others.
func (l *nodeLimits) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if measureMessages.Load() {
		ss = &measuredStream{ServerStream: ss, largest: &l.largest}
	}
	if l.open {
		return handler(srv, ss)
	}
	p, ok := peer.FromContext(ss.Context())
	if !ok {
		return handler(srv, ss) // the guard refuses it
	}
	id := identityOf(p.AuthInfo)
	if id.role == 0 {
		return handler(srv, ss) // the guard refuses it
	}
	if !l.actor.takeStream(id) {
		l.drop(dropIdentityStreams)
		return status.Error(codes.ResourceExhausted, fmt.Sprintf("too many streams of %s %q", id.role, id.name))
	}
	defer l.actor.giveStream(id)
	return handler(srv, ss)
}

// measuredStream records the size of the largest message it receives.
type measuredStream struct {
	grpc.ServerStream
	largest *atomic.Int64
}

func (s *measuredStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if pm, ok := m.(proto.Message); ok && err == nil {
		for n := int64(proto.Size(pm)); ; {
			old := s.largest.Load()
			if n <= old || s.largest.CompareAndSwap(old, n) {
				break
			}
		}
	}
	return err
}
