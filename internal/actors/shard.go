package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
)

// resultWindow is how many result chunks a shard keeps in flight to the client (flow control).
const resultWindow = 4

// shard is a shard actor: it holds X_i, C_i and a replica of B inside a kernels.Machine, sends
// the machine's contributions up the reduce tree and feeds it the results coming down. Its
// control (the assignment it serves, grants, the stop rule, checkpoints, report batching) is
// a jobctl.ShardDriver: the actor turns messages into the driver's events and carries out its
// Ready (see drive), and loads its block and builds its machine itself.
type shard struct {
	node        *Node
	a           *messages.ShardAssignment
	d           *jobctl.ShardDriver
	spec        *jobspec.Spec
	sqNorm      *float64 // sqNormX, once computed
	coordinator *actor.PID
	reducer     *actor.PID
	client      *actor.PID
	machine     *kernels.Machine
	x           kernels.Block
	meter       meter

	pending  *kernels.Step // the collective whose result the machine awaits
	incoming chunked.Assembly[float64]
	result   []float64 // the awaited result, whole, until the driver has it delivered
	// end is how the run ended (the driver's Finish), for the ShardDone once the client has
	// the factors.
	end      jobctl.ShardDriverFinish
	streams  []*resultStream
	finished bool // the driver ended the run: the factors stream to the client
	doneSent bool
	// floats counts the floats the shard sent up in the collectives of its iterations since
	// the machine was built at iteration floatsFrom (its ShardDone reports them per iteration).
	floats, floatsFrom int64
	ingest             *matio.BlockBuilder // while a streamed block arrives
	inflow             chunked.Ordered     // the streamed block's chunks
	// stream watches that the streamed block keeps coming once asked for (see checkStream).
	stream    jobctl.StreamWatch
	requested bool // the streamed block was asked of the client (it may wait for a stream slot)
	// init is a custom initialisation streamed with the block (nil: none, or read from files).
	init *initParts
	// overdraft is the memory the shard took from its node beyond its reserve (a streamed
	// block larger than announced), given back when it stops.
	overdraft int64

	// waitingSince is when the shard sent its partial of an iteration's collective (zero when
	// it waits for none): the wait for the result goes into its counters.
	waitingSince time.Time
	// iterBegan is when the iteration under way began, kept by shard 0 for its node's
	// Observer (zero: none under way, or no Observer).
	iterBegan time.Time

	// restarted is set on an instance its host's supervisor made after a panic: it waits for
	// the coordinator's recovery assignment instead of starting on its own.
	restarted bool
	ckpt      checkpoints
}

func newShard(n *Node, a *messages.ShardAssignment, restarted bool) *shard {
	return &shard{node: n, a: a, d: jobctl.NewShardDriver(jobctl.ShardDriverConfig{Job: a.JobId, Shard: a.Shard, Node: n.Address()}),
		coordinator: pidOf(a.Coordinator), reducer: pidOf(a.Reducer), client: pidOf(a.Client), restarted: restarted}
}

// Receive implements actor.Actor.
func (s *shard) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if s.restarted {
			s.a.Epoch = 0 // whatever comes next is a recovery
			return
		}
		s.feed(ctx, assignEvent(ctx, s.a))
	case *messages.ShardAssignment:
		s.feed(ctx, assignEvent(ctx, m))
	case *checkpointWritten:
		s.feed(ctx, jobctl.ShardDriverCheckpointWritten{Epoch: m.epoch, Iteration: m.iteration, Data: m.data, Err: m.err, At: time.Now()})
	case *messages.CheckpointStored:
		var err error
		if m.Error != "" {
			err = fmt.Errorf("buddy %s: %s", s.a.Buddy, m.Error)
		}
		s.feed(ctx, jobctl.ShardDriverCheckpointStored{Job: m.JobId, Shard: m.Shard, Iteration: m.Iteration, Err: err, At: time.Now()})
	case *messages.CheckpointCopy:
		s.fetched(ctx, m)
	case *messages.CheckpointAt:
		s.feed(ctx, jobctl.ShardDriverCheckpointAt{Job: m.JobId, Epoch: m.Epoch, Iteration: m.Iteration})
	case *fetchTimeout:
		s.fetchTimedOut(ctx, m)
	case *streamIdle:
		s.checkStream(ctx, m)
	case *streamSlot:
		s.slotGiven(ctx)
	case *actor.Stopping, *actor.Restarting:
		s.endIngest(ctx)
		s.closeMachine()
		s.x = nil
		s.node.mem.release(s.overdraft)
		s.node.owned.add(s.a.Owner, -s.overdraft)
		s.overdraft = 0
		return
	case *messages.StartJob:
		s.feed(ctx, jobctl.ShardDriverStart{Job: m.JobId, Epoch: m.Epoch, Granted: m.Granted, At: time.Now()})
	case *messages.Reduced:
		s.feed(ctx, jobctl.ShardDriverResultChunk{Job: m.JobId, Epoch: m.Epoch, Seq: m.Seq, Lo: m.Lo, Hi: m.Hi})
	case *messages.Grant:
		s.feed(ctx, jobctl.ShardDriverGrant{Job: m.JobId, Epoch: m.Epoch, Granted: m.Granted})
	case *messages.Finish:
		s.feed(ctx, jobctl.ShardDriverStopAt{Job: m.JobId, Epoch: m.Epoch, At: m.At})
	case *messages.ResultAck:
		if s.node.ownerOK(ctx, "ResultAck", m.OwnerToken, s.a.OwnerToken) {
			s.ack(ctx, m)
		}
	case *messages.BlockChunk:
		if s.node.ownerOK(ctx, "BlockChunk", m.OwnerToken, s.a.OwnerToken) {
			s.blockChunk(ctx, m)
		}
	}
	s.drive(ctx, ctx.Message())
}

