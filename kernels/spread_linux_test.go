package kernels

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLinuxPlacerMoves moves a real thread: started on CPU a, with another worker recorded
// there, enter must leave it running on another allowed CPU, with its allowed set as before.
func TestLinuxPlacerMoves(t *testing.T) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	if allowed.Count() < 2 {
		t.Skip("one CPU allowed")
	}
	var cpus []int
	for c := 0; len(cpus) < 2; c++ {
		if allowed.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pl := systemPlacer()
	for _, start := range cpus {
		var one unix.CPUSet
		one.Set(start)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			t.Fatal(err)
		}
		if err := unix.SchedSetaffinity(0, &allowed); err != nil {
			t.Fatal(err)
		}
		if got := pl.currentCPU(); got != start {
			t.Fatalf("the thread runs on CPU %d after pinning to %d", got, start)
		}
		s := newSpreader(2, pl)
		s.where[1].Store(int32(start)) // the other worker runs a piece there
		s.enter(0)
		now := pl.currentCPU()
		if now == start || !allowed.IsSet(now) || int(s.where[0].Load()) != now || s.moves.Load() != 1 {
			t.Fatalf("started on %d next to the other worker: now on %d, recorded %d, %d moves", start, now, s.where[0].Load(), s.moves.Load())
		}
		var after unix.CPUSet
		if err := unix.SchedGetaffinity(0, &after); err != nil {
			t.Fatal(err)
		}
		if after != allowed {
			t.Fatalf("allowed set changed: %d CPUs, was %d", after.Count(), allowed.Count())
		}
	}
}
