package kernels

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// StopRule is the paper's stopping rule ||E_t||^2 <= Tol * ||E_0||^2 combined with an
// iteration cap and a time limit.
type StopRule struct {
	// Tol is the objective ratio to reach; 0 disables the test (run MaxIter iterations).
	Tol float64
	// MaxIter caps the number of iterations (>= 1).
	MaxIter int
	// TimeLimit caps the wall time; 0 means none.
	TimeLimit time.Duration
	// StallTol, when > 0, also stops a run whose objective fell by less than this fraction over
	// the last StallWindow iterations: for inexact data, where Tol may be out of reach. The
	// objective it follows is the lowest so far, so that an algorithm whose objective may rise
	// for an iteration (accelerated DID's extrapolation, at a restart) is not taken as stalled
	// by that rise; for a monotone algorithm it is the objective itself.
	StallTol float64
	// StallWindow is the number of iterations StallTol looks back (default 10).
	StallWindow int
	// Settle, when > 0, keeps a run whose objective may rise (accelerated DID's
	// extrapolation, whose iterate after an overshoot is above its lowest objective until a
	// restart brings it back) from ending on such an iterate: where the iteration cap or the
	// stall rule would stop it above its lowest objective, it goes on, for at most Settle more
	// iterations, until an iteration ends at or below it. (Stopped at 25 iterations, the
	// paper's synthetic at 1e5 ended on an overshoot 2.4 times the 24th iteration's error; the
	// 26th was below both.) The time limit stops a run where it is. StopRule.For sets it.
	Settle int
}

// SettleIterations is the Settle that For gives an extrapolating run: a restart takes one
// iteration back below the lowest objective on the bank's problems; five leave room for
// restarts in a row.
const SettleIterations = 5

// For returns the rule for a run with accel: with Accel.Extrapolate, Settle is
// SettleIterations (unless already set); the rule as it is otherwise.
func (r StopRule) For(a Accel) StopRule {
	if a.Extrapolate && r.Settle == 0 {
		r.Settle = SettleIterations
	}
	return r
}

// DefaultStopRule is the paper's setting: tol 1e-6, at most 1000 iterations.
var DefaultStopRule = StopRule{Tol: 1e-6, MaxIter: 1000}

// StopReason says why a run ended.
type StopReason string

// The reasons a run ends.
const (
	StopConverged StopReason = "converged"  // the objective ratio reached Tol
	StopMaxIter   StopReason = "max-iter"   // MaxIter iterations done
	StopTimeLimit StopReason = "time-limit" // TimeLimit passed
	StopCanceled  StopReason = "canceled"   // the caller cancelled
	StopStalled   StopReason = "stalled"    // the objective stopped falling (StallTol)
)

const defaultStallWindow = 10

// Validate checks the rule's values.
func (r StopRule) Validate() error {
	if !(r.Tol >= 0) || math.IsInf(r.Tol, 0) {
		return fmt.Errorf("--tol must be a finite number >= 0, got %v", r.Tol)
	}
	if r.MaxIter < 1 {
		return fmt.Errorf("--max-iter must be >= 1, got %d", r.MaxIter)
	}
	if r.TimeLimit < 0 {
		return fmt.Errorf("--time-limit must be >= 0, got %v", r.TimeLimit)
	}
	if !(r.StallTol >= 0) || r.StallTol >= 1 {
		return fmt.Errorf("--stall-tol must be in [0, 1), got %v", r.StallTol)
	}
	if r.StallWindow < 0 {
		return fmt.Errorf("stall window must be >= 0, got %d", r.StallWindow)
	}
	if r.Settle < 0 || r.Settle > r.Window() {
		return fmt.Errorf("settle must be in [0, the stall window %d], got %d", r.Window(), r.Settle)
	}
	return nil
}

// Ratio returns objective / initial, the quantity the rule compares with Tol (0 when initial
// is 0: the start is already exact).
func Ratio(objective, initial float64) float64 {
	if initial <= 0 {
		return 0
	}
	return objective / initial
}

// Stopper applies a StopRule to a run's sequence of objective values. It is a pure function of
// that sequence and the elapsed times, so every party that sees the same objectives (every
// shard of a job, or its coordinator) decides the same way.
type Stopper struct {
	rule StopRule
	// objs are the lowest objectives so far as of each of the last StallWindow+1 iterations,
	// kept when the rule has a StallTol or a Settle.
	objs []float64
}

// NewStopper returns a Stopper for rule.
func NewStopper(rule StopRule) *Stopper { return &Stopper{rule: rule} }

// window returns the stall rule's look-back in iterations.
func (s *Stopper) window() int { return s.rule.Window() }

// Window returns the number of iterations the stall rule looks back: StallWindow, or its
// default (10) when that is 0.
func (r StopRule) Window() int {
	if r.StallWindow == 0 {
		return defaultStallWindow
	}
	return r.StallWindow
}

// History returns a copy of the objectives the rule remembers (the lowest so far as of each of
// the last StallWindow+1 iterations, oldest first; empty without StallTol and Settle), for a
// checkpoint.
func (s *Stopper) History() []float64 { return slices.Clone(s.objs) }

// Restore replaces the remembered objectives with objs (as History returned them; only the
// last StallWindow+1 are kept), so that a run resumed from a checkpoint decides as the
// original would have.
func (s *Stopper) Restore(objs []float64) {
	if w := s.window(); len(objs) > w+1 {
		objs = objs[len(objs)-(w+1):]
	}
	s.objs = slices.Clone(objs)
}

// Observe records iteration iter's objective and decides whether to stop after it.
func (s *Stopper) Observe(iter int, objective, initial float64, elapsed time.Duration) (bool, StopReason) {
	r := s.rule
	window := s.window()
	best := objective
	above := false // the objective is above the lowest before it: an overshoot
	if r.StallTol > 0 || r.Settle > 0 {
		if n := len(s.objs); n > 0 && s.objs[n-1] < best {
			best, above = s.objs[n-1], true
		}
		s.objs = append(s.objs, best)
		if len(s.objs) > window+1 {
			s.objs = s.objs[1:]
		}
	}
	switch {
	case initial <= 0 || (r.Tol > 0 && objective <= r.Tol*initial):
		return true, StopConverged
	case r.StallTol > 0 && len(s.objs) == window+1 && s.objs[0]-best < r.StallTol*s.objs[0] && !(above && s.settling()):
		return true, StopStalled
	case iter >= r.MaxIter && !(above && iter < r.MaxIter+r.Settle):
		return true, StopMaxIter
	case r.TimeLimit > 0 && elapsed >= r.TimeLimit:
		return true, StopTimeLimit
	}
	return false, ""
}

// settling tells, after an overshoot, whether the stall rule waits for the run to come back
// below its lowest objective (Settle): while fewer than Settle iterations in a row have ended
// above it. The count is read from the remembered lowest objectives (an iteration above the
// lowest leaves it as it was), so a run resumed from a checkpoint counts as the original did.
func (s *Stopper) settling() bool {
	if s.rule.Settle == 0 {
		return false
	}
	n := len(s.objs)
	same := 0 // iterations in a row that left the lowest as it was
	for i := n - 1; i > 0 && s.objs[i] == s.objs[i-1]; i-- {
		same++
	}
	return same <= s.rule.Settle
}
