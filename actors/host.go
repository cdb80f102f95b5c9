package actors

import (
	"fmt"
	"log/slog"
	"net/netip"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/didnmf/didnmf/internal/cpuusage"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/jobctl"
	"github.com/didnmf/didnmf/messages"
)

// jobIDForm is the form of a job id (a regular expression): it becomes part of actor names.
// isJobID checks it; the tests hold the two to each other.
const jobIDForm = `[A-Za-z0-9_-]{1,64}`

// isJobID reports whether s is a job id (jobIDForm): 1 to 64 letters, digits, '_' or '-'.
// It runs on every frame of the data plane (isDataTarget), so it is no regular expression.
func isJobID(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// host is a node's host actor: it spawns and supervises the job actors placed on its node and
// stops them when their job ends.
type host struct {
	node     *Node
	children map[string]hostChild // by actor id
	jobs     map[string]int       // job id -> live children
	copies   buddyCopies          // checkpoint copies arriving for other nodes' shards
	// coordinators is each job's coordinator as the latest assignment named it.
	coordinators map[string]*actor.PID
	// failures counts each job's actor panics on this node, against maxRestarts.
	failures map[string]int
	// standby holds the state of jobs this node takes over if their coordinator's node dies.
	standby map[string]*messages.JobState
	// epochs is the latest epoch of each job's assignments here: a StopJob from an earlier
	// coordinator (superseded by a takeover) is ignored.
	epochs map[string]uint64
	watch  *eventstream.Subscription
	// submits is the submission of each job coordinated here; owners the owner's name of
	// each job with actors here (a client sees only its own).
	submits map[string]*messages.SubmitJob
	owners  map[string]string
	shards  int // shard actors living here
	// buddyOf is, for each job, the shards whose checkpoint copies this node keeps (as the
	// coordinator's latest Buddies said, at buddyEpoch).
	buddyOf    map[string]map[int64]bool
	buddyEpoch map[string]uint64
	every      map[string]int64 // each job's checkpoint interval (negative: automatic)
	// answers are the answers of jobs that ended here, for clients that did not get them.
	answers map[string]keptAnswer
	// book counts what each owner holds here, against its quotas (see quota.go).
	book ownerBook
}

// maxRestarts is how many panics of a job's actors a host restarts; past it the job fails.
const maxRestarts = 20

// hostChild is what the host knows of one of its children.
type hostChild struct {
	job         string
	role        messages.ActorRole
	coordinator *actor.PID
	client      *actor.PID
	reserve     int64
	epoch       uint64
}

// childFailed tells the host that a child panicked; the child was stopped.
type childFailed struct {
	child  *actor.PID
	reason any
}

func newHost(n *Node) *host {
	return &host{node: n, children: map[string]hostChild{}, jobs: map[string]int{}, copies: buddyCopies{},
		coordinators: map[string]*actor.PID{}, failures: map[string]int{}, standby: map[string]*messages.JobState{},
		epochs: map[string]uint64{}, submits: map[string]*messages.SubmitJob{}, owners: map[string]string{},
		buddyOf: map[string]map[int64]bool{}, buddyEpoch: map[string]uint64{}, every: map[string]int64{}, answers: map[string]keptAnswer{}}
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
		h.onMemberLeft(ctx, m)
	case *messages.SubmitJob:
		h.submit(ctx, m)
	case *messages.CheckpointCopy:
		h.storeCopy(ctx, m)
	case *messages.Buddies:
		if isJobID(m.JobId) && m.Epoch >= h.buddyEpoch[m.JobId] && len(m.Shards) <= maxJobShards &&
			h.fromJobsCoordinator(ctx, "Buddies", m.JobId, m.Coordinator, m.Epoch) {
			h.coordinators[m.JobId] = pidOf(m.Coordinator)
			set := make(map[int64]bool, len(m.Shards))
			for _, s := range m.Shards {
				set[s] = true
			}
			h.buddyOf[m.JobId], h.buddyEpoch[m.JobId], h.every[m.JobId] = set, m.Epoch, m.CheckpointEvery
		}
	case *messages.CheckpointFetch:
		h.serveFetch(ctx, m)
	case *messages.CheckpointCommitted:
		h.pruneCommitted(m)
	case *messages.JobState:
		if m.Submit != nil && isJobID(m.Submit.JobId) {
			if old := h.standby[m.Submit.JobId]; old == nil || old.Epoch <= m.Epoch {
				h.standby[m.Submit.JobId] = m
			}
		}
	case *messages.ShardAssignment:
		if !h.fromJobsCoordinator(ctx, "assignment", m.JobId, m.Coordinator, m.Epoch) {
			return
		}
		if h.node.hasEnded(m.JobId) {
			ctx.Send(pidOf(m.Coordinator), &messages.Placed{JobId: m.JobId, Actor: fmt.Sprintf("shard %d", m.Shard), Epoch: m.Epoch, Ended: true})
			return
		}
		if m.Epoch < h.epochs[m.JobId] {
			// From a superseded coordinator: the shard tells it so, if it lives here.
			ctx.Send(actor.NewPID(ctx.Self().Address, HostName+"/"+jobctl.ShardName(m.JobId, m.Shard)), m)
			return
		}
		h.epochs[m.JobId] = m.Epoch
		h.coordinators[m.JobId] = pidOf(m.Coordinator)
		name := jobctl.ShardName(m.JobId, m.Shard)
		if c, ok := h.children[HostName+"/"+name]; ok && c.job == m.JobId {
			// The shard lives here: a recovery rolls it back in place, keeping its block.
			c.epoch = m.Epoch
			c.coordinator = pidOf(m.Coordinator)
			h.children[HostName+"/"+name] = c
			ctx.Send(actor.NewPID(ctx.Self().Address, HostName+"/"+name), m)
			return
		}
		reserve := max(m.Reserve, minShardReserve(m))
		if err := h.admitShard(m, reserve); err != "" {
			ctx.Send(pidOf(m.Coordinator), &messages.Placed{JobId: m.JobId, Actor: fmt.Sprintf("shard %d", m.Shard), Epoch: m.Epoch, Error: err})
			return
		}
		var starts atomic.Int32
		props := h.node.shardProps(func() actor.Actor { return newShard(h.node, m, starts.Add(1) > 1) })
		if h.spawn(ctx, props, m.JobId, name, messages.ActorRole_ACTOR_ROLE_SHARD, pidOf(m.Coordinator), pidOf(m.Client), reserve, m.Epoch) {
			h.node.mem.reserve(reserve)
			h.shards++
			h.hold(HostName+"/"+name, m.Owner, m.JobId, true, reserve)
			if m.Owner != "" {
				h.owners[m.JobId] = m.Owner
			}
			// The job's shards send its client block requests and results.
			h.node.senders.addJob(m.JobId, m.Client.GetAddress(), m.Owner)
		}
	case *messages.ReducerAssignment:
		if !h.fromJobsCoordinator(ctx, "assignment", m.JobId, m.Coordinator, m.Epoch) {
			return
		}
		if h.node.hasEnded(m.JobId) {
			ctx.Send(pidOf(m.Coordinator), &messages.Placed{JobId: m.JobId, Actor: fmt.Sprintf("reducer [%d, %d)", m.Lo, m.Hi), Epoch: m.Epoch, Ended: true})
			return
		}
		if m.Epoch < h.epochs[m.JobId] {
			return // from a superseded coordinator
		}
		h.epochs[m.JobId] = m.Epoch
		h.coordinators[m.JobId] = pidOf(m.Coordinator)
		// A reducer of an earlier epoch belongs to a tree a recovery replaced.
		for id, c := range h.children {
			if c.job == m.JobId && c.role == messages.ActorRole_ACTOR_ROLE_REDUCER && c.epoch < m.Epoch {
				ctx.Stop(actor.NewPID(ctx.Self().Address, id))
			}
		}
		props := h.node.props(func() actor.Actor { return newReducer(h.node, m) })
		h.spawn(ctx, props, m.JobId, jobctl.ReducerName(m.JobId, m.Epoch, m.Level, m.Lo), messages.ActorRole_ACTOR_ROLE_REDUCER, pidOf(m.Coordinator), nil, 0, m.Epoch)
	case *messages.StopJob:
		if m.Epoch != 0 && m.Epoch < h.epochs[m.JobId] {
			return // a superseded coordinator ending: the job goes on under its successor
		}
		if !h.fromJobsCoordinator(ctx, "StopJob", m.JobId, m.Coordinator, m.Epoch) {
			return
		}
		h.stopJob(ctx, m.JobId, true)
	case *orphanCheck:
		h.checkOrphan(ctx, m)
	case *answerKept:
		if ctx.Sender() == nil || ctx.Sender().Address == ctx.Self().Address {
			h.keepAnswer(m)
		}
	case *messages.LeaseRenew:
		h.answerAgain(ctx, m)
	case *messages.Ping:
		pong := h.status(ctx)
		pong.Nonce = m.Nonce
		h.respond(ctx, pong)
	case *messages.HostStatus:
		h.respond(ctx, h.status(ctx))
	case *messages.ListJobs:
		caller := callerOf(ctx)
		h.respond(ctx, &messages.JobList{Address: ctx.Self().Address, Jobs: h.node.board.list(func(j *messages.JobInfo) bool {
			return caller.Peer() || j.Owner == caller.Name
		})})
	case *messages.CancelJob:
		// A client that knows only the job's id (node cancel): the coordinator's host checks
		// the caller owns it and passes it on.
		sub := h.submits[m.JobId]
		if sub == nil {
			return
		}
		if !owns(ctx, sub, m.OwnerToken) {
			h.node.guard.drop(dropOwnerPrefix+"CancelJob", 1)
			return
		}
		ctx.Send(actor.NewPID(ctx.Self().Address, HostName+"/"+m.JobId+coordSuffix), &messages.CancelJob{JobId: m.JobId, OwnerToken: sub.OwnerToken})
	case *childFailed:
		c, ok := h.children[m.child.Id]
		if !ok {
			return
		}
		h.node.logger.Error("job actor failed", slog.String("job", c.job), slog.String("actor", m.child.Id), slog.Any("reason", m.reason))
		msg := &messages.JobError{JobId: c.job, Kind: KindFailure,
			Message: fmt.Sprintf("%s %s on node %s failed: %v", c.role.Name(), m.child.Id, ctx.Self().Address, m.reason)}
		if c.role != messages.ActorRole_ACTOR_ROLE_COORDINATOR {
			coord := h.coordinators[c.job]
			if h.failures[c.job]++; h.failures[c.job] > maxRestarts {
				msg.Message += fmt.Sprintf(" (%d failures of this job's actors on this node: not restarting any more)", h.failures[c.job])
				ctx.Stop(m.child)
				ctx.Send(coord, msg)
				return
			}
			failed := &messages.ActorFailed{JobId: c.job, Actor: m.child.Id, Node: ctx.Self().Address,
				Reason: fmt.Sprint(m.reason), Role: c.role}
			if c.role == messages.ActorRole_ACTOR_ROLE_SHARD {
				failed.Shard = shardOf(m.child.Id)
			}
			ctx.Send(coord, failed)
			return
		}
		if c.role == messages.ActorRole_ACTOR_ROLE_COORDINATOR {
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
			h.unhold(m.Who.Id)
			h.node.mem.release(c.reserve)
			if c.role == messages.ActorRole_ACTOR_ROLE_SHARD {
				h.shards--
			}
			if h.jobs[c.job]--; h.jobs[c.job] <= 0 {
				delete(h.jobs, c.job)
				delete(h.owners, c.job)
				h.node.senders.removeJob(c.job)
				delete(h.submits, c.job)
				if len(h.jobs) == 0 {
					h.idle()
				}
			}
		}
	}
}

