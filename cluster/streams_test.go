package cluster

import (
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestGossipFloodFromManyAddresses holds idle connections from 127.0.0.2-.5 to a node's
// gossip port, as many as it serves (finding 3 of issue 30: every local user owns
// 127.0.0.0/8, and such a flood made clients' joins fail), opening again each one the node
// closes. Nodes joining through it during the flood still join within 2 s each: the flood's
// connections are evicted for theirs.
func TestGossipFloodFromManyAddresses(t *testing.T) {
	a := start(t, Config{Name: "a", Meta: memberMeta(9101)})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	var mu sync.Mutex
	open := 0
	for _, ip := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
		for range maxStreamsPerIP {
			wg.Add(1)
			go func() {
				defer wg.Done()
				first := true
				for {
					if c, err := d.Dial("tcp", a.Local().Gossip); err == nil {
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
	waitFor(t, 10*time.Second, "the flood's connections open", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return open == 4*maxStreamsPerIP
	})
	for i, name := range []string{"b", "c", "d"} {
		began := time.Now()
		n := start(t, Config{Name: name, Join: []string{a.Local().Gossip}, Meta: memberMeta(9102 + i)})
		if took := time.Since(began); took > 2*time.Second {
			t.Fatalf("%s took %v to join during the flood", name, took.Round(time.Millisecond))
		}
		waitFor(t, converge, name+" sees a during the flood", func() bool {
			return slices.Contains(names(n.Members()), "a")
		})
	}
	if a.RefusedStreams() == 0 {
		t.Fatal("no flood connection evicted")
	}
}
