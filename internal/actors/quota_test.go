package actors

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/didnmf/didnmf/fsroot"
	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/pki"
)

// idleClient is a client that submits streamed jobs straight to a host and never streams
// their data (or only the first chunksToSend chunks of each block), renewing their leases
// for as long as the test runs: a client that holds what it gets and does no work.
type idleClient struct {
	system *actor.ActorSystem
	me     *actor.PID
	mu     sync.Mutex
	events map[string]chan string // by job: "accepted", "request", or an error's message
	coords map[string]*actor.PID  // accepted jobs' coordinators, whose leases it renews
	tokens map[string]string
	n      int
}

// newIdleClient starts an idle client on a party of its own with a client certificate named
// name; it sends the first chunksToSend chunks of every block asked of it, then nothing.
func newIdleClient(t *testing.T, ca *pki.CA, name string, chunksToSend int) *idleClient {
	t.Helper()
	c := &idleClient{system: startParty(t, creds(t, ca, name, pki.RoleClient)).System(), events: map[string]chan string{},
		coords: map[string]*actor.PID{}, tokens: map[string]string{}}
	c.me = c.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch x := ctx.Message().(type) {
		case *messages.JobAccepted:
			c.mu.Lock()
			c.coords[x.JobId] = pidOf(x.Coordinator)
			c.mu.Unlock()
			c.event(x.JobId, "accepted")
		case *messages.JobError:
			c.event(x.JobId, x.Message)
		case *messages.BlockRequest:
			c.mu.Lock()
			token := c.tokens[x.JobId]
			c.mu.Unlock()
			values := make([]float64, chunked.Floats*chunksToSend)
			for i := range values {
				values[i] = 1
			}
			for i, ch := range chunked.Split(values, chunked.Floats)[:chunksToSend] {
				ch.Seq, ch.Count, ch.Total = int64(i), 1<<20, 0
				ctx.Send(pidOf(x.ShardPid), &messages.BlockChunk{JobId: x.JobId, Epoch: x.Epoch, Shard: x.Shard, Chunk: ch, OwnerToken: token})
			}
			c.event(x.JobId, "request")
		}
	}))
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() { // the leases: renewed until the test ends
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			c.mu.Lock()
			for job, coord := range c.coords {
				c.system.Root.Send(coord, &messages.LeaseRenew{JobId: job, OwnerToken: c.tokens[job]})
			}
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *idleClient) event(job, what string) {
	c.mu.Lock()
	ch := c.events[job]
	c.mu.Unlock()
	if ch != nil {
		select {
		case ch <- what:
		default:
		}
	}
}

// submit submits a streamed job of a dense features x samples input to the host at addr
// (one shard, placed there) and returns its id and its events.
func (c *idleClient) submit(addr string, features, samples int64) (string, <-chan string) {
	c.mu.Lock()
	c.n++
	token := fmt.Sprintf("idle-client-token-%04d-%p", c.n, c)
	job := JobIDFor(token)
	ch := make(chan string, 16)
	c.events[job], c.tokens[job] = ch, token
	c.mu.Unlock()
	sp := &messages.JobSpec{Inputs: []string{"x.npy"}, Algorithm: messages.Algorithm_ALGORITHM_MU, Rank: 2, Shards: 1, Seed: 1,
		Stop: &messages.StopRule{MaxIter: 5}, Ingest: messages.Ingest_INGEST_STREAM, Samples: samples, Features: features,
		NaturalLayout: messages.Layout_LAYOUT_DENSE, Nodes: []string{addr}}
	c.system.Root.Send(HostPID(addr), &messages.SubmitJob{JobId: job, Client: wirePid(c.me), OwnerToken: token, Spec: sp})
	return job, ch
}

// expect waits for a job's event that contains want, and returns it; it fails on any other
// error or after a while.
func expect(t *testing.T, events <-chan string, want string, within time.Duration) string {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case e := <-events:
			if strings.Contains(e, want) {
				return e
			}
			if e != "accepted" && e != "request" {
				t.Fatalf("job event %q, want one with %q", e, want)
			}
		case <-deadline:
			t.Fatalf("no job event with %q within %v", want, within)
		}
	}
}

