package actors

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
)

// The end of a shard's run: streaming its factors to the client, and its final report to the
// coordinator once the client has them.

// finish ends the shard's run at its current iteration boundary, as the driver decided, and
// streams its factors to the client: C (unless the job writes it to a shared directory), and
// B from shard 0.
func (s *shard) finish(ctx actor.Context, end jobctl.ShardDriverFinish) {
	s.end, s.finished = end, true
	_, n := s.x.Dims()
	if dir := s.spec.OutShared; dir != "" {
		k := s.spec.Rank
		// C is K x n_i column-major: the shard's rows of the N x K row-major coef.npy.
		if err := matio.WriteNPYRowsWith(s.node.cfg.Roots.WriteOpener("out_shared"), sharedCoefPartial(dir, s.a.JobId), int(s.a.TotalCols), k, int(s.a.ColLo), s.machine.Coef()); err != nil {
			s.fail(ctx, fmt.Errorf("writing rows %d to %d of the coef into the shared output directory: %w", s.a.ColLo, s.a.ColHi, err))
			return
		}
	} else {
		s.streams = append(s.streams, newResultStream("C", s.a.Shard, s.a.ColLo, s.a.ColLo+int64(n), s.machine.Coef()))
	}
	if s.a.Shard == 0 && s.spec.Detached {
		// No client waits for B: it goes next to C, as basis.npy (features x K, row-major).
		m, k := s.machineRows(), s.spec.Rank
		if err := matio.WriteNPYRowsWith(s.node.cfg.Roots.WriteOpener("out_shared"), sharedBasisPartial(s.spec.OutShared, s.a.JobId), m, k, 0,
			kernels.Transpose(s.machine.Basis(), m, k)); err != nil {
			s.fail(ctx, fmt.Errorf("writing the basis into the shared output directory: %w", err))
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
	if s.spec.Options().TestOfSquares {
		done.TestSseOfSquares, done.TestSqNormOfSquares = s.machine.HeldOutOfSquares()
	}
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
