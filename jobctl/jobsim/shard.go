package jobsim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/jobctl"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

// The checkpoint messages of the simulation. On the wire they are CheckpointCopy and
// CheckpointStored, chunked and checksummed; here they travel whole. Collectives travel as
// the wire's Partial and Reduced, since the reducers are the production jobctl.Reducer.
type (
	checkpointCopy struct {
		key     ckptKey
		snap    snapshot
		replyTo *messages.Pid
	}
	checkpointStored struct {
		iter int64
		err  string
	}
)

// snapshot is a checkpoint's content: the machine's snapshot and the stop rule's history.
type snapshot struct {
	machine kernels.Snapshot
	stopper []float64
}

// shard is a simulated shard actor around a real kernels.Machine: the same steps, the same
// collectives, the same bits as the actor in package actors.
type shard struct {
	n       *node
	a       *messages.ShardAssignment
	pid     *messages.Pid
	x       kernels.Block
	machine *kernels.Machine
	stopper *kernels.Stopper
	pending kernels.Step // the collective awaiting its result
	// incoming assembles the chunks of the collective's result.
	incoming chunked.Assembly[float64]
	seq      uint64
	waiting  bool
	started  time.Duration
	running  bool
	paused   bool
	done     bool
	ckptAt   int64
	// writing are the checkpoints sent to the buddy and not acknowledged, by iteration.
	writing map[int64]bool
	// stream watches the block a client that never streams does not send (Faults.NeverStreams).
	stream     jobctl.StreamWatch
	streamDone bool
}

func newShard(n *node, a *messages.ShardAssignment) *shard {
	return &shard{n: n, a: a, pid: jobctl.ChildPid(n.addr, jobctl.ShardName(a.JobId, a.Shard)), writing: map[int64]bool{}}
}

// load builds the shard's machine, from the start or from a checkpoint copy (its node's, or
// one of the nodes the assignment names), and tells the coordinator.
func (s *shard) load() {
	w, a := s.n.w, s.a
	if w.opt.Faults.NeverStreams {
		s.awaitStream()
		return
	}
	s.x = w.data.x.ColSlice(int(a.ColLo), int(a.ColHi))
	placed := &messages.Placed{JobId: a.JobId, Actor: fmt.Sprintf("shard %d", a.Shard), Pid: s.pid, Epoch: a.Epoch}
	var resume *snapshot
	if a.ResumeFrom > 0 {
		key := ckptKey{a.JobId, a.Shard, a.ResumeFrom}
		for _, at := range append([]string{s.n.addr}, a.CheckpointAt...) {
			if at != s.n.addr && !w.reachable(s.n.addr, at) {
				continue
			}
			if r := w.nodes[at].store[key]; r != nil && !r.corrupt {
				resume = &r.snap
				break
			}
		}
		if resume == nil {
			placed.CheckpointError = fmt.Sprintf("no valid copy of shard %d's checkpoint at iteration %d", a.Shard, a.ResumeFrom)
			w.send(s.n.addr, a.Coordinator, placed)
			return
		}
	}
	spec := w.data.spec
	ss := kernels.ShardSpec{Algo: spec.Algo, Shard: int(a.Shard), Shards: int(a.Shards), ColOffset: int(a.ColLo), TotalCols: int(a.TotalCols),
		X: s.x, K: spec.K, Seed: spec.Seed, Init: spec.Init, Options: spec.Options, Pool: w.data.pool}
	if resume != nil {
		snap := resume.machine
		ss.Resume = &snap
	}
	m, err := kernels.NewMachine(ss)
	if err != nil {
		placed.Error = err.Error()
		w.send(s.n.addr, a.Coordinator, placed)
		return
	}
	s.machine = m
	s.stopper = kernels.NewStopper(spec.Stop)
	if resume != nil {
		s.stopper.Restore(resume.stopper)
	}
	rows, cols := s.x.Dims()
	placed.Samples, placed.Features, placed.SqNormX = int64(cols), int64(rows), s.x.SqNorm()
	w.send(s.n.addr, a.Coordinator, placed)
}

