package nodeview

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/internal/httpapi"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/internal/server"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/usererr"
)

// startCluster starts members named names on loopback with one secret, each joining the
// first, and closes them at the end of the test.
func startCluster(t *testing.T, names ...string) []*server.Server {
	t.Helper()
	return startClusterWith(t, "", names...)
}

// startClusterWith starts the cluster with root the members' data root ("": none).
func startClusterWith(t *testing.T, root string, names ...string) []*server.Server {
	t.Helper()
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	pool := kernels.NewPool(2)
	t.Cleanup(pool.Close)
	dir := t.TempDir()
	var members []*server.Server
	for i, name := range names {
		cfg := server.LocalNode()
		cfg.Name, cfg.Secret = name, key
		cfg.Node.Pool, cfg.Node.DataDir = pool, filepath.Join(dir, name)
		if root != "" {
			cfg.DataRoots = []string{root}
		}
		if i > 0 {
			cfg.Join = []string{members[0].Gossip()}
		}
		s, err := server.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		members = append(members, s)
	}
	return members
}

// waitFor polls cond until it holds, or fails the test after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", within, what)
		}
	}
}

// states returns the members' states in the view's cluster.
func states(t *testing.T, v *View) map[string]string {
	t.Helper()
	c, err := v.Cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range c.Members {
		out[m.Name] = m.State
	}
	return out
}