// submit starts a coordinator for a new job.
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
	client := pidOf(m.Client)
	refuse := func(format string, args ...any) {
		if client != nil {
			ctx.Send(client, &messages.JobError{JobId: m.JobId, Kind: KindInput, Message: fmt.Sprintf(format, args...)})
		}
	}
	if !isJobID(m.JobId) {
		refuse("job id %q: want 1 to 64 letters, digits, '-' or '_'", m.JobId)
		return
	}
	if h.knows(m.JobId) {
		if caller.Peer() {
			refuse("job id %q is already in use on node %s", m.JobId, ctx.Self().Address)
		} else { // a client's id comes from its token: the same id is the same submission again
			h.node.guard.drop(dropStalePrefix+"SubmitJob of a job the node has", 1)
		}
		return
	}
	if err := checkSubmitted(m.Spec, h.node.cfg.Members); err != nil {
		refuse("%v", err)
		return
	}
	if max := h.node.cfg.MaxJobs; max > 0 && len(h.jobs) >= max {
		refuse("node %s runs %d jobs, its limit (serve --max-jobs): try again later", ctx.Self().Address, len(h.jobs))
		return
	}
	m.Owner = caller.Name // who the guard authenticated, whatever the message says
	if caller.Local() {
		m.Owner = "local"
	}
	if err := h.admitOwnerJob(m.Owner); err != "" {
		refuse("%s", err)
		return
	}
	props := h.node.props(func() actor.Actor { return newCoordinator(h.node, m) })
	if h.spawn(ctx, props, m.JobId, m.JobId+coordSuffix, messages.ActorRole_ACTOR_ROLE_COORDINATOR, nil, client, 0, 0) {
		h.hold(HostName+"/"+m.JobId+coordSuffix, m.Owner, m.JobId, false, 0)
		h.submits[m.JobId] = m
		h.owners[m.JobId] = m.Owner
		h.node.senders.addJob(m.JobId, m.Client.GetAddress(), m.Owner)
	}
}

