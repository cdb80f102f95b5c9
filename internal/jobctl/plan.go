package jobctl

import (
	"errors"
	"fmt"
	"math"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/usererr"
)

// A new job is set up in two pure steps around the runtime's I/O: Prepare, once the runtime
// has read the data's shape, checks the spec against it and the cluster and says what each
// shard reserves and which nodes to ping; PlanPlacement, once the pings are answered, says
// where each shard goes. Job.begin calls PlanPlacement; the runtime only reads headers and
// pings.

// Prepare is the pure part of a new job's setup, between reading the data's shape and the
// pings: the spec is checked against the data and the cluster (jobspec.Spec.CheckOn, the one
// check of a job), each shard's reserve is its estimate (jobspec.Spec.Footprint), and the
// candidates are the nodes the spec names, else self when not on a cluster (Fixed: shards go
// round-robin over them), else the cluster's workers (nil: not a cluster). The runtime pings
// the returned Begin's Nodes and sets its Pongs (and Unreachable when Fixed). A spec the data
// or the cluster refutes is a *usererr.Error.
func Prepare(spec *jobspec.Spec, shape *jobspec.Shape, self string, workers []Node) (Begin, error) {
	var addrs []string
	if workers != nil {
		addrs = make([]string, len(workers))
		for i, w := range workers {
			addrs[i] = w.Addr
		}
	}
	if err := spec.CheckOn(shape, jobspec.Cluster{Where: jobspec.OnNode, Members: addrs}); err != nil {
		return Begin{}, err
	}
	b := Begin{Samples: shape.Samples, Features: shape.Features, Density: shape.Density(), Reserve: spec.Footprint(shape), Workers: addrs}
	switch {
	case len(spec.Nodes) > 0:
		b.Fixed = true
		for _, a := range spec.Nodes {
			b.Nodes = append(b.Nodes, Node{Name: a, Addr: a})
		}
	case workers == nil:
		b.Fixed = true
		b.Nodes = []Node{{Name: self, Addr: self}}
	default:
		b.Nodes = append([]Node(nil), workers...)
	}
	return b, nil
}

// PlanInput is what a new job's placement is decided from.
type PlanInput struct {
	// Job is the job's id: it seeds the rendezvous hashing of cluster.Place.
	Job string
	// Samples is N, which the shards split into column ranges (kernels.ColumnRanges).
	Samples int
	// Reserve is the memory each shard holds (jobspec.Spec.Footprint), one per shard.
	Reserve []int64
	// Nodes, Pongs, Fixed and Unreachable are Begin's: the candidates, their answers to a
	// ping (nil: no answer), whether the spec fixed them, and which fixed node did not answer.
	Nodes       []Node
	Pongs       []*messages.Pong
	Fixed       bool
	Unreachable string
}

// Plan is where a new job's shards go.
type Plan struct {
	// Shards are the shards, in order: each one's node, columns and reserve.
	Shards []ShardPlan
	// Ring are the nodes the job runs on, in ring order (each shard's buddy is the next node
	// after its own): the fixed nodes without repeats, or the members that answered.
	Ring []string
	// Silent are the cluster's members that did not answer their ping: nothing goes there.
	Silent []Node
}

// ShardPlan is where one shard goes.
type ShardPlan struct {
	// Node is the actor address of the node that runs the shard.
	Node string
	// ColLo and ColHi are the shard's columns [ColLo, ColHi) of the data.
	ColLo, ColHi int
	// Reserve is the memory the shard reserves on its node.
	Reserve int64
}

// PlanPlacement decides where a new job's shards go, from the data's size (Samples and what
// each shard reserves) and the candidate nodes' answers to a ping (their cores, the memory
// they offer and have reserved, the shards they take and run): round-robin over fixed nodes,
// each of which must hold its shards' reserves and shard count; or over the cluster's members
// that answered, by capacity-weighted rendezvous hashing within the memory each machine has
// free, the least loaded first (cluster.Place), within the shards they take. It is a pure function: the same input gives
// the same plan. A job that does not fit is a *usererr.Error that says why; a plan without a
// node to go to (a fixed node unreachable, no member answering) is an error that is not the
// user's.
func PlanPlacement(in PlanInput) (Plan, error) {
	p := len(in.Reserve)
	var pl Plan
	var at []int       // shard s goes to nodes[at[s]]
	var nodes []string // actor addresses
	if in.Fixed {
		if in.Unreachable != "" {
			return Plan{}, errors.New(in.Unreachable)
		}
		if len(in.Nodes) == 0 {
			return Plan{}, errors.New("begin: no node to place on")
		}
		for _, nd := range in.Nodes {
			nodes = append(nodes, nd.Addr)
		}
		at = make([]int, p)
		for s := range at {
			at[s] = s % len(nodes)
		}
		if err := checkFit(nodes, in.Pongs, at, in.Reserve); err != nil {
			return Plan{}, err
		}
		pl.Ring = uniqueStrings(nodes)
	} else {
		var err error
		at, nodes, pl.Silent, err = placeOnMembers(in, p)
		if err != nil {
			return Plan{}, err
		}
		pl.Ring = nodes
	}
	cols := kernels.ColumnRanges(in.Samples, p)
	pl.Shards = make([]ShardPlan, p)
	for s := range pl.Shards {
		pl.Shards[s] = ShardPlan{Node: nodes[at[s]], ColLo: cols[s], ColHi: cols[s+1], Reserve: in.Reserve[s]}
	}
	return pl, nil
}

