package actors

import (
	"sync/atomic"
	"time"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
)

// shardOverhead is the memory a shard takes beyond its data: the actor, its mailbox, its
// machine's buffers and bookkeeping, its reducer's share, and what the node keeps for it.
// Measured on one `node serve` process running 5,000 shards of one sample each (m=5, K=2):
// RSS 23 MB idle, 314 MB running, about 58 KiB a shard. It is counted in every shard's
// estimate, so that a job of very many small shards is refused like a job of a few big ones.
const shardOverhead = 64 << 10

// maxJobShards bounds the shard ids a message may list.
const maxJobShards = 1 << 20

// Bounds on the checkpoint copies a host assembles for other nodes' shards: how many at once,
// and how long one may take to arrive whole (package internal/chunked bounds each one's size).
const (
	maxCopiesInFlight = 64
	copyTimeout       = time.Minute
)

// JobFootprint estimates the bytes a job of m features, n samples and rank k holds over its
// shards: what placement reserves (see shardFootprint). density is the input's stored
// entries over m x n when known (0: dense).
func JobFootprint(m, n, k int64, shards int, density float64, layout matio.Layout) int64 {
	cols := kernels.ColumnRanges(int(n), shards)
	var sum int64
	for s := 0; s < shards; s++ {
		sum += shardFootprint(m, int64(cols[s+1]-cols[s]), k, density, layout)
	}
	return sum
}

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
