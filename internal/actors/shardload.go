package actors

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/checkpoint"
	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/fsroot"
	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
)

// A shard's block of X and its machine: reading the block (from the node's roots, or streamed
// by the client), checking it fits, building the kernels machine, and rolling back in place.

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
	opts := s.spec.ReadOptions()
	opts.MaxBytes = s.node.cfg.inputBytes()
	src, err := matio.OpenAllWithOptions(s.node.cfg.Roots.Opener("input"), s.spec.Inputs, opts)
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
	s.iterBegan = time.Time{} // a rebuilt machine's next iteration begins anew
}

// readCustomInit reads the whole initial basis and this shard's rows of the initial
// coefficients.
func readCustomInit(roots *fsroot.Roots, spec *jobspec.Spec, m, n, k, lo, hi int) (b0, c0 []float64, err error) {
	rows, cols, b, err := matio.ReadNPYMatrixWith(roots.Opener("init_basis"), spec.InitBasis)
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
	src, err := matio.OpenWith(roots.Opener("init_coef"), spec.InitCoef)
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