// TestOneClientCannotTakeTheNode: bob holds everything his quotas leave him on a node (a
// quarter of --max-jobs, three quarters of --memory by default) with streamed jobs that never stream,
// renewing their leases; his next job is refused with an error naming the quota, what he
// holds and the flag, and alice still gets a job through, which finishes. Without quotas bob
// would hold every job slot, or all of the node's memory.
func TestOneClientCannotTakeTheNode(t *testing.T) {
	ca, err := pki.CAFromSecret(pki.NewSecret())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name              string
		cfg               NodeConfig
		features, samples int64 // of each of bob's jobs
		held              int   // bob's jobs his quota lets him hold
		want              []string
	}{
		{"job slots", NodeConfig{MaxJobs: 8}, 100, 50, 2, []string{`owner "bob" runs 2 jobs on node`, "--owner-max-jobs"}},
		{"memory", NodeConfig{Memory: 64 << 20}, 1000, 1500, 4, // 12 MB dense each, against 48 MiB
			[]string{`owner "bob" holds 47 MiB`, "memory, its quota is 48 MiB (serve --owner-memory)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.Threads, cfg.TLS, cfg.Roots, cfg.Timeouts = 1, creds(t, ca, "node", pki.RolePeer), fsroot.Unconfined(), Timeouts{StreamIdle: 10 * time.Minute}
			cfg.Lease = time.Second     // bob's jobs live on his renewals only
			node, err := StartNode(cfg) // a node of its own: the defaults of serve's quotas
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(node.Close)
			addr := node.Address()
			bob := newIdleClient(t, ca, "bob", 0)
			held := 0
			var refused string
			for refused == "" && held <= 10 {
				_, events := bob.submit(addr, c.features, c.samples)
				switch e := expectOneOf(t, events, "request", "quota"); e {
				case "request": // placed, its shard waiting for data
					held++
				default:
					refused = e
				}
			}
			if held != c.held {
				t.Errorf("bob holds %d jobs, want %d (then %q)", held, c.held, refused)
			}
			for _, want := range c.want {
				if !strings.Contains(refused, want) {
					t.Errorf("bob's job past his quota: %q, want it to say %q", refused, want)
				}
			}
			t.Log(refused)

			alice := NewClient(startParty(t, creds(t, ca, "alice", pki.RoleClient)).System(), Timeouts{})
			t.Cleanup(alice.Close)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			job, err := alice.Submit(ctx, addr, spec("synthetic:m=6,n=200,k=3,seed=3", "did", 3, 2, []string{addr}, 20))
			if err != nil {
				t.Fatalf("alice's job beside bob's: %v", err)
			}
			if res, err := job.Wait(ctx); err != nil || res == nil {
				t.Fatalf("alice's job beside bob's: %v", err)
			}
			// Bob's jobs still hold what they took, leases past (he renews them): he is still
			// refused.
			time.Sleep(3 * cfg.Lease)
			_, events := bob.submit(addr, c.features, c.samples)
			if e := expectOneOf(t, events, "request", "quota"); e == "request" {
				t.Errorf("bob's job after alice's was placed: his jobs were let go")
			}
		})
	}
}

// expectOneOf waits for a job's event that contains one of wants and returns it; it fails on
// any other error or after 30 s.
func expectOneOf(t *testing.T, events <-chan string, wants ...string) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e := <-events:
			for _, w := range wants {
				if strings.Contains(e, w) {
					return e
				}
			}
			if e != "accepted" && e != "request" {
				t.Fatalf("job event %q, want one with %q", e, wants)
			}
		case <-deadline:
			t.Fatalf("no job event with %q within 30 s", wants)
		}
	}
}

