package actors

import (
	"fmt"
	"sync"

	"github.com/didnmf/didnmf/cluster"
)

// Per-owner quotas. An owner is the common name of the certificate a job was submitted with
// (SubmitJob.Owner, which the coordinator's host sets from the guard's Caller: "local" for a
// job submitted from the node's own process). Every node counts, per owner, the jobs with
// actors on it, the shards it holds and the memory they reserve, and refuses what would take
// an owner past its quota, so that one client cannot take every slot of a node (or all of its
// memory) with jobs that do nothing, and the other owners always find room. The quotas are
// checked where the node admits a job (the coordinator's host, at submission) and where any
// host accepts a shard (its reservation), after the node's own limits.

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

// quotaOr returns the quota v: def when v is 0 (0 itself when def is), none (0) when v is
// negative.
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

// hold counts an actor the host started for an owner's job (a shard with its reserve).
func (h *host) hold(id, owner, job string, shard bool, reserve int64) {
	if _, dup := h.book.children[id]; dup {
		return
	}
	h.book.hold(id, owner, job, shard, reserve)
	h.node.owned.add(owner, reserve)
}

// unhold stops counting an actor that stopped.
func (h *host) unhold(id string) {
	if c, ok := h.book.children[id]; ok {
		h.node.owned.add(c.owner, -c.reserve)
	}
	h.book.release(id)
}

// ownerUse is what one owner holds on a node.
type ownerUse struct {
	jobs   map[string]int // the owner's jobs with actors here -> their actors counted
	shards int
}

// heldChild is one counted actor of an owner.
type heldChild struct {
	owner, job string
	shard      bool
	reserve    int64
}

// ownerBook is a host's count of the jobs and shards each owner holds on its node (and of
// each counted actor's reserve, which ownerMemory counts). Only the host actor uses it.
type ownerBook struct {
	children map[string]heldChild // by actor id
	owners   map[string]*ownerUse
}

// hold counts an actor the host started for an owner's job.
func (b *ownerBook) hold(id, owner, job string, shard bool, reserve int64) {
	if b.children == nil {
		b.children, b.owners = map[string]heldChild{}, map[string]*ownerUse{}
	}
	if _, dup := b.children[id]; dup {
		return
	}
	b.children[id] = heldChild{owner: owner, job: job, shard: shard, reserve: reserve}
	u := b.owners[owner]
	if u == nil {
		u = &ownerUse{jobs: map[string]int{}}
		b.owners[owner] = u
	}
	u.jobs[job]++
	if shard {
		u.shards++
	}
}

// release stops counting an actor that stopped (one not counted is ignored).
func (b *ownerBook) release(id string) {
	c, ok := b.children[id]
	if !ok {
		return
	}
	delete(b.children, id)
	u := b.owners[c.owner]
	if u.jobs[c.job]--; u.jobs[c.job] <= 0 {
		delete(u.jobs, c.job)
	}
	if c.shard {
		u.shards--
	}
	if len(u.jobs) == 0 {
		delete(b.owners, c.owner)
	}
}

// use returns what an owner holds (zero when nothing).
func (b *ownerBook) use(owner string) ownerUse {
	if u := b.owners[owner]; u != nil {
		return *u
	}
	return ownerUse{}
}

// ownerName is how an error names an owner.
func ownerName(owner string) string {
	if owner == "" {
		return "the owner with no name"
	}
	return fmt.Sprintf("owner %q", owner)
}

// admitOwnerJob checks a new job of an owner against the owner's quota of jobs on this node
// (at submission, on the coordinator's host). It returns why the job is refused, or "".
func (h *host) admitOwnerJob(owner string) string {
	limit := h.node.cfg.OwnerMaxJobs
	if u := h.book.use(owner); limit > 0 && len(u.jobs) >= limit {
		return fmt.Sprintf("%s runs %d jobs on node %s, its quota (serve --owner-max-jobs): try again when one ends",
			ownerName(owner), len(u.jobs), h.node.Address())
	}
	return ""
}

// admitOwnerShard checks a shard of an owner's job against the owner's quotas on this node:
// its jobs (when the job is new here), shards and reserved memory. It returns why the shard
// cannot be placed here, or "".
func (h *host) admitOwnerShard(owner, job string, shard int64, reserve int64) string {
	cfg, addr, u := h.node.cfg, h.node.Address(), h.book.use(owner)
	if limit, held := cfg.OwnerMemory, h.node.owned.used(owner); limit > 0 && reserve > limit-held {
		return fmt.Sprintf("%s holds %s of node %s's memory, its quota is %s (serve --owner-memory), and shard %d needs %s",
			ownerName(owner), cluster.FormatBytes(held), addr, cluster.FormatBytes(limit), shard, cluster.FormatBytes(reserve))
	}
	if limit := cfg.OwnerMaxShards; limit > 0 && u.shards >= limit {
		return fmt.Sprintf("%s holds %d shards on node %s, its quota (serve --owner-max-shards)", ownerName(owner), u.shards, addr)
	}
	if _, running := u.jobs[job]; !running && cfg.OwnerMaxJobs > 0 && len(u.jobs) >= cfg.OwnerMaxJobs {
		return fmt.Sprintf("%s runs %d jobs on node %s, its quota (serve --owner-max-jobs)", ownerName(owner), len(u.jobs), addr)
	}
	return ""
}

// noQuotaOr returns v, or -1 (no quota) for 0 (the default).
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

func noQuotaOr[T int | int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}
