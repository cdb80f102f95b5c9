package actors

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/didnmf/didnmf/checkpoint"
	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/messages"
)

// Checkpoints. At every checkpoint_every-th iteration boundary a shard snapshots its machine
// (C_i, B, the algorithm's own state, the stop rule's history), writes it atomically into its
// node's store and sends a copy to its buddy's host, which stores it and answers. Only then
// does the shard report the checkpoint to the coordinator, which commits an iteration when
// every shard has reported it. A recovery rolls every shard back to the last committed
// iteration: a shard reads its own copy, or the buddy copy its node holds, or fetches one from
// the nodes the coordinator names; a copy whose checksum fails is never used.

// endedKeep is how long a node remembers that a job ended, for the checkpoint writes still
// under way when it did.
const endedKeep = 10 * time.Minute

// jobEnded records that a job ended on this node, before its checkpoints are removed: a
// checkpoint write still under way then removes what it wrote (see removeIfEnded).
func (n *Node) jobEnded(job string) {
	n.committedMu.Lock()
	defer n.committedMu.Unlock()
	now := time.Now()
	for j, at := range n.ended {
		if now.Sub(at) > endedKeep {
			delete(n.ended, j)
		}
	}
	n.ended[job] = now
	delete(n.committed, job)
}

// hasEnded tells whether a job ended on this node (within endedKeep).
func (n *Node) hasEnded(job string) bool {
	n.committedMu.Lock()
	defer n.committedMu.Unlock()
	_, ended := n.ended[job]
	return ended
}

// removeIfEnded removes a job's checkpoints if the job ended: called after a checkpoint
// write, which may finish after the job's end removed the rest.
func (n *Node) removeIfEnded(job string) {
	n.committedMu.Lock()
	_, ended := n.ended[job]
	n.committedMu.Unlock()
	if ended {
		_ = n.store.RemoveJob(job)
	}
}

// committedUpTo returns the newest checkpoint iteration of a job committed as far as the node
// knows (0: none).
func (n *Node) committedUpTo(job string) int64 {
	n.committedMu.Lock()
	defer n.committedMu.Unlock()
	return n.committed[job]
}

// setCommitted records a job's newest committed checkpoint (jobEnded forgets it).
func (n *Node) setCommitted(job string, it int64) {
	n.committedMu.Lock()
	defer n.committedMu.Unlock()
	n.committed[job] = max(n.committed[job], it)
}

// checkpoints is a shard's checkpoint bookkeeping.
type checkpoints struct {
	started map[int64]time.Time // checkpoints written, awaiting the buddy's answer
	// fetching a checkpoint for a recovery
	sources []string // nodes still to ask
	from    string   // node asked
	copy    chunked.Assembly[byte]
	tried   []string // what failed, for the error
}

// checkpointWritten tells a shard its checkpoint is on its node's disk (or why not).
type checkpointWritten struct {
	epoch     uint64
	iteration int64
	data      []byte
	err       error
}

// fetchTimeout ends a wait for a checkpoint copy.
type fetchTimeout struct {
	epoch uint64
	from  string
}

// checkpointLost is the error of a shard that found no valid copy of the checkpoint it was to
// resume from; the coordinator then falls back to an older checkpoint.
type checkpointLost struct{ msg string }

func (e *checkpointLost) Error() string { return e.msg }

// checkpoint snapshots the machine at the iteration boundary it sits at, as the driver asked,
// and writes it in the background; the driver hears when it is written.
func (s *shard) checkpoint(ctx actor.Context, c jobctl.ShardDriverCheckpoint) {
	began, obs := time.Now(), s.node.cfg.Observer
	snap, err := s.machine.Snapshot()
	t := c.Iteration
	if err != nil {
		if obs != nil {
			obs.CheckpointWritten(time.Since(began), err)
		}
		s.feed(ctx, jobctl.ShardDriverCheckpointWritten{Epoch: c.Epoch, Iteration: t, Err: err, At: time.Now()})
		return
	}
	rec := &checkpoint.Record{Job: s.a.JobId, Shard: int(s.a.Shard), Shards: int(s.a.Shards), Epoch: c.Epoch,
		Iteration: t, Initial: snap.Initial, Objective: snap.Objective, B: snap.B, C: snap.C, State: snap.State,
		Stopper: c.History}
	system, self, node := ctx.ActorSystem(), ctx.Self(), s.node
	go func() {
		data, err := rec.MarshalBinary()
		if err == nil {
			err = node.keepCheckpoint(checkpoint.Own, rec.Job, rec.Shard, t, data, c.Keep)
		}
		if obs != nil {
			obs.CheckpointWritten(time.Since(began), err)
		}
		system.Root.Send(self, &checkpointWritten{epoch: c.Epoch, iteration: t, data: data, err: err})
	}()
}

