package actors

import (
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

// reducer is one node of a job's reduce tree. It gathers its children's partials for a
// collective, combines them in canonical order, sends the sum to its parent (or, at the root,
// straight back down) and passes the result down to its children.
type reducer struct {
	node        *Node
	a           *messages.ReducerAssignment
	children    []*actor.PID
	ranges      [][2]int64
	parent      *actor.PID
	coordinator *actor.PID
	g           *gather
	meter       meter
	head        *messages.Partial // the collective sent up, awaiting its result
	down        chunked.Assembly[float64]
	failed      bool
}

func newReducer(n *Node, a *messages.ReducerAssignment) *reducer {
	return &reducer{node: n, a: a, parent: pidOf(a.Parent), coordinator: pidOf(a.Coordinator)}
}

// Receive implements actor.Actor.
func (r *reducer) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		placed := &messages.Placed{JobId: r.a.JobId, Actor: fmt.Sprintf("reducer [%d, %d)", r.a.Lo, r.a.Hi), Pid: wirePid(ctx.Self()), Epoch: r.a.Epoch}
		if err := r.build(); err != nil {
			placed.Error = err.Error()
		}
		ctx.Send(r.coordinator, placed)
	case *messages.Partial:
		r.partial(ctx, m)
	case *messages.Reduced:
		r.reduced(ctx, m)
	case *messages.StopJob:
		if m.JobId == r.a.JobId {
			ctx.Send(r.coordinator, &messages.ReducerDone{JobId: r.a.JobId, Epoch: r.a.Epoch, Lo: r.a.Lo, Hi: r.a.Hi, Level: r.a.Level, Counters: proto.Clone(&r.meter.c).(*messages.Counters)})
			ctx.Stop(ctx.Self())
		}
	}
}

func (r *reducer) build() error {
	a := r.a
	if len(a.ChildRanges) != 2*len(a.Children) || len(a.Children) == 0 {
		return fmt.Errorf("reducer [%d, %d): malformed assignment (%d children, %d range bounds)", a.Lo, a.Hi, len(a.Children), len(a.ChildRanges))
	}
	prev := a.Lo
	for i, c := range a.Children {
		lo, hi := a.ChildRanges[2*i], a.ChildRanges[2*i+1]
		if lo != prev || hi <= lo || hi > a.Hi {
			return fmt.Errorf("reducer [%d, %d): child %d covers [%d, %d), not contiguous", a.Lo, a.Hi, i, lo, hi)
		}
		prev = hi
		r.children = append(r.children, pidOf(c))
		r.ranges = append(r.ranges, [2]int64{lo, hi})
	}
	if prev != a.Hi {
		return fmt.Errorf("reducer [%d, %d): children end at %d", a.Lo, a.Hi, prev)
	}
	r.g = newGather(a.Epoch, r.ranges)
	return nil
}

// partial takes a child's contribution.
func (r *reducer) partial(ctx actor.Context, m *messages.Partial) {
	if r.g == nil || r.failed {
		return
	}
	if m.JobId != r.a.JobId {
		r.meter.c.Stale++
		r.node.logger.Warn("dropped a partial of another job", slog.String("job", m.JobId), slog.String("reducer job", r.a.JobId))
		return
	}
	st, err := r.g.offer(m)
	switch st {
	case offerDuplicate:
		r.meter.c.Duplicates++
		return
	case offerStale:
		r.meter.c.Stale++
		if err != nil {
			if isCorruption(err) {
				r.fail(ctx, err)
				return
			}
			r.node.logger.Warn("dropped a partial", slog.String("job", r.a.JobId), slog.Any("error", err))
		}
		return
	case offerAccepted:
		return
	}
	head, data, err := r.g.combine()
	if err != nil {
		r.fail(ctx, err)
		return
	}
	r.node.hooks.reducerCombined(r.a.Lo, r.a.Hi, head.Iteration, head.Init)
	r.meter.init = head.Init
	if r.parent != nil {
		r.head = head
		for _, c := range chunked.Split(data, chunked.Floats) {
			r.meter.send(ctx, r.parent, &messages.Partial{JobId: r.a.JobId, Epoch: r.a.Epoch, Seq: head.Seq, Iteration: head.Iteration,
				Init: head.Init, Op: head.Op, Label: head.Label, Lo: r.a.Lo, Hi: r.a.Hi, Segments: head.Segments, Chunk: c})
		}
		return
	}
	if head.Init {
		r.meter.c.InitReductions++
	} else {
		r.meter.c.Reductions++
	}
	r.sendDown(ctx, head, data)
}

// reduced takes (a chunk of) a result from the parent and passes it down when complete.
func (r *reducer) reduced(ctx actor.Context, m *messages.Reduced) {
	if r.failed {
		return
	}
	if m.JobId != r.a.JobId || m.Epoch != r.a.Epoch || r.head == nil || m.Seq != r.head.Seq || m.Lo != r.a.Lo || m.Hi != r.a.Hi {
		r.meter.c.Stale++
		return
	}
	data, full, err := takeChunk(&r.down, m.Chunk, &r.meter.c)
	if err != nil {
		r.fail(ctx, fmt.Errorf("result of collective %d: %w", m.Seq, err))
		return
	}
	if !full {
		return
	}
	head := r.head
	r.head = nil
	r.sendDown(ctx, head, data)
}

// sendDown sends a collective's result to the children: all of it, or for reduce-scatter each
// child's segments. Children on other nodes come first: a child on this node starts its next
// step as soon as it has its result, and its kernels would hold the processors that the
// messages to the others wait for.
func (r *reducer) sendDown(ctx actor.Context, head *messages.Partial, data []float64) {
	r.meter.init = head.Init
	self := ctx.Self().Address
	for _, remote := range []bool{true, false} {
		for i, child := range r.children {
			if (child.Address != self) == remote {
				if !r.sendChild(ctx, head, data, i, child) {
					return
				}
			}
		}
	}
}

// sendChild sends child i its part of a collective's result; false when the job failed.
func (r *reducer) sendChild(ctx actor.Context, head *messages.Partial, data []float64, i int, child *actor.PID) bool {
	lo, hi := r.ranges[i][0], r.ranges[i][1]
	part := data
	if kernels.Op(head.Op) == kernels.OpReduceScatter {
		var err error
		if part, err = segmentSlice(data, head.Segments, r.a.Lo, lo, hi); err != nil {
			r.fail(ctx, fmt.Errorf("collective %d (%s): %w", head.Seq, head.Label, err))
			return false
		}
	}
	for _, c := range chunked.Split(part, chunked.Floats) {
		r.meter.send(ctx, child, &messages.Reduced{JobId: r.a.JobId, Epoch: r.a.Epoch, Seq: head.Seq, Lo: lo, Hi: hi, Chunk: c})
	}
	return true
}

// fail reports an error that breaks the job to the coordinator.
func (r *reducer) fail(ctx actor.Context, err error) {
	r.failed = true
	r.node.logger.Error("reducer failed", slog.String("job", r.a.JobId), slog.Any("error", err))
	ctx.Send(r.coordinator, &messages.JobError{JobId: r.a.JobId, Kind: KindFailure,
		Message: fmt.Sprintf("reducer [%d, %d) on node %s: %v", r.a.Lo, r.a.Hi, ctx.Self().Address, err)})
}
