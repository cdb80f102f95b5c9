package actors

import (
	"context"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/messages"
)

// coordinator is the actor around a job's control (jobctl.Job): it authenticates what
// reaches it, feeds the control the job's messages, membership events, its clock and the
// completions of what it runs outside its mailbox (the job's setup, pings, output commits),
// and carries out what the control asks for. Every decision is the control's.
type coordinator struct {
	node *Node
	sub  *messages.SubmitJob
	job  string
	spec *jobspec.Spec
	ctl  *jobctl.Job
	// refused: the job ended before it started, its spec or its data refused (the submitter
	// heard why), so it leaves no error.json in its --out-shared directory.
	refused bool

	watch *eventstream.Subscription // membership events, on a cluster
	// ticks stops the coordinator's clock and its goroutines' sends when it stops.
	ticks chan struct{}

	// takeover is the replicated state of a job this coordinator takes over (nil: a new job),
	// takeoverCause why.
	takeover      *messages.JobState
	takeoverCause string
}

// coordTick is the coordinator's clock: once a second the control checks the client's lease
// and the node's time cap.
type coordTick struct{}

// ctlEvent is the completion of something the coordinator ran outside its mailbox, for the
// control (jobctl.Pongs, TimerFired, OutputCommitted).
type ctlEvent struct{ event any }

func newCoordinator(n *Node, sub *messages.SubmitJob) *coordinator {
	return &coordinator{node: n, sub: sub, job: sub.JobId}
}

// newTakeover is the coordinator a standby node starts for a job whose coordinator's node
// left or died (cause says so), from the job state the old coordinator replicated to it.
func newTakeover(n *Node, st *messages.JobState, cause string) *coordinator {
	c := newCoordinator(n, st.Submit)
	c.takeover, c.takeoverCause = st, cause
	return c
}

// Receive implements actor.Actor.
func (c *coordinator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		c.started(ctx)
	case *actor.Stopped:
		if c.watch != nil {
			ctx.ActorSystem().EventStream.Unsubscribe(c.watch)
		}
		close(c.ticks)
		c.node.board.remove(c.job)
		c.node.placing.Release(c.job, time.Now()) // an ended job weighs on no later placement
		return
	case coordTick:
		c.step(ctx, jobctl.Tick{})
	case *setupDone:
		if _, ok := m.event.(jobctl.Abort); ok {
			c.refused = true
		}
		c.step(ctx, m.event)
	case *ctlEvent:
		c.step(ctx, m.event)
	case cluster.Event:
		if m.Kind == cluster.EventJoin || m.Kind == cluster.EventLeave {
			c.step(ctx, c.memberEvent(m))
		}
	case *messages.LeaseRenew:
		if m.JobId != c.job {
			return
		}
		if !owns(ctx, c.sub, m.OwnerToken) {
			c.node.guard.drop(dropOwnerPrefix+"LeaseRenew", 1)
			return
		}
		if ctx.Sender() != nil {
			ctx.Respond(&messages.LeaseAck{JobId: c.job})
		}
		c.step(ctx, jobctl.LeaseRenewed{})
	case *messages.CancelJob:
		if m.JobId != c.job {
			return
		}
		if !owns(ctx, c.sub, m.OwnerToken) {
			c.node.guard.drop(dropOwnerPrefix+"CancelJob", 1)
			return
		}
		c.step(ctx, jobctl.Cancel{By: canceler(callerOf(ctx), c.sub)})
	case *cancelFor:
		// Its host passes on a cancel it checked (a local message: no remote party sends one).
		if m.job == c.job {
			c.step(ctx, jobctl.Cancel{By: m.by})
		}
	case *messages.Placed, *messages.IterationDone, *messages.ShardDone, *messages.ReducerDone, *messages.CheckpointDone,
		*messages.ActorFailed, *messages.JobError:
		c.step(ctx, m)
	}
}

// started builds the control and begins the job: a new one after its setup, which runs
// outside the mailbox; a taken-over one at once.
func (c *coordinator) started(ctx actor.Context) {
	c.watchMembers(ctx)
	c.startClock(ctx)
	spec, err := jobspec.FromWire(c.sub.Spec)
	cfg := jobctl.Config{Self: wirePid(ctx.Self()), Cluster: c.node.cfg.Members != nil, Lease: c.node.cfg.Lease,
		MaxJobTime: c.node.cfg.MaxJobTime, QuorumWait: c.node.cfg.Timeouts.Quorum, ReportInterval: jobctl.ShardDriverReportInterval, FanIn: jobspec.DefaultFanIn,
		StallTimeout: c.node.cfg.Timeouts.Stall, Submitted: time.Now()}
	if err == nil {
		c.spec = spec
		cfg.FanIn, cfg.TimeLimit = spec.FanIn, spec.Stop.TimeLimit
	}
	ctl, cfgErr := jobctl.New(cfg, c.sub)
	if cfgErr != nil {
		// A configuration the node made wrong: the client hears why, and the coordinator stops.
		c.node.logger.Error("coordinator", slog.String("job", c.job), slog.Any("error", cfgErr))
		ctx.Send(pidOf(c.sub.GetClient()), &messages.JobError{JobId: c.job, Kind: KindFailure, Message: "coordinator: " + cfgErr.Error()})
		ctx.Stop(ctx.Self())
		return
	}
	c.ctl = ctl
	switch {
	case err != nil && c.takeover != nil:
		c.step(ctx, jobctl.Abort{Kind: KindFailure, Message: c.takeoverCause + "; taking the job over: " + err.Error()})
	case err != nil:
		c.refused = true
		c.step(ctx, jobctl.Abort{Kind: KindInput, Message: err.Error(), Err: err})
	case c.takeover != nil:
		c.step(ctx, jobctl.TakeOver{State: c.takeover, Cause: c.takeoverCause, Workers: c.workers()})
	default:
		system, self, addr, hooks := ctx.ActorSystem(), ctx.Self(), ctx.Self().Address, c.node.hooks
		go func() {
			hooks.setupBegins(c.job)
			system.Root.Send(self, &setupDone{event: c.setup(system, addr)})
		}()
	}
}

