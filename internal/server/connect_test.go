package server

import (
	"errors"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/actors"
	"github.com/didnmf/didnmf/pki"
)

// freePort returns a loopback address at which nothing listens: a listener bound and closed.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestConnectAddressErrors: a malformed address, or a host name that does not resolve, is an
// *AddressError before anything is tried.
func TestConnectAddressErrors(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"127.0.0.1", "missing port"},
		{":7946", "no host"},
		{"127.0.0.1:0", `port "0"`},
		{"127.0.0.1:99999", `port "99999"`},
		{"127.0.0.1:gossip", `port "gossip"`},
		{"no-such-host.invalid:7946", "no-such-host.invalid"},
	} {
		start := time.Now()
		c2, err := Connect(ClientConfig{Cluster: []string{c.addr}, Secret: testKey()})
		if c2 != nil {
			c2.Close()
		}
		var ae *AddressError
		if !errors.As(err, &ae) || ae.Addr != c.addr || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an *AddressError saying %q", c.addr, err, c.want)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("%s: took %v", c.addr, took)
		}
	}
}

// TestConnectUnreachable: nothing listening is an *UnreachableError after Reach, which says
// how long it tried and why; a node that answers but refuses the client (another secret) is
// not: the error says the authentication failed (an *AuthError), at once.
func TestConnectUnreachable(t *testing.T) {
	addr := freePort(t)
	start := time.Now()
	_, err := Connect(ClientConfig{Cluster: []string{addr}, Secret: testKey(), Reach: 600 * time.Millisecond})
	took := time.Since(start)
	var ue *UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("nothing at %s: %v, want an *UnreachableError", addr, err)
	}
	if ue.Tried < 600*time.Millisecond || took > 5*time.Second || ue.Reason != "connection refused" ||
		!strings.Contains(err.Error(), "nothing answered at "+addr) || !strings.Contains(err.Error(), "tried for 0.6 s") {
		t.Errorf("after %v: %v (tried %v, reason %q)", took, err, ue.Tried, ue.Reason)
	}

	s, err := Start(Config{Name: "a", Bind: "127.0.0.1:0", Node: actors.NodeConfig{DataDir: filepath.Join(t.TempDir(), "a")}, Secret: testKey()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start = time.Now()
	c, err := Connect(ClientConfig{Cluster: []string{s.Gossip()}, Secret: testKey(), Reach: 3 * time.Second})
	if c != nil {
		c.Close()
	}
	var ae *AuthError
	if err == nil || errors.As(err, &ue) || !errors.As(err, &ae) || !strings.Contains(err.Error(), "authentication failed") || time.Since(start) > 2*time.Second {
		t.Errorf("another cluster's secret: %v after %v, want an *AuthError at once", err, time.Since(start))
	}
	t.Logf("another cluster's secret: %v", err)
}

// TestConnectWithCertificateOnly: a client with a client certificate of the cluster and no
// gossip key connects (it takes no part in the gossip), is listed by no member, and follows
// the cluster: a member that joins later shows up in its view, one that leaves is gone from it.
func TestConnectWithCertificateOnly(t *testing.T) {
	key := testKey()
	a := startMembers(t, nil, nil, key, "a")[0]
	c, err := Connect(ClientConfig{Cluster: []string{a.Gossip()}, TLS: credsOf(t, key, "alice", pki.RoleClient)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	names := func() []string {
		var out []string
		for _, w := range c.Members.Workers() {
			out = append(out, w.Name)
		}
		return out
	}
	if got := names(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("the client's view: %v", got)
	}
	b, err := Start(Config{Name: "b", Bind: "127.0.0.1:0", Join: []string{a.Gossip()}, Secret: key,
		Node: actors.NodeConfig{DataDir: filepath.Join(t.TempDir(), "b"), Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for deadline := time.Now().Add(10 * time.Second); !slices.Equal(names(), []string{"a", "b"}); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the client's view does not list b, which joined: %v", names())
		}
	}
	for _, s := range []*Server{a, b} {
		if n := len(s.Members.Members()); n != 2 {
			t.Errorf("%s lists %d nodes, want a and b: %v", s.Name(), n, s.Members.Members())
		}
	}
	if err := b.Leave(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !slices.Equal(names(), []string{"a"}); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the client's view still lists b, which left: %v", names())
		}
	}
}
