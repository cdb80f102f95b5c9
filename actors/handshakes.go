package actors

import (
	"context"
	"errors"
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
// The node's server credentials therefore admit at most maxRemoteHandshakes handshakes at
// a time, and maxRemoteHandshakesPerIP from one address, closing a connection past either
// at once (counted as dropRemoteHandshakes): one party cannot take every slot, and while
// all are taken, the connections already made (peers, clients) go on. Its server gives
// each connection remoteHandshakeTimeout
// (grpc.ConnectionTimeout) to finish its handshake and HTTP/2 preface. Connections whose
// handshake is done belong to parties with the cluster's certificates and are not limited
// here. The data plane limits its own the same way (maxHandshakes, maxHandshakesPerIP).
const (
	maxRemoteHandshakes      = 128
	maxRemoteHandshakesPerIP = 32
	remoteHandshakeTimeout   = 10 * time.Second
)

// Drop causes of the handshake limit.
const (
	dropRemoteHandshakes    = "too many TLS handshakes at once"
	dropRemoteHandshakeFail = "TLS handshake failed"
)

// errTooManyHandshakes refuses a connection while maxRemoteHandshakes are under way.
var errTooManyHandshakes = errors.New("too many TLS handshakes under way")

// limitedHandshakes is server TransportCredentials that admit a bounded number of
// handshakes at a time, each under a deadline. Its methods may be called from any
// goroutine.
type limitedHandshakes struct {
	credentials.TransportCredentials
	slots *slots.Limiter     // the handshakes under way, by remote address; shared by clones
	drop  func(cause string) // counts a refused or failed handshake
}

// limitHandshakes wraps server credentials with a limit of max handshakes at a time, and
// perIP from one remote address.
func limitHandshakes(c credentials.TransportCredentials, max, perIP int, drop func(string)) credentials.TransportCredentials {
	return &limitedHandshakes{TransportCredentials: c, slots: slots.New(max, perIP), drop: drop}
}

// ServerHandshake runs the wrapped handshake if a slot is free, and closes the connection
// otherwise.
func (l *limitedHandshakes) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	ip := slots.RemoteIP(conn)
	if !l.slots.Take(ip) {
		l.drop(dropRemoteHandshakes)
		conn.Close()
		return nil, nil, errTooManyHandshakes
	}
	defer l.slots.Give(ip)
	c, info, err := l.TransportCredentials.ServerHandshake(conn) // under grpc.ConnectionTimeout
	if err != nil {
		l.drop(dropRemoteHandshakeFail)
		return nil, nil, err
	}
	return c, info, nil
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
