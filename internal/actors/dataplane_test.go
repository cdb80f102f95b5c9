package actors

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/internal/frame"
	"github.com/didnmf/didnmf/internal/rawio"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/pki"
)

// planeFrames sums the frames the nodes' data planes wrote and delivered.
func planeFrames(lc *LocalCluster) (sent, delivered int64) {
	for _, n := range lc.Nodes {
		if n.plane != nil {
			sent += n.plane.sent.Load()
			delivered += n.plane.delivered.Load()
		}
	}
	return sent, delivered
}

// linkAll makes the data plane links between every two nodes of lc, and waits until they are
// up: links are made as jobs need them and stay, so tests that count goroutines across a job
// make them all first.
func linkAll(t *testing.T, lc *LocalCluster) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		down := 0
		for _, from := range lc.Nodes {
			for _, to := range lc.Nodes {
				if from != to && from.plane != nil {
					if _, up := from.plane.link(to.Address()); !up {
						down++
					}
				}
			}
		}
		if down == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d data plane links not up", down)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// planeResent sums the frames the nodes' data planes sent again through the remote.
func planeResent(lc *LocalCluster) (n int64) {
	for _, n2 := range lc.Nodes {
		if n2.plane != nil {
			n += n2.plane.resent.Load()
		}
	}
	return n
}

// breakLinks closes connections of every node's data plane, as a network fault would: the
// links' (the sending ends) or, with both, the accepted ones too. Closing a sending end loses
// nothing written; closing a receiving end loses what it had not read yet.
func breakLinks(lc *LocalCluster, both bool) int {
	closed := 0
	for _, n := range lc.Nodes {
		p := n.plane
		p.mu.Lock()
		for _, l := range p.links {
			if l.state == linkUp {
				l.conn.Close()
				closed++
			}
		}
		if both {
			for c := range p.conns {
				c.Close()
				closed++
			}
		}
		p.mu.Unlock()
	}
	return closed
}

// TestCollectivesTakeTheDataPlane: between nodes, the collectives' messages go over the data
// plane (with TLS, as in a real cluster), the job gives the driver's bits, and a cluster
// without a data plane gives the same bits.
func TestCollectivesTakeTheDataPlane(t *testing.T) {
	ca, err := pki.CAFromSecret(pki.NewSecret())
	if err != nil {
		t.Fatal(err)
	}
	const iters = 60
	for _, tc := range []struct {
		name     string
		dataPort int
	}{{"data plane", 0}, {"remote only", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			lc, cl := testClusterWith(t, 3, NodeConfig{Threads: 2, DataPort: tc.dataPort, TLS: creds(t, ca, "node", pki.RolePeer)})
			s := spec("synthetic:m=7,n=600,k=3,seed=5,noise=0.05", "did", 3, 4, lc.Addresses(), iters)
			want := driverRun(t, s)
			// A first job makes the links; the second must find them up.
			for i := range 2 {
				got, err := runJob(t, cl, s)
				if err != nil {
					t.Fatal(err)
				}
				checkSame(t, fmt.Sprintf("%s, job %d", tc.name, i), got, want)
			}
			sent0, delivered0 := planeFrames(lc)
			got, err := runJob(t, cl, s)
			if err != nil {
				t.Fatal(err)
			}
			checkSame(t, tc.name+", job 3", got, want)
			sent, delivered := planeFrames(lc)
			sent, delivered = sent-sent0, delivered-delivered0
			if tc.dataPort < 0 {
				if sent != 0 || delivered != 0 || lc.Nodes[0].plane != nil {
					t.Fatalf("a cluster without a data plane sent %d frames", sent)
				}
				return
			}
			// 4 shards on 3 nodes: at least 2 shards are on another node than the reducer,
			// each with a partial and a result an iteration.
			if min := int64(2 * 2 * iters); delivered < min || sent < delivered {
				t.Fatalf("data planes sent %d frames and delivered %d, want at least %d delivered", sent, delivered, min)
			}
			if d := drops(lc); len(d) != 0 {
				t.Fatalf("a legitimate job had messages dropped: %v", d)
			}
			waitAcknowledged(t, lc)
			if r := planeResent(lc); r != 0 {
				t.Fatalf("%d frames sent again on links that did not break", r)
			}
			checkRawIO(t, lc)
		})
	}
}

