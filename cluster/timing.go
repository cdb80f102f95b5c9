package cluster

import (
	"time"

	"github.com/hashicorp/memberlist"
)

// Timing is how the gossip detects failures and spreads news: the memberlist settings
// (see memberlist.Config) that Start sets, in one struct. A zero field takes its value from
// DefaultTiming, so a caller sets only what it changes.
type Timing struct {
	// ProbeInterval is how often a node probes one peer (round robin); ProbeTimeout how long
	// it waits for the direct ack before it asks IndirectChecks peers to probe indirectly.
	ProbeInterval  time.Duration
	ProbeTimeout   time.Duration
	IndirectChecks int
	// SuspicionMult scales the time a suspect has to refute before it is declared dead
	// (SuspicionMult x ProbeInterval x max(1, log10 n)); without confirmations the window
	// grows up to SuspicionMaxTimeoutMult times that.
	SuspicionMult           int
	SuspicionMaxTimeoutMult int
	// GossipInterval is how often a node gossips to GossipNodes random peers; each message
	// is retransmitted RetransmitMult x log(n+1) times.
	GossipInterval time.Duration
	GossipNodes    int
	RetransmitMult int
	// TCPTimeout bounds the TCP exchanges: joins, push/pull, the TCP fallback of a probe.
	TCPTimeout time.Duration
	// PushPullInterval is how often a node syncs its whole state with a random peer.
	PushPullInterval time.Duration
	// DeadNodeReclaimTime is how long after a node is declared dead another node may take
	// its name at a new address.
	DeadNodeReclaimTime time.Duration
}

// DefaultTiming is the gossip's timing, for a cluster on a LAN or on loopback, measured on
// loopback on a busy 2-core machine. The base is memberlist.DefaultLocalConfig (probe every
// 1 s, suspicion 3 probe intervals), which took about 5.5 s to declare a hard-killed peer
// dead. DefaultTiming probes twice as often and keeps the suspicion window long enough that
// only a node silent for about 2.5 s is declared dead:
//
//   - ProbeInterval 500 ms: each node probes one peer (round robin) per interval; a probe fails
//     if no direct, indirect or TCP-fallback ack arrives within the interval. Memberlist's
//     Lifeguard awareness stretches the interval up to 8x on a node that is itself slow.
//   - ProbeTimeout 250 ms: wait for the direct UDP ack before asking peers to probe indirectly.
//   - SuspicionMult 4: a suspect is declared dead after 4 x 500 ms x max(1, log10 n), so 2 s
//     for up to 10 nodes, once the expected 2 independent confirmations arrived (small
//     clusters expect none); the suspect refutes within that time if it is merely slow.
//   - SuspicionMaxTimeoutMult 4: without confirmations the window grows up to 8 s.
//   - IndirectChecks 2, RetransmitMult 3, gossip every 100 ms to 3 nodes: a little more
//     redundancy than the local preset (1 and 2), for lossy or busy hosts.
//   - TCPTimeout 2 s (preset 1 s): joins and push/pull on a busy machine.
//   - push/pull every 15 s, as the preset.
//   - DeadNodeReclaimTime 1 s: a restarted node may take over its dead name at a new address.
//
// Expected detection of a hard-killed peer on loopback: the next probe of it (within
// (n-1) x 500 ms from some survivor) + 500 ms + 2 s, about 3 s for 3 nodes. Do not shorten
// it for tests on a loaded machine: a node that is merely slow would be declared dead.
func DefaultTiming() Timing {
	return Timing{
		ProbeInterval:           500 * time.Millisecond,
		ProbeTimeout:            250 * time.Millisecond,
		IndirectChecks:          2,
		SuspicionMult:           4,
		SuspicionMaxTimeoutMult: 4,
		GossipInterval:          100 * time.Millisecond,
		GossipNodes:             3,
		RetransmitMult:          3,
		TCPTimeout:              2 * time.Second,
		PushPullInterval:        15 * time.Second,
		DeadNodeReclaimTime:     time.Second,
	}
}

// orDefault returns t with its zero (or negative) fields set from DefaultTiming.
func (t Timing) orDefault() Timing {
	d := DefaultTiming()
	t.ProbeInterval = positiveOr(t.ProbeInterval, d.ProbeInterval)
	t.ProbeTimeout = positiveOr(t.ProbeTimeout, d.ProbeTimeout)
	t.IndirectChecks = positiveOr(t.IndirectChecks, d.IndirectChecks)
	t.SuspicionMult = positiveOr(t.SuspicionMult, d.SuspicionMult)
	t.SuspicionMaxTimeoutMult = positiveOr(t.SuspicionMaxTimeoutMult, d.SuspicionMaxTimeoutMult)
	t.GossipInterval = positiveOr(t.GossipInterval, d.GossipInterval)
	t.GossipNodes = positiveOr(t.GossipNodes, d.GossipNodes)
	t.RetransmitMult = positiveOr(t.RetransmitMult, d.RetransmitMult)
	t.TCPTimeout = positiveOr(t.TCPTimeout, d.TCPTimeout)
	t.PushPullInterval = positiveOr(t.PushPullInterval, d.PushPullInterval)
	t.DeadNodeReclaimTime = positiveOr(t.DeadNodeReclaimTime, d.DeadNodeReclaimTime)
	return t
}

// positiveOr returns v, or def when v is not positive.
func positiveOr[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// apply sets t in mc.
func (t Timing) apply(mc *memberlist.Config) {
	mc.ProbeInterval = t.ProbeInterval
	mc.ProbeTimeout = t.ProbeTimeout
	mc.IndirectChecks = t.IndirectChecks
	mc.SuspicionMult = t.SuspicionMult
	mc.SuspicionMaxTimeoutMult = t.SuspicionMaxTimeoutMult
	mc.GossipInterval = t.GossipInterval
	mc.GossipNodes = t.GossipNodes
	mc.RetransmitMult = t.RetransmitMult
	mc.TCPTimeout = t.TCPTimeout
	mc.PushPullInterval = t.PushPullInterval
	mc.DeadNodeReclaimTime = t.DeadNodeReclaimTime
}

// reclaimWait is how long a node waits before it takes over the name of a member that died or
// left at another address: DeadNodeReclaimTime, plus a margin for the members that learned
// of the end after the seed did and for the last retransmissions of that news (3 rounds of
// 100 ms for up to 9 nodes).
func (t Timing) reclaimWait() time.Duration {
	return t.DeadNodeReclaimTime + 500*time.Millisecond
}
