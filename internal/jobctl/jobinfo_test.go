package jobctl

import (
	"fmt"
	"testing"

	"github.com/didnmf/didnmf/messages"
)

// TestThinHistory: a history is thinned to at most the limit, evenly, its first and last
// points kept, into a new slice; a short one is copied whole.
func TestThinHistory(t *testing.T) {
	points := func(n int) []*messages.HistoryPoint {
		h := make([]*messages.HistoryPoint, n)
		for i := range h {
			h[i] = &messages.HistoryPoint{Iteration: int64(i)}
		}
		return h
	}
	for _, c := range []struct {
		n, limit int
		want     string
	}{
		{0, 4, "[]"},
		{3, 4, "[0 1 2]"},
		{4, 4, "[0 1 2 3]"},
		{10, 4, "[0 3 6 9]"},
		{11, 3, "[0 5 10]"},
		{1000, 2, "[0 999]"},
		{5, 1, "[4]"},
	} {
		h := points(c.n)
		got := ThinHistory(h, c.limit)
		var its []int64
		for _, p := range got {
			its = append(its, p.Iteration)
		}
		if s := fmt.Sprint(its); s != c.want && !(c.want == "[]" && len(its) == 0) {
			t.Errorf("ThinHistory(%d points, %d) = %s, want %s", c.n, c.limit, s, c.want)
		}
		if len(got) > 0 && len(h) > 0 && &got[0] == &h[0] {
			t.Errorf("ThinHistory(%d points, %d) shares the history's array", c.n, c.limit)
		}
	}
	if got := ThinHistory(points(100000), MaxInfoHistory); len(got) != MaxInfoHistory || got[len(got)-1].Iteration != 99999 {
		t.Errorf("a long history thinned to %d points ending at %d, want %d ending at 99999", len(got), got[len(got)-1].Iteration, MaxInfoHistory)
	}
}

// TestStopRuleWords: a stop rule reads as words.
func TestStopRuleWords(t *testing.T) {
	for _, c := range []struct {
		rule *messages.StopRule
		want string
	}{
		{nil, "no stop rule"},
		{&messages.StopRule{}, "no stop rule"},
		// A default job: the paper's tol, the stall rule over its default window.
		{&messages.StopRule{MaxIter: 100, Tol: 1e-6, StallTol: 1e-4},
			"until the error falls to 0.0001% of the initial error or by less than 0.01% over 10 iterations; at most 100 iterations"},
		{&messages.StopRule{MaxIter: 200, Tol: 1e-4}, "until the error falls to 0.01% of the initial error; at most 200 iterations"},
		{&messages.StopRule{MaxIter: 50, TimeLimitSeconds: 90}, "50 iterations (no convergence test); time limit 1m30s"},
		{&messages.StopRule{StallTol: 1e-6, StallWindow: 20}, "until the error falls by less than 0.0001% over 20 iterations"},
		{&messages.StopRule{MaxIter: 1000, StallTol: 1e-3, TimeLimitSeconds: 3600},
			"until the error falls by less than 0.1% over 10 iterations; at most 1000 iterations; time limit 1h0m0s"},
	} {
		if got := StopRuleWords(c.rule); got != c.want {
			t.Errorf("StopRuleWords(%v) = %q, want %q", c.rule, got, c.want)
		}
	}
}
