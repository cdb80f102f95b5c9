package cluster

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Partition cuts the network between groups of nodes in one process: gossip between
// addresses of different groups is dropped, and the actor runtime asks Blocked before every
// send (see actors.NodeConfig.Partition). It is how the partition tests split a cluster and
// heal it without root privileges; every node of the test shares one Partition.
type Partition struct {
	mu   sync.RWMutex
	side map[string]int // address (ip:port) -> group, from 1
	// lossy are the addresses whose gossip packets (UDP) are all lost, while their streams
	// (TCP) still connect: a network that drops datagrams.
	lossy map[string]bool
}

// NewPartition returns a Partition that blocks nothing.
func NewPartition() *Partition { return &Partition{side: map[string]int{}} }

// Split puts each group of addresses (gossip and actor addresses of the same node belong
// together) on its own side: traffic between sides is dropped. Addresses in no group are
// not affected.
func (p *Partition) Split(groups ...[]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.side = map[string]int{}
	for i, g := range groups {
		for _, a := range g {
			p.side[a] = i + 1
		}
	}
}

// Heal lets all traffic through again (LosePackets included).
func (p *Partition) Heal() {
	p.Split()
	p.mu.Lock()
	p.lossy = nil
	p.mu.Unlock()
}

// LosePackets makes every gossip packet sent from one of addrs (gossip addresses) lost, as
// a network dropping datagrams would, while the streams they open still connect.
func (p *Partition) LosePackets(addrs ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lossy == nil {
		p.lossy = map[string]bool{}
	}
	for _, a := range addrs {
		p.lossy[a] = true
	}
}

// losesPackets tells whether the packets sent from addr are lost (see LosePackets).
func (p *Partition) losesPackets(addr string) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.lossy[addr]
}

// Blocked tells whether traffic from one address to another is dropped.
func (p *Partition) Blocked(from, to string) bool {
	if p == nil {
		return false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	a, b := p.side[from], p.side[to]
	return a != 0 && b != 0 && a != b
}

// errPartitioned is what a dial across a partition fails with.
var errPartitioned = errors.New("cluster: partitioned (test partition)")

// partitionedTransport drops the gossip a node sends across a Partition. Since every node of
// the partition filters what it sends, nothing crosses in either direction.
type partitionedTransport struct {
	memberlist.Transport
	self func() string
	p    *Partition
}

// WriteTo implements memberlist.Transport: a packet to the other side is lost.
func (t *partitionedTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if self := t.self(); t.p.Blocked(self, addr) || t.p.losesPackets(self) {
		return time.Now(), nil
	}
	return t.Transport.WriteTo(b, addr)
}

// DialTimeout implements memberlist.Transport: a connection to the other side fails.
func (t *partitionedTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if t.p.Blocked(t.self(), addr) {
		return nil, errPartitioned
	}
	return t.Transport.DialTimeout(addr, timeout)
}
