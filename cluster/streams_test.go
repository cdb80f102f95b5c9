package cluster

import (
	"bytes"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/flood"
)

// TestGossipFloodFromManyAddresses holds idle connections from 127.0.0.2-.5 to a node's
// gossip port, as many as it serves (finding 3 of issue 30: every local user owns
// 127.0.0.0/8, and such a flood made clients' joins fail), opening again each one the node
// closes. Nodes joining through it during the flood still join within 2 s each: the flood's
// connections are evicted for theirs.
func TestGossipFloodFromManyAddresses(t *testing.T) {
	a := start(t, Config{Name: "a", Meta: memberMeta(9101)})
	f := flood.Hold(a.Local().Gossip, []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}, maxStreamsPerIP, 100*time.Millisecond)
	t.Cleanup(f.Stop)
	if !f.WaitOpen(4*maxStreamsPerIP, 10*time.Second) {
		t.Fatalf("%d of %d flood connections open", f.Opened(), 4*maxStreamsPerIP)
	}
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

// TestFrontDoorDispatch: a stream to the gossip port that starts with a TLS handshake byte
// or FrontDoorPlain goes to Config.FrontDoor with every byte still to be read; gossip streams
// still reach memberlist (two nodes with a front door join); without a front door such
// streams are closed; a stream that sends nothing is closed after firstByteWait.
func TestFrontDoorDispatch(t *testing.T) {
	t.Parallel()
	got := make(chan []byte, 4)
	door := func(c net.Conn) {
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 4)
		n, _ := io.ReadFull(c, b)
		got <- b[:n]
		_, _ = c.Write([]byte("view"))
	}
	a := start(t, Config{Name: "a", Meta: memberMeta(9101), FrontDoor: door})
	b := start(t, Config{Name: "b", Join: []string{a.Local().Gossip}, Meta: memberMeta(9102), FrontDoor: door})
	for _, n := range []node{a, b} {
		waitFor(t, converge, n.Local().Name+" sees a and b", func() bool {
			return slices.Equal(names(n.Members()), []string{"a", "b"})
		})
	}
	plain := start(t, Config{Name: "p", Meta: memberMeta(9103)}) // no front door

	for _, tc := range []struct {
		name    string
		to      string
		send    []byte
		door    bool // the front door is handed the stream
		answers bool
	}{
		{"TLS handshake byte", a.Local().Gossip, []byte{0x16, 3, 1, 0}, true, true},
		{"plain front door byte", a.Local().Gossip, []byte{FrontDoorPlain, 'x', 'y', 'z'}, true, true},
		{"no front door: TLS closed", plain.Local().Gossip, []byte{0x16, 3, 1, 0}, false, false},
		{"no front door: plain closed", plain.Local().Gossip, []byte{FrontDoorPlain, 1, 2, 3}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.DialTimeout("tcp", tc.to, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			answer, _ := io.ReadAll(c)
			if tc.answers != bytes.Equal(answer, []byte("view")) {
				t.Errorf("answer %q", answer)
			}
			if tc.door {
				select {
				case b := <-got:
					if !bytes.Equal(b, tc.send) {
						t.Errorf("the front door read %v, the client sent %v", b, tc.send)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("the front door was not called")
				}
			}
		})
	}
	select {
	case b := <-got:
		t.Fatalf("the front door was handed a stream it should not have: %v", b)
	default:
	}

	// A stream that never sends its first byte is closed, its slot given back.
	c, err := net.DialTimeout("tcp", a.Local().Gossip, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("a silent stream read %d bytes, %v", n, err)
	}
	if took := time.Since(start); took < firstByteWait/2 || took > 8*time.Second {
		t.Errorf("a silent stream was closed after %v, want about %v", took, firstByteWait)
	}
}

// TestGossipBytesAndHealthScore checks that the gossip port counts what it sends and
// receives, packets (the probes) and streams (the join's push/pull) alike, and that a node
// answering in time has the healthy score 0.
func TestGossipBytesAndHealthScore(t *testing.T) {
	t.Parallel()
	a := start(t, Config{Name: "a", Meta: memberMeta(9001)})
	if sent, received := a.GossipBytes(); sent != 0 || received != 0 {
		t.Fatalf("a node alone counted %d bytes sent, %d received", sent, received)
	}
	b := start(t, Config{Name: "b", Join: []string{a.Local().Gossip}, Meta: memberMeta(9002)})
	for _, n := range []node{a, b} {
		waitFor(t, converge, n.Local().Name+" sent and received gossip", func() bool {
			sent, received := n.GossipBytes()
			return sent > 0 && received > 0
		})
		if s := n.HealthScore(); s != 0 {
			t.Errorf("%s: health score %d, want 0 (healthy)", n.Local().Name, s)
		}
	}
	// The probes go on: the counts grow.
	sent, received := a.GossipBytes()
	waitFor(t, converge, "a's counts grow", func() bool {
		s, r := a.GossipBytes()
		return s > sent && r > received
	})
}
