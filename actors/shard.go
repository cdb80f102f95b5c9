package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/checkpoint"
	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/fsroot"
	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/jobctl"
	"github.com/didnmf/didnmf/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
)

// resultWindow is how many result chunks a shard keeps in flight to the client (flow control).
const resultWindow = 4

// shard is a shard actor: it holds X_i, C_i and a replica of B inside a kernels.Machine, sends
// the machine's contributions up the reduce tree and feeds it the results coming down. Its
// control (the assignment it serves, grants, the stop rule, checkpoints, report batching) is
// a jobctl.ShardDriver: the actor turns messages into the driver's events and carries out its
// Ready (see drive), and loads its block and builds its machine itself.
type shard struct {
	node        *Node
	a           *messages.ShardAssignment
	d           *jobctl.ShardDriver
	spec        *jobspec.Spec
	sqNorm      *float64 // sqNormX, once computed
	coordinator *actor.PID
	reducer     *actor.PID
	client      *actor.PID
	machine     *kernels.Machine
	x           kernels.Block
	meter       meter

	pending  *kernels.Step // the collective whose result the machine awaits
	incoming chunked.Assembly[float64]
	result   []float64 // the awaited result, whole, until the driver has it delivered
	// end is how the run ended (the driver's Finish), for the ShardDone once the client has
	// the factors.
	end      jobctl.ShardDriverFinish
	streams  []*resultStream
	finished bool // the driver ended the run: the factors stream to the client
	doneSent bool
	// floats counts the floats the shard sent up in the collectives of its iterations since
	// the machine was built at iteration floatsFrom (its ShardDone reports them per iteration).
	floats, floatsFrom int64
	ingest             *matio.BlockBuilder // while a streamed block arrives
	inflow             chunked.Ordered     // the streamed block's chunks
	// stream watches that the streamed block keeps coming once asked for (see checkStream).
	stream    jobctl.StreamWatch
	requested bool // the streamed block was asked of the client (it may wait for a stream slot)
	// init is a custom initialisation streamed with the block (nil: none, or read from files).
	init *initParts
	// overdraft is the memory the shard took from its node beyond its reserve (a streamed
	// block larger than announced), given back when it stops.
	overdraft int64

	// waitingSince is when the shard sent its partial of an iteration's collective (zero when
	// it waits for none): the wait for the result goes into its counters.
	waitingSince time.Time

	// restarted is set on an instance its host's supervisor made after a panic: it waits for
	// the coordinator's recovery assignment instead of starting on its own.
	restarted bool
	ckpt      checkpoints
}

func newShard(n *Node, a *messages.ShardAssignment, restarted bool) *shard {
	return &shard{node: n, a: a, d: jobctl.NewShardDriver(jobctl.ShardDriverConfig{Job: a.JobId, Shard: a.Shard, Node: n.Address()}),
		coordinator: pidOf(a.Coordinator), reducer: pidOf(a.Reducer), client: pidOf(a.Client), restarted: restarted}
}

// Receive implements actor.Actor.
func (s *shard) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if s.restarted {
			s.a.Epoch = 0 // whatever comes next is a recovery
			return
		}
		s.feed(ctx, assignEvent(ctx, s.a))
	case *messages.ShardAssignment:
		s.feed(ctx, assignEvent(ctx, m))
	case *checkpointWritten:
		s.feed(ctx, jobctl.ShardDriverCheckpointWritten{Epoch: m.epoch, Iteration: m.iteration, Data: m.data, Err: m.err, At: time.Now()})
	case *messages.CheckpointStored:
		var err error
		if m.Error != "" {
			err = fmt.Errorf("buddy %s: %s", s.a.Buddy, m.Error)
		}
		s.feed(ctx, jobctl.ShardDriverCheckpointStored{Job: m.JobId, Shard: m.Shard, Iteration: m.Iteration, Err: err, At: time.Now()})
	case *messages.CheckpointCopy:
		s.fetched(ctx, m)
	case *messages.CheckpointAt:
		s.feed(ctx, jobctl.ShardDriverCheckpointAt{Job: m.JobId, Epoch: m.Epoch, Iteration: m.Iteration})
	case *fetchTimeout:
		s.fetchTimedOut(ctx, m)
	case *streamIdle:
		s.checkStream(ctx, m)
	case *streamSlot:
		s.slotGiven(ctx)
	case *actor.Stopping, *actor.Restarting:
		s.endIngest(ctx)
		s.closeMachine()
		s.x = nil
		s.node.mem.release(s.overdraft)
		s.node.owned.add(s.a.Owner, -s.overdraft)
		s.overdraft = 0
		return
	case *messages.StartJob:
		s.feed(ctx, jobctl.ShardDriverStart{Job: m.JobId, Epoch: m.Epoch, Granted: m.Granted, At: time.Now()})
	case *messages.Reduced:
		s.feed(ctx, jobctl.ShardDriverResultChunk{Job: m.JobId, Epoch: m.Epoch, Seq: m.Seq, Lo: m.Lo, Hi: m.Hi})
	case *messages.Grant:
		s.feed(ctx, jobctl.ShardDriverGrant{Job: m.JobId, Epoch: m.Epoch, Granted: m.Granted})
	case *messages.Finish:
		s.feed(ctx, jobctl.ShardDriverStopAt{Job: m.JobId, Epoch: m.Epoch, At: m.At})
	case *messages.ResultAck:
		if s.node.ownerOK(ctx, "ResultAck", m.OwnerToken, s.a.OwnerToken) {
			s.ack(ctx, m)
		}
	case *messages.BlockChunk:
		if s.node.ownerOK(ctx, "BlockChunk", m.OwnerToken, s.a.OwnerToken) {
			s.blockChunk(ctx, m)
		}
	}
	s.drive(ctx, ctx.Message())
}

