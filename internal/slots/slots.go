// Package slots bounds what parties can hold at once: a number of slots in all, and fewer
// for any one key (a remote address, say), so that one party cannot take them all.
package slots

import (
	"net"
	"sync"
)

// Limiter hands out slots. Its methods may be called from any goroutine.
type Limiter struct {
	max, perKey int

	mu    sync.Mutex
	total int
	byKey map[string]int
}

// New returns a Limiter of max slots, at most perKey of them for one key.
func New(max, perKey int) *Limiter {
	return &Limiter{max: max, perKey: perKey, byKey: map[string]int{}}
}

// Take takes a slot for key and tells whether it could: not when all max are taken, or
// perKey for key.
func (l *Limiter) Take(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.total >= l.max || l.byKey[key] >= l.perKey {
		return false
	}
	l.total++
	l.byKey[key]++
	return true
}

// Give gives back a slot taken for key.
func (l *Limiter) Give(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byKey[key] == 0 {
		return // not taken: nothing to give back
	}
	l.total--
	if l.byKey[key]--; l.byKey[key] == 0 {
		delete(l.byKey, key)
	}
}

// InUse returns the number of slots taken.
func (l *Limiter) InUse() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// RemoteIP is the key of a connection: the address part of its remote address, so that the
// connections of one host share their slots whatever their ports.
func RemoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return c.RemoteAddr().String()
}
