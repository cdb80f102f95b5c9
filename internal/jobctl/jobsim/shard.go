package jobsim

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/internal/jobctl"
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
		key ckptKey
		err string
	}
)

// snapshot is a checkpoint's content: the machine's snapshot and the stop rule's history.
type snapshot struct {
	machine kernels.Snapshot
	stopper []float64
}

// diskLatency is how long a checkpoint write takes on a simulated disk.
const diskLatency = 100 * time.Microsecond

// shard is a simulated shard actor: the production jobctl.ShardDriver decides (which
// assignment it serves, grants, the stop rule, checkpoints and their retention, report
// batching) and a real kernels.Machine computes, with the same steps, collectives and bits as
// the actor in package actors. Like that actor, the shard only turns the world's messages and
// timers into the driver's events and carries out its Ready: it sends, writes checkpoints
// into its node's simulated disk, builds the machine (rolled back in place by a recovery)
// and hands its factors over when the driver finishes the run.
type shard struct {
	n   *node
	a   *messages.ShardAssignment // the assignment served (nil until the first is loaded)
	pid *messages.Pid
	d   *jobctl.ShardDriver
	// reserve is the node's memory the host reserved for the shard.
	reserve int64

	x       kernels.Block
	machine *kernels.Machine
	pending kernels.Step // the collective awaiting its result
	// incoming assembles the chunks of the collective's result; result is the result, whole,
	// until the driver has it delivered.
	incoming chunked.Assembly[float64]
	result   []float64
	// snaps are the checkpoints written and not yet copied to the buddy, by iteration.
	snaps map[int64]snapshot
	// gen counts the machines built and runs ended: a step computed for an earlier one (an
	// iteration's end reported after its cost) is dropped.
	gen uint64
	// epoch is the latest epoch the driver served: it must never go back (epoch fencing).
	epoch uint64
	// granted is the last iteration the coordinator of the served assignment granted (StartJob,
	// Grant): the machine must not end an iteration past it.
	granted int64
	// stream watches the block a client that never streams does not send (Faults.NeverStreams).
	stream     jobctl.StreamWatch
	streamDone bool
}

func newShard(n *node, job string, index int64) *shard {
	pid := jobctl.ChildPid(n.addr, jobctl.ShardName(job, index))
	return &shard{n: n, pid: pid, snaps: map[int64]snapshot{},
		d: jobctl.NewShardDriver(jobctl.ShardDriverConfig{Job: job, Shard: index, Node: n.addr, Bugs: n.w.opt.Bugs})}
}

// current tells whether the shard still lives on its node.
func (s *shard) current() bool { return s.n.alive && s.n.shards[s.pid.Id] == s }

// receive turns a message for the shard into the driver's event, then carries out what the
// driver asks.
func (s *shard) receive(msg any) {
	now := s.n.w.now()
	switch m := msg.(type) {
	case *messages.ShardAssignment:
		s.feed(jobctl.ShardDriverAssign{Job: m.JobId, Shard: m.Shard, Epoch: m.Epoch, ResumeFrom: m.ResumeFrom,
			Buddy: m.Buddy != "" && m.Buddy != s.n.addr})
	case *messages.StartJob:
		s.grant(m.Epoch, m.Granted)
		s.feed(jobctl.ShardDriverStart{Job: m.JobId, Epoch: m.Epoch, Granted: m.Granted, At: now})
	case *messages.Reduced:
		s.feed(jobctl.ShardDriverResultChunk{Job: m.JobId, Epoch: m.Epoch, Seq: m.Seq, Lo: m.Lo, Hi: m.Hi})
	case *messages.Grant:
		s.grant(m.Epoch, m.Granted)
		s.feed(jobctl.ShardDriverGrant{Job: m.JobId, Epoch: m.Epoch, Granted: m.Granted})
	case *messages.Finish:
		s.feed(jobctl.ShardDriverStopAt{Job: m.JobId, Epoch: m.Epoch, At: m.At})
	case *messages.CheckpointAt:
		s.feed(jobctl.ShardDriverCheckpointAt{Job: m.JobId, Epoch: m.Epoch, Iteration: m.Iteration})
	case *checkpointStored:
		var err error
		if m.err != "" {
			err = fmt.Errorf("buddy: %s", m.err)
		}
		s.feed(jobctl.ShardDriverCheckpointStored{Job: m.key.job, Shard: m.key.shard, Iteration: m.key.iter, Err: err, At: now})
	default:
		return
	}
	s.drive(msg)
}

// grant records the iterations a coordinator granted the assignment of epoch.
func (s *shard) grant(epoch uint64, granted int64) {
	if s.a != nil && epoch == s.a.Epoch {
		s.granted = max(s.granted, granted)
	}
}

// feed steps the driver one event. An event it refuses is one this runtime should not have
// fed it: a broken invariant of the simulation (the actor fails the shard instead).
func (s *shard) feed(ev any) {
	if err := s.d.Step(ev); err != nil {
		s.n.w.violation("shard on %s: %v", s.n.addr, err)
	}
	if e := s.d.Epoch(); e < s.epoch {
		s.n.w.violation("shard %s on %s went back from epoch %s to %s: it took a superseded coordinator's assignment",
			s.pid.Id, s.n.addr, jobctl.EpochString(s.epoch), jobctl.EpochString(e))
	} else {
		s.epoch = e
	}
}