// assignEvent is an assignment as the driver's event: its checkpoints go to a buddy when it
// names another node.
func assignEvent(ctx actor.Context, m *messages.ShardAssignment) jobctl.ShardDriverAssign {
	return jobctl.ShardDriverAssign{Job: m.JobId, Shard: m.Shard, Epoch: m.Epoch, ResumeFrom: m.ResumeFrom,
		Buddy: m.Buddy != "" && m.Buddy != ctx.Self().Address}
}

// feed steps the driver an event; what it asks for is carried out by drive. An event the
// driver refuses is a fault of this actor: the shard fails.
func (s *shard) feed(ctx actor.Context, ev any) {
	if err := s.d.Step(ev); err != nil {
		s.fail(ctx, err)
	}
}

// drive carries out what the driver asks, in the order of ShardDriverReady's fields, until it
// asks for nothing more: it steps the machine when told to (Advance) and feeds back what the
// machine reached. msg is the message the actor handles, for the effects that act on it (an
// assignment to load, a chunk of a result to take).
func (s *shard) drive(ctx actor.Context, msg any) {
	for {
		rd := s.d.Ready()
		if rd.Empty() {
			return
		}
		s.meter.c.Stale += int64(rd.Stale)
		if rd.Load != nil {
			if m, ok := msg.(*messages.ShardAssignment); ok {
				s.rollback(ctx, m)
			} else {
				s.load(ctx)
			}
		}
		if m, ok := msg.(*messages.ShardAssignment); ok && rd.Superseded != 0 && m.Coordinator != nil {
			ctx.Send(pidOf(m.Coordinator), &messages.Placed{JobId: m.JobId, Actor: fmt.Sprintf("shard %d", m.Shard), Epoch: m.Epoch, Superseded: rd.Superseded})
		}
		if rd.Partial != nil {
			s.sendPartial(ctx, s.pending, rd.Partial.Seq)
			if !s.pending.Init {
				s.waitingSince = time.Now()
			}
		}
		if m, ok := msg.(*messages.Reduced); ok && rd.TakeChunk {
			s.takeResult(ctx, m)
		}
		if rd.Deliver {
			s.deliver()
		}
		for _, c := range rd.Checkpoints {
			s.checkpoint(ctx, c)
		}
		for _, c := range rd.Copies {
			sendCheckpoint(ctx, HostPID(s.a.Buddy), s.a.JobId, s.a.Shard, c.Iteration, c.Data, ctx.Self())
		}
		for _, out := range rd.Sends {
			s.meter.send(ctx, s.coordinator, out)
		}
		if rd.Finish != nil {
			s.finish(ctx, *rd.Finish)
		}
		if rd.Advance && !s.advance(ctx) {
			return
		}
	}
}

