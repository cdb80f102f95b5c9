package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/didnmf/didnmf/internal/actors"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/pki"
)

// startJoined starts `didnmf serve` processes under the given names, each with args, every
// one after the first joining the first, and waits until the first lists them all.
func startJoined(t *testing.T, names []string, args ...string) []*serveProc {
	t.Helper()
	var nodes []*serveProc
	for i, name := range names {
		a := args
		if i > 0 {
			a = append(slices.Clone(args), "--join", nodes[0].Gossip)
		}
		nodes = append(nodes, startServe(t, name, a...))
	}
	waitFor(t, fmt.Sprintf("%d members", len(names)), 20*time.Second, func() bool { return len(clusterStatus(t, nodes[0].Gossip)) == len(names) })
	return nodes
}

// membersLost returns the lines of a node's log where it saw a member (not a client) go:
// with dead, only those declared dead.
func membersLost(p *serveProc, dead bool) []string {
	var lost []string
	for _, r := range p.Records() {
		gone := r.Msg == "member failed (declared dead)" || !dead && r.Msg == "member left"
		if gone && r.Attr("role") == "member" {
			lost = append(lost, r.Line)
		}
	}
	return lost
}

// jobRow is one job in `didnmf jobs --json`.
type jobRow struct {
	JobID     string  `json:"job_id"`
	Iteration int64   `json:"iteration"`
	RelErr2   float64 `json:"rel_err2"`
	Rate      float64 `json:"rate"`
}

// listJobs runs `didnmf jobs --json` against the cluster at addr.
func listJobs(t *testing.T, addr string) []jobRow {
	t.Helper()
	code, stdout, stderr := runNode(t, "jobs", "--cluster", addr, "--json")
	if code != 0 {
		t.Fatalf("jobs: exit %d: %s", code, stderr)
	}
	var out struct{ Jobs []jobRow }
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("jobs json: %v\n%s", err, stdout)
	}
	return out.Jobs
}

// jobFiles lists what a data directory keeps of a job.
func jobFiles(dataDir, job string) []string {
	var files []string
	_ = filepath.WalkDir(filepath.Join(dataDir, "checkpoints", job), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	return files
}

// TestKilledClientsJobIsCanceled: a client killed with SIGKILL mid-job stops renewing its
// lease; within the lease and a few seconds no member lists the job, nothing is reserved, no
// actor runs and no file of the job is left on any node.
func TestKilledClientsJobIsCanceled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	isolateGossip(t)
	const lease = 3 * time.Second
	var dirs []string
	var nodes []*serveProc
	for i, name := range []string{"a", "b", "c"} {
		dir := filepath.Join(t.TempDir(), name)
		args := []string{"--data-dir", dir, "--lease", lease.String(), "--chaos-delay", "3ms"}
		if i > 0 {
			args = append(args, "--join", nodes[0].Gossip)
		}
		nodes = append(nodes, startServe(t, name, args...))
		dirs = append(dirs, dir)
	}
	addr := nodes[0].Gossip
	waitFor(t, "3 members", 20*time.Second, func() bool { return len(clusterStatus(t, addr)) == 3 })

	client := nodeCmd(t, "factorize", "--cluster", addr, "--input", "synthetic:m=6,n=30000,k=3,seed=1", "--rank", "3",
		"--shards", "6", "--max-iter", "1000000", "--tol", "0", "--checkpoint-every", "10", "--quiet",
		"--out", filepath.Join(t.TempDir(), "out"))
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	defer client.Process.Kill()
	var job string
	waitFor(t, "the job past iteration 30", 30*time.Second, func() bool {
		for _, j := range listJobs(t, addr) {
			if j.Iteration >= 30 {
				job = j.JobID
				// didnmf jobs (and status) show its progress: the error and the rate.
				if !(j.RelErr2 > 0 && j.RelErr2 < 1) || !(j.Rate > 0) {
					t.Errorf("job %s at iteration %d lists rel_err2 %g, %g it/s", j.JobID, j.Iteration, j.RelErr2, j.Rate)
				}
				return true
			}
		}
		return false
	})
	var st struct {
		Jobs []jobRow `json:"jobs"`
	}
	if code, stdout, stderr := runNode(t, "status", "--cluster", addr, "--json"); code != 0 || json.Unmarshal([]byte(stdout), &st) != nil {
		t.Fatalf("status: exit %d: %s%s", code, stdout, stderr)
	}
	if len(st.Jobs) != 1 || st.Jobs[0].JobID != job || !(st.Jobs[0].RelErr2 > 0) {
		t.Errorf("status lists jobs %+v, want job %s with its progress", st.Jobs, job)
	}
	files := 0
	for _, d := range dirs {
		files += len(jobFiles(d, job))
	}
	if files == 0 {
		t.Fatalf("job %s has no checkpoint files before the kill", job)
	}
	if err := client.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = client.Wait()
	var left string // what is left of the job, as last seen
	took := waitFor(t, "the job gone everywhere", lease+15*time.Second, func() bool {
		if jobs := listJobs(t, addr); len(jobs) > 0 {
			left = fmt.Sprintf("listed: %v", jobs)
			return false
		}
		for name, r := range clusterStatus(t, addr) {
			if r.Reserved != 0 || r.Actors != 0 || len(r.Jobs) != 0 {
				left = fmt.Sprintf("member %s: %+v", name, r)
				return false
			}
		}
		for _, d := range dirs {
			if files := jobFiles(d, job); len(files) > 0 {
				left = fmt.Sprintf("files: %v", files)
				return false
			}
		}
		return true
	}, func() string { return left })
	t.Logf("client killed with %d checkpoint files of job %s on the nodes; the job was gone %v later (lease %v)", files, job, took, lease)
	for _, n := range nodes {
		if !strings.Contains(n.logText(), "canceling a job whose client is gone") && strings.Contains(n.logText(), job+"-coord") {
			t.Errorf("node %s coordinated the job but did not log the cancel", n.name)
		}
	}
}

