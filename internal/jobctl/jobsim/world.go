package jobsim

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/messages"
)

// epoch0 is the simulated clock's origin.
var epoch0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// event is something that happens at a simulated time: a message arriving, a timer, a fault.
type event struct {
	at  time.Duration
	seq uint64 // ties broken by scheduling order: the run is a function of the seed
	do  func()
}

type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int)   { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)     { *q = append(*q, x.(*event)) }
func (q *queue) Pop() (x any)   { old := *q; x = old[len(old)-1]; *q = old[:len(old)-1]; return }
func (q queue) peek() *event    { return q[0] }
func (w *World) now() time.Time { return epoch0.Add(w.clock) }

// World is one simulated cluster running one job: nodes, a network, a clock and a seeded
// source of faults. Everything runs in the goroutine that calls Run.
type World struct {
	opt   Options
	rng   *rand.Rand
	clock time.Duration
	seq   uint64
	q     queue

	nodes  map[string]*node
	order  []string // node addresses in the order they were made
	group  map[string]int
	client *client
	data   *Problem
	// views are what each node's gossip believes: views[a][b] is set while a sees b alive.
	views map[string]map[string]bool
	// lists is, for each node, what it lists (the nodes it sees alive and itself, by name),
	// kept with views by see; started is each node's start time (its place in order, from 1).
	lists   map[string]map[string]cluster.Member
	started map[string]int64
	// adm is each node's admission of members (cluster.Admission): a node lists another only
	// once it admits the other's claim.
	adm map[string]*cluster.Admission
	// links is when the last message sent on each (from, to) link arrives.
	links map[[2]string]time.Duration

	// deposits are the factors each shard handed over when it finished, by shard: the
	// latest epoch's count.
	deposits map[int64]deposit
	// written are the checkpoints some node wrote (own or buddy copies), and committed the
	// iterations whose commit was checked against them.
	written   map[ckptKey]bool
	committed map[int64]bool
	// held are the nodes that kept a copy of each checkpoint, and sentTo the buddies each
	// was sent to.
	held   map[ckptKey]map[string]bool
	sentTo map[ckptKey][]string
	// coords are the coordinators made, in order, live or not.
	coords []*coordinator
	// sentAnswer is the first answer (JobResult or JobError) sent to the client, which may
	// have died.
	sentAnswer any
	// epochOwners is the coordinator that sent the first message of each epoch.
	epochOwners map[uint64]*coordinator
	// supersededCommits are the commits sent by a coordinator that was not the acting one.
	supersededCommits map[*messages.CheckpointCommitted]bool
	stats             Stats
	trace             []string
	violations        []string
	coordinators      int
	// unreplicated is set when the coordinator died before its standby had the job's state;
	// answerLost when the node keeping the job's lost answer died.
	unreplicated, answerLost bool
}

// deposit is what a shard that finished hands its client: its replica of B and its C.
type deposit struct {
	epoch uint64
	iter  int64 // the iteration the shard ended at
	b, c  []float64
}

// after schedules do at d from now.
func (w *World) after(d time.Duration, do func()) {
	w.seq++
	heap.Push(&w.q, &event{at: w.clock + d, seq: w.seq, do: do})
}

// logf records a line of the schedule's trace (printed when it breaks an invariant).
func (w *World) logf(format string, args ...any) {
	if w.opt.Trace {
		w.trace = append(w.trace, fmt.Sprintf("%9.3fs ", w.clock.Seconds())+fmt.Sprintf(format, args...))
	}
}

// reachable tells whether a message from one address can reach another now: both alive and
// on the same side of any partition. The client reaches every node and is reached by all.
func (w *World) reachable(from, to string) bool {
	if from == clientAddr || to == clientAddr {
		n := w.nodes[from]
		if to != clientAddr {
			n = w.nodes[to]
		}
		return n == nil || n.alive
	}
	a, b := w.nodes[from], w.nodes[to]
	return a != nil && b != nil && a.alive && b.alive && w.group[from] == w.group[to]
}

