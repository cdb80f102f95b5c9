package didnmf_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/sweep"
	"github.com/didnmf/didnmf/usererr"
)

// sweepJob opens a synthetic job of planted rank 3 at rank k with 10% of its entries held out.
func sweepJob(t testing.TB, k int) (*didnmf.Runner, *didnmf.Job) {
	spec := jobspec.New([]string{"synthetic:m=12,n=600,k=3,seed=5"}, kernels.DID, k, 2)
	spec.TestFraction = 0.1
	spec.Stop.MaxIter = 200
	r, err := didnmf.NewRunner(didnmf.Local(1))
	if err != nil {
		t.Fatal(err)
	}
	j, err := didnmf.Open(spec, didnmf.Local(1))
	if err != nil {
		t.Fatal(err)
	}
	return r, j
}

func TestSweepRunsEveryRankAndSeed(t *testing.T) {
	r, j := sweepJob(t, 5)
	defer r.Close()
	defer j.Close()
	var events []didnmf.SweepEvent
	res, err := r.Sweep(context.Background(), j, didnmf.SweepOptions{Ranks: []int{2, 3, 4, 5}, Seeds: 2, FirstSeed: 7, Parallel: 2,
		OnRun: func(e didnmf.SweepEvent) { events = append(events, e) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 8 || len(res.Failed()) != 0 || len(res.Summary) != 4 {
		t.Fatalf("%d runs, %d failed, %d ranks summarized", len(res.Runs), len(res.Failed()), len(res.Summary))
	}
	for i, run := range res.Runs {
		if want := []int{2, 2, 3, 3, 4, 4, 5, 5}[i]; run.K != want || run.Seed != 7+i%2 || run.Result.K != want {
			t.Errorf("run %d: K=%d seed %d (result K=%d)", i, run.K, run.Seed, run.Result.K)
		}
	}
	if len(events) != 8 || events[7].Done != 8 || events[7].Total != 8 {
		t.Errorf("OnRun was told of %d runs (last %+v)", len(events), events[len(events)-1])
	}
	if res.Suggested < 2 || res.Suggested > 5 || res.Rule == "" {
		t.Errorf("suggested K=%d (%q)", res.Suggested, res.Rule)
	}
	// Saved: sweep.json says what the result holds, beside the runs' table, the consensus
	// bases and the picture.
	dir := t.TempDir()
	if err := res.Save(dir); err != nil {
		t.Fatal(err)
	}
	var rep didnmf.SweepReport
	if data, err := os.ReadFile(filepath.Join(dir, "sweep.json")); err != nil || json.Unmarshal(data, &rep) != nil {
		t.Fatalf("sweep.json: %v", err)
	}
	if len(rep.Runs) != 8 || len(rep.PerRank) != 4 || rep.Suggested != res.Suggested || rep.Seeds != 2 || rep.FirstSeed != 7 ||
		!slices.Equal(rep.Ranks, []int{2, 3, 4, 5}) || rep.Where != didnmf.Local(1).String() {
		t.Errorf("sweep.json: %+v", rep)
	}
	for _, r := range rep.PerRank {
		if _, err := os.Stat(filepath.Join(dir, r.ConsensusBasis)); err != nil || r.ConsensusBasis == "" {
			t.Errorf("K=%d: consensus basis %q: %v", r.K, r.ConsensusBasis, err)
		}
	}
	for _, name := range []string{"sweep.tsv", "sweep.png", "sweep.svg"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	// A run is the job at its rank and seed: the same bits as that job run on its own.
	one, err := j.Derive(func(s *jobspec.Spec) { s.Rank, s.Seed = 4, 8 })
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	alone, err := r.Run(context.Background(), one, didnmf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(alone.B) != fmt.Sprint(res.Runs[5].Result.B) {
		t.Error("the sweep's run K=4 seed 8 differs from the job run alone")
	}
}

// TestSweepFolds: with folds, the run of seed index s holds out fold s mod Folds (test seed
// TestSeed + fold), is the job with that test seed run alone, and the test error's spread is
// over the folds.
func TestSweepFolds(t *testing.T) {
	r, j := sweepJob(t, 4)
	defer r.Close()
	defer j.Close()
	res, err := r.Sweep(context.Background(), j, didnmf.SweepOptions{Ranks: []int{2, 3, 4}, Seeds: 4, Folds: 2, FirstSeed: 1, Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Folds != 2 || len(res.Runs) != 12 {
		t.Fatalf("%d folds, %d runs", res.Folds, len(res.Runs))
	}
	for i, run := range res.Runs {
		if run.Fold != i%2 || run.Seed != 1+i%4 || run.Result.Job.Spec.TestSeed != j.Spec.TestSeed+uint64(i%2) {
			t.Errorf("run %d: K=%d seed %d fold %d (test seed %d)", i, run.K, run.Seed, run.Fold, run.Result.Job.Spec.TestSeed)
		}
	}
	for _, s := range res.Summary {
		if s.Test.N != 2 || !slices.Equal(s.Folds, []int{0, 1}) || len(s.FoldTest) != 2 || s.Runs != 4 {
			t.Errorf("K=%d: test over %d folds %v, %d runs", s.K, s.Test.N, s.Folds, s.Runs)
		}
	}
	if res.Suggestion.Name != sweep.RuleCV || res.Suggested != res.Suggestion.K || res.Rule != res.Suggestion.Rule {
		t.Errorf("suggestion %+v, suggested %d (%q)", res.Suggestion, res.Suggested, res.Rule)
	}
	// Run K=3, seed 4 holds out fold 1: the job with test seed + 1, run alone.
	one, err := j.Derive(func(s *jobspec.Spec) { s.Rank, s.Seed, s.TestSeed = 3, 4, s.TestSeed+1 })
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	alone, err := r.Run(context.Background(), one, didnmf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Runs[7]; got.K != 3 || got.Seed != 4 || fmt.Sprint(alone.B) != fmt.Sprint(got.Result.B) || alone.TestRelErr2() != got.Result.TestRelErr2() {
		t.Error("the sweep's run K=3 seed 4 fold 1 differs from the job run alone")
	}
	dir := t.TempDir()
	if err := res.Save(dir); err != nil {
		t.Fatal(err)
	}
	var rep didnmf.SweepReport
	if data, err := os.ReadFile(filepath.Join(dir, "sweep.json")); err != nil || json.Unmarshal(data, &rep) != nil {
		t.Fatalf("sweep.json: %v", err)
	}
	if rep.Folds != 2 || rep.RuleName != sweep.RuleCV || rep.Runs[7].Fold != 1 || rep.Runs[7].TestSeed != j.Spec.TestSeed+1 || rep.PerRank[0].Folds != 2 {
		t.Errorf("sweep.json: folds %d, rule %q, run 7 %+v", rep.Folds, rep.RuleName, rep.Runs[7])
	}
	if svg, err := os.ReadFile(filepath.Join(dir, "sweep.svg")); err != nil || !strings.Contains(string(svg), "test error over 2 folds") {
		t.Errorf("sweep.svg does not say the folds: %v", err)
	}
	tsv, err := os.ReadFile(filepath.Join(dir, "sweep.tsv"))
	if err != nil || !strings.HasPrefix(string(tsv), "k\tseed\tfold\t") || !strings.Contains(string(tsv), "\n3\t4\t1\t") {
		t.Errorf("sweep.tsv: %v\n%s", err, tsv)
	}
}

func TestSweepCanceled(t *testing.T) {
	r, j := sweepJob(t, 3)
	defer r.Close()
	defer j.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Sweep(ctx, j, didnmf.SweepOptions{Ranks: []int{2, 3}, Seeds: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a canceled sweep: %v", err)
	}
}

func TestSweepOptionsCheck(t *testing.T) {
	spec := jobspec.New([]string{"synthetic:m=12,n=600,k=3,seed=5"}, kernels.DID, 3, 2)
	nndsvd := *spec
	nndsvd.Init = kernels.InitNNDSVD
	withTest := *spec
	withTest.TestFraction = 0.1
	for _, tc := range []struct {
		name  string
		o     didnmf.SweepOptions
		spec  *jobspec.Spec
		field string // "" when valid
		words string
	}{
		{"valid", didnmf.SweepOptions{Ranks: []int{2, 3}, Seeds: 3}, spec, "", ""},
		{"no ranks", didnmf.SweepOptions{Seeds: 1}, spec, "ranks", "no rank"},
		{"unsorted", didnmf.SweepOptions{Ranks: []int{3, 2}, Seeds: 1}, spec, "ranks", "increasing"},
		{"rank 0", didnmf.SweepOptions{Ranks: []int{0, 2}, Seeds: 1}, spec, "ranks", ">= 1"},
		{"no seeds", didnmf.SweepOptions{Ranks: []int{2}}, spec, "seeds", "between 1 and 1000"},
		{"too many", didnmf.SweepOptions{Ranks: []int{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, Seeds: 1000}, spec, "ranks", "11000 runs"},
		{"negative parallel", didnmf.SweepOptions{Ranks: []int{2}, Seeds: 1, Parallel: -1}, spec, "parallel", ">= 0"},
		{"seedless init", didnmf.SweepOptions{Ranks: []int{2}, Seeds: 2}, &nndsvd, "seeds", "does not depend on the seed"},
		{"seedless init, one seed", didnmf.SweepOptions{Ranks: []int{2}, Seeds: 1}, &nndsvd, "", ""},
		{"folds, no test set", didnmf.SweepOptions{Ranks: []int{2}, Seeds: 2, Folds: 2}, spec, "folds", "needs held-out entries"},
		{"folds above seeds", didnmf.SweepOptions{Ranks: []int{2}, Seeds: 2, Folds: 3}, &withTest, "folds", "between 1 and seeds (2), got 3"},
		{"negative folds", didnmf.SweepOptions{Ranks: []int{2}, Seeds: 2, Folds: -1}, &withTest, "folds", "got -1"},
		{"folds", didnmf.SweepOptions{Ranks: []int{2}, Seeds: 4, Folds: 2}, &withTest, "", ""},
		{"transform", didnmf.SweepOptions{Ranks: []int{2}, Seeds: 1, Transform: didnmf.TransformSqrt}, spec, "", ""},
		{"unknown transform", didnmf.SweepOptions{Ranks: []int{2}, Seeds: 1, Transform: "log"}, spec, "transform", `"log": want none or sqrt`},
	} {
		err := tc.o.Check(tc.spec)
		var ue *usererr.Error
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.field != "" && (!errors.As(err, &ue) || ue.Field != tc.field || !strings.Contains(err.Error(), tc.words)):
			t.Errorf("%s: %v, want the field %s and %q", tc.name, err, tc.field, tc.words)
		}
	}
}
