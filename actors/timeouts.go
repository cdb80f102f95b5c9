package actors

import "time"

// Timeouts are the waits of a node's actors and of a client: one struct, given to a node in
// NodeConfig.Timeouts and to a client in NewClient. A zero field takes its value from
// DefaultTimeouts, so a caller sets only what it changes.
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
}

// DefaultTimeouts are the waits for a cluster on a LAN or on loopback: a ping answered in
// well under a second even on a loaded machine, a minute for a partition to heal, a lease
// renewed five times per DefaultLease.
func DefaultTimeouts() Timeouts {
	return Timeouts{Ping: 3 * time.Second, Quorum: 60 * time.Second, LeaseRenew: 2 * time.Second, CheckpointFetch: 5 * time.Second}
}

// orDefault returns t with its zero fields set from DefaultTimeouts.
func (t Timeouts) orDefault() Timeouts {
	d := DefaultTimeouts()
	if t.Ping <= 0 {
		t.Ping = d.Ping
	}
	if t.Quorum <= 0 {
		t.Quorum = d.Quorum
	}
	if t.LeaseRenew <= 0 {
		t.LeaseRenew = d.LeaseRenew
	}
	if t.CheckpointFetch <= 0 {
		t.CheckpointFetch = d.CheckpointFetch
	}
	return t
}
