package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/netns"
	"github.com/didnmf/didnmf/internal/proccluster"
)

// The network-namespace partition tests cut a cluster of real `didnmf serve` processes for
// real: every node, and the client, runs in a network namespace of its own, and a cut drops
// the packets between them in a router (see internal/netns), gossip and gRPC alike, without
// the nodes' knowledge. They need root and iproute2, and skip, saying so, without them; the
// in-process cluster.Partition (server's TestPartition) covers partitions everywhere else.
//
//	sudo go test ./cmd/node -run TestNetnsPartition -v

// netnsJob is the job of the netns tests (the chaos suite's): long enough, with every node's
// --chaos-delay, for a cut to land mid-job; a checkpoint every 20 iterations.
var netnsJob = []string{"--input", "synthetic:m=6,n=20000,k=3,seed=4", "--rank", "3", "--shards", "10", "--seed", "3",
	"--max-iter", "1200", "--tol", "0", "--checkpoint-every", "20"}

// netCluster is nodes in network namespaces (a the coordinator: jobs are submitted to it) and
// a client namespace from which jobs are submitted and status asked.
type netCluster struct {
	*chaosCluster
	net    *netns.Net
	client *netns.Host
}

// startNetCluster makes a namespace per node and one for the client, starts a `didnmf serve` in
// each node's namespace (bound to its address, port 7946) and waits until every node sees
// every other.
func startNetCluster(t *testing.T, names ...string) *netCluster {
	t.Helper()
	n := netns.ForTest(t, append(slices.Clone(names), "client")...)
	nc := &netCluster{chaosCluster: &chaosCluster{delay: "2ms"}, net: n, client: n.Host("client")}
	for i, name := range names {
		h := n.Host(name)
		dir := filepath.Join(t.TempDir(), name)
		// A lease longer than the tests: a coordinator cut off from its client must stop for
		// want of a majority, not because the client went silent.
		args := []string{"serve", "--bind", h.IP.String() + ":7946", "--name", name, "--data-dir", dir, "--threads", "1", "--chaos-delay", nc.delay,
			"--lease", "5m"}
		if i > 0 {
			args = append(args, "--join", nc.nodes[0].Gossip)
		}
		p := startServeUnder(t, h.Exec(), name, args)
		nc.nodes = append(nc.nodes, &chaosNode{serveProc: p, dataDir: dir})
	}
	for _, x := range nc.nodes {
		for _, y := range nc.nodes {
			if x != y {
				nc.waitRecord(t, x, time.Time{}, 20*time.Second, "member joined", "member", y.name)
			}
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			nc.dumpLogs(t)
		}
	})
	return nc
}

// host is the namespace a node runs in.
func (nc *netCluster) host(n *chaosNode) *netns.Host { return nc.net.Host(n.name) }

// submit runs factorize --cluster in the client's namespace, through the coordinator.
func (nc *netCluster) submit(t *testing.T, out string) *jobRun {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := nc.client.Command(exe, append([]string{"factorize", "--cluster", nc.coordinator().Gossip, "--out", out}, netnsJob...)...)
	cmd.Env = nodeEnv()
	return nc.runJob(t, cmd, out)
}

// status is `didnmf status --json`, asked from the client's namespace through node via.
func (nc *netCluster) status(t *testing.T, via *chaosNode) (map[string]statusRow, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := nc.client.Command(exe, "status", "--cluster", via.Gossip, "--json")
	cmd.Env = nodeEnv()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("status through %s: %v: %s", via.name, err, strings.TrimSpace(stderr.String()))
	}
	return parseStatus(t, stdout.String()), nil
}

// waitRecord waits up to limit for node n to log a record msg with the attributes kv, read at
// or after since, and returns the first.
func (nc *netCluster) waitRecord(t *testing.T, n *chaosNode, since time.Time, limit time.Duration, msg string, kv ...string) proccluster.Record {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(20 * time.Millisecond) {
		for _, r := range n.Find(msg, kv...) {
			if !r.At.Before(since) {
				return r
			}
		}
		if time.Now().After(deadline) {
			nc.dumpLogs(t)
			t.Fatalf("node %s logged no %q %v within %v", n.name, msg, kv, limit)
		}
	}
}

