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
		{&messages.StopRule{MaxIter: 200, Tol: 1e-4}, "at most 200 iterations, tol 0.0001"},
		{&messages.StopRule{MaxIter: 50, TimeLimitSeconds: 90}, "at most 50 iterations, time limit 1m30s"},
		{&messages.StopRule{StallTol: 1e-6, StallWindow: 10}, "stall tol 1e-06 over 10 iterations"},
	} {
		if got := StopRuleWords(c.rule); got != c.want {
			t.Errorf("StopRuleWords(%v) = %q, want %q", c.rule, got, c.want)
		}
	}
}
