package jobctl

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/usererr"
)

// Kinds of errors, as the wire says them.
const (
	kindInput    = messages.ErrorKind_ERROR_KIND_INPUT
	kindCanceled = messages.ErrorKind_ERROR_KIND_CANCELED
	kindFailure  = messages.ErrorKind_ERROR_KIND_FAILURE
	warn         = slog.LevelWarn
)

func uint64Attr(k string, v uint64) slog.Attr { return slog.Uint64(k, v) }

// begin places a new job where PlanPlacement says (round-robin over the nodes the spec
// names, or by cluster.Place over the cluster's workers that answered); then buddies,
// standby and the reduce tree, and the assignments go out.
func (j *Job) begin(now time.Time, b Begin) {
	if j.over || j.begun {
		if j.over && b.OwnsPartial {
			j.ready.RemovePartials = true // canceled while the runtime prepared them
		}
		return
	}
	j.begun = true
	j.m, j.n, j.density = b.Features, b.Samples, b.Density
	j.ownsPartial = b.OwnsPartial
	j.workers = slices.Clone(b.Workers)
	_ = j.lease.Step(LeaseStart{At: now})
	p := j.sub.GetSpec().GetShards()
	if int64(len(b.Reserve)) != p {
		j.fail(kindFailure, fmt.Sprintf("begin: %d reserves for %d shards", len(b.Reserve), p))
		return
	}
	plan, err := PlanPlacement(PlanInput{Job: j.id, Samples: b.Samples, Reserve: b.Reserve, Nodes: b.Nodes, Pongs: b.Pongs, Fixed: b.Fixed, Unreachable: b.Unreachable})
	for _, nd := range plan.Silent {
		j.log(warn, "member does not answer; not placing on it", slog.String("member", nd.Name), slog.String("actor", nd.Addr))
	}
	if err != nil {
		j.failWith(errorKind(err), err.Error(), err)
		return
	}
	j.ft.shardNode = make([]string, p)
	for s, sh := range plan.Shards {
		j.ft.shardNode[s] = sh.Node
	}
	j.ft.ring = plan.Ring
	j.ft.quorumOf = len(plan.Ring)
	j.ft.startSet = slices.Clone(plan.Ring)
	j.ft.reserve = b.Reserve
	j.assignBuddies()
	j.publish(now, messages.JobPhase_JOB_PHASE_PLACING, true)
	j.announce()
	j.place(0, nil)
	// The standby knows the job from its placement on: a coordinator lost before the first
	// iteration is taken over too.
	j.sendState()
}

// errorKind is the wire's kind of err: the user's to fix (usererr) or a failure.
func errorKind(err error) messages.ErrorKind {
	if usererr.Is(err) {
		return kindInput
	}
	return kindFailure
}

