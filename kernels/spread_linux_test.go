package kernels

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestLinuxPlacerMoves moves a real thread: started on CPU a, with another worker recorded
// there, enter must move it to another allowed CPU and give it back its allowed set.
func TestLinuxPlacerMoves(t *testing.T) {
	allowed := twoCPUsOrSkip(t)
	var cpus []int
	for c := 0; len(cpus) < 2; c++ {
		if allowed.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	for _, start := range cpus {
		// On a goroutine of its own, locked and never unlocked: the thread whose mask the
		// test changes ends with it.
		errc := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			errc <- moveFrom(start, &allowed)
		}()
		if err := <-errc; err != nil {
			t.Fatalf("started on CPU %d: %v", start, err)
		}
	}
}

// moveFrom puts the calling (locked) thread on CPU start, records another worker there and
// checks that enter moves the thread away and restores its allowed set.
func moveFrom(start int, allowed *unix.CPUSet) error {
	var one unix.CPUSet
	one.Set(start)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return err
	}
	if err := unix.SchedSetaffinity(0, allowed); err != nil {
		return err
	}
	pl := systemPlacer()
	if got := pl.currentCPU(); got != start {
		return fmt.Errorf("runs on CPU %d after pinning", got)
	}
	s := newSpreader(2, pl)
	s.where[1].Store(int32(start)) // the other worker runs a piece there
	s.enter(0)
	to := int(s.where[0].Load())
	if s.moves.Load() != 1 || to == start || !allowed.IsSet(to) {
		return fmt.Errorf("%d moves, recorded on CPU %d", s.moves.Load(), to)
	}
	// The kernel may move the thread again once its set is back; it was on to when enter
	// returned, and it is no longer pinned to start's CPU.
	seen := false
	for range 100 {
		if pl.currentCPU() != start {
			seen = true
			break
		}
		runtime.Gosched()
	}
	if !seen {
		return fmt.Errorf("still on CPU %d after the move to %d", start, to)
	}
	var after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &after); err != nil {
		return err
	}
	if after != *allowed {
		return fmt.Errorf("allowed set changed: %d CPUs, was %d", after.Count(), allowed.Count())
	}
	return nil
}

// TestSpreaderLeavesNoThreadPinned runs moves from many goroutines while GCs preempt them, and
// then checks every thread of the process still has the process's allowed set: a move that
// lost its thread midway (restoring another thread's mask) would leave one pinned.
func TestSpreaderLeavesNoThreadPinned(t *testing.T) {
	allowed := twoCPUsOrSkip(t)
	pl := systemPlacer()
	done := make(chan struct{})
	stop := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			s := newSpreader(2, pl)
			for {
				select {
				case <-stop:
					return
				default:
				}
				s.where[1].Store(int32(pl.currentCPU()))
				s.enter(0)
				s.leave(0)
			}
		}()
	}
	for g := 0; g < 2; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				select {
				case <-stop:
					return
				default:
					runtime.GC()
				}
			}
		}()
	}
	time.Sleep(2 * time.Second)
	close(stop)
	for g := 0; g < 6; g++ {
		<-done
	}
	tids, err := threadIDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			continue // the thread has exited
		}
		if set != allowed {
			t.Errorf("thread %d is left with %d allowed CPUs, the process has %d", tid, set.Count(), allowed.Count())
		}
	}
}

// threadIDs lists the process's threads.
func threadIDs() ([]int, error) {
	f, err := os.Open("/proc/self/task")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, n := range names {
		if tid, err := strconv.Atoi(n); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// twoCPUsOrSkip returns the calling thread's allowed CPUs, and skips the test unless there are
// at least two.
func twoCPUsOrSkip(t *testing.T) unix.CPUSet {
	t.Helper()
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	if allowed.Count() < 2 {
		t.Skip("one CPU allowed")
	}
	return allowed
}
