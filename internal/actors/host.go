package actors

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/messages"
)

// host is a node's host actor: an adapter around jobctl.Host, which decides what the node
// admits, which coordinator of a job it serves, when it takes a job over or forgets it, and
// how many failures of a job's actors it restarts. The actor authenticates what reaches it,
// turns messages, its children's lives, membership events and timers into the machine's
// events, and carries out its Ready: it spawns and stops the job actors, reserves the node's
// memory (which the shards share), keeps checkpoint copies for other nodes' shards and answers
// status requests.
type host struct {
	node   *Node
	ctl    *jobctl.Host
	copies buddyCopies // checkpoint copies arriving for other nodes' shards
	watch  *eventstream.Subscription
}

// childFailed tells the host that a child panicked; the child was stopped.
type childFailed struct {
	child  *actor.PID
	reason any
}

// orphanCheck is the timer of a jobctl.HostTimer coming due.
type orphanCheck struct{ timer jobctl.HostTimer }

// hostConfig is the host machine's configuration from the node's.
func hostConfig(n *Node) jobctl.HostConfig {
	cfg := n.cfg
	return jobctl.HostConfig{Node: n.Address(), Memory: max(cfg.Memory, 0), MaxShards: max(cfg.MaxShards, 0), MaxJobs: max(cfg.MaxJobs, 0),
		OwnerMemory: max(cfg.OwnerMemory, 0), OwnerMaxShards: max(cfg.OwnerMaxShards, 0), OwnerMaxJobs: max(cfg.OwnerMaxJobs, 0),
		MaxRestarts: cfg.MaxRestarts, Orphan: cfg.Timeouts.Orphan, HistoryMax: cfg.HistoryMax, HistoryTime: cfg.HistoryTime}
}

// newHost returns the host actor of a node whose hostConfig is valid (StartNode checks it).
func newHost(n *Node) *host {
	ctl, err := jobctl.NewHost(hostConfig(n))
	if err != nil { // not after StartNode's check; the host then takes nothing
		n.logger.Error("host", slog.Any("error", err))
	}
	return &host{node: n, ctl: ctl, copies: buddyCopies{}}
}

// hostStrategy is the host's supervision: a shard or reducer that panics is restarted (a
// fresh actor under the same PID, which waits for the coordinator to roll the job back to a
// checkpoint); a coordinator that panics is stopped. Either way the host is told.
type hostStrategy struct{}

// HandleFailure implements actor.SupervisorStrategy.
func (hostStrategy) HandleFailure(system *actor.ActorSystem, supervisor actor.Supervisor, child *actor.PID,
	_ *actor.RestartStatistics, reason any, _ any) {
	system.Root.Send(actor.NewPID(system.Address(), HostName), &childFailed{child: child, reason: reason})
	if strings.HasSuffix(child.Id, coordSuffix) {
		supervisor.StopChildren(child)
		return
	}
	supervisor.RestartChildren(child)
}

