package actors

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/messages"
)

// panicSchedule returns a seeded schedule of shard panics: each listed (shard, iteration)
// panics once; it is printed so that a failing seed can be replayed.
func panicSchedule(t *testing.T, seed uint64, shards, iters, every int64) func(shard, iteration int64) bool {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	at := map[[2]int64]bool{}
	var list []string
	for it := int64(2) + rng.Int64N(every); it < iters; it += 2 + rng.Int64N(every) {
		s := rng.Int64N(shards)
		at[[2]int64{s, it}] = true
		list = append(list, fmt.Sprintf("shard %d at %d", s, it))
	}
	t.Logf("fault schedule (seed %d): panics of %v", seed, list)
	return func(shard, iteration int64) bool { return at[[2]int64{shard, iteration}] }
}

func TestPanickingShardsRecoverBitwise(t *testing.T) {
	cases := []struct {
		algo   string
		shards int64
		every  int64
		seed   uint64
	}{
		{"did", 5, 4, 1},
		{"did", 4, 1, 2},
		{"dbcd", 4, 3, 3},
		{"dadmm", 3, 5, 4},
		{"hpc-anls", 4, 2, 5},
		{"did", 6, 0, 6}, // no checkpoints: every recovery starts over
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/P%d/every%d", tc.algo, tc.shards, tc.every), func(t *testing.T) {
			const iters = 30
			faults := &Faults{Panics: panicSchedule(t, tc.seed, tc.shards, iters, 6)}
			lc, cl := testCluster(t, 3, faults)
			sp := spec("synthetic:m=6,n=400,k=3,seed=2", tc.algo, 3, tc.shards, lc.Addresses(), iters)
			sp.CheckpointEvery = tc.every
			want := driverRun(t, sp)
			got, err := runJob(t, cl, sp)
			if err != nil {
				t.Fatal(err)
			}
			checkSame(t, tc.algo, got, want)
			if len(got.Recoveries) == 0 {
				t.Fatal("no recovery recorded")
			}
			for _, r := range got.Recoveries {
				t.Logf("recovery epoch %d from %d (redone %d): %s; %.3f s", r.Epoch, r.FromIteration, r.Redone, r.Cause, r.Resumed-r.Noticed)
				if tc.every > 0 && r.FromIteration%tc.every != 0 {
					t.Fatalf("resumed from iteration %d, not a checkpoint of every %d", r.FromIteration, tc.every)
				}
			}
			waitIdle(t, lc)
		})
	}
}

// runCollecting runs a job like runJob and also returns the warnings the client received.
func runCollecting(t *testing.T, cl *Client, sp *messages.JobSpec) (*Result, []string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job, err := cl.Submit(ctx, "", sp)
	if err != nil {
		return nil, nil, err
	}
	var warnings []string
	done := make(chan struct{})
	go func() {
		for w := range job.Warnings() {
			warnings = append(warnings, w)
		}
		close(done)
	}()
	res, err := job.Wait(ctx)
	<-done
	return res, warnings, err
}

func TestReducerPanicRecoversBitwise(t *testing.T) {
	faults := &Faults{ReducerPanics: func(lo, it int64) bool { return it == 7 || it == 19 }}
	lc, cl := testCluster(t, 3, faults)
	sp := spec("synthetic:m=6,n=600,k=3,seed=2", "did", 3, 16, lc.Addresses(), 30)
	sp.FanIn, sp.CheckpointEvery = 2, 5
	want := driverRun(t, sp)
	got, err := runJob(t, cl, sp)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "reducer panics", got, want)
	if len(got.Recoveries) < 2 {
		t.Fatalf("%d recoveries, want one per reducer panic at least", len(got.Recoveries))
	}
	waitIdle(t, lc)
}