// keepCheckpoint writes a marshaled checkpoint into the node's store: a shard's own (kind
// Own) or another node's shard's (Buddy). It then drops the shard's uncommitted checkpoints
// of that kind beyond the newest keep, tells the hooks and, if the job ended meanwhile,
// removes what it wrote. It runs off the mailboxes: fsync takes milliseconds.
func (n *Node) keepCheckpoint(kind checkpoint.Kind, job string, shard int, t int64, data []byte, keep int) error {
	// One write of a shard's kind at a time, its pruning included: on disk there are then at
	// most keep uncommitted checkpoints of it, and one more while the next is written.
	// Unserialized, writers that a slow disk held between their write and their pruning each
	// left a file (97 of 200 iterations seen under CI's load).
	mu := &n.ckptWrites[ckptStripe(kind, job, shard)]
	mu.Lock()
	defer mu.Unlock()
	if err := n.store.WriteBytes(kind, job, shard, t, data); err != nil {
		return err
	}
	// Copies are dropped as checkpoints are committed (see host.pruneCommitted); this bounds
	// the disk of a job whose commits stalled.
	_ = n.store.KeepNewest(kind, job, shard, n.committedUpTo(job), keep)
	if path, err := n.store.Path(kind, job, shard, t); err == nil {
		n.hooks.checkpointWritten(kind, shard, t, path)
	}
	n.removeIfEnded(job)
	return nil
}

// ckptStripe is the index in Node.ckptWrites of a shard's checkpoints of a kind.
func ckptStripe(kind checkpoint.Kind, job string, shard int) int {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v/%s/%d", kind, job, shard)
	return int(h.Sum32() % ckptWriteStripes)
}

// sendCheckpoint sends a marshaled checkpoint in chunks.
func sendCheckpoint(ctx actor.SenderContext, to *actor.PID, job string, shard, t int64, data []byte, replyTo *actor.PID) {
	for _, c := range chunked.Split(data, chunked.Bytes) {
		ctx.Send(to, &messages.CheckpointCopy{JobId: job, Shard: shard, Iteration: t, Chunk: c, ReplyTo: wirePid(replyTo)})
	}
}

// fetchNext asks the next node that may hold a copy of the checkpoint, or gives up.
func (s *shard) fetchNext(ctx actor.Context) {
	if len(s.ckpt.sources) == 0 {
		s.placed(ctx, &checkpointLost{fmt.Sprintf("no valid copy of its checkpoint at iteration %d (%s)", s.a.ResumeFrom, strings.Join(s.ckpt.tried, "; "))})
		return
	}
	from := s.ckpt.sources[0]
	s.ckpt.sources = s.ckpt.sources[1:]
	s.ckpt.from, s.ckpt.copy = from, chunked.Assembly[byte]{}
	ctx.Send(HostPID(from), &messages.CheckpointFetch{JobId: s.a.JobId, Shard: s.a.Shard, Iteration: s.a.ResumeFrom, ReplyTo: wirePid(ctx.Self())})
	self, system, epoch := ctx.Self(), ctx.ActorSystem(), s.a.Epoch
	time.AfterFunc(s.node.cfg.Timeouts.CheckpointFetch, func() { system.Root.Send(self, &fetchTimeout{epoch: epoch, from: from}) })
}

// fetched takes a chunk of a fetched checkpoint and, once whole, resumes from it.
func (s *shard) fetched(ctx actor.Context, m *messages.CheckpointCopy) {
	if s.ckpt.from == "" || m.JobId != s.a.JobId || m.Shard != s.a.Shard || m.Iteration != s.a.ResumeFrom || s.machine != nil {
		return
	}
	from := s.ckpt.from
	fail := func(err string) {
		s.ckpt.tried = append(s.ckpt.tried, fmt.Sprintf("copy on %s: %s", from, err))
		s.ckpt.from = ""
		s.fetchNext(ctx)
	}
	if m.Error != "" {
		fail(m.Error)
		return
	}
	full, err := s.ckpt.copy.Add(m.Chunk)
	if errors.Is(err, chunked.ErrDuplicate) {
		return
	}
	if err != nil {
		fail(err.Error())
		return
	}
	if !full {
		return
	}
	data := s.ckpt.copy.Data()
	s.ckpt.from = ""
	rec, err := checkpoint.Unmarshal(data)
	if err == nil {
		err = s.usable(rec)
	}
	if err != nil {
		fail(err.Error())
		return
	}
	// Keep it as the node's own copy: the shard lives here now.
	if err := s.node.store.Write(checkpoint.Own, rec); err != nil {
		s.node.logger.Warn("cannot keep a fetched checkpoint", "job", s.a.JobId, "shard", s.a.Shard, "error", err)
	}
	s.placed(ctx, s.build(s.x, rec))
}

// fetchTimedOut gives up on a node that did not send the checkpoint in time.
func (s *shard) fetchTimedOut(ctx actor.Context, m *fetchTimeout) {
	if m.epoch != s.a.Epoch || s.ckpt.from != m.from || s.machine != nil {
		return
	}
	s.ckpt.tried = append(s.ckpt.tried, fmt.Sprintf("copy on %s: no answer in %v", m.from, s.node.cfg.Timeouts.CheckpointFetch))
	s.ckpt.from = ""
	s.fetchNext(ctx)
}