// testParty starts an actor system in the test process with credentials of the given role
// derived from the test's cluster secret.
func testParty(t *testing.T, name string, role pki.Role) *actor.RootContext {
	t.Helper()
	secret, err := pki.LoadSecret(os.Getenv(pki.SecretFileEnv))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.CAFromSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	tls, err := ca.Credentials(name, []string{"127.0.0.1"}, role)
	if err != nil {
		t.Fatal(err)
	}
	n, err := actors.StartNode(actors.NodeConfig{Threads: 1, TLS: tls})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n.System().Root
}

func peerParty(t *testing.T, name string) *actor.RootContext { return testParty(t, name, pki.RolePeer) }

// TestHostileClientAgainstProcesses: a party holding only a client credential of the cluster
// sends every message type of the protocol to the hosts of real node processes while a job
// runs, and tries to stop the hosts; the nodes live on, the job gives the driver's bits, and
// the nodes count what they dropped and why.
func TestHostileClientAgainstProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	isolateGossip(t)
	nodes := startJoined(t, []string{"a", "b"}, "--chaos-delay", "2ms")
	a, b := nodes[0], nodes[1]
	dir := t.TempDir()
	job := []string{"--input", "synthetic:m=6,n=20000,k=3,seed=2", "--rank", "3", "--shards", "4", "--max-iter", "300", "--tol", "0", "--quiet"}
	golden := filepath.Join(dir, "golden")
	if code, _, stderr := runNode(t, append([]string{"factorize", "--out", golden}, job...)...); code != 0 {
		t.Fatal(stderr)
	}
	mallory := testParty(t, "mallory", pki.RoleClient)
	peer := peerParty(t, "auditor")

	out := filepath.Join(dir, "out")
	var wg sync.WaitGroup
	var code int
	var text string
	wg.Add(1)
	go func() {
		defer wg.Done()
		code, text = runProc(t, append([]string{"factorize", "--cluster", a.Gossip, "--out", out}, job...)...)
	}()
	var id string
	waitFor(t, "the job running", 30*time.Second, func() bool {
		for _, j := range listJobs(t, a.Gossip) {
			id = j.JobID
			return j.Iteration > 0
		}
		return false
	})
	msgs := messages.File_didnmf_proto.Messages()
	for round := 0; round < 3; round++ {
		for i := 0; i < msgs.Len(); i++ {
			mt, err := protoregistry.GlobalTypes.FindMessageByName(msgs.Get(i).FullName())
			if err != nil {
				t.Fatal(err)
			}
			m := mt.New()
			if f := m.Descriptor().Fields().ByName("job_id"); f != nil {
				m.Set(f, protoreflect.ValueOfString(id))
			}
			if f := m.Descriptor().Fields().ByName("epoch"); f != nil {
				m.Set(f, protoreflect.ValueOfUint64(1))
			}
			for _, p := range []*serveProc{a, b} {
				mallory.Send(actors.HostPID(p.Actor), m.Interface().(proto.Message))
			}
		}
		for _, p := range []*serveProc{a, b} {
			mallory.Poison(actors.HostPID(p.Actor))
			mallory.Stop(actors.HostPID(p.Actor))
		}
	}
	wg.Wait()
	if code != 0 {
		t.Fatalf("the victim job: exit %d: %s", code, text)
	}
	sameFiles(t, filepath.Join(golden, "basis.npy"), filepath.Join(out, "basis.npy"))
	sameFiles(t, filepath.Join(golden, "coef.npy"), filepath.Join(out, "coef.npy"))
	for _, p := range []*serveProc{a, b} {
		res, err := peer.RequestFuture(actors.HostPID(p.Actor), &messages.HostStatus{}, 5*time.Second).Result()
		pong, ok := res.(*messages.Pong)
		if err != nil || !ok {
			t.Fatalf("node %s no longer answers: %v", p.name, err)
		}
		drops := strings.Join(pong.Drops, " ")
		t.Logf("node %s drops: %s", p.name, drops)
		for _, want := range []string{"role may not send didnmf.ShardAssignment", "role may not send didnmf.StopJob",
			"role may not send didnmf.JobState", "role may not send didnmf.CheckpointCopy", "type not in the protocol"} {
			if !strings.Contains(drops, want) {
				t.Errorf("node %s: no drop counted as %q", p.name, want)
			}
		}
	}
}

