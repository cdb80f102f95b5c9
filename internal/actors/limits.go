package actors

import (
	"sync/atomic"
	"time"

	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/messages"
)

// shardOverhead is the memory a shard takes beyond its data (see jobspec.ShardOverhead).
const shardOverhead = jobspec.ShardOverhead

// maxJobShards bounds the shard ids a message may list.
const maxJobShards = 1 << 20

// Bounds on the checkpoint copies a host assembles for other nodes' shards: how many at once,
// and how long one may take to arrive whole (package internal/chunked bounds each one's size).
const (
	maxCopiesInFlight = 64
	copyTimeout       = time.Minute
)

// memory is a node's account of the memory its job actors hold: what the host reserved for
// the shards it placed, and what shards took beyond their reserves (a streamed block larger
// than its client announced). The host and the shards use it from their own goroutines.
type memory struct {
	limit int64 // bytes of job data the node accepts (0: no limit)
	held  atomic.Int64
}

// used returns the bytes held.
func (m *memory) used() int64 { return m.held.Load() }

// reserve holds n bytes, whatever the limit (the host checks it before placing a shard).
func (m *memory) reserve(n int64) { m.held.Add(n) }

// release gives back n bytes.
func (m *memory) release(n int64) { m.held.Add(-n) }

// take holds n more bytes if they fit within the limit, and tells whether they did.
func (m *memory) take(n int64) bool {
	for {
		held := m.held.Load()
		if m.limit > 0 && held+n > m.limit {
			return false
		}
		if m.held.CompareAndSwap(held, held+n) {
			return true
		}
	}
}

// minShardReserve is the least memory a shard assignment may reserve, computed from what the
// host sees in it (its columns and rank, and for a streamed job its features), whatever the
// assignment claims: a coordinator cannot place a shard for free.
func minShardReserve(a *messages.ShardAssignment) int64 {
	cols := max(a.GetColHi()-a.GetColLo(), 0)
	k := max(a.GetSpec().GetRank(), 0)
	if m := a.GetSpec().GetFeatures(); m > 0 {
		return shardOverhead + 8*4*cols*k + 8*8*m*k
	}
	return shardOverhead + 8*4*cols*k
}