// buddyCopy is a checkpoint copy a host assembles for another node's shard.
type buddyCopy struct {
	chunked.Assembly[byte]
	began time.Time
}

// buddyCopies are the checkpoint copies a host assembles for other nodes' shards.
type buddyCopies map[string]*buddyCopy

// storeCopy takes a chunk of a checkpoint copy sent to this node as buddy and, once whole,
// verifies and stores it and answers the shard.
func (h *host) storeCopy(ctx actor.Context, m *messages.CheckpointCopy) {
	key := fmt.Sprintf("%s/%d/%d", m.JobId, m.Shard, m.Iteration)
	answer := func(err error) {
		delete(h.copies, key)
		if m.ReplyTo == nil {
			return
		}
		st := &messages.CheckpointStored{JobId: m.JobId, Shard: m.Shard, Iteration: m.Iteration}
		if err != nil {
			st.Error = err.Error()
			h.node.logger.Warn("cannot keep a checkpoint copy", "job", m.JobId, "shard", m.Shard, "iteration", m.Iteration, "error", err)
		}
		ctx.Send(pidOf(m.ReplyTo), st)
	}
	buddy, every := h.ctl.KeepsCopies(m.JobId, m.Shard)
	if !buddy {
		h.node.guard.drop(dropStalePrefix+"CheckpointCopy for a shard this node is not the buddy of", 1)
		return
	}
	c := h.copies[key]
	if c == nil {
		h.expireCopies()
		if len(h.copies) >= maxCopiesInFlight {
			answer(fmt.Errorf("node %s assembles %d checkpoint copies already", h.node.Address(), len(h.copies)))
			return
		}
		c = &buddyCopy{began: time.Now()}
		h.copies[key] = c
	}
	full, err := c.Add(m.Chunk)
	if errors.Is(err, chunked.ErrDuplicate) {
		return
	}
	if err != nil {
		answer(err)
		return
	}
	if !full {
		return
	}
	data := c.Data()
	delete(h.copies, key)
	system, replyTo, node := ctx.ActorSystem(), m.ReplyTo, h.node
	keep := jobctl.ShardDriverUncommittedKept(every)
	// Write off the host's mailbox: fsync takes milliseconds and the host answers pings.
	go func() {
		err := node.keepCheckpoint(checkpoint.Buddy, m.JobId, int(m.Shard), m.Iteration, data, keep)
		st := &messages.CheckpointStored{JobId: m.JobId, Shard: m.Shard, Iteration: m.Iteration}
		if err != nil {
			st.Error = err.Error()
		}
		if replyTo != nil {
			system.Root.Send(pidOf(replyTo), st)
		}
	}()
}

// expireCopies forgets the copies that did not arrive whole within copyTimeout: their
// chunks were lost, and they would hold memory forever.
func (h *host) expireCopies() {
	for key, c := range h.copies {
		if time.Since(c.began) > copyTimeout {
			delete(h.copies, key)
		}
	}
}

// pruneCommitted drops the node's copies (own and buddy) of a job's checkpoints older than
// the oldest committed checkpoint the coordinator may still fall back to. Pruning follows
// the commits, not the writes: shards may write checkpoints the job never commits (a
// partition, a dead buddy), and those must not push out the committed ones.
func (h *host) pruneCommitted(m *messages.CheckpointCommitted) {
	if m.Shards <= 0 || m.Shards > maxJobShards || m.KeepFrom <= 0 {
		return
	}
	h.node.setCommitted(m.JobId, m.Iteration)
	for s := 0; s < int(m.Shards); s++ {
		for _, kind := range []checkpoint.Kind{checkpoint.Own, checkpoint.Buddy} {
			if its, err := h.node.store.Iterations(kind, m.JobId, s); err == nil && len(its) > 0 && its[0] < m.KeepFrom {
				_ = h.node.store.Prune(kind, m.JobId, s, m.KeepFrom)
			}
		}
	}
}

// serveFetch answers a shard that asks this node for its copy of a checkpoint: the buddy copy,
// or the node's own (the shard lived here before).
func (h *host) serveFetch(ctx actor.Context, m *messages.CheckpointFetch) {
	if m.ReplyTo == nil {
		return
	}
	to := pidOf(m.ReplyTo)
	var tried []string
	for _, kind := range []checkpoint.Kind{checkpoint.Buddy, checkpoint.Own} {
		data, err := h.node.store.ReadBytes(kind, m.JobId, int(m.Shard), m.Iteration)
		if err == nil {
			sendCheckpoint(ctx, to, m.JobId, m.Shard, m.Iteration, data, nil)
			return
		}
		tried = append(tried, fmt.Sprintf("%s: %v", kind, err))
	}
	ctx.Send(to, &messages.CheckpointCopy{JobId: m.JobId, Shard: m.Shard, Iteration: m.Iteration, Error: strings.Join(tried, "; ")})
}
