package figures

import (
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// TestSpacedTicks checks that spacedTicks keeps every tick, keeps labels only from the
// marker's, and leaves no two labels closer than half their extents plus the gap, measured
// on the axis's own scale.
func TestSpacedTicks(t *testing.T) {
	label := textStyle(tickSize, noteColor, 0, 0)
	height := func(string) vg.Length { return label.Height("0") }
	width := func(l string) vg.Length { return label.Width(l) }
	for _, tc := range []struct {
		name     string
		marker   plot.Ticker
		scale    plot.Normalizer
		lo, hi   float64
		length   vg.Length
		extent   func(string) vg.Length
		minLabel int
	}{
		{"log, every digit labelled, short axis", logTicks{}, plot.LogScale{}, 0.11, 0.95, 60, height, 2},
		{"log, many decades, tall axis: nothing to drop", logTicks{}, plot.LogScale{}, 1e-6, 0.5, 400, height, 6},
		{"log, many decades, squashed", logTicks{}, plot.LogScale{}, 1e-6, 0.5, 50, height, 2},
		{"log with the least value's label beside a decade", logTicks{least: 0.0011}, plot.LogScale{}, 0.0009, 0.3, 80, height, 2},
		{"ranks 1..300 on a narrow axis", rankTicks{}, plot.LinearScale{}, 1, 300, 120, width, 2},
		{"ranks 2..30 on a wide axis", rankTicks{}, plot.LinearScale{}, 1.5, 30.5, 900, width, 15},
		{"linear defaults", plot.DefaultTicks{}, plot.LinearScale{}, 0, 1, 30, height, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const gap = 2
			orig := tc.marker.Ticks(tc.lo, tc.hi)
			labels := map[float64]string{}
			for _, o := range orig {
				labels[o.Value] = o.Label
			}
			s := spacedTicks{marker: tc.marker, scale: tc.scale, length: tc.length, extent: tc.extent, gap: gap}
			got := s.Ticks(tc.lo, tc.hi)
			if len(got) != len(orig) {
				t.Fatalf("%d ticks, the marker has %d", len(got), len(orig))
			}
			var prev *plot.Tick
			n := 0
			for i, tk := range got {
				if i > 0 && tk.Value < got[i-1].Value {
					t.Errorf("ticks out of order at %g", tk.Value)
				}
				if tk.Label == "" {
					continue
				}
				n++
				if labels[tk.Value] != tk.Label {
					t.Errorf("label %q at %g is not the marker's %q", tk.Label, tk.Value, labels[tk.Value])
				}
				if prev != nil {
					d := tc.length * vg.Length(tc.scale.Normalize(tc.lo, tc.hi, tk.Value)-tc.scale.Normalize(tc.lo, tc.hi, prev.Value))
					if need := (tc.extent(tk.Label)+tc.extent(prev.Label))/2 + gap; d < need-1e-9 {
						t.Errorf("labels %q and %q are %v apart, they need %v", prev.Label, tk.Label, d, need)
					}
				}
				prev = &got[i]
			}
			if n < tc.minLabel {
				t.Errorf("%d labels left, want at least %d", n, tc.minLabel)
			}
		})
	}
}

// TestSpacedTicksThins checks that thinning happens: the labels 0.1, 0.2, 0.5 and 1 cannot all
// stand on a 20-point axis, and do on a 600-point one.
func TestSpacedTicksThins(t *testing.T) {
	label := textStyle(tickSize, noteColor, 0, 0)
	count := func(length vg.Length) int {
		s := spacedTicks{marker: logTicks{}, scale: plot.LogScale{}, length: length,
			extent: func(string) vg.Length { return label.Height("0") }, gap: 2}
		n := 0
		for _, tk := range s.Ticks(0.1, 1) {
			if tk.Label != "" {
				n++
			}
		}
		return n
	}
	all := 0
	for _, tk := range (logTicks{}).Ticks(0.1, 1) {
		if tk.Label != "" {
			all++
		}
	}
	if short, long := count(20), count(600); !(short < all) || long != all {
		t.Errorf("labels: %d on 20 pt, %d on 600 pt, the marker has %d", short, long, all)
	}
}
