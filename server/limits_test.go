package server

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// flood keeps per idle connections to addr from each of 127.0.0.2-.5, as any local user can
// (every one owns 127.0.0.0/8): a connection the node closes is opened again 100 ms later. It
// returns once they are all open; the flood stops when the test ends.
func flood(t *testing.T, addr string, per int) {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := 0
	t.Cleanup(func() { close(stop); wg.Wait() })
	for _, ip := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
		for range per {
			wg.Add(1)
			go func() {
				defer wg.Done()
				first := true
				for {
					if c, err := d.Dial("tcp", addr); err == nil {
						if first {
							mu.Lock()
							open++
							mu.Unlock()
							first = false
						}
						go func() { <-stop; c.Close() }()
						_, _ = c.Read(make([]byte, 1)) // until the node closes it
						c.Close()
					}
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Millisecond):
					}
				}
			}()
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := open
		mu.Unlock()
		if n == 4*per {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d flood connections to %s open", n, 4*per, addr)
		}
	}
}

// TestStatusDuringFloodsFromManyAddresses holds idle connections from 127.0.0.2-.5 to a
// member's gossip, actor and data ports, as many from each address as each port takes before
// a handshake (finding 3 and 9 of issue 30: such floods made status fail on the gossip port,
// take 6.3 s on the actor port, and kept nodes from linking). Throughout, a client connecting anew through that member
// gets every member's status within 2 s.
func TestStatusDuringFloodsFromManyAddresses(t *testing.T) {
	key := testKey()
	members := startMembers(t, nil, nil, key, "a", "b")
	a := members[0]
	flood(t, a.Gossip(), 32)
	flood(t, a.Node.Address(), 32)
	flood(t, a.Node.DataPlaneAddress(), 16)
	for i := range 3 {
		c, err := Connect(ClientConfig{Cluster: []string{a.Gossip()}, Secret: key, Name: fmt.Sprintf("carol%d", i), Bind: "127.0.0.1"})
		if err != nil {
			t.Fatalf("a client could not connect during the floods (%d): %v", i, err)
		}
		began := time.Now()
		st := c.Status(2 * time.Second)
		took := time.Since(began)
		answered := 0
		for _, m := range st {
			if m.Load != nil {
				answered++
			} else if m.Err != nil {
				t.Errorf("during the floods (%d): %s: %v", i, m.Member.Name, m.Err)
			}
		}
		c.Close()
		if answered != len(members) || took > 2*time.Second {
			t.Fatalf("during the floods (%d): %d of %d members answered status, in %v", i, answered, len(members), took.Round(time.Millisecond))
		}
	}
}
