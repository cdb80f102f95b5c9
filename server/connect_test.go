package server

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/actors"
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
// not: the credentials' error stands.
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
	if err == nil || errors.As(err, &ue) || time.Since(start) > 2*time.Second {
		t.Errorf("another cluster's secret: %v after %v, want the join's error at once", err, time.Since(start))
	}
	t.Logf("another cluster's secret: %v", err)
}
