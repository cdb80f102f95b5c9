package jobsim

import (
	"slices"
	"testing"
	"time"

	"github.com/didnmf/didnmf/kernels"
)

// TestPlanAtScale runs the control past this machine: 1,000 simulated nodes and 10,000 shards
// (DID, rank 2, one sample each; fan-in 8, a reduce tree of 4 levels), fault-free and then
// with a rack of 50 nodes dying mid-job. It reports the control's decision times (placement,
// the reaction to the lost nodes, the re-placement of their shards) and the messages per
// iteration, and checks both runs give the driver's bits.
func TestPlanAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 simulated shards")
	}
	const nodes, shards, iters = 1000, 10000, 12
	p := NewProblem(kernels.DID, 8, shards, 2, shards, iters, 2)
	t.Cleanup(p.Close)
	ref, err := p.Reference()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		faults Faults
	}{
		{"fault-free", Faults{}},
		{"a rack of 50 nodes dies", Faults{Rack: 50, At: 500 * time.Millisecond}},
	} {
		start := time.Now()
		out := Run(p, Options{Seed: 1, Nodes: nodes, FanIn: 8, IterCost: 200 * time.Millisecond, Faults: tc.faults})
		if len(out.Violations) > 0 || out.Result == nil {
			t.Fatalf("%s: %v (error %v)", tc.name, out.Violations, out.Err)
		}
		if !slices.Equal(out.B, ref.B) || !slices.Equal(out.C, ref.C) {
			t.Fatalf("%s: the factors differ from the driver's", tc.name)
		}
		r := out.Result
		t.Logf("%s: %d nodes, %d shards, %d iterations in %v of wall time (%.1f s simulated); %d recoveries; %.0f messages per iteration (%.0f of them the control's)",
			tc.name, nodes, shards, r.Iterations, time.Since(start).Round(time.Millisecond), out.End.Seconds(), len(r.Recoveries),
			float64(out.Stats.Messages)/float64(r.Iterations), float64(out.Stats.ControlMessages)/float64(r.Iterations))
		for _, kind := range []string{"placement", "node lost", "re-placement", "membership", "other"} {
			if d, ok := out.Stats.Decisions[kind]; ok {
				t.Logf("  %-13s %6d steps, %9v in all, longest %9v, %7d messages sent", kind, d.Steps, d.Total.Round(time.Microsecond), d.Longest.Round(time.Microsecond), d.Messages)
			}
		}
		if tc.faults.Rack > 0 && len(r.Recoveries) == 0 {
			t.Fatal("no recovery after the rack died")
		}
	}
}
