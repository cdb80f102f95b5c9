package jobsim

import (
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

// reducer is a simulated node of the reduce tree: it gathers its children's partials of a
// collective, combines them in canonical order (kernels.TreeSum, as the actor does), sends
// the sum up (or, at the root, the result down) and passes results down.
type reducer struct {
	n        *node
	a        *messages.ReducerAssignment
	pid      *messages.Pid
	last     uint64              // the last collective combined
	awaiting uint64              // the collective sent up, whose result is awaited (0: none)
	parts    map[int64][]float64 // by child's first shard
}

func newReducer(n *node, a *messages.ReducerAssignment, id string) *reducer {
	return &reducer{n: n, a: a, pid: &messages.Pid{Address: n.addr, Id: id}, parts: map[int64][]float64{}}
}

func (r *reducer) receive(msg any) {
	w := r.n.w
	switch m := msg.(type) {
	case *partialMsg:
		if m.epoch != r.a.Epoch || m.seq <= r.last {
			w.stats.StaleAtReducers++
			return
		}
		if _, dup := r.parts[m.lo]; dup {
			w.stats.DuplicatesDropped++
			return
		}
		if !r.isChild(m.lo) {
			return
		}
		r.parts[m.lo] = m.data
		if len(r.parts) < len(r.a.Children) {
			return
		}
		r.last = m.seq
		parts := make([][]float64, 0, len(r.parts))
		for i := 0; i < len(r.a.ChildRanges); i += 2 {
			parts = append(parts, r.parts[r.a.ChildRanges[i]])
		}
		var out []float64
		if m.op == kernels.OpAllGather {
			for _, p := range parts {
				out = append(out, p...)
			}
		} else {
			out = make([]float64, len(parts[0]))
			kernels.TreeSum(out, parts)
		}
		r.parts = map[int64][]float64{}
		if r.a.Parent != nil {
			r.awaiting = m.seq
			w.send(r.n.addr, r.a.Parent, &partialMsg{epoch: r.a.Epoch, seq: m.seq, lo: r.a.Lo, hi: r.a.Hi, op: m.op, segments: m.segments, data: out})
			return
		}
		r.down(m.seq, out)
	case *reducedMsg:
		if m.epoch != r.a.Epoch || m.seq != r.awaiting {
			w.stats.StaleAtReducers++
			return
		}
		r.awaiting = 0
		r.down(m.seq, m.data)
	case *messages.StopJob:
		if m.JobId == r.a.JobId {
			w.send(r.n.addr, r.a.Coordinator, &messages.ReducerDone{JobId: r.a.JobId, Epoch: r.a.Epoch, Lo: r.a.Lo, Hi: r.a.Hi, Level: r.a.Level})
			delete(r.n.reducers, r.pid.Id)
		}
	}
}

// isChild tells whether lo is the first shard of one of the reducer's children.
func (r *reducer) isChild(lo int64) bool {
	for i := 0; i < len(r.a.ChildRanges); i += 2 {
		if r.a.ChildRanges[i] == lo {
			return true
		}
	}
	return false
}

// down passes a result to the children.
func (r *reducer) down(seq uint64, data []float64) {
	for _, c := range r.a.Children {
		r.n.w.send(r.n.addr, c, &reducedMsg{epoch: r.a.Epoch, seq: seq, data: data})
	}
}
