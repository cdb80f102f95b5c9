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

// Shard 0 reports its iterations (IterationDone) to the coordinator, which passes each on to
// the client as progress. In a job without a time limit it sends them in bursts, at the first
// iteration end reportInterval after the last burst or when maxReports wait, instead of one
// message each way per iteration: on small iterations those two messages woke two more
// processes (coordinator and client) per allreduce, and an allreduce between 3 processes took
// about 0.4 ms with them, 0.25 ms without. Every iteration is still reported, in order, with
// the seconds taken at its end; the last ones before a stop at once. A job with a time limit
// reports every iteration at once: the coordinator grants iterations and applies the limit
// from the reports. When a node fails, the coordinator may not have heard of the iterations
// of the last reportInterval: its count of iterations redone is that much lower.
const (
	reportInterval = 10 * time.Millisecond
	maxReports     = 64
)

// shard is a shard actor: it holds X_i, C_i and a replica of B inside a kernels.Machine, sends
// the machine's contributions up the reduce tree and feeds it the results coming down.
type shard struct {
	node        *Node
	a           *messages.ShardAssignment
	spec        *jobspec.Spec
	sqNorm      *float64 // sqNormX, once computed
	coordinator *actor.PID
	reducer     *actor.PID
	client      *actor.PID
	machine     *kernels.Machine
	x           kernels.Block
	stopper     *kernels.Stopper
	meter       meter

	seq      uint64 // last collective sent up
	pending  *kernels.Step
	incoming chunked.Assembly[float64]
	boundary int64 // iteration the machine sits at the end of (-1: none)
	granted  int64
	finishAt int64
	started  time.Time
	initDone time.Duration
	finished bool
	stopWhy  kernels.StopReason
	streams  []*resultStream
	doneSent bool
	lastIter int64
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

	// reports are shard 0's reports not sent yet, reportedAt when it last sent some.
	reports    []*messages.IterationDone
	reportedAt time.Time

	// restarted is set on an instance its host's supervisor made after a panic: it waits for
	// the coordinator's recovery assignment instead of starting on its own.
	restarted bool
	ckpt      checkpoints
	ckptAt    int64 // the iteration the coordinator asked a checkpoint at (automatic cadence)
}

func newShard(n *Node, a *messages.ShardAssignment, restarted bool) *shard {
	return &shard{node: n, a: a, coordinator: pidOf(a.Coordinator), reducer: pidOf(a.Reducer), client: pidOf(a.Client),
		boundary: -1, finishAt: -1, restarted: restarted}
}

// Receive implements actor.Actor.
func (s *shard) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if s.restarted {
			s.a.Epoch = 0 // whatever comes next is a recovery
			return
		}
		s.load(ctx)
	case *messages.ShardAssignment:
		s.reassign(ctx, m)
	case *checkpointWritten:
		s.checkpointWritten(ctx, m)
	case *messages.CheckpointStored:
		s.checkpointStored(ctx, m)
	case *messages.CheckpointCopy:
		s.fetched(ctx, m)
	case *messages.CheckpointAt:
		if s.mine(m.JobId, m.Epoch) {
			s.ckptAt = m.Iteration
		}
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
	case *messages.StartJob:
		if !s.mine(m.JobId, m.Epoch) || s.machine == nil || !s.started.IsZero() {
			return
		}
		s.started = time.Now()
		s.granted = m.Granted
		s.run(ctx)
	case *messages.Reduced:
		s.reduced(ctx, m)
	case *messages.Grant:
		if !s.mine(m.JobId, m.Epoch) {
			return
		}
		s.granted = max(s.granted, m.Granted)
		if s.boundary >= 0 && !s.finished && s.boundary < s.granted {
			s.run(ctx)
		}
	case *messages.Finish:
		if !s.mine(m.JobId, m.Epoch) {
			return
		}
		if m.At < 0 {
			// The coordinator lost its quorum: stop at the next boundary and wait for a
			// recovery assignment (a Grant of this epoch never comes).
			s.granted = -1
			return
		}
		s.finishAt = m.At
		if s.boundary >= 0 && !s.finished && s.boundary >= s.finishAt {
			s.finish(ctx, kernels.StopTimeLimit)
		}
	case *messages.ResultAck:
		if s.node.ownerOK(ctx, "ResultAck", m.OwnerToken, s.a.OwnerToken) {
			s.ack(ctx, m)
		}
	case *messages.BlockChunk:
		if s.node.ownerOK(ctx, "BlockChunk", m.OwnerToken, s.a.OwnerToken) {
			s.blockChunk(ctx, m)
		}
	}
}

