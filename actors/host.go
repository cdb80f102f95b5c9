package actors

import (
	"fmt"
	"log/slog"
	"regexp"
	"sort"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/messages"
)

// validJobID is the form of a job id: it becomes part of actor names.
var validJobID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// host is a node's host actor: it spawns and supervises the job actors placed on its node and
// stops them when their job ends.
type host struct {
	node     *Node
	children map[string]hostChild // by actor id
	jobs     map[string]int       // job id -> live children
	reserved int64                // bytes reserved by the shards living here
}

// hostChild is what the host knows of one of its children.
type hostChild struct {
	job, role   string
	coordinator *actor.PID
	client      *actor.PID
	reserve     int64
}

// childFailed tells the host that a child panicked; the child was stopped.
type childFailed struct {
	child  *actor.PID
	reason any
}

func newHost(n *Node) *host {
	return &host{node: n, children: map[string]hostChild{}, jobs: map[string]int{}}
}

// hostStrategy stops a failed child and tells the host, which fails the child's job (issue 5
// brings restarts from checkpoints).
type hostStrategy struct{}

// HandleFailure implements actor.SupervisorStrategy.
func (hostStrategy) HandleFailure(system *actor.ActorSystem, supervisor actor.Supervisor, child *actor.PID,
	_ *actor.RestartStatistics, reason any, _ any) {
	system.Root.Send(actor.NewPID(system.Address(), HostName), &childFailed{child: child, reason: reason})
	supervisor.StopChildren(child)
}

// Receive implements actor.Actor.
func (h *host) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.SubmitJob:
		h.submit(ctx, m)
	case *messages.ShardAssignment:
		if limit := h.node.cfg.Memory; limit > 0 && m.Reserve > limit-h.reserved {
			ctx.Send(pidOf(m.Coordinator), &messages.Placed{JobId: m.JobId, Actor: fmt.Sprintf("shard %d", m.Shard),
				Error: fmt.Sprintf("node %s has %s of its %s free, shard %d needs %s", ctx.Self().Address,
					cluster.FormatBytes(limit-h.reserved), cluster.FormatBytes(limit), m.Shard, cluster.FormatBytes(m.Reserve))})
			return
		}
		props := actor.PropsFromProducer(func() actor.Actor { return newShard(h.node, m) })
		if h.spawn(ctx, props, m.JobId, shardName(m.JobId, m.Shard), "shard", pidOf(m.Coordinator), pidOf(m.Client), max(m.Reserve, 0)) {
			h.reserved += max(m.Reserve, 0)
		}
	case *messages.ReducerAssignment:
		props := actor.PropsFromProducer(func() actor.Actor { return newReducer(h.node, m) })
		h.spawn(ctx, props, m.JobId, reducerName(m.JobId, m.Level, m.Lo), "reducer", pidOf(m.Coordinator), nil, 0)
	case *messages.StopJob:
		for id, c := range h.children {
			if c.job == m.JobId {
				ctx.Stop(actor.NewPID(ctx.Self().Address, id))
			}
		}
	case *messages.Ping:
		pong := h.status(ctx)
		pong.Nonce = m.Nonce
		ctx.Respond(pong)
	case *messages.HostStatus:
		ctx.Respond(h.status(ctx))
	case *childFailed:
		c, ok := h.children[m.child.Id]
		if !ok {
			return
		}
		h.node.logger.Error("job actor failed", slog.String("job", c.job), slog.String("actor", m.child.Id), slog.Any("reason", m.reason))
		msg := &messages.JobError{JobId: c.job, Kind: "failure",
			Message: fmt.Sprintf("%s %s on node %s failed: %v", c.role, m.child.Id, ctx.Self().Address, m.reason)}
		if c.role == "coordinator" {
			if c.client != nil {
				ctx.Send(c.client, msg)
			}
			// The coordinator cannot stop the job any more: stop its actors on this node.
			ctx.Send(ctx.Self(), &messages.StopJob{JobId: c.job})
		} else if c.coordinator != nil {
			ctx.Send(c.coordinator, msg)
		}
	case *actor.Terminated:
		if c, ok := h.children[m.Who.Id]; ok {
			delete(h.children, m.Who.Id)
			h.reserved -= c.reserve
			if h.jobs[c.job]--; h.jobs[c.job] <= 0 {
				delete(h.jobs, c.job)
			}
		}
	}
}

// submit starts a coordinator for a new job.
func (h *host) submit(ctx actor.Context, m *messages.SubmitJob) {
	client := pidOf(m.Client)
	refuse := func(format string, args ...any) {
		if client != nil {
			ctx.Send(client, &messages.JobError{JobId: m.JobId, Kind: "input", Message: fmt.Sprintf(format, args...)})
		}
	}
	if !validJobID.MatchString(m.JobId) {
		refuse("job id %q: want 1 to 64 letters, digits, '-' or '_'", m.JobId)
		return
	}
	if _, dup := h.jobs[m.JobId]; dup {
		refuse("job id %q is already in use on node %s", m.JobId, ctx.Self().Address)
		return
	}
	if m.Spec == nil {
		refuse("job %s has no spec", m.JobId)
		return
	}
	props := actor.PropsFromProducer(func() actor.Actor { return newCoordinator(h.node, m) })
	h.spawn(ctx, props, m.JobId, m.JobId+"-coord", "coordinator", nil, client, 0)
}

// status is the host's load, as Pong.
func (h *host) status(ctx actor.Context) *messages.Pong {
	ids := make([]string, 0, len(h.jobs))
	for id := range h.jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return &messages.Pong{Address: ctx.Self().Address, Jobs: int64(len(h.jobs)), Actors: int64(len(h.children)), JobIds: ids,
		Memory: h.node.cfg.Memory, Reserved: h.reserved, Capacity: int64(max(h.node.cfg.Capacity, 1)), Threads: int64(h.node.pool.Workers())}
}

// spawn starts a child of the host for a job and records it; it tells whether it did.
func (h *host) spawn(ctx actor.Context, props *actor.Props, job, name, role string, coordinator, client *actor.PID, reserve int64) bool {
	if !validJobID.MatchString(job) {
		h.node.logger.Error("dropped an assignment with a malformed job id", slog.String("job", job))
		return false
	}
	pid, err := ctx.SpawnNamed(props, name)
	if err != nil {
		h.node.logger.Error("cannot spawn a job actor", slog.String("name", name), slog.Any("error", err))
		if coordinator != nil {
			ctx.Send(coordinator, &messages.Placed{JobId: job, Actor: name, Error: fmt.Sprintf("node %s cannot start %s: %v", ctx.Self().Address, name, err)})
		} else if client != nil {
			ctx.Send(client, &messages.JobError{JobId: job, Kind: "failure", Message: fmt.Sprintf("node %s cannot start %s: %v", ctx.Self().Address, name, err)})
		}
		return false
	}
	h.children[pid.Id] = hostChild{job: job, role: role, coordinator: coordinator, client: client, reserve: reserve}
	h.jobs[job]++
	return true
}

// The names of a job's actors under their host: "<job>-s<shard>" for shards,
// "<job>-r<level>-<first shard>" for reducers, "<job>-coord" for the coordinator.
func shardName(job string, shard int64) string { return fmt.Sprintf("%s-s%d", job, shard) }

func reducerName(job string, level, lo int64) string {
	return fmt.Sprintf("%s-r%d-%d", job, level, lo)
}

// jobActor is the wire PID of a host's child on the node at address.
func jobActor(address, name string) *messages.Pid {
	return &messages.Pid{Address: address, Id: HostName + "/" + name}
}
