package actors

import (
	"context"
	"net"

	"google.golang.org/grpc/credentials"

	"github.com/didnmf/didnmf/internal/rawio"
)

// rawIOCredentials are transport credentials whose connections read and write with raw
// system calls (package rawio), under the wrapped credentials' handshake and records. The
// actor remote's messages (grants, reports, results) then do not wake the Go runtime's
// monitor thread into its 20 µs polling each time a node comes out of a wait, as the data
// plane's do not. With an Observer, the bytes read and written count on PlaneActor, as they
// cross the socket (TLS handshakes and records included). Their methods may be called from any goroutine.
type rawIOCredentials struct {
	credentials.TransportCredentials
	obs Observer // nil: none
}

// ClientHandshake runs the wrapped handshake on conn with raw reads and writes.
func (r rawIOCredentials) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return r.TransportCredentials.ClientHandshake(ctx, authority, observe(rawio.Wrap(conn), r.obs, PlaneActor))
}

// ServerHandshake runs the wrapped handshake on conn with raw reads and writes.
func (r rawIOCredentials) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return r.TransportCredentials.ServerHandshake(observe(rawio.Wrap(conn), r.obs, PlaneActor))
}

// Clone returns a copy.
func (r rawIOCredentials) Clone() credentials.TransportCredentials {
	return rawIOCredentials{r.TransportCredentials.Clone(), r.obs}
}
