package didnmf

import (
	"github.com/didnmf/didnmf/internal/server"
	"github.com/didnmf/didnmf/pki"
)

// NodeConfig configures a member node of a cluster: its name, gossip address, the members
// to join, credentials, the directories its jobs may use, and (Node) its actor system's
// threads, memory, limits and waits. Start from LocalNode or LANNode, which set every limit
// and wait, and add the credentials and what you change.
type NodeConfig = server.Config

// LANNode returns the configuration of a member of a cluster of machines on one local
// network: gossip on this machine's private IP on port 7946, every core, 80% of the memory
// available, the default limits, quotas and waits, all set. Add Secret (or TLS and
// GossipKey), Join, DataRoots and Node.DataDir (empty: checkpoints in a temporary directory).
func LANNode() NodeConfig { return server.LANNode() }

// LocalNode returns the configuration of a member of a cluster whose members all run on this
// machine: as LANNode, but on 127.0.0.1 with a port picked when it starts and the waits of
// one machine (a demo, tests, several members in one process).
func LocalNode() NodeConfig { return server.LocalNode() }

// Member is a running member node: Gossip is the address others join and clients reach it
// at; Leave leaves the cluster gracefully; Close stops it.
type Member = server.Server

// Serve starts a member node and joins cfg.Join. The member runs until closed; jobs reach it
// from clients (OnCluster) or from `didnmf factorize --cluster`.
func Serve(cfg NodeConfig) (*Member, error) { return server.Start(cfg) }

// ClusterConfig configures a client of a running cluster (OnCluster): the gossip addresses
// of some of its members and the credentials (the cluster Secret, or a client certificate).
type ClusterConfig = server.ClientConfig

// UnreachableError is NewRunner's error when no member of a cluster answered within the
// client's reach (ClusterConfig.Reach): nothing listens there, or it is not reached from here.
type UnreachableError = server.UnreachableError

// AddressError is NewRunner's error for a cluster address that is not IP:PORT (or host:port).
type AddressError = server.AddressError

// NewSecret returns a fresh random cluster secret (NodeConfig.Secret, ClusterConfig.Secret):
// every member and client derives its certificate from it, and the gossip key. Keep it as a
// password: whoever holds it can join the cluster.
func NewSecret() []byte { return pki.NewSecret() }
