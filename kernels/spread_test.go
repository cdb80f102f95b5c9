package kernels

import (
	"slices"
	"testing"
)

// fakePlacer is a machine of CPUs 0..n-1 (allowed lists those the thread may use) on which
// the calling thread runs on cpu.
type fakePlacer struct {
	cpu     int
	allowed []int
	refuse  bool
	moved   []int
}

func (f *fakePlacer) currentCPU() int { return f.cpu }

func (f *fakePlacer) allowedCPUs() int { return len(f.allowed) }

func (f *fakePlacer) moveTo(s *spreader, w int) int {
	if f.refuse {
		return -1
	}
	for _, c := range f.allowed {
		if !s.busy(w, c) {
			f.cpu = c
			f.moved = append(f.moved, c)
			return c
		}
	}
	return -1
}

func TestSpreader(t *testing.T) {
	tests := []struct {
		name    string
		others  []int32 // where workers 1.. are (-1: between pieces)
		cpu     int     // where worker 0 starts its piece
		allowed []int
		refuse  bool
		want    int // the CPU worker 0 runs its piece on
		moved   bool
	}{
		{"alone on its CPU", []int32{1}, 0, []int{0, 1}, false, 0, false},
		{"the other between pieces", []int32{-1}, 0, []int{0, 1}, false, 0, false},
		{"meets the other: moves to the free CPU", []int32{0}, 0, []int{0, 1}, false, 1, true},
		{"first free CPU of the allowed set", []int32{0, 1}, 0, []int{0, 1, 2, 3}, false, 2, true},
		{"only allowed CPUs", []int32{2}, 2, []int{2, 5}, false, 5, true},
		{"system refuses: stays", []int32{0}, 0, []int{0, 1}, true, 0, false},
		{"CPU unknown: stays", []int32{-1}, -1, []int{0, 1}, false, -1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakePlacer{cpu: tc.cpu, allowed: tc.allowed, refuse: tc.refuse}
			s := newSpreader(1+len(tc.others), f)
			for i, c := range tc.others {
				s.where[1+i].Store(c)
			}
			s.enter(0)
			if got := int(s.where[0].Load()); got != tc.want {
				t.Errorf("worker 0 recorded on CPU %d, want %d", got, tc.want)
			}
			if moved := len(f.moved) > 0; moved != tc.moved || s.moves.Load() != int64(len(f.moved)) {
				t.Errorf("moves %v (counted %d), want moved=%v", f.moved, s.moves.Load(), tc.moved)
			}
			s.leave(0)
			if got := s.where[0].Load(); got != -1 {
				t.Errorf("after leave: CPU %d recorded, want -1", got)
			}
		})
	}
	for _, tc := range []struct {
		workers int
		placer  cpuPlacer
	}{{1, &fakePlacer{allowed: []int{0, 1}}}, {4, nil}, {3, &fakePlacer{allowed: []int{0, 1}}}, {2, &fakePlacer{allowed: []int{0}}}} {
		if newSpreader(tc.workers, tc.placer) != nil {
			t.Errorf("a spreader for %d workers on %v", tc.workers, tc.placer)
		}
	}
}

// TestPoolSpreadsItsWorkers: with the spreader, a pool's pieces still all run, each once.
func TestPoolSpreadsItsWorkers(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	var hits [64]int
	for round := 0; round < 50; round++ {
		p.Run(len(hits), func(i int) { hits[i]++ })
	}
	if !slices.Equal(hits[:], slices.Repeat([]int{50}, len(hits))) {
		t.Fatalf("pieces ran %v times", hits)
	}
}
