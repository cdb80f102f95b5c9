package bench

import (
	"slices"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		x    []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{5, 5, 1, 5}, 5},
	} {
		in := slices.Clone(tc.x)
		if got := Median(tc.x); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.x, got, tc.want)
		}
		if !slices.Equal(in, tc.x) {
			t.Errorf("Median changed its input: %v, was %v", tc.x, in)
		}
	}
}
