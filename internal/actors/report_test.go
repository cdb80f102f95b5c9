package actors

import (
	"context"
	"testing"
	"time"
)

// TestEveryIterationReportedInOrder: shard 0 sends its iteration reports in bursts on small
// iterations, yet the client sees every iteration once, in order, each with the objective of
// the driver's iteration, and the result has every iteration's time.
func TestEveryIterationReportedInOrder(t *testing.T) {
	lc, cl := testCluster(t, 3, nil)
	sp := spec("synthetic:m=5,n=64,k=3,seed=1", "did", 3, 4, lc.Addresses(), 300)
	want := driverRun(t, sp)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job, err := cl.Submit(ctx, "", sp)
	if err != nil {
		t.Fatal(err)
	}
	next := 1
	for p := range job.Progress() {
		if p.Iteration != next {
			t.Fatalf("progress for iteration %d, want %d", p.Iteration, next)
		}
		if h := want.History[next]; p.Ratio != h.Ratio {
			t.Fatalf("iteration %d: ratio %v, driver %v", next, p.Ratio, h.Ratio)
		}
		next++
	}
	got, err := job.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "reports", got, want)
	if next != want.Iterations+1 || len(got.IterSeconds) != want.Iterations || len(got.History) != len(want.History) {
		t.Fatalf("%d progress values, %d iteration times, %d history points for %d iterations", next-1, len(got.IterSeconds), len(got.History), want.Iterations)
	}
	for i, s := range got.IterSeconds {
		if !(s >= 0) {
			t.Fatalf("iteration %d took %v s", i+1, s)
		}
	}
}
