package jobctl

import (
	"fmt"
	"log/slog"

	"github.com/didnmf/didnmf/internal/jobctl/internal/bugs"
	"github.com/didnmf/didnmf/messages"
)

// The host's children: a shard or reducer that panics is restarted by the supervisor (it
// waits for the coordinator to roll the job back to a checkpoint) and its coordinator is
// told, up to HostConfig.MaxRestarts failures of the job's actors on the node; past them the
// actor stops and the job fails. A coordinator that panics is stopped: its client is told,
// and the job's actors here stop.

// childFailed handles a child that panicked.
func (h *Host) childFailed(e HostChildFailed) {
	c := h.children[e.ID]
	if c == nil {
		return
	}
	h.log(slog.LevelError, "job actor failed", slog.String("job", c.job), slog.String("actor", e.ID), slog.String("reason", e.Reason))
	msg := &messages.JobError{JobId: c.job, Kind: messages.ErrorKind_ERROR_KIND_FAILURE,
		Message: fmt.Sprintf("%s %s on node %s failed: %v", c.role.Name(), e.ID, h.cfg.Node, e.Reason)}
	if c.role == messages.ActorRole_ACTOR_ROLE_COORDINATOR {
		h.send(c.client, msg)
		// The coordinator cannot stop the job any more: its actors here stop.
		h.forget(c.job, true)
		return
	}
	j := h.jobs[c.job]
	if j == nil {
		// The job was forgotten here: its actors are stopping.
		h.ready.Stops = append(h.ready.Stops, e.ID)
		return
	}
	coord := j.coordinator
	if coord == nil {
		coord = c.coordinator
	}
	if j.failures++; j.failures > h.cfg.MaxRestarts {
		msg.Message += fmt.Sprintf(" (%d failures of this job's actors on this node: not restarting any more)", j.failures)
		h.ready.Stops = append(h.ready.Stops, e.ID)
		h.send(coord, msg)
		return
	}
	failed := &messages.ActorFailed{JobId: c.job, Actor: e.ID, Node: h.cfg.Node, Reason: e.Reason, Role: c.role}
	if c.role == messages.ActorRole_ACTOR_ROLE_SHARD {
		failed.Shard = c.shard
	}
	h.send(coord, failed)
}

// childStopped forgets a child that stopped and gives back its memory; a job with no actor
// left here loses its submission and owner, and a node with none is idle.
func (h *Host) childStopped(id string) {
	c := h.children[id]
	if c == nil {
		return
	}
	delete(h.children, id)
	if c.reserve != 0 && !(c.role == messages.ActorRole_ACTOR_ROLE_SHARD && h.cfg.Bugs.Has(bugs.ForgetReservation)) {
		h.ready.Releases = append(h.ready.Releases, HostRelease{Owner: c.owner, Bytes: c.reserve})
	}
	if h.running(c.job) {
		return
	}
	h.ready.Gone = append(h.ready.Gone, c.job)
	h.lastGone(c.job)
	h.ready.Idle = len(h.children) == 0
}

// lastGone drops what a job's record holds for its actors here: the last one is gone.
func (h *Host) lastGone(job string) {
	if j := h.jobs[job]; j != nil {
		j.submit, j.owner = nil, ""
		h.tidy(job)
	}
}

// spawnFailed takes back a spawn the runtime could not carry out and tells who waits for the
// actor: the coordinator (Placed with the error), or the job's client.
func (h *Host) spawnFailed(e HostSpawnFailed) error {
	id := childID(e.Name)
	c := h.children[id]
	if c == nil {
		return fmt.Errorf("jobctl.Host: HostSpawnFailed of %q, which it did not ask to spawn", e.Name)
	}
	delete(h.children, id)
	if !h.running(c.job) {
		h.lastGone(c.job)
	}
	h.log(slog.LevelError, "cannot spawn a job actor", slog.String("name", e.Name), slog.String("error", e.Err))
	why := fmt.Sprintf("node %s cannot start %s: %v", h.cfg.Node, e.Name, e.Err)
	if c.coordinator != nil {
		h.send(c.coordinator, &messages.Placed{JobId: c.job, Actor: e.Name, Error: why})
	} else {
		h.send(c.client, &messages.JobError{JobId: c.job, Kind: messages.ErrorKind_ERROR_KIND_FAILURE, Message: why})
	}
	return nil
}
