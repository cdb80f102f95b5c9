package kernels

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// TestPoolYieldsBetweenPieces checks that a goroutine made runnable while a Run holds every Go
// processor (a node's message to other nodes, sent as its own shards start their step) runs
// before the Run ends, on workers and in a Run done by its caller. Go would not preempt the
// pieces for it before 10 ms: without the yield it ran only once the Run was over.
func TestPoolYieldsBetweenPieces(t *testing.T) {
	for _, tc := range []struct {
		name    string
		workers int
	}{
		{"workers", 2},
		{"caller", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One processor: the Run's pieces hold it, and which goroutine runs next does
			// not depend on another processor stealing work.
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			p := NewPool(tc.workers)
			defer p.Close()
			// 8 pieces fit two workers' task queue, so the caller never blocks while they
			// run, and all of them take far less than Go's 10 ms preemption.
			const pieces = 8
			var done atomic.Int64
			ranAfter := make(chan int64, 1)
			wake := make(chan struct{})
			go func() {
				<-wake
				ranAfter <- done.Load()
			}()
			var sink [pieces]float64
			p.Run(pieces, func(i int) {
				if i == 0 {
					close(wake)
				}
				x := float64(i)
				for k := 0; k < 20000; k++ {
					x = x*0.999 + 1
				}
				sink[i] = x
				done.Add(1)
			})
			if got := <-ranAfter; got >= pieces {
				t.Fatalf("the waiting goroutine ran after all %d pieces: workers do not yield between pieces", got)
			}
		})
	}
}