// respond answers a request; a client's request is answered only if it names no node's
// actor as its sender (it would have this node answer a future of a node, trusted).
func (h *host) respond(ctx actor.Context, msg any) {
	if s := ctx.Sender(); !callerOf(ctx).Peer() && (s == nil || h.isNode(wirePid(s))) {
		h.node.guard.drop(dropOwnerPrefix+"request naming a node's actor as its sender", 1)
		return
	}
	ctx.Respond(msg)
}

// isNode tells whether a PID is missing, has an address that is not a literal ip:port, or
// names an actor of this node or of a member of the cluster (compared as parsed addresses,
// whatever their spelling).
func (h *host) isNode(p *messages.Pid) bool {
	if p == nil {
		return true
	}
	addr, err := netip.ParseAddrPort(p.Address)
	if err != nil {
		return true // not a literal ip:port
	}
	same := func(a string) bool {
		b, err := netip.ParseAddrPort(a)
		return err == nil && b.Addr().Unmap() == addr.Addr().Unmap() && b.Port() == addr.Port()
	}
	if same(h.node.Address()) {
		return true
	}
	if members := h.node.cfg.Members; members != nil {
		for _, w := range members.Workers() {
			if same(w.Meta.Actor) {
				return true
			}
		}
	}
	return false
}