// arrives tells whether a message sent from one address reaches another now: the receiver
// is alive and on the sender's side of any partition. The sender may have died since it
// sent: a process killed with -9 leaves what it wrote to its sockets to the kernel, which
// still sends it.
func (w *World) arrives(from, to string) bool {
	if to == clientAddr {
		return true
	}
	b := w.nodes[to]
	return b != nil && b.alive && (from == clientAddr || w.group[from] == w.group[to])
}

// latency is one message's delay: a base latency with jitter; slower from and to slow nodes.
func (w *World) latency(from, to string) time.Duration {
	d := w.opt.Latency + time.Duration(w.rng.Int64N(int64(w.opt.Latency)+1))
	if n := w.nodes[from]; n != nil && n.slow {
		d *= 5
	}
	if n := w.nodes[to]; n != nil && n.slow {
		d *= 5
	}
	return d
}

// send carries msg from an address to a PID over the simulated network, with the schedule's
// message faults: lost, duplicated or delayed (which reorders messages of different links). A message between two nodes
// that cannot reach each other when it arrives is lost. Between live nodes the real transport
// (gRPC over TCP) loses a message only when a connection breaks; random loss stands for that
// and for a peer's guard dropping it.
func (w *World) send(from string, to *messages.Pid, msg any) {
	if to == nil {
		return
	}
	w.stats.Messages++
	switch m := msg.(type) {
	case *messages.CheckpointCommitted:
		w.checkCommit(m)
	case *messages.JobResult, *messages.JobError:
		if to.Address == clientAddr && w.sentAnswer == nil {
			w.sentAnswer = m
		}
	}
	f := w.opt.Faults
	if from != to.Address && f.Drop > 0 && w.rng.Float64() < f.Drop {
		w.stats.Dropped++
		w.logf("drop %T %s -> %s", msg, from, to.Id)
		return
	}
	copies := 1
	if from != to.Address && f.Duplicate > 0 && w.rng.Float64() < f.Duplicate {
		copies = 2
		w.stats.Duplicated++
	}
	for range copies {
		d := w.latency(from, to.Address)
		if f.Delay > 0 && w.rng.Float64() < f.Delay {
			d += time.Duration(w.rng.Int64N(int64(50 * time.Millisecond)))
			w.stats.Delayed++
		}
		if f.Stall > 0 && w.rng.Float64() < f.Stall {
			d += time.Duration(w.rng.Int64N(int64(3 * w.opt.DetectDelay)))
			w.stats.Delayed++
		}
		if from == to.Address {
			d = time.Microsecond // within a node: in order, at once
		}
		// One connection per pair of nodes keeps their messages in order (as gRPC's stream
		// does); messages of different pairs overtake each other.
		link := [2]string{from, to.Address}
		d = max(d, w.links[link]-w.clock)
		w.links[link] = w.clock + d
		w.after(d, func() {
			if !w.arrives(from, to.Address) {
				w.stats.Lost++
				return
			}
			w.deliver(from, to, msg)
		})
	}
}

// checkCommit checks a coordinator's commit of a checkpoint when it first sends it: every
// shard must have written its checkpoint at that iteration (a rollback to it must find one),
// and a shard that sent it to a buddy must have heard that a buddy keeps it (a rollback after
// the shard's node died must find a copy).
func (w *World) checkCommit(c *messages.CheckpointCommitted) {
	if w.committed[c.Iteration] {
		return
	}
	w.committed[c.Iteration] = true
	for s := range c.Shards {
		key := ckptKey{c.JobId, s, c.Iteration}
		if !w.written[key] {
			w.violation("checkpoint %d committed, but shard %d never wrote it", c.Iteration, s)
		}
		if sent := w.sentTo[key]; len(sent) > 0 && !slices.ContainsFunc(sent, func(b string) bool { return w.held[key][b] }) {
			w.violation("checkpoint %d committed before any buddy of shard %d (%v) kept a copy", c.Iteration, s, sent)
		}
	}
}