// placeOnMembers places p shards on the cluster's members that answered their ping, by
// capacity-weighted rendezvous hashing within the memory each has free, the least loaded
// first (cluster.Place, each member's load the shards its pong says it runs). It
// returns each shard's index into the live members, their addresses, and the members that
// did not answer.
func placeOnMembers(in PlanInput, p int) (at []int, live []string, silent []Node, err error) {
	var cands []cluster.Candidate
	slots := int64(0) // shards the answering members take
	free := freeMemory(in.Pongs)
	for i, pong := range in.Pongs {
		if pong == nil {
			silent = append(silent, in.Nodes[i])
			continue
		}
		cands = append(cands, cluster.Candidate{Name: in.Nodes[i].Name, Capacity: int(max(pong.Capacity, 1)), Memory: free[i], Machine: pong.Machine,
			Load: int(min(max(pong.Shards, 0), math.MaxInt32))})
		live = append(live, in.Nodes[i].Addr)
		if slots >= 0 && pong.MaxShards > 0 {
			slots += max(pong.MaxShards-pong.Shards, 0)
		} else {
			slots = -1 // a member without a cap
		}
	}
	if len(cands) == 0 {
		return nil, nil, silent, fmt.Errorf("no member of the cluster answers (%d known)", len(in.Nodes))
	}
	if slots >= 0 && int64(p) > slots {
		return nil, nil, silent, usererr.Errorf("%d shards: the cluster's %d members take %d more shards (serve --max-shards); use fewer shards", p, len(cands), slots)
	}
	at, err = cluster.Place(in.Job, in.Reserve, cands)
	if err != nil {
		return nil, nil, silent, usererr.Wrap(err)
	}
	return at, live, silent, nil
}

// freeMemory returns the bytes of job data each answering node (nil pongs are skipped) can
// still take: its offer less its reservations, or, for the nodes of one machine, which share
// its memory, the largest of their offers less all their reservations. A node without a
// limit (Memory 0) can take any amount, and so can its machine.
func freeMemory(pongs []*messages.Pong) []int64 {
	offer, reserved := map[string]int64{}, map[string]int64{}
	for _, p := range pongs {
		if p == nil || p.Machine == "" {
			continue
		}
		if o, seen := offer[p.Machine]; p.Memory <= 0 || seen && o <= 0 {
			offer[p.Machine] = 0
		} else {
			offer[p.Machine] = max(o, p.Memory)
		}
		reserved[p.Machine] += p.Reserved
	}
	free := make([]int64, len(pongs))
	for i, p := range pongs {
		free[i] = math.MaxInt64
		switch {
		case p == nil:
		case p.Machine != "" && offer[p.Machine] > 0:
			free[i] = max(offer[p.Machine]-reserved[p.Machine], 0)
		case p.Machine == "" && p.Memory > 0:
			free[i] = max(p.Memory-p.Reserved, 0)
		}
	}
	return free
}

// checkFit checks that the shards placed on nodes (shard s on nodes[at[s]]) fit the memory
// and shard count the nodes have free, as their pongs tell; a shard that does not fit is a
// *usererr.Error.
func checkFit(nodes []string, pongs []*messages.Pong, at []int, need []int64) error {
	mem := map[string]int64{}
	count := map[string]int64{}
	for s := range need {
		a := nodes[at[s]]
		mem[a] += need[s]
		count[a]++
	}
	for i, a := range nodes {
		if i >= len(pongs) {
			break
		}
		p := pongs[i]
		if p == nil || count[a] == 0 {
			continue
		}
		if p.MaxShards > 0 && count[a] > p.MaxShards-p.Shards {
			return usererr.Errorf("node %s would hold %d shards; it takes %d more (serve --max-shards): use fewer shards or more nodes", a, count[a], max(p.MaxShards-p.Shards, 0))
		}
		if p.Memory > 0 && mem[a] > p.Memory-p.Reserved {
			return usererr.Errorf("node %s would need %s for its %d shards; it has %s of its %s free", a, cluster.FormatBytes(mem[a]), count[a],
				cluster.FormatBytes(max(p.Memory-p.Reserved, 0)), cluster.FormatBytes(p.Memory))
		}
		count[a] = 0 // a node listed twice is checked once
	}
	return nil
}