// load reads the shard's block and builds its machine, then tells the coordinator; a
// streamed block is asked of the client first.
func (s *shard) load(ctx actor.Context) {
	if err := s.check(); err != nil {
		s.placed(ctx, err)
		return
	}
	if x, init := s.node.keptBlock(ctx.Self().Id); x != nil && s.fits(x) {
		s.x, s.init = x, init
		s.prepare(ctx)
		return
	}
	if s.spec.Ingest == jobspec.IngestStream {
		err := s.startIngest()
		if err == nil {
			if s.node.streams.acquire(s.a.Owner, ctx.Self().Id, s.node.cfg.OwnerMaxStreams, notifier(ctx)) {
				s.requestBlock(ctx)
			} // else streamSlot comes when one of the owner's streams on this node ends
			return
		}
		s.placed(ctx, err)
		return
	}
	x, err := s.read()
	s.loaded(ctx, x, err)
}

// loaded takes the shard's block, read or streamed: it keeps the block and builds the machine
// on it, or reports why there is none.
func (s *shard) loaded(ctx actor.Context, x kernels.Block, err error) {
	if err != nil {
		s.placed(ctx, err)
		return
	}
	s.x = x
	s.node.keepBlock(ctx.Self().Id, x, s.init)
	s.prepare(ctx)
}

// fits tells whether a block has the shape of the shard's columns.
func (s *shard) fits(x kernels.Block) bool {
	_, n := x.Dims()
	return int64(n) == s.a.ColHi-s.a.ColLo
}

// prepare builds the machine on the shard's block: from the initialisation, or from the
// checkpoint the assignment resumes from (kept here, or fetched from a node that has a copy).
func (s *shard) prepare(ctx actor.Context) {
	t := s.a.ResumeFrom
	if t <= 0 {
		s.placed(ctx, s.build(s.x, nil))
		return
	}
	var tried []string
	for _, kind := range []checkpoint.Kind{checkpoint.Own, checkpoint.Buddy} {
		rec, err := s.node.store.Read(kind, s.a.JobId, int(s.a.Shard), t)
		if err == nil {
			if err = s.usable(rec); err == nil {
				s.placed(ctx, s.build(s.x, rec))
				return
			}
		}
		tried = append(tried, fmt.Sprintf("%s copy here: %v", kind, err))
	}
	s.ckpt.tried = tried
	s.ckpt.sources = nil
	for _, addr := range s.a.CheckpointAt {
		if addr != ctx.Self().Address {
			s.ckpt.sources = append(s.ckpt.sources, addr)
		}
	}
	s.fetchNext(ctx)
}

// usable checks that a checkpoint record is this shard's at the assignment's iteration.
func (s *shard) usable(r *checkpoint.Record) error {
	if r.Job != s.a.JobId || int64(r.Shard) != s.a.Shard || int64(r.Shards) != s.a.Shards || r.Iteration != s.a.ResumeFrom {
		return fmt.Errorf("checkpoint of job %s shard %d/%d iteration %d, want %s shard %d/%d iteration %d",
			r.Job, r.Shard, r.Shards, r.Iteration, s.a.JobId, s.a.Shard, s.a.Shards, s.a.ResumeFrom)
	}
	return nil
}

// rollback takes a recovery assignment the driver accepted (a later epoch): the shard rolls
// back in place to a checkpoint (or to its start), possibly with a new reducer and
// coordinator. Its block of X is kept when its columns did not change.
func (s *shard) rollback(ctx actor.Context, m *messages.ShardAssignment) {
	s.closeMachine()
	s.endIngest(ctx)
	x := s.x
	if x != nil && (m.ColLo != s.a.ColLo || m.ColHi != s.a.ColHi) {
		x = nil
	}
	counters := proto.Clone(&s.meter.c).(*messages.Counters)
	overdraft := s.overdraft // the kept block's; a block read or streamed anew takes its own
	if x == nil {
		s.node.mem.release(overdraft)
		s.node.owned.add(s.a.Owner, -overdraft)
		overdraft = 0
	}
	init := s.init
	if x == nil {
		init = nil
	}
	*s = shard{node: s.node, a: m, d: s.d, coordinator: pidOf(m.Coordinator), reducer: pidOf(m.Reducer), client: pidOf(m.Client),
		x: x, init: init, overdraft: overdraft}
	proto.Merge(&s.meter.c, counters)
	if x == nil {
		s.load(ctx)
		return
	}
	if err := s.check(); err != nil {
		s.placed(ctx, err)
		return
	}
	s.prepare(ctx)
}

