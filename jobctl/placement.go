package jobctl

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

// Kinds of errors, as the wire says them.
const (
	kindInput    = messages.ErrorKind_ERROR_KIND_INPUT
	kindCanceled = messages.ErrorKind_ERROR_KIND_CANCELED
	kindFailure  = messages.ErrorKind_ERROR_KIND_FAILURE
	warn         = slog.LevelWarn
)

func uint64Attr(k string, v uint64) slog.Attr { return slog.Uint64(k, v) }

// begin places a new job: shards go round-robin over the nodes the spec names, or by
// cluster.Place over the cluster's workers that answered; then buddies, standby and the
// reduce tree, and the assignments go out.
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
	var at []int
	var ring []string
	if b.Fixed {
		if b.Unreachable != "" {
			j.fail(kindFailure, b.Unreachable)
			return
		}
		addrs := make([]string, len(b.Nodes))
		for i, nd := range b.Nodes {
			addrs[i] = nd.Addr
		}
		if len(addrs) == 0 {
			j.fail(kindFailure, "begin: no node to place on")
			return
		}
		at = make([]int, p)
		for s := range at {
			at[s] = s % len(addrs)
		}
		if err := checkFit(addrs, b.Pongs, at, b.Reserve); err != nil {
			j.fail(kindInput, err.Error())
			return
		}
		ring = uniqueStrings(addrs)
		j.ft.shardNode = make([]string, p)
		for s := range at {
			j.ft.shardNode[s] = addrs[at[s]]
		}
	} else {
		nodes, err := j.placeOnMembers(b, p)
		if err != nil {
			return // failed
		}
		ring = nodes
	}
	j.ft.ring = ring
	j.ft.quorumOf = len(ring)
	j.ft.startSet = slices.Clone(ring)
	j.ft.reserve = b.Reserve
	j.assignBuddies()
	j.publish(now, messages.JobPhase_JOB_PHASE_PLACING, true)
	j.announce()
	j.place(0, nil)
	// The standby knows the job from its placement on: a coordinator lost before the first
	// iteration is taken over too.
	j.sendState()
}

// placeOnMembers places the job's shards on the cluster's workers that answered their ping,
// by capacity-weighted rendezvous hashing within the memory each has free (cluster.Place). It
// sets the shards' nodes and returns the live workers, or fails the job when the cluster
// cannot hold it.
func (j *Job) placeOnMembers(b Begin, p int64) ([]string, error) {
	var cands []cluster.Candidate
	var live []string
	slots := int64(0) // shards the answering members take
	free := freeMemory(b.Pongs)
	for i, pong := range b.Pongs {
		if pong == nil {
			j.log(warn, "member does not answer; not placing on it", slog.String("member", b.Nodes[i].Name), slog.String("actor", b.Nodes[i].Addr))
			continue
		}
		cands = append(cands, cluster.Candidate{Name: b.Nodes[i].Name, Capacity: int(max(pong.Capacity, 1)), Memory: free[i], Machine: pong.Machine})
		live = append(live, b.Nodes[i].Addr)
		if slots >= 0 && pong.MaxShards > 0 {
			slots += max(pong.MaxShards-pong.Shards, 0)
		} else {
			slots = -1 // a member without a cap
		}
	}
	if len(cands) == 0 {
		err := fmt.Errorf("no member of the cluster answers (%d known)", len(b.Nodes))
		j.fail(kindFailure, err.Error())
		return nil, err
	}
	if slots >= 0 && p > slots {
		err := fmt.Errorf("%d shards: the cluster's %d members take %d more shards (serve --max-shards); use fewer shards", p, len(cands), slots)
		j.fail(kindInput, err.Error())
		return nil, err
	}
	at, err := cluster.Place(j.id, b.Reserve, cands)
	if err != nil {
		j.fail(kindInput, err.Error())
		return nil, err
	}
	j.ft.shardNode = make([]string, p)
	for s := range at {
		j.ft.shardNode[s] = live[at[s]]
	}
	return live, nil
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
// and shard count the nodes have free, as their pongs tell.
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
			return fmt.Errorf("node %s would hold %d shards; it takes %d more (serve --max-shards): use fewer shards or more nodes", a, count[a], max(p.MaxShards-p.Shards, 0))
		}
		if p.Memory > 0 && mem[a] > p.Memory-p.Reserved {
			return fmt.Errorf("node %s would need %s for its %d shards; it has %s of its %s free", a, cluster.FormatBytes(mem[a]), count[a],
				cluster.FormatBytes(max(p.Memory-p.Reserved, 0)), cluster.FormatBytes(p.Memory))
		}
		count[a] = 0 // a node listed twice is checked once
	}
	return nil
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
