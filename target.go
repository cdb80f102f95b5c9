package didnmf

import (
	"fmt"
	"strings"

	"github.com/didnmf/didnmf/usererr"
)

// Target says where a job runs. The zero value is Local on all cores: this process, without
// actors.
//
// The three targets run the same job to the same bits: the driver (kernels.Run) in this
// process, Nodes actor systems in this process that talk the whole protocol to each other over
// gRPC on loopback, or a running cluster that this process uses as a client (it learns the
// members from a member's front door and takes no part in the gossip).
type Target struct {
	// Nodes > 0 runs jobs on that many actor systems in this process (at most MaxNodes), with
	// shards placed round-robin; 0 runs them on the driver, without actors.
	Nodes int
	// Cluster, when set, runs jobs on a running cluster (see didnmf serve), reached with
	// these client settings; Nodes and Threads must then be 0 (the nodes have their own).
	Cluster *ClusterConfig
	// Threads is the number of worker threads of the driver or of the in-process nodes
	// (0: all cores).
	Threads int
}

// MaxNodes bounds Target.Nodes: each in-process node holds a gRPC server and its pools.
const MaxNodes = 64

// Local returns the target of this process, without actors (kernels.Run), with threads
// worker threads (0: all cores).
func Local(threads int) Target { return Target{Threads: threads} }

// InProcess returns the target of nodes actor systems in this process.
func InProcess(nodes, threads int) Target { return Target{Nodes: nodes, Threads: threads} }

// OnCluster returns the target of a running cluster, joined with cfg.
func OnCluster(cfg ClusterConfig) Target { return Target{Cluster: &cfg} }

// OnActors reports whether jobs on t run on actors (in-process nodes or a cluster).
func (t Target) OnActors() bool { return t.Nodes > 0 || t.Cluster != nil }

// readsInput reports whether this process reads the input of jobs on t (the driver and the
// in-process nodes share its files; a cluster's nodes read their own, or the client streams).
func (t Target) readsInput() bool { return t.Cluster == nil }

// String says where t runs jobs, as a progress line would.
func (t Target) String() string {
	switch {
	case t.Cluster != nil:
		return "the cluster at " + strings.Join(t.Cluster.Cluster, ",")
	case t.Nodes > 0:
		return fmt.Sprintf("%d actor systems in this process", t.Nodes)
	}
	return "this process"
}

// validate checks t's own rules; an error names the field of Target (nodes, threads,
// cluster) that breaks one.
func (t Target) validate() error {
	switch {
	case t.Nodes < 0 || t.Nodes > MaxNodes:
		return usererr.Field("nodes", "{nodes} must be between 0 and %d, got %d", MaxNodes, t.Nodes)
	case t.Threads < 0:
		return usererr.Field("threads", "{threads} must be >= 0, got %d", t.Threads)
	case t.Cluster != nil && t.Nodes != 0:
		return usererr.Field("cluster", "{cluster} and {nodes} exclude each other: in-process nodes make a cluster of their own")
	case t.Cluster != nil && len(t.Cluster.Cluster) == 0:
		return usererr.Field("cluster", "a {cluster} target needs the gossip address of a member")
	}
	return nil
}
