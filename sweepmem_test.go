package didnmf_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/didnmf/didnmf"
)

// TestSweepKeepsNoCoefficients: a sweep's runs (and the results OnRun is told of) hold their
// bases but no coefficients, the bases are the bits of the same jobs run alone (which do
// return their coefficients), and what the sweep saves (sweep.json, sweep.tsv) is what it
// would be from the full results: nothing saved needs C.
func TestSweepKeepsNoCoefficients(t *testing.T) {
	r, j := sweepJob(t, 4)
	defer r.Close()
	defer j.Close()
	var told []*didnmf.Result
	res, err := r.Sweep(context.Background(), j, didnmf.SweepOptions{Ranks: []int{2, 3, 4}, Seeds: 2, FirstSeed: 3, Parallel: 2,
		OnRun: func(e didnmf.SweepEvent) { told = append(told, e.Result) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 6 || len(res.Failed()) != 0 || len(told) != 6 {
		t.Fatalf("%d runs, %d failed, told of %d", len(res.Runs), len(res.Failed()), len(told))
	}
	for i, got := range told {
		if got == nil {
			t.Errorf("OnRun's event %d has no result", i)
		} else if got.C != nil {
			t.Errorf("OnRun's event %d (K=%d): a result with %d coefficients", i, got.K, len(got.C))
		}
	}
	full := *res
	full.Runs = slices.Clone(res.Runs)
	for i, run := range res.Runs {
		if run.Result.C != nil {
			t.Errorf("K=%d seed %d: the sweep kept the run's %d coefficients", run.K, run.Seed, len(run.Result.C))
		}
		if len(run.Result.B) != run.Result.M*run.K || run.Result.Iterations == 0 || run.Result.StopReason == "" || len(run.Result.History) == 0 {
			t.Errorf("K=%d seed %d: basis %d values (want %d x %d), %d iterations, stop %q, %d history points",
				run.K, run.Seed, len(run.Result.B), run.Result.M, run.K, run.Result.Iterations, run.Result.StopReason, len(run.Result.History))
		}
		alone, err := j.Derive(func(s *didnmf.Spec) { s.Rank, s.Seed = run.K, uint64(run.Seed) })
		if err != nil {
			t.Fatal(err)
		}
		one, err := r.Run(context.Background(), alone, didnmf.Options{})
		alone.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(one.C) != run.K*one.N || one.N == 0 {
			t.Fatalf("K=%d seed %d alone: %d coefficients, want %d x %d", run.K, run.Seed, len(one.C), run.K, one.N)
		}
		if !slices.Equal(one.B, run.Result.B) || one.Iterations != run.Result.Iterations || one.Residual != run.Result.Residual ||
			one.TestSSE != run.Result.TestSSE {
			t.Errorf("K=%d seed %d: the sweep's run differs from the job run alone", run.K, run.Seed)
		}
		// The full result, with the sweep's timings (the one thing two runs do not share).
		one.Seconds, one.IterSeconds = run.Result.Seconds, run.Result.IterSeconds
		full.Runs[i].Result = one
	}
	kept, whole := t.TempDir(), t.TempDir()
	if err := res.Save(kept); err != nil {
		t.Fatal(err)
	}
	if err := full.Save(whole); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sweep.json", "sweep.tsv"} {
		a, errA := os.ReadFile(filepath.Join(kept, name))
		b, errB := os.ReadFile(filepath.Join(whole, name))
		if errA != nil || errB != nil {
			t.Fatalf("%s: %v, %v", name, errA, errB)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s without the coefficients differs from %s with them:\n%s\n---\n%s", name, name, a, b)
		}
	}
}
