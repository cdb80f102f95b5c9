package kernels

import (
	"slices"
	"sync"
	"testing"
)

// sizeSorted is a rows x cols block whose column j holds about (j+1)*rows/cols nonzeros:
// samples sorted by size, so that its lanes (cut at equal columns) carry very unequal work.
func sizeSorted(rows, cols int) *Dense {
	d := &Dense{Rows: rows, Cols: cols, Data: make([]float64, rows*cols)}
	for j := 0; j < cols; j++ {
		stored := 1 + j*rows/cols
		for s := 0; s < stored; s++ {
			i := (s*7 + j) % rows
			d.Data[j*rows+i] = float64(1 + (i+j)%5)
		}
	}
	return d
}

// TestLaneOrder: the heaviest lanes first (ties in index order) when a CSC block's lanes carry
// unequal work, and index order (nil) for a dense block, balanced lanes, one lane or a block
// whose column pointers do not match its shape.
func TestLaneOrder(t *testing.T) {
	d := sizeSorted(40, 4*minLaneCols)
	sorted := ToCSC(d)
	rev := &Dense{Rows: d.Rows, Cols: d.Cols, Data: make([]float64, len(d.Data))}
	for j := 0; j < d.Cols; j++ { // the same samples, largest first
		copy(rev.Col(d.Cols-1-j), d.Col(j))
	}
	reversed := ToCSC(rev)
	balanced := ToCSC(countsBlock(40, 4*minLaneCols, 5))
	broken := ToCSC(d)
	broken.ColPtr = broken.ColPtr[:len(broken.ColPtr)-1]
	even := func(n int) []int { return ColumnRanges(n, 4) }
	cases := []struct {
		name   string
		x      Block
		bounds []int
		want   []int
	}{
		{"sorted by size", sorted, even(sorted.Cols), []int{3, 2, 1, 0}},
		{"largest first", reversed, even(reversed.Cols), []int{0, 1, 2, 3}},
		{"ties in index order", ToCSC(&Dense{Rows: 5, Cols: 4, Data: []float64{
			1, 0, 0, 0, 0, 1, 1, 1, 1, 1,
			0, 0, 2, 0, 0, 2, 2, 2, 2, 2}}), []int{0, 1, 2, 3, 4}, []int{1, 3, 0, 2}},
		{"dense", d, even(d.Cols), nil},
		{"balanced", balanced, even(balanced.Cols), nil},
		{"one lane", sorted, []int{0, sorted.Cols}, nil},
		{"column pointers short", broken, even(broken.Cols), nil},
	}
	for _, tc := range cases {
		if got := laneOrder(tc.x, tc.bounds, 5); !slices.Equal(got, tc.want) {
			t.Errorf("%s: order %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPoolRunOrder: every piece runs once, in the order given when one worker takes them all
// in turn (a pool of one runs Run's index order), and a nil order is Run.
func TestPoolRunOrder(t *testing.T) {
	for _, workers := range []int{1, 2, 4} {
		for _, order := range [][]int{nil, {3, 0, 2, 1}, {0, 1, 2, 3}} {
			p := NewPool(workers)
			var mu sync.Mutex
			count := make([]int, 4)
			p.RunOrder(4, order, func(i int) {
				mu.Lock()
				count[i]++
				mu.Unlock()
			})
			p.Close()
			if !slices.Equal(count, []int{1, 1, 1, 1}) {
				t.Errorf("%d workers, order %v: pieces ran %v times", workers, order, count)
			}
		}
	}
}

// TestLaneOrderSameBits: on a block of samples sorted by size, whose lanes a pool hands out
// heaviest first, DID (plain, held out, missing values, accelerated) gives the same bits on
// 1, 2 and 4 threads as on one: the order changes when a lane runs, not how the sums group.
func TestLaneOrderSameBits(t *testing.T) {
	t.Parallel()
	dense := sizeSorted(40, 6*minLaneCols)
	x := ToCSC(dense)
	if laneOrder(x, laneBounds(x, 5), 5) == nil {
		t.Fatal("the size-sorted block's lanes are handed out in index order: the test would not exercise laneOrder")
	}
	withMissing := ToCSC(withNaNs(dense))
	for _, tc := range []struct {
		name string
		x    Block
		o    Options
	}{
		{"plain", x, Options{}},
		{"held out", x, Options{TestFraction: 0.1, TestSeed: 2}},
		{"missing values", withMissing, Options{Missing: true}},
		{"accelerated", x, Options{Accel: AccelAuto}},
	} {
		var ref *Result
		for _, threads := range []int{1, 2, 4} {
			cfg := baseConfig(DID, 5, StopRule{MaxIter: 6})
			cfg.Options = tc.o
			cfg.Threads = threads
			res := mustRun(t, tc.x, 1, cfg)
			if ref == nil {
				ref = res
				continue
			}
			if !sameBits(res.B, ref.B) || !sameBits(res.C, ref.C) {
				t.Errorf("%s, %d threads: bits differ from one thread's (B %.3g, C %.3g)", tc.name, threads,
					maxRelDiff(res.B, ref.B), maxRelDiff(res.C, ref.C))
			}
		}
	}
}