// uniqueStrings returns xs without repeats, in first-seen order.
func uniqueStrings(xs []string) []string {
	var out []string
	for _, x := range xs {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// nextInRing is the node after addr in the ring: "" with fewer than two nodes, the first
// node when addr is not in the ring.
func (j *Job) nextInRing(addr string) string {
	ring := j.ft.ring
	if len(ring) < 2 {
		return ""
	}
	i := slices.Index(ring, addr)
	if i < 0 {
		return ring[0]
	}
	return ring[(i+1)%len(ring)]
}

// assignBuddies gives every shard a buddy, the next node in the ring after its own, tells
// each buddy's host whose copies to keep, and chooses the standby.
func (j *Job) assignBuddies() {
	j.ft.buddy = make([]string, len(j.ft.shardNode))
	if len(j.ft.holders) != len(j.ft.shardNode) {
		j.ft.holders = make([][]string, len(j.ft.shardNode))
	}
	for s, addr := range j.ft.shardNode {
		j.ft.buddy[s] = j.nextInRing(addr)
		for _, h := range []string{addr, j.ft.buddy[s]} {
			if h != "" && !slices.Contains(j.ft.holders[s], h) {
				j.ft.holders[s] = append(j.ft.holders[s], h)
			}
			if h != "" {
				j.ft.involved[h] = true
			}
		}
	}
	// Each buddy's host learns whose copies to keep: it stores no others.
	of := map[string][]int64{}
	var order []string
	for s, b := range j.ft.buddy {
		if b == "" {
			continue
		}
		if of[b] == nil {
			order = append(order, b)
		}
		of[b] = append(of[b], int64(s))
	}
	for _, b := range order {
		j.send(HostPid(b), &messages.Buddies{JobId: j.id, Epoch: j.epoch, Shards: of[b], CheckpointEvery: j.sub.GetSpec().GetCheckpointEvery(),
			Coordinator: j.cfg.Self})
	}
	j.chooseStandby()
}

// chooseStandby makes the next node in the ring after the coordinator's the standby (none
// outside a cluster, or alone).
func (j *Job) chooseStandby() {
	j.ft.standby = ""
	self := j.cfg.Self.GetAddress()
	if sb := j.nextInRing(self); sb != "" && sb != self && j.cfg.Cluster {
		j.ft.standby = sb
		j.ft.involved[sb] = true
	}
}

// treeNode is one reducer of the reduce tree.
type treeNode struct {
	level, lo, hi int64
	node          string        // address
	pid           *messages.Pid // the reducer itself
	children      []*messages.Pid
	ranges        []int64
	parent        *messages.Pid
}

// buildTree lays out the reduce tree over p shards with the given fan-in: level-1 reducers each
// cover an aligned block of fanIn shards, level-L ones fanIn^L, up to a single root. Each
// reducer sits on the node that holds most of its shards (the first of them on a tie): their
// partials and results do not cross the network, and with a flat tree (p <= fan-in) the
// node's shards start on their next step while the results travel to the others. It returns
// the reducers, root last, and each shard's level-1 reducer.
func buildTree(job string, epoch uint64, p, fanIn int64, shardNode func(int64) string) ([]*treeNode, []*messages.Pid) {
	type member struct {
		lo, hi int64
		pid    *messages.Pid
		node   *treeNode
	}
	level := make([]member, p)
	for s := int64(0); s < p; s++ {
		level[s] = member{lo: s, hi: s + 1, pid: ChildPid(shardNode(s), ShardName(job, s))}
	}
	shardParent := make([]*messages.Pid, p)
	var all []*treeNode
	for l := int64(1); ; l++ {
		var next []member
		for i := 0; i < len(level); i += int(fanIn) {
			group := level[i:min(i+int(fanIn), len(level))]
			t := &treeNode{level: l, lo: group[0].lo, hi: group[len(group)-1].hi}
			t.node = majorityNode(t.lo, t.hi, shardNode)
			t.pid = ChildPid(t.node, ReducerName(job, epoch, l, t.lo))
			for _, g := range group {
				t.children = append(t.children, g.pid)
				t.ranges = append(t.ranges, g.lo, g.hi)
				if g.node != nil {
					g.node.parent = t.pid
				} else {
					shardParent[g.lo] = t.pid
				}
			}
			all = append(all, t)
			next = append(next, member{lo: t.lo, hi: t.hi, pid: t.pid, node: t})
		}
		if len(next) == 1 {
			return all, shardParent
		}
		level = next
	}
}

// majorityNode returns the node that holds most of the shards [lo, hi), the node of the
// lowest of them on a tie.
func majorityNode(lo, hi int64, shardNode func(int64) string) string {
	count := map[string]int{}
	for s := lo; s < hi; s++ {
		count[shardNode(s)]++
	}
	best := shardNode(lo)
	for s := lo; s < hi; s++ {
		if n := shardNode(s); count[n] > count[best] {
			best = n
		}
	}
	return best
}

// place sends the assignments of every shard and reducer of the current epoch to their
// nodes: shards start from the initialisation (resume 0) or roll back to the checkpoint at
// iteration resume, which the nodes in at[s] may hold copies of.
func (j *Job) place(resume int64, at [][]string) {
	spec := j.sub.GetSpec()
	p := spec.GetShards()
	j.initPhase = true // placement counts with initialisation, not with the iterations
	shardNode := func(s int64) string { return j.ft.shardNode[s] }
	tree, shardParent := buildTree(j.id, j.epoch, p, int64(j.cfg.FanIn), shardNode)
	j.hosts, j.shards, j.reducers, j.shardOf = nil, nil, nil, make(map[string]int, p)
	for s := int64(0); s < p; s++ {
		if addr := shardNode(s); !slices.Contains(j.hosts, addr) {
			j.hosts = append(j.hosts, addr)
		}
	}
	for _, t := range tree {
		j.reducers = append(j.reducers, t.pid)
		j.metered(HostPid(t.node), &messages.ReducerAssignment{JobId: j.id, Epoch: j.epoch, Level: t.level, Lo: t.lo, Hi: t.hi,
			Children: t.children, ChildRanges: t.ranges, Parent: t.parent, Coordinator: j.cfg.Self, Shards: p})
	}
	cols := kernels.ColumnRanges(j.n, int(p))
	for s := int64(0); s < p; s++ {
		pid := ChildPid(shardNode(s), ShardName(j.id, s))
		j.shardOf[pid.Id] = len(j.shards)
		j.shards = append(j.shards, pid)
		a := &messages.ShardAssignment{JobId: j.id, Epoch: j.epoch, Shard: s, Shards: p,
			ColLo: int64(cols[s]), ColHi: int64(cols[s+1]), TotalCols: int64(j.n), Spec: spec,
			Coordinator: j.cfg.Self, Reducer: shardParent[s], Client: j.sub.GetClient(), Buddy: j.ft.buddy[s], ResumeFrom: resume,
			OwnerToken: j.sub.GetOwnerToken(), Owner: j.sub.GetOwner()}
		if j.ft.reserve != nil {
			a.Reserve = j.ft.reserve[s]
		}
		if at != nil {
			a.CheckpointAt = at[s]
		}
		j.metered(HostPid(shardNode(s)), a)
	}
}

// replaceLost gives the shards of lost nodes new nodes among the live ones, as the job was
// placed (cluster.PlaceRest): within the load bounds and the memory the nodes have free,
// trying first the nodes at[s] that hold a copy of shard s's checkpoint. The other shards
// stay where they are. A live node that did not answer its ping keeps its shards and is
// taken at its word (capacity 1, memory unknown).
func (j *Job) replaceLost(alive []string, pongs []*messages.Pong, at [][]string) error {
	free := freeMemory(pongs)
	cands := make([]cluster.Candidate, len(alive))
	index := make(map[string]int, len(alive))
	for i, addr := range alive {
		cands[i] = cluster.Candidate{Name: addr, Capacity: 1, Memory: free[i]}
		if p := pongs[i]; p != nil {
			cands[i].Capacity, cands[i].Machine = int(max(p.Capacity, 1)), p.Machine
		}
		index[addr] = i
	}
	n := len(j.ft.shardNode)
	keep, prefer, need := make([]int, n), make([][]int, n), make([]int64, n)
	for s, addr := range j.ft.shardNode {
		keep[s] = -1
		if i, ok := index[addr]; ok && !j.ft.lost[addr] {
			keep[s] = i
			continue
		}
		if s < len(j.ft.reserve) {
			need[s] = j.ft.reserve[s]
		}
		for _, h := range at[s] {
			if i, ok := index[h]; ok {
				prefer[s] = append(prefer[s], i)
			}
		}
	}
	out, err := cluster.PlaceRest(j.id, need, keep, prefer, cands)
	if err != nil {
		return err
	}
	for s, i := range out {
		j.ft.shardNode[s] = alive[i]
	}
	return nil
}