// cut cuts the nodes of off from those of rest and the client, and returns when.
func (nc *netCluster) cut(t *testing.T, off, rest []*chaosNode) time.Time {
	t.Helper()
	var a, b []*netns.Host
	for _, n := range off {
		a = append(a, nc.host(n))
	}
	for _, n := range rest {
		b = append(b, nc.host(n))
	}
	at := time.Now()
	if err := nc.net.Cut(a, append(b, nc.client)); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s cut %v | %v and the client", utc(at), names(off), names(rest))
	return at
}

func names(ns []*chaosNode) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.name)
	}
	return out
}

// heal heals every cut and waits until the cluster is one again: every node's latest word on
// every other is that it joined (a node declared dead during the cut joined again; one only
// suspected was not declared dead), and status through each node lists every node, answering,
// at its actor address.
func (nc *netCluster) heal(t *testing.T) {
	t.Helper()
	at := time.Now()
	if err := nc.net.Heal(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s healed", utc(at))
	last := "nothing yet"
	took := waitFor(t, "the cluster one again after the heal", 40*time.Second, func() bool {
		for _, x := range nc.nodes {
			for _, y := range nc.nodes {
				if x != y && !seesAlive(x, y) {
					last = fmt.Sprintf("%s's latest word on %s is not that it joined", x.name, y.name)
					return false
				}
			}
		}
		for _, via := range nc.nodes {
			st, err := nc.status(t, via)
			if err != nil {
				last = err.Error()
				return false
			}
			for _, n := range nc.nodes {
				if r, ok := st[n.name]; !ok || r.Error != "" || r.Actor != n.Actor {
					last = fmt.Sprintf("status through %s: %s is %+v (listed %v), want it answering at %s", via.name, n.name, r, ok, n.Actor)
					return false
				}
			}
		}
		return true
	}, func() string { nc.dumpLogs(t); return last })
	t.Logf("the cluster is one again %v after the heal", took.Round(time.Millisecond))
}

// seesAlive tells whether x's latest membership record on y is that it joined.
func seesAlive(x, y *chaosNode) bool {
	latest := ""
	for _, r := range x.Records() {
		if r.Attr("member") == y.name && slices.Contains([]string{"member joined", "member failed (declared dead)", "member left"}, r.Msg) {
			latest = r.Msg
		}
	}
	return latest == "member joined"
}

// residue is what the nodes hold of jobs (jobs listed, actors) by status through via, once
// nothing is left or limit passed ("" for nothing).
func (nc *netCluster) residue(t *testing.T, via *chaosNode, limit time.Duration) string {
	t.Helper()
	for deadline := time.Now().Add(limit); ; time.Sleep(250 * time.Millisecond) {
		st, err := nc.status(t, via)
		if err != nil {
			t.Fatal(err)
		}
		left := ""
		for _, n := range nc.nodes {
			if row := st[n.name]; len(row.Jobs) > 0 || row.Actors > 0 {
				left += fmt.Sprintf(" %s: jobs %v, %d actors;", n.name, row.Jobs, row.Actors)
			}
		}
		if left == "" || time.Now().After(deadline) {
			return left
		}
	}
}

// verifyNet checks a job that went through a cut: exit status 0, the driver's bits and
// iteration count, at least one recovery in report.json, no shard ending on a node of lost.
func verifyNet(t *testing.T, run *jobRun, golden string, lost []*chaosNode) {
	t.Helper()
	if run.code != 0 {
		t.Fatalf("factorize: exit %d:\n%s", run.code, run.text())
	}
	sameFiles(t, filepath.Join(golden, "basis.npy"), filepath.Join(run.out, "basis.npy"))
	sameFiles(t, filepath.Join(golden, "coef.npy"), filepath.Join(run.out, "coef.npy"))
	rep := readReport(t, run.out)
	if want := readReport(t, golden).Iterations; rep.Iterations != want {
		t.Errorf("report.json: %d iterations, the driver %d", rep.Iterations, want)
	}
	if len(rep.Recoveries) == 0 {
		t.Errorf("no recovery in report.json after the cut")
	}
	for _, r := range rep.Recoveries {
		t.Logf("recovery (epoch %d): %s; from iteration %d, %d redone, %.2f s", r.Epoch, r.Cause, r.FromIteration, r.Redone, r.Resumed-r.Noticed)
	}
	if len(rep.ShardNodes) != 10 {
		t.Errorf("report.json: %d shard_nodes, want 10", len(rep.ShardNodes))
	}
	for sh, a := range rep.ShardNodes {
		for _, n := range lost {
			if a == n.Actor {
				t.Errorf("shard %d ended on %s, which was cut off", sh, n.name)
			}
		}
	}
	if t.Failed() {
		t.Logf("factorize stderr:\n%s", run.text())
	}
}

// TestNetnsPartition cuts a 3-node cluster of `didnmf serve` processes for real, in network
// namespaces, while a job runs, and heals it:
//
//   - node cut off: a node running shards is cut from the others and the client; the job rolls
//     back and ends with the driver's bits on the two left; both sides declared the other
//     dead; healed, the node is a member again.
//   - coordinator with the minority: the coordinator's node is cut from the others and the
//     client; its standby takes the job over, and it ends with the driver's bits; the
//     coordinator cut off does not go on alone: it pauses for want of a majority (the nodes'
//     lease is long, so that the client's silence does not cancel it first); healed, it is a
//     member again, it never resumed its copy of the job (one result), and nothing of the job
//     is left on any node.
func TestNetnsPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes in network namespaces and cuts them")
	}
	if err := netns.Check(); err != nil {
		t.Skipf("needs network namespaces: %v", err)
	}
	golden := filepath.Join(t.TempDir(), "golden")
	if code, _, stderr := runNode(t, append([]string{"factorize", "--out", golden, "--quiet"}, netnsJob...)...); code != 0 {
		t.Fatalf("the driver's run: exit %d: %s", code, stderr)
	}

	t.Run("node cut off", func(t *testing.T) {
		nc := startNetCluster(t, "a", "b", "c")
		run := nc.submit(t, filepath.Join(t.TempDir(), "out"))
		nc.waitIteration(t, run, 300)
		victim := nc.victim(t, run, 0, 0)
		var rest []*chaosNode
		for _, n := range nc.nodes {
			if n != victim {
				rest = append(rest, n)
			}
		}
		cutAt := nc.cut(t, []*chaosNode{victim}, rest)
		run.wait(t, 90*time.Second)
		verifyNet(t, run, golden, []*chaosNode{victim})
		// The cut was real on both sides: each declared the other dead.
		for _, n := range rest {
			r := nc.waitRecord(t, n, cutAt, 30*time.Second, "member failed (declared dead)", "member", victim.name)
			t.Logf("%s declared %s dead %v after the cut", n.name, victim.name, r.At.Sub(cutAt).Round(time.Millisecond))
			r = nc.waitRecord(t, victim, cutAt, 30*time.Second, "member failed (declared dead)", "member", n.name)
			t.Logf("%s declared %s dead %v after the cut", victim.name, n.name, r.At.Sub(cutAt).Round(time.Millisecond))
		}
		nc.heal(t)
	})

	t.Run("coordinator with the minority", func(t *testing.T) {
		nc := startNetCluster(t, "a", "b", "c")
		run := nc.submit(t, filepath.Join(t.TempDir(), "out"))
		nc.waitIteration(t, run, 300)
		coord, rest := nc.coordinator(), nc.nodes[1:]
		cutAt := nc.cut(t, []*chaosNode{coord}, rest)
		run.wait(t, 90*time.Second)
		verifyNet(t, run, golden, []*chaosNode{coord})
		if run.count(warnTakeover) == 0 {
			t.Errorf("factorize did not say that a node took the job over:\n%s", run.text())
		}
		// Cut off from the majority, the coordinator does not go on: it pauses.
		r := nc.waitRecord(t, coord, cutAt, 60*time.Second, "no quorum: the job waits")
		t.Logf("%s paused %v after the cut: %s", coord.name, r.At.Sub(cutAt).Round(time.Millisecond), r.Line)
		healAt := time.Now()
		nc.heal(t)
		// Healed, the coordinator may try its copy again, but must learn that the job ended
		// and stop: 30 s after the heal, no node holds anything of the job.
		if left := nc.residue(t, rest[0], 30*time.Second); left != "" {
			t.Errorf("30 s after the heal the nodes still hold actors of the finished job:%s", left)
		}
		for _, rec := range coord.Records() {
			if rec.At.After(healAt) && rec.Attr("job") != "" {
				t.Logf("%s after the heal: %s", coord.name, rec.Line)
			}
		}
		// Healed, it must not have run the job again: the client has its one result, and the
		// copy cut off never resumed (a coordinator logs "job resumed" at the first iteration
		// it runs after a recovery).
		for _, rec := range coord.Find("job resumed") {
			if rec.At.After(cutAt) {
				t.Errorf("%s, cut off with the minority, resumed the job %v after the cut: %s", coord.name, rec.At.Sub(cutAt).Round(time.Millisecond), rec.Line)
			}
		}
	})
}
