package flood

import (
	"net"
	"testing"
	"time"
)

// TestHold: the flood opens per connections from each address, opens again one that the
// server closes, and closes every one at Stop.
func TestHold(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	f := Hold(ln.Addr().String(), []string{"127.0.0.2", "127.0.0.3"}, 2, 20*time.Millisecond)
	defer f.Stop()
	if !f.WaitOpen(4, 5*time.Second) {
		t.Fatalf("%d of 4 connections opened", f.Opened())
	}
	var held []net.Conn
	from := map[string]int{}
	for range 4 {
		c := <-accepted
		held = append(held, c)
		from[c.RemoteAddr().(*net.TCPAddr).IP.String()]++
	}
	if from["127.0.0.2"] != 2 || from["127.0.0.3"] != 2 {
		t.Fatalf("connections from %v, want 2 from each address", from)
	}
	held[0].Close() // the node closes one: it comes again
	select {
	case c := <-accepted:
		held = append(held, c)
	case <-time.After(5 * time.Second):
		t.Fatal("a closed connection was not opened again")
	}
	f.Stop()
	for _, c := range held[1:] {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Fatalf("a connection still open after Stop: read %d, %v", n, err)
		}
	}
}