// placed tells the coordinator the shard is ready, or why it is not.
func (s *shard) placed(ctx actor.Context, err error) {
	placed := &messages.Placed{JobId: s.a.JobId, Actor: fmt.Sprintf("shard %d", s.a.Shard), Pid: wirePid(ctx.Self()), Epoch: s.a.Epoch}
	var lost *checkpointLost
	if errors.As(err, &lost) {
		placed.CheckpointError = fmt.Sprintf("shard %d on node %s: %v", s.a.Shard, ctx.Self().Address, err)
	} else if err != nil {
		placed.Error = fmt.Sprintf("shard %d on node %s: %v", s.a.Shard, ctx.Self().Address, err)
	} else {
		placed.Features, placed.Samples = int64(s.machineRows()), s.a.ColHi-s.a.ColLo
		if s.x != nil {
			placed.SqNormX = s.sqNormX()
		}
	}
	ctx.Send(s.coordinator, placed)
}

// startIngest prepares to receive a streamed block.
func (s *shard) startIngest() error {
	natural := s.spec.NaturalLayout // dense or sparse: FromWire checked
	if s.spec.Features <= 0 || s.spec.Features > math.MaxInt32 {
		return fmt.Errorf("streamed block with %d features", s.spec.Features)
	}
	if natural == matio.LayoutDense || s.spec.Layout == matio.LayoutDense {
		if dense := 8 * s.spec.Features * (s.a.ColHi - s.a.ColLo); s.a.Reserve > 0 && dense > s.a.Reserve {
			return fmt.Errorf("the streamed block is %s dense, more than the %s reserved for the shard", cluster.FormatBytes(dense), cluster.FormatBytes(s.a.Reserve))
		}
	}
	s.init = nil
	if s.spec.Init == kernels.InitCustom {
		// The client streams the initial factors too (the nodes cannot read its files).
		cols, k, coef := s.a.ColHi-s.a.ColLo, int64(s.spec.Rank), s.spec.InitCoef != ""
		if need := initPartsBytes(s.spec.Features, cols, k, coef); s.a.Reserve > 0 && need > s.a.Reserve {
			return fmt.Errorf("the streamed initial factors are %s, more than the %s reserved for the shard", cluster.FormatBytes(need), cluster.FormatBytes(s.a.Reserve))
		}
		s.init = newInitParts(int(s.spec.Features), int(cols), int(k), coef)
	}
	var err error
	s.ingest, err = matio.NewBlockBuilderWithOptions(int(s.spec.Features), int(s.a.ColHi-s.a.ColLo), natural, s.spec.Layout,
		matio.ReadOptions{Missing: s.spec.Missing})
	return err
}

// ingestFits checks that what a streamed block holds so far, and what it will hold once
// built, stays within the memory reserved for the shard: the reserve follows the stored
// entries the client announced, and a client that announced too few is refused instead of
// taking the node's memory.
func (s *shard) ingestFits() error {
	now, final := s.ingest.Bytes()
	// The reserve covers the block and what the shard holds besides (factors, overhead).
	a := s.a
	cols, m, k := a.ColHi-a.ColLo, s.spec.Features, int64(s.spec.Rank)
	budget := a.Reserve - (shardFootprint(m, cols, k, 0, matio.LayoutDense) - 8*m*cols)
	over := max(now, final) - budget - s.overdraft
	if over <= 0 {
		return nil
	}
	// More than reserved (the stored entries the client announced are off, or unevenly spread
	// over the shards): take it from the node's free memory, if it has it and the owner's
	// quota has room (or a client would announce little and stream much past its quota).
	owner, quota := s.a.Owner, s.node.cfg.OwnerMemory
	if !s.node.owned.take(owner, over, quota) {
		return fmt.Errorf("the streamed block needs %s; the shard reserved %s from the entries the client announced (%d), and %s holds %s of node %s's memory, its quota is %s (serve --owner-memory)",
			cluster.FormatBytes(max(now, final)), cluster.FormatBytes(s.a.Reserve), s.spec.StoredEntries, ownerName(owner),
			cluster.FormatBytes(s.node.owned.used(owner)), s.node.Address(), cluster.FormatBytes(quota))
	}
	if s.node.mem.take(over) {
		s.overdraft += over
		return nil
	}
	s.node.owned.add(owner, -over)
	return fmt.Errorf("the streamed block needs %s; the shard reserved %s from the entries the client announced (%d) and node %s has not the rest free",
		cluster.FormatBytes(max(now, final)), cluster.FormatBytes(s.a.Reserve), s.spec.StoredEntries, s.node.Address())
}

