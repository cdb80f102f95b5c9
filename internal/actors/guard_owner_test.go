package actors

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/didnmf/didnmf/pki"
)

// TestReservedClientNamesRefused: a client certificate named as an owner that is no client's
// (local: the node's own process; operator: the HTTP operator) is no credential on the actor
// port, as it would share those owners' quotas and own their jobs; a peer's certificate, and
// a client of another name, are taken.
func TestReservedClientNamesRefused(t *testing.T) {
	ca, err := pki.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	g := &guard{}
	for _, tc := range []struct {
		name string
		role pki.Role
		ok   bool
	}{
		{"alice", pki.RoleClient, true},
		{"local", pki.RoleClient, false},
		{"Local", pki.RoleClient, false},
		{"operator", pki.RoleClient, false},
		{"local", pki.RolePeer, true}, // in-process nodes' own credentials (StartLocalCluster)
		{"n1", pki.RolePeer, true},
	} {
		certPEM, _, err := ca.IssueRole(tc.name, []string{"127.0.0.1"}, tc.role)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(certPEM)
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1},
			AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}}})
		who, ok := g.partyOf(ctx)
		if ok != tc.ok || ok && (who.name != tc.name || who.role != tc.role) {
			t.Errorf("%s %s: party %+v, %v; want taken %v", tc.role, tc.name, who, ok, tc.ok)
		}
	}
}
