package metrics

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/internal/actors"
	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

// jobSpec is a small job on the given nodes.
func jobSpec(nodes []string, shards, maxIter, checkpointEvery int64) *messages.JobSpec {
	return &messages.JobSpec{Inputs: []string{"synthetic:m=6,n=600,k=3,seed=2"}, Algorithm: jobspec.WireAlgorithm(kernels.Algorithm("did")),
		Rank: 3, Shards: shards, Seed: 7, Stop: &messages.StopRule{MaxIter: maxIter}, Nodes: nodes, CheckpointEvery: checkpointEvery}
}

// startCluster starts n in-process nodes sharing cfg (Observer included) and a client on the
// first; both are closed at the end of the test.
func startCluster(t *testing.T, n int, cfg actors.NodeConfig) (*actors.LocalCluster, *actors.Client) {
	t.Helper()
	lc, err := actors.StartLocalCluster(n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl := actors.NewClient(lc.Nodes[0].System(), cfg.Timeouts)
	t.Cleanup(func() {
		cl.Close()
		lc.Close()
	})
	return lc, cl
}

// gossip starts two members joined to each other, for the gossip families.
func gossip(t *testing.T) *cluster.Membership {
	t.Helper()
	meta := cluster.Meta{Role: cluster.RoleMember, Actor: "127.0.0.1:1", Cores: 1, Memory: 1 << 30, Capacity: 1, Started: time.Now().UnixNano()}
	a, err := cluster.Start(cluster.Config{Name: "a", Bind: "127.0.0.1:0", Meta: meta})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Shutdown() })
	b, err := cluster.Start(cluster.Config{Name: "b", Bind: "127.0.0.1:0", Join: []string{a.Local().Gossip}, Meta: meta})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Shutdown() })
	return a
}

// moved is a series whose value must grow between two scrapes.
type moved struct {
	family string
	labels []string
}

