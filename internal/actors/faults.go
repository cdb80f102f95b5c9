package actors

import (
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/checkpoint"
	"github.com/didnmf/didnmf/messages"
)

// Faults enter a node's job actors from outside their handlers, in two ways:
//
//   - message faults (DuplicatePartials, ReplayPartials, CorruptChunks) are a sender
//     middleware on the shard actors' props (see Node.shardProps), as NodeConfig.Partition's
//     middleware drops sends across a partition: a shard sends each partial once, and the
//     middleware copies, replays or corrupts it on its way out;
//   - actor faults (panics, delays) and checkpoint corruption are the node's hooks, which the
//     handlers call at named points: a shard's iteration boundary, a reducer's combined
//     collective, a new job's setup, a checkpoint file written. A node without Faults has
//     noHooks and no middleware.

// Faults injects faults into a node's job actors, for tests and chaos runs. One Faults may
// be shared by the nodes of a LocalCluster: its panics then fire once across them.
type Faults struct {
	// DuplicatePartials sends every partial twice.
	DuplicatePartials bool
	// ReplayPartials sends, with every partial, the previous collective's partial again.
	ReplayPartials bool
	// CorruptChunks flips a bit in the first value of every chunked partial's first chunk,
	// after its checksum was computed.
	CorruptChunks bool
	// PanicAtIteration, when > 0, makes shard 1 (or shard 0 of a one-shard job) panic in its
	// actor at the end of that iteration, as a bug in the actor code would.
	PanicAtIteration int64
	// Panics, when set, decides for each (shard, iteration boundary) whether the shard actor
	// panics there; each pair panics at most once per node (a replay after the recovery goes
	// through).
	Panics func(shard, iteration int64) bool
	// CorruptCheckpoints, when set, decides for each checkpoint file written on the node
	// (kind "own" or "buddy", shard, iteration) whether to flip a byte in it after it was
	// written, as a bad disk would.
	CorruptCheckpoints func(kind string, shard, iteration int64) bool
	// IterationDelay makes every shard on the node sleep this long at each iteration
	// boundary: a slow node, or a job slowed down so that faults can hit it mid-run.
	IterationDelay time.Duration
	// ReducerPanics, like Panics, for the reducer covering shards [lo, hi) when it completes
	// a collective of an iteration.
	ReducerPanics func(lo, iteration int64) bool
	// SetupDelay holds a new job's coordinator this long before it checks the job against
	// its data and accepts it: a node can then fail between a submission and its acceptance.
	SetupDelay time.Duration
	// DropAcceptances loses that many of the JobAccepted the node's coordinators send to
	// their clients, the first ones (an acceptance lost on a connection that broke).
	DropAcceptances int

	mu      sync.Mutex
	fired   map[[3]int64]bool
	dropped int
}

// hooks are the named points of a node's job actors where tests and chaos runs step in; the
// handlers call them unconditionally, and a node without Faults has noHooks. Every method
// may be called concurrently with every other (one Faults may serve several nodes).
type hooks interface {
	// shardBoundary is called by shard `shard` of `shards` when its machine reaches the end
	// of an iteration, before the shard checks its stop rule, checkpoints or reports it. It
	// runs inside the shard actor's Receive: a panic there is the actor's (its supervisor
	// restarts it), a sleep holds the shard.
	shardBoundary(shard, shards, iteration int64)
	// reducerCombined is called by the reducer covering shards [lo, hi) when it has combined
	// its children's partials of a collective of an iteration (init: of the initialisation),
	// before it sends the sum on. It runs inside the reducer actor's Receive, as
	// shardBoundary does.
	reducerCombined(lo, hi, iteration int64, init bool)
	// setupBegins is called before the coordinator of a new job (not a taken-over one) sets
	// it up. It runs outside every mailbox and may block: the job is accepted after it.
	setupBegins(job string)
	// coordinatorSends is called by a coordinator for every message its control sends, inside
	// its Receive; the message is lost when it returns true.
	coordinatorSends(msg any) bool
	// checkpointWritten is called when a checkpoint file of shard `shard` at an iteration
	// was written at path (kind Own or Buddy; see Node.keepCheckpoint). It runs on the
	// writer's goroutine, outside every mailbox, concurrently with the node's other writes.
	checkpointWritten(kind checkpoint.Kind, shard int, iteration int64, path string)
}

// noHooks are the hooks of a node without faults: they do nothing.
type noHooks struct{}

func (noHooks) shardBoundary(shard, shards, iteration int64)                                    {}
func (noHooks) reducerCombined(lo, hi, iteration int64, init bool)                              {}
func (noHooks) setupBegins(job string)                                                          {}
func (noHooks) coordinatorSends(msg any) bool                                                   { return false }
func (noHooks) checkpointWritten(kind checkpoint.Kind, shard int, iteration int64, path string) {}

// hooks returns the hooks that inject f's actor and checkpoint faults: noHooks when f is nil.
func (f *Faults) hooks() hooks {
	if f == nil {
		return noHooks{}
	}
	return f
}