// fromJobsCoordinator tells whether a message about a job (what it is, for the drop
// counter) may be taken: from the job's coordinator (see fromCoordinator), or from this host
// itself (a message of this process that names no coordinator). Otherwise it is counted as
// dropped.
func (h *host) fromJobsCoordinator(ctx actor.Context, what, job string, coord *messages.Pid, epoch uint64) bool {
	if coord == nil && callerOf(ctx).Local() || h.fromCoordinator(job, coord, epoch) {
		return true
	}
	h.node.guard.drop(dropStalePrefix+what+" from another coordinator than the job's", 1)
	return false
}

// fromCoordinator tells whether a message about a job comes from the coordinator this node
// knows for it: any coordinator if the node knows none, the same one, or one of a later
// epoch (a recovery or a takeover). A coordinator of another job under the same id is not.
func (h *host) fromCoordinator(job string, coord *messages.Pid, epoch uint64) bool {
	known, at := h.coordinators[job], max(h.epochs[job], h.buddyEpoch[job])
	if st := h.standby[job]; st != nil {
		if known == nil {
			known = pidOf(st.Coordinator)
		}
		at = max(at, st.Epoch)
	}
	if known == nil || epoch > at {
		return true
	}
	return coord != nil && coord.Address == known.Address && coord.Id == known.Id
}

// knows tells whether the node has anything of a job: actors, standby state, assignments.
func (h *host) knows(job string) bool {
	_, a := h.jobs[job]
	_, b := h.standby[job]
	_, c := h.epochs[job]
	return a || b || c
}

