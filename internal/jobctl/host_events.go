package jobctl

import (
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/messages"
)

// The events a Host takes: the host actor's messages, each with what of its sender and of the
// node the host needs (the runtime authenticated the sender and reads the node's shared
// memory accounting), its children's lives (failed, stopped, could not be spawned), the
// membership, and the timers it asked for. Local is set on a message sent from the node's
// own process (the guard stamped no remote caller on it).

// HostSubmit is a job submitted to this node: its coordinator is to run here. The runtime
// authenticated the sender (a client names only itself as the job's client, with the token
// its id comes from) and checked the spec against the cluster (SpecError).
type HostSubmit struct {
	Submit *messages.SubmitJob
	// Peer is set when the sender is a peer node or this process; Local when this process.
	Peer, Local bool
	// Caller is the name the guard authenticated the sender under: the job's owner (a job of
	// this process is owned by "local").
	Caller string
	// SpecError is why the spec cannot run on this cluster (nil when it can): the client's
	// JobError names its field when it is a *usererr.Error.
	SpecError error
}

// HostShardAssign is a coordinator's ShardAssignment for a shard on this node.
type HostShardAssign struct {
	Assignment *messages.ShardAssignment
	Local      bool
	// Ended is set when the job ended on this node (a coordinator stopped it here).
	Ended bool
	// Reserve is the memory the shard reserves here: what the assignment says, at least what
	// its columns and rank need whatever it says.
	Reserve int64
	// MemoryUsed is what the node's jobs hold now (their reserves and what shards took beyond
	// them); OwnerHeld what the assignment's owner holds of it.
	MemoryUsed, OwnerHeld int64
}

// HostReducerAssign is a coordinator's ReducerAssignment for a reducer on this node.
type HostReducerAssign struct {
	Assignment *messages.ReducerAssignment
	Local      bool
	Ended      bool
}

// HostStop is a coordinator's StopJob: the job ended (or this process stops it).
type HostStop struct {
	Stop  *messages.StopJob
	Local bool
}

// HostBuddies is a coordinator's Buddies: the shards of its job whose checkpoint copies this
// node keeps, and the job's checkpoint interval.
type HostBuddies struct {
	Buddies *messages.Buddies
	Local   bool
}

// HostJobState is a job's state replicated by its coordinator to this node, its standby.
type HostJobState struct{ State *messages.JobState }

// HostMemberLeft is a node leaving the cluster or declared dead: Addr is its actor address,
// Name its member name.
type HostMemberLeft struct{ Name, Addr string }

// HostOrphanCheck is a HostTimer coming due: Member tells whether the node of the job's
// coordinator (Coordinator, its address) is a live member of the cluster again.
type HostOrphanCheck struct {
	Job, Coordinator string
	Member           bool
}

// HostChildFailed is a child of the host (ID, its actor id "host/<name>") that panicked
// with Reason: a shard or reducer was restarted by the supervisor, a coordinator stopped.
type HostChildFailed struct{ ID, Reason string }

// HostChildStopped is a child of the host (its actor id) that stopped.
type HostChildStopped struct{ ID string }

// HostSpawnFailed is a HostSpawn the runtime could not carry out (Name, as the effect said),
// and why; Step it before anything else.
type HostSpawnFailed struct{ Name, Err string }

// HostAnswerKept is a coordinator of this node handing its job's answer (JobResult or
// JobError) to the host as the job ends, for a client that did not get it; Token is the job's
// owner token.
type HostAnswerKept struct {
	Job, Token string
	Answer     proto.Message
	At         time.Time
}

// HostLeaseRenew is a client's LeaseRenew sent to the host at At: the job's coordinator is
// gone. The answer is HostReady.Reply.
type HostLeaseRenew struct {
	Renew *messages.LeaseRenew
	At    time.Time
}
