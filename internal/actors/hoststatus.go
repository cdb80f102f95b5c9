package actors

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/internal/cpuusage"
	"github.com/didnmf/didnmf/messages"
)

// The host's answers to requests (Ping, HostStatus, ListJobs with the jobs running here and
// the records of those that ended, a LeaseRenew for a job whose coordinator is gone): what
// runs on the node, as jobctl.Host counts it, and never to a client that names a node's
// actor as its sender.

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

// status is the host's load, as Pong. A peer sees all of it. A client sees the node's
// configuration (its memory limit, capacity, threads, shard cap, machine, cores) and the
// process's CPU time, which it needs to size its jobs and to measure a run, but of the load
// only its own jobs: their ids and count, their actors, shards and reserved memory. The
// others' (their number, sizes and reservations) would tell it what other clients run.
func (h *host) status(ctx actor.Context) *messages.Pong {
	caller := callerOf(ctx)
	load := h.ctl.Load(caller.Peer(), caller.Name)
	ids, actors, shards, reserved := load.Jobs, load.Actors, load.Shards, load.Reserved
	if caller.Peer() {
		reserved = h.node.mem.used() // with what shards took beyond their reserves
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

// listJobs answers ListJobs: the jobs coordinated here, as their coordinators published them,
// and with ended the records of ended jobs the host keeps (a job both running here and
// recorded is listed once: the record, unless the running one is of a later epoch). A client
// sees only its own. Without detail each job's history, events and spec are left out.
func (h *host) listJobs(ctx actor.Context, m *messages.ListJobs) *messages.JobList {
	caller := callerOf(ctx)
	mine := func(j *messages.JobInfo) bool { return caller.Peer() || j.Owner == caller.Name }
	jobs := h.node.board.list(mine)
	if m.Ended {
		byID := map[string]int{}
		for i, j := range jobs {
			byID[j.JobId] = i
		}
		for _, r := range h.ctl.Records(time.Now(), mine) {
			i, running := byID[r.JobId]
			switch {
			case !running:
				jobs = append(jobs, r)
			case r.Epoch >= jobs[i].Epoch:
				jobs[i] = r
			}
		}
		slices.SortFunc(jobs, func(a, b *messages.JobInfo) int { return strings.Compare(a.JobId, b.JobId) })
	}
	if !m.Detail {
		for i, j := range jobs {
			if len(j.History) > 0 || len(j.Events) > 0 || j.Spec != nil {
				// The board's and the host's entries are shared: a copy loses them.
				c := proto.Clone(j).(*messages.JobInfo)
				c.History, c.Events, c.Spec = nil, nil, nil
				jobs[i] = c
			}
		}
	}
	return &messages.JobList{Address: ctx.Self().Address, Jobs: jobs}
}
