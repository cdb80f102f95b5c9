package kernels

import (
	"math"
	"slices"
	"testing"
)

// TestTopIndices: largest first, ties by the lower index, NaN below every number (in index
// order among themselves), at most top.
func TestTopIndices(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		v    []float64
		top  int
		want []int
	}{
		{[]float64{0.1, 0.9, 0.5, 0.9, 0}, 3, []int{1, 3, 2}},
		{[]float64{1, 2}, 5, []int{1, 0}},
		{[]float64{1, 2}, 0, []int{}},
		{[]float64{nan, 1, nan, 3}, 4, []int{3, 1, 0, 2}},
		{[]float64{}, 3, []int{}},
	} {
		if got := TopIndices(len(tc.v), tc.top, func(i int) float64 { return tc.v[i] }); !slices.Equal(got, tc.want) {
			t.Errorf("TopIndices(%v, %d) = %v, want %v", tc.v, tc.top, got, tc.want)
		}
	}
}