// checkRawIO checks that every data plane connection of lc, accepted or dialled, reads and
// writes with raw system calls (package rawio) on Linux.
func checkRawIO(t *testing.T, lc *LocalCluster) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	seen := 0
	for _, n := range lc.Nodes {
		n.plane.mu.Lock()
		for c := range n.plane.conns {
			if tc, ok := c.(*tls.Conn); ok {
				c = tc.NetConn()
			}
			if !rawio.Raw(c) {
				t.Errorf("node %s: a data plane connection is a %T, not a *rawio.Conn", n.Address(), c)
			}
			seen++
		}
		n.plane.mu.Unlock()
	}
	if seen == 0 {
		t.Error("no data plane connections to check")
	}
}

// waitAcknowledged waits until every link of lc's data planes has had every frame it wrote
// acknowledged, and keeps none.
func waitAcknowledged(t *testing.T, lc *LocalCluster) {
	t.Helper()
	waitFor(t, "every frame acknowledged", func() bool {
		for _, n := range lc.Nodes {
			n.plane.mu.Lock()
			links := maps.Clone(n.plane.links)
			n.plane.mu.Unlock()
			for _, l := range links {
				l.wmu.Lock()
				pending := l.acked != l.seq || len(l.kept) != 0 || l.bytes != 0
				l.wmu.Unlock()
				if pending {
					return false
				}
			}
		}
		return true
	})
}

// TestDataPlaneReceiversThatDoNotAcknowledge: receivers that read frames but never
// acknowledge them (a stuck acknowledger, or a build without acknowledgements) make their
// senders take the links down after Timeouts.DataAckTimeout and send what was kept through the
// remote; the job needs no recovery and ends with the driver's bits.
func TestDataPlaneReceiversThatDoNotAcknowledge(t *testing.T) {
	t.Parallel()
	lc, cl := testClusterWith(t, 3, NodeConfig{Threads: 2, Faults: &Faults{IterationDelay: 2 * time.Millisecond},
		Timeouts: Timeouts{Stall: 300 * time.Millisecond, DataAckEvery: time.Hour, DataAckTimeout: 100 * time.Millisecond, DataRetry: 50 * time.Millisecond}})
	s := spec("synthetic:m=6,n=900,k=3,seed=2", "did", 3, 5, lc.Addresses(), 300)
	s.CheckpointEvery = 20
	want := driverRun(t, s)
	got, err := runJob(t, cl, s)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "no acknowledgements", got, want)
	if len(got.Recoveries) != 0 {
		t.Fatalf("the job recovered %d times (%v)", len(got.Recoveries), got.Recoveries)
	}
	_, delivered := planeFrames(lc)
	if resent := planeResent(lc); delivered == 0 || resent == 0 {
		t.Fatalf("%d frames delivered, %d sent again: want links that carried frames and were taken down", delivered, resent)
	}
}

// TestDataPlaneLinksBreakMidJob cuts every data plane link twice while a job runs: the sending
// ends only, or both ends (which loses the frames the receivers had not read yet). Neither
// loses a message: the frames not acknowledged go again through the remote, and so do the
// collectives until the links are made again. The job needs no recovery (its stall timeout
// is short) and ends with the driver's bits.
func TestDataPlaneLinksBreakMidJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		both bool
	}{{"sending ends", false}, {"both ends", true}} {
		t.Run(tc.name, func(t *testing.T) {
			lc, cl := testClusterWith(t, 3, NodeConfig{Threads: 2, Faults: &Faults{IterationDelay: 2 * time.Millisecond},
				Timeouts: Timeouts{Stall: 300 * time.Millisecond, DataRetry: 50 * time.Millisecond}})
			s := spec("synthetic:m=6,n=900,k=3,seed=2", "did", 3, 5, lc.Addresses(), 400)
			s.CheckpointEvery = 20
			want := driverRun(t, s)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			job, err := cl.Submit(ctx, lc.Nodes[0].Address(), s)
			if err != nil {
				t.Fatal(err)
			}
			var cuts []int
			var before int64
			for p := range job.Progress() {
				if p.Iteration >= 100 && len(cuts) == 0 || p.Iteration >= 200 && len(cuts) == 1 {
					_, before = planeFrames(lc)
					cuts = append(cuts, breakLinks(lc, tc.both))
				}
			}
			got, err := job.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			checkSame(t, tc.name, got, want)
			if len(got.Recoveries) != 0 {
				t.Fatalf("cutting the links lost a message: the job recovered %d times (%v)", len(got.Recoveries), got.Recoveries)
			}
			if resent := planeResent(lc); tc.both && resent == 0 {
				t.Fatal("cutting both ends left no frame to send again: the cut came between acknowledgements, or frames are not kept")
			}
			if len(cuts) != 2 || cuts[0] == 0 || cuts[1] == 0 {
				t.Fatalf("connections cut: %v, want two cuts of some", cuts)
			}
			if _, after := planeFrames(lc); after <= before {
				t.Fatalf("no frame delivered after the second cut (%d before, %d after): the links were not made again", before, after)
			}
		})
	}
}

