package server

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/internal/actors"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/report"
)

// startMembers starts named members on loopback in this process, joined by gossip.
func startMembers(t *testing.T, pool *kernels.Pool, faults *actors.Faults, key []byte, names ...string) []*Server {
	t.Helper()
	return startMembersWith(t, actors.NodeConfig{Pool: pool, Faults: faults}, key, names...)
}

// startMembersWith starts named members with the node configuration node (each in a data
// directory of its own).
func startMembersWith(t *testing.T, node actors.NodeConfig, key []byte, names ...string) []*Server {
	t.Helper()
	dir := t.TempDir()
	var members []*Server
	t.Cleanup(func() {
		for _, m := range members {
			m.Close()
		}
	})
	for i, name := range names {
		cfg := Config{Name: name, Bind: "127.0.0.1:0", Node: node, Secret: key}
		cfg.Node.DataDir = filepath.Join(dir, name)
		if i > 0 {
			cfg.Join = []string{members[0].Gossip()}
		}
		s, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, s)
	}
	// Every member sees every other before the test goes on: a client joining through one
	// that does not yet would learn of the rest only by later gossip.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		all := true
		for _, m := range members {
			all = all && len(m.Members.Workers()) == len(names)
		}
		if all {
			return members
		}
		if time.Now().After(deadline) {
			t.Fatalf("the members do not all see each other within 10 s")
		}
	}
}

// golden is the in-process driver's result for a job spec.
func golden(t *testing.T, spec *messages.JobSpec) *kernels.Result {
	t.Helper()
	src, err := matio.OpenAll(spec.Inputs)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	algo, err := jobspec.AlgorithmOf(spec.Algorithm)
	if err != nil {
		t.Fatal(err)
	}
	p := int(spec.Shards)
	r := kernels.ColumnRanges(src.Samples(), p)
	blocks := make([]kernels.Block, p)
	for s := range blocks {
		if blocks[s], err = src.Read(r[s], r[s+1], matio.LayoutAuto); err != nil {
			t.Fatal(err)
		}
	}
	want, err := kernels.Run(context.Background(), blocks, kernels.Config{Algo: algo, K: int(spec.Rank),
		Seed: spec.Seed, Stop: kernels.StopRule{MaxIter: int(spec.Stop.MaxIter)}})
	if err != nil {
		t.Fatal(err)
	}
	return want
}

func sameFactors(t *testing.T, got *actors.Result, want *kernels.Result) {
	t.Helper()
	if got.Iterations != want.Iterations {
		t.Fatalf("%d iterations, driver %d", got.Iterations, want.Iterations)
	}
	for name, pair := range map[string][2][]float64{"B": {got.B, want.B}, "C": {got.C, want.C}} {
		if len(pair[0]) != len(pair[1]) {
			t.Fatalf("%s has %d values, driver %d", name, len(pair[0]), len(pair[1]))
		}
		for i := range pair[0] {
			if math.Float64bits(pair[0][i]) != math.Float64bits(pair[1][i]) {
				t.Fatalf("%s differs from the driver's at %d", name, i)
			}
		}
	}
}

