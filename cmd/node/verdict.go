package main

import (
	"fmt"

	"github.com/didnmf/didnmf/kernels"
)

// stopSentence says in words which rule ended a run, as a user reads it: "converged: ..." for
// the two rules that mean the error stopped moving (--tol, --stall-tol), and for the limits
// (--max-iter, --time-limit) whether the error was still falling when they cut the run short.
func stopSentence(why kernels.StopReason, rule kernels.StopRule, hist []kernels.HistoryPoint) string {
	window := rule.StallWindow
	if window == 0 {
		window = 10
	}
	switch why {
	case kernels.StopConverged:
		return fmt.Sprintf("converged: the error fell to %s of the initial error (--tol %g)", percent(rule.Tol), rule.Tol)
	case kernels.StopStalled:
		return fmt.Sprintf("converged: the error fell by less than %s over the last %d iterations (--stall-tol %g)", percent(rule.StallTol), window, rule.StallTol)
	case kernels.StopCanceled:
		return "interrupted: the factors are those of the last iteration finished"
	}
	limit := fmt.Sprintf("stopped at --max-iter %d", rule.MaxIter)
	if why == kernels.StopTimeLimit {
		limit = fmt.Sprintf("stopped at --time-limit %v", rule.TimeLimit)
	}
	if fall, ok := recentFall(hist, window); ok {
		if fall < max(rule.StallTol, defaultStallTol) {
			return fmt.Sprintf("%s; the error had stopped falling (by %s over the last %d iterations)", limit, percent(fall), window)
		}
		return fmt.Sprintf("%s while the error was still falling (by %s over the last %d iterations): raise it, or accept the result", limit, percent(fall), window)
	}
	return limit
}

// recentFall is the relative fall of the error over the last window iterations of a history
// (false when the history is shorter, or the error was 0).
func recentFall(hist []kernels.HistoryPoint, window int) (float64, bool) {
	if len(hist) <= window {
		return 0, false
	}
	old, now := hist[len(hist)-1-window].Ratio, hist[len(hist)-1].Ratio
	if old <= 0 {
		return 0, false
	}
	return (old - now) / old, true
}

// percent writes a fraction as a percentage with as many digits as it needs: 1e-4 is "0.01%",
// 0.005 "0.5%", 1e-6 "0.0001%".
func percent(f float64) string {
	return fmt.Sprintf("%.3g%%", 100*f)
}

// rate is iterations per second (0 for no time).
func rate(iterations int, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(iterations) / seconds
}

// secondsText writes a duration in seconds with three significant digits in a unit that
// reads well: "12.3 s", "45.6 ms", "7.8 µs".
func secondsText(s float64) string {
	switch {
	case s >= 1 || s == 0:
		return fmt.Sprintf("%.3g s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.3g ms", s*1e3)
	}
	return fmt.Sprintf("%.3g µs", s*1e6)
}