// TestJobThatNeverStreamsIsReaped: a streamed job whose client announced a large dense block
// and sends none of it (or stops after a few chunks) fails after Timeouts.StreamIdle with an
// error that says what was announced and what came, everywhere: its actors stop and its
// memory is given back. Nothing of the announced block was allocated meanwhile.
func TestJobThatNeverStreamsIsReaped(t *testing.T) {
	ca, err := pki.CAFromSecret(pki.NewSecret())
	if err != nil {
		t.Fatal(err)
	}
	const idle = 2 * time.Second
	lc, err := StartLocalCluster(1, NodeConfig{Threads: 1, TLS: creds(t, ca, "node", pki.RolePeer), Timeouts: Timeouts{StreamIdle: idle}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lc.Close)
	addr := lc.Nodes[0].Address()
	const features, samples = 2000, 20000 // 320 MB dense announced
	for _, c := range []struct {
		name   string
		chunks int
		want   string
	}{
		{"none", 0, "and sent none in " + idle.String()},
		{"two chunks", 2, "sent 2 chunks of it and then none in " + idle.String()},
	} {
		t.Run(c.name, func(t *testing.T) {
			bob := newIdleClient(t, ca, "bob", c.chunks)
			// The live heap while the shard waits for its data (after a collection: other
			// tests' leftovers make the allocations counted since a moment unreliable).
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, events := bob.submit(addr, features, samples)
			expect(t, events, "request", 30*time.Second) // the shard started and waits
			runtime.GC()
			runtime.ReadMemStats(&after)
			if got := int64(after.HeapAlloc) - int64(before.HeapAlloc); got > 64<<20 {
				t.Errorf("the heap grew by %d bytes while the job waited for its data; the announced block is %d", got, 8*features*samples)
			}
			msg := expect(t, events, "announced", idle+30*time.Second)
			if took := time.Since(start); took < idle {
				t.Errorf("reaped after %v, before the %v the shard waits for a chunk", took, idle)
			}
			for _, want := range []string{"the client announced 305 MiB for shard 0", c.want} {
				if !strings.Contains(msg, want) {
					t.Errorf("job error %q, want it to say %q", msg, want)
				}
			}
			t.Log(msg)
			waitIdle(t, lc)
			if used := lc.Nodes[0].mem.used(); used != 0 {
				t.Errorf("the node still holds %d bytes for the reaped job", used)
			}
			if active, waiting := lc.Nodes[0].streams.streaming("bob"); active+waiting != 0 {
				t.Errorf("bob still has %d streams and %d waiting on the node", active, waiting)
			}
		})
	}
}

// TestOwnerStreamsWaitTheirTurn: with one stream an owner on a node, bob's second job's shard
// does not ask for its block while his first one's stream is under way; once that one ends
// (reaped, its client sending nothing) the second one asks, and is reaped in its turn.
func TestOwnerStreamsWaitTheirTurn(t *testing.T) {
	ca, err := pki.CAFromSecret(pki.NewSecret())
	if err != nil {
		t.Fatal(err)
	}
	const idle = 2 * time.Second
	lc, err := StartLocalCluster(1, NodeConfig{Threads: 1, TLS: creds(t, ca, "node", pki.RolePeer), OwnerMaxStreams: 1,
		Timeouts: Timeouts{StreamIdle: idle}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lc.Close)
	addr, node := lc.Nodes[0].Address(), lc.Nodes[0]
	bob := newIdleClient(t, ca, "bob", 0)
	_, first := bob.submit(addr, 100, 50)
	expect(t, first, "request", 30*time.Second)
	_, second := bob.submit(addr, 100, 50)
	expect(t, second, "accepted", 30*time.Second) // placed: its shard waits for a stream slot
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		active, waiting := node.streams.streaming("bob")
		if active == 1 && waiting == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob: %d streams, %d waiting; want 1 and 1", active, waiting)
		}
	}
	select {
	case e := <-second:
		t.Fatalf("bob's second job while his first streams: %q, want it to wait", e)
	case <-time.After(idle / 2):
	}
	expect(t, first, "announced", idle+30*time.Second)
	expect(t, second, "request", 30*time.Second)
	expect(t, second, "announced", idle+30*time.Second)
	waitIdle(t, lc)
	if active, waiting := node.streams.streaming("bob"); active+waiting != 0 {
		t.Errorf("bob still has %d streams and %d waiting on the node", active, waiting)
	}
}

// TestStreamedBlockBeyondTheOwnersQuota: a client that announces almost no stored entries
// (a small reserve, well within its quota) and then streams a dense block is refused once
// the block outgrows its owner's memory quota on the node, even though the node has memory
// free: what a shard takes beyond its reserve counts against its owner's quota too.
func TestStreamedBlockBeyondTheOwnersQuota(t *testing.T) {
	msg, lc := streamBeyondReserve(t, NodeConfig{OwnerMemory: 16 << 20}, "bob")
	for _, want := range []string{"the streamed block needs", `owner "bob" holds`, "its quota is 16 MiB (serve --owner-memory)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("job error %q, want it to say %q", msg, want)
		}
	}
	if used, owned := lc.Nodes[0].mem.used(), lc.Nodes[0].owned.used("bob"); used != 0 || owned != 0 {
		t.Fatalf("the node still holds %d bytes (%d of bob's) for the refused job", used, owned)
	}
}

// TestInputDeclaringTooMuchIsRefused: a file of a few bytes whose size line declares ten
// million entries (a .mtx is read whole) is refused by the node as it is opened, naming the
// file and the owner's memory quota, instead of being read into memory; the node goes on.
func TestInputDeclaringTooMuchIsRefused(t *testing.T) {
	ca, err := pki.CAFromSecret(pki.NewSecret())
	if err != nil {
		t.Fatal(err)
	}
	bomb := filepath.Join(t.TempDir(), "bomb.mtx")
	if err := os.WriteFile(bomb, []byte("%%MatrixMarket matrix coordinate real general\n100000 100000 10000000\n1 1 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := NodeConfig{Memory: 64 << 20, Threads: 1, TLS: creds(t, ca, "node", pki.RolePeer), Roots: fsroot.Unconfined()}
	node, err := StartNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Close)
	addr := node.Address()
	alice := NewClient(startParty(t, creds(t, ca, "alice", pki.RoleClient)).System(), Timeouts{})
	t.Cleanup(alice.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job, err := alice.Submit(ctx, addr, spec(bomb, "did", 3, 1, []string{addr}, 5))
	if err == nil {
		_, err = job.Wait(ctx)
	}
	if err == nil || !strings.Contains(err.Error(), "bomb.mtx") || !strings.Contains(err.Error(), "one input may take here (serve --owner-memory)") {
		t.Fatalf("a job on %s: %v; want it refused naming the file and the quota", bomb, err)
	}
	job, err = alice.Submit(ctx, addr, spec("synthetic:m=6,n=200,k=3,seed=3", "did", 3, 1, []string{addr}, 5))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := job.Wait(ctx); err != nil {
		t.Fatalf("the next job: %v", err)
	}
}
