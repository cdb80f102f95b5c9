package actors

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

func partialOf(seq uint64, lo, hi int64, data []float64) *messages.Partial {
	return &messages.Partial{JobId: "j", Epoch: 1, Seq: seq, Op: int32(kernels.OpAllReduce), Label: "x", Lo: lo, Hi: hi,
		Chunk: 0, Chunks: 1, TotalLen: int64(len(data)), Checksum: Checksum(data), Data: data}
}

func TestGatherCountsEachContributionOnce(t *testing.T) {
	g := newGather(1, [][2]int64{{0, 1}, {1, 2}, {2, 3}})
	steps := []struct {
		name string
		p    *messages.Partial
		want offerStatus
		err  string
	}{
		{"first", partialOf(1, 0, 1, []float64{1, 2}), offerAccepted, ""},
		{"duplicate", partialOf(1, 0, 1, []float64{1, 2}), offerDuplicate, ""},
		{"not a child", partialOf(1, 5, 6, []float64{1, 2}), offerStale, "not from a child"},
		{"ahead", partialOf(2, 1, 2, []float64{1, 2}), offerStale, "while gathering 1"},
		{"older epoch", &messages.Partial{Epoch: 0, Seq: 1, Lo: 1, Hi: 2}, offerStale, ""},
		{"second", partialOf(1, 1, 2, []float64{10, 20}), offerAccepted, ""},
		{"third", partialOf(1, 2, 3, []float64{100, 200}), offerComplete, ""},
	}
	for _, st := range steps {
		got, err := g.offer(st.p)
		if got != st.want || (st.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), st.err)) {
			t.Fatalf("%s: got %v, %v; want %v, %q", st.name, got, err, st.want, st.err)
		}
	}
	_, sum, err := g.combine()
	if err != nil || sum[0] != 111 || sum[1] != 222 {
		t.Fatalf("sum %v, %v", sum, err)
	}
	// A late copy of the completed collective is stale.
	if got, _ := g.offer(partialOf(1, 2, 3, []float64{100, 200})); got != offerStale {
		t.Fatalf("late partial: %v, want stale", got)
	}
	if got, _ := g.offer(partialOf(2, 2, 3, []float64{1, 1})); got != offerAccepted {
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
			g := newGather(1, make([][2]int64, len(grp)))
			for c := range grp {
				g.ranges[c] = [2]int64{int64(c), int64(c + 1)}
				if _, err := g.offer(partialOf(1, int64(c), int64(c+1), grp[c])); err != nil {
					t.Fatal(err)
				}
			}
			_, s, err := g.combine()
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

func TestAssemblyReassemblesAndChecks(t *testing.T) {
	data := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	sum := Checksum(data)
	chunks := splitChunksOf(data, 4)
	if len(chunks) != 3 {
		t.Fatalf("%d chunks", len(chunks))
	}
	cases := []struct {
		name  string
		order []int
		edit  func(*chunkHeader)
		err   string
	}{
		{"in order", []int{0, 1, 2}, nil, ""},
		{"reversed with a duplicate", []int{2, 1, 1, 0}, nil, ""},
		{"corrupted value", []int{0, 1, 2}, func(h *chunkHeader) {
			if h.chunk == 1 {
				h.data = []float64{5, 6, 7, 8.5}
			}
		}, "checksum mismatch"},
		{"offset past the end", []int{0}, func(h *chunkHeader) { h.offset = 9 }, "malformed chunk"},
		{"huge total", []int{0}, func(h *chunkHeader) { h.total = 1 << 40 }, "malformed chunk"},
		{"chunk index out of range", []int{0}, func(h *chunkHeader) { h.chunk = 7 }, "malformed chunk"},
		{"disagreeing header", []int{0, 1}, func(h *chunkHeader) {
			if h.chunk == 1 {
				h.checksum++
			}
		}, "disagrees"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var a assembly
			var full bool
			var err error
			for _, i := range tc.order {
				c := chunks[i]
				h := chunkHeader{chunk: c.index, chunks: c.count, offset: c.offset, total: int64(len(data)), checksum: sum, data: c.data}
				if tc.edit != nil {
					tc.edit(&h)
				}
				full, err = a.add(h)
				if errors.Is(err, errDuplicateChunk) {
					err = nil
					continue
				}
				if err != nil {
					break
				}
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("want %q, got %v", tc.err, err)
				}
				return
			}
			if err != nil || !full || sameBits(a.data, data) >= 0 {
				t.Fatalf("full %v, err %v, data %v", full, err, a.data)
			}
		})
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
		if err != nil || sameBits(got, tc.want) >= 0 {
			t.Fatalf("[%d,%d) from %d: %v %v", tc.lo, tc.hi, tc.from, got, err)
		}
	}
	if _, err := segmentSlice(data[:3], segs, 0, 0, 4); err == nil {
		t.Fatal("short data accepted")
	}
}

func TestBuildTree(t *testing.T) {
	node := func(s int64) string { return []string{"a", "b", "c"}[s%3] }
	for _, tc := range []struct {
		p, fanIn int64
		nodes    int // reducers
		levels   int64
	}{{1, 8, 1, 1}, {8, 8, 1, 1}, {9, 8, 3, 2}, {5, 2, 6, 3}, {16, 4, 5, 2}} {
		tree, parents := buildTree("j", 1, tc.p, tc.fanIn, node)
		root := tree[len(tree)-1]
		if len(tree) != tc.nodes || root.level != tc.levels || root.lo != 0 || root.hi != tc.p || root.parent != nil {
			t.Fatalf("P=%d fan-in %d: %d reducers, root level %d [%d, %d)", tc.p, tc.fanIn, len(tree), root.level, root.lo, root.hi)
		}
		for s, par := range parents {
			if par == nil || tree[s/int(tc.fanIn)].pid != par || tree[s/int(tc.fanIn)].level != 1 {
				t.Fatalf("P=%d fan-in %d: shard %d has parent %v", tc.p, tc.fanIn, s, par)
			}
		}
		for _, r := range tree[:len(tree)-1] {
			if r.parent == nil || r.lo%pow(tc.fanIn, r.level) != 0 {
				t.Fatalf("P=%d: reducer [%d, %d) at level %d misplaced", tc.p, r.lo, r.hi, r.level)
			}
		}
	}
}

func pow(b, e int64) int64 {
	r := int64(1)
	for ; e > 0; e-- {
		r *= b
	}
	return r
}
