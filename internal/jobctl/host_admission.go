package jobctl

import (
	"errors"
	"fmt"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/usererr"
)

// Admission. A node admits a job (its coordinator, at submission) and each shard placed on it
// within its limits (HostConfig: memory, shards, jobs) and then within the quotas of the
// job's owner (the common name of the certificate the job was submitted with): so that one
// client cannot take every slot of a node, or all of its memory, with jobs that do nothing.
// A job counts on a node while it has a coordinator or a shard there; a reducer counts
// toward the node's jobs, not its owner's.

// submit starts a coordinator for a new job, or refuses it (a JobError for its client).
func (h *Host) submit(e HostSubmit) {
	m := e.Submit
	refuse := func(format string, args ...any) {
		h.send(m.Client, &messages.JobError{JobId: m.JobId, Kind: messages.ErrorKind_ERROR_KIND_INPUT, Message: fmt.Sprintf(format, args...)})
	}
	if !IsJobID(m.JobId) {
		refuse("job id %q: want 1 to 64 letters, digits, '-' or '_'", m.JobId)
		return
	}
	if h.knows(m.JobId) {
		if e.Peer {
			refuse("job id %q is already in use on node %s", m.JobId, h.cfg.Node)
		} else { // a client's id comes from its token: the same id is the same submission again
			h.drop("SubmitJob of a job the node has")
		}
		return
	}
	if e.SpecError != nil {
		h.send(m.Client, userJobError(m.JobId, 0, e.SpecError))
		return
	}
	if jobs, _ := h.counts(); h.cfg.MaxJobs > 0 && len(jobs) >= h.cfg.MaxJobs {
		refuse("node %s runs %d jobs, its limit (serve --max-jobs): try again later", h.cfg.Node, len(jobs))
		return
	}
	// The owner is who the guard authenticated, whatever the message says; a submission
	// from this process (the node's own HTTP service submits for the identity it
	// authenticated) keeps the owner it names, "local" when it names none.
	switch {
	case e.Local && m.Owner != "":
	case e.Local:
		m.Owner = "local"
	default:
		m.Owner = e.Caller
	}
	if jobs, _ := h.ownerUse(m.Owner); h.cfg.OwnerMaxJobs > 0 && len(jobs) >= h.cfg.OwnerMaxJobs {
		refuse("%s runs %d jobs on node %s, its quota (serve --owner-max-jobs): try again when one ends", OwnerName(m.Owner), len(jobs), h.cfg.Node)
		return
	}
	j := h.job(m.JobId)
	j.submit, j.owner = m, m.Owner
	h.spawn(HostSpawn{Name: CoordinatorName(m.JobId), Job: m.JobId, Role: messages.ActorRole_ACTOR_ROLE_COORDINATOR, Owner: m.Owner,
		Client: m.Client, Submit: m}, &hostChild{client: m.Client})
}

// admitShard checks a shard against the node's limits, whoever sent it (memory, shards,
// jobs), then against its owner's quotas. It returns why the shard cannot be placed here, or "".
func (h *Host) admitShard(e HostShardAssign) string {
	cfg, a, reserve := h.cfg, e.Assignment, e.Reserve
	jobs, shards := h.counts()
	if limit := cfg.Memory; limit > 0 && reserve > limit-e.MemoryUsed {
		return fmt.Sprintf("node %s has %s of its %s free, shard %d needs %s", cfg.Node,
			cluster.FormatBytes(max(limit-e.MemoryUsed, 0)), cluster.FormatBytes(limit), a.Shard, cluster.FormatBytes(reserve))
	}
	if cfg.MaxShards > 0 && shards >= cfg.MaxShards {
		return fmt.Sprintf("node %s holds %d shards, its limit (serve --max-shards)", cfg.Node, shards)
	}
	if !jobs[a.JobId] && cfg.MaxJobs > 0 && len(jobs) >= cfg.MaxJobs {
		return fmt.Sprintf("node %s runs %d jobs, its limit (serve --max-jobs)", cfg.Node, len(jobs))
	}
	owner := a.Owner
	ownJobs, ownShards := h.ownerUse(owner)
	if limit, held := cfg.OwnerMemory, e.OwnerHeld; limit > 0 && reserve > limit-held {
		return fmt.Sprintf("%s holds %s of node %s's memory, its quota is %s (serve --owner-memory), and shard %d needs %s",
			OwnerName(owner), cluster.FormatBytes(held), cfg.Node, cluster.FormatBytes(limit), a.Shard, cluster.FormatBytes(reserve))
	}
	if limit := cfg.OwnerMaxShards; limit > 0 && ownShards >= limit {
		return fmt.Sprintf("%s holds %d shards on node %s, its quota (serve --owner-max-shards)", OwnerName(owner), ownShards, cfg.Node)
	}
	if !ownJobs[a.JobId] && cfg.OwnerMaxJobs > 0 && len(ownJobs) >= cfg.OwnerMaxJobs {
		return fmt.Sprintf("%s runs %d jobs on node %s, its quota (serve --owner-max-jobs)", OwnerName(owner), len(ownJobs), cfg.Node)
	}
	return ""
}

// counts returns the jobs with actors on the node and its shards.
func (h *Host) counts() (jobs map[string]bool, shards int) {
	jobs = map[string]bool{}
	for _, c := range h.children {
		jobs[c.job] = true
		if c.role == messages.ActorRole_ACTOR_ROLE_SHARD {
			shards++
		}
	}
	return jobs, shards
}

// ownerUse returns the jobs an owner has a coordinator or shard of on the node, and its shards.
func (h *Host) ownerUse(owner string) (jobs map[string]bool, shards int) {
	jobs = map[string]bool{}
	for _, c := range h.children {
		if c.owner != owner || c.role == messages.ActorRole_ACTOR_ROLE_REDUCER {
			continue
		}
		jobs[c.job] = true
		if c.role == messages.ActorRole_ACTOR_ROLE_SHARD {
			shards++
		}
	}
	return jobs, shards
}

// OwnerName is how an error names an owner (the common name of the certificate a job was
// submitted with).
func OwnerName(owner string) string {
	if owner == "" {
		return "the owner with no name"
	}
	return fmt.Sprintf("owner %q", owner)
}

// userJobError is the JobError of err, the user's to fix, for the job's client.
func userJobError(job string, epoch uint64, err error) *messages.JobError {
	je := &messages.JobError{JobId: job, Kind: messages.ErrorKind_ERROR_KIND_INPUT, Message: err.Error(), Epoch: epoch}
	je.Field, je.Template = userFields(err)
	return je
}

// userFields are the field and template a JobError carries for err when it is a
// *usererr.Error (else none), so that the client names the field as its front end does.
func userFields(err error) (field, template string) {
	var ue *usererr.Error
	if errors.As(err, &ue) {
		return ue.Field, ue.Template()
	}
	return "", ""
}
