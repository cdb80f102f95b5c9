package actors

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// streamSlots bounds the streamed blocks each owner's shards receive at once on a node
// (NodeConfig.OwnerMaxStreams): a shard past its owner's bound waits, in order of arrival,
// for one of the owner's streams to end before it asks its client for its block. The shards
// use it from their own mailboxes.
type streamSlots struct {
	mu      sync.Mutex
	holders map[string]string         // shard actor id -> owner, for the streams under way
	active  map[string]int            // owner -> streams under way
	waiting map[string][]streamWaiter // owner -> shards waiting, first come first
}

// streamWaiter is a shard waiting for a stream slot, and how to tell it it has one.
type streamWaiter struct {
	id     string
	notify func()
}

// streamSlot tells a shard that waited for a stream slot that it holds one now.
type streamSlot struct{}

// acquire takes a slot for a shard's stream (id: the shard's actor id) of owner, bounded by
// limit (0: no bound), and tells whether it did; if not, the shard waits, and notify is
// called once a slot is its own. A shard that holds or awaits a slot already keeps its place.
func (s *streamSlots) acquire(owner, id string, limit int, notify func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holders == nil {
		s.holders, s.active, s.waiting = map[string]string{}, map[string]int{}, map[string][]streamWaiter{}
	}
	if _, held := s.holders[id]; held {
		return true
	}
	for _, w := range s.waiting[owner] {
		if w.id == id {
			return false
		}
	}
	if limit > 0 && s.active[owner] >= limit {
		s.waiting[owner] = append(s.waiting[owner], streamWaiter{id: id, notify: notify})
		return false
	}
	s.holders[id] = owner
	s.active[owner]++
	return true
}

// release ends a shard's stream, or its wait for one: a slot it held goes to the owner's
// first waiting shard, if any. A shard with neither is ignored.
func (s *streamSlots) release(owner, id string) {
	s.mu.Lock()
	var next func()
	if held, ok := s.holders[id]; ok {
		delete(s.holders, id)
		if q := s.waiting[held]; len(q) > 0 {
			w := q[0]
			s.waiting[held] = q[1:]
			if len(s.waiting[held]) == 0 {
				delete(s.waiting, held)
			}
			s.holders[w.id] = held // handed over: the count stays
			next = w.notify
		} else if s.active[held]--; s.active[held] <= 0 {
			delete(s.active, held)
		}
	} else {
		q := s.waiting[owner]
		for i, w := range q {
			if w.id == id {
				s.waiting[owner] = append(q[:i:i], q[i+1:]...)
				break
			}
		}
		if len(s.waiting[owner]) == 0 {
			delete(s.waiting, owner)
		}
	}
	s.mu.Unlock()
	if next != nil {
		next()
	}
}

// holds tells whether a shard holds a stream slot.
func (s *streamSlots) holds(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.holders[id]
	return ok
}

// streaming returns the streams of an owner under way and waiting.
func (s *streamSlots) streaming(owner string) (active, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active[owner], len(s.waiting[owner])
}

// notifier returns a function that sends a shard streamSlot.
func notifier(ctx actor.Context) func() {
	system, self := ctx.ActorSystem(), ctx.Self()
	return func() { system.Root.Send(self, &streamSlot{}) }
}