// Receive implements actor.Actor.
func (h *host) Receive(ctx actor.Context) {
	if h.ctl == nil {
		return
	}
	local := callerOf(ctx).Local()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		system, self := ctx.ActorSystem(), ctx.Self()
		h.watch = system.EventStream.Subscribe(func(evt any) {
			if e, ok := evt.(cluster.Event); ok && e.Kind == cluster.EventLeave {
				system.Root.Send(self, e)
			}
		})
	case *actor.Stopped:
		if h.watch != nil {
			ctx.ActorSystem().EventStream.Unsubscribe(h.watch)
		}
	case cluster.Event:
		h.step(ctx, jobctl.HostMemberLeft{Name: m.Member.Name, Addr: m.Member.Meta.Actor})
	case *orphanCheck:
		h.step(ctx, jobctl.HostOrphanCheck{Job: m.timer.Job, Coordinator: m.timer.Coordinator, Member: h.isMember(m.timer.Coordinator)})
	case *messages.SubmitJob:
		h.submit(ctx, m)
	case *messages.ShardAssignment:
		reserve := max(m.Reserve, minShardReserve(m))
		h.step(ctx, jobctl.HostShardAssign{Assignment: m, Local: local, Ended: h.node.hasEnded(m.JobId), Reserve: reserve,
			MemoryUsed: h.node.mem.used(), OwnerHeld: h.node.owned.used(m.Owner)})
	case *messages.ReducerAssignment:
		h.step(ctx, jobctl.HostReducerAssign{Assignment: m, Local: local, Ended: h.node.hasEnded(m.JobId)})
	case *messages.StopJob:
		h.step(ctx, jobctl.HostStop{Stop: m, Local: local})
	case *messages.Buddies:
		if len(m.Shards) <= maxJobShards {
			h.step(ctx, jobctl.HostBuddies{Buddies: m, Local: local})
		}
	case *messages.JobState:
		h.step(ctx, jobctl.HostJobState{State: m})
	case *messages.JobRecord:
		if !jobctl.ValidRecord(m) {
			h.node.guard.drop(dropStalePrefix+"malformed JobRecord", 1)
			return
		}
		h.step(ctx, jobctl.HostRecord{Record: m, At: time.Now()})
	case *messages.CheckpointCopy:
		h.storeCopy(ctx, m)
	case *messages.CheckpointFetch:
		h.serveFetch(ctx, m)
	case *messages.CheckpointCommitted:
		h.step(ctx, jobctl.HostCheckpointCommitted{Commit: m})
	case *answerKept:
		if ctx.Sender() == nil || ctx.Sender().Address == ctx.Self().Address {
			h.step(ctx, jobctl.HostAnswerKept{Job: m.job, Token: m.token, Answer: m.answer, At: time.Now()})
		}
	case *messages.LeaseRenew:
		h.step(ctx, jobctl.HostLeaseRenew{Renew: m, At: time.Now()})
	case *messages.Ping:
		pong := h.status(ctx)
		pong.Nonce = m.Nonce
		h.respond(ctx, pong)
	case *messages.HostStatus:
		h.respond(ctx, h.status(ctx))
	case *messages.ListJobs:
		h.respond(ctx, h.listJobs(ctx, m))
	case *messages.CancelJob:
		// A client that knows only the job's id (node cancel): the coordinator's host checks
		// the caller owns it and passes it on.
		sub := h.ctl.Submission(m.JobId)
		if sub == nil {
			return
		}
		if !owns(ctx, sub, m.OwnerToken) {
			h.node.guard.drop(dropOwnerPrefix+"CancelJob", 1)
			return
		}
		ctx.Send(actor.NewPID(ctx.Self().Address, HostName+"/"+jobctl.CoordinatorName(m.JobId)), &cancelFor{job: m.JobId, by: canceler(callerOf(ctx), sub)})
	case *childFailed:
		h.step(ctx, jobctl.HostChildFailed{ID: m.child.Id, Reason: fmt.Sprint(m.reason)})
	case *actor.Terminated:
		h.step(ctx, jobctl.HostChildStopped{ID: m.Who.Id})
	}
}

// submit authenticates a submission and hands it to the machine: a client names only itself
// as the job's client, at the address its session proved, with the token its job id comes from.
func (h *host) submit(ctx actor.Context, m *messages.SubmitJob) {
	caller := callerOf(ctx)
	if !caller.Peer() && h.isNode(m.Client) {
		// A client that names a node's actor as itself would have this node send the job's
		// news (an error naming another job, results) to that actor, from a trusted sender.
		h.node.guard.drop(dropOwnerPrefix+"SubmitJob naming a node's actor as its client", 1)
		return
	}
	if !caller.Peer() && !sameAddress(m.Client.Address, caller.Addr) {
		// Nor any address its session did not prove (see senders): the node would dial it.
		h.node.guard.drop(dropOwnerPrefix+"SubmitJob naming a client its session did not prove", 1)
		return
	}
	if !caller.Peer() && (len(m.OwnerToken) < 16 || len(m.OwnerToken) > maxOwnerToken || m.JobId != JobIDFor(m.OwnerToken)) {
		h.node.guard.drop(dropOwnerPrefix+"SubmitJob whose id is not its owner token's", 1)
		return
	}
	ev := jobctl.HostSubmit{Submit: m, Peer: caller.Peer(), Local: caller.Local(), Caller: caller.Name}
	if err := checkSubmitted(m.Spec, h.node.cfg.Members); err != nil {
		ev.SpecError = err
	}
	h.step(ctx, ev)
}

