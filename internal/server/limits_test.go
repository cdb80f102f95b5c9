package server

import (
	"fmt"
	"testing"
	"time"

	floods "github.com/didnmf/didnmf/internal/flood"
)

// flood keeps per idle connections to addr from each of 127.0.0.2-.5, as any local user can
// (every one owns 127.0.0.0/8): a connection the node closes is opened again 100 ms later. It
// returns once they are all open; the flood stops when the test ends.
func flood(t *testing.T, addr string, per int) {
	t.Helper()
	f := floods.Hold(addr, []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}, per, 100*time.Millisecond)
	t.Cleanup(f.Stop)
	if !f.WaitOpen(4*per, 10*time.Second) {
		t.Fatalf("%d of %d flood connections to %s open", f.Opened(), 4*per, addr)
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
