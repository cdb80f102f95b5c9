package actors

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/didnmf/didnmf/internal/slots"
)

// Anyone who reaches a node's actor port can open connections to it without credentials:
// until its TLS handshake is done, a connection is nobody's, and gRPC would hold each one
// (a goroutine and a file descriptor) for its connection timeout, 120 s by default. A party
// that opens them faster than they time out would then take every descriptor the node has,
// and with them its peers, its clients and its checkpoint files.
//
// The node's server credentials therefore hold at most maxRemoteHandshakes handshakes at
// a time, and maxRemoteHandshakesPerIP from one address (see package slots). When all are
// taken, a newcomer is not refused: the oldest handshake of the address holding the most is
// closed instead (counted as dropRemoteEvicted), or, when the newcomer's own address holds
// its share, that address's oldest. An address is a weak identity (every local user owns
// 127.0.0.0/8), so refusing newcomers would let a flood spread over a few addresses keep
// peers and clients out; evicting makes it push out its own connections. Its server gives
// each connection remoteHandshakeTimeout (grpc.ConnectionTimeout) to finish its handshake
// and HTTP/2 preface: a TLS 1.3 handshake takes one round trip and a few milliseconds of CPU,
// so 5 s is ample even for a loaded node across a slow network, and halves the time an idle
// connection holds a descriptor before it goes (gRPC's default is 120 s).
//
// Once the handshake is done, the connection is counted for its identity (see
// limits_identity.go): past its identity's share or the port's budget, it is closed at once.
// The data plane limits its own the same way (maxHandshakes, maxHandshakesPerIP).
const (
	maxRemoteHandshakes      = 128
	maxRemoteHandshakesPerIP = 32
	remoteHandshakeTimeout   = 5 * time.Second
)

// Drop causes of the handshake limit.
const (
	dropRemoteEvicted       = "pending TLS handshake evicted for a newcomer"
	dropRemoteHandshakeFail = "TLS handshake failed"
)

// limitedHandshakes is server TransportCredentials that hold a bounded number of handshakes
// at a time, each under a deadline, and count the authenticated connections by identity. Its
// methods may be called from any goroutine.
type limitedHandshakes struct {
	credentials.TransportCredentials
	slots *slots.Limiter     // the handshakes under way, by remote address; shared by clones
	ids   *identityLimits    // the authenticated connections, by identity; shared by clones
	drop  func(cause string) // counts a refused, evicted or failed handshake
}

// limitHandshakes wraps server credentials with a limit of max handshakes at a time, and
// perIP from one remote address, and counts the authenticated connections in ids.
func limitHandshakes(c credentials.TransportCredentials, max, perIP int, ids *identityLimits, drop func(string)) credentials.TransportCredentials {
	return &limitedHandshakes{TransportCredentials: c, slots: slots.New(max, perIP), ids: ids, drop: drop}
}

// ServerHandshake runs the wrapped handshake in a slot (evicting another handshake when they
// are all taken), then counts the connection for its identity, closing it past the limits.
func (l *limitedHandshakes) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	slot := l.slots.Take(slots.RemoteIP(conn), func() {
		l.drop(dropRemoteEvicted)
		conn.Close()
	})
	c, info, err := l.TransportCredentials.ServerHandshake(conn) // under grpc.ConnectionTimeout
	if held := slot.Release(); err != nil {
		if held { // an evicted handshake was counted as such
			l.drop(dropRemoteHandshakeFail)
		}
		return nil, nil, err
	}
	id := identityOf(info)
	if id.role == 0 {
		return c, info, nil // no verified certificate: the guard refuses its streams
	}
	release, cause := l.ids.takeConn(id)
	if cause != "" {
		l.drop(cause)
		c.Close()
		return nil, nil, errTooManyConns
	}
	return &countedConn{Conn: c, release: release}, info, nil
}

// ClientHandshake is the wrapped one: the limit is on what others open to this node.
func (l *limitedHandshakes) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return l.TransportCredentials.ClientHandshake(ctx, authority, conn)
}

// Clone returns credentials that share the limit.
func (l *limitedHandshakes) Clone() credentials.TransportCredentials {
	c := *l
	c.TransportCredentials = l.TransportCredentials.Clone()
	return &c
}
