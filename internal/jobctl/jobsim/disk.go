package jobsim

import (
	"cmp"
	"errors"
	"slices"

	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/messages"
)

// A node's disk: the checkpoint copies it keeps, its shards' own and other nodes' shards'
// (buddy copies), as package checkpoint's Store keeps them, and the invariant that a
// committed checkpoint the job may still fall back to is never dropped from a node that
// lives.

// ckptKey names a checkpoint: a job's shard's at an iteration.
type ckptKey struct {
	job   string
	shard int64
	iter  int64
}

// storeKey names a copy on a node's disk: a shard's own copy or a buddy copy.
type storeKey struct {
	ckptKey
	buddy bool
}

// record is a checkpoint copy: a shard's snapshot and its stop rule's history.
type record struct {
	snap    snapshot
	corrupt bool // its checksum fails: never used
	// incarnation is the node's when it wrote the copy: an earlier one's survived a restart.
	incarnation int
}

// errDiskFull is a checkpoint write on a full disk (Faults.FullDisks, Faults.FillDisks).
var errDiskFull = errors.New("no space left on device")

// write keeps a copy of a checkpoint on the node's disk, then drops the shard's copies of that
// kind newer than the node's newest committed checkpoint beyond the newest keep (as actors'
// Node.keepCheckpoint with checkpoint.Store.KeepNewest). A full disk refuses it.
func (n *node) write(key ckptKey, buddy bool, snap snapshot, keep int) error {
	if n.full || n.filled {
		n.w.stats.WritesRefused++
		return errDiskFull
	}
	w := n.w
	n.store[storeKey{key, buddy}] = &record{snap: snap, corrupt: w.corrupts(), incarnation: n.incarnation}
	w.written[key] = true
	if w.held[key] == nil {
		w.held[key] = map[string]bool{}
	}
	w.held[key][n.addr] = true
	w.stats.Checkpoints++
	var above []int64
	for k := range n.store {
		if k.buddy == buddy && k.job == key.job && k.shard == key.shard && k.iter > n.committed[key.job] {
			above = append(above, k.iter)
		}
	}
	if len(above) > keep {
		slices.Sort(above)
		for _, it := range above[:len(above)-keep] {
			n.drop(storeKey{ckptKey{key.job, key.shard, it}, buddy}, "uncommitted beyond the ones a node keeps")
		}
	}
	return nil
}

// copyOf returns a valid copy of a checkpoint on the node's disk (its own first, as the shard
// actor reads them), or nil.
func (n *node) copyOf(key ckptKey) *record {
	for _, buddy := range []bool{false, true} {
		if r := n.store[storeKey{key, buddy}]; r != nil && !r.corrupt {
			return r
		}
	}
	return nil
}

// commit takes a coordinator's CheckpointCommitted: the node remembers the job's newest
// committed checkpoint and drops its copies (own and buddy) older than the oldest one the
// coordinator may still fall back to (as actors' host.pruneCommitted).
func (n *node) commit(m *messages.CheckpointCommitted) {
	if m.Shards <= 0 || m.KeepFrom <= 0 {
		return
	}
	n.committed[m.JobId] = max(n.committed[m.JobId], m.Iteration)
	superseded := n.w.supersededCommits[m]
	for _, k := range sortedStoreKeys(n.store) {
		if k.job != m.JobId || k.shard >= m.Shards || k.iter >= m.KeepFrom {
			continue
		}
		if superseded {
			n.dropSuperseded(k)
		} else {
			n.drop(k, "older than the commit's KeepFrom")
		}
	}
}

// drop removes a copy from a live node's disk: it must not be of a checkpoint the job's
// coordinator may still fall back to.
func (n *node) drop(k storeKey, why string) {
	delete(n.store, k)
	if c := n.w.actingCoordinator(); c != nil && slices.Contains(c.commits, k.iter) {
		n.w.violation("%s dropped its copy of shard %d's checkpoint at iteration %d (%s), which its coordinator committed and may still fall back to (it committed %v last)",
			n.addr, k.shard, k.iter, why, c.commits)
	}
}

// dropSuperseded removes a copy from a live node's disk at the commit of a superseded
// coordinator (cut off in a partition that healed, it runs on next to its successor): a copy
// the acting coordinator committed and may still fall back to is counted
// (Stats.PrunedBySuperseded), a known gap, not a broken invariant.
func (n *node) dropSuperseded(k storeKey) {
	delete(n.store, k)
	if c := n.w.actingCoordinator(); c != nil && slices.Contains(c.commits, k.iter) {
		n.w.stats.PrunedBySuperseded++
		n.w.logf("%s dropped its copy of shard %d's checkpoint at iteration %d at a superseded coordinator's commit; the acting one committed %v last",
			n.addr, k.shard, k.iter, c.commits)
	}
}

// sortedStoreKeys lists the copies on a disk in order (map order is random; the run must not
// be).
func sortedStoreKeys(m map[storeKey]*record) []storeKey {
	keys := make([]storeKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b storeKey) int {
		if c := cmp.Compare(a.job, b.job); c != 0 {
			return c
		}
		if c := cmp.Compare(a.shard, b.shard); c != 0 {
			return c
		}
		if c := cmp.Compare(a.iter, b.iter); c != 0 {
			return c
		}
		return cmp.Compare(btoi(a.buddy), btoi(b.buddy))
	})
	return keys
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// copySent records that a shard sent a copy of its checkpoint to a buddy.
func (w *World) copySent(key ckptKey, buddy string) {
	if !slices.Contains(w.sentTo[key], buddy) {
		w.sentTo[key] = append(w.sentTo[key], buddy)
	}
}

// committedBy records a coordinator's commit: the distinct iterations it committed last,
// KeepCheckpoints of them, are the ones it may fall back to.
func (c *coordinator) committedBy(it int64) {
	c.commits = slices.DeleteFunc(c.commits, func(t int64) bool { return t == it })
	c.commits = append(c.commits, it)
	if len(c.commits) > jobctl.KeepCheckpoints {
		c.commits = c.commits[1:]
	}
}

// resumesFrom records a coordinator's (re)placement of the job at a checkpoint (0: the
// start): it no longer falls back to the checkpoints it committed after it (a recovery drops
// those it found unusable).
func (c *coordinator) resumesFrom(it int64) {
	c.commits = slices.DeleteFunc(c.commits, func(t int64) bool { return t > it })
}

// actingCoordinator is the live coordinator of the latest epoch (nil: none).
func (w *World) actingCoordinator() *coordinator {
	var acting *coordinator
	for _, c := range w.coords {
		if c.n.alive && c.n.coords[c.id] == c && (acting == nil || c.ctl.Epoch() > acting.ctl.Epoch()) {
			acting = c
		}
	}
	return acting
}