// TestHundredThousandShards: a job of 100,000 shards on three nodes is refused with a clear
// message (each node takes at most serve --max-shards), and meanwhile every member answers
// status promptly and none is declared dead.
func TestHundredThousandShards(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	isolateGossip(t)
	nodes := startJoined(t, []string{"a", "b", "c"})
	a, b, c := nodes[0], nodes[1], nodes[2]
	// Every member answers a status request within 2 s throughout.
	auditor := peerParty(t, "auditor")
	done := make(chan struct{})
	var polls sync.WaitGroup
	var mu sync.Mutex
	var slowest time.Duration
	polls.Add(1)
	go func() {
		defer polls.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			for _, p := range []*serveProc{a, b, c} {
				start := time.Now()
				if _, err := auditor.RequestFuture(actors.HostPID(p.Actor), &messages.HostStatus{}, 2*time.Second).Result(); err != nil {
					t.Errorf("node %s did not answer status within 2 s: %v", p.name, err)
				}
				mu.Lock()
				slowest = max(slowest, time.Since(start))
				mu.Unlock()
			}
		}
	}()
	code, text := runProc(t, "factorize", "--cluster", a.Gossip, "--input", "synthetic:m=5,n=200000,k=3,seed=1", "--rank", "3",
		"--shards", "100000", "--max-iter", "5", "--out", filepath.Join(t.TempDir(), "out"))
	time.Sleep(time.Second)
	close(done)
	polls.Wait()
	if code != 2 || !strings.Contains(text, "--max-shards") {
		t.Fatalf("100,000 shards: exit %d: %s", code, text)
	}
	t.Logf("refused: %s; slowest status %v", lastLine(text), slowest)
	for _, p := range []*serveProc{a, b, c} {
		for _, l := range membersLost(p, true) {
			t.Errorf("node %s declared a member dead: %s", p.name, l)
		}
	}
}

// TestDuplicateNameRefused: a node started under the name of a live member refuses to start
// (exit status 2, naming the member and its address) and disturbs nothing.
func TestDuplicateNameRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	isolateGossip(t)
	nodes := startJoined(t, []string{"a", "b"})
	a, b := nodes[0], nodes[1]
	code, text := runProc(t, "serve", "--bind", "127.0.0.1:0", "--name", "b", "--join", a.Gossip,
		"--data-dir", filepath.Join(t.TempDir(), "b2"))
	if code != 2 || !strings.Contains(text, `already named "b"`) || !strings.Contains(text, b.Gossip) {
		t.Fatalf("a second b: exit %d: %s", code, text)
	}
	time.Sleep(3 * time.Second) // several probe intervals
	if st := clusterStatus(t, a.Gossip); len(st) != 2 || st["b"].Actor != b.Actor {
		t.Fatalf("members after the attempt: %v", st)
	}
	for _, p := range []*serveProc{a, b} {
		if lost := membersLost(p, false); len(lost) > 0 {
			t.Fatalf("node %s saw a member go: %s", p.name, lost[0])
		}
	}
}

// TestClientEndsOnSIGTERMWhateverTheCluster: a client whose cluster stopped answering (its
// only node frozen with SIGSTOP) still ends within a few seconds of SIGTERM.
func TestClientEndsOnSIGTERMWhateverTheCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	isolateGossip(t)
	a := startServe(t, "a", "--chaos-delay", "5ms")
	client := nodeCmd(t, "factorize", "--cluster", a.Gossip, "--input", "synthetic:m=6,n=20000,k=3,seed=1", "--rank", "3",
		"--shards", "2", "--max-iter", "1000000", "--tol", "0", "--quiet", "--out", filepath.Join(t.TempDir(), "out"))
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	defer client.Process.Kill()
	waitFor(t, "the job running", 30*time.Second, func() bool {
		for _, j := range listJobs(t, a.Gossip) {
			return j.Iteration > 0
		}
		return false
	})
	if err := a.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer a.Cmd.Process.Signal(syscall.SIGCONT)
	start := time.Now()
	if err := client.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- client.Wait() }()
	select {
	case err := <-exited:
		t.Logf("the client ended %v after SIGTERM (%v)", time.Since(start), err)
	case <-time.After(15 * time.Second):
		t.Fatal("the client did not end within 15 s of SIGTERM while its cluster was frozen")
	}
}
