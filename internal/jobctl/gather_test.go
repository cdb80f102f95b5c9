package jobctl

import (
	"math"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

func partialOf(seq uint64, lo, hi int64, data []float64) *messages.Partial {
	return &messages.Partial{JobId: "j", Epoch: 1, Seq: seq, Op: int32(kernels.OpAllReduce), Label: "x", Lo: lo, Hi: hi,
		Chunk: chunked.Split(data, chunked.Floats)[0]}
}

func TestGatherCountsEachContributionOnce(t *testing.T) {
	g := NewGather(1, [][2]int64{{0, 1}, {1, 2}, {2, 3}})
	steps := []struct {
		name string
		p    *messages.Partial
		want Offer
		err  string
	}{
		{"first", partialOf(1, 0, 1, []float64{1, 2}), OfferAccepted, ""},
		{"duplicate", partialOf(1, 0, 1, []float64{1, 2}), OfferDuplicate, ""},
		{"not a child", partialOf(1, 5, 6, []float64{1, 2}), OfferStale, "not from a child"},
		{"ahead", partialOf(2, 1, 2, []float64{1, 2}), OfferStale, "while gathering 1"},
		{"older epoch", &messages.Partial{Epoch: 0, Seq: 1, Lo: 1, Hi: 2}, OfferStale, ""},
		{"second", partialOf(1, 1, 2, []float64{10, 20}), OfferAccepted, ""},
		{"third", partialOf(1, 2, 3, []float64{100, 200}), OfferComplete, ""},
	}
	for _, st := range steps {
		got, err := g.Offer(st.p)
		if got != st.want || (st.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), st.err)) {
			t.Fatalf("%s: got %v, %v; want %v, %q", st.name, got, err, st.want, st.err)
		}
	}
	_, sum, err := g.Combine()
	if err != nil || sum[0] != 111 || sum[1] != 222 {
		t.Fatalf("sum %v, %v", sum, err)
	}
	// A late copy of the completed collective is stale.
	if got, _ := g.Offer(partialOf(1, 2, 3, []float64{100, 200})); got != OfferStale {
		t.Fatalf("late partial: %v, want stale", got)
	}
	if got, _ := g.Offer(partialOf(2, 2, 3, []float64{1, 1})); got != OfferAccepted {
		t.Fatalf("next collective: %v", got)
	}
}

func TestGatherSumsInTreeSumOrder(t *testing.T) {
	// Five shards with values whose sum depends on the order; a fan-in-2 tree must reproduce
	// kernels.TreeSum over all five bitwise.
	vals := [][]float64{{1e16}, {1}, {-1e16}, {1}, {3.3}}
	want := make([]float64, 1)
	kernels.TreeSum(want, vals)
	level := vals
	for len(level) > 1 {
		var next [][]float64
		for i := 0; i < len(level); i += 2 {
			grp := level[i:min(i+2, len(level))]
			g := NewGather(1, make([][2]int64, len(grp)))
			for c := range grp {
				g.ranges[c] = [2]int64{int64(c), int64(c + 1)}
				if _, err := g.Offer(partialOf(1, int64(c), int64(c+1), grp[c])); err != nil {
					t.Fatal(err)
				}
			}
			_, s, err := g.Combine()
			if err != nil {
				t.Fatal(err)
			}
			next = append(next, s)
		}
		level = next
	}
	if math.Float64bits(level[0][0]) != math.Float64bits(want[0]) {
		t.Fatalf("tree gave %v, TreeSum %v", level[0][0], want[0])
	}
}

func TestSegmentSlice(t *testing.T) {
	data := []float64{0, 0, 1, 2, 2, 2, 3}
	segs := []int64{2, 1, 3, 1}
	for _, tc := range []struct {
		from, lo, hi int64
		in           []float64
		want         []float64
	}{
		{0, 0, 1, data, []float64{0, 0}},
		{0, 2, 4, data, []float64{2, 2, 2, 3}},
		{2, 3, 4, []float64{2, 2, 2, 3}, []float64{3}},
		{0, 1, 2, data, []float64{1}},
	} {
		got, err := segmentSlice(tc.in, segs, tc.from, tc.lo, tc.hi)
		if err != nil || !sameFloats(got, tc.want) {
			t.Fatalf("[%d,%d) from %d: %v %v", tc.lo, tc.hi, tc.from, got, err)
		}
	}
	if _, err := segmentSlice(data[:3], segs, 0, 0, 4); err == nil {
		t.Fatal("short data accepted")
	}
}

// sameFloats tells whether a and b hold the same values, bit for bit.
func sameFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}
