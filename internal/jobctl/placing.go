package jobctl

import (
	"slices"
	"sync"
	"time"

	"github.com/didnmf/didnmf/messages"
	"google.golang.org/protobuf/proto"
)

// PlacingTTL is how long Placing counts a job's planned shards on a node that has not yet
// said it runs them, when nothing Releases them: longer than a placement takes to arrive.
const PlacingTTL = 2 * time.Minute

// Placing is a coordinator node's book of the shards it has planned but that the nodes may
// not count yet. Jobs set up at once (a sweep starts several) ping the members before any of
// them has placed its shards, so every pong says the members are idle and the jobs double up
// on one member while another sits idle. Claim adds to each pong the shards (and reserved
// memory) this node planned there for other jobs that the pong does not list yet, plans the
// job on the result, and books the plan; Release lets a job's bookings go when its
// coordinator stops (an ended job's shards no longer load anyone). Its methods are safe for
// concurrent use: Claim is called from each job's setup, outside the actors' mailboxes. The
// zero value is empty and ready.
type Placing struct {
	mu      sync.Mutex
	planned []planned
	// released are the jobs Released, until PlacingTTL after: a job cancelled while its
	// setup ran is released before its setup Claims, and is then not booked.
	released map[string]time.Time
}

// maxPlanned bounds the bookings (a node's and a job's each): past it the oldest go first.
const maxPlanned = 4096

// planned is one job's shards and reserve planned on one node, until expires.
type planned struct {
	job, addr string
	shards    int64
	reserve   int64
	expires   time.Time
}

// Claim returns b's pongs with the shards and reserves this node planned for other jobs added
// (on a node whose pong does not list the job yet), and books where PlanPlacement puts b's
// job on them. self is this node's address: its pong lists every job it coordinates before
// their shards are there, so its bookings stay until Released or expired (and a shard of one
// counts twice there meanwhile). b's job then plans (Job.begin) on the pongs returned, to the same plan. Fixed
// placements, which do not read loads, are returned as they are and not booked.
func (pl *Placing) Claim(job, self string, b Begin, now time.Time) []*messages.Pong {
	if b.Fixed || len(b.Pongs) != len(b.Nodes) {
		return b.Pongs
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for id, until := range pl.released {
		if !now.Before(until) {
			delete(pl.released, id)
		}
	}
	// A booking the node's pong lists is counted by the pong; an old one is let go.
	pl.planned = slices.DeleteFunc(pl.planned, func(p planned) bool {
		if !now.Before(p.expires) || p.job == job {
			return true
		}
		i := slices.IndexFunc(b.Nodes, func(n Node) bool { return n.Addr == p.addr })
		return p.addr != self && i >= 0 && b.Pongs[i] != nil && slices.Contains(b.Pongs[i].JobIds, p.job)
	})
	pongs := make([]*messages.Pong, len(b.Pongs))
	for i, p := range b.Pongs {
		if p == nil {
			continue
		}
		q := proto.Clone(p).(*messages.Pong)
		for _, e := range pl.planned {
			if e.addr == b.Nodes[i].Addr {
				q.Shards += e.shards
				q.Reserved += e.reserve
			}
		}
		pongs[i] = q
	}
	plan, err := PlanPlacement(PlanInput{Job: job, Samples: b.Samples, Reserve: b.Reserve, Nodes: b.Nodes, Pongs: pongs})
	if _, gone := pl.released[job]; err != nil || gone {
		return pongs // the job fails in begin, with the same error, or has stopped
	}
	for _, s := range plan.Shards {
		i := slices.IndexFunc(pl.planned, func(p planned) bool { return p.job == job && p.addr == s.Node })
		if i < 0 {
			pl.planned = append(pl.planned, planned{job: job, addr: s.Node, expires: now.Add(PlacingTTL)})
			i = len(pl.planned) - 1
		}
		pl.planned[i].shards++
		pl.planned[i].reserve += s.Reserve
	}
	if n := len(pl.planned); n > maxPlanned {
		pl.planned = slices.Delete(pl.planned, 0, n-maxPlanned) // booked in order: the oldest first
	}
	return pongs
}

// Release lets the bookings of job go, and books none for it after: its coordinator stopped.
// now is when.
func (pl *Placing) Release(job string, now time.Time) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.planned = slices.DeleteFunc(pl.planned, func(p planned) bool { return p.job == job })
	if pl.released == nil {
		pl.released = map[string]time.Time{}
	}
	if len(pl.released) < maxPlanned {
		pl.released[job] = now.Add(PlacingTTL)
	}
}
