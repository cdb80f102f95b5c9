package cluster

import (
	"maps"
	"time"
)

// Claim is what a node claims about itself in its alive messages and what a proof covers
// (Config.Prove): its name, its gossip address, its actor address and its start time. A
// claim once proven stays proven for as long as the node is listed with it; any change of
// these four fields (a restart, a new address) is a new claim, proven anew.
type Claim struct {
	Name    string // the node's name
	Gossip  string // its gossip address, ip:port
	Actor   string // its actor address (Meta.Actor)
	Started int64  // its start time (Meta.Started)
}

// ClaimOf returns the claim of a member.
func ClaimOf(m Member) Claim {
	return Claim{Name: m.Name, Gossip: m.Gossip, Actor: m.Meta.Actor, Started: m.Meta.Started}
}

// Causes of refused claims, the keys of Membership.Refused.
const (
	// RefusedProof: a proof of the claim failed (counted once per proof).
	RefusedProof = "proof failed"
	// RefusedRecent: the claim failed a proof in the last failedFor and was not tried again.
	RefusedRecent = "failed recently"
	// RefusedQueueFull: the proof queue was full; the claim is tried again when it comes back.
	RefusedQueueFull = "proof queue full"
	// RefusedDuplicate: another listed member (or this node) already has the claimed actor
	// address.
	RefusedDuplicate = "duplicate actor address"
	// RefusedTableFull: the member table holds maxMembers members.
	RefusedTableFull = "member table full"
	// RefusedClient: the claim is not a member's (clients do not gossip with members).
	RefusedClient = "not a member"
	// RefusedMeta: the node's meta could not be read.
	RefusedMeta = "unreadable meta"
)

// ProofPending is Admission.Decide's refusal of a claim whose proof is queued or running; it
// is not counted (every member is refused so until it is proven).
const ProofPending = "proof pending"

// Bounds of the admission's state.
const (
	maxMembers = 1024             // members listed at most, this node included
	maxQueue   = 64               // claims waiting for a proof
	maxProven  = 2 * maxMembers   // proven claims remembered
	maxFailed  = 4096             // failed claims remembered
	failedFor  = 30 * time.Second // a failed claim is not tried again for this long
	maxLost    = 256              // members declared dead that a node tries to rejoin
	proofs     = 16               // proofs at once: claims of unreachable addresses drain 16 a second
	proofTime  = 2 * time.Second  // a proof's time limit: its TLS handshakes take milliseconds
	startWait  = 10 * time.Second // how long Start waits for the proofs of the members it met
	startPoll  = 20 * time.Millisecond
)

// Admission decides which nodes' alive messages a membership with Config.Prove accepts: the
// claims already proven; the others are queued for a proof (bounded, deduplicated), refused
// for a while if their proof failed, and refused outright when they name another member's
// actor address, are not a member's, or the table is full. It is deterministic: time is
// given, and the proofs are run by its user (Membership's proof goroutines, or the control
// plane's simulation, jobctl/jobsim), which takes them with Next and reports their outcome
// with Proven and Finish, or Failed. It is not safe for concurrent use.
type Admission struct {
	proven  map[Claim]time.Time
	failed  map[Claim]time.Time
	pending map[Claim]pendingClaim
	queue   []Claim
	seq     uint64
	refused map[string]int64
}

// pendingClaim is a claim queued for, or undergoing, its proof.
type pendingClaim struct {
	seq  uint64 // order of arrival, for Start's wait
	meta Meta   // the meta it came with, for Prove
}

// NewAdmission returns an Admission that has proven nothing.
func NewAdmission() *Admission {
	return &Admission{proven: map[Claim]time.Time{}, failed: map[Claim]time.Time{},
		pending: map[Claim]pendingClaim{}, refused: map[string]int64{}}
}

