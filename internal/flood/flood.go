// Package flood holds idle TCP connections to a port from several local addresses, as any
// local user can (every one owns 127.0.0.0/8): the attack that tests of the ports' limits
// run against a node. A connection the node closes is opened again after a pause, so the
// flood keeps pressing for as long as it runs. It is for tests, on loopback only.
package flood

import (
	"net"
	"sync"
	"time"
)

// Flood is a set of held connections. Its methods may be called from any goroutine.
type Flood struct {
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	mu     sync.Mutex
	opened int // connections made at least once
}

// Hold starts per connections to addr from each IP of ips, each read until the node closes
// it and then made again after redial, until Stop.
func Hold(addr string, ips []string, per int, redial time.Duration) *Flood {
	f := &Flood{stop: make(chan struct{})}
	for _, ip := range ips {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
		for range per {
			f.wg.Add(1)
			go f.hold(d, addr, redial)
		}
	}
	return f
}

// hold keeps one connection to addr.
func (f *Flood) hold(d *net.Dialer, addr string, redial time.Duration) {
	defer f.wg.Done()
	first := true
	for {
		if c, err := d.Dial("tcp", addr); err == nil {
			if first {
				f.mu.Lock()
				f.opened++
				f.mu.Unlock()
				first = false
			}
			done := make(chan struct{})
			go func() {
				select {
				case <-f.stop:
				case <-done:
				}
				c.Close()
			}()
			_, _ = c.Read(make([]byte, 1)) // until the node (or Stop) closes it
			close(done)
		}
		select {
		case <-f.stop:
			return
		case <-time.After(redial):
		}
	}
}

// Opened returns how many of the flood's connections have been made at least once.
func (f *Flood) Opened() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opened
}

// WaitOpen waits until n connections have been made at least once, or until within has
// passed; it tells whether they were.
func (f *Flood) WaitOpen(n int, within time.Duration) bool {
	for deadline := time.Now().Add(within); f.Opened() < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// Stop closes every connection and waits until the flood has ended. It may be called more
// than once.
func (f *Flood) Stop() {
	f.once.Do(func() { close(f.stop) })
	f.wg.Wait()
}
