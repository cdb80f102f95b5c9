package actors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/didnmf/didnmf/checkpoint"
	"github.com/didnmf/didnmf/fsroot"
	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/pki"
	"github.com/didnmf/didnmf/usererr"
)

// hostileSetup is a 3-node cluster with credentials from a test secret, a legitimate client
// (alice, on a node of her own) and the authority to mint more parties.
type hostileSetup struct {
	lc    *LocalCluster
	ca    *pki.CA
	alice *Client
}

func newHostileSetup(t *testing.T, faults *Faults) *hostileSetup {
	t.Helper()
	ca, err := pki.CAFromSecret(pki.NewSecret())
	if err != nil {
		t.Fatal(err)
	}
	lc, err := StartLocalCluster(3, NodeConfig{Threads: 2, Faults: faults, TLS: creds(t, ca, "node", pki.RolePeer)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lc.Close)
	alice := NewClient(startParty(t, creds(t, ca, "alice", pki.RoleClient)).System(), Timeouts{})
	t.Cleanup(alice.Close)
	return &hostileSetup{lc: lc, ca: ca, alice: alice}
}

func creds(t *testing.T, ca *pki.CA, name string, role pki.Role) *pki.Config {
	t.Helper()
	c, err := ca.Credentials(name, []string{"127.0.0.1"}, role)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tlsMember makes a cluster authority of its own and starts a node with a peer certificate
// of it, closed at the end of the test.
func tlsMember(t *testing.T) (*pki.CA, *Node) {
	t.Helper()
	ca, err := pki.CAFromSecret(pki.NewSecret())
	if err != nil {
		t.Fatal(err)
	}
	node, err := StartNode(NodeConfig{Threads: 1, TLS: creds(t, ca, "node", pki.RolePeer)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Close)
	return ca, node
}

// startParty starts an actor system of its own with the given credentials (a client, an intruder).
func startParty(t *testing.T, tls *pki.Config) *Node {
	t.Helper()
	n, err := StartNode(NodeConfig{Threads: 1, TLS: tls})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

// victim is alice's job running on the cluster while a test attacks it: the result the driver
// gives for its spec, and mallory, a client of the same cluster that does not own it.
type victim struct {
	job     *Job
	want    *kernels.Result
	ctx     context.Context
	mallory *actor.RootContext
}

// startVictim submits alice's job (maxIter iterations) and returns once it has made progress.
func (h *hostileSetup) startVictim(t *testing.T, maxIter int64) *victim {
	t.Helper()
	s := spec("synthetic:m=6,n=2000,k=3,seed=3", "did", 3, 4, h.lc.Addresses(), maxIter)
	v := &victim{want: driverRun(t, s)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	v.ctx = ctx
	var err error
	if v.job, err = h.alice.Submit(ctx, h.lc.Nodes[0].Address(), s); err != nil {
		t.Fatal(err)
	}
	<-v.job.Progress()
	v.mallory = startParty(t, creds(t, h.ca, "mallory", pki.RoleClient)).System().Root
	return v
}

// endsBitwise waits for the victim job and checks it gave the driver's bits, and that every
// host still answers a peer.
func (v *victim) endsBitwise(t *testing.T, lc *LocalCluster, what string) {
	t.Helper()
	got, err := v.job.Wait(v.ctx)
	if err != nil {
		t.Fatalf("the victim job, %s: %v", what, err)
	}
	checkSame(t, what, got, v.want)
	for _, n := range lc.Nodes {
		if _, err := lc.Nodes[0].System().Root.RequestFuture(HostPID(n.Address()), &messages.Ping{}, 5*time.Second).Result(); err != nil {
			t.Fatalf("node %s no longer answers: %v", n.Address(), err)
		}
	}
}

// everyMessage returns one instance of every message type of the protocol, with the job id
// and epoch set where the type has them.
func everyMessage(job string) []proto.Message {
	var out []proto.Message
	msgs := messages.File_didnmf_proto.Messages()
	for i := 0; i < msgs.Len(); i++ {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(msgs.Get(i).FullName())
		if err != nil {
			panic(err)
		}
		m := mt.New()
		fields := m.Descriptor().Fields()
		if f := fields.ByName("job_id"); f != nil {
			m.Set(f, protoreflect.ValueOfString(job))
		}
		if f := fields.ByName("epoch"); f != nil {
			m.Set(f, protoreflect.ValueOfUint64(1))
		}
		out = append(out, m.Interface())
	}
	return out
}

// drops sums the nodes' drop counters.
func drops(lc *LocalCluster) map[string]int64 {
	sum := map[string]int64{}
	for _, n := range lc.Nodes {
		for k, v := range n.Drops() {
			sum[k] += v
		}
	}
	return sum
}

// TestHostileParties sends every message of the protocol at a running job's actors and hosts
// from a client that does not own the job, system messages meant to stop actors, and requests
// from a party whose certificate another authority signed. Every node lives on, the job ends
// with its fault-free bits, nothing leaks to the intruders, and the drop counters say why.
func TestHostileParties(t *testing.T) {
	h := newHostileSetup(t, &Faults{IterationDelay: 3 * time.Millisecond})
	lc := h.lc
	v := h.startVictim(t, 200)
	job, mallory := v.job, v.mallory
	other, err := pki.CAFromSecret(pki.NewSecret())
	if err != nil {
		t.Fatal(err)
	}
	outsider := startParty(t, creds(t, other, "node", pki.RolePeer)).System().Root

	coord := actor.NewPID(lc.Nodes[0].Address(), HostName+"/"+job.ID+coordSuffix)
	targets := []*actor.PID{coord, HostPID(lc.Nodes[1].Address()),
		pidOf(jobctl.ChildPid(lc.Nodes[1].Address(), jobctl.ShardName(job.ID, 1))),
		pidOf(jobctl.ChildPid(lc.Nodes[0].Address(), jobctl.ReducerName(job.ID, 1, 1, 0)))}
	all := everyMessage(job.ID)
	for _, m := range all {
		for _, to := range targets {
			mallory.Send(to, m)
			outsider.Send(to, m)
		}
	}
	for _, to := range targets {
		mallory.Poison(to)
		mallory.Stop(to)
		outsider.Poison(to)
	}

	// What the intruders learn: mallory, a client, sees no job that is not hers; the
	// outsider gets no answer at all.
	for _, n := range lc.Nodes {
		res, err := mallory.RequestFuture(HostPID(n.Address()), &messages.HostStatus{}, 5*time.Second).Result()
		pong, ok := res.(*messages.Pong)
		if err != nil || !ok {
			t.Fatalf("node %s did not answer a client's status: %v %v", n.Address(), res, err)
		}
		if len(pong.JobIds) != 0 || len(pong.Drops) != 0 {
			t.Fatalf("a client's status shows others' jobs or the node's counters: %v", pong)
		}
		res, err = mallory.RequestFuture(HostPID(n.Address()), &messages.ListJobs{}, 5*time.Second).Result()
		if list, ok := res.(*messages.JobList); err != nil || !ok || len(list.Jobs) != 0 {
			t.Fatalf("a client lists others' jobs: %v %v", res, err)
		}
		if res, err := outsider.RequestFuture(HostPID(n.Address()), &messages.HostStatus{}, time.Second).Result(); err == nil {
			t.Fatalf("a party of another authority got an answer: %v", res)
		}
	}

	v.endsBitwise(t, lc, "under attack")

	d := drops(lc)
	t.Logf("drops: %v", dropsSorted(d))
	for _, m := range all {
		name := string(proto.MessageName(m))
		allowed, known := access[name]
		switch {
		case !known:
			if d[dropUnknownType] == 0 {
				t.Errorf("%s: not counted as unknown", name)
			}
		case !allowed.allow(pki.RoleClient) && d[dropRolePrefix+name] == 0:
			t.Errorf("%s from a client was not dropped", name)
		}
	}
	for _, what := range []string{"CancelJob", "LeaseRenew", "ResultAck", "BlockChunk"} {
		if d[dropOwnerPrefix+what] == 0 {
			t.Errorf("%s about someone else's job was not counted", what)
		}
	}
	waitIdle(t, lc)
}

// TestMalformedBatchesDoNotKillANode speaks protoactor's gRPC protocol directly, with valid
// client credentials, and sends what crashed a node before the guard: batches whose indices
// point outside their tables, another serializer, oversized batches, system messages, and the
// remote's unimplemented RPCs.
func TestMalformedBatchesDoNotKillANode(t *testing.T) {
	h := newHostileSetup(t, nil)
	node := h.lc.Nodes[0]
	tls := creds(t, h.ca, "mallory", pki.RoleClient)
	conn, err := grpc.NewClient(node.Address(), grpc.WithTransportCredentials(credentials.NewTLS(tls.Client)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rc := remote.NewRemotingClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := rc.ListProcesses(ctx, &remote.ListProcessesRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("ListProcesses: %v, want Unimplemented", err)
	}
	if _, err := rc.GetProcessDiagnostics(ctx, &remote.GetProcessDiagnosticsRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("GetProcessDiagnostics: %v, want Unimplemented", err)
	}
	ping, err := proto.Marshal(&messages.Ping{})
	if err != nil {
		t.Fatal(err)
	}
	many := make([]*remote.MessageEnvelope, maxBatchEnvelopes+1)
	for i := range many {
		many[i] = &remote.MessageEnvelope{MessageData: ping}
	}
	for _, tc := range []struct {
		name  string
		batch *remote.MessageBatch
		cause string
	}{
		{"type index", &remote.MessageBatch{TypeNames: []string{"didnmf.Ping"}, Targets: []string{"host"},
			Envelopes: []*remote.MessageEnvelope{{TypeId: 7, MessageData: ping}}}, dropTypeIndex},
		{"negative type index", &remote.MessageBatch{TypeNames: []string{"didnmf.Ping"}, Targets: []string{"host"},
			Envelopes: []*remote.MessageEnvelope{{TypeId: -1, MessageData: ping}}}, dropTypeIndex},
		{"target index", &remote.MessageBatch{TypeNames: []string{"didnmf.Ping"}, Targets: []string{"host"},
			Envelopes: []*remote.MessageEnvelope{{Target: 3, MessageData: ping}}}, dropTargetIndex},
		{"no targets", &remote.MessageBatch{TypeNames: []string{"didnmf.Ping"},
			Envelopes: []*remote.MessageEnvelope{{MessageData: ping}}}, dropTargetIndex},
		{"sender index", &remote.MessageBatch{TypeNames: []string{"didnmf.Ping"}, Targets: []string{"host"},
			Envelopes: []*remote.MessageEnvelope{{Sender: 4, MessageData: ping}}}, dropSenderIndex},
		{"json serializer", &remote.MessageBatch{TypeNames: []string{"didnmf.Ping"}, Targets: []string{"host"},
			Envelopes: []*remote.MessageEnvelope{{SerializerId: 1, MessageData: []byte("{")}}}, dropSerializer},
		{"too many envelopes", &remote.MessageBatch{TypeNames: []string{"didnmf.Ping"}, Targets: []string{"host"}, Envelopes: many}, dropBatchSize},
		{"poison pill", &remote.MessageBatch{TypeNames: []string{"actor.PoisonPill"}, Targets: []string{"host"},
			Envelopes: []*remote.MessageEnvelope{{MessageData: nil}}}, dropUnknownType},
		{"remote spawn", &remote.MessageBatch{TypeNames: []string{"remote.ActorPidRequest"}, Targets: []string{"activator"},
			Envelopes: []*remote.MessageEnvelope{{MessageData: nil}}}, dropUnknownType},
		{"peer message", &remote.MessageBatch{TypeNames: []string{"didnmf.StopJob"}, Targets: []string{"host"},
			Envelopes: []*remote.MessageEnvelope{{MessageData: nil}}}, dropRolePrefix + "didnmf.StopJob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := node.Drops()[tc.cause]
			stream, err := rc.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
				ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{MemberId: "mallory", Address: "127.0.0.1:1"}}}}}); err != nil {
				t.Fatal(err)
			}
			if _, err := stream.Recv(); err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: tc.batch}}); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(5 * time.Second); node.Drops()[tc.cause] == before; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("not counted as %q: %v", tc.cause, node.Drops())
				}
			}
			_ = stream.CloseSend()
		})
	}
	// The node lives and still works.
	s := spec("synthetic:m=5,n=300,k=2,seed=1", "did", 2, 3, h.lc.Addresses(), 20)
	want := driverRun(t, s)
	job, err := h.alice.Submit(ctx, node.Address(), s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := job.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "after malformed batches", got, want)
}

