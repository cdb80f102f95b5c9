package jobctl

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/didnmf/didnmf/internal/jobctl/internal/bugs"
	"github.com/didnmf/didnmf/messages"
)

// Epoch fencing. A host serves one coordinator of a job at a time: the one its latest
// assignment (or Buddies, or replicated state) named, and any coordinator of a later epoch (a
// recovery, a takeover). A message of another coordinator is dropped; an assignment of an
// earlier epoch is answered that the job moved on (Placed.Superseded), a StopJob of an earlier
// epoch ignored (the job goes on under the successor), and a reducer of an earlier epoch
// stopped when the next tree is assigned. (The host answers a superseded shard or reducer
// assignment itself: the actor it names may live elsewhere now, or nowhere.)

// fromJobsCoordinator tells whether a message about a job (what it is, for the drop
// counters) may be taken: from the job's coordinator (see fromCoordinator), or from this
// process when it names no coordinator. Otherwise it is dropped.
func (h *Host) fromJobsCoordinator(local bool, what, job string, coord *messages.Pid, epoch uint64) bool {
	if coord == nil && local || h.fromCoordinator(job, coord, epoch) {
		return true
	}
	h.drop(what + " from another coordinator than the job's")
	return false
}

// fromCoordinator tells whether a message about a job comes from the coordinator this node
// knows for it: any coordinator if the node knows none, the same one, or one of a later
// epoch (a recovery or a takeover). A coordinator of another job under the same id is not.
func (h *Host) fromCoordinator(job string, coord *messages.Pid, epoch uint64) bool {
	j := h.jobs[job]
	if j == nil {
		return true
	}
	known, at := j.coordinator, j.latestEpoch()
	if st := j.standby; st != nil && known == nil {
		known = st.Coordinator
	}
	if known == nil || epoch > at {
		return true
	}
	return coord != nil && coord.Address == known.Address && coord.Id == known.Id
}

// fence is a host's epoch fence for an assignment (kind: its message; what: the actor, as its
// Placed names it) of job by coord at epoch. An assignment of a malformed job id or of epoch 0
// (a coordinator's epochs start at 1) is dropped; one of an earlier epoch than the job's here
// is answered Placed.Superseded, whether the actor lives here or not and whoever sent it (a
// superseded coordinator: this one before a recovery, or one a takeover replaced); one of
// another coordinator is dropped; one of an ended job is answered Placed.Ended. Otherwise it
// returns the job's record, moved on to the assignment's epoch and coordinator. fenced false
// (a planted bug) skips the epoch and coordinator checks.
func (h *Host) fence(kind, what, job string, coord *messages.Pid, epoch uint64, local, ended, fenced bool) *hostJob {
	if !IsJobID(job) {
		h.log(slog.LevelError, "dropped an assignment with a malformed job id", slog.String("job", job))
		return nil
	}
	if j := h.jobs[job]; fenced && j != nil && epoch < j.epoch {
		h.send(coord, &messages.Placed{JobId: job, Actor: what, Epoch: epoch, Superseded: j.epoch})
		return nil
	}
	if epoch == 0 {
		h.drop(kind + " of epoch 0")
		return nil
	}
	if fenced && !h.fromJobsCoordinator(local, "assignment", job, coord, epoch) {
		return nil
	}
	if ended {
		h.send(coord, &messages.Placed{JobId: job, Actor: what, Epoch: epoch, Ended: true})
		return nil
	}
	j := h.job(job)
	j.epoch, j.assigned, j.coordinator = epoch, true, coord
	return j
}

// assignShard places a shard: a new one (admitted), or one living here, rolled back in place
// (it keeps its block).
func (h *Host) assignShard(e HostShardAssign) {
	m := e.Assignment
	what := fmt.Sprintf("shard %d", m.Shard)
	j := h.fence("ShardAssignment", what, m.JobId, m.Coordinator, m.Epoch, e.Local, e.Ended, !h.cfg.Bugs.Has(bugs.HostStaleAssignment))
	if j == nil {
		return
	}
	name := ShardName(m.JobId, m.Shard)
	if c := h.children[childID(name)]; c != nil {
		// The shard lives here: a recovery rolls it back in place, keeping its block.
		c.epoch, c.coordinator = m.Epoch, m.Coordinator
		h.send(ChildPid(h.cfg.Node, name), m)
		return
	}
	if err := h.admitShard(e); err != "" {
		h.send(m.Coordinator, &messages.Placed{JobId: m.JobId, Actor: what, Epoch: m.Epoch, Error: err})
		return
	}
	if m.Owner != "" {
		j.owner = m.Owner
	}
	h.spawn(HostSpawn{Name: name, Job: m.JobId, Role: messages.ActorRole_ACTOR_ROLE_SHARD, Owner: m.Owner, Reserve: e.Reserve,
		Client: m.Client, Shard: m}, &hostChild{shard: m.Shard, epoch: m.Epoch, coordinator: m.Coordinator, client: m.Client})
}

