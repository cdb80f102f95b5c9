package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/messages"
)

// reducer is one node of a job's reduce tree: an adapter around a jobctl.Reducer, which
// decides; the actor hands it the messages it receives and sends what it says.
type reducer struct {
	node *Node
	a    *messages.ReducerAssignment
	r    *jobctl.Reducer
}

func newReducer(n *Node, a *messages.ReducerAssignment) *reducer {
	return &reducer{node: n, a: a}
}

// Receive implements actor.Actor.
func (r *reducer) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		placed := &messages.Placed{JobId: r.a.JobId, Actor: fmt.Sprintf("reducer [%d, %d)", r.a.Lo, r.a.Hi), Pid: wirePid(ctx.Self()), Epoch: r.a.Epoch}
		var err error
		if r.r, err = jobctl.NewReducer(r.a, ctx.Self().Address, 0); err != nil {
			placed.Error = err.Error()
		}
		ctx.Send(pidOf(r.a.Coordinator), placed)
	case *messages.Partial, *messages.Reduced, *messages.StopJob:
		if err := r.r.Step(m); err != nil {
			r.node.logger.Error("reducer", "error", err)
			return
		}
		r.perform(ctx, r.r.Ready())
	}
}

// perform does what the reducer's machine asks, in order.
func (r *reducer) perform(ctx actor.Context, rd jobctl.ReducerReady) {
	for _, l := range rd.Logs {
		r.node.logger.LogAttrs(context.Background(), l.Level, l.Msg, l.Attrs...)
	}
	if c := rd.Combined; c != nil {
		r.node.hooks.reducerCombined(r.a.Lo, r.a.Hi, c.Iteration, c.Init)
	}
	for _, s := range rd.Sends {
		ctx.Send(pidOf(s.To), s.Msg)
	}
	if rd.Stopped {
		ctx.Stop(ctx.Self())
	}
}
