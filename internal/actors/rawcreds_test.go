package actors

import (
	"context"
	"crypto/tls"
	"net"
	"runtime"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/didnmf/didnmf/internal/rawio"
	"github.com/didnmf/didnmf/pki"
)

// TestRawIOCredentials: both ends of a handshake through rawIOCredentials, over TLS and
// without, end on connections that read and write with raw system calls (on Linux), and
// carry bytes both ways.
func TestRawIOCredentials(t *testing.T) {
	ca, err := pki.CAFromSecret(pki.NewSecret())
	if err != nil {
		t.Fatal(err)
	}
	tlsCreds := creds(t, ca, "node", pki.RolePeer)
	for _, c := range []struct {
		name           string
		client, server credentials.TransportCredentials
	}{
		{"insecure", insecure.NewCredentials(), insecure.NewCredentials()},
		{"TLS", credentials.NewTLS(tlsCreds.Client), credentials.NewTLS(tlsCreds.Server)},
	} {
		t.Run(c.name, func(t *testing.T) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer lis.Close()
			type side struct {
				conn net.Conn
				err  error
			}
			served := make(chan side, 1)
			go func() {
				raw, err := lis.Accept()
				if err != nil {
					served <- side{err: err}
					return
				}
				conn, _, err := rawIOCredentials{TransportCredentials: c.server}.Clone().ServerHandshake(raw)
				served <- side{conn, err}
			}()
			raw, err := net.Dial("tcp", lis.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			client, _, err := rawIOCredentials{TransportCredentials: c.client}.ClientHandshake(context.Background(), "127.0.0.1", raw)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			s := <-served
			if s.err != nil {
				t.Fatal(s.err)
			}
			defer s.conn.Close()
			for _, conn := range []net.Conn{client, s.conn} {
				under := conn
				if tc, ok := conn.(*tls.Conn); ok {
					under = tc.NetConn()
				}
				if !rawio.Raw(under) && runtime.GOOS == "linux" {
					t.Errorf("a connection is a %T over a %T, not over a *rawio.Conn", conn, under)
				}
			}
			go client.Write([]byte("ping"))
			buf := make([]byte, 4)
			if _, err := s.conn.Read(buf); err != nil || string(buf) != "ping" {
				t.Fatalf("read %q, %v", buf, err)
			}
		})
	}
}
