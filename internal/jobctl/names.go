package jobctl

import (
	"fmt"

	"github.com/didnmf/didnmf/messages"
)

// HostName is the well-known actor name of every node's host actor; a job's shards and
// reducers are its children.
const HostName = "host"

// HostPid is the wire PID of the host actor of the node at address.
func HostPid(address string) *messages.Pid { return &messages.Pid{Address: address, Id: HostName} }

// The names of a job's actors under their host: "<job>-s<shard>" for shards,
// "<job>-e<epoch>-r<level>-<first shard>" for reducers (a recovery builds a new tree), "<job>-coord"
// for the coordinator.

// ShardName is the actor name of shard s of a job (a child of the host).
func ShardName(job string, s int64) string { return fmt.Sprintf("%s-s%d", job, s) }

// ReducerName is the actor name of the reducer at a level of a job's reduce tree, covering
// shards from lo, in an epoch: each epoch builds a new tree.
func ReducerName(job string, epoch uint64, level, lo int64) string {
	return fmt.Sprintf("%s-e%d-r%d-%d", job, epoch, level, lo)
}

// ChildPid is the wire PID of a host's child (a shard or a reducer) on the node at address.
func ChildPid(address, name string) *messages.Pid {
	return &messages.Pid{Address: address, Id: HostName + "/" + name}
}

// EpochGenShift splits an epoch into a coordinator generation (high bits, raised by every
// takeover) and the recoveries within it.
const EpochGenShift = 32

// EpochString shows an epoch as its recovery count, preceded by its coordinator generation
// after a takeover ("1.1": the first recovery under the first successor).
func EpochString(e uint64) string {
	if gen := e >> EpochGenShift; gen > 0 {
		return fmt.Sprintf("%d.%d", gen, e&(1<<EpochGenShift-1))
	}
	return fmt.Sprint(e)
}

// IsJobID tells whether s is a job id: 1 to 64 letters, digits, '_' or '-' (it becomes part
// of actor names). It runs on every frame of a node's data plane, so it is no regular
// expression.
func IsJobID(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