// TestCorruptCheckpointsAreNeverUsed: a flipped byte in a checkpoint file is caught by its
// checksum: the shard resumes from its buddy's copy; when every copy of the recent
// checkpoints is corrupt, the job falls back to an older checkpoint (here: the start), and
// the result is bitwise the driver's either way. A checkpoint larger than a chunk goes to the
// buddy, and comes back from it, in several.
func TestCorruptCheckpointsAreNeverUsed(t *testing.T) {
	const small, large = "synthetic:m=6,n=600,k=3,seed=2", "synthetic:m=10,n=80000,k=8,seed=2" // C_i: 3.6 kB, 1.3 MB
	for _, tc := range []struct {
		name     string
		input    string
		rank     int64
		corrupt  func(kind string, shard, it int64) bool
		fallback bool
	}{
		{"own copy", small, 3, func(kind string, shard, it int64) bool { return kind == "own" && shard == 1 && it >= 20 }, false},
		{"every copy", small, 3, func(kind string, shard, it int64) bool { return shard == 1 && it >= 20 }, true},
		{"own copy of chunks", large, 8, func(kind string, shard, it int64) bool { return kind == "own" && shard == 1 && it >= 20 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Checkpoints commit in the background while the job runs on: the panic comes 35
			// iterations (over 100 ms) after the first corrupt checkpoint, so that one at 20 or
			// later is committed when it does even on a loaded machine (at 25 iterations and 2
			// ms each, CI once saw only 15 committed).
			faults := &Faults{CorruptCheckpoints: tc.corrupt, IterationDelay: 3 * time.Millisecond,
				Panics: func(shard, it int64) bool { return shard == 2 && it == 55 }}
			lc, cl := testCluster(t, 3, faults)
			sp := spec(tc.input, "did", tc.rank, 4, lc.Addresses(), 60)
			sp.CheckpointEvery = 5
			want := driverRun(t, sp)
			got, warnings, err := runCollecting(t, cl, sp)
			if err != nil {
				t.Fatal(err)
			}
			checkSame(t, tc.name, got, want)
			unusable := 0
			for _, w := range warnings {
				t.Log("warning: ", w)
				if strings.Contains(w, "unusable") {
					unusable++
				}
			}
			if len(got.Recoveries) != 1 {
				t.Fatalf("%d recoveries, want 1", len(got.Recoveries))
			}
			r := got.Recoveries[0]
			t.Logf("resumed from iteration %d", r.FromIteration)
			if tc.fallback && (unusable == 0 || r.FromIteration >= 20) {
				t.Fatalf("every copy corrupt: resumed from %d after %d unusable checkpoints, want a fallback below 20", r.FromIteration, unusable)
			}
			if !tc.fallback && (unusable != 0 || r.FromIteration < 20) {
				t.Fatalf("own copy corrupt: resumed from %d after %d unusable checkpoints, want the buddy's copy of a checkpoint >= 20", r.FromIteration, unusable)
			}
			waitIdle(t, lc)
		})
	}
}

// TestFullDiskFailsCheckpointsVisibly: with no room for checkpoints, every checkpoint fails,
// the client is warned, nothing is committed, and a failure rolls the job back to its start,
// still bitwise the driver's.
func TestFullDiskFailsCheckpointsVisibly(t *testing.T) {
	// Each iteration waits 3 ms, so that the refused checkpoints' warnings (written in the
	// background) arrive before this 20-iteration job ends, however loaded the machine.
	c, err := StartLocalCluster(3, NodeConfig{Threads: 2, CheckpointQuota: 100,
		Faults: &Faults{IterationDelay: 3 * time.Millisecond, Panics: func(shard, it int64) bool { return shard == 0 && it == 12 }}})
	if err != nil {
		t.Fatal(err)
	}
	cl := NewClient(c.Nodes[0].System(), Timeouts{})
	defer func() {
		cl.Close()
		c.Close()
	}()
	sp := spec("synthetic:m=6,n=600,k=3,seed=2", "did", 3, 4, c.Addresses(), 20)
	sp.CheckpointEvery = 5
	want := driverRun(t, sp)
	got, warnings, err := runCollecting(t, cl, sp)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "full disk", got, want)
	full := 0
	for _, w := range warnings {
		if strings.Contains(w, "checkpoint not committed") && strings.Contains(w, "no space left on device") {
			full++
		}
	}
	if full == 0 || got.Checkpoints != 0 {
		t.Fatalf("%d full-disk warnings and %d checkpoints committed; want warnings and none (warnings: %q)", full, got.Checkpoints, warnings)
	}
	if len(got.Recoveries) != 1 || got.Recoveries[0].FromIteration != 0 {
		t.Fatalf("recoveries %v, want one from the start", got.Recoveries)
	}
	waitIdle(t, c)
}

// TestAutomaticCheckpoints: with checkpoint_every < 0 the coordinator times the checkpoints
// (the first after ckptFirst seconds, then within the cost budget); a failure later in the job
// resumes from one of them, bitwise.
func TestAutomaticCheckpoints(t *testing.T) {
	faults := &Faults{IterationDelay: 5 * time.Millisecond, Panics: func(shard, it int64) bool { return shard == 1 && it == 560 }}
	lc, cl := testCluster(t, 3, faults)
	sp := spec("synthetic:m=6,n=600,k=3,seed=2", "did", 3, 4, lc.Addresses(), 600)
	sp.CheckpointEvery = -1
	want := driverRun(t, sp)
	got, err := runJob(t, cl, sp)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "automatic checkpoints", got, want)
	if got.Checkpoints == 0 || len(got.Recoveries) != 1 || got.Recoveries[0].FromIteration == 0 {
		t.Fatalf("%d checkpoints, recoveries %v: want a rollback to an automatic checkpoint", got.Checkpoints, got.Recoveries)
	}
	t.Logf("%d checkpoints; resumed from iteration %d", got.Checkpoints, got.Recoveries[0].FromIteration)
	waitIdle(t, lc)
}
