package actors

import (
	"bytes"
	"runtime"
	"testing"
	"time"
)

// goroutineID returns the id of the calling goroutine, from its stack's header.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	return string(bytes.Fields(buf)[1])
}

// waitFor waits until cond holds, or fails the test after a while.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
	}
}

// TestMailboxRunnerReusesGoroutines: a pass scheduled after another ended runs on the same
// goroutine; passes scheduled while one runs run concurrently, each on its own; runners
// that waited runnerIdle for work exit.
func TestMailboxRunnerReusesGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	r := newMailboxRunner()
	ids := make(chan string, 1)
	pass := func() { ids <- goroutineID() }
	r.Schedule(pass)
	first := <-ids
	// The runner is now parked (or about to be): a later pass runs on it.
	var second string
	waitFor(t, "a pass on the parked runner", func() bool {
		r.Schedule(pass)
		second = <-ids
		return second == first
	})

	// Two passes that each wait for the other end only if they run concurrently.
	a, b := make(chan struct{}), make(chan struct{})
	done := make(chan struct{}, 2)
	r.Schedule(func() { close(a); <-b; done <- struct{}{} })
	r.Schedule(func() { <-a; close(b); done <- struct{}{} })
	for range 2 {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("two passes scheduled together did not run concurrently")
		}
	}

	waitFor(t, "idle runners to exit", func() bool { return runtime.NumGoroutine() <= before })
}