// blockChunk takes a piece of a streamed block, acknowledges it and, when the block is
// complete, builds the machine.
func (s *shard) blockChunk(ctx actor.Context, m *messages.BlockChunk) {
	if m.JobId != s.a.JobId || m.Epoch != s.d.Epoch() {
		s.meter.c.Stale++
		return
	}
	if m.Shard != s.a.Shard {
		return
	}
	if s.ingest == nil {
		s.meter.c.Duplicates++ // a chunk sent again after the block
		return
	}
	last, err := s.inflow.Add(m.Chunk, chunked.LE(m.ColPtr), chunked.LE(m.RowIdx))
	if errors.Is(err, chunked.ErrDuplicate) {
		s.meter.c.Duplicates++ // a chunk sent again, or out of the stream's order
		return
	}
	switch {
	case err != nil:
		err = fmt.Errorf("streamed block: %w", err)
	case m.Error != "":
		err = fmt.Errorf("the client could not stream the input: %s", m.Error)
	case m.Part != messages.BlockPart_BLOCK_PART_DATA:
		if s.init == nil {
			err = fmt.Errorf("streamed block: a chunk of initial factors, in a job without a custom initialisation")
		} else {
			err = s.init.add(m.Part, m.Chunk.Offset, m.Chunk.Values)
		}
	case len(m.ColPtr) > 0:
		err = s.ingest.AddSparse(int(m.Col), m.ColPtr, m.RowIdx, m.Chunk.Values)
	default:
		err = s.ingest.AddDense(int(m.Chunk.Offset), m.Chunk.Values)
	}
	if err == nil {
		err = s.ingestFits()
	}
	if err != nil {
		s.endIngest(ctx)
		s.placed(ctx, err)
		return
	}
	s.stream.Chunk(time.Now())
	if m.Sender != nil {
		ctx.Send(pidOf(m.Sender), &messages.BlockAck{JobId: m.JobId, Shard: m.Shard, Seq: m.Chunk.Seq})
	}
	if !last {
		return
	}
	b := s.ingest
	s.endIngest(ctx)
	if !b.Complete() {
		s.placed(ctx, fmt.Errorf("the streamed block ended after %d chunks, incomplete", s.inflow.Received()))
		return
	}
	if s.init != nil {
		if err := s.init.complete(); err != nil {
			s.placed(ctx, fmt.Errorf("the streamed block ended incomplete: %w", err))
			return
		}
	}
	x, err := b.Block()
	s.loaded(ctx, x, err)
}

func (s *shard) machineRows() int {
	m, _ := s.x.Dims()
	return m
}

// check checks the assignment.
func (s *shard) check() error {
	spec, err := jobspec.FromWire(s.a.Spec)
	if err != nil {
		return err
	}
	s.spec = spec
	a := s.a
	if a.ColLo < 0 || a.ColHi <= a.ColLo || a.ColHi > a.TotalCols || a.Shard < 0 || a.Shard >= a.Shards {
		return fmt.Errorf("malformed assignment: shard %d of %d, columns [%d, %d) of %d", a.Shard, a.Shards, a.ColLo, a.ColHi, a.TotalCols)
	}
	return nil
}

// read reads the shard's own samples of the input.
func (s *shard) read() (kernels.Block, error) {
	a := s.a
	// Storage: the block comes stored as build will store it (no float64 copy of counts).
	src, err := matio.OpenAllWithOptions(s.node.cfg.Roots.Opener("--input"), s.spec.Inputs,
		matio.ReadOptions{Missing: s.spec.Missing, Storage: s.spec.Storage, MaxBytes: s.node.cfg.inputBytes()})
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if int64(src.Samples()) != a.TotalCols {
		return nil, fmt.Errorf("%s has %d samples here, the coordinator saw %d", src.Name(), src.Samples(), a.TotalCols)
	}
	return src.Read(int(a.ColLo), int(a.ColHi), s.spec.Layout)
}