// drive carries out what the driver asks, in the order of ShardDriverReady's fields, until it
// asks for nothing more (as actors' shard.drive). msg is the message being handled, for the
// effects that act on it (an assignment to load or answer, a chunk of a result to take).
func (s *shard) drive(msg any) {
	w := s.n.w
	for s.current() {
		rd := s.d.Ready()
		if rd.Empty() {
			return
		}
		w.stats.StaleAtShards += rd.Stale
		if m, ok := msg.(*messages.ShardAssignment); ok && rd.Load != nil {
			s.load(m)
		}
		if m, ok := msg.(*messages.ShardAssignment); ok && rd.Superseded != 0 {
			w.stats.Superseded++
			w.send(s.n.addr, m.Coordinator, &messages.Placed{JobId: m.JobId, Actor: fmt.Sprintf("shard %d", m.Shard), Epoch: m.Epoch, Superseded: rd.Superseded})
		}
		if rd.Partial != nil {
			s.sendPartial(rd.Partial.Seq)
		}
		if m, ok := msg.(*messages.Reduced); ok && rd.TakeChunk {
			s.takeChunk(m)
		}
		if rd.Deliver {
			s.machine.Deliver(s.result)
			s.result = nil
		}
		for _, c := range rd.Checkpoints {
			s.checkpoint(c)
		}
		for _, c := range rd.Copies {
			s.copyToBuddy(c)
		}
		for _, out := range rd.Sends {
			w.send(s.n.addr, s.a.Coordinator, out)
		}
		if rd.Finish != nil {
			s.finish(*rd.Finish)
		}
		if rd.Advance {
			s.advance()
		}
	}
}