// TestNodeLossRecovers: a member holding shards dies mid-job (no leave: the others detect it
// by gossip), and then the coordinator's node dies; the job is re-placed, taken over by the
// standby, and ends bitwise equal to the fault-free driver run.
func TestNodeLossRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for failure detection")
	}
	pool := kernels.NewPool(2)
	defer pool.Close()
	faults := &actors.Faults{IterationDelay: 2 * time.Millisecond}
	// A streamed job: the shards re-placed after the loss have their blocks streamed again by
	// the client.
	npy := filepath.Join(t.TempDir(), "x.npy")
	if err := writeSynthetic(npy, "synthetic:m=6,n=4000,k=3,seed=3"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		stream bool
		kill   func(members []*Server, coordinator string) int
	}{
		{"shard node, streamed input", true, func(members []*Server, coord string) int {
			for i, m := range members {
				if m.Node.Address() != coord {
					return i
				}
			}
			return -1
		}},
		{"shard node", false, func(members []*Server, coord string) int {
			for i, m := range members {
				if m.Node.Address() != coord {
					return i
				}
			}
			return -1
		}},
		{"coordinator node", false, func(members []*Server, coord string) int {
			for i, m := range members {
				if m.Node.Address() == coord {
					return i
				}
			}
			return -1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := testKey()
			members := startMembers(t, pool, faults, key, "a", "b", "c", "d")
			client, err := Connect(ClientConfig{Cluster: []string{members[1].Gossip()}, Secret: key})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			for deadline := time.Now().Add(10 * time.Second); len(client.Members.Workers()) < 4; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the client does not see 4 workers: %v; b sees %v", client.Members.Workers(), members[1].Members.Members())
				}
			}
			spec := &messages.JobSpec{Inputs: []string{"synthetic:m=6,n=4000,k=3,seed=3"}, Rank: 3, Algorithm: messages.Algorithm_ALGORITHM_DID, Shards: 8, Seed: 2,
				Stop: &messages.StopRule{MaxIter: 1500}, CheckpointEvery: 20}
			want := golden(t, spec)
			if tc.stream {
				spec.Inputs, spec.Ingest = []string{npy}, messages.Ingest_INGEST_STREAM
			}
			job, err := client.Submit(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			for it := range job.Progress() {
				if it.Iteration >= 300 {
					break
				}
			}
			victim := tc.kill(members, job.Coordinator())
			killed := time.Now()
			t.Logf("killing %s (%s) at %v", members[victim].Name(), members[victim].Node.Address(), killed.Format(time.TimeOnly))
			members[victim].Close()
			go func() {
				for w := range job.Warnings() {
					t.Logf("warning at +%.2fs: %s", time.Since(killed).Seconds(), w)
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			got, err := job.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			sameFactors(t, got, want)
			if len(got.Recoveries) == 0 {
				t.Fatal("no recovery recorded")
			}
			for _, r := range got.Recoveries {
				t.Logf("recovery (epoch %d): %s; from iteration %d, %d redone, iterations flowing %.3f s after the failure was noticed", r.Epoch, r.Cause, r.FromIteration, r.Redone, r.Resumed-r.Noticed)
			}
			// The client saw iteration 300 before the kill: the rollback redid at least the
			// iterations from its checkpoint to there (a coordinator that took the job over
			// knows only its predecessor's last state; the client counts).
			if r := got.Recoveries[0]; r.FromIteration+r.Redone < 300 {
				t.Errorf("the first recovery redid %d iterations from %d, but the client had seen iteration 300", r.Redone, r.FromIteration)
			}
			perNode := map[string]int{}
			for s, addr := range got.ShardNodes {
				if addr == members[victim].Node.Address() {
					t.Fatalf("shard %d ended on the dead node", s)
				}
				perNode[addr]++
			}
			// The dead node's 2 shards spread over the 3 survivors within the load bound (3 of
			// 8): they do not all land on its buddy, which would run 4 and set the pace.
			for addr, n := range perNode {
				if n > 3 {
					t.Errorf("after the recovery %s runs %d of the 8 shards (%v)", addr, n, got.ShardNodes)
				}
			}
			if slices.Contains([]string{"", members[victim].Node.Address()}, job.Coordinator()) {
				t.Fatalf("the job's coordinator is %q", job.Coordinator())
			}
		})
	}
}

