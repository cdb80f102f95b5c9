package jobctl

import (
	"errors"
	"fmt"

	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/internal/jobctl/internal/bugs"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

// Offer is what a reduce-tree node did with an incoming partial (Gather.Offer).
type Offer int

// What Gather.Offer did with a partial.
const (
	OfferAccepted  Offer = iota // taken; the collective is not complete yet
	OfferComplete               // taken; every child's contribution is in
	OfferDuplicate              // this child's contribution (or chunk) was already in: dropped
	OfferStale                  // an older epoch or an already completed collective: dropped
)

// Gather collects the children's contributions to one collective at a reduce-tree node and
// combines them in the canonical order: the deterministic core of a Reducer, kept apart so
// it can be tested on its own.
type Gather struct {
	epoch  uint64
	ranges [][2]int64 // shard ranges of the children, in id order
	done   uint64     // last completed collective
	seq    uint64     // collective being gathered (0: none)
	head   *messages.Partial
	parts  []chunked.Assembly[float64]
	filled int
	// planted are deliberate bugs (the simulator's bite test).
	planted bugs.Set
}

// NewGather returns the gather of a reduce-tree node of epoch whose children cover the shard
// ranges ranges, in id order.
func NewGather(epoch uint64, ranges [][2]int64) *Gather {
	return &Gather{epoch: epoch, ranges: ranges, parts: make([]chunked.Assembly[float64], len(ranges))}
}

// child returns the index of the child covering [lo, hi), or -1.
func (g *Gather) child(lo, hi int64) int {
	for i, r := range g.ranges {
		if r[0] == lo && r[1] == hi {
			return i
		}
	}
	return -1
}

// Offer takes one partial (or one chunk of it). An error comes with OfferStale and says why
// the partial cannot belong (a corrupted chunk's wraps chunked.ErrChecksum).
func (g *Gather) Offer(p *messages.Partial) (Offer, error) {
	if p.Epoch < g.epoch || p.Seq <= g.done {
		return OfferStale, nil
	}
	if p.Epoch > g.epoch {
		return OfferStale, fmt.Errorf("partial from epoch %d ahead of this reducer's epoch %d", p.Epoch, g.epoch)
	}
	c := g.child(p.Lo, p.Hi)
	if c < 0 {
		return OfferStale, fmt.Errorf("partial for shards [%d, %d) is not from a child of this reducer", p.Lo, p.Hi)
	}
	switch {
	case g.seq == 0:
		if p.Seq != g.done+1 {
			return OfferStale, fmt.Errorf("partial for collective %d, expected %d", p.Seq, g.done+1)
		}
		g.seq, g.head = p.Seq, p
	case p.Seq != g.seq:
		return OfferStale, fmt.Errorf("partial for collective %d while gathering %d", p.Seq, g.seq)
	case p.Op != g.head.Op || p.Label != g.head.Label || p.Iteration != g.head.Iteration:
		return OfferStale, fmt.Errorf("shards [%d, %d) sent %s %q (iteration %d) while others sent %s %q (iteration %d)",
			p.Lo, p.Hi, kernels.Op(p.Op), p.Label, p.Iteration, kernels.Op(g.head.Op), g.head.Label, g.head.Iteration)
	}
	full, err := g.parts[c].Add(p.Chunk)
	if errors.Is(err, chunked.ErrDuplicate) && g.planted.Has(bugs.DuplicateCounts) {
		err, full = nil, true
	}
	if errors.Is(err, chunked.ErrDuplicate) {
		return OfferDuplicate, nil
	}
	if err != nil {
		return OfferStale, fmt.Errorf("partial from shards [%d, %d): %w", p.Lo, p.Hi, err)
	}
	if !full {
		return OfferAccepted, nil
	}
	g.filled++
	if g.filled < len(g.parts) {
		return OfferAccepted, nil
	}
	return OfferComplete, nil
}

// Combine returns the combined payload of the complete collective and resets the node for
// the next one. Sums follow kernels.TreeSum over the children in id order, which with a
// power-of-two fan-in is bitwise the order of the in-process driver.
func (g *Gather) Combine() (*messages.Partial, []float64, error) {
	head := g.head
	parts := make([][]float64, len(g.parts))
	total := 0
	for i := range g.parts {
		parts[i] = g.parts[i].Data()
		total += len(parts[i])
	}
	g.done, g.seq, g.head, g.filled = g.seq, 0, nil, 0
	for i := range g.parts {
		g.parts[i] = chunked.Assembly[float64]{}
	}
	switch kernels.Op(head.Op) {
	case kernels.OpAllReduce, kernels.OpReduceScatter:
		for i, p := range parts {
			if len(p) != len(parts[0]) {
				return head, nil, fmt.Errorf("%s %q: child %d sent %d values, child 0 sent %d", kernels.Op(head.Op), head.Label, i, len(p), len(parts[0]))
			}
		}
		out := make([]float64, len(parts[0]))
		if g.planted.Has(bugs.SequentialSum) {
			for _, p := range parts {
				for i, v := range p {
					out[i] += v
				}
			}
			return head, out, nil
		}
		kernels.TreeSum(out, parts)
		return head, out, nil
	case kernels.OpAllGather:
		out := make([]float64, 0, total)
		for _, p := range parts {
			out = append(out, p...)
		}
		return head, out, nil
	}
	return head, nil, fmt.Errorf("unknown collective op %d", head.Op)
}

// segmentSlice returns the part of a reduce-scatter result that covers shards [lo, hi), given
// the result covers shards [from, to) and segments gives every shard's segment length.
func segmentSlice(data []float64, segments []int64, from, lo, hi int64) ([]float64, error) {
	if lo < from || hi > int64(len(segments)) || lo > hi {
		return nil, fmt.Errorf("segments [%d, %d) outside [%d, %d)", lo, hi, from, len(segments))
	}
	var start, end int64
	for s := from; s < hi; s++ {
		if s < lo {
			start += segments[s]
		}
		end += segments[s]
	}
	if end > int64(len(data)) || start < 0 {
		return nil, fmt.Errorf("reduce-scatter result has %d values, segments need %d", len(data), end)
	}
	return data[start:end], nil
}