// build builds the shard's machine on its block x: from the initialisation, or resuming from
// the checkpoint rec.
func (s *shard) build(x kernels.Block, rec *checkpoint.Record) error {
	a, spec := s.a, s.spec
	x, err := kernels.ApplyStorage(x, spec.Storage)
	if err != nil {
		var ie *kernels.InexactError
		if errors.As(err, &ie) {
			return fmt.Errorf("storage float32: sample %d, feature %d: value %v is not exactly a float32 (use storage float64 or auto)",
				int(a.ColLo)+ie.Col, ie.Row, ie.Value)
		}
		return err
	}
	if err := spec.Loss.CheckObserved(x, int(a.ColLo), spec.Options()); err != nil {
		return err
	}
	s.x = x
	m, _ := x.Dims()
	k := spec.Rank
	init := kernels.InitSpec{Method: spec.Init}
	var resume *kernels.Snapshot
	if rec != nil {
		resume = &kernels.Snapshot{Iteration: int(rec.Iteration), Initial: rec.Initial, Objective: rec.Objective, B: rec.B, C: rec.C, State: rec.State}
	} else if spec.Init == kernels.InitCustom && s.init != nil {
		init.B0, init.C0 = s.init.basis, s.init.coef // streamed by the client
	} else if spec.Init == kernels.InitCustom {
		if init.B0, init.C0, err = readCustomInit(s.node.cfg.Roots, spec, m, int(a.TotalCols), k, int(a.ColLo), int(a.ColHi)); err != nil {
			return err
		}
	}
	s.machine, err = kernels.NewMachine(kernels.ShardSpec{Algo: spec.Algo, Shard: int(a.Shard), Shards: int(a.Shards),
		ColOffset: int(a.ColLo), TotalCols: int(a.TotalCols), X: x, K: k, Seed: spec.Seed, Init: init,
		Options: spec.Options(), Pool: s.node.pool, Resume: resume})
	if err != nil {
		return err
	}
	s.node.addMachine(a.JobId, s.machine)
	built := jobctl.ShardDriverBuilt{Rule: spec.DeterministicRule(), CheckpointEvery: spec.CheckpointEvery}
	s.floats, s.floatsFrom = 0, 0
	if rec != nil {
		built.History = rec.Stopper
		s.floatsFrom = rec.Iteration
	}
	return s.d.Step(built)
}

// closeMachine closes the shard's machine, if any, and forgets it.
func (s *shard) closeMachine() {
	if s.machine != nil {
		s.node.removeMachine(s.a.JobId, s.machine)
		s.machine.Close()
		s.machine = nil
	}
}

// readCustomInit reads the whole initial basis and this shard's rows of the initial
// coefficients.
func readCustomInit(roots *fsroot.Roots, spec *jobspec.Spec, m, n, k, lo, hi int) (b0, c0 []float64, err error) {
	rows, cols, b, err := matio.ReadNPYMatrixWith(roots.Opener("--init-basis"), spec.InitBasis)
	if err != nil {
		return nil, nil, fmt.Errorf("init basis: %w", err)
	}
	if rows != m || cols != k {
		return nil, nil, fmt.Errorf("init basis %s: shape (%d, %d), want features x K = (%d, %d)", spec.InitBasis, rows, cols, m, k)
	}
	b0 = kernels.Transpose(b, k, m) // basis.npy is row-major M x K; B is column-major
	if spec.InitCoef == "" {
		return b0, nil, nil // a transform without a warm start: C starts at 0
	}
	src, err := matio.OpenWith(roots.Opener("--init-coef"), spec.InitCoef)
	if err != nil {
		return nil, nil, fmt.Errorf("init coef: %w", err)
	}
	defer src.Close()
	if src.Samples() != n || src.Features() != k {
		return nil, nil, fmt.Errorf("init coef %s: shape (%d, %d), want samples x K = (%d, %d)", spec.InitCoef, src.Samples(), src.Features(), n, k)
	}
	blk, err := src.Read(lo, hi, matio.LayoutDense)
	if err != nil {
		return nil, nil, fmt.Errorf("init coef: %w", err)
	}
	return b0, kernels.ToDense(blk).Data, nil
}

// advance steps the machine once, as the driver asked, and feeds the driver what it reached:
// a collective or the end of an iteration. It tells whether to go on driving (not when the
// job is being stopped: the host stops this actor next).
func (s *shard) advance(ctx actor.Context) bool {
	began := time.Now()
	st, err := s.machine.Next()
	if !st.Init {
		s.meter.c.ComputeSeconds += time.Since(began).Seconds()
	}
	if errors.Is(err, kernels.ErrInterrupted) {
		return false
	}
	if err != nil {
		s.fail(ctx, err)
		return true
	}
	if st.Kind == kernels.StepCollective {
		s.meter.init = st.Init
		s.pending = &st
		s.feed(ctx, jobctl.ShardDriverCollective{Iteration: int64(st.Iteration), Init: st.Init})
		return true
	}
	s.meter.init = false
	s.node.hooks.shardBoundary(s.a.Shard, s.a.Shards, int64(st.Iteration))
	ev := jobctl.ShardDriverBoundary{Iteration: int64(st.Iteration), Objective: st.Objective, Initial: st.Initial, At: time.Now()}
	if s.spec.Options().Masked() {
		ev.Mask, ev.TestSSE, ev.InitialTestSSE = maskStatsOf(st.Mask), st.TestSSE, st.InitialTestSSE
	}
	s.feed(ctx, ev)
	return true
}

