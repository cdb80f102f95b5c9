package kernels

import (
	"fmt"
	"math"
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
)

// Validate checks the rule's values.
func (r StopRule) Validate() error {
	if !(r.Tol >= 0) || math.IsInf(r.Tol, 0) {
		return fmt.Errorf("tol must be a finite number >= 0, got %v", r.Tol)
	}
	if r.MaxIter < 1 {
		return fmt.Errorf("max-iter must be >= 1, got %d", r.MaxIter)
	}
	if r.TimeLimit < 0 {
		return fmt.Errorf("time limit must be >= 0, got %v", r.TimeLimit)
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

// Check decides whether to stop after iteration iter.
func (r StopRule) Check(iter int, objective, initial float64, elapsed time.Duration) (bool, StopReason) {
	switch {
	case initial <= 0 || (r.Tol > 0 && objective <= r.Tol*initial):
		return true, StopConverged
	case iter >= r.MaxIter:
		return true, StopMaxIter
	case r.TimeLimit > 0 && elapsed >= r.TimeLimit:
		return true, StopTimeLimit
	}
	return false, ""
}
