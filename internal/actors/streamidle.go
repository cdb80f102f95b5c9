package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
)

// streamIdle tells a shard to look whether its streamed block still comes (see
// Timeouts.StreamIdle); epoch is the assignment's that asked for the block.
type streamIdle struct{ epoch uint64 }

// watchStream has the shard told after a while (streamIdle) to check on its streamed block.
func (s *shard) watchStream(ctx actor.Context, after time.Duration) {
	system, self, epoch := ctx.ActorSystem(), ctx.Self(), s.a.Epoch
	time.AfterFunc(after, func() { system.Root.Send(self, &streamIdle{epoch: epoch}) })
}

// checkStream fails the shard's job when its streamed block is still awaited and no chunk of
// it came for Timeouts.StreamIdle: the client announced the data and sends none (or stopped
// sending), and the job would otherwise hold its slots and memory on every node for as long
// as its client renews the lease.
func (s *shard) checkStream(ctx actor.Context, m *streamIdle) {
	if s.ingest == nil || m.epoch != s.a.Epoch {
		return // the block came whole, the shard failed, or a later assignment waits anew
	}
	if idle, again := s.stream.Idle(time.Now()); !idle {
		s.watchStream(ctx, again)
		return
	}
	s.endIngest(ctx) // frees what came
	s.init = nil
	s.placed(ctx, errors.New(s.stream.Error(fmt.Sprintf("%s for shard %d (%d features x %d samples)",
		cluster.FormatBytes(s.announcedBytes()), s.a.Shard, s.spec.Features, s.a.ColHi-s.a.ColLo))))
}

// requestBlock asks the client for the shard's streamed block, and watches that it comes.
func (s *shard) requestBlock(ctx actor.Context) {
	ctx.Send(s.client, &messages.BlockRequest{JobId: s.a.JobId, Epoch: s.a.Epoch, Shard: s.a.Shard,
		ColLo: s.a.ColLo, ColHi: s.a.ColHi, ShardPid: wirePid(ctx.Self())})
	s.requested = true
	s.stream = jobctl.NewStreamWatch(time.Now(), s.node.cfg.Timeouts.StreamIdle)
	s.watchStream(ctx, s.stream.Wait)
}

// slotGiven takes the stream slot the shard waited for: it asks for its block, or gives the
// slot back when it no longer waits for one.
func (s *shard) slotGiven(ctx actor.Context) {
	if !s.node.streams.holds(ctx.Self().Id) {
		return // a slot of an earlier wait, already given back
	}
	if s.ingest == nil || s.requested {
		s.node.streams.release(s.a.Owner, ctx.Self().Id)
		return
	}
	s.requestBlock(ctx)
}

// endIngest ends the shard's streamed block, whole or not: the builder goes, and the stream
// slot (or the wait for one) is given back.
func (s *shard) endIngest(ctx actor.Context) {
	s.ingest = nil
	s.node.streams.release(s.a.Owner, ctx.Self().Id)
}

// announcedBytes is the size of the shard's block as its job's spec announces it: dense, or
// its share of the stored entries the client announced (CSC) when the block comes sparse.
func (s *shard) announcedBytes() int64 {
	m, cols := s.spec.Features, s.a.ColHi-s.a.ColLo
	if s.spec.NaturalLayout == matio.LayoutSparse && s.a.TotalCols > 0 {
		density := float64(s.spec.StoredEntries) / (float64(m) * float64(s.a.TotalCols))
		return int64(12*density*float64(m*cols)) + 8*(cols+1)
	}
	return 8 * m * cols
}