// assignEvent is an assignment as the driver's event: its checkpoints go to a buddy when it
// names another node.
func assignEvent(ctx actor.Context, m *messages.ShardAssignment) jobctl.ShardDriverAssign {
	return jobctl.ShardDriverAssign{Job: m.JobId, Shard: m.Shard, Epoch: m.Epoch, ResumeFrom: m.ResumeFrom,
		Buddy: m.Buddy != "" && m.Buddy != ctx.Self().Address}
}

// feed steps the driver an event; what it asks for is carried out by drive. An event the
// driver refuses is a fault of this actor: the shard fails.
func (s *shard) feed(ctx actor.Context, ev any) {
	if err := s.d.Step(ev); err != nil {
		s.fail(ctx, err)
	}
}

// drive carries out what the driver asks, in the order of ShardDriverReady's fields, until it
// asks for nothing more: it steps the machine when told to (Advance) and feeds back what the
// machine reached. msg is the message the actor handles, for the effects that act on it (an
// assignment to load, a chunk of a result to take).
func (s *shard) drive(ctx actor.Context, msg any) {
	for {
		rd := s.d.Ready()
		if rd.Empty() {
			return
		}
		s.meter.c.Stale += int64(rd.Stale)
		if rd.Load != nil {
			if m, ok := msg.(*messages.ShardAssignment); ok {
				s.rollback(ctx, m)
			} else {
				s.load(ctx)
			}
		}
		if m, ok := msg.(*messages.ShardAssignment); ok && rd.Superseded != 0 && m.Coordinator != nil {
			ctx.Send(pidOf(m.Coordinator), &messages.Placed{JobId: m.JobId, Actor: fmt.Sprintf("shard %d", m.Shard), Epoch: m.Epoch, Superseded: rd.Superseded})
		}
		if rd.Partial != nil {
			s.sendPartial(ctx, s.pending, rd.Partial.Seq)
			if !s.pending.Init {
				s.waitingSince = time.Now()
			}
		}
		if m, ok := msg.(*messages.Reduced); ok && rd.TakeChunk {
			s.takeResult(ctx, m)
		}
		if rd.Deliver {
			s.deliver()
		}
		for _, c := range rd.Checkpoints {
			s.checkpoint(ctx, c)
		}
		for _, c := range rd.Copies {
			sendCheckpoint(ctx, HostPID(s.a.Buddy), s.a.JobId, s.a.Shard, c.Iteration, c.Data, ctx.Self())
		}
		for _, out := range rd.Sends {
			s.meter.send(ctx, s.coordinator, out)
		}
		if rd.Finish != nil {
			s.finish(ctx, *rd.Finish)
		}
		if rd.Advance && !s.advance(ctx) {
			return
		}
	}
}

// advance steps the machine once, as the driver asked, and feeds the driver what it reached:
// a collective or the end of an iteration. It tells whether to go on driving (not when the
// job is being stopped: the host stops this actor next).
func (s *shard) advance(ctx actor.Context) bool {
	began := time.Now()
	st, err := s.machine.Next()
	if !st.Init {
		s.meter.c.ComputeSeconds += time.Since(began).Seconds()
	}
	if errors.Is(err, kernels.ErrInterrupted) {
		return false
	}
	if err != nil {
		s.fail(ctx, err)
		return true
	}
	if obs := s.node.cfg.Observer; obs != nil && s.a.Shard == 0 && !st.Init {
		s.observeIteration(obs, began, st.Kind != kernels.StepCollective)
	}
	if st.Kind == kernels.StepCollective {
		s.meter.init = st.Init
		s.pending = &st
		s.feed(ctx, jobctl.ShardDriverCollective{Iteration: int64(st.Iteration), Init: st.Init})
		return true
	}
	s.meter.init = false
	s.node.hooks.shardBoundary(s.a.Shard, s.a.Shards, int64(st.Iteration))
	ev := jobctl.ShardDriverBoundary{Iteration: int64(st.Iteration), Objective: st.Objective, Initial: st.Initial, At: time.Now(),
		InitEnded: s.machine.InitEnded()}
	if s.spec.Options().Masked() {
		ev.Mask, ev.TestSSE, ev.InitialTestSSE = maskStatsOf(st.Mask), st.TestSSE, st.InitialTestSSE
	}
	s.feed(ctx, ev)
	return true
}

