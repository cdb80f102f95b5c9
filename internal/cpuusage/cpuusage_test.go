package cpuusage

import (
	"testing"
	"time"
)

// TestNowCountsWork spins a goroutine and checks the reading grows by at least the CPU time
// it burnt in between (the kernel's accounting has tick granularity, so it waits for a
// clear increase rather than timing anything).
func TestNowCountsWork(t *testing.T) {
	before := Now()
	if !before.OK {
		t.Skip("this system does not report process CPU time")
	}
	if before.Cores < 1 {
		t.Fatalf("cores = %d", before.Cores)
	}
	x := 1.0
	deadline := time.Now().Add(20 * time.Second)
	for Now().Seconds-before.Seconds < 0.05 {
		for i := 0; i < 1e6; i++ {
			x = x*1.0000001 + 1e-9
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s of spinning added only %.3f CPU seconds", Now().Seconds-before.Seconds)
		}
	}
	if x == 0 {
		t.Fatal("unreachable; keeps the loop")
	}
}

func TestBusy(t *testing.T) {
	for _, c := range []struct {
		cpu, wall float64
		cores     int
		want      float64
	}{
		{3, 2, 2, 0.75},
		{4, 2, 2, 1},
		{1, 0, 2, 0},
		{1, 1, 0, 0},
		{-1, 1, 2, 0},
	} {
		if got := Busy(c.cpu, c.wall, c.cores); got != c.want {
			t.Errorf("Busy(%v, %v, %d) = %v, want %v", c.cpu, c.wall, c.cores, got, c.want)
		}
	}
}
