// Package slots bounds what parties can hold at once before they are authenticated: a number
// of slots in all, and fewer for any one key (a remote address, say).
//
// A full Limiter does not refuse a newcomer: it evicts (closes) the oldest holder of the key
// that holds the most slots, or, when the newcomer's own key holds its share, that key's
// oldest. Refusing would let a party that holds every slot keep everyone else out, and a key
// is a weak identity: every local user owns all of 127.0.0.0/8, so one of them can spread a
// flood over as many loopback addresses as it takes to fill the whole limit. Evicting the
// largest key's oldest means a flood only ever pushes out its own connections (or those of
// the busiest address) while a party with few slots, a peer or a client connecting once, keeps
// its slot for as long as its handshake takes.
package slots

import (
	"net"
	"sync"
	"sync/atomic"
)

// Limiter hands out slots. Its methods may be called from any goroutine.
type Limiter struct {
	max, perKey int

	mu    sync.Mutex
	total int
	seq   uint64             // slots ever taken: the age of a slot
	byKey map[string][]*Slot // each key's slots, oldest first

	evicted atomic.Int64
}

// Slot is one slot taken, until it is released or evicted.
type Slot struct {
	l     *Limiter
	key   string
	seq   uint64
	close func()
	held  bool // under l.mu
}

// New returns a Limiter of total slots, at most perKey of them for one key (both at least 1).
func New(total, perKey int) *Limiter {
	return &Limiter{max: max(total, 1), perKey: max(perKey, 1), byKey: map[string][]*Slot{}}
}

// Take takes a slot for key, whose holder close closes. When key already holds perKey slots,
// its oldest is evicted first; when all max slots are taken, the oldest slot of the key
// holding the most is. An evicted slot is given back at once and its close called (once,
// outside the Limiter's lock, before Take returns); its holder's Release is then a no-op.
// close may be nil.
func (l *Limiter) Take(key string, close func()) *Slot {
	l.mu.Lock()
	var victim *Slot
	switch {
	case len(l.byKey[key]) >= l.perKey:
		victim = l.evictLocked(key)
	case l.total >= l.max:
		victim = l.evictLocked(l.largestLocked())
	}
	l.seq++
	s := &Slot{l: l, key: key, seq: l.seq, close: close, held: true}
	l.byKey[key] = append(l.byKey[key], s)
	l.total++
	l.mu.Unlock()
	if victim != nil {
		l.evicted.Add(1)
		if victim.close != nil {
			victim.close()
		}
	}
	return s
}

// largestLocked returns the key holding the most slots (of two holding as many, the one whose
// oldest slot is older).
func (l *Limiter) largestLocked() string {
	var best string
	var bestN int
	var bestSeq uint64
	for k, held := range l.byKey {
		if n := len(held); n > bestN || n == bestN && held[0].seq < bestSeq {
			best, bestN, bestSeq = k, n, held[0].seq
		}
	}
	return best
}

// evictLocked gives back the oldest slot of key and returns it.
func (l *Limiter) evictLocked(key string) *Slot {
	held := l.byKey[key]
	if len(held) == 0 {
		return nil
	}
	s := held[0]
	l.removeLocked(s)
	return s
}

// removeLocked gives back a held slot.
func (l *Limiter) removeLocked(s *Slot) {
	s.held = false
	held := l.byKey[s.key]
	for i, h := range held {
		if h == s {
			held = append(held[:i], held[i+1:]...)
			break
		}
	}
	if len(held) == 0 {
		delete(l.byKey, s.key)
	} else {
		l.byKey[s.key] = held
	}
	l.total--
}

// Release gives the slot back and tells whether it still held it: false when it was given
// back already (released, or evicted). It does not call the slot's close.
func (s *Slot) Release() bool {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	if !s.held {
		return false
	}
	s.l.removeLocked(s)
	return true
}

// InUse returns the number of slots taken.
func (l *Limiter) InUse() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// Evicted returns the number of slots evicted to make room for others.
func (l *Limiter) Evicted() int64 { return l.evicted.Load() }

// RemoteIP is the key of a connection: the address part of its remote address, so that the
// connections of one host share their slots whatever their ports.
func RemoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return c.RemoteAddr().String()
}
