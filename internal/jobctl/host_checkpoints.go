package jobctl

import "github.com/didnmf/didnmf/messages"

// HostCheckpointCommitted is a coordinator's CheckpointCommitted: the job's checkpoints before
// KeepFrom are no longer needed.
type HostCheckpointCommitted struct {
	Commit *messages.CheckpointCommitted
}

// committed prunes the job's checkpoint copies as a commit says, unless the commit is of a
// coordinator older than the job's latest this node knows: a superseded coordinator (cut off
// in a partition that healed) runs on next to its successor for a while, and its commits must
// not drop copies the successor may still fall back to.
func (h *Host) committed(m *messages.CheckpointCommitted) {
	if m.Epoch == 0 || m.KeepFrom > m.Iteration {
		h.drop("CheckpointCommitted of epoch 0 or keeping none of what it commits")
		return
	}
	if j := h.jobs[m.JobId]; j != nil && m.Epoch < j.latestEpoch() {
		h.drop("CheckpointCommitted of a superseded coordinator")
		return
	}
	h.ready.Prunes = append(h.ready.Prunes, m)
}

// latestEpoch is the job's latest epoch this node heard of: of its assignments here, of the
// buddies it keeps copies for, of the state it keeps as the standby.
func (j *hostJob) latestEpoch() uint64 {
	at := max(j.epoch, j.buddyEpoch)
	if j.standby != nil {
		at = max(at, j.standby.Epoch)
	}
	return at
}
