package rawio

import (
	"io"
	"net"
	"testing"
)

// BenchmarkPingPong times one 64-byte message there and back on loopback, with the net
// package's reads and writes and with this package's.
func BenchmarkPingPong(b *testing.B) {
	for _, c := range []struct {
		name string
		wrap func(net.Conn) net.Conn
	}{{"net", func(c net.Conn) net.Conn { return c }}, {"rawio", Wrap}} {
		b.Run(c.name, func(b *testing.B) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer lis.Close()
			go func() {
				s, err := lis.Accept()
				if err != nil {
					return
				}
				s = c.wrap(s)
				defer s.Close()
				buf := make([]byte, 64)
				for {
					if _, err := io.ReadFull(s, buf); err != nil {
						return
					}
					if _, err := s.Write(buf); err != nil {
						return
					}
				}
			}()
			raw, err := net.Dial("tcp", lis.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			conn := c.wrap(raw)
			defer conn.Close()
			buf := make([]byte, 64)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := conn.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(conn, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