// TestView: a view over member a of a 4-node cluster lists the members with their load;
// an attached job submitted through it runs to its end, for its owner, and its outputs are
// the bits of the same job run by the root package's Runner; a job is canceled; spec errors
// are the user's; a member that crashes is dead, one that leaves is left; the node is ready
// until it leaves.
func TestView(t *testing.T) {
	members := startCluster(t, "a", "b", "c", "d")
	ctx := context.Background()
	dataDir := t.TempDir()
	v, err := New(Config{Server: members[0], Refresh: 50 * time.Millisecond, DataDir: dataDir, Version: "v-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	waitFor(t, 10*time.Second, "the view lists 4 members alive, with their load answered", func() bool {
		c, _ := v.Cluster(ctx)
		alive := 0
		for _, m := range c.Members {
			if m.State == "alive" && m.Error == "" && m.MemoryOffered > 0 && m.Threads > 0 && m.Actor != "" {
				alive++
			}
		}
		return alive == 4
	})
	if err := v.Ready(); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if c, _ := v.Cluster(ctx); c.Self != "a" || c.Version != "v-test" || c.UnixMs == 0 {
		t.Errorf("cluster %+v", c)
	}
	// Not ready: the node's memory all reserved, or its host silent.
	full := &View{srv: members[0], snap: snapshot{self: &messages.Pong{Memory: 1 << 20, Reserved: 1 << 20}}}
	if err := full.Ready(); err == nil || !strings.Contains(err.Error(), "no memory free") {
		t.Errorf("Ready with every byte reserved: %v", err)
	}
	silent := &View{srv: members[0], snap: snapshot{selfErr: errors.New("timeout")}}
	if err := silent.Ready(); err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("Ready without its host's answer: %v", err)
	}

	// An attached job runs to its end; its outputs are the Runner's bits.
	spec := jobspec.New([]string{"synthetic:m=6,n=600,k=3,seed=3"}, kernels.DID, 3, 6)
	spec.Seed, spec.Stop.MaxIter = 2, 15
	updated := v.Updated()
	id, err := v.Submit(ctx, "alice", spec)
	if err != nil {
		t.Fatal(err)
	}
	// Known at once, before the next refresh: a client follows the id Submit returned.
	if j, err := v.Job(ctx, id); err != nil || j.Owner != "alice" {
		t.Errorf("the job right after its submission: %+v, %v", j, err)
	}
	select {
	case <-updated:
	case <-time.After(10 * time.Second):
		t.Fatal("Updated not closed after a refresh")
	}
	var job httpapi.JobView
	waitFor(t, 30*time.Second, "the job ends", func() bool {
		job, err = v.Job(ctx, id)
		return err == nil && job.EndedUnixMs != 0
	})
	if job.State != "done" || job.Error != nil || job.Owner != "alice" || job.Iteration != 15 || len(job.History) == 0 ||
		job.Algorithm != string(kernels.DID) || job.Rank != 3 || job.Shards != 6 {
		t.Errorf("ended job %+v", job)
	}
	if job.Spec["rank"] != 3 || job.Spec["shards"] != 6 || job.Spec["algorithm"] != string(kernels.DID) {
		t.Errorf("ended job's spec %v, want the submitted one", job.Spec)
	}
	if list, _ := v.Jobs(ctx, "alice"); len(list) != 1 || list[0].ID != id || list[0].History != nil || list[0].Spec != nil {
		t.Errorf("alice's jobs %+v", list)
	}
	if list, _ := v.Jobs(ctx, "bob"); len(list) != 0 {
		t.Errorf("bob's jobs %+v", list)
	}
	for _, name := range []string{"report.json", "coef.npy", "basis.npy", "figures/convergence.png", "figures/basis.png"} {
		if !slices.Contains(job.Outputs, name) {
			t.Errorf("outputs %v lack %s", job.Outputs, name)
		}
	}
	want, err := didnmf.Run(ctx, spec, didnmf.Local(0), didnmf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantDir := t.TempDir()
	if err := want.Save(wantDir, nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"coef.npy", "basis.npy"} {
		got := readOutput(t, v, id, name)
		w, err := os.ReadFile(filepath.Join(wantDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, w) {
			t.Errorf("%s differs from the Runner's", name)
		}
	}
	if rep := readOutput(t, v, id, "report.json"); !bytes.Contains(rep, []byte(`"k": 3`)) {
		t.Errorf("report.json: %.200s", rep)
	}
	for _, c := range []struct{ id, name string }{{id, "../coef.npy"}, {id, "coef.tsv"}, {id, "figures/../coef.npy"}, {"nope", "coef.npy"}, {"", "report.json"}} {
		if r, err := v.Output(ctx, c.id, c.name); !errors.Is(err, httpapi.ErrNotFound) {
			if r != nil {
				r.Close()
			}
			t.Errorf("Output(%q, %q): %v, want not found", c.id, c.name, err)
		}
	}

	// A long job is listed running for its owner, as the coordinator publishes it, then
	// canceled.
	long := jobspec.New([]string{"synthetic:m=6,n=600,k=3,seed=3"}, kernels.DID, 3, 3)
	long.Stop.MaxIter, long.Stop.Tol, long.Stop.StallTol = 1<<30, 0, 0
	lid, err := v.Submit(ctx, "bob", long)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the long job is listed running as bob's", func() bool {
		j, err := v.Job(ctx, lid)
		return err == nil && j.State == "running" && j.Owner == "bob" && j.Iteration > 0 && j.Coordinator == members[0].Node.Address()
	})
	if err := v.Cancel(ctx, lid); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the long job is canceled", func() bool {
		j, err := v.Job(ctx, lid)
		return err == nil && j.State == "canceled" && j.Error != nil && j.Error.Kind == "canceled"
	})
	if err := v.Cancel(ctx, lid); !errors.Is(err, httpapi.ErrNotFound) {
		t.Errorf("Cancel of an ended job: %v", err)
	}
	if err := v.Cancel(ctx, "nope"); !errors.Is(err, httpapi.ErrNotFound) {
		t.Errorf("Cancel of an unknown job: %v", err)
	}
	if _, err := v.Job(ctx, "nope"); !errors.Is(err, httpapi.ErrNotFound) {
		t.Errorf("Job of an unknown job: %v", err)
	}

	// The user's errors.
	bad := jobspec.New([]string{"synthetic:m=6,n=600,k=3,seed=3"}, kernels.DID, 0, 3)
	if _, err := v.Submit(ctx, "alice", bad); !errors.Is(err, usererr.ErrUser) || !strings.Contains(err.Error(), "rank") {
		t.Errorf("rank 0: %v", err)
	}
	var ue *usererr.Error
	big := jobspec.New([]string{"synthetic:m=6,n=600,k=3,seed=3"}, kernels.DID, 9, 3)
	if _, err := v.Submit(ctx, "alice", big); !errors.As(err, &ue) || ue.Field != "rank" {
		t.Errorf("rank above the features (the node's check against the data): %v", err)
	}
	stream := jobspec.New([]string{"x.npy"}, kernels.DID, 3, 3)
	stream.Ingest = jobspec.IngestStream
	if _, err := v.Submit(ctx, "alice", stream); !errors.As(err, &ue) || ue.Field != "ingest" {
		t.Errorf("ingest stream: %v", err)
	}
	missing := jobspec.New([]string{"/nonexistent/x.npy"}, kernels.DID, 3, 3)
	if _, err := v.Submit(ctx, "alice", missing); !errors.Is(err, usererr.ErrUser) {
		t.Errorf("an input the node cannot read: %v", err)
	}

	// A member that crashes is dead, one that leaves left.
	members[3].Close()
	if err := members[2].Leave(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "c left and d dead", func() bool {
		s := states(t, v)
		return s["c"] == "left" && s["d"] == "dead" && s["a"] == "alive" && s["b"] == "alive"
	})
	if c, _ := v.Cluster(ctx); !slices.ContainsFunc(c.Warnings, func(w string) bool { return strings.Contains(w, "member d") && strings.Contains(w, "dead") }) {
		t.Errorf("warnings %q", c.Warnings)
	}
	if err := v.Ready(); err != nil {
		t.Errorf("Ready after others left: %v", err)
	}
	if err := members[0].Members.Leave(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := v.Ready(); err == nil || !strings.Contains(err.Error(), "leaving") {
		t.Errorf("Ready of a node that left: %v", err)
	}
}

