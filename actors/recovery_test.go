package actors

import (
	"fmt"
	"math/rand/v2"
	"testing"
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