// awaitStream is the shard of a job whose client never streams: it asks for its block and
// takes the few chunks the client sends (none to three, each within the wait of the one
// before), then nothing comes, and it fails its job as package actors' shards do.
func (s *shard) awaitStream() {
	w, a := s.n.w, s.a
	s.stream = jobctl.NewStreamWatch(w.now(), w.opt.StreamIdle)
	id := jobctl.HostName + "/" + jobctl.ShardName(a.JobId, a.Shard)
	current := func() bool { return s.n.alive && s.n.shards[id] == s && !s.streamDone }
	var at time.Duration
	for range w.rng.IntN(4) {
		at += time.Duration(w.rng.Int64N(int64(w.opt.StreamIdle)))
		w.after(at, func() {
			if current() {
				s.stream.Chunk(w.now())
			}
		})
	}
	var check func()
	check = func() {
		if !current() {
			return
		}
		if idle, again := s.stream.Idle(w.now()); !idle {
			w.after(again, check)
			return
		}
		s.streamDone = true
		announced := fmt.Sprintf("%d bytes for shard %d", 8*int64(w.data.x.Rows)*(a.ColHi-a.ColLo), a.Shard)
		w.send(s.n.addr, a.Coordinator, &messages.Placed{JobId: a.JobId, Actor: fmt.Sprintf("shard %d", a.Shard), Pid: s.pid, Epoch: a.Epoch,
			Error: fmt.Sprintf("shard %d on node %s: %s", a.Shard, s.n.addr, s.stream.Error(announced))})
	}
	w.after(s.stream.Wait, check)
}

// close ends the shard's machine.
func (s *shard) close() {
	if s.machine != nil {
		s.machine.Close()
		s.machine = nil
	}
}

// mine tells whether a control message is for this shard's job and epoch.
func (s *shard) mine(job string, epoch uint64) bool { return job == s.a.JobId && epoch == s.a.Epoch }

func (s *shard) receive(msg any) {
	switch m := msg.(type) {
	case *messages.StartJob:
		if s.mine(m.JobId, m.Epoch) && s.machine != nil && !s.running {
			s.running, s.started = true, s.n.w.clock
			s.run()
		}
	case *messages.Reduced:
		if m.JobId != s.a.JobId || m.Epoch != s.a.Epoch || !s.waiting || m.Seq != s.seq || s.machine == nil ||
			m.Lo != s.a.Shard || m.Hi != s.a.Shard+1 {
			s.n.w.stats.StaleAtShards++
			return
		}
		full, err := s.incoming.Add(m.Chunk)
		if errors.Is(err, chunked.ErrDuplicate) {
			s.n.w.stats.DuplicatesDropped++
			return
		}
		if err != nil {
			s.fail(fmt.Errorf("result of collective %d: %w", m.Seq, err))
			return
		}
		if !full {
			return
		}
		data := s.incoming.Data()
		s.incoming = chunked.Assembly[float64]{}
		// A reduce-scatter's reducer sends the shard its own segment only, as the actor expects.
		want := len(s.pending.Data)
		if s.pending.Op == kernels.OpReduceScatter {
			want = s.pending.Segments[s.a.Shard]
		} else if s.pending.Op == kernels.OpAllGather {
			want = -1
		}
		if want >= 0 && len(data) != want {
			s.fail(fmt.Errorf("result of collective %d has %d values, want %d", m.Seq, len(data), want))
			return
		}
		s.waiting = false
		s.machine.Deliver(data)
		s.run()
	case *messages.Finish:
		if s.mine(m.JobId, m.Epoch) && m.At < 0 {
			s.paused = true
		}
	case *messages.CheckpointAt:
		if s.mine(m.JobId, m.Epoch) {
			s.ckptAt = m.Iteration
		}
	case *checkpointStored:
		if s.writing[m.iter] {
			delete(s.writing, m.iter)
			s.n.w.send(s.n.addr, s.a.Coordinator, &messages.CheckpointDone{JobId: s.a.JobId, Epoch: s.a.Epoch, Shard: s.a.Shard,
				Iteration: m.iter, Error: m.err, Seconds: 0.001})
		}
	}
}