// step feeds the control one event, now, and carries out what it asks.
func (c *coordinator) step(ctx actor.Context, ev any) {
	if c.ctl == nil {
		return
	}
	if err := c.ctl.Step(time.Now(), ev); err != nil {
		c.node.logger.Error("coordinator", slog.String("job", c.job), slog.Any("error", err))
	}
	c.apply(ctx, c.ctl.Ready())
}

// apply carries out what the control asks: sends in order, logs and the job board at once;
// pings, timers and file work outside the mailbox, their completions coming back as events.
func (c *coordinator) apply(ctx actor.Context, rd jobctl.Ready) {
	for _, s := range rd.Sends {
		if !c.node.hooks.coordinatorSends(s.Msg) {
			ctx.Send(pidOf(s.To), s.Msg)
		}
	}
	for _, l := range rd.Logs {
		c.node.logger.LogAttrs(context.Background(), l.Level, l.Msg, l.Attrs...)
	}
	if rd.Info != nil {
		c.node.board.set(rd.Info)
	}
	if obs := c.node.cfg.Observer; obs != nil {
		for _, why := range rd.Recoveries {
			obs.RecoveryBegan(why)
		}
	}
	system, self, stop := ctx.ActorSystem(), ctx.Self(), c.ticks
	back := func(ev any) {
		select {
		case <-stop:
		default:
			system.Root.Send(self, &ctlEvent{event: ev})
		}
	}
	if p := rd.Pings; p != nil {
		timeout := c.node.cfg.Timeouts.Ping
		go func() {
			pongs, _ := ping(system, p.Nodes, timeout)
			back(jobctl.Pongs{Epoch: p.Epoch, Nodes: p.Nodes, Pongs: pongs})
		}()
	}
	for _, t := range rd.Timers {
		time.AfterFunc(t.After, func() { back(jobctl.TimerFired{Timer: t}) })
	}
	if cm := rd.Commit; cm != nil {
		go func() { back(jobctl.OutputCommitted{Err: c.commitOutput(cm)}) }()
	}
	roots, job, logger, wire := c.node.cfg.Roots, c.job, c.node.logger, c.sub.GetSpec()
	failed := rd.Record != nil && rd.Record.State != messages.JobPhase_JOB_PHASE_DONE && wire.GetDetached() && wire.GetOutShared() != "" && !c.refused
	removed := rd.RemovePartials && c.spec != nil && c.spec.OutShared != ""
	// An overwrite job that committed its outputs replaced the directory's results: an
	// error.json there tells of a job they no longer come from.
	stale := rd.Record != nil && rd.Record.State == messages.JobPhase_JOB_PHASE_DONE && wire.GetOverwrite() && wire.GetOutShared() != ""
	if stale {
		go func() {
			if err := removeStaleErrorFile(roots, wire.GetOutShared()); err != nil {
				logger.Warn("cannot remove a stale error.json", slog.String("job", job), slog.Any("error", err))
			}
		}()
	}
	if failed || removed {
		rec := rd.Record
		go func() {
			if removed {
				removePartials(roots, c.spec.OutShared, job)
			}
			if failed {
				// A detached job has no client to tell: its directory says why it ended.
				if err := writeErrorFile(roots, wire.GetOutShared(), job, rec, wire.GetOverwrite()); err != nil {
					logger.Warn("cannot write the failed job's error.json", slog.String("job", job), slog.Any("error", err))
				}
			}
		}()
	}
	if rd.Over {
		c.node.board.remove(c.job)
		if a := c.ctl.Answer(); a != nil {
			ctx.Send(c.node.host, &answerKept{job: c.job, token: c.sub.GetOwnerToken(), answer: a})
		}
		ctx.Stop(ctx.Self())
	}
}

// startClock starts the coordinator's ticks; they stop when it stops.
func (c *coordinator) startClock(ctx actor.Context) {
	c.ticks = make(chan struct{})
	system, self, stop := ctx.ActorSystem(), ctx.Self(), c.ticks
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				system.Root.Send(self, coordTick{})
			}
		}
	}()
}

// watchMembers subscribes the coordinator to the membership events its node publishes on its
// event stream (see server), so that a job whose node leaves or dies recovers at once instead
// of waiting for messages that will never come.
func (c *coordinator) watchMembers(ctx actor.Context) {
	system, self := ctx.ActorSystem(), ctx.Self()
	c.watch = system.EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(cluster.Event); ok {
			system.Root.Send(self, e)
		}
	})
}

// workers are the cluster's live workers' actor addresses (none outside a cluster).
func (c *coordinator) workers() []string {
	members := c.node.cfg.Members
	if members == nil {
		return nil
	}
	var out []string
	for _, w := range members.Workers() {
		out = append(out, w.Meta.Actor)
	}
	return out
}

// memberEvent is a membership event as the control takes it.
func (c *coordinator) memberEvent(e cluster.Event) jobctl.MemberEvent {
	return jobctl.MemberEvent{Join: e.Kind == cluster.EventJoin, Dead: e.Dead, Worker: e.Member.Meta.Role == cluster.RoleMember,
		Name: e.Member.Name, Addr: e.Member.Meta.Actor, Workers: c.workers()}
}