// step feeds the machine one event and carries out what it asks.
func (h *host) step(ctx actor.Context, ev any) {
	if err := h.ctl.Step(ev); err != nil {
		h.node.logger.Error("host", slog.Any("error", err))
		return
	}
	h.perform(ctx, h.ctl.Ready())
}

// perform carries out what the machine asks, in the order of jobctl.HostReady's fields. A
// spawn that fails is stepped back at once, before anything else reaches the host.
func (h *host) perform(ctx actor.Context, rd jobctl.HostReady) {
	for _, l := range rd.Logs {
		h.node.logger.LogAttrs(context.Background(), l.Level, l.Msg, l.Attrs...)
	}
	for _, what := range rd.Drops {
		h.node.guard.drop(dropStalePrefix+what, 1)
	}
	self := ctx.Self().Address
	for _, id := range rd.Stops {
		ctx.Stop(actor.NewPID(self, id))
	}
	for _, f := range rd.Forget {
		h.forget(ctx, f)
	}
	for _, sp := range rd.Spawns {
		if _, err := ctx.SpawnNamed(h.props(sp), sp.Name); err != nil {
			h.step(ctx, jobctl.HostSpawnFailed{Name: sp.Name, Err: err.Error()})
			continue
		}
		h.node.mem.reserve(sp.Reserve)
		h.node.owned.add(sp.Owner, sp.Reserve)
		if sp.Role != messages.ActorRole_ACTOR_ROLE_REDUCER {
			// The job's actors here send its client block requests, results and news.
			h.node.senders.addJob(sp.Job, sp.Client.GetAddress(), sp.Owner)
		}
	}
	for _, s := range rd.Sends {
		ctx.Send(pidOf(s.To), s.Msg)
	}
	if rd.Reply != nil {
		h.respond(ctx, rd.Reply)
	}
	system, host := ctx.ActorSystem(), ctx.Self()
	for _, t := range rd.Timers {
		time.AfterFunc(t.After, func() { system.Root.Send(host, &orphanCheck{timer: t}) })
	}
	for _, m := range rd.Prunes {
		h.pruneCommitted(m)
	}
	for _, r := range rd.Releases {
		h.node.mem.release(r.Bytes)
		h.node.owned.add(r.Owner, -r.Bytes)
	}
	for _, job := range rd.Gone {
		h.node.senders.removeJob(job)
	}
	if rd.Idle {
		// Give the memory of ended jobs back to the system once the node has no job left.
		go debug.FreeOSMemory()
	}
}

// props are the props of an actor the machine asks for.
func (h *host) props(sp jobctl.HostSpawn) *actor.Props {
	n := h.node
	switch {
	case sp.Shard != nil:
		var starts atomic.Int32
		return n.shardProps(func() actor.Actor { return newShard(n, sp.Shard, starts.Add(1) > 1) })
	case sp.Reducer != nil:
		return n.props(func() actor.Actor { return newReducer(n, sp.Reducer) })
	case sp.Takeover != nil:
		return n.props(func() actor.Actor { return newTakeover(n, sp.Takeover, sp.Cause) })
	}
	return n.props(func() actor.Actor { return newCoordinator(n, sp.Submit) })
}

// forget stops a job's actors here and drops what the node keeps of it: checkpoint copies
// arriving, kept blocks, checkpoints; a job that ended is remembered as such.
func (h *host) forget(ctx actor.Context, f jobctl.HostForget) {
	h.node.interruptJob(f.Job)
	for _, id := range f.Actors {
		ctx.Stop(actor.NewPID(ctx.Self().Address, id))
	}
	for key := range h.copies {
		if strings.HasPrefix(key, f.Job+"/") {
			delete(h.copies, key)
		}
	}
	h.node.dropBlocks(f.Job)
	if f.Ended {
		h.node.jobEnded(f.Job)
	}
	if err := h.node.store.RemoveJob(f.Job); err != nil {
		h.node.logger.Warn("cannot remove a job's checkpoints", slog.String("job", f.Job), slog.Any("error", err))
	}
}

// coordSuffix ends the name of a job's coordinator.
const coordSuffix = "-coord"

// isMember tells whether the node at an actor address is a live member of the cluster.
func (h *host) isMember(addr string) bool {
	members := h.node.cfg.Members
	if members == nil {
		return false
	}
	for _, w := range members.Workers() {
		if w.Meta.Actor == addr {
			return true
		}
	}
	return false
}
