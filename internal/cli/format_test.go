package cli

import (
	"testing"
)

func TestSecondsAndRateText(t *testing.T) {
	for _, tt := range []struct {
		s    float64
		want string
	}{{0, "0 s"}, {12.345, "12.3 s"}, {0.0456, "45.6 ms"}, {7.8e-6, "7.8 µs"}} {
		if got := secondsText(tt.s); got != tt.want {
			t.Errorf("secondsText(%v) = %q, want %q", tt.s, got, tt.want)
		}
	}
	for _, tt := range []struct {
		r    float64
		want string
	}{{0.5, "0.5"}, {12.34, "12.3"}, {108896.2, "108896"}} {
		if got := rateText(tt.r); got != tt.want {
			t.Errorf("rateText(%v) = %q, want %q", tt.r, got, tt.want)
		}
	}
}