// TestPartition splits five members 2|3 with the client on the majority side, through an
// in-process transport that drops gossip and actor traffic across the cut. With the
// coordinator on the majority side, the job re-places the minority's shards and goes on; with
// the coordinator on the minority side, it pauses (no quorum: nothing runs or commits there)
// until the partition heals, then goes on. Either way the factors are bitwise the driver's
// and the cluster is one again after healing.
func TestPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for failure detection")
	}
	pool := kernels.NewPool(2)
	defer pool.Close()
	for _, tc := range []struct {
		name     string
		seed     int // the member the client submits to: its coordinator
		minority bool
	}{
		{"coordinator with the majority", 2, false},
		{"coordinator with the minority", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			part, key := cluster.NewPartition(), testKey()
			faults := &actors.Faults{IterationDelay: 2 * time.Millisecond}
			dir := t.TempDir()
			var members []*Server
			defer func() {
				for _, m := range members {
					m.Close()
				}
			}()
			for i, name := range []string{"a", "b", "c", "d", "e"} {
				cfg := Config{Name: name, Bind: "127.0.0.1:0", Node: actors.NodeConfig{Pool: pool, DataDir: filepath.Join(dir, name), Faults: faults}, Partition: part, Secret: key}
				if os.Getenv("DIDNMF_TEST_LOG") != "" {
					cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("node", name)
				}
				if i > 0 {
					cfg.Join = []string{members[0].Gossip()}
				}
				s, err := Start(cfg)
				if err != nil {
					t.Fatal(err)
				}
				members = append(members, s)
			}
			client, err := Connect(ClientConfig{Cluster: []string{members[tc.seed].Gossip()}, Partition: part, Secret: key})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			waitMembers(t, 5, members)
			waitView(t, 5, client)
			spec := &messages.JobSpec{Inputs: []string{"synthetic:m=6,n=4000,k=3,seed=3"}, Rank: 3, Algorithm: messages.Algorithm_ALGORITHM_DID, Shards: 10, Seed: 2,
				Stop: &messages.StopRule{MaxIter: 1500}, CheckpointEvery: 20}
			want := golden(t, spec)
			job, err := client.Submit(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			var warnings []string
			warned := make(chan struct{})
			go func() {
				for w := range job.Warnings() {
					warnings = append(warnings, w)
				}
				close(warned)
			}()
			for it := range job.Progress() {
				if it.Iteration >= 200 {
					break
				}
			}
			side := func(ms ...*Server) []string {
				var out []string
				for _, m := range ms {
					out = append(out, m.Gossip(), m.Node.Address())
				}
				return out
			}
			majority := append(side(members[2], members[3], members[4]), client.Node.Address())
			if tc.minority && job.Coordinator() != members[0].Node.Address() {
				t.Fatalf("the job's coordinator is %s, not a's %s", job.Coordinator(), members[0].Node.Address())
			}
			part.Split(side(members[0], members[1]), majority)
			t.Log("partitioned {a, b} | {c, d, e, client}")
			if tc.minority {
				// Both sides declare the other dead; the minority, with fewer peers to confirm a
				// suspicion, takes about 10 s, more on a loaded machine. The deaths of c, d and
				// e are declared one by one, each on its own timer, and until the last of them
				// the coordinator still sees a majority and rightly rolls back instead of
				// pausing: heal only once it has paused.
				waitPaused(t, members[1], members[0], job.ID)
				part.Heal()
				t.Log("healed")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			got, err := job.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			<-warned
			sameFactors(t, got, want)
			for _, w := range warnings {
				t.Log("warning: ", w)
			}
			for _, r := range got.Recoveries {
				t.Logf("recovery (epoch %d): %s; from iteration %d, %d redone", r.Epoch, r.Cause, r.FromIteration, r.Redone)
			}
			// The minority's warnings cannot cross the cut to the client: the pause shows in
			// the recovery that followed it.
			if tc.minority && !slices.ContainsFunc(got.Recoveries, func(r report.Recovery) bool { return strings.Contains(r.Cause, "not a majority") }) {
				t.Fatal("the coordinator on the minority side did not pause for want of a quorum")
			}
			if len(got.Recoveries) == 0 {
				t.Fatal("no recovery recorded")
			}
			part.Heal()
			waitMembers(t, 5, members)
		})
	}
}

// jobState is a job's entry on the board of the node at coordinator, as asked by from (a
// peer on the same side of any partition); nil when the node does not list it.
func jobState(from, coordinator *Server, id string) (*messages.JobInfo, error) {
	res, err := from.Node.System().Root.RequestFuture(actors.HostPID(coordinator.Node.Address()), &messages.ListJobs{}, 2*time.Second).Result()
	if err != nil {
		return nil, err
	}
	list, ok := res.(*messages.JobList)
	if !ok {
		return nil, fmt.Errorf("ListJobs answered %T", res)
	}
	for _, j := range list.Jobs {
		if j.JobId == id {
			return j, nil
		}
	}
	return nil, nil
}

