package report

import (
	"strings"
	"testing"
	"time"

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
		{kernels.StopConverged, falling, []string{"converged: the error fell to 0.0001% of the initial error (--tol 1e-06)"}},
		{kernels.StopStalled, flat, []string{"converged: the error fell by less than 0.01% over the last 10 iterations (--stall-tol 0.0001)"}},
		{kernels.StopMaxIter, falling, []string{"stopped at --max-iter 20 while the error was still falling (by 65.1% over the last 10 iterations)", "raise it"}},
		{kernels.StopMaxIter, flat, []string{"stopped at --max-iter 20; the error had stopped falling"}},
		// Shorter than the window: the fall over what there is.
		{kernels.StopMaxIter, falling[:5], []string{"stopped at --max-iter 20 while the error was still falling (by 34.4% over the last 4 iterations)"}},
		{kernels.StopMaxIter, falling[:1], []string{"stopped at --max-iter 20"}},
		{kernels.StopTimeLimit, falling, []string{"stopped at --time-limit 10m0s while the error was still falling"}},
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