// load builds the shard's machine for an assignment the driver took: its first, or a
// recovery's, which rolls the shard back in place (to a checkpoint, or to its start) and
// keeps its block when its columns did not change. It tells the coordinator.
func (s *shard) load(a *messages.ShardAssignment) {
	w := s.n.w
	s.close()
	s.gen++
	if s.a != nil && (a.ColLo != s.a.ColLo || a.ColHi != s.a.ColHi) {
		s.x = nil
	}
	s.a, s.pending, s.incoming, s.result, s.snaps, s.streamDone, s.granted = a, kernels.Step{}, chunked.Assembly[float64]{}, nil, map[int64]snapshot{}, false, 0
	if w.opt.Faults.NeverStreams {
		s.awaitStream()
		return
	}
	if s.x == nil {
		s.x = w.data.x.ColSlice(int(a.ColLo), int(a.ColHi))
	}
	placed := &messages.Placed{JobId: a.JobId, Actor: fmt.Sprintf("shard %d", a.Shard), Pid: s.pid, Epoch: a.Epoch}
	var resume *snapshot
	if a.ResumeFrom > 0 {
		key := ckptKey{a.JobId, a.Shard, a.ResumeFrom}
		for _, at := range append([]string{s.n.addr}, a.CheckpointAt...) {
			if at != s.n.addr && !w.reachable(s.n.addr, at) {
				continue
			}
			if r := w.nodes[at].copyOf(key); r != nil {
				if r.incarnation < w.nodes[at].incarnation {
					w.stats.ResumedFromKeptDisk++
				}
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
	built := jobctl.ShardDriverBuilt{Rule: spec.Stop, CheckpointEvery: a.Spec.GetCheckpointEvery()}
	if resume != nil {
		snap := resume.machine
		ss.Resume = &snap
		built.History = resume.stopper
	}
	m, err := kernels.NewMachine(ss)
	if err != nil {
		placed.Error = err.Error()
		w.send(s.n.addr, a.Coordinator, placed)
		return
	}
	s.machine = m
	s.feed(built)
	rows, cols := s.x.Dims()
	placed.Samples, placed.Features, placed.SqNormX = int64(cols), int64(rows), s.x.SqNorm()
	w.send(s.n.addr, a.Coordinator, placed)
}

// awaitStream is the shard of a job whose client never streams: it asks for its block and
// takes the few chunks the client sends (none to three, each within the wait of the one
// before), then nothing comes, and it fails its job as package actors' shards do.
func (s *shard) awaitStream() {
	w, a, gen := s.n.w, s.a, s.gen
	s.stream = jobctl.NewStreamWatch(w.now(), w.opt.StreamIdle)
	current := func() bool { return s.current() && s.gen == gen && !s.streamDone }
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

// advance steps the machine once, as the driver asked, and feeds the driver what it reached: a
// collective at once, the end of an iteration once the iteration's cost has passed (the
// events that come meanwhile reach the driver first, as they wait in the actor's mailbox).
func (s *shard) advance() {
	w := s.n.w
	st, err := s.machine.Next()
	if err != nil {
		s.fail(err)
		return
	}
	if st.Kind == kernels.StepCollective {
		s.pending = kernels.Step{Op: st.Op, Segments: slices.Clone(st.Segments), Data: slices.Clone(st.Data), Init: st.Init,
			Iteration: st.Iteration, Label: st.Label}
		s.feed(jobctl.ShardDriverCollective{Iteration: int64(st.Iteration), Init: st.Init})
		return
	}
	ev := jobctl.ShardDriverBoundary{Iteration: int64(st.Iteration), Objective: st.Objective, Initial: st.Initial}
	cost := w.opt.IterCost
	if s.n.slow {
		cost *= 5
	}
	gen := s.gen
	w.after(cost, func() {
		if s.current() && s.gen == gen {
			if ev.Iteration > s.granted {
				w.violation("shard %s on %s ended iteration %d, past the %d its coordinator granted", s.pid.Id, s.n.addr, ev.Iteration, s.granted)
			}
			ev.At = w.now()
			s.feed(ev)
			s.drive(nil)
		}
	})
}

// sendPartial sends the machine's contribution to the pending collective up the tree,
// numbered seq, in chunks.
func (s *shard) sendPartial(seq uint64) {
	w, st := s.n.w, s.pending
	w.stats.Partials++
	segments := make([]int64, len(st.Segments))
	for i, n := range st.Segments {
		segments[i] = int64(n)
	}
	for _, c := range chunked.Split(st.Data, chunked.Floats) {
		w.send(s.n.addr, s.a.Reducer, &messages.Partial{JobId: s.a.JobId, Epoch: s.a.Epoch, Seq: seq, Iteration: int64(st.Iteration),
			Init: st.Init, Op: int32(st.Op), Label: st.Label, Lo: s.a.Shard, Hi: s.a.Shard + 1, Segments: segments, Chunk: c})
	}
}

// takeChunk takes a chunk of the awaited result (the driver checked it is of that collective)
// and, when the result is whole and of the length the collective gives, tells the driver.
func (s *shard) takeChunk(m *messages.Reduced) {
	w := s.n.w
	full, err := s.incoming.Add(m.Chunk)
	if errors.Is(err, chunked.ErrDuplicate) {
		w.stats.DuplicatesDropped++
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
	s.result = data
	s.feed(jobctl.ShardDriverReduced{At: w.now()})
}

// checkpoint snapshots the machine at the boundary it sits at, as the driver asked, and writes
// it into the node's store after the disk's latency (or fails, on a full disk); the driver
// hears when it is written.
func (s *shard) checkpoint(c jobctl.ShardDriverCheckpoint) {
	w := s.n.w
	snap, err := s.machine.Snapshot()
	if err != nil {
		w.violation("shard %s on %s: a checkpoint at iteration %d asked off a boundary: %v", s.pid.Id, s.n.addr, c.Iteration, err)
		return
	}
	rec := snapshot{machine: snap, stopper: c.History}
	key := ckptKey{s.a.JobId, s.a.Shard, c.Iteration}
	gen := s.gen
	w.after(diskLatency, func() {
		if !s.current() || s.gen != gen {
			return
		}
		err := s.n.write(key, false, rec, c.Keep)
		if err == nil {
			s.snaps[c.Iteration] = rec
		}
		s.feed(jobctl.ShardDriverCheckpointWritten{Epoch: c.Epoch, Iteration: c.Iteration, Err: err, At: w.now()})
		s.drive(nil)
	})
}

// copyToBuddy sends a checkpoint written on the node to the buddy's host, which keeps it and
// answers.
func (s *shard) copyToBuddy(c jobctl.ShardDriverCopy) {
	w := s.n.w
	rec, ok := s.snaps[c.Iteration]
	if !ok {
		w.violation("shard %s on %s: a copy asked of checkpoint %d, which it did not write", s.pid.Id, s.n.addr, c.Iteration)
		return
	}
	delete(s.snaps, c.Iteration)
	key := ckptKey{s.a.JobId, s.a.Shard, c.Iteration}
	w.copySent(key, s.a.Buddy)
	w.send(s.n.addr, jobctl.HostPid(s.a.Buddy), &checkpointCopy{key: key, snap: rec, replyTo: s.pid})
}

// finish ends the run as the driver decided: the factors go to the client (here, at once) and
// the coordinator hears ShardDone.
func (s *shard) finish(end jobctl.ShardDriverFinish) {
	w := s.n.w
	s.gen++
	w.deposit(s.a, end.Iteration, s.machine)
	w.send(s.n.addr, s.a.Coordinator, &messages.ShardDone{JobId: s.a.JobId, Epoch: s.a.Epoch, Shard: s.a.Shard, Iteration: end.Iteration,
		Stop: string(end.Reason), Residual: s.machine.LocalResidual(), SqNormX: s.x.SqNorm()})
}

// fail reports an error to the coordinator; the shard does nothing more (as the actor's fail).
func (s *shard) fail(err error) {
	s.gen++
	s.feed(jobctl.ShardDriverFailed{})
	s.n.w.send(s.n.addr, s.a.Coordinator, &messages.ShardDone{JobId: s.a.JobId, Epoch: s.a.Epoch, Shard: s.a.Shard, Error: err.Error()})
}
