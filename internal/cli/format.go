package cli

import (
	"fmt"
)

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

// rateText writes a rate with three significant digits (0.5, 12.3, 1234).
func rateText(r float64) string {
	if r >= 100 {
		return fmt.Sprintf("%.0f", r)
	}
	return fmt.Sprintf("%.3g", r)
}