// waitPaused waits until the job, coordinated on coordinator, pauses for want of a quorum,
// and checks that it stays paused, its iteration frozen, for a while: a coordinator cut off
// from the majority of the job's nodes must neither go on nor end. It fails the test when the
// job ends, or does not pause within a minute.
func waitPaused(t *testing.T, from, coordinator *Server, id string) {
	t.Helper()
	start := time.Now()
	var paused *messages.JobInfo
	last := "nothing"
	for deadline := start.Add(60 * time.Second); paused == nil; time.Sleep(50 * time.Millisecond) {
		info, err := jobState(from, coordinator, id)
		switch {
		case err != nil:
			last = err.Error()
		case info == nil:
			t.Fatalf("job %s is no longer listed by its coordinator's node %s, cut off from the majority: it ended instead of pausing", id, coordinator.Name())
		case info.State == messages.JobPhase_JOB_PHASE_PAUSED:
			paused = info
		default:
			last = fmt.Sprintf("%s at iteration %d", info.State.Name(), info.Iteration)
		}
		if paused == nil && time.Now().After(deadline) {
			t.Fatalf("the coordinator on the minority side did not pause within 60 s of the split: last seen %s", last)
		}
	}
	t.Logf("the coordinator paused %.1f s after the split, at iteration %d", time.Since(start).Seconds(), paused.Iteration)
	// Paused is paused: no iteration runs and the job does not end while the cut lasts (a
	// retried recovery may show "recovering" for a moment).
	for until := time.Now().Add(time.Second); time.Now().Before(until); time.Sleep(50 * time.Millisecond) {
		info, err := jobState(from, coordinator, id)
		if err != nil {
			continue
		}
		if info == nil || (info.State != messages.JobPhase_JOB_PHASE_PAUSED && info.State != messages.JobPhase_JOB_PHASE_RECOVERING) || info.Iteration != paused.Iteration {
			t.Fatalf("the job went on without a quorum: paused at iteration %d, then %v", paused.Iteration, info)
		}
	}
}

// waitMembers waits until every server lists n workers.
func waitMembers(t *testing.T, n int, servers []*Server) {
	t.Helper()
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ok := true
		for _, s := range servers {
			if len(s.Members.Workers()) != n {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster is not one again: not every node lists %d workers", n)
		}
	}
}

// waitView waits until the client's view lists n workers.
func waitView(t *testing.T, n int, c *Client) {
	t.Helper()
	for deadline := time.Now().Add(40 * time.Second); len(c.Members.Workers()) != n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the client's view lists %d workers, not %d", len(c.Members.Workers()), n)
		}
	}
}

// testKey is a fresh gossip key: members retry the addresses of members they saw die, and on
// loopback another test's cluster may reuse such a port; clusters with different keys never
// merge.
func testKey() []byte {
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	return key
}

