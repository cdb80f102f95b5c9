package actors

import (
	"net"
	"strings"
	"time"

	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/messages"
)

// Observer hears of what a node does, for its metrics (see package internal/metrics), as
// it happens. Its methods are called from many goroutines at once (actors' mailboxes, the
// readers and writers of connections, checkpoint writers), on the paths they measure: they
// must be safe for concurrent use, return at once, never block and never call back into
// the node. A node without one (NodeConfig.Observer nil) pays a nil check where it would
// call it, and its connections are not wrapped.
type Observer interface {
	// IterationDone is called when shard 0 of a job, on this node, ends an iteration
	// (initialisation excluded), which took d of wall time since the shard's previous
	// iteration ended (or since it began iterating): once per iteration of every job,
	// across the cluster. Iterations redone after a recovery are called again.
	IterationDone(d time.Duration)
	// CollectiveDone is called when a shard on this node has the whole result of one of
	// its iterations' collectives (an allreduce, or a reduce-scatter), d after it sent its
	// part: the collective's latency as the shard sees it.
	CollectiveDone(d time.Duration)
	// BytesSent and BytesReceived are called with the bytes written to and read from the
	// connections of a plane, as they cross the socket (TLS handshakes and records
	// included).
	BytesSent(p Plane, n int)
	BytesReceived(p Plane, n int)
	// CheckpointWritten is called when a shard on this node has snapshot, encoded and
	// written its own checkpoint (err nil), or failed to (err says why), d after it began.
	CheckpointWritten(d time.Duration, err error)
	// RecoveryBegan is called when a job coordinated on this node begins a recovery (a
	// takeover included: the node that takes a job over calls it), with its cause.
	RecoveryBegan(cause jobctl.RecoveryCause)
}

// Plane is one of the networks a node talks on.
type Plane uint8

// The planes of a node (the gossip's is the cluster package's).
const (
	// PlaneActor is the actor remote (gRPC): control messages, streamed blocks, results.
	PlaneActor Plane = iota
	// PlaneData is the data plane (see dataplane.go): the collectives' messages.
	PlaneData
)

// String returns the plane's name as a metric label gives it: "actor" or "data".
func (p Plane) String() string {
	switch p {
	case PlaneActor:
		return "actor"
	case PlaneData:
		return "data"
	}
	return "other"
}

// observedConn counts the bytes read and written on a connection to its node's Observer.
type observedConn struct {
	net.Conn
	obs   Observer
	plane Plane
}

func (c *observedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.obs.BytesReceived(c.plane, n)
	}
	return n, err
}

func (c *observedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.obs.BytesSent(c.plane, n)
	}
	return n, err
}

// observe returns c counted on plane by obs, or c itself when obs is nil.
func observe(c net.Conn, obs Observer, plane Plane) net.Conn {
	if obs == nil {
		return c
	}
	return &observedConn{Conn: c, obs: obs, plane: plane}
}

// DropClasses are the classes of Node.Drops' causes, as DropClass gives them: a fixed set,
// for metrics that must not take the causes' text (which names message types and jobs'
// actors) as a label.
var DropClasses = []string{"unauthenticated", "malformed", "role", "owner", "stale", "sender_unproven",
	"dial_refused", "handshake", "connection_limit", "panic", "unimplemented", "gossip", "other"}

// DropClass returns the class of one of Node.Drops' causes: one of DropClasses, "other"
// for a cause it does not know.
func DropClass(cause string) string {
	switch cause {
	case dropUnauthenticated:
		return "unauthenticated"
	case dropTypeIndex, dropTargetIndex, dropSenderIndex, dropSerializer, dropUnknownType, dropBatchSize,
		dropDataStream, dropDataKind, dropDataTarget, dropDataMessage:
		return "malformed"
	case dropClientTarget, dropClientOnly, dropClientOnlyType, dropClientOnlyTo, dropDataRole:
		return "role"
	case dropSenderUnproven:
		return "sender_unproven"
	case dropDialRefused, dropDialIdentity:
		return "dial_refused"
	case dropRemoteEvicted, dropRemoteHandshakeFail, dropDataEvicted, dropDataHandshake:
		return "handshake"
	case dropIdentityConns, dropPortConns, dropIdentityStreams:
		return "connection_limit"
	case dropPanic:
		return "panic"
	case dropUnimplemented:
		return "unimplemented"
	case dropGossipStreams:
		return "gossip"
	}
	for _, p := range []struct{ prefix, class string }{{dropRolePrefix, "role"}, {dropOwnerPrefix, "owner"},
		{dropStalePrefix, "stale"}, {dropGossipMember, "gossip"}} {
		if strings.HasPrefix(cause, p.prefix) {
			return p.class
		}
	}
	return "other"
}

// Memory returns the bytes of job data the node offers (NodeConfig.Memory, 0: no limit) and
// those the shards placed on it reserve now. It may be called from any goroutine.
func (n *Node) Memory() (offered, reserved int64) { return n.cfg.Memory, n.mem.used() }

// JobsByState counts the live jobs coordinated on this node by state, named as JobState
// names them ("placing", "running", "recovering", "paused"); an ended job, which its board
// may show for a moment, is not counted. It may be called from any goroutine.
func (n *Node) JobsByState() map[string]int {
	out := map[string]int{}
	for _, j := range n.board.list(func(*messages.JobInfo) bool { return true }) {
		switch j.State {
		case messages.JobPhase_JOB_PHASE_DONE, messages.JobPhase_JOB_PHASE_FAILED, messages.JobPhase_JOB_PHASE_CANCELED:
			continue
		}
		out[JobState(j.State)]++
	}
	return out
}

// JobState names a job's phase in lower case, without its prefix: "placing", "running",
// "recovering", "paused", "done", "failed", "canceled" ("unspecified" when not said).
func JobState(p messages.JobPhase) string {
	return strings.ToLower(strings.TrimPrefix(p.String(), "JOB_PHASE_"))
}