// deliver hands msg, from the node at address from, to the actor at pid, if it exists.
func (w *World) deliver(from string, to *messages.Pid, msg any) {
	if to.Address == clientAddr {
		if _, ok := msg.(*messages.JobError); ok && w.client.answers == 0 {
			w.client.errFrom = from
		}
		w.client.receive(msg)
		return
	}
	n := w.nodes[to.Address]
	if n == nil || !n.alive {
		return
	}
	n.receive(to.Id, msg)
}

// liveWorkers are the nodes the node at addr believes alive (its gossip's view, itself
// included), in the order they were made.
func (w *World) liveWorkers(addr string) []string {
	var out []string
	for _, a := range w.order {
		if a == addr || w.views[addr][a] {
			out = append(out, a)
		}
	}
	return out
}

// claim is what the node at addr claims in its gossip: its name (its address, in the
// simulation), gossip and actor addresses, and start time.
func (w *World) claim(addr string) cluster.Member {
	return cluster.Member{Name: addr, Gossip: "gossip-" + addr,
		Meta: cluster.Meta{Role: cluster.RoleMember, Actor: addr, Capacity: 1, Started: w.started[addr]}}
}

// listed is what the node at a lists: the nodes it sees alive and itself, by name. The map
// is the world's: the caller must not change it.
func (w *World) listed(a string) map[string]cluster.Member {
	l := w.lists[a]
	if l == nil {
		l = map[string]cluster.Member{a: w.claim(a)}
		for b, up := range w.views[a] {
			if up {
				l[b] = w.claim(b)
			}
		}
		w.lists[a] = l
	}
	return l
}

// see records whether the node at a sees b alive, in its view and its list.
func (w *World) see(a, b string, up bool) {
	w.views[a][b] = up
	if l := w.lists[a]; l != nil {
		if up {
			l[b] = w.claim(b)
		} else {
			delete(l, b)
		}
	}
}

// admit runs the node at a's admission on a claim met in its gossip, as the membership does:
// a claim queued for its proof is proven at once (the node at the claimed actor address
// presents a certificate for its own name: the proof holds if that is the claimed name and
// the node is reachable), then decided again. It returns "" when a lists the claimant.
func (w *World) admit(a string, m cluster.Member) string {
	adm := w.adm[a]
	cause := adm.Decide(m, w.listed(a), w.claim(a), w.now())
	if cause != cluster.ProofPending {
		return cause
	}
	for {
		p, ok := adm.Next()
		if !ok {
			break
		}
		c := cluster.ClaimOf(p)
		if owner := w.nodes[p.Meta.Actor]; owner != nil && owner.addr == p.Name && w.reachable(a, owner.addr) {
			adm.Proven(c, w.now())
			adm.Finish(c)
		} else {
			adm.Failed(c, w.now())
		}
	}
	return adm.Decide(m, w.listed(a), w.claim(a), w.now())
}

// forge has a forged member claim to be one, to every live node: at an actor address no
// certificate of its name proves or, for a duplicate, at a live node's actor address (the
// coordinator's if there is one). No node may list it.
func (w *World) forge(name string, duplicate bool) {
	actor := "nowhere-" + name
	if duplicate {
		for _, a := range w.order {
			if n := w.nodes[a]; n.alive && (len(n.coords) > 0 || actor == "nowhere-"+name) {
				actor = a
			}
		}
	}
	m := cluster.Member{Name: name, Gossip: "gossip-" + name, Meta: cluster.Meta{Role: cluster.RoleMember, Actor: actor, Capacity: 1, Started: 1}}
	w.logf("%s claims to be a member at %s", name, actor)
	for _, a := range w.order {
		if !w.nodes[a].alive {
			continue
		}
		if cause := w.admit(a, m); cause == "" {
			w.violation("%s lists the forged member %s (actor address %s)", a, name, actor)
			return
		}
		w.stats.Refused++
	}
}

// sortedKeys returns a map's keys in order (map order is random; the run must not be).
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
