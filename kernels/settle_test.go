package kernels

import (
	"fmt"
	"testing"
)

// stopAt feeds objs (iterations 1, 2, ...) to a Stopper of rule and returns the iteration it
// stops after and why (0 and "" if it does not).
func stopAt(rule StopRule, objs []float64) (int, StopReason) {
	s := NewStopper(rule)
	for i, o := range objs {
		if stop, why := s.Observe(i+1, o, 100, 0); stop {
			return i + 1, why
		}
	}
	return 0, ""
}

// TestStopperSettle: an extrapolating run (Settle) does not end on an iterate above its
// lowest objective at the iteration cap or the stall rule: it goes on until an iteration ends
// at or below it, for at most Settle iterations; without Settle, or below the lowest, the
// rule is the plain one.
func TestStopperSettle(t *testing.T) {
	falling := []float64{50, 40, 30, 20}
	for _, tc := range []struct {
		name   string
		rule   StopRule
		objs   []float64
		at     int
		reason StopReason
	}{
		{"cap on a falling iterate: stops at the cap", StopRule{MaxIter: 4, Settle: 5}, append(falling, 10), 4, StopMaxIter},
		{"cap on an overshoot, no Settle: stops at the cap", StopRule{MaxIter: 4}, []float64{50, 40, 30, 45, 25}, 4, StopMaxIter},
		{"cap on an overshoot: one more iteration, back below", StopRule{MaxIter: 4, Settle: 5}, []float64{50, 40, 30, 45, 25, 24}, 5, StopMaxIter},
		{"back to the lowest exactly is enough", StopRule{MaxIter: 4, Settle: 5}, []float64{50, 40, 30, 45, 30, 24}, 5, StopMaxIter},
		{"overshoots in a row: at most Settle more", StopRule{MaxIter: 4, Settle: 2}, []float64{50, 40, 30, 45, 44, 43, 20}, 6, StopMaxIter},
		{"an overshoot before the cap does not matter", StopRule{MaxIter: 5, Settle: 5}, []float64{50, 40, 45, 30, 29, 28}, 5, StopMaxIter},
		{"converged (tol)", StopRule{MaxIter: 100, Tol: 0.5, Settle: 5}, []float64{60, 40, 45}, 2, StopConverged},
		// The stall rule over 3 iterations: the lowest falls by less than 10%.
		{"stalled on a falling iterate", StopRule{MaxIter: 100, StallTol: 0.1, StallWindow: 3, Settle: 3}, []float64{50, 49.9, 49.8, 49.7, 49.6}, 4, StopStalled},
		{"stalled on an overshoot: waits to come back", StopRule{MaxIter: 100, StallTol: 0.1, StallWindow: 3, Settle: 3}, []float64{50, 49.9, 49.8, 60, 49.7}, 5, StopStalled},
		{"stalled on an overshoot, no Settle", StopRule{MaxIter: 100, StallTol: 0.1, StallWindow: 3}, []float64{50, 49.9, 49.8, 60, 49.7}, 4, StopStalled},
		{"stalled on overshoots in a row: at most Settle", StopRule{MaxIter: 100, StallTol: 0.1, StallWindow: 3, Settle: 2}, []float64{50, 49.9, 49.8, 60, 59, 58, 1}, 6, StopStalled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.rule.Validate(); err != nil {
				t.Fatal(err)
			}
			at, why := stopAt(tc.rule, tc.objs)
			if at != tc.at || why != tc.reason {
				t.Errorf("stopped after %d (%s), want %d (%s)", at, why, tc.at, tc.reason)
			}
			// A run resumed from a checkpoint at any iteration decides as the original.
			for cut := 1; cut < at; cut++ {
				s := NewStopper(tc.rule)
				for i := range cut {
					s.Observe(i+1, tc.objs[i], 100, 0)
				}
				r := NewStopper(tc.rule)
				r.Restore(s.History())
				rat, rwhy := 0, StopReason("")
				for i := cut; i < len(tc.objs); i++ {
					if stop, why := r.Observe(i+1, tc.objs[i], 100, 0); stop {
						rat, rwhy = i+1, why
						break
					}
				}
				if rat != at || rwhy != why {
					t.Errorf("resumed after %d: stopped after %d (%s), want %d (%s)", cut, rat, rwhy, at, why)
				}
			}
		})
	}
}

func TestStopRuleFor(t *testing.T) {
	for _, tc := range []struct {
		accel Accel
		rule  StopRule
		want  int
	}{
		{Accel{}, StopRule{MaxIter: 10}, 0},
		{Accel{CSweeps: 3, BSweeps: 20, Eps: 0.1}, StopRule{MaxIter: 10}, 0},
		{AccelAuto, StopRule{MaxIter: 10}, SettleIterations},
		{Accel{Extrapolate: true}, StopRule{MaxIter: 10, Settle: 2}, 2},
	} {
		t.Run(fmt.Sprint(tc.accel), func(t *testing.T) {
			if got := tc.rule.For(tc.accel).Settle; got != tc.want {
				t.Errorf("Settle %d, want %d", got, tc.want)
			}
		})
	}
	if err := (StopRule{MaxIter: 1, Settle: 11}).Validate(); err == nil {
		t.Error("a Settle longer than the stall window passed")
	}
}