// sendPartial sends the machine's contribution to its reducer, numbered seq, in chunks if it
// is large.
func (s *shard) sendPartial(ctx actor.Context, st *kernels.Step, seq uint64) {
	if !st.Init {
		s.floats += int64(len(st.Data))
	}
	segs := make([]int64, len(st.Segments))
	for i, v := range st.Segments {
		segs[i] = int64(v)
	}
	for _, c := range chunked.Split(st.Data, chunked.Floats) {
		s.meter.send(ctx, s.reducer, &messages.Partial{JobId: s.a.JobId, Epoch: s.a.Epoch, Seq: seq, Iteration: int64(st.Iteration), Init: st.Init,
			Op: int32(st.Op), Label: st.Label, Lo: s.a.Shard, Hi: s.a.Shard + 1, Segments: segs, Chunk: c})
	}
}

// takeResult takes a chunk of the awaited collective's result (the driver checked it is of
// that collective) and, when the result is whole and of the length the collective gives,
// tells the driver.
func (s *shard) takeResult(ctx actor.Context, m *messages.Reduced) {
	data, full, err := takeChunk(&s.incoming, m.Chunk, &s.meter.c)
	if err != nil {
		s.fail(ctx, fmt.Errorf("collective %d (%s): %w", m.Seq, s.pending.Label, err))
		return
	}
	if !full {
		return
	}
	if want, ok := expectedLen(s.pending, int(s.a.Shard)); ok && len(data) != want {
		s.fail(ctx, fmt.Errorf("collective %d (%s): result has %d values, want %d", m.Seq, s.pending.Label, len(data), want))
		return
	}
	s.result = data
	s.feed(ctx, jobctl.ShardDriverReduced{At: time.Now()})
}

// deliver gives the machine the awaited result.
func (s *shard) deliver() {
	if !s.pending.Init && !s.waitingSince.IsZero() {
		s.meter.c.WaitSeconds += time.Since(s.waitingSince).Seconds()
		s.waitingSince = time.Time{}
	}
	s.pending = nil
	s.machine.Deliver(s.result)
	s.result = nil
}

// expectedLen is the length of a collective's result a shard expects, when it can know it.
func expectedLen(st *kernels.Step, shard int) (int, bool) {
	switch st.Op {
	case kernels.OpAllReduce:
		return len(st.Data), true
	case kernels.OpReduceScatter:
		if shard < len(st.Segments) {
			return st.Segments[shard], true
		}
	}
	return 0, false
}

// fail reports an error to the coordinator; the shard does nothing more.
func (s *shard) fail(ctx actor.Context, err error) {
	_ = s.d.Step(jobctl.ShardDriverFailed{}) // a known event: no error
	s.node.logger.Error("shard failed", slog.String("job", s.a.JobId), slog.Int64("shard", s.a.Shard), slog.Any("error", err))
	ctx.Send(s.coordinator, &messages.ShardDone{JobId: s.a.JobId, Epoch: s.a.Epoch, Shard: s.a.Shard, Error: err.Error(), Counters: proto.Clone(&s.meter.c).(*messages.Counters)})
	s.doneSent = true
}

// finish ends the shard's run at its current iteration boundary, as the driver decided, and
// streams its factors to the client: C (unless the job writes it to a shared directory), and
// B from shard 0.
func (s *shard) finish(ctx actor.Context, end jobctl.ShardDriverFinish) {
	s.end, s.finished = end, true
	_, n := s.x.Dims()
	if dir := s.spec.OutShared; dir != "" {
		k := s.spec.Rank
		// C is K x n_i column-major: the shard's rows of the N x K row-major coef.npy.
		if err := matio.WriteNPYRowsWith(s.node.cfg.Roots.WriteOpener("--out-shared"), sharedCoefPartial(dir, s.a.JobId), int(s.a.TotalCols), k, int(s.a.ColLo), s.machine.Coef()); err != nil {
			s.fail(ctx, fmt.Errorf("--out-shared: writing rows %d to %d: %w", s.a.ColLo, s.a.ColHi, err))
			return
		}
	} else {
		s.streams = append(s.streams, newResultStream("C", s.a.Shard, s.a.ColLo, s.a.ColLo+int64(n), s.machine.Coef()))
	}
	if s.a.Shard == 0 && s.spec.Detached {
		// No client waits for B: it goes next to C, as basis.npy (features x K, row-major).
		m, k := s.machineRows(), s.spec.Rank
		if err := matio.WriteNPYRowsWith(s.node.cfg.Roots.WriteOpener("--out-shared"), sharedBasisPartial(s.spec.OutShared, s.a.JobId), m, k, 0,
			kernels.Transpose(s.machine.Basis(), m, k)); err != nil {
			s.fail(ctx, fmt.Errorf("--out-shared: writing the basis: %w", err))
			return
		}
	} else if s.a.Shard == 0 {
		s.streams = append(s.streams, newResultStream("B", 0, 0, 0, s.machine.Basis()))
	}
	for _, st := range s.streams {
		st.pump(ctx, s.a.JobId, s.client)
	}
	s.reportDone(ctx)
}