// run steps the machine to its next collective (sent up the tree) or iteration boundary
// (reported, checkpointed, and the next iteration scheduled after the iteration's cost).
func (s *shard) run() {
	w := s.n.w
	if s.machine == nil || s.done || s.waiting {
		return
	}
	st, err := s.machine.Next()
	if err != nil {
		s.done = true
		w.send(s.n.addr, s.a.Coordinator, &messages.ShardDone{JobId: s.a.JobId, Epoch: s.a.Epoch, Shard: s.a.Shard, Error: err.Error()})
		return
	}
	if st.Kind == kernels.StepCollective {
		s.seq++
		s.waiting = true
		s.pending = kernels.Step{Op: st.Op, Segments: slices.Clone(st.Segments), Data: st.Data}
		w.stats.Partials++
		segments := make([]int64, len(st.Segments))
		for i, n := range st.Segments {
			segments[i] = int64(n)
		}
		for _, c := range chunked.Split(slices.Clone(st.Data), chunked.Floats) {
			w.send(s.n.addr, s.a.Reducer, &messages.Partial{JobId: s.a.JobId, Epoch: s.a.Epoch, Seq: s.seq, Iteration: int64(st.Iteration),
				Init: st.Init, Op: int32(st.Op), Label: st.Label, Lo: s.a.Shard, Hi: s.a.Shard + 1, Segments: segments, Chunk: c})
		}
		return
	}
	it := int64(st.Iteration)
	stop, why := s.stopper.Observe(st.Iteration, st.Objective, st.Initial, 0)
	if s.a.Shard == 0 {
		rep := &messages.IterationDone{JobId: s.a.JobId, Epoch: s.a.Epoch, Shard: 0, Iteration: it, Objective: st.Objective,
			Initial: st.Initial, Seconds: (w.clock - s.started).Seconds()}
		if stop {
			rep.Stop = string(why)
		}
		w.send(s.n.addr, s.a.Coordinator, rep)
	}
	every := s.a.Spec.GetCheckpointEvery()
	if !stop && (every > 0 && it%every == 0 || it == s.ckptAt) {
		s.checkpoint(it)
	}
	if stop {
		s.done = true
		w.deposit(s.a, s.machine)
		w.send(s.n.addr, s.a.Coordinator, &messages.ShardDone{JobId: s.a.JobId, Epoch: s.a.Epoch, Shard: s.a.Shard, Iteration: it,
			Stop: string(why), Residual: s.machine.LocalResidual(), SqNormX: s.x.SqNorm()})
		return
	}
	if s.paused {
		return // the control lost its quorum: wait for a recovery
	}
	cost := w.opt.IterCost
	if s.n.slow {
		cost *= 5
	}
	w.after(cost, func() {
		if s.n.alive && s.n.shards[s.pid.Id] == s {
			s.run()
		}
	})
}

// checkpoint writes the shard's state at iteration it on its node and has its buddy keep a
// copy; the coordinator hears of it once the buddy acknowledged.
func (s *shard) checkpoint(it int64) {
	w := s.n.w
	snap, err := s.machine.Snapshot()
	if err != nil {
		panic(err) // at a boundary, Snapshot cannot fail
	}
	rec := snapshot{machine: snap, stopper: s.stopper.History()}
	key := ckptKey{s.a.JobId, s.a.Shard, it}
	if s.n.full {
		w.send(s.n.addr, s.a.Coordinator, &messages.CheckpointDone{JobId: s.a.JobId, Epoch: s.a.Epoch, Shard: s.a.Shard, Iteration: it, Error: "disk full"})
		return
	}
	s.n.store[key] = &record{snap: rec, corrupt: w.corrupts()}
	w.written[key] = true
	w.stats.Checkpoints++
	s.writing[it] = true
	if s.a.Buddy == "" {
		s.receive(&checkpointStored{iter: it})
		return
	}
	w.send(s.n.addr, jobctl.HostPid(s.a.Buddy), &checkpointCopy{key: key, snap: rec, replyTo: s.pid})
}

// fail reports an error to the coordinator; the shard does nothing more (as the actor's fail).
func (s *shard) fail(err error) {
	s.done = true
	s.n.w.send(s.n.addr, s.a.Coordinator, &messages.ShardDone{JobId: s.a.JobId, Epoch: s.a.Epoch, Shard: s.a.Shard, Error: err.Error()})
}
