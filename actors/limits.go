package actors

import "github.com/didnmf/didnmf/messages"

// shardOverhead is the memory a shard takes beyond its data: the actor, its mailbox, its
// machine's buffers and bookkeeping, its reducer's share, and what the node keeps for it.
// Measured with TestShardOverhead (about 40 KiB a shard on an idle 1-column shard); counted
// in every shard's estimate, so that a job of very many small shards is refused like a job of
// a few big ones.
const shardOverhead = 64 << 10

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
