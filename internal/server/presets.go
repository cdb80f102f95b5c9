package server

import (
	"net"
	"strconv"

	sockaddr "github.com/hashicorp/go-sockaddr"

	"github.com/didnmf/didnmf/internal/actors"
)

// GossipPort is the gossip port of LANNode (memberlist's default).
const GossipPort = 7946

// LANNode returns the configuration of a member of a cluster of machines on one local
// network, every limit and wait set explicitly, as memberlist's DefaultLANConfig is: gossip
// on this machine's private IP (as memberlist picks it; 127.0.0.1 if it has none) on
// GossipPort, the actor and data ports picked when it starts, every core, 80% of the
// memory available now on this machine (MachineID: members on one machine share it), capacity 1, the node limits and owner quotas of actors.NodePreset,
// and actors.DefaultLAN's waits. Add the credentials (Secret, or TLS and GossipKey), Join,
// DataRoots, Node.DataDir (empty: a temporary directory, so checkpoints do not outlive the
// process) and a Logger; change what you need.
func LANNode() Config {
	ip, err := sockaddr.GetPrivateIP()
	if err != nil || net.ParseIP(ip) == nil {
		ip = "127.0.0.1"
	}
	return preset(net.JoinHostPort(ip, strconv.Itoa(GossipPort)), actors.DefaultLAN())
}

// LocalNode returns the configuration of a member of a cluster whose members all run on this
// machine, on loopback (a demo, tests, several members in one process): as LANNode, but gossip
// on 127.0.0.1 with a port picked when it starts (Server.Gossip tells it) and
// actors.Loopback's waits.
func LocalNode() Config { return preset("127.0.0.1:0", actors.Loopback()) }

// preset is a member's configuration gossiping on bind, with every limit set and the waits t.
func preset(bind string, t actors.Timeouts) Config {
	n := actors.NodePreset(t, defaultWorkers, AvailableMemory()*8/10)
	n.Machine = MachineID()
	return Config{Bind: bind, Node: n}
}
