package actors

import (
	"fmt"
	"testing"
	"time"

	"github.com/didnmf/didnmf/pki"
)

// TestClientOnlyNodeDialsFromItsHost starts a client's node on 127.0.0.7 (a client's
// --client-bind): its connections must leave from that IP, where its actor address is, or
// the member's sender proof (senders.go) drops every reply to it.
func TestClientOnlyNodeDialsFromItsHost(t *testing.T) {
	ca, node := tlsMember(t)
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

// TestManyProcessesOfOneClient: one user runs 32 client processes at once (every one with the
// same certificate name in the cluster-secret mode, the login name), each holding a stream
// at the node; every one is answered. With 8 streams an identity, the 9th was refused.
func TestManyProcessesOfOneClient(t *testing.T) {
	ca, node := tlsMember(t)
	bob := creds(t, ca, "bob", pki.RoleClient)
	const processes = 32
	for i := range processes {
		party, err := StartNode(NodeConfig{Threads: 1, TLS: bob, DataPort: -1, ClientOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(party.Close)
		answersWithin(t, party, node, 5*time.Second, fmt.Sprintf("process %d of one client", i))
	}
	if got := node.Drops()[dropIdentityStreams]; got != 0 {
		t.Fatalf("%d streams refused as past the identity's share, want 0", got)
	}
}
