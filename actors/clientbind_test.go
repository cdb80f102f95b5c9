package actors

import (
	"testing"
	"time"

	"github.com/didnmf/didnmf/pki"
)

// TestClientOnlyNodeDialsFromItsHost starts a client's node on 127.0.0.7 (a client's
// --client-bind): its connections must leave from that IP, where its actor address is, or
// the member's sender proof (senders.go) drops every reply to it.
func TestClientOnlyNodeDialsFromItsHost(t *testing.T) {
	ca, err := pki.CAFromSecret(pki.NewSecret())
	if err != nil {
		t.Fatal(err)
	}
	node, err := StartNode(NodeConfig{Threads: 1, TLS: creds(t, ca, "node", pki.RolePeer)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Close)
	// As server.NewClient gives it: a certificate for the IP it binds.
	bob, err := ca.Credentials("bob", []string{"127.0.0.7"}, pki.RoleClient)
	if err != nil {
		t.Fatal(err)
	}
	party, err := StartNode(NodeConfig{Threads: 1, Host: "127.0.0.7", TLS: bob, DataPort: -1, ClientOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(party.Close)
	answersWithin(t, party, node, 5*time.Second, "a client's node on 127.0.0.7")
}