// observeIteration tells obs of an iteration shard 0 ended (boundary), which began when the
// first step of it did (began, the step's start, for the first step after a boundary or a
// (re)build of the machine).
func (s *shard) observeIteration(obs Observer, began time.Time, boundary bool) {
	if s.iterBegan.IsZero() {
		s.iterBegan = began
	}
	if boundary {
		now := time.Now()
		obs.IterationDone(now.Sub(s.iterBegan))
		s.iterBegan = now
	}
}

// sendPartial sends the machine's contribution to its reducer, numbered seq, in chunks if it
// is large.
func (s *shard) sendPartial(ctx actor.Context, st *kernels.Step, seq uint64) {
	if !st.Init {
		s.floats += int64(len(st.Data))
	}
	segs := make([]int64, len(st.Segments))
	for i, v := range st.Segments {
		segs[i] = int64(v)
	}
	for _, c := range chunked.Split(st.Data, chunked.Floats) {
		s.meter.send(ctx, s.reducer, &messages.Partial{JobId: s.a.JobId, Epoch: s.a.Epoch, Seq: seq, Iteration: int64(st.Iteration), Init: st.Init,
			Op: int32(st.Op), Label: st.Label, Lo: s.a.Shard, Hi: s.a.Shard + 1, Segments: segs, Chunk: c})
	}
}

// takeResult takes a chunk of the awaited collective's result (the driver checked it is of
// that collective) and, when the result is whole and of the length the collective gives,
// tells the driver.
func (s *shard) takeResult(ctx actor.Context, m *messages.Reduced) {
	data, full, err := takeChunk(&s.incoming, m.Chunk, &s.meter.c)
	if err != nil {
		s.fail(ctx, fmt.Errorf("collective %d (%s): %w", m.Seq, s.pending.Label, err))
		return
	}
	if !full {
		return
	}
	if want, ok := expectedLen(s.pending, int(s.a.Shard)); ok && len(data) != want {
		s.fail(ctx, fmt.Errorf("collective %d (%s): result has %d values, want %d", m.Seq, s.pending.Label, len(data), want))
		return
	}
	s.result = data
	s.feed(ctx, jobctl.ShardDriverReduced{At: time.Now()})
}

// deliver gives the machine the awaited result.
func (s *shard) deliver() {
	if !s.pending.Init && !s.waitingSince.IsZero() {
		waited := time.Since(s.waitingSince)
		s.meter.c.WaitSeconds += waited.Seconds()
		s.waitingSince = time.Time{}
		if obs := s.node.cfg.Observer; obs != nil {
			obs.CollectiveDone(waited)
		}
	}
	s.pending = nil
	s.machine.Deliver(s.result)
	s.result = nil
}

// expectedLen is the length of a collective's result a shard expects, when it can know it.
func expectedLen(st *kernels.Step, shard int) (int, bool) {
	switch st.Op {
	case kernels.OpAllReduce:
		return len(st.Data), true
	case kernels.OpReduceScatter:
		if shard < len(st.Segments) {
			return st.Segments[shard], true
		}
	}
	return 0, false
}

// fail reports an error to the coordinator; the shard does nothing more.
func (s *shard) fail(ctx actor.Context, err error) {
	_ = s.d.Step(jobctl.ShardDriverFailed{}) // a known event: no error
	s.node.logger.Error("shard failed", slog.String("job", s.a.JobId), slog.Int64("shard", s.a.Shard), slog.Any("error", err))
	ctx.Send(s.coordinator, &messages.ShardDone{JobId: s.a.JobId, Epoch: s.a.Epoch, Shard: s.a.Shard, Error: err.Error(), Counters: proto.Clone(&s.meter.c).(*messages.Counters)})
	s.doneSent = true
}

// meter counts the messages and bytes a job actor sends, apart for initialisation and
// iterations.
type meter struct {
	c    messages.Counters
	init bool
}

func (m *meter) send(ctx actor.SenderContext, pid *actor.PID, msg proto.Message) {
	jobctl.Count(&m.c, m.init, msg)
	ctx.Send(pid, msg)
}

// maskStatsOf is a masked job's counts in wire form.
func maskStatsOf(m kernels.MaskStats) *messages.MaskStats {
	return &messages.MaskStats{Observed: m.Observed, Missing: m.Missing, Test: m.Test, ObservedSum: m.ObservedSum,
		ObservedSqNorm: m.ObservedSqNorm, TestSqNorm: m.TestSqNorm}
}
