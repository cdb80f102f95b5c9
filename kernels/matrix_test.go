package kernels

import "testing"

func TestTranspose(t *testing.T) {
	for _, tc := range []struct {
		rows, cols int
		in, want   []float64
	}{
		{2, 3, []float64{1, 2, 3, 4, 5, 6}, []float64{1, 3, 5, 2, 4, 6}}, // [[1 3 5] [2 4 6]] column-major
		{1, 3, []float64{1, 2, 3}, []float64{1, 2, 3}},
		{3, 1, []float64{1, 2, 3}, []float64{1, 2, 3}},
		{0, 0, nil, []float64{}},
	} {
		got := Transpose(tc.in, tc.rows, tc.cols)
		if len(got) != len(tc.want) {
			t.Fatalf("%dx%d: %v", tc.rows, tc.cols, got)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("%dx%d: got %v, want %v", tc.rows, tc.cols, got, tc.want)
			}
		}
		if back := Transpose(got, tc.cols, tc.rows); len(back) > 0 && back[len(back)-1] != tc.in[len(tc.in)-1] {
			t.Fatalf("%dx%d: round trip %v", tc.rows, tc.cols, back)
		}
	}
}
