package rankbank

import (
	"context"
	"fmt"
	"os"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/sweep"
)

// Options are the sweep's settings the bank runs with: the CLI's defaults for `didnmf sweep`
// (Defaults), or others to compare.
type Options struct {
	Seeds, Folds int
	TestFraction float64
	MaxIter      int
	Tol          float64
	StallTol     float64
	// Parallel is how many runs go at once (each on one thread).
	Parallel int
	// Transform is what the runs fit (didnmf.SweepOptions.Transform; "" is none).
	Transform didnmf.SweepTransform
}

// Outcome is one case swept: its matrix's numbers, the sweep's summaries and suggestion,
// and the capped runs.
type Outcome struct {
	Case       Case
	Matrix     *Matrix
	Summary    []sweep.RankSummary
	Suggestion sweep.Suggestion
	Runs       int
	Capped     int
	// Iterations is the largest iteration count of a run.
	Iterations int
	Seconds    float64
}

// Sweep generates the case into a temporary directory under dir, sweeps it through the real
// didnmf.Runner.Sweep in this process (the driver target), and returns the outcome.
func Sweep(ctx context.Context, c Case, dir string, o Options) (*Outcome, error) {
	x, err := c.Generate()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(dir, "case")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	path, err := c.Write(tmp, x)
	if err != nil {
		return nil, err
	}
	spec := didnmf.NewSpec([]string{path}, didnmf.DID, c.Ranks[len(c.Ranks)-1], 1)
	spec.TestFraction = o.TestFraction
	spec.Stop.MaxIter, spec.Stop.Tol, spec.Stop.StallTol = o.MaxIter, o.Tol, o.StallTol
	t := didnmf.Local(1)
	j, err := didnmf.Open(spec, t)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name(), err)
	}
	defer j.Close()
	r, err := didnmf.NewRunner(t)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	res, err := r.Sweep(ctx, j, didnmf.SweepOptions{Ranks: c.Ranks, Seeds: o.Seeds, Folds: o.Folds, FirstSeed: 1, Parallel: max(o.Parallel, 1), Transform: o.Transform})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name(), err)
	}
	if f := res.Failed(); len(f) > 0 {
		return nil, fmt.Errorf("%s: K=%d seed %d: %w", c.Name(), f[0].K, f[0].Seed, f[0].Err)
	}
	out := &Outcome{Case: c, Matrix: x, Summary: res.Summary, Suggestion: res.Suggestion, Runs: len(res.Runs), Seconds: res.Seconds}
	for _, run := range res.Runs {
		if run.Capped() {
			out.Capped++
		}
		out.Iterations = max(out.Iterations, run.Result.Iterations)
	}
	return out, nil
}