// ack takes the client's acknowledgement of result chunks and sends more.
func (s *shard) ack(ctx actor.Context, m *messages.ResultAck) {
	if m.JobId != s.a.JobId || s.doneSent || !s.finished {
		return // an ack before the run ended acknowledges nothing: it must not end the shard
	}
	for _, st := range s.streams {
		if st.name == m.Name {
			st.out.Ack(m.Seq)
			st.pump(ctx, s.a.JobId, s.client)
		}
	}
	s.reportDone(ctx)
}

// reportDone reports to the coordinator once the client has acknowledged every result chunk.
func (s *shard) reportDone(ctx actor.Context) {
	for _, st := range s.streams {
		if !st.out.Done() {
			return
		}
	}
	if s.doneSent {
		return
	}
	s.doneSent = true
	done := &messages.ShardDone{JobId: s.a.JobId, Epoch: s.a.Epoch, Shard: s.a.Shard, Iteration: s.end.Iteration,
		Stop: string(s.end.Reason), Residual: s.machine.LocalResidual(), SqNormX: s.sqNormX(), Counters: proto.Clone(&s.meter.c).(*messages.Counters),
		Threads: int64(s.node.pool.Workers())}
	done.Storage, done.XBytes = kernels.StoredAs([]kernels.Block{s.x})
	if ran := s.end.Iteration - s.floatsFrom; ran > 0 {
		done.FloatsPerIteration = float64(s.floats) / float64(ran)
	}
	ctx.Send(s.coordinator, done)
}

// resultStream sends one factor to the client in chunks, resultWindow at a time.
type resultStream struct {
	name         string
	shard        int64
	colLo, colHi int64
	out          *chunked.Out
}

func newResultStream(name string, shard, colLo, colHi int64, data []float64) *resultStream {
	return &resultStream{name: name, shard: shard, colLo: colLo, colHi: colHi,
		out: chunked.NewOut(chunked.Split(data, chunked.Floats), resultWindow)}
}

// pump sends the client the chunks the window lets go.
func (r *resultStream) pump(ctx actor.Context, job string, client *actor.PID) {
	r.out.Pump(func(c *messages.Chunk) {
		ctx.Send(client, &messages.ResultChunk{JobId: job, Name: r.name, Shard: r.shard, ColLo: r.colLo, ColHi: r.colHi,
			Chunk: c, Sender: wirePid(ctx.Self())})
	})
}

// meter counts the messages and bytes a job actor sends, apart for initialisation and
// iterations.
type meter struct {
	c    messages.Counters
	init bool
}

func (m *meter) send(ctx actor.SenderContext, pid *actor.PID, msg proto.Message) {
	jobctl.Count(&m.c, m.init, msg)
	ctx.Send(pid, msg)
}

// sqNormX is ||X_i||^2 of the shard's block, over its observed entries in a masked job
// (missing values and held-out entries left out), computed once.
func (s *shard) sqNormX() float64 {
	if s.sqNorm == nil {
		v := s.x.SqNorm()
		if o := s.spec.Options(); o.Masked() {
			v = kernels.ObservedStats(s.x, int(s.a.ColLo), o).ObservedSqNorm
		}
		s.sqNorm = &v
	}
	return *s.sqNorm
}

// maskStatsOf is a masked job's counts in wire form.
func maskStatsOf(m kernels.MaskStats) *messages.MaskStats {
	return &messages.MaskStats{Observed: m.Observed, Missing: m.Missing, Test: m.Test, ObservedSum: m.ObservedSum,
		ObservedSqNorm: m.ObservedSqNorm, TestSqNorm: m.TestSqNorm}
}