// readOutput reads a job's output through the view.
func readOutput(t *testing.T, v *View, id, name string) []byte {
	t.Helper()
	r, err := v.Output(context.Background(), id, name)
	if err != nil {
		t.Fatalf("Output(%s): %v", name, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestViewDetached: a job with out_shared runs detached: Submit returns at once, the job
// writes its outputs there, and the view serves none of its own.
func TestViewDetached(t *testing.T) {
	root := t.TempDir()
	members := startClusterWith(t, root, "a", "b")
	ctx := context.Background()
	v, err := New(Config{Server: members[0], Refresh: 50 * time.Millisecond, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	waitFor(t, 10*time.Second, "the node is ready", func() bool { return v.Ready() == nil && len(states(t, v)) == 2 })
	spec := jobspec.New([]string{"synthetic:m=6,n=600,k=3,seed=3"}, kernels.DID, 3, 4)
	spec.Seed, spec.Stop.MaxIter, spec.OutShared = 2, 10, filepath.Join(root, "out")
	id, err := v.Submit(ctx, "carol", spec)
	if err != nil {
		t.Fatal(err)
	}
	if j, err := v.Job(ctx, id); err != nil || j.Owner != "carol" || !j.Detached {
		t.Errorf("the detached job right after its submission: %+v, %v", j, err)
	}
	waitFor(t, 30*time.Second, "the detached job writes its report", func() bool {
		_, err := os.Stat(filepath.Join(root, "out", "report.json"))
		return err == nil
	})
	if r, err := v.Output(ctx, id, "report.json"); !errors.Is(err, httpapi.ErrNotFound) {
		if r != nil {
			r.Close()
		}
		t.Errorf("Output of a detached job: %v", err)
	}
	if j, err := v.Job(ctx, id); err == nil && (!j.Detached || j.OutShared != spec.OutShared || j.Owner != "carol" || len(j.Outputs) != 0) {
		t.Errorf("detached job %+v", j)
	}
	outside := jobspec.New([]string{"synthetic:m=6,n=600,k=3,seed=3"}, kernels.DID, 3, 4)
	outside.OutShared = filepath.Join(t.TempDir(), "out")
	if _, err := v.Submit(ctx, "carol", outside); !errors.Is(err, usererr.ErrUser) {
		t.Errorf("out_shared outside the data roots: %v", err)
	}
}

// TestIdleViewAsksNothing: a view nobody uses stops asking the members (a node nobody watches
// costs its cluster nothing), and the first use after takes a snapshot at once.
func TestIdleViewAsksNothing(t *testing.T) {
	members := startCluster(t, "a")
	v, err := New(Config{Server: members[0], Refresh: 10 * time.Millisecond, Idle: 200 * time.Millisecond, IdleRefresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	taken := func() int64 {
		v.mu.Lock()
		defer v.mu.Unlock()
		return v.snap.cluster.UnixMs
	}
	waitFor(t, 10*time.Second, "the view idle", func() bool { return v.idle(time.Now().Add(-100 * time.Millisecond)) })
	before := taken()
	time.Sleep(300 * time.Millisecond) // 30 refresh periods
	if after := taken(); after != before {
		t.Fatalf("an idle view took a snapshot (at %d, after %d)", after, before)
	}
	if _, err := v.Cluster(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a snapshot on the first use", func() bool { return taken() > before })
}