// mine tells whether a message belongs to this shard's job and epoch; others are dropped.
func (s *shard) mine(job string, epoch uint64) bool {
	if job != s.a.JobId || epoch != s.a.Epoch {
		s.meter.c.Stale++
		return false
	}
	return true
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

// reassign takes a recovery assignment: a later epoch rolls the shard back to a checkpoint (or
// to its start), possibly with a new reducer and coordinator. Its block of X is kept.
func (s *shard) reassign(ctx actor.Context, m *messages.ShardAssignment) {
	if m.JobId != s.a.JobId || m.Shard != s.a.Shard || m.Epoch <= s.a.Epoch {
		s.meter.c.Stale++
		if m.JobId == s.a.JobId && m.Epoch < s.a.Epoch && m.Coordinator != nil {
			ctx.Send(pidOf(m.Coordinator), &messages.Placed{JobId: m.JobId, Actor: fmt.Sprintf("shard %d", m.Shard), Epoch: m.Epoch, Superseded: s.a.Epoch})
		}
		return
	}
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
	*s = shard{node: s.node, a: m, coordinator: pidOf(m.Coordinator), reducer: pidOf(m.Reducer), client: pidOf(m.Client),
		boundary: -1, finishAt: -1, x: x, init: init, overdraft: overdraft}
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
	if !s.mine(m.JobId, m.Epoch) || m.Shard != s.a.Shard {
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
	s.stopper = kernels.NewStopper(spec.DeterministicRule())
	s.floats, s.floatsFrom = 0, 0
	if rec != nil {
		s.stopper.Restore(rec.Stopper)
		s.lastIter, s.floatsFrom = rec.Iteration, rec.Iteration
	}
	return nil
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

// run advances the machine until it needs a collective's result, waits for a grant, or ends.
func (s *shard) run(ctx actor.Context) {
	for !s.finished {
		began := time.Now()
		st, err := s.machine.Next()
		if !st.Init {
			s.meter.c.ComputeSeconds += time.Since(began).Seconds()
		}
		if errors.Is(err, kernels.ErrInterrupted) {
			return // the job is being stopped: the host stops this actor next
		}
		if err != nil {
			s.fail(ctx, err)
			return
		}
		if st.Kind == kernels.StepCollective {
			s.meter.init = st.Init
			s.boundary = -1
			s.pending = &st
			s.sendPartial(ctx, &st)
			if !st.Init {
				s.waitingSince = time.Now()
			}
			return
		}
		s.boundary = int64(st.Iteration)
		s.lastIter = s.boundary
		s.meter.init = false
		s.node.hooks.shardBoundary(s.a.Shard, s.a.Shards, s.boundary)
		stop, why := s.stopper.Observe(st.Iteration, st.Objective, st.Initial, 0)
		if every := s.spec.CheckpointEvery; !stop && (every > 0 && s.boundary%every == 0 || every < 0 && s.boundary == s.ckptAt) {
			s.checkpoint(ctx, st)
		}
		if s.a.Shard == 0 {
			done := &messages.IterationDone{JobId: s.a.JobId, Epoch: s.a.Epoch, Shard: s.a.Shard, Iteration: s.boundary,
				Objective: st.Objective, Initial: st.Initial, Seconds: time.Since(s.started).Seconds(), InitSeconds: s.initDone.Seconds()}
			if s.spec.Options().Masked() {
				done.Mask, done.TestSse, done.InitialTestSse = maskStatsOf(st.Mask), st.TestSSE, st.InitialTestSSE
			}
			if stop {
				done.Stop = string(why)
			}
			s.reports = append(s.reports, done)
			if stop || s.granted != jobctl.NoGrant || s.finishAt >= 0 || len(s.reports) >= maxReports || time.Since(s.reportedAt) >= reportInterval {
				s.sendReports(ctx)
			}
		}
		switch {
		case stop:
			s.finish(ctx, why)
		case s.finishAt >= 0 && s.boundary >= s.finishAt:
			s.finish(ctx, kernels.StopTimeLimit)
		case s.boundary >= s.granted:
			return // wait for a Grant or a Finish
		}
	}
}

// sendReports sends shard 0's pending reports to the coordinator, oldest first.
func (s *shard) sendReports(ctx actor.Context) {
	for _, r := range s.reports {
		s.meter.send(ctx, s.coordinator, r)
	}
	s.reports = s.reports[:0]
	s.reportedAt = time.Now()
}

// sendPartial sends the machine's contribution to its reducer, in chunks if it is large.
func (s *shard) sendPartial(ctx actor.Context, st *kernels.Step) {
	s.seq++
	if !st.Init {
		s.floats += int64(len(st.Data))
	}
	segs := make([]int64, len(st.Segments))
	for i, v := range st.Segments {
		segs[i] = int64(v)
	}
	for _, c := range chunked.Split(st.Data, chunked.Floats) {
		s.meter.send(ctx, s.reducer, &messages.Partial{JobId: s.a.JobId, Epoch: s.a.Epoch, Seq: s.seq, Iteration: int64(st.Iteration), Init: st.Init,
			Op: int32(st.Op), Label: st.Label, Lo: s.a.Shard, Hi: s.a.Shard + 1, Segments: segs, Chunk: c})
	}
}

// reduced takes (a chunk of) a collective's result and, when it is complete, resumes the machine.
func (s *shard) reduced(ctx actor.Context, m *messages.Reduced) {
	if !s.mine(m.JobId, m.Epoch) {
		return
	}
	if s.pending == nil || m.Seq != s.seq || m.Lo != s.a.Shard || m.Hi != s.a.Shard+1 {
		s.meter.c.Stale++
		return
	}
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
	if s.pending.Init {
		s.initDone = time.Since(s.started)
	} else if !s.waitingSince.IsZero() {
		s.meter.c.WaitSeconds += time.Since(s.waitingSince).Seconds()
		s.waitingSince = time.Time{}
	}
	s.pending = nil
	s.machine.Deliver(data)
	s.run(ctx)
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
	s.finished = true
	s.node.logger.Error("shard failed", slog.String("job", s.a.JobId), slog.Int64("shard", s.a.Shard), slog.Any("error", err))
	ctx.Send(s.coordinator, &messages.ShardDone{JobId: s.a.JobId, Epoch: s.a.Epoch, Shard: s.a.Shard, Error: err.Error(), Counters: proto.Clone(&s.meter.c).(*messages.Counters)})
	s.doneSent = true
}

// finish ends the shard's run at its current iteration boundary and streams its factors to the
// client: C (unless the job writes it to a shared directory), and B from shard 0.
func (s *shard) finish(ctx actor.Context, why kernels.StopReason) {
	s.sendReports(ctx)
	s.finished = true
	s.stopWhy = why
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
	if m.JobId != s.a.JobId || s.doneSent {
		return
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
	done := &messages.ShardDone{JobId: s.a.JobId, Epoch: s.a.Epoch, Shard: s.a.Shard, Iteration: s.lastIter,
		Stop: string(s.stopWhy), Residual: s.machine.LocalResidual(), SqNormX: s.sqNormX(), Counters: proto.Clone(&s.meter.c).(*messages.Counters),
		Threads: int64(s.node.pool.Workers())}
	done.Storage, done.XBytes = kernels.StoredAs([]kernels.Block{s.x})
	if ran := s.lastIter - s.floatsFrom; ran > 0 {
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