// dialPlane connects to a node's data plane with the given TLS client configuration (nil:
// plain TCP) and returns the connection, or the handshake's error.
func dialPlane(t *testing.T, n *Node, cfg *tls.Config) (net.Conn, error) {
	t.Helper()
	raw, err := net.DialTimeout("tcp", n.plane.Address(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	if cfg == nil {
		return raw, nil
	}
	cfg = cfg.Clone()
	cfg.ServerName = "127.0.0.1"
	c := tls.Client(raw, cfg)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := c.Handshake(); err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// frameOf returns the bytes of a frame.
func frameOf(t testing.TB, kind byte, target string, body []byte) []byte {
	t.Helper()
	b, err := frame.Begin(nil, kind, target)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, body...)
	if err := frame.End(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// waitDrop waits until node counts a drop under cause beyond before.
func waitDrop(t *testing.T, n *Node, cause string, before int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); n.Drops()[cause] <= before; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not counted as %q: %v", cause, n.Drops())
		}
	}
}

// isClosed tells whether the other end closed c (a read gets EOF or a reset).
func isClosed(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !strings.Contains(err.Error(), "timeout")
}

// TestDataPlaneRefusesStrangers attacks a running job's nodes through their data plane port:
// parties without a certificate of the cluster, or with a client's, get no frame read; a
// peer's malformed frames are dropped and counted, and an oversized one closes its
// connection. The job ends with its fault-free bits and every node answers.
func TestDataPlaneRefusesStrangers(t *testing.T) {
	h := newHostileSetup(t, &Faults{IterationDelay: 2 * time.Millisecond})
	v := h.startVictim(t, 300)
	node := h.lc.Nodes[1]
	partial, err := proto.Marshal(&messages.Partial{JobId: v.job.ID, Seq: 1, Chunk: chunked.Split([]float64{1e300}, chunked.Floats)[0]})
	if err != nil {
		t.Fatal(err)
	}
	reducer := "host/" + v.job.ID + "-e0-r1-0"
	strangerCA, err := pki.CAFromSecret(pki.NewSecret())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("no TLS", func(t *testing.T) {
		before := node.Drops()[dropDataHandshake]
		c, _ := dialPlane(t, node, nil)
		_, _ = c.Write(frameOf(t, kindPartial, reducer, partial))
		waitDrop(t, node, dropDataHandshake, before)
		if !isClosed(c) {
			t.Fatal("the connection stayed open")
		}
	})
	for _, tc := range []struct {
		name  string
		creds *pki.Config
		cause string
	}{
		{"another authority's peer", creds(t, strangerCA, "node", pki.RolePeer), dropDataHandshake},
		{"a client's certificate", creds(t, h.ca, "mallory", pki.RoleClient), dropDataRole},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := node.Drops()[tc.cause]
			// TLS 1.3: the client may finish its handshake before the server refuses it.
			if c, err := dialPlane(t, node, tc.creds.Client); err == nil {
				_, _ = c.Write(frameOf(t, kindPartial, reducer, partial))
				if !isClosed(c) {
					t.Fatal("the connection stayed open")
				}
			}
			waitDrop(t, node, tc.cause, before)
		})
	}
	t.Run("handshake flood", func(t *testing.T) {
		before := node.Drops()[dropDataEvicted]
		var idle []net.Conn
		for deadline := time.Now().Add(10 * time.Second); node.Drops()[dropDataEvicted] == before; {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections that never handshake were all taken", len(idle))
			}
			c, _ := dialPlane(t, node, nil)
			idle = append(idle, c)
		}
		// The first past the address's share evicts its oldest.
		if len(idle) <= maxHandshakesPerIP {
			t.Fatalf("evicted after %d pending handshakes from one address, want more than %d", len(idle), maxHandshakesPerIP)
		}
		if !isClosed(idle[0]) {
			t.Fatal("the oldest pending handshake of the address was not the one closed")
		}
		// Another address still gets a handshake.
		other, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}).Dial("tcp", node.plane.Address())
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		ours := creds(t, h.ca, "node", pki.RolePeer).Client.Clone()
		ours.ServerName = "127.0.0.1"
		if err := tls.Client(other, ours).Handshake(); err != nil {
			t.Fatalf("a peer from another address could not handshake while one address flooded: %v", err)
		}
		for _, c := range idle {
			c.Close()
		}
		// The node counts their handshakes as done once it read their end: then it accepts
		// again.
		waitFor(t, "the pending handshakes to end", func() bool { return node.plane.handshakes.InUse() == 0 })
	})

	peer := creds(t, h.ca, "rogue", pki.RolePeer).Client
	for _, tc := range []struct {
		name   string
		frame  []byte
		cause  string
		closes bool
	}{
		{"unknown kind", frameOf(t, 9, reducer, partial), dropDataKind, false},
		{"target not a shard or reducer", frameOf(t, kindPartial, "host", partial), dropDataTarget, false},
		{"target a future", frameOf(t, kindReduced, "future$1", partial), dropDataTarget, false},
		{"not protobuf", frameOf(t, kindReduced, "host/"+v.job.ID+"-s0", []byte{0xff, 0xff, 0xff}), dropDataMessage, false},
		{"oversized", []byte{0xff, 0xff, 0xff, 0x7f, kindPartial, 0}, dropDataStream, true},
		{"target past its end", []byte{3, 0, 0, 0, kindPartial, 200, 'h'}, dropDataStream, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := dialPlane(t, node, peer)
			if err != nil {
				t.Fatal(err)
			}
			before := node.Drops()[tc.cause]
			if _, err := c.Write(tc.frame); err != nil {
				t.Fatal(err)
			}
			waitDrop(t, node, tc.cause, before)
			if tc.closes && !isClosed(c) {
				t.Fatal("the connection stayed open after a frame that puts the stream out of step")
			}
		})
	}
	v.endsBitwise(t, h.lc, "data plane attacked")
}