// assignReducer places a reducer of the job's tree of an epoch; the reducers of earlier
// epochs here stop (a recovery replaced their tree). An assignment of an earlier epoch than
// the job's here is answered as a shard's is (Placed.Superseded).
func (h *Host) assignReducer(e HostReducerAssign) {
	m := e.Assignment
	what := fmt.Sprintf("reducer [%d, %d)", m.Lo, m.Hi) // as the reducer's own Placed names it
	j := h.fence("ReducerAssignment", what, m.JobId, m.Coordinator, m.Epoch, e.Local, e.Ended, true)
	if j == nil {
		return
	}
	for _, id := range h.actorsOf(m.JobId) {
		if c := h.children[id]; c.role == messages.ActorRole_ACTOR_ROLE_REDUCER && c.epoch < m.Epoch {
			h.ready.Stops = append(h.ready.Stops, id)
		}
	}
	name := ReducerName(m.JobId, m.Epoch, m.Level, m.Lo)
	if h.children[childID(name)] != nil {
		// The same assignment again (a duplicated message): the reducer runs already.
		h.send(m.Coordinator, &messages.Placed{JobId: m.JobId, Actor: name,
			Error: fmt.Sprintf("node %s cannot start %s: it runs one of that name already", h.cfg.Node, name)})
		return
	}
	h.spawn(HostSpawn{Name: name, Job: m.JobId, Role: messages.ActorRole_ACTOR_ROLE_REDUCER, Owner: j.owner, Reducer: m},
		&hostChild{epoch: m.Epoch, coordinator: m.Coordinator})
}

// stop ends a job here at its coordinator's word (or this process's).
func (h *Host) stop(e HostStop) {
	m := e.Stop
	if j := h.jobs[m.JobId]; j != nil && m.Epoch != 0 && m.Epoch < j.epoch {
		return // a superseded coordinator ending: the job goes on under its successor
	}
	if !h.fromJobsCoordinator(e.Local, "StopJob", m.JobId, m.Coordinator, m.Epoch) {
		return
	}
	h.forget(m.JobId, true)
}

// forget stops a job's actors here and drops what the node keeps of it (HostForget).
func (h *Host) forget(job string, ended bool) {
	h.ready.Forget = append(h.ready.Forget, HostForget{Job: job, Ended: ended, Actors: h.actorsOf(job)})
	delete(h.jobs, job)
}

// buddies takes a coordinator's Buddies: the shards whose checkpoint copies this node keeps.
func (h *Host) buddies(e HostBuddies) {
	m := e.Buddies
	if !IsJobID(m.JobId) {
		return
	}
	if j := h.jobs[m.JobId]; j != nil && m.Epoch < j.buddyEpoch {
		return
	}
	if !h.fromJobsCoordinator(e.Local, "Buddies", m.JobId, m.Coordinator, m.Epoch) {
		return
	}
	j := h.job(m.JobId)
	j.coordinator, j.buddyEpoch, j.every = m.Coordinator, m.Epoch, m.CheckpointEvery
	j.buddies = make(map[int64]bool, len(m.Shards))
	for _, s := range m.Shards {
		j.buddies[s] = true
	}
}

// keepState keeps a job's replicated state (the latest epoch's): this node is its standby.
func (h *Host) keepState(m *messages.JobState) {
	if m.Submit == nil || !IsJobID(m.Submit.JobId) {
		return
	}
	j := h.job(m.Submit.JobId)
	if j.standby == nil || j.standby.Epoch <= m.Epoch {
		j.standby = m
	}
}

// memberLeft takes over the jobs whose coordinator's node left or died and for which this
// node is the standby, and has the other jobs of that coordinator checked for orphans later.
func (h *Host) memberLeft(e HostMemberLeft) {
	ids := make([]string, 0, len(h.jobs))
	for id := range h.jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if c := h.jobs[id].coordinator; c != nil && c.Address == e.Addr && c.Address != h.cfg.Node {
			h.ready.Timers = append(h.ready.Timers, HostTimer{After: h.cfg.Orphan, Job: id, Coordinator: e.Addr})
		}
	}
	for _, id := range ids {
		j := h.jobs[id]
		st := j.standby
		if st == nil || st.Coordinator == nil || st.Coordinator.Address != e.Addr {
			continue
		}
		j.standby = nil
		h.tidy(id)
		if h.children[childID(CoordinatorName(id))] != nil {
			continue
		}
		h.log(slog.LevelWarn, "taking over a job whose coordinator's node is gone", slog.String("job", id), slog.String("node", e.Name))
		client := st.Submit.GetClient()
		// The coordinator runs here now: the job's submission goes with it (a cancel sent to
		// this host by the job's id finds it, as for a job submitted here).
		if st.Submit != nil {
			nj := h.job(id)
			nj.submit, nj.owner = st.Submit, st.Submit.GetOwner()
		}
		h.spawn(HostSpawn{Name: CoordinatorName(id), Job: id, Role: messages.ActorRole_ACTOR_ROLE_COORDINATOR, Owner: st.Submit.GetOwner(),
			Client: client, Takeover: st, Cause: "the coordinator's node " + e.Name + " (" + e.Addr + ") is gone"},
			&hostChild{epoch: st.Epoch, client: client})
	}
}

// orphanCheck forgets a job whose coordinator's node left and that no coordinator took over
// since (no assignment of a later coordinator came) while that node stayed away: its
// coordinator and standby are both gone, or the job failed where this node could not hear
// it. Otherwise its actors would hold the node's memory and shard slots for good.
func (h *Host) orphanCheck(e HostOrphanCheck) {
	j := h.jobs[e.Job]
	if j == nil || j.coordinator == nil || j.coordinator.Address != e.Coordinator || e.Member {
		return
	}
	h.log(slog.LevelWarn, "forgetting a job whose coordinator is gone and that no node took over", slog.String("job", e.Job),
		slog.String("coordinator", e.Coordinator), slog.Duration("after", h.cfg.Orphan))
	h.forget(e.Job, false)
}