// admitShard checks a shard assignment against the node's limits, whoever sent it: memory,
// shards and jobs; then against its owner's quotas (see admitOwnerShard). It returns why the
// shard cannot be placed here, or "".
func (h *host) admitShard(m *messages.ShardAssignment, reserve int64) string {
	cfg, addr := h.node.cfg, h.node.Address()
	if limit := cfg.Memory; limit > 0 && reserve > limit-h.node.mem.used() {
		return fmt.Sprintf("node %s has %s of its %s free, shard %d needs %s", addr,
			cluster.FormatBytes(max(limit-h.node.mem.used(), 0)), cluster.FormatBytes(limit), m.Shard, cluster.FormatBytes(reserve))
	}
	if max := cfg.MaxShards; max > 0 && h.shards >= max {
		return fmt.Sprintf("node %s holds %d shards, its limit (serve --max-shards)", addr, h.shards)
	}
	if _, running := h.jobs[m.JobId]; !running && cfg.MaxJobs > 0 && len(h.jobs) >= cfg.MaxJobs {
		return fmt.Sprintf("node %s runs %d jobs, its limit (serve --max-jobs)", addr, len(h.jobs))
	}
	return h.admitOwnerShard(m.Owner, m.JobId, m.Shard, reserve)
}

// idle gives the memory of ended jobs back to the system once the node has no job left.
func (h *host) idle() {
	go debug.FreeOSMemory()
}

// coordSuffix ends the name of a job's coordinator.
const coordSuffix = "-coord"

// forget drops what the node keeps of a job: checkpoints, kept blocks, standby state. A job
// that ended (a coordinator said so) is remembered as such: a later assignment of it is
// refused (Placed.ended), and a checkpoint write still under way removes what it wrote. A
// job forgotten as an orphan is not: a successor may still come for it.
func (h *host) forget(job string, ended bool) {
	delete(h.coordinators, job)
	delete(h.failures, job)
	delete(h.standby, job)
	delete(h.epochs, job)
	delete(h.buddyOf, job)
	delete(h.buddyEpoch, job)
	delete(h.every, job)
	for key := range h.copies {
		if strings.HasPrefix(key, job+"/") {
			delete(h.copies, key)
		}
	}
	h.node.dropBlocks(job)
	if ended {
		h.node.jobEnded(job)
	}
	if err := h.node.store.RemoveJob(job); err != nil {
		h.node.logger.Warn("cannot remove a job's checkpoints", slog.String("job", job), slog.Any("error", err))
	}
}

// stopJob stops every actor of a job on this node and forgets the job (see forget).
func (h *host) stopJob(ctx actor.Context, job string, ended bool) {
	h.node.interruptJob(job)
	for id, c := range h.children {
		if c.job == job {
			ctx.Stop(actor.NewPID(ctx.Self().Address, id))
		}
	}
	h.forget(job, ended)
}

// orphanCheck looks, Timeouts.Orphan after the node of a job's coordinator left, whether
// another coordinator took the job over.
type orphanCheck struct{ job, coordinator string }

// checkOrphan forgets a job whose coordinator's node left and that no coordinator took over
// since (no assignment of a later coordinator came) while that node stayed away: its
// coordinator and standby are both gone, or the job failed where this node could not hear
// it. Otherwise its actors would hold the node's memory and shard slots for good.
func (h *host) checkOrphan(ctx actor.Context, m *orphanCheck) {
	coord := h.coordinators[m.job]
	if coord == nil || coord.Address != m.coordinator || h.isMember(m.coordinator) {
		return
	}
	h.node.logger.Warn("forgetting a job whose coordinator is gone and that no node took over", slog.String("job", m.job),
		slog.String("coordinator", m.coordinator), slog.Duration("after", h.node.cfg.Timeouts.Orphan))
	h.stopJob(ctx, m.job, false)
}

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

