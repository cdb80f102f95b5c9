package report

import (
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
)

// TestStopSentence: the last line says which rule ended a run in words, as success when the
// error stopped moving, and for the limits whether it was still falling.
func TestStopSentence(t *testing.T) {
	// falling: ratios 1, 0.9, ..., falling 10% an iteration; flat: falling 1e-7 an iteration.
	falling, flat := []kernels.HistoryPoint{}, []kernels.HistoryPoint{}
	r := 1.0
	for it := 0; it <= 20; it++ {
		falling = append(falling, kernels.HistoryPoint{Iteration: it, Ratio: r})
		flat = append(flat, kernels.HistoryPoint{Iteration: it, Ratio: 0.5 * (1 - 1e-7*float64(it))})
		r *= 0.9
	}
	rule := kernels.StopRule{Tol: 1e-6, MaxIter: 20, StallTol: 1e-4, TimeLimit: 10 * time.Minute}
	tests := []struct {
		why  kernels.StopReason
		hist []kernels.HistoryPoint
		want []string
	}{
		{kernels.StopConverged, falling, []string{"converged: the error fell to 0.0001% of the initial error (tol 1e-06)"}},
		{kernels.StopStalled, flat, []string{"converged: the error fell by less than 0.01% over the last 10 iterations (stall tol 0.0001)"}},
		{kernels.StopMaxIter, falling, []string{"stopped at the iteration limit (20) while the error was still falling (by 65.1% over the last 10 iterations)", "raise it"}},
		{kernels.StopMaxIter, flat, []string{"stopped at the iteration limit (20); the error had stopped falling"}},
		// Shorter than the window: the fall over what there is.
		{kernels.StopMaxIter, falling[:5], []string{"stopped at the iteration limit (20) while the error was still falling (by 34.4% over the last 4 iterations)"}},
		{kernels.StopMaxIter, falling[:1], []string{"stopped at the iteration limit (20)"}},
		{kernels.StopTimeLimit, falling, []string{"stopped at the time limit (10m0s) while the error was still falling"}},
		{kernels.StopCanceled, falling, []string{"interrupted", "partly updated"}},
	}
	for _, tt := range tests {
		got := StopSentence(tt.why, rule, tt.hist)
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s over %d points: %q does not say %q", tt.why, len(tt.hist), got, w)
			}
		}
	}
}

// TestBuild: what Build takes from the spec and what from the run, case by case: the
// penalties and the objective only with a penalty, the mask counts only with a mask, the
// held-out error only with a test fraction, a one-pass transform "solved", and the fields of
// a run on actors (a cluster's ingest) only there.
func TestBuild(t *testing.T) {
	run := func() *Run {
		r := &Run{Threads: 3, Storage: "float32", XBytes: 480}
		r.M, r.N, r.K, r.Shards, r.Iterations = 4, 30, 2, 2, 5
		r.Initial, r.Objective, r.Residual, r.SqNormX = 10, 2, 1.5, 20
		r.StopReason = kernels.StopMaxIter
		r.Observed, r.Missing, r.TestCount = 100, 20, 12
		r.History = []kernels.HistoryPoint{{Iteration: 0, Seconds: 0.25, Ratio: 1}, {Iteration: 5, Seconds: 1, Ratio: 0.2}}
		r.Seconds = 1
		return r
	}
	spec := func() *jobspec.Spec {
		s := jobspec.New([]string{"x.npy"}, kernels.DID, 2, 2)
		s.Stop = kernels.StopRule{MaxIter: 5}
		return s
	}
	tests := []struct {
		name  string
		spec  func(*jobspec.Spec)
		run   func(*Run)
		check func(*Report) string
	}{
		{"plain", nil, nil, func(r *Report) string {
			if r.AlphaCoef != 0 || r.Objective != 0 || r.Observed != 0 || r.TestCount != 0 || r.Ingest != "" || r.CheckpointEvery != "" {
				return "penalty, mask or actor fields set"
			}
			if r.Threads != 3 || r.Storage != "float32" || r.XBytes != 480 || r.StopReason != "max-iter" || r.InitSeconds != 0.25 || r.IterateSeconds != 0.75 {
				return "run fields not copied"
			}
			return ""
		}},
		{"penalized", func(s *jobspec.Spec) { s.AlphaCoef, s.L1Ratio = 0.01, 0.5 }, nil, func(r *Report) string {
			if r.AlphaCoef != 0.01 || r.L1Ratio != 0.5 || r.Objective != 2 {
				return "penalty or objective missing"
			}
			return ""
		}},
		{"masked", func(s *jobspec.Spec) { s.Missing, s.TestFraction, s.TestSeed = true, 0.1, 7 }, nil, func(r *Report) string {
			if r.Observed != 100 || r.Missing != 20 || r.TestCount != 12 || r.TestFraction != 0.1 || r.TestSeed != 7 {
				return "mask counts missing"
			}
			return ""
		}},
		{"accel off", nil, nil, func(r *Report) string {
			if r.Accel != "off" {
				return "a plain did run does not say accel off"
			}
			return ""
		}},
		{"accel auto", func(s *jobspec.Spec) { s.Accel = kernels.AccelAuto }, nil, func(r *Report) string {
			if r.Accel != "auto" {
				return "accel auto not recorded"
			}
			return ""
		}},
		{"accel 2,4,0.2 on hals", func(s *jobspec.Spec) { s.Algo, s.Accel = kernels.HALS, kernels.Accel{CSweeps: 2, BSweeps: 4, Eps: 0.2} }, nil, func(r *Report) string {
			if r.Accel != "2,4,0.2" {
				return "accel 2,4,0.2 not recorded"
			}
			return ""
		}},
		{"no accel on mu", func(s *jobspec.Spec) { s.Algo = kernels.MU }, nil, func(r *Report) string {
			if r.Accel != "" {
				return "an algorithm without inner loops records an accel"
			}
			return ""
		}},
		{"transform", func(s *jobspec.Spec) { s.Algo = kernels.Transform }, nil, func(r *Report) string {
			if r.StopReason != "solved" || !r.Converged {
				return "a one-pass transform is not solved"
			}
			return ""
		}},
		{"cluster", func(s *jobspec.Spec) { s.OutShared, s.CheckpointEvery = "/shared", 4 },
			func(r *Run) { r.OnActors, r.Cluster, r.MessagesPerIteration = true, "10.0.0.1:7946", 8 }, func(r *Report) string {
				if r.Ingest != "shared" || r.Cluster != "10.0.0.1:7946" || r.CheckpointEvery != "4" || r.CoefShared != "/shared/coef.npy" ||
					r.MessagesPerIt == nil || *r.MessagesPerIt != 8 {
					return "cluster fields missing"
				}
				return ""
			}},
		{"in-process nodes", nil, func(r *Run) { r.OnActors, r.Nodes = true, 3 }, func(r *Report) string {
			if r.Nodes != 3 || r.Ingest != "" || r.CheckpointEvery != "auto" {
				return "in-process fields wrong"
			}
			return ""
		}},
	}
	for _, tt := range tests {
		s, r := spec(), run()
		if tt.spec != nil {
			tt.spec(s)
		}
		if tt.run != nil {
			tt.run(r)
		}
		rep := Build(s, r)
		if msg := tt.check(rep); msg != "" {
			t.Errorf("%s: %s: %+v", tt.name, msg, rep)
		}
	}
}