// TestDataPlaneAddressIsToldToPeersOnly: a node tells its data plane's address to peers, not
// to clients.
func TestDataPlaneAddressIsToldToPeersOnly(t *testing.T) {
	h := newHostileSetup(t, nil)
	ask := func(from *Node) string {
		t.Helper()
		res, err := from.System().Root.RequestFuture(HostPID(h.lc.Nodes[0].Address()), &messages.Ping{}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res.(*messages.Pong).DataPlane
	}
	if got, want := ask(h.lc.Nodes[1]), h.lc.Nodes[0].plane.Address(); got != want {
		t.Fatalf("a peer was told %q, want %q", got, want)
	}
	if got := ask(startParty(t, creds(t, h.ca, "mallory", pki.RoleClient))); got != "" {
		t.Fatalf("a client was told the data plane's address %q", got)
	}
}

// TestDataPlaneAcks: a link keeps each frame until the receiver acknowledges it, and an
// acknowledgement that does not go forward, or goes past the frames written, is refused (the
// link then goes down).
func TestDataPlaneAcks(t *testing.T) {
	kept := func(seqs ...uint64) *dataLink {
		l := &dataLink{}
		for _, s := range seqs {
			l.kept = append(l.kept, keptFrame{seq: s, frame: make([]byte, 10)})
			l.bytes += 10
			l.seq = s
		}
		return l
	}
	for _, tc := range []struct {
		name     string
		link     *dataLink
		acked    uint64 // before
		ack      uint64
		wantErr  bool
		wantKept int
	}{
		{"none (not sent by a receiver)", kept(1, 2, 3), 0, 0, true, 3},
		{"some", kept(1, 2, 3), 0, 2, false, 1},
		{"all", kept(1, 2, 3), 0, 3, false, 0},
		{"again", kept(3), 2, 2, true, 1},
		{"past the frames written", kept(1, 2, 3), 0, 4, true, 3},
		{"going back", kept(3), 2, 1, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &dataPlane{}
			tc.link.acked = tc.acked
			err := p.ack(tc.link, tc.ack)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ack(%d) = %v, want error %v", tc.ack, err, tc.wantErr)
			}
			if len(tc.link.kept) != tc.wantKept || tc.link.bytes != 10*tc.wantKept {
				t.Fatalf("after ack(%d): %d frames (%d bytes) kept, want %d", tc.ack, len(tc.link.kept), tc.link.bytes, tc.wantKept)
			}
			for _, k := range tc.link.kept {
				if !tc.wantErr && k.seq <= tc.ack {
					t.Fatalf("frame %d kept after ack(%d)", k.seq, tc.ack)
				}
			}
		})
	}
}