// shardBoundary panics when PanicAtIteration or Panics say so, then sleeps IterationDelay.
func (f *Faults) shardBoundary(shard, shards, iteration int64) {
	if f.PanicAtIteration == iteration && shard == min(1, shards-1) || f.fire(0, shard, iteration, f.Panics) {
		panic(fmt.Sprintf("injected fault: shard %d panics at iteration %d", shard, iteration))
	}
	if f.IterationDelay > 0 {
		time.Sleep(f.IterationDelay)
	}
}

// reducerCombined panics when ReducerPanics says so (never in the initialisation).
func (f *Faults) reducerCombined(lo, hi, iteration int64, init bool) {
	if !init && f.fire(1, lo, iteration, f.ReducerPanics) {
		panic(fmt.Sprintf("injected fault: reducer [%d, %d) panics at iteration %d", lo, hi, iteration))
	}
}

// setupBegins sleeps SetupDelay.
func (f *Faults) setupBegins(string) { time.Sleep(f.SetupDelay) }

// coordinatorSends loses the first DropAcceptances acceptances.
func (f *Faults) coordinatorSends(msg any) bool {
	if _, ok := msg.(*messages.JobAccepted); !ok || f.DropAcceptances == 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropped++
	return f.dropped <= f.DropAcceptances
}

// checkpointWritten flips a byte in the middle of the file when CorruptCheckpoints says so.
func (f *Faults) checkpointWritten(kind checkpoint.Kind, shard int, iteration int64, path string) {
	if f.CorruptCheckpoints == nil || !f.CorruptCheckpoints(string(kind), int64(shard), iteration) {
		return
	}
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return
	}
	data[len(data)/2] ^= 0x40
	_ = os.WriteFile(path, data, 0o600)
}

// fire tells whether an injected panic at (kind, a, b) is due: once per Faults.
func (f *Faults) fire(kind, a, b int64, due func(a, b int64) bool) bool {
	if f == nil || due == nil || !due(a, b) {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := [3]int64{kind, a, b}
	if f.fired[key] {
		return false
	}
	if f.fired == nil {
		f.fired = map[[3]int64]bool{}
	}
	f.fired[key] = true
	return true
}

// partialMiddleware returns the sender middleware that applies f's message faults to the
// partials of one shard actor, or nil when f has none (the shard's props then have no
// middleware of faults). Each call makes a middleware with its own memory of the partials
// to replay: one for each shard actor's props. The middleware runs on the sending actor's
// goroutine, one send at a time, as the actor's own code does; other messages pass through.
//
// For each partial it sends, in order: the partial (its first chunk corrupted under
// CorruptChunks), the partial again under DuplicatePartials and, after the last chunk of a
// collective under ReplayPartials, copies of the previous collective's chunks of the same
// epoch — the order in which the shard once sent them itself.
func (f *Faults) partialMiddleware() actor.SenderMiddleware {
	if f == nil || !f.DuplicatePartials && !f.ReplayPartials && !f.CorruptChunks {
		return nil
	}
	var prev, cur []*messages.Partial // copies of the previous and the current collective's chunks
	return func(next actor.SenderFunc) actor.SenderFunc {
		return func(ctx actor.SenderContext, target *actor.PID, env *actor.MessageEnvelope) {
			p, ok := env.Message.(*messages.Partial)
			if !ok {
				next(ctx, target, env)
				return
			}
			if c := p.Chunk; f.CorruptChunks && c.GetCount() > 1 && c.GetSeq() == 0 && len(c.GetValues()) > 0 {
				// A copy: the data belongs to the shard's machine.
				p = proto.Clone(p).(*messages.Partial)
				p.Chunk.Values[0] = math.Float64frombits(math.Float64bits(p.Chunk.Values[0]) ^ 1)
				env = &actor.MessageEnvelope{Header: env.Header, Message: p, Sender: env.Sender}
			}
			next(ctx, target, env)
			if f.DuplicatePartials {
				next(ctx, target, env)
			}
			if !f.ReplayPartials {
				return
			}
			// A recovery (a new epoch) starts the shard over, without a previous collective.
			prev, cur = ofRun(prev, p), ofRun(cur, p)
			// The data of a partial belongs to the machine until its next step: keep copies.
			cur = append(cur, proto.Clone(p).(*messages.Partial))
			if c := p.Chunk; c != nil && c.Seq < c.Count-1 {
				return // more chunks of this collective follow
			}
			for _, q := range prev {
				next(ctx, target, &actor.MessageEnvelope{Header: env.Header, Message: q, Sender: env.Sender})
			}
			prev, cur = cur, nil
		}
	}
}

// ofRun returns ps, copies of partials, if they are of p's job and epoch, else nil.
func ofRun(ps []*messages.Partial, p *messages.Partial) []*messages.Partial {
	if len(ps) > 0 && (ps[0].JobId != p.JobId || ps[0].Epoch != p.Epoch) {
		return nil
	}
	return ps
}
