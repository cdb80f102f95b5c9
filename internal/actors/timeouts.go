package actors

import "time"

// Timeouts are the waits of a node's actors and of a client: one struct, given to a node in
// NodeConfig.Timeouts and to a client in NewClient. A zero field takes its value from
// DefaultTimeouts, so a caller sets only what it changes. DefaultLAN and Loopback are presets
// to start from, as memberlist's DefaultLANConfig and DefaultLocalConfig are.
type Timeouts struct {
	// Ping is how long the coordinator (and a client) waits for a node's host to answer a
	// ping before it calls the node unreachable: at placement and at recovery.
	Ping time.Duration
	// Quorum is how long a job that lost the majority of its nodes waits for them to come
	// back before it fails.
	Quorum time.Duration
	// LeaseRenew is how often a client renews the lease on its running jobs; a coordinator
	// cancels a job whose lease (NodeConfig.Lease) runs out.
	LeaseRenew time.Duration
	// CheckpointFetch is how long a shard waits for a node to send it a checkpoint copy
	// before it asks the next node that has one.
	CheckpointFetch time.Duration
	// Stall rolls a job back to its last checkpoint when nothing of it progressed for that
	// long, or for jobctl.StallFactor times its slowest iteration if that is longer (before
	// an epoch's first iteration, while shards may be initialising, StallFactor times Stall):
	// a message lost without a node dying (a connection that broke) would stall it for good.
	Stall time.Duration
	// Orphan is how long a node keeps the actors of a job whose coordinator's node left,
	// waiting for another coordinator to take the job over (its assignments), before it stops
	// them and forgets the job. Longer than Quorum: a takeover may wait that long for a
	// majority.
	Orphan time.Duration
	// StreamIdle is how long a shard waits for the next chunk of the block its client streams
	// (ingest "stream"): a shard that receives none for that long (the client announced the
	// data and sends nothing, or stopped sending) fails its job, everywhere, freeing the
	// slots and memory the job holds. The client sends a block's chunks back to back, a few
	// in flight, so a healthy stream is never idle for long.
	StreamIdle time.Duration
	// DataRetry is how long a node sends to a peer through the remote after its data plane
	// link to it failed (or could not be made) before it tries again.
	DataRetry time.Duration
	// DataAckEvery is how long the receiving end of a data plane link waits before it
	// acknowledges the frames it read; DataAckTimeout how long the oldest frame a link keeps
	// may wait for its acknowledgement before the link goes down (its frames then go through
	// the remote).
	DataAckEvery, DataAckTimeout time.Duration
}

// DefaultLAN are the waits for a cluster of machines on one LAN: a ping answered in well
// under a second even on a loaded machine, a minute for a partition to heal, a lease renewed
// five times per DefaultLease, a checkpoint copy of a few hundred megabytes sent at LAN
// speed. They are DefaultTimeouts, so those of every node and client that sets none (`node
// serve`, the demo, factorize --cluster).
func DefaultLAN() Timeouts {
	return Timeouts{Ping: 3 * time.Second, Quorum: 60 * time.Second, LeaseRenew: 2 * time.Second, CheckpointFetch: 5 * time.Second,
		Stall: 2 * time.Minute, Orphan: 3 * time.Minute, StreamIdle: time.Minute,
		DataRetry: 5 * time.Second, DataAckEvery: 20 * time.Millisecond, DataAckTimeout: 5 * time.Second}
}

// DefaultTimeouts are the waits a zero field of Timeouts takes: DefaultLAN.
func DefaultTimeouts() Timeouts { return DefaultLAN() }

// Loopback are the waits for a cluster whose nodes all run on one machine (a demo, tests):
// DefaultLAN's, but a job that lost its majority fails after 30 s rather than a minute.
// On one machine no network partition heals: the nodes a job lost were killed or stopped,
// and a node that the gossip wrongly declared dead (a loaded machine) is back within a few
// seconds. The other waits stay as long as on a LAN, because on one machine they are set by
// its load, not by the network: all nodes share its cores, and on a busy one a ping or a
// checkpoint copy can take as long as across a LAN. (Do not shorten Ping for a test cluster: a
// loaded node would look unreachable and lose its shards.)
func Loopback() Timeouts {
	t := DefaultLAN()
	t.Quorum = 30 * time.Second
	return t
}

// orDefault returns t with its zero fields set from DefaultTimeouts.
func (t Timeouts) orDefault() Timeouts {
	d := DefaultTimeouts()
	for _, f := range []struct{ v, def *time.Duration }{
		{&t.Ping, &d.Ping}, {&t.Quorum, &d.Quorum}, {&t.LeaseRenew, &d.LeaseRenew}, {&t.CheckpointFetch, &d.CheckpointFetch},
		{&t.Stall, &d.Stall}, {&t.Orphan, &d.Orphan}, {&t.StreamIdle, &d.StreamIdle}, {&t.DataRetry, &d.DataRetry},
		{&t.DataAckEvery, &d.DataAckEvery}, {&t.DataAckTimeout, &d.DataAckTimeout},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return t
}
