package actors

import (
	"sync"

	"github.com/didnmf/didnmf/internal/jobctl"
)

// Per-owner quotas. An owner is the common name of the certificate a job was submitted with
// (SubmitJob.Owner, which the coordinator's host sets from the guard's Caller: "local" for a
// job submitted from the node's own process). Every node counts, per owner, the jobs with
// actors on it, the shards it holds and the memory they reserve, and refuses what would take
// an owner past its quota, so that one client cannot take every slot of a node (or all of its
// memory) with jobs that do nothing, and the other owners always find room. The host's
// machine (jobctl.Host) checks the quotas where the node admits a job (the coordinator's
// host, at submission) and where any host accepts a shard (its reservation), after the node's
// own limits; the memory each owner holds is counted here (ownerMemory), shared with the
// shards, which take more as their blocks arrive.

// ownerShare is the default fraction of a node's limits of jobs and shards one owner may
// hold: a quarter, so that three other owners still find as many; no single job comes near
// it (a job counts once on a node, and its shards on a node are a few per core). Memory is
// another matter: a job's data is what a node's memory is for, and a cluster often serves one
// user whose one large job should fit as before. An owner may hold three quarters of a
// node's memory by default (ownerMemoryQuota): a large job still fits, and a quarter of
// every node is always left to the other owners, however much one of them announces.
const ownerShare = 4

// ownerMemoryQuota is the default memory quota of an owner on a node of limit bytes: three
// quarters of it, at least 1 byte (none when the node has no limit).
func ownerMemoryQuota(limit int64) int64 {
	if limit <= 0 {
		return 0
	}
	return max(limit-limit/4, 1)
}

// DefaultOwnerMaxStreams is the default number of streamed blocks one owner's shards receive
// at once on a node (NodeConfig.OwnerMaxStreams): with the client's window of blockWindow
// chunks of at most 1 MiB (chunked.Floats values) a stream, 16 streams are 64 MiB in flight
// for one owner. A shard past it waits for one of the owner's streams on the node to end
// before it asks for its block: a job is never refused for it.
const DefaultOwnerMaxStreams = 16

// quotaOr returns the limit or quota v: def when v is 0 (0 itself when def is), none (0) when
// v is negative (the node's MaxShards and MaxJobs take it too).
func quotaOr[T int | int64](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// share is limit/parts, at least 1; 0 (no limit) gives 0 (no quota).
func share[T int | int64](limit, parts T) T {
	if limit <= 0 {
		return 0
	}
	return max(limit/parts, 1)
}

// resolveQuotas sets the owner quotas of a node's configuration whose node limits are already
// resolved (MaxJobs, MaxShards: 0 is none): a zero quota takes its default, a negative one
// means none (0 after this).
func resolveQuotas(cfg *NodeConfig) {
	cfg.OwnerMaxJobs = quotaOr(cfg.OwnerMaxJobs, share(cfg.MaxJobs, ownerShare))
	cfg.OwnerMaxShards = quotaOr(cfg.OwnerMaxShards, share(cfg.MaxShards, ownerShare))
	cfg.OwnerMemory = quotaOr(cfg.OwnerMemory, ownerMemoryQuota(cfg.Memory))
	cfg.OwnerMaxStreams = quotaOr(cfg.OwnerMaxStreams, DefaultOwnerMaxStreams)
}

// ownerMemory is the memory each owner's jobs hold on a node: the reserves of their shards
// (the host's) and what the shards took beyond them (a streamed block larger than its client
// announced: the shards'), against NodeConfig.OwnerMemory. Safe for concurrent use.
type ownerMemory struct {
	mu   sync.Mutex
	held map[string]int64
}

// add adds n bytes (negative: gives them back) to an owner's.
func (m *ownerMemory) add(owner string, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == nil {
		m.held = map[string]int64{}
	}
	if m.held[owner] += n; m.held[owner] == 0 {
		delete(m.held, owner)
	}
}

// used returns the bytes an owner holds.
func (m *ownerMemory) used(owner string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held[owner]
}

// take adds n bytes to an owner's if they stay within limit (0: none), and tells whether it
// did.
func (m *ownerMemory) take(owner string, n, limit int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if limit > 0 && m.held[owner]+n > limit {
		return false
	}
	if m.held == nil {
		m.held = map[string]int64{}
	}
	m.held[owner] += n
	return true
}

// ownerName is how an error names an owner.
func ownerName(owner string) string { return jobctl.OwnerName(owner) }

// inputBytes is matio.ReadOptions.MaxBytes on this node: what one owner's job may hold here
// (OwnerMemory, else Memory; 0, no bound, for nodes with neither, as the nodes of one
// process), so that an input declaring more than that is refused as it is opened rather
// than read into memory (a .mtx, a CSC .npz or a 10x matrix is read whole).
func (cfg *NodeConfig) inputBytes() int64 {
	for _, v := range []int64{cfg.OwnerMemory, cfg.Memory} {
		if v > 0 {
			return v
		}
	}
	return 0
}

// noQuotaOr returns v, or -1 (no quota) for 0 (the default).
func noQuotaOr[T int | int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}