// writeSynthetic writes a synthetic input as a samples x features .npy file.
func writeSynthetic(path, spec string) error {
	src, err := matio.Open(spec)
	if err != nil {
		return err
	}
	defer src.Close()
	blk, err := src.Read(0, src.Samples(), matio.LayoutDense)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	// The block is features x samples column-major: the rows of a samples x features file.
	if err := matio.WriteNPY(f, src.Samples(), src.Features(), kernels.ToDense(blk).Data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TestOrphanedJobIsForgotten kills a job's coordinator's node and its standby at once: no
// node can take the job over, and the client gives it up. The nodes left held the job's
// shards and reducers; they stop them and give their memory back once Timeouts.Orphan passed
// without another coordinator, instead of keeping them for good.
func TestOrphanedJobIsForgotten(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for failure detection")
	}
	pool := kernels.NewPool(2)
	defer pool.Close()
	key := testKey()
	timeouts := actors.Timeouts{Quorum: 2 * time.Second, Orphan: 4 * time.Second}
	members := startMembersWith(t, actors.NodeConfig{Pool: pool, Timeouts: timeouts, Faults: &actors.Faults{IterationDelay: 2 * time.Millisecond}},
		key, "a", "b", "c", "d")
	client, err := Connect(ClientConfig{Cluster: []string{members[0].Gossip()}, Secret: key, TakeoverWait: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	spec := &messages.JobSpec{Inputs: []string{"synthetic:m=6,n=4000,k=3,seed=3"}, Rank: 3, Algorithm: messages.Algorithm_ALGORITHM_DID, Shards: 8, Seed: 2,
		Stop: &messages.StopRule{MaxIter: 100000}, CheckpointEvery: 20}
	job, err := client.Submit(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	for it := range job.Progress() {
		if it.Iteration >= 50 {
			break
		}
	}
	// The standby is the worker after the coordinator's node in the job's ring (the live
	// workers in membership order).
	coord := job.Coordinator()
	workers := members[0].Members.Workers()
	at := slices.IndexFunc(workers, func(w cluster.Member) bool { return w.Meta.Actor == coord })
	if at < 0 {
		t.Fatalf("coordinator %s is not a worker", coord)
	}
	standby := workers[(at+1)%len(workers)].Meta.Actor
	var survivors []*Server
	for _, m := range members {
		if a := m.Node.Address(); a == coord || a == standby {
			t.Logf("killing %s (%s)", m.Name(), a)
			m.Close()
		} else {
			survivors = append(survivors, m)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := job.Wait(ctx); err == nil || !strings.Contains(err.Error(), "no node took the job over") {
		t.Fatalf("the job ended with %v, want it given up", err)
	}
	for _, s := range survivors {
		for deadline := time.Now().Add(timeouts.Orphan + 15*time.Second); ; time.Sleep(200 * time.Millisecond) {
			var load *messages.Pong
			for _, st := range client.Status(2 * time.Second) {
				if st.Member.Meta.Actor == s.Node.Address() {
					load = st.Load
				}
			}
			if load != nil && load.Shards == 0 && load.Reserved == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still holds shards of a job nobody coordinates: %v", s.Name(), load)
			}
		}
	}
}

// TestSubmitToDyingNode: a node that dies between a submission and its acceptance fails the
// submission, with an error that says so, instead of leaving the client waiting for good.
func TestSubmitToDyingNode(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for failure detection")
	}
	pool := kernels.NewPool(2)
	defer pool.Close()
	key := testKey()
	members := startMembers(t, pool, &actors.Faults{SetupDelay: time.Minute}, key, "a", "b", "c")
	client, err := Connect(ClientConfig{Cluster: []string{members[0].Gossip()}, Secret: key})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	waitMembers(t, 3, members)
	done := make(chan error, 1)
	go func() {
		_, err := client.Submit(context.Background(), &messages.JobSpec{Inputs: []string{"synthetic:m=6,n=400,k=3,seed=3"}, Rank: 3,
			Algorithm: messages.Algorithm_ALGORITHM_DID, Shards: 2, Seed: 2, Stop: &messages.StopRule{MaxIter: 10}})
		done <- err
	}()
	// The node coordinating the job holds it (its coordinator) before it accepts it.
	var victim *Server
	for deadline := time.Now().Add(10 * time.Second); victim == nil; time.Sleep(50 * time.Millisecond) {
		for _, st := range client.Status(2 * time.Second) {
			if st.Load != nil && st.Load.Jobs > 0 {
				for _, m := range members {
					if m.Node.Address() == st.Member.Meta.Actor {
						victim = m
					}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no node holds the submitted job")
		}
	}
	t.Logf("killing %s before it accepts the job", victim.Name())
	victim.Close()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "before it accepted the job") {
			t.Fatalf("submit returned %v", err)
		}
		t.Log(err)
	case <-time.After(30 * time.Second):
		t.Fatal("submit still waits 30 s after its node died")
	}
}
