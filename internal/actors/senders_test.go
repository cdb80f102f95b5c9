package actors

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/pki"
)

// staticMembers is a membership a test sets: the live workers.
type staticMembers struct {
	mu      sync.Mutex
	workers []cluster.Member
}

func (m *staticMembers) Workers() []cluster.Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.workers)
}

// set sets the live workers.
func (m *staticMembers) set(workers ...cluster.Member) {
	m.mu.Lock()
	m.workers = workers
	m.mu.Unlock()
}

// member is a worker named name at an actor address.
func member(name, addr string) cluster.Member {
	return cluster.Member{Name: name, Meta: cluster.Meta{Role: cluster.RoleMember, Actor: addr, Capacity: 1}}
}

// memberNodes starts n nodes with peer certificates named "node" of ca, each with the
// membership members (which the test fills).
func memberNodes(t *testing.T, ca *pki.CA, n int) ([]*Node, *staticMembers) {
	t.Helper()
	members := &staticMembers{}
	tls := creds(t, ca, "node", pki.RolePeer)
	var nodes []*Node
	for range n {
		node, err := StartNode(NodeConfig{Threads: 1, TLS: tls, Members: members})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(node.Close)
		nodes = append(nodes, node)
	}
	return nodes, members
}

// countingListener is a TCP listener that counts the connections made to it.
type countingListener struct {
	addr  string
	conns atomic.Int64
}

// listenCounting listens on a free port of ip until the test ends.
func listenCounting(t *testing.T, ip string) *countingListener {
	t.Helper()
	lis, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	t.Cleanup(func() { lis.Close() })
	c := &countingListener{addr: lis.Addr().String()}
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			c.conns.Add(1)
			conn.Close()
		}
	}()
	return c
}

// noConnection waits until refused tells the attempt was refused (and counted), or a
// connection came, and fails the test if one came (then or in the next 300 ms).
func (c *countingListener) noConnection(t *testing.T, what string, refused func() bool) {
	t.Helper()
	waitFor(t, "a refusal or a connection to "+what, func() bool { return c.conns.Load() > 0 || refused() })
	time.Sleep(300 * time.Millisecond)
	if n := c.conns.Load(); n != 0 {
		t.Fatalf("connected %d times to %s", n, what)
	}
}

// rawStream opens a remote stream to a node with the given credentials, as protoactor's
// endpoint writer does, and returns a function that sends a batch on it.
func rawStream(t *testing.T, addr string, tls *pki.Config) func(*remote.MessageBatch) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tls.Client)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := remote.NewRemotingClient(conn).Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
		ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{MemberId: "raw", Address: "127.0.0.1:1"}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	return func(b *remote.MessageBatch) {
		t.Helper()
		if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}); err != nil {
			t.Fatal(err)
		}
	}
}

// batchOf is a batch of one message to target.
func batchOf(t *testing.T, target string, m proto.Message) *remote.MessageBatch {
	t.Helper()
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return &remote.MessageBatch{TypeNames: []string{string(proto.MessageName(m))}, Targets: []string{target},
		Envelopes: []*remote.MessageEnvelope{{MessageData: data}}}
}

// sumDrops sums a node's drop counters whose cause starts with prefix.
func sumDrops(n *Node, prefix string) int64 {
	var sum int64
	for k, v := range n.Drops() {
		if strings.HasPrefix(k, prefix) {
			sum += v
		}
	}
	return sum
}

