package actors

import (
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/usererr"
)

// blockWindow is how many chunks of a streamed block the client keeps in flight to a shard:
// with at most chunked.Floats values a chunk, the client holds about 4 MiB a shard in buffers,
// whatever the size of the input.
const blockWindow = 4

// blockStreams are a job's streamed blocks on the client side (ingest "stream").
type blockStreams struct {
	src     matio.Source
	natural matio.Layout
	mu      sync.Mutex
	by      map[int64]*blockStream // by shard
	stopped bool
	wg      sync.WaitGroup // the streams' goroutines, which read src
	token   string         // the job's owner token, which shards check on every chunk
	// init is a custom initialisation the client read for the nodes (nil without one).
	init *streamedInit
}

// streamedInit is a custom initialisation a streamed job sends with every shard's block: the
// whole basis, and each shard's samples of the initial coefficients when given.
type streamedInit struct {
	basis []float64    // features x K column-major
	coef  matio.Source // samples x K; nil for a transform without a warm start
	k     int          // K
}

// blockStream sends one shard its block in chunks, blockWindow at a time.
type blockStream struct {
	acks  chan int64 // cumulative acknowledgements from the shard
	stop  chan struct{}
	epoch uint64 // of the request
}

// openStreams opens a streamed job's inputs on the client, fills in the shape and natural
// layout the nodes need, since they cannot read the files, and checks the job against them
// (jobspec.Spec.CheckOn), a custom initialisation's shapes included.
func openStreams(spec *messages.JobSpec) (*blockStreams, error) {
	opts, err := jobspec.ReadOptionsOf(spec)
	if err != nil {
		return nil, err
	}
	src, err := matio.OpenAllWithOptions(matio.OpenInput, spec.Inputs, opts)
	if err != nil {
		return nil, err
	}
	natural := matio.NaturalLayout(src)
	spec.Samples, spec.Features, spec.NaturalLayout = int64(src.Samples()), int64(src.Features()), jobspec.WireLayout(natural)
	if n, ok := matio.StoredEntries(src); ok {
		spec.StoredEntries = n
	}
	b := &blockStreams{src: src, natural: natural, by: map[int64]*blockStream{}}
	if b.init, err = openStreamedInit(spec, src.Name()); err != nil {
		src.Close()
		return nil, err
	}
	return b, nil
}

// openStreamedInit checks the job against its input, whose shape spec holds: it reads a
// custom initialisation's basis on the client and opens its coefficients (nil without a
// custom initialisation), and checks their shapes with the rest of the job.
func openStreamedInit(spec *messages.JobSpec, name string) (*streamedInit, error) {
	typed, err := jobspec.FromWire(spec)
	if err != nil {
		return nil, err
	}
	d := jobspec.Shape{Name: name, Samples: int(spec.Samples), Features: int(spec.Features), StoredEntries: spec.StoredEntries}
	var in *streamedInit
	var b []float64
	if spec.Init == messages.Init_INIT_CUSTOM {
		rows, cols, data, err := matio.ReadNPYMatrix(spec.InitBasis)
		if err != nil {
			return nil, usererr.Field("init_basis", "{init_basis}: %w", err)
		}
		d.InitBasis, b = &[2]int{rows, cols}, data
		in = &streamedInit{k: int(spec.Rank)}
		if spec.InitCoef != "" {
			if in.coef, err = matio.Open(spec.InitCoef); err != nil {
				return nil, usererr.Field("init_coef", "{init_coef}: %w", err)
			}
			d.InitCoef = &[2]int{in.coef.Samples(), in.coef.Features()}
		}
	}
	if err := typed.CheckOn(&d, jobspec.Cluster{Where: jobspec.Submitted}); err != nil {
		if in != nil && in.coef != nil {
			in.coef.Close()
		}
		return nil, err
	}
	if in != nil {
		in.basis = kernels.Transpose(b, in.k, d.Features) // basis.npy is row-major M x K
	}
	return in, nil
}

// close stops every stream, and closes the input once no stream reads it any more.
func (b *blockStreams) close() {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	b.stopped = true
	for _, s := range b.by {
		close(s.stop)
	}
	b.mu.Unlock()
	go func() {
		b.wg.Wait() // Source.Read must not run concurrently with Close
		b.src.Close()
		if b.init != nil && b.init.coef != nil {
			b.init.coef.Close()
		}
	}()
}

// request starts streaming a shard's block. A request repeated for the same shard (a
// duplicate message) starts nothing; one of a later epoch (the shard was placed anew after a
// failure) streams the block again.
func (b *blockStreams) request(system *actor.ActorSystem, self *actor.PID, m *messages.BlockRequest, token string) error {
	n := int64(b.src.Samples())
	if m.ColLo < 0 || m.ColHi <= m.ColLo || m.ColHi > n || m.ShardPid == nil {
		return fmt.Errorf("shard %d asked for samples [%d, %d) of %d", m.Shard, m.ColLo, m.ColHi, n)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return nil
	}
	b.token = token
	if old, dup := b.by[m.Shard]; dup {
		if m.Epoch <= old.epoch {
			return nil
		}
		// A recovery placed the shard anew: stream its block again to the new actor.
		close(old.stop)
	}
	s := &blockStream{acks: make(chan int64, 2*blockWindow), stop: make(chan struct{}), epoch: m.Epoch}
	b.by[m.Shard] = s
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.send(system, self, m, s)
	}()
	return nil
}