// onMemberLeft takes over the jobs whose coordinator's node left or died and for which this
// node is the standby, and has the other jobs of that coordinator checked for orphans later.
func (h *host) onMemberLeft(ctx actor.Context, e cluster.Event) {
	addr := e.Member.Meta.Actor
	system, self, wait := ctx.ActorSystem(), ctx.Self(), h.node.cfg.Timeouts.Orphan
	for job, coord := range h.coordinators {
		if coord != nil && coord.Address == addr && coord.Address != self.Address {
			time.AfterFunc(wait, func() { system.Root.Send(self, &orphanCheck{job: job, coordinator: addr}) })
		}
	}
	for id, st := range h.standby {
		if st.Coordinator == nil || st.Coordinator.Address != e.Member.Meta.Actor {
			continue
		}
		delete(h.standby, id)
		if _, running := h.children[HostName+"/"+id+coordSuffix]; running {
			continue
		}
		h.node.logger.Warn("taking over a job whose coordinator's node is gone", slog.String("job", id), slog.String("node", e.Member.Name))
		props := h.node.props(func() actor.Actor { return newTakeover(h.node, st, e) })
		if h.spawn(ctx, props, id, id+coordSuffix, messages.ActorRole_ACTOR_ROLE_COORDINATOR, nil, pidOf(st.Submit.Client), 0, st.Epoch) {
			h.node.senders.addJob(id, st.Submit.Client.GetAddress(), st.Submit.Owner)
			h.hold(HostName+"/"+id+coordSuffix, st.Submit.Owner, id, false, 0) // a takeover is never refused, but counts
		}
	}
}

// shardOf returns the shard id in a shard actor's name ("<job>-s<id>"), or -1.
func shardOf(name string) int64 {
	i := strings.LastIndex(name, "-s")
	if i < 0 {
		return -1
	}
	v, err := strconv.ParseInt(name[i+2:], 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// status is the host's load, as Pong. A peer sees all of it. A client sees the node's
// configuration (its memory limit, capacity, threads, shard cap, machine, cores) and the
// process's CPU time, which it needs to size its jobs and to measure a run, but of the load
// only its own jobs: their ids and count, their actors, shards and reserved memory. The
// others' (their number, sizes and reservations) would tell it what other clients run.
func (h *host) status(ctx actor.Context) *messages.Pong {
	caller := callerOf(ctx)
	mine := func(job string) bool { return caller.Peer() || h.owners[job] == caller.Name }
	ids := make([]string, 0, len(h.jobs))
	for id := range h.jobs {
		if mine(id) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	actors, shards, reserved := len(h.children), h.shards, h.node.mem.used()
	if !caller.Peer() {
		actors, shards, reserved = 0, 0, 0
		for _, c := range h.children {
			if mine(c.job) {
				actors++
				reserved += c.reserve
				if c.role == messages.ActorRole_ACTOR_ROLE_SHARD {
					shards++
				}
			}
		}
	}
	pong := &messages.Pong{Address: ctx.Self().Address, Jobs: int64(len(ids)), Actors: int64(actors), JobIds: ids,
		Memory: h.node.cfg.Memory, Reserved: reserved, Capacity: int64(max(h.node.cfg.Capacity, 1)), Threads: int64(h.node.pool.Workers()),
		MaxShards: int64(h.node.cfg.MaxShards), Shards: int64(shards), Machine: h.node.cfg.Machine}
	usage := cpuusage.Now()
	pong.CpuSeconds, pong.Cores = usage.Seconds, int64(usage.Cores)
	if caller.Peer() {
		pong.Drops = dropsSorted(h.node.Drops())
		if h.node.plane != nil {
			pong.DataPlane = h.node.plane.Address()
		}
	}
	return pong
}

// spawn starts a child of the host for a job and records it; it tells whether it did.
func (h *host) spawn(ctx actor.Context, props *actor.Props, job, name string, role messages.ActorRole, coordinator, client *actor.PID, reserve int64, epoch uint64) bool {
	if !isJobID(job) {
		h.node.logger.Error("dropped an assignment with a malformed job id", slog.String("job", job))
		return false
	}
	pid, err := ctx.SpawnNamed(props, name)
	if err != nil {
		h.node.logger.Error("cannot spawn a job actor", slog.String("name", name), slog.Any("error", err))
		if coordinator != nil {
			ctx.Send(coordinator, &messages.Placed{JobId: job, Actor: name, Error: fmt.Sprintf("node %s cannot start %s: %v", ctx.Self().Address, name, err)})
		} else if client != nil {
			ctx.Send(client, &messages.JobError{JobId: job, Kind: KindFailure, Message: fmt.Sprintf("node %s cannot start %s: %v", ctx.Self().Address, name, err)})
		}
		return false
	}
	h.children[pid.Id] = hostChild{job: job, role: role, coordinator: coordinator, client: client, reserve: reserve, epoch: epoch}
	h.jobs[job]++
	return true
}
