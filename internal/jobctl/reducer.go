package jobctl

import (
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/internal/jobctl/internal/bugs"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

// Reducer is one node of a job's reduce tree as a state machine: it gathers its children's
// partials of a collective (Gather), combines them in canonical order, sends the sum to its
// parent (or, at the root, straight back down) and passes the result down to its children:
// all of it, or for a reduce-scatter each child's segments. It has no clock, network or
// goroutine: the reducer actor (package actors) and the simulator (jobctl/jobsim) feed it
// the wire messages it receives and perform what Ready returns.
//
//	r, err := jobctl.NewReducer(assignment, selfAddress) // err: a malformed assignment
//	r.Step(partial)                                       // *messages.Partial, Reduced, StopJob
//	rd := r.Ready()                                       // sends, logs, Combined, Stopped
type Reducer struct {
	a        *messages.ReducerAssignment
	self     string // the address of the node the reducer runs on
	children []*messages.Pid
	ranges   [][2]int64
	g        *Gather
	head     *messages.Partial // the collective sent up, awaiting its result
	down     chunked.Assembly[float64]
	failed   bool
	stopped  bool
	c        messages.Counters // what it sent, and the stale and duplicate messages it dropped
	init     bool              // the collective at hand belongs to the initialisation
	planted  bugs.Set
	ready    ReducerReady
}

// ReducerReady is what a Reducer asks its runtime to do, in order.
type ReducerReady struct {
	// Combined, when set, is the collective just combined, before any of Sends is sent (the
	// fault-injection hooks of the actors act on it).
	Combined *ReducerCombined
	// Sends are the messages to send, in order.
	Sends []Send
	// Logs are records to log.
	Logs []Log
	// Stopped is set once the job told the reducer to stop: the runtime stops it.
	Stopped bool
}

// ReducerCombined names a collective a reducer combined.
type ReducerCombined struct {
	Iteration int64
	Init      bool
}

// NewReducer returns the reducer of an assignment, on the node at address self (its children
// on other nodes get results first: see Step), with the deliberate bugs planted (0 but in
// the simulator's bite test). It refuses a malformed assignment: children and their shard
// ranges must match and cover [Lo, Hi) contiguously.
func NewReducer(a *messages.ReducerAssignment, self string, planted bugs.Set) (*Reducer, error) {
	r := &Reducer{a: a, self: self, planted: planted}
	if len(a.ChildRanges) != 2*len(a.Children) || len(a.Children) == 0 {
		return r, fmt.Errorf("reducer [%d, %d): malformed assignment (%d children, %d range bounds)", a.Lo, a.Hi, len(a.Children), len(a.ChildRanges))
	}
	prev := a.Lo
	for i, c := range a.Children {
		lo, hi := a.ChildRanges[2*i], a.ChildRanges[2*i+1]
		if lo != prev || hi <= lo || hi > a.Hi {
			return r, fmt.Errorf("reducer [%d, %d): child %d covers [%d, %d), not contiguous", a.Lo, a.Hi, i, lo, hi)
		}
		prev = hi
		r.children = append(r.children, c)
		r.ranges = append(r.ranges, [2]int64{lo, hi})
	}
	if prev != a.Hi {
		return r, fmt.Errorf("reducer [%d, %d): children end at %d", a.Lo, a.Hi, prev)
	}
	r.g = NewGather(a.Epoch, r.ranges)
	r.g.planted = planted
	return r, nil
}

// Counters returns what the reducer sent and dropped so far (a copy).
func (r *Reducer) Counters() *messages.Counters { return proto.Clone(&r.c).(*messages.Counters) }

// Dropped returns how many stale and duplicate messages the reducer dropped so far, without
// the copy Counters makes.
func (r *Reducer) Dropped() (stale, duplicates int64) { return r.c.Stale, r.c.Duplicates }

// Ready returns what to do and clears it.
func (r *Reducer) Ready() ReducerReady {
	rd := r.ready
	r.ready = ReducerReady{}
	return rd
}

// Step feeds the reducer a message it received: a *messages.Partial from a child, a
// *messages.Reduced from its parent, or a *messages.StopJob. Messages of another job or
// epoch, duplicates and late copies are dropped and counted; a corrupted chunk or a
// collective that does not add up fails the job (a JobError to the coordinator). Any other
// event is an error.
func (r *Reducer) Step(ev any) error {
	switch m := ev.(type) {
	case *messages.Partial:
		r.partial(m)
	case *messages.Reduced:
		r.reduced(m)
	case *messages.StopJob:
		if m.JobId == r.a.JobId && !r.stopped {
			r.stopped = true
			r.ready.Sends = append(r.ready.Sends, Send{To: r.a.Coordinator, Msg: &messages.ReducerDone{JobId: r.a.JobId, Epoch: r.a.Epoch,
				Lo: r.a.Lo, Hi: r.a.Hi, Level: r.a.Level, Counters: r.Counters()}})
			r.ready.Stopped = true
		}
	default:
		return fmt.Errorf("jobctl: a reducer takes no %T", ev)
	}
	return nil
}

// partial takes a child's contribution.
func (r *Reducer) partial(m *messages.Partial) {
	if r.g == nil || r.failed || r.stopped {
		return
	}
	if m.JobId != r.a.JobId {
		r.c.Stale++
		r.log(slog.LevelWarn, "dropped a partial of another job", slog.String("job", m.JobId), slog.String("reducer job", r.a.JobId))
		return
	}
	st, err := r.g.Offer(m)
	switch st {
	case OfferDuplicate:
		r.c.Duplicates++
		return
	case OfferStale:
		r.c.Stale++
		if err != nil {
			if errors.Is(err, chunked.ErrChecksum) {
				r.fail(err)
				return
			}
			r.log(slog.LevelWarn, "dropped a partial", slog.String("job", r.a.JobId), slog.Any("error", err))
		}
		return
	case OfferAccepted:
		return
	}
	head, data, err := r.g.Combine()
	if err != nil {
		r.fail(err)
		return
	}
	r.ready.Combined = &ReducerCombined{Iteration: head.Iteration, Init: head.Init}
	r.init = head.Init
	if r.a.Parent != nil {
		r.head = head
		for _, c := range chunked.Split(data, chunked.Floats) {
			r.send(r.a.Parent, &messages.Partial{JobId: r.a.JobId, Epoch: r.a.Epoch, Seq: head.Seq, Iteration: head.Iteration,
				Init: head.Init, Op: head.Op, Label: head.Label, Lo: r.a.Lo, Hi: r.a.Hi, Segments: head.Segments, Chunk: c})
		}
		return
	}
	if head.Init {
		r.c.InitReductions++
	} else {
		r.c.Reductions++
	}
	r.sendDown(head, data)
}

// reduced takes (a chunk of) a result from the parent and passes it down when complete.
func (r *Reducer) reduced(m *messages.Reduced) {
	if r.failed || r.stopped {
		return
	}
	if m.JobId != r.a.JobId || m.Epoch != r.a.Epoch || r.head == nil || m.Seq != r.head.Seq || m.Lo != r.a.Lo || m.Hi != r.a.Hi {
		r.c.Stale++
		return
	}
	full, err := r.down.Add(m.Chunk)
	switch {
	case errors.Is(err, chunked.ErrDuplicate):
		r.c.Duplicates++
		return
	case err != nil:
		r.fail(fmt.Errorf("result of collective %d: %w", m.Seq, err))
		return
	case !full:
		return
	}
	data := r.down.Data()
	r.down = chunked.Assembly[float64]{}
	head := r.head
	r.head = nil
	r.sendDown(head, data)
}

// sendDown sends a collective's result to the children: all of it, or for reduce-scatter each
// child's segments. Children on other nodes come first: a child on this node starts its next
// step as soon as it has its result, and its kernels would hold the processors that the
// messages to the others wait for.
func (r *Reducer) sendDown(head *messages.Partial, data []float64) {
	r.init = head.Init
	for _, remote := range []bool{true, false} {
		for i, child := range r.children {
			if (child.Address != r.self) == remote {
				if !r.sendChild(head, data, i, child) {
					return
				}
			}
		}
	}
}

// sendChild sends child i its part of a collective's result; false when the job failed.
func (r *Reducer) sendChild(head *messages.Partial, data []float64, i int, child *messages.Pid) bool {
	lo, hi := r.ranges[i][0], r.ranges[i][1]
	part := data
	if kernels.Op(head.Op) == kernels.OpReduceScatter && !r.planted.Has(bugs.WholeScatter) {
		var err error
		if part, err = segmentSlice(data, head.Segments, r.a.Lo, lo, hi); err != nil {
			r.fail(fmt.Errorf("collective %d (%s): %w", head.Seq, head.Label, err))
			return false
		}
	}
	for _, c := range chunked.Split(part, chunked.Floats) {
		r.send(child, &messages.Reduced{JobId: r.a.JobId, Epoch: r.a.Epoch, Seq: head.Seq, Lo: lo, Hi: hi, Chunk: c})
	}
	return true
}

// fail reports an error that breaks the job to the coordinator; the reducer takes nothing
// more.
func (r *Reducer) fail(err error) {
	r.failed = true
	r.log(slog.LevelError, "reducer failed", slog.String("job", r.a.JobId), slog.Any("error", err))
	r.ready.Sends = append(r.ready.Sends, Send{To: r.a.Coordinator, Msg: &messages.JobError{JobId: r.a.JobId, Kind: kindFailure,
		Message: fmt.Sprintf("reducer [%d, %d) on node %s: %v", r.a.Lo, r.a.Hi, r.self, err)}})
}

// send queues a message, counted among the reducer's messages and bytes.
func (r *Reducer) send(to *messages.Pid, msg proto.Message) {
	if to == nil {
		return
	}
	Count(&r.c, r.init, msg)
	r.ready.Sends = append(r.ready.Sends, Send{To: to, Msg: msg})
}

func (r *Reducer) log(level slog.Level, msg string, attrs ...slog.Attr) {
	r.ready.Logs = append(r.ready.Logs, Log{Level: level, Msg: msg, Attrs: attrs})
}
