package jobctl

import (
	"fmt"
	"time"
)

// StreamWatch is a shard's watch over the block its client streams (ingest "stream"): the
// client announced the block when it submitted the job, and the shard asked for it; a shard
// that receives no chunk of it for Wait fails its job (see Idle), so that a client that
// announces data and sends none, or stops sending, holds no node's slots and memory for as
// long as it renews its lease. Package actors' shards and the simulation's (jobsim) decide
// with it.
type StreamWatch struct {
	// Wait is how long the shard waits for the next chunk (actors.Timeouts.StreamIdle).
	Wait   time.Duration
	last   time.Time
	chunks int64
}

// NewStreamWatch starts watching a stream asked for at now.
func NewStreamWatch(now time.Time, wait time.Duration) StreamWatch {
	return StreamWatch{Wait: wait, last: now}
}

// Chunk records a chunk of the block taken at now.
func (w *StreamWatch) Chunk(now time.Time) {
	w.last = now
	w.chunks++
}

// Chunks returns the chunks taken.
func (w *StreamWatch) Chunks() int64 { return w.chunks }

// Idle tells, at now, whether the stream went Wait without a chunk (the shard fails its job),
// and otherwise how long until it would.
func (w *StreamWatch) Idle(now time.Time) (idle bool, again time.Duration) {
	quiet := now.Sub(w.last)
	if quiet >= w.Wait {
		return true, 0
	}
	return false, w.Wait - quiet
}

// Error is the job's error when the stream went idle: what the client announced for the
// shard (announced, e.g. "305 MiB for shard 0 (2000 features x 20000 samples)") and what
// came.
func (w *StreamWatch) Error(announced string) string {
	if w.chunks > 0 {
		return fmt.Sprintf("the client announced %s, sent %d chunks of it and then none in %v (Timeouts.StreamIdle): the job is stopped",
			announced, w.chunks, w.Wait)
	}
	return fmt.Sprintf("the client announced %s and sent none in %v (Timeouts.StreamIdle): the job is stopped", announced, w.Wait)
}