// TestAckerAcknowledges: the receiving end acknowledges the frames it read
// Timeouts.DataAckEvery after the first one not acknowledged, and at once when dataAckBytes of
// frames wait.
func TestAckerAcknowledges(t *testing.T) {
	t.Parallel()
	dataAckEvery := DefaultLAN().DataAckEvery
	recv, send := net.Pipe()
	defer recv.Close()
	defer send.Close()
	a := newAcker(recv, dataAckEvery)
	defer a.stop()
	next := func() uint64 {
		t.Helper()
		var b [ackLen]byte
		_ = send.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(send, b[:]); err != nil {
			t.Fatal(err)
		}
		return binary.LittleEndian.Uint64(b[:])
	}
	start := time.Now()
	a.read(100)
	a.read(100)
	if got := next(); got != 2 {
		t.Fatalf("acknowledged %d frames, want 2", got)
	}
	if waited := time.Since(start); waited < dataAckEvery/2 {
		t.Fatalf("acknowledged after %v, before dataAckEvery (%v)", waited, dataAckEvery)
	}
	a.mu.Lock()
	a.every = time.Hour // from here on, only dataAckBytes can make it acknowledge
	a.mu.Unlock()
	go a.read(dataAckBytes) // net.Pipe's write waits for next's read
	if got := next(); got != 3 {
		t.Fatalf("acknowledged %d frames, want 3", got)
	}
}

// TestDataPlaneForgetsOldLinks: a link down for linkForgetAfter past its retry time is
// forgotten when a link is made, so that the links held are those of nodes sent to lately.
func TestDataPlaneForgetsOldLinks(t *testing.T) {
	now := time.Now()
	p := &dataPlane{links: map[string]*dataLink{
		"gone":     {state: linkDown, retryAt: now.Add(-linkForgetAfter - time.Second)},
		"down":     {state: linkDown, retryAt: now.Add(-time.Second)},
		"up":       {state: linkUp},
		"dialling": {state: linkDialling},
	}}
	p.forgetLocked(now)
	var kept []string
	for a := range p.links {
		kept = append(kept, a)
	}
	slices.Sort(kept)
	if want := []string{"dialling", "down", "up"}; !slices.Equal(kept, want) {
		t.Fatalf("links kept: %v, want %v", kept, want)
	}
}

// TestAckerClosesWhenItCannotAcknowledge: an acknowledgement that cannot be written closes
// the connection, so that the sender takes the link down rather than keep its frames.
func TestAckerClosesWhenItCannotAcknowledge(t *testing.T) {
	recv, send := net.Pipe()
	send.Close()
	a := newAcker(recv, time.Hour)
	defer a.stop()
	a.read(dataAckBytes) // acknowledges at once, and fails
	if _, err := recv.Read(make([]byte, 1)); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("after a failed acknowledgement the connection reads %v, want it closed (%v)", err, io.ErrClosedPipe)
	}
}