// TestClientNodeTakesNothingFromClients: a client's node (ClientOnly) runs no host: bob, a
// client of the same cluster, can neither submit a job into alice's client process nor send
// it anything else, and a peer can send it only what a client receives, to its client actors
// and futures; alice's own job runs with the driver's bits, and her node dials only members.
func TestClientNodeTakesNothingFromClients(t *testing.T) {
	ca, err := pki.CAFromSecret(pki.NewSecret())
	if err != nil {
		t.Fatal(err)
	}
	nodes, members := memberNodes(t, ca, 2)
	members.set(member("node", nodes[0].Address()), member("node", nodes[1].Address()))
	aliceNode, err := StartNode(NodeConfig{Threads: 1, TLS: creds(t, ca, "alice", pki.RoleClient), ClientOnly: true, Members: members})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(aliceNode.Close)
	alice := NewClient(aliceNode.System(), Timeouts{})
	t.Cleanup(alice.Close)
	addrs := []string{nodes[0].Address(), nodes[1].Address()}
	s := spec("synthetic:m=5,n=400,k=2,seed=4", "did", 2, 2, addrs, 20)
	want := driverRun(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job, err := alice.Submit(ctx, addrs[0], s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := job.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "a client-only node's job", got, want)

	// Bob submits a job straight into alice's process (finding 2): no coordinator starts
	// there, the submission is dropped.
	bobTLS := creds(t, ca, "bob", pki.RoleClient)
	bobNode := startParty(t, bobTLS)
	bob := bobNode.System()
	const token = "0123456789abcdef0123"
	before := aliceNode.Drops()[dropClientOnly]
	bob.Root.Send(HostPID(aliceNode.Address()), &messages.SubmitJob{JobId: JobIDFor(token), OwnerToken: token,
		Client: &messages.Pid{Address: bob.Address(), Id: "client$1"}, Spec: spec("synthetic:m=5,n=400,k=2,seed=4", "did", 2, 2, []string{aliceNode.Address()}, 20)})
	// What alice's process sends bob (a client's certificate) his node drops and counts.
	taken := func() bool {
		_, ok := aliceNode.System().ProcessRegistry.GetLocal(HostName + "/" + JobIDFor(token) + coordSuffix)
		return ok || sumDrops(bobNode, dropRolePrefix) > 0
	}
	waitFor(t, "bob's submission dropped or taken", func() bool { return taken() || aliceNode.Drops()[dropClientOnly] > before })
	if time.Sleep(200 * time.Millisecond); taken() {
		t.Fatalf("alice's client process took bob's submission (bob's node: %v)", dropsSorted(bobNode.Drops()))
	}
	if aliceNode.Host() != nil {
		t.Fatal("a client's node runs a host actor")
	}
	// Every message of the protocol from bob, to anything: dropped.
	send := rawStream(t, aliceNode.Address(), bobTLS)
	all := everyMessage(job.ID)
	before = aliceNode.Drops()[dropClientOnly]
	for _, to := range []string{"host", alice.pid.Id, "future$1"} {
		for _, m := range all {
			send(batchOf(t, to, m))
		}
	}
	sent := int64(3 * len(all))
	waitFor(t, "bob's messages dropped", func() bool { return aliceNode.Drops()[dropClientOnly]-before >= sent })

	// From a peer: only what a client receives, to its actors.
	send = rawStream(t, aliceNode.Address(), creds(t, ca, "node", pki.RolePeer))
	for _, tc := range []struct {
		to    string
		msg   proto.Message
		cause string
	}{
		{"host", &messages.SubmitJob{}, dropClientOnlyType},
		{alice.pid.Id, &messages.StopJob{}, dropClientOnlyType},
		{"host", &messages.Progress{}, dropClientOnlyTo},
		{"activator", &messages.Pong{}, dropClientOnlyTo},
		{"future$1/x", &messages.Pong{}, dropClientOnlyTo},
	} {
		before := aliceNode.Drops()[tc.cause]
		send(batchOf(t, tc.to, tc.msg))
		waitFor(t, "a peer's "+string(proto.MessageName(tc.msg))+" to "+tc.to+" dropped", func() bool { return aliceNode.Drops()[tc.cause] > before })
	}
	before = sumDrops(aliceNode, "")
	send(batchOf(t, alice.pid.Id, &messages.Progress{JobId: "gone"}))
	send(batchOf(t, "future$zz", &messages.Pong{}))
	time.Sleep(200 * time.Millisecond)
	if after := sumDrops(aliceNode, ""); after != before {
		t.Fatalf("a peer's news to a client actor was dropped: %v", dropsSorted(aliceNode.Drops()))
	}

	// Alice's node dials members only.
	lis := listenCounting(t, "127.0.0.1")
	aliceNode.System().Root.Send(actor.NewPID(lis.addr, "x"), &messages.Ping{})
	lis.noConnection(t, "a non-member, from a client's node", func() bool { return aliceNode.Drops()[dropDialRefused] > 0 })
}

// TestSenderMustBeProven: a client's request is answered only at an address its session
// proved. Naming an address on another IP as the sender: dropped, and nothing connects there;
// naming another client's actor (same IP, another key): dropped; its own: answered.
func TestSenderMustBeProven(t *testing.T) {
	h := newHostileSetup(t, nil)
	node := h.lc.Nodes[0]
	bob := startParty(t, creds(t, h.ca, "bob", pki.RoleClient)).System().Root
	third := listenCounting(t, "127.0.0.3")
	before := node.Drops()[dropSenderUnproven]
	bob.RequestWithCustomSender(HostPID(node.Address()), &messages.HostStatus{}, actor.NewPID(third.addr, "future$1"))
	bob.RequestWithCustomSender(HostPID(node.Address()), &messages.HostStatus{}, h.alice.pid)
	third.noConnection(t, "an address a client named as its sender", func() bool { return node.Drops()[dropSenderUnproven]-before >= 2 })
	res, err := bob.RequestFuture(HostPID(node.Address()), &messages.HostStatus{}, 5*time.Second).Result()
	if _, ok := res.(*messages.Pong); err != nil || !ok {
		t.Fatalf("bob's own request: %v %v", res, err)
	}
}

// TestDeadLettersAtTheNodesFutures: a client that sends to a missing job actor, naming the
// node's own pending request as the sender (finding 8), would have protoactor's dead-letter
// answer resolve that request; the sender is not proven, the message is dropped, and the
// request waits for its own answer.
func TestDeadLettersAtTheNodesFutures(t *testing.T) {
	h := newHostileSetup(t, nil)
	node := h.lc.Nodes[0]
	bob := startParty(t, creds(t, h.ca, "bob", pki.RoleClient)).System().Root
	silent := node.System().Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	pending := node.System().Root.RequestFuture(silent, &messages.Ping{}, 2*time.Second)
	before := node.Drops()[dropSenderUnproven]
	missing := actor.NewPID(node.Address(), HostName+"/j0123456789abcdef-coord")
	bob.RequestWithCustomSender(missing, &messages.Ping{}, pending.PID())
	res, err := pending.Result()
	if !errors.Is(err, actor.ErrTimeout) {
		t.Fatalf("the node's pending request was answered by a client's dead letter: %v %v", res, err)
	}
	if node.Drops()[dropSenderUnproven] == before {
		t.Fatalf("not counted: %v", dropsSorted(node.Drops()))
	}
}

// TestSubmissionNamingAThirdAddress: a submission whose client is at an address the session
// did not prove (finding 10: the node dialed whatever a submission named as its client) is
// dropped and nothing connects there; the host refuses one whose client is not at the
// caller's proven address, and nodes of a cluster dial it neither.
func TestSubmissionNamingAThirdAddress(t *testing.T) {
	ca, err := pki.CAFromSecret(pki.NewSecret())
	if err != nil {
		t.Fatal(err)
	}
	nodes, members := memberNodes(t, ca, 1)
	members.set(member("node", nodes[0].Address()))
	lc, err := StartLocalCluster(1, NodeConfig{Threads: 1, TLS: creds(t, ca, "node", pki.RolePeer)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lc.Close)
	third := listenCounting(t, "127.0.0.3")
	bob := startParty(t, creds(t, ca, "bob", pki.RoleClient)).System().Root
	const token = "0123456789abcdef0123"
	for _, node := range []*Node{nodes[0], lc.Nodes[0]} {
		s := spec("synthetic:m=5,n=40,k=2,seed=1", "did", 2, 1, []string{node.Address()}, 5)
		before := node.Drops()[dropSenderUnproven]
		bob.Send(HostPID(node.Address()), &messages.SubmitJob{JobId: JobIDFor(token), OwnerToken: token, Spec: s,
			Client: &messages.Pid{Address: third.addr, Id: "client$1"}})
		third.noConnection(t, "the client a submission named", func() bool { return node.Drops()[dropSenderUnproven] > before })
	}
	// The host's own check, for a message whose header says another address was proven.
	node := lc.Nodes[0]
	const cause = dropOwnerPrefix + "SubmitJob naming a client its session did not prove"
	node.System().Root.Send(node.Host(), &actor.MessageEnvelope{
		Header: map[string]string{headerRole: "client", headerName: "bob", headerAddr: "127.0.0.1:9"},
		Message: &messages.SubmitJob{JobId: JobIDFor(token), OwnerToken: token, Spec: spec("synthetic:m=5,n=40,k=2,seed=1", "did", 2, 1, nil, 5),
			Client: &messages.Pid{Address: "127.0.0.1:10", Id: "client$1"}}})
	waitFor(t, "the host's refusal counted", func() bool { return node.Drops()[cause] > 0 })
}

// TestClusterNodeDialsOnlyMembersAndClients: a node of a cluster connects to no address that
// is not a member's, a proven client's or a client of its jobs (refused before connecting,
// counted); a member's address whose certificate is not named as the member is refused
// after the handshake; a peer that is no member is answered only where it proved it listens;
// a client's job across two members still ends with the driver's bits.
func TestClusterNodeDialsOnlyMembersAndClients(t *testing.T) {
	ca, err := pki.CAFromSecret(pki.NewSecret())
	if err != nil {
		t.Fatal(err)
	}
	nodes, members := memberNodes(t, ca, 3)
	members.set(member("node", nodes[0].Address()), member("node", nodes[1].Address()),
		member("impostor", nodes[2].Address()))
	lis := listenCounting(t, "127.0.0.1")
	root := nodes[0].System().Root
	root.Send(actor.NewPID(lis.addr, "x"), &messages.Ping{})
	lis.noConnection(t, "an address that is no member", func() bool { return nodes[0].Drops()[dropDialRefused] > 0 })
	if res, err := root.RequestFuture(HostPID(nodes[2].Address()), &messages.Ping{}, time.Second).Result(); err == nil {
		t.Fatalf("a member listed under another name than its certificate's answered: %v", res)
	}
	if nodes[0].Drops()[dropDialIdentity] == 0 {
		t.Fatalf("the wrong certificate not counted: %v", dropsSorted(nodes[0].Drops()))
	}
	if _, err := root.RequestFuture(HostPID(nodes[1].Address()), &messages.Ping{}, 5*time.Second).Result(); err != nil {
		t.Fatalf("a member does not answer: %v", err)
	}

	// A peer that is no member (an operator's tool) is answered where it proved it listens;
	// one naming another address as its sender is not.
	auditor := startParty(t, creds(t, ca, "auditor", pki.RolePeer)).System().Root
	if _, err := auditor.RequestFuture(HostPID(nodes[1].Address()), &messages.HostStatus{}, 5*time.Second).Result(); err != nil {
		t.Fatalf("a peer that is no member got no answer: %v", err)
	}
	third := listenCounting(t, "127.0.0.3")
	auditor.RequestWithCustomSender(HostPID(nodes[1].Address()), &messages.HostStatus{}, actor.NewPID(third.addr, "future$1"))
	third.noConnection(t, "the sender a peer that is no member named", func() bool { return nodes[1].Drops()[dropSenderUnproven] > 0 })

	// A client's job on two members: the shards on the second send it their results.
	alice := NewClient(startParty(t, creds(t, ca, "alice", pki.RoleClient)).System(), Timeouts{})
	t.Cleanup(alice.Close)
	s := spec("synthetic:m=5,n=400,k=2,seed=4", "did", 2, 2, []string{nodes[0].Address(), nodes[1].Address()}, 20)
	want := driverRun(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job, err := alice.Submit(ctx, nodes[0].Address(), s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := job.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "a job on a cluster's nodes", got, want)
}

// TestClientStatusShowsOnlyItsOwnJobs: a client's status of a node counts only its own jobs,
// actors, shards and reservations (finding 10: status showed a client the others'); the
// owner sees its job, a peer sees everything.
func TestClientStatusShowsOnlyItsOwnJobs(t *testing.T) {
	h := newHostileSetup(t, &Faults{IterationDelay: 3 * time.Millisecond})
	v := h.startVictim(t, 150)
	peer := startParty(t, creds(t, h.ca, "node", pki.RolePeer)).System().Root
	status := func(who *actor.RootContext, addr string) *messages.Pong {
		t.Helper()
		res, err := who.RequestFuture(HostPID(addr), &messages.HostStatus{}, 5*time.Second).Result()
		pong, ok := res.(*messages.Pong)
		if err != nil || !ok {
			t.Fatalf("no status from %s: %v %v", addr, res, err)
		}
		return pong
	}
	for _, n := range h.lc.Nodes {
		all := status(peer, n.Address())
		if all.Jobs != 1 || all.Shards == 0 || all.Reserved == 0 {
			t.Fatalf("a peer's status of %s: %v", n.Address(), all)
		}
		if other := status(v.mallory, n.Address()); other.Jobs != 0 || other.Actors != 0 || other.Shards != 0 || other.Reserved != 0 || len(other.JobIds) != 0 {
			t.Fatalf("another client's status of %s shows alice's job: %v", n.Address(), other)
		}
		own := status(h.alice.system.Root, n.Address())
		if own.Jobs != 1 || own.Shards != all.Shards || own.Reserved != all.Reserved || len(own.JobIds) != 1 || own.JobIds[0] != v.job.ID {
			t.Fatalf("alice's status of %s: %v, a peer's %v", n.Address(), own, all)
		}
	}
	v.endsBitwise(t, h.lc, "with statuses asked")
}

// TestProvenAddressesAreBounded: the proofs kept are bounded per key and overall, the oldest
// making room, and expire.
func TestProvenAddressesAreBounded(t *testing.T) {
	s := newSenders(nil, nil)
	now := time.Now()
	addr := func(i int) netip.AddrPort {
		return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(1000+i))
	}
	key := func(i int) keyHash { return keyHash{byte(i), byte(i >> 8)} }
	for i := range maxProvenPerKey + 4 {
		s.remember(addr(i), key(0), now.Add(time.Duration(i)*time.Millisecond))
	}
	if len(s.proven) != maxProvenPerKey {
		t.Fatalf("%d addresses kept for one key, want %d", len(s.proven), maxProvenPerKey)
	}
	if _, ok := s.proven[addr(0)]; ok {
		t.Fatal("the oldest proof of the key was kept")
	}
	for i := range 2 * maxProven {
		s.remember(addr(i), key(i), now.Add(time.Second+time.Duration(i)*time.Microsecond))
	}
	if len(s.proven) != maxProven {
		t.Fatalf("%d proofs kept, want %d", len(s.proven), maxProven)
	}
	s.remember(addr(1), key(1), now.Add(2*provenFor))
	if len(s.proven) != 1 {
		t.Fatalf("%d proofs kept after they expired, want 1", len(s.proven))
	}
}

// TestDataPlaneDialsOnlyTheMember: a node of a cluster links its data plane to a node only if
// the certificate there is the member's at that actor address (a peer's certificate under
// another name is refused).
func TestDataPlaneDialsOnlyTheMember(t *testing.T) {
	ca, err := pki.CAFromSecret(pki.NewSecret())
	if err != nil {
		t.Fatal(err)
	}
	nodes, members := memberNodes(t, ca, 2)
	members.set(member("node", nodes[0].Address()), member("node", nodes[1].Address()))
	conn, err := nodes[0].plane.connect(nodes[1].Address())
	if err != nil {
		t.Fatalf("the data plane of a member: %v", err)
	}
	conn.Close()
	// The remote's connection is made: only the data plane's handshake sees the name.
	members.set(member("node", nodes[0].Address()), member("other", nodes[1].Address()))
	if conn, err := nodes[0].plane.connect(nodes[1].Address()); err == nil {
		conn.Close()
		t.Fatal("linked to a data plane whose certificate is not the member's")
	} else if !strings.Contains(err.Error(), "not the member's") {
		t.Fatalf("refused for another reason: %v", err)
	}
}

// TestFormerMemberRedialsAreNotDrops: a member the node talked to and that then died is no
// longer dialed, and gRPC's redials of it are refused without counting a drop (they are the
// node's own, not the network's; the dashboard warned of "refused messages" on healthy
// members for them); an address that never was a member still counts.
func TestFormerMemberRedialsAreNotDrops(t *testing.T) {
	ca, err := pki.CAFromSecret(pki.NewSecret())
	if err != nil {
		t.Fatal(err)
	}
	nodes, members := memberNodes(t, ca, 2)
	members.set(member("node", nodes[0].Address()), member("node", nodes[1].Address()))
	root := nodes[0].System().Root
	if _, err := root.RequestFuture(HostPID(nodes[1].Address()), &messages.Ping{}, 5*time.Second).Result(); err != nil {
		t.Fatalf("a member does not answer: %v", err)
	}
	gone := nodes[1].Address()
	members.set(member("node", nodes[0].Address())) // the second member died
	s := nodes[0].senders
	for range 3 {
		if _, err := s.dial(context.Background(), gone); err == nil {
			t.Fatal("a former member was dialed")
		}
	}
	if d := nodes[0].Drops()[dropDialRefused]; d != 0 {
		t.Errorf("redials of a former member counted as %d drops", d)
	}
	if _, err := s.dial(context.Background(), "127.0.0.1:1"); err == nil || nodes[0].Drops()[dropDialRefused] != 1 {
		t.Errorf("a dial to no member: %v, %d drops counted, want 1", err, nodes[0].Drops()[dropDialRefused])
	}
}