// ack hands a shard's acknowledgement to its stream.
func (b *blockStreams) ack(m *messages.BlockAck) {
	b.mu.Lock()
	s := b.by[m.Shard]
	b.mu.Unlock()
	if s == nil {
		return
	}
	select {
	case s.acks <- m.Seq:
	default: // acks are cumulative: a later one carries this one's news
	}
}

// send reads the shard's block piece by piece and sends it, waiting for acknowledgements
// whenever blockWindow chunks are in flight. A read error (bad data in the file) is sent to
// the shard as the last chunk, so that the job fails with the file's own message.
func (b *blockStreams) send(system *actor.ActorSystem, self *actor.PID, req *messages.BlockRequest, s *blockStream) {
	to := pidOf(req.ShardPid)
	sender := wirePid(self)
	b.mu.Lock()
	token := b.token
	b.mu.Unlock()
	m := int64(b.src.Features())
	per := max(1, int64(chunked.Floats)/m) // samples a read
	// A read is one chunk: sparse, whole columns; dense, per samples of m features, at most
	// chunked.Floats values unless one sample alone is more (per 1), which is then cut into
	// as many chunks as it takes (every read of one sample is whole).
	count := (req.ColHi - req.ColLo + per - 1) / per
	if b.natural == matio.LayoutDense {
		count *= (per*m + chunked.Floats - 1) / chunked.Floats
	}
	// A custom initialisation: the basis before the block, the coefficients after it, a
	// read of perCoef samples a chunk.
	var perCoef int64
	var basis []*messages.Chunk
	if in := b.init; in != nil {
		basis = chunked.Split(in.basis, chunked.Floats)
		count += int64(len(basis))
		if in.coef != nil {
			perCoef = max(1, int64(chunked.Floats/in.k))
			count += (req.ColHi - req.ColLo + perCoef - 1) / perCoef
		}
	}
	w := chunked.NewWindow(blockWindow)
	emit := func(c *messages.BlockChunk) bool {
		for !w.Open() {
			select {
			case a := <-s.acks:
				w.Ack(a)
			case <-s.stop:
				return false
			}
		}
		if c.Chunk == nil {
			c.Chunk = &messages.Chunk{} // an error's: no piece, CRC 0
		}
		c.Chunk.Seq, c.Chunk.Count = w.Next(), count
		c.JobId, c.Epoch, c.Shard, c.Sender, c.OwnerToken = req.JobId, req.Epoch, req.Shard, sender, token
		system.Root.Send(to, c)
		return true
	}
	for _, c := range basis {
		c.Total = 0
		if !emit(&messages.BlockChunk{Part: messages.BlockPart_BLOCK_PART_INIT_BASIS, Chunk: c}) {
			return
		}
	}
	for lo := req.ColLo; lo < req.ColHi; lo += per {
		hi := min(lo+per, req.ColHi)
		blk, err := b.src.Read(int(lo), int(hi), b.natural)
		if err != nil {
			emit(&messages.BlockChunk{Error: err.Error()})
			return
		}
		switch x := blk.(type) {
		case *kernels.Dense:
			base := (lo - req.ColLo) * m
			for _, c := range chunked.Split(x.Data, chunked.Floats) {
				c.Offset, c.Total = base+c.Offset, 0 // into the block
				if !emit(&messages.BlockChunk{Chunk: c}) {
					return
				}
			}
		case *kernels.CSC:
			ptr := make([]int64, x.Cols+1)
			for i := range ptr {
				ptr[i] = int64(x.ColPtr[i] - x.ColPtr[0])
			}
			lo0, hi0 := x.ColPtr[0], x.ColPtr[x.Cols]
			c := &messages.BlockChunk{Col: lo - req.ColLo, ColPtr: ptr, RowIdx: x.RowIdx[lo0:hi0], Chunk: &messages.Chunk{Values: x.Val[lo0:hi0]}}
			chunked.Seal(c.Chunk, chunked.LE(c.ColPtr), chunked.LE(c.RowIdx))
			if !emit(c) {
				return
			}
		default:
			emit(&messages.BlockChunk{Error: fmt.Sprintf("unexpected block type %T", blk)})
			return
		}
	}
	if perCoef == 0 {
		return
	}
	k := int64(b.init.k)
	for lo := req.ColLo; lo < req.ColHi; lo += perCoef {
		hi := min(lo+perCoef, req.ColHi)
		blk, err := b.init.coef.Read(int(lo), int(hi), matio.LayoutDense)
		if err != nil {
			emit(&messages.BlockChunk{Error: "init coef: " + err.Error()})
			return
		}
		c := chunked.Split(kernels.ToDense(blk).Data, chunked.Floats)[0] // one chunk: (hi-lo) k <= Floats
		c.Offset, c.Total = (lo-req.ColLo)*k, 0
		if !emit(&messages.BlockChunk{Part: messages.BlockPart_BLOCK_PART_INIT_COEF, Chunk: c}) {
			return
		}
	}
}