// TestARealJobMovesEveryFamily runs a small job on two in-process nodes sharing one Metrics
// as their Observer, with a shard panicking once (a recovery) and checkpoints, next to a
// gossip pair and a node's state, and checks through the handler that every family moved
// as the events happened: iterations and their durations, collectives, bytes on the actor,
// data and gossip planes, checkpoints, the recovery by its cause, the jobs by state while
// the job runs, memory, a guard drop. A second, one-node cluster whose disk is full fails
// its checkpoints.
func TestARealJobMovesEveryFamily(t *testing.T) {
	var m *Metrics
	var lc *actors.LocalCluster
	g := gossip(t)
	m = New(Config{Version: "test",
		Members:      func() map[string]int { return map[string]int{"alive": len(g.Members())} },
		Jobs:         func() map[string]int { return lc.Nodes[0].JobsByState() },
		Memory:       func() (int64, int64) { return lc.Nodes[1].Memory() },
		Drops:        func() map[string]int64 { return lc.Nodes[1].Drops() },
		GossipBytes:  g.GossipBytes,
		GossipHealth: g.HealthScore,
	})
	// Each iteration waits 2 ms, so that the job still runs when it is first scraped.
	faults := &actors.Faults{IterationDelay: 2 * time.Millisecond, Panics: func(shard, it int64) bool { return shard == 1 && it == 7 }}
	lc, cl := startCluster(t, 2, actors.NodeConfig{Threads: 2, Memory: 1 << 30, Faults: faults, Observer: m})
	h := m.Handler()
	before := scrape(t, h)
	if got := value(t, before, "didnmf_memory_offered_bytes"); got != 1<<30 {
		t.Errorf("memory offered %v, want %v", got, 1<<30)
	}

	const iterations = 60
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job, err := cl.Submit(ctx, "", jobSpec(lc.Addresses(), 4, iterations, 3))
	if err != nil {
		t.Fatal(err)
	}
	<-job.Progress()
	during := scrape(t, h)
	live := 0.0
	for _, s := range []string{"placing", "running", "recovering", "paused"} {
		live += value(t, during, "didnmf_jobs", "state", s)
	}
	if live != 1 {
		t.Errorf("%v jobs placing, running, recovering or paused while the job runs, want 1", live)
	}
	if got := value(t, during, "didnmf_memory_reserved_bytes"); got <= 0 {
		t.Errorf("memory reserved %v while the job's shards are placed", got)
	}
	res, err := job.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Recoveries) != 1 {
		t.Fatalf("recoveries %v, want one (the injected panic)", res.Recoveries)
	}

	// A guard drop: a party without the cluster's certificate on the data plane.
	conn, err := net.Dial("tcp", lc.Nodes[1].DataPlaneAddress())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = conn.Write([]byte("not a TLS handshake\r\n\r\n"))
	deadline := time.Now().Add(30 * time.Second)
	for value(t, scrape(t, h), "didnmf_guard_drops_total", "cause", "handshake") == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	conn.Close()

	after := scrape(t, h)
	for _, s := range []moved{
		{"didnmf_iterations_total", nil}, {"didnmf_iteration_duration_seconds", nil}, {"didnmf_allreduce_duration_seconds", nil},
		{"didnmf_sent_bytes_total", []string{"plane", "actor"}}, {"didnmf_received_bytes_total", []string{"plane", "actor"}},
		{"didnmf_sent_bytes_total", []string{"plane", "data"}}, {"didnmf_received_bytes_total", []string{"plane", "data"}},
		{"didnmf_sent_bytes_total", []string{"plane", "gossip"}}, {"didnmf_received_bytes_total", []string{"plane", "gossip"}},
		{"didnmf_checkpoint_duration_seconds", nil},
		{"didnmf_recoveries_total", []string{"cause", string(jobctl.CauseActorPanic)}},
		{"didnmf_guard_drops_total", []string{"cause", "handshake"}},
	} {
		if a, b := value(t, after, s.family, s.labels...), value(t, before, s.family, s.labels...); a <= b {
			t.Errorf("%s%v did not move: %v before the job, %v after", s.family, s.labels, b, a)
		}
	}
	// Every iteration counted once (shard 0's), the redone ones again, each timed; each of
	// the 4 shards waited for at least one collective an iteration.
	done := value(t, after, "didnmf_iterations_total")
	if redone := float64(res.Recoveries[0].Redone); done < iterations+redone {
		t.Errorf("%v iterations counted, want at least %d and the %v redone", done, iterations, redone)
	}
	if got := value(t, after, "didnmf_iteration_duration_seconds"); got != done {
		t.Errorf("%v iteration durations observed, %v iterations counted", got, done)
	}
	if got := value(t, after, "didnmf_allreduce_duration_seconds"); got < 4*iterations {
		t.Errorf("%v collectives observed, want at least one per shard and iteration (%d)", got, 4*iterations)
	}
	if got := value(t, after, "didnmf_members", "state", "alive"); got != 2 {
		t.Errorf("%v members alive, want 2", got)
	}
	for _, s := range []string{"placing", "running", "recovering", "paused"} {
		if got := value(t, after, "didnmf_jobs", "state", s); got != 0 {
			t.Errorf("%v jobs %s after the job ended", got, s)
		}
	}
	if got := value(t, after, "didnmf_checkpoint_failures_total"); got != 0 {
		t.Errorf("%v checkpoint failures on a disk with room", got)
	}
	sum := after["didnmf_iteration_duration_seconds"].Metric[0].GetHistogram().GetSampleSum()
	if sum <= 0 {
		t.Errorf("iteration durations sum to %v s", sum)
	}

	t.Run("full disk", func(t *testing.T) {
		full := New(Config{})
		one, cl := startCluster(t, 1, actors.NodeConfig{Threads: 1, CheckpointQuota: 100, Observer: full})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		job, err := cl.Submit(ctx, "", jobSpec(one.Addresses(), 2, 6, 2))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := job.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		fams := scrape(t, full.Handler())
		// The writes run in the background: they end soon after the job.
		deadline := time.Now().Add(30 * time.Second)
		for value(t, fams, "didnmf_checkpoint_failures_total") == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			fams = scrape(t, full.Handler())
		}
		if got := value(t, fams, "didnmf_checkpoint_failures_total"); got == 0 {
			t.Error("no checkpoint failure counted on a full disk")
		}
		if got := value(t, fams, "didnmf_checkpoint_duration_seconds"); got != 0 {
			t.Errorf("%v checkpoints written on a full disk", got)
		}
	})
}
