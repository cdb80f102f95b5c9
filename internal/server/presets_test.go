package server

import (
	"net"
	"strconv"
	"testing"
)

// TestPresets: LANNode gossips on an IP of this machine on GossipPort; LocalNode on loopback
// with a port picked, and a member started from it with only a secret added joins nothing,
// runs with the preset's limits and answers on its gossip address.
func TestPresets(t *testing.T) {
	lan := LANNode()
	host, port, err := net.SplitHostPort(lan.Bind)
	if err != nil || net.ParseIP(host) == nil || net.ParseIP(host).IsUnspecified() || port != strconv.Itoa(GossipPort) {
		t.Errorf("LANNode binds %q, want an IP of this machine on port %d", lan.Bind, GossipPort)
	}
	local := LocalNode()
	if local.Bind != "127.0.0.1:0" || local.Node.Timeouts == lan.Node.Timeouts {
		t.Errorf("LocalNode binds %q with waits %+v; want 127.0.0.1:0 with the loopback waits", local.Bind, local.Node.Timeouts)
	}
	local.Name, local.Secret, local.Node.Threads = "solo", testKey(), 1
	s, err := Start(local)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Gossip() == "" || s.Node.Address() == "" {
		t.Fatalf("a LocalNode member has gossip %q and actor address %q", s.Gossip(), s.Node.Address())
	}
	if got := s.Members.Members(); len(got) != 1 {
		t.Errorf("a lone LocalNode member lists %d members", len(got))
	}
}