// TestOwnerCancels: the job's owner cancels it by name through any host; another client
// cannot.
func TestOwnerCancels(t *testing.T) {
	h := newHostileSetup(t, &Faults{IterationDelay: 5 * time.Millisecond})
	s := spec("synthetic:m=5,n=600,k=2,seed=1", "did", 2, 3, h.lc.Addresses(), 100000)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job, err := h.alice.Submit(ctx, h.lc.Nodes[0].Address(), s)
	if err != nil {
		t.Fatal(err)
	}
	<-job.Progress()
	for _, name := range []string{"mallory", "alice"} {
		sys := startParty(t, creds(t, h.ca, name, pki.RoleClient)).System().Root
		for _, n := range h.lc.Nodes {
			sys.Send(HostPID(n.Address()), &messages.CancelJob{JobId: job.ID})
		}
		if name == "mallory" {
			select {
			case <-job.Done():
				t.Fatalf("another client canceled alice's job: %v", job.err)
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	_, err = job.Wait(ctx)
	if err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Fatalf("alice's cancel by name: %v", err)
	}
	waitIdle(t, h.lc)
}

// TestIdleNodeKeepsNothingOfEndedJobs: once a job ended, its nodes keep none of its data (the
// blocks of X kept for restarts were once left behind: hundreds of MB per idle node).
func TestIdleNodeKeepsNothingOfEndedJobs(t *testing.T) {
	lc, cl := testCluster(t, 2, nil)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	const n = 3000000 // X is 5 x n, 114 MB
	s := spec(fmt.Sprintf("synthetic:m=5,n=%d,k=3,seed=1", n), "did", 3, 4, lc.Addresses(), 3)
	if _, err := runJob(t, cl, s); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, lc)
	for _, n := range lc.Nodes {
		n.blocksMu.Lock()
		kept := len(n.blocks)
		n.blocksMu.Unlock()
		if kept != 0 {
			t.Errorf("node %s keeps %d blocks of ended jobs", n.Address(), kept)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	t.Logf("heap %d MB before the job, %d MB after (X is %d MB)", before>>20, ms.HeapAlloc>>20, 5*8*n>>20)
	// Connections keep buffers of their own; what must not stay is the job's data, nor the
	// remote's endpoint queues at protoactor's default size (16 MB each, two of them here).
	if ms.HeapAlloc > before+5*8*n/4 {
		t.Errorf("heap grew from %d MB to %d MB", before>>20, ms.HeapAlloc>>20)
	}
}

// TestOneNodeOutOfQuotaBoundsTheOthers: when one node cannot store checkpoints (its quota is
// exhausted), no checkpoint is committed; the healthy nodes keep only a few uncommitted
// checkpoints of each shard instead of piling them up, and the job still ends bitwise.
func TestOneNodeOutOfQuotaBoundsTheOthers(t *testing.T) {
	lc, cl := testCluster(t, 3, &Faults{IterationDelay: 5 * time.Millisecond})
	lc.Nodes[2].Checkpoints().SetLimit(100)
	sp := spec("synthetic:m=6,n=600,k=3,seed=2", "did", 3, 6, lc.Addresses(), 200)
	sp.CheckpointEvery = 1
	want := driverRun(t, sp)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job, err := cl.Submit(ctx, "", sp)
	if err != nil {
		t.Fatal(err)
	}
	most := 0
	for done := false; !done; {
		select {
		case <-job.Done():
			done = true
		case <-time.After(20 * time.Millisecond):
		}
		for _, n := range lc.Nodes[:2] {
			for s := 0; s < 6; s++ {
				for _, kind := range []checkpoint.Kind{checkpoint.Own, checkpoint.Buddy} {
					its, _ := n.Checkpoints().Iterations(kind, job.ID, s)
					most = max(most, len(its))
				}
			}
		}
	}
	got, err := job.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "one node out of quota", got, want)
	if got.Checkpoints != 0 {
		t.Fatalf("%d checkpoints committed although a node could store none", got.Checkpoints)
	}
	t.Logf("at most %d checkpoints of one shard on a healthy node over %d iterations", most, got.Iterations)
	// Without pruning there would be one per iteration (200). A node writes a shard's
	// checkpoints of a kind one at a time, each pruning the older ones beyond the kept, so on
	// disk there are at most the kept and the one being written, however loaded the machine
	// (unserialized, CI's load once left 97).
	kept := jobctl.ShardDriverUncommittedKept(sp.CheckpointEvery)
	if most > kept+1 {
		t.Fatalf("a healthy node kept %d uncommitted checkpoints of one shard over %d iterations: they are not pruned (want at most %d)",
			most, got.Iterations, kept+1)
	}
	waitIdle(t, lc)
}

// TestDataRootsConfineJobFiles: a node reads inputs and writes shared outputs only under its
// data roots; paths outside, '..' climbing out and symbolic links pointing out are refused
// before any work (an input error, exit status 2 for the CLI), and an existing coef.npy is
// replaced only with overwrite.
func TestDataRootsConfineJobFiles(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	x := make([]float64, 40*3)
	for i := range x {
		x[i] = float64(i%7) + 1
	}
	var npy bytes.Buffer
	if err := matio.WriteNPY(&npy, 40, 3, x); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(root, "x.npy"), filepath.Join(outside, "secret.npy")} {
		if err := os.WriteFile(p, npy.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(outside, "secret.npy"), filepath.Join(root, "link.npy")); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(root, "out")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	roots, err := fsroot.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer roots.Close()
	lc, err := StartLocalCluster(2, NodeConfig{Threads: 1, Roots: roots})
	if err != nil {
		t.Fatal(err)
	}
	cl := NewClient(lc.Nodes[0].System(), Timeouts{})
	t.Cleanup(func() {
		cl.Close()
		lc.Close()
	})
	job := func(input, out string, overwrite bool) error {
		s := spec(input, "did", 2, 2, lc.Addresses(), 5)
		s.OutShared, s.Overwrite = out, overwrite
		_, err := runJob(t, cl, s)
		return err
	}
	for _, c := range []struct {
		name, input, out string
		want             string
	}{
		{"input outside", filepath.Join(outside, "secret.npy"), "", "outside the node's data roots"},
		{"dot-dot", filepath.Join(root, "..", filepath.Base(outside), "secret.npy"), "", "outside the node's data roots"},
		{"symbolic link out", filepath.Join(root, "link.npy"), "", "leads outside"},
		{"relative", "x.npy", "", "not an absolute path"},
		{"out-shared outside", filepath.Join(root, "x.npy"), outside, "outside the node's data roots"},
	} {
		err := job(c.input, c.out, false)
		var je *JobError
		if !errors.As(err, &je) || je.Kind != KindInput || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an input error with %q", c.name, err, c.want)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("a file was written outside the roots: %v", entries)
	}
	// out-shared: the first job writes coef.npy; a second is refused unless it may overwrite.
	if err := job(filepath.Join(root, "x.npy"), shared, false); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(filepath.Join(shared, "coef.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shared, "coef.npy"), []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The refusal crosses the wire naming its fields, which the client names its way.
	err = job(filepath.Join(root, "x.npy"), shared, false)
	var ue *usererr.Error
	if !errors.As(err, &ue) || ue.Field != "out_shared" ||
		!strings.HasSuffix(ue.Text(func(f string) string { return "--" + strings.ReplaceAll(f, "_", "-") }), "this job did not create it: give --overwrite to replace it") {
		t.Fatalf("a second job into the same directory: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(shared, "coef.npy")); string(b) != "precious" {
		t.Fatalf("coef.npy was replaced without overwrite")
	}
	if err := job(filepath.Join(root, "x.npy"), shared, true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(shared, "coef.npy")); !bytes.Equal(b, first) {
		t.Fatalf("with overwrite: coef.npy is not the job's")
	}
	entries, _ := os.ReadDir(shared)
	if len(entries) != 1 {
		t.Errorf("files left in the shared directory: %v", entries)
	}
	waitIdle(t, lc)
}

// TestClientCannotPassForAnotherJob: a client that knows another's job id cannot submit a job
// under it (ids derive from the owner's secret token), nor make a node send a refusal to that
// job's coordinator or client; the job ends with its fault-free bits.
func TestClientCannotPassForAnotherJob(t *testing.T) {
	h := newHostileSetup(t, &Faults{IterationDelay: 3 * time.Millisecond})
	lc := h.lc
	v := h.startVictim(t, 150)
	job, mallory := v.job, v.mallory
	coord := &messages.Pid{Address: lc.Nodes[0].Address(), Id: HostName + "/" + job.ID + coordSuffix}
	const token = "0123456789abcdef0123"
	bogus := &messages.JobSpec{Inputs: []string{"synthetic:m=2,n=2,k=1,seed=1"}, Rank: 99, Algorithm: messages.Algorithm_ALGORITHM_DID, Shards: 1}
	own := &messages.Pid{Address: mallory.ActorSystem().Address(), Id: "client$mallory"}
	for _, n := range lc.Nodes {
		for _, client := range []*messages.Pid{coord, wirePid(h.alice.pid), jobctl.ChildPid(n.Address(), jobctl.ShardName(job.ID, 0))} {
			// Under alice's id (mallory lacks its token), and under an id of her own: a
			// client her session cannot prove (a node's actor, alice's) is not taken.
			mallory.Send(HostPID(n.Address()), &messages.SubmitJob{JobId: job.ID, Client: client, OwnerToken: token, Spec: bogus})
			mallory.Send(HostPID(n.Address()), &messages.SubmitJob{JobId: JobIDFor(token), Client: client, OwnerToken: token, Spec: bogus})
		}
		// Her own client, under alice's id.
		mallory.Send(HostPID(n.Address()), &messages.SubmitJob{JobId: job.ID, Client: own, OwnerToken: token, Spec: bogus})
	}
	v.endsBitwise(t, lc, "with submissions passing for it")
	d := drops(lc)
	if d[dropOwnerPrefix+"SubmitJob whose id is not its owner token's"] < int64(len(lc.Nodes)) || d[dropSenderUnproven] < 6*int64(len(lc.Nodes)) {
		t.Fatalf("the submissions were not dropped: %v", dropsSorted(d))
	}
	waitIdle(t, lc)
}

// TestEarlyResultAckDoesNotEndAShard: the job's own client acknowledges result chunks while
// the shards still iterate (a confused or hostile client). No shard takes that for the end of
// its run: the job ends with its fault-free bits.
func TestEarlyResultAckDoesNotEndAShard(t *testing.T) {
	h := newHostileSetup(t, &Faults{IterationDelay: 3 * time.Millisecond})
	lc := h.lc
	v := h.startVictim(t, 150)
	root := h.alice.system.Root
	for _, n := range lc.Nodes {
		for shard := int64(0); shard < 4; shard++ {
			to := pidOf(jobctl.ChildPid(n.Address(), jobctl.ShardName(v.job.ID, shard)))
			for _, name := range []string{"B", "C"} {
				root.Send(to, &messages.ResultAck{JobId: v.job.ID, Name: name, Shard: shard, Seq: 1 << 20, OwnerToken: v.job.Token()})
			}
		}
	}
	v.endsBitwise(t, lc, "with acknowledgements before the end")
	waitIdle(t, lc)
}

// streamBeyondReserve runs the attack of a client named client on a one-node cluster
// configured by cfg (its TLS is made here): a streamed job that announces almost no stored
// entries, then streams a dense block of 1000 x 40000 in sparse form, 100 columns at a time,
// until the test ends. It returns the job's error, or fails the test if none comes in 30 s,
// and the cluster, idle again.
func streamBeyondReserve(t *testing.T, cfg NodeConfig, client string) (string, *LocalCluster) {
	t.Helper()
	ca, err := pki.CAFromSecret(pki.NewSecret())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Threads, cfg.TLS = 1, creds(t, ca, "node", pki.RolePeer)
	lc, err := StartLocalCluster(1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lc.Close)
	addr := lc.Nodes[0].Address()
	party := startParty(t, creds(t, ca, client, pki.RoleClient)).System()
	const m, n, token = 1000, 40000, "0123456789abcdef0123"
	errs := make(chan string, 1)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	me := party.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch x := ctx.Message().(type) {
		case *messages.JobError:
			errs <- x.Message
		case *messages.BlockRequest:
			go func() {
				for seq, lo := int64(0), x.ColLo; lo < x.ColHi; seq, lo = seq+1, lo+100 {
					select {
					case <-stop:
						return
					default:
					}
					hi := min(lo+100, x.ColHi)
					ptr := make([]int64, hi-lo+1)
					var rows []int32
					var vals []float64
					for j := range hi - lo {
						for i := range m {
							rows, vals = append(rows, int32(i)), append(vals, 1)
						}
						ptr[j+1] = int64(len(vals))
					}
					c := &messages.Chunk{Seq: seq, Count: (x.ColHi - x.ColLo + 99) / 100, Values: vals}
					chunked.Seal(c, chunked.LE(ptr), chunked.LE(rows))
					ctx.ActorSystem().Root.Send(pidOf(x.ShardPid), &messages.BlockChunk{JobId: x.JobId, Epoch: x.Epoch, Shard: x.Shard,
						Chunk: c, Col: lo - x.ColLo, ColPtr: ptr, RowIdx: rows, OwnerToken: token})
				}
			}()
		}
	}))
	sp := &messages.JobSpec{Inputs: []string{"x.mtx"}, Algorithm: messages.Algorithm_ALGORITHM_MU, Rank: 1, Shards: 1, Seed: 1,
		Stop: &messages.StopRule{MaxIter: 5}, Ingest: messages.Ingest_INGEST_STREAM, Samples: n, Features: m, NaturalLayout: messages.Layout_LAYOUT_SPARSE, StoredEntries: 1,
		Nodes: []string{addr}}
	party.Root.Send(HostPID(addr), &messages.SubmitJob{JobId: JobIDFor(token), Client: wirePid(me), OwnerToken: token, Spec: sp})
	var msg string
	select {
	case msg = <-errs:
		t.Log(msg)
	case <-time.After(30 * time.Second):
		t.Fatal("the oversized block was not refused")
	}
	waitIdle(t, lc)
	return msg, lc
}

// TestStreamedBlockBeyondItsReserve: a client that announces almost no stored entries and then
// streams a dense block gets its job refused once the block outgrows what the shard reserved
// and the node has free; the node's memory stays within its limit.
func TestStreamedBlockBeyondItsReserve(t *testing.T) {
	msg, lc := streamBeyondReserve(t, NodeConfig{Memory: 16 << 20}, "mallory")
	if !strings.Contains(msg, "the streamed block needs") {
		t.Fatalf("job error %q, want the block refused", msg)
	}
	if used := lc.Nodes[0].mem.used(); used != 0 {
		t.Fatalf("the node still holds %d bytes for the refused job", used)
	}
}

// TestClientCannotReachNodeInternals: a client may address a node's host and its own jobs'
// coordinator and shards only: messages to the futures a node waits on (their ids are
// sequential), to reducers or to protoactor's own actors are dropped, and a request that names
// a node's actor as its sender is dropped as unproven (the answer would resolve that node's
// future).
func TestClientCannotReachNodeInternals(t *testing.T) {
	h := newHostileSetup(t, &Faults{IterationDelay: 2 * time.Millisecond})
	lc := h.lc
	v := h.startVictim(t, 150)
	job, mallory := v.job, v.mallory
	for _, n := range lc.Nodes {
		for _, id := range []string{"future$a", "future$b", "future$1", "$1", "activator", "host/" + jobctl.ReducerName(job.ID, 1, 1, 0), "host/x"} {
			mallory.Send(actor.NewPID(n.Address(), id), &messages.Ping{})
		}
		// Answers redirected to a node's actor, under any spelling of its address.
		port := n.Address()[strings.LastIndex(n.Address(), ":")+1:]
		for _, addr := range []string{n.Address(), lc.Nodes[0].Address(), "127.0.0.1:0" + port} {
			mallory.RequestWithCustomSender(HostPID(n.Address()), &messages.HostStatus{}, actor.NewPID(addr, "future$1"))
		}
	}
	v.endsBitwise(t, lc, "with a client at the nodes' internals")
	d := drops(lc)
	// Every redirected answer is dropped: a node's address is never proven for a client (a
	// node's own, under any spelling, is not even dialed; another's holds a peer's key).
	if d[dropClientTarget] < 7*int64(len(lc.Nodes)) || d[dropSenderUnproven] < 3*int64(len(lc.Nodes)) {
		t.Fatalf("not dropped: %v", dropsSorted(d))
	}
	waitIdle(t, lc)
}

// openFiles counts this process's open file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(fds)
}

// TestHandshakeFloodOnTheActorPort opens many connections to a node's actor port from one
// address without ever starting a handshake, as anyone who reaches the port can. The node
// holds at most maxRemoteHandshakesPerIP of them (each past it evicts the address's oldest,
// counted), so such a party cannot take its descriptors; and a client from another address,
// connecting during the flood, runs a job with the driver's bits.
func TestHandshakeFloodOnTheActorPort(t *testing.T) {
	h := newHostileSetup(t, nil)
	node := h.lc.Nodes[0]
	before := openFiles(t)
	const flood = 3 * maxRemoteHandshakesPerIP
	attacker := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
	for range flood {
		c, err := attacker.Dial("tcp", node.Address())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	refused := node.Drops()[dropRemoteEvicted]
	waitFor(t, "the flood's connections past the limit evicted", func() bool {
		refused = node.Drops()[dropRemoteEvicted]
		return refused >= flood-maxRemoteHandshakesPerIP
	})
	// The test's own ends of the flood are descriptors of this process too.
	if held := openFiles(t) - before - flood; held > maxRemoteHandshakesPerIP+16 {
		t.Fatalf("the node holds %d descriptors for %d connections that never started a handshake (at most %d)", held, flood, maxRemoteHandshakesPerIP)
	}
	bob := NewClient(startParty(t, creds(t, h.ca, "bob", pki.RoleClient)).System(), Timeouts{})
	t.Cleanup(bob.Close)
	s := spec("synthetic:m=6,n=600,k=3,seed=3", "did", 3, 4, h.lc.Addresses(), 30)
	want := driverRun(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job, err := bob.Submit(ctx, node.Address(), s)
	if err != nil {
		t.Fatalf("a client could not submit during the flood: %v", err)
	}
	got, err := job.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "a job submitted during the flood", got, want)
	if refused > flood {
		t.Fatalf("%d connections evicted of %d opened", refused, flood)
	}
}