// Decide says whether an alive message from mem may be taken in, given the members listed
// (by name) and this node (local). It returns "" to admit it, else the cause of its refusal
// (a Refused* constant, counted); a claim it queues for a proof is refused with ProofPending.
func (a *Admission) Decide(mem Member, listed map[string]Member, local Member, now time.Time) string {
	if mem.Name == local.Name {
		return "" // this node, or a rival for its name: memberlist's conflict handling decides
	}
	c := ClaimOf(mem)
	cause := a.check(mem, c, listed, local, now)
	if cause != "" && cause != ProofPending {
		a.refused[cause]++
	}
	return cause
}

func (a *Admission) check(mem Member, c Claim, listed map[string]Member, local Member, now time.Time) string {
	if mem.Meta.Role != RoleMember {
		return RefusedClient
	}
	if c.Actor == local.Meta.Actor {
		return RefusedDuplicate
	}
	for name, other := range listed {
		if name != c.Name && other.Meta.Actor == c.Actor {
			return RefusedDuplicate
		}
	}
	if _, ok := listed[c.Name]; !ok && len(listed) >= maxMembers {
		return RefusedTableFull
	}
	if _, ok := a.proven[c]; ok {
		return ""
	}
	if at, ok := a.failed[c]; ok {
		if now.Sub(at) < failedFor {
			return RefusedRecent
		}
		delete(a.failed, c)
	}
	if _, ok := a.pending[c]; ok {
		return ProofPending
	}
	if len(a.queue) >= maxQueue {
		return RefusedQueueFull
	}
	a.seq++
	a.pending[c] = pendingClaim{seq: a.seq, meta: mem.Meta}
	a.queue = append(a.queue, c)
	return ProofPending
}

// Next takes the oldest queued claim for its proof, as the member it came as; false when
// none is queued. The claim stays pending until Proven and Finish, or Failed.
func (a *Admission) Next() (Member, bool) {
	if len(a.queue) == 0 {
		return Member{}, false
	}
	c := a.queue[0]
	a.queue[0] = Claim{}
	a.queue = a.queue[1:]
	if len(a.queue) == 0 {
		a.queue = nil
	}
	p := a.pending[c]
	return Member{Name: c.Name, Gossip: c.Gossip, Meta: p.meta}, true
}

// Proven records that c passed its proof: its alive messages are admitted from now on. It
// stays pending until Finish (the proof's user brings the node's state in meanwhile).
func (a *Admission) Proven(c Claim, now time.Time) {
	if len(a.proven) >= maxProven {
		evictOldest(a.proven)
	}
	a.proven[c] = now
}

// Finish ends the pending state of a proven claim.
func (a *Admission) Finish(c Claim) { delete(a.pending, c) }

// Failed records that c failed its proof: it is refused without a new proof for failedFor
// (30 s).
func (a *Admission) Failed(c Claim, now time.Time) {
	delete(a.pending, c)
	a.refused[RefusedProof]++
	if len(a.failed) >= maxFailed {
		for k, at := range a.failed {
			if now.Sub(at) >= failedFor {
				delete(a.failed, k)
			}
		}
		if len(a.failed) >= maxFailed {
			evictOldest(a.failed)
		}
	}
	a.failed[c] = now
}

// Forget drops a proven claim: the member left the table (it left, died or restarted), and
// if it comes back it is proven again.
func (a *Admission) Forget(c Claim) { delete(a.proven, c) }

// pendingUpTo tells whether a claim queued at or before seq is still pending.
func (a *Admission) pendingUpTo(seq uint64) bool {
	for _, p := range a.pending {
		if p.seq <= seq {
			return true
		}
	}
	return false
}

// Refused returns a copy of the refusal counts by cause.
func (a *Admission) Refused() map[string]int64 { return maps.Clone(a.refused) }

// evictOldest deletes the oldest entry of m.
func evictOldest(m map[Claim]time.Time) {
	var oldest Claim
	var at time.Time
	found := false
	for c, t := range m {
		if !found || t.Before(at) {
			oldest, at, found = c, t, true
		}
	}
	if found {
		delete(m, oldest)
	}
}
