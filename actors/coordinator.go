package actors

import (
	"bytes"
	"cmp"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/fsroot"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/report"
)

// grantWindow is how many iterations shards may run ahead of the coordinator in a job with a
// time limit (without one, shards run freely and stop by their own deterministic rule).
const grantWindow = 4

// coordinator drives one job: it checks the spec against the data, places shards and
// reducers, starts them, reports progress, applies the time limit and assembles the result.
type coordinator struct {
	node   *Node
	sub    *messages.SubmitJob
	job    string
	client *actor.PID
	spec   *parsedSpec
	m, n   int
	epoch  uint64
	// density is the input's stored entries over M x N when known (sparse inputs), else 0.
	density float64

	hosts    []*actor.PID // distinct hosts with actors of this job
	shards   []*actor.PID
	reducers []*actor.PID
	placed   int
	sqNormX  float64 // ||X||^2, summed in shard order once every shard is placed
	sqNorms  []float64
	shardOf  map[string]int // a shard actor's id -> its shard, for this epoch
	running  bool
	over     bool

	granted   int64
	timeUp    bool
	started   time.Time
	history   []*messages.HistoryPoint
	iterSec   []float64
	lastSec   float64
	initial   float64
	objective float64

	done        map[int64]*messages.ShardDone
	reducerDone int
	counters    messages.Counters
	meter       meter
	watch       *eventstream.Subscription // membership events, on a cluster

	ft faultState

	// leaseAt is when the client last renewed its lease (or the job started, or was taken
	// over); ticks stops the coordinator's clock; published is when the board last got news.
	// ownsPartial is set while the job's partial coef.npy, which this coordinator created,
	// exists.
	ownsPartial bool
	leaseAt     time.Time
	ticks       chan struct{}
	published   time.Time
}

// coordTick is the coordinator's clock: once a second it checks the client's lease and the
// node's time cap.
type coordTick struct{}

// faultState is what the coordinator keeps to recover its job from failures.
type faultState struct {
	shardNode []string   // actor address of each shard's node
	buddy     []string   // of the node keeping copies of each shard's checkpoints ("" none)
	holders   [][]string // every node that held each shard or its buddy copies: where copies may be
	reserve   []int64    // memory each shard reserves
	ring      []string   // the live nodes in placement order; buddies follow it
	standby   string     // the node that takes the job over if this coordinator's node dies
	involved  map[string]bool
	lost      map[string]bool // nodes lost during the job
	quorumOf  int             // nodes known at the start
	startSet  []string        // their addresses
	takeover  *messages.JobState
	// takeoverCause says why this coordinator took the job over
	takeoverCause string

	committed   []int64                  // committed checkpoint iterations, ascending
	reported    map[int64]map[int64]bool // checkpoint iteration -> shards that reported it
	checkpoints int64
	ckptSeconds float64
	// automatic cadence: the iteration last asked for, when the last commit happened (job
	// seconds) and what its slowest shard took
	askedAt      int64
	lastCkptTime float64
	lastCkptCost float64
	ckptCost     float64 // slowest shard of the checkpoint being gathered

	lastIter   int64 // last iteration completed in this epoch
	epochAt    float64
	recoveries []*messages.Recovery
	recovering *messages.Recovery
	paused     bool // the job waits for a quorum
	pauseCause string
}

// quorumTimeout ends a wait for a quorum.
type quorumTimeout struct{ epoch uint64 }

// epochGenShift splits an epoch into a coordinator generation (high bits, raised by every
// takeover) and the recoveries within it.
const epochGenShift = 32

// epochString shows an epoch as its recovery count, preceded by its coordinator generation
// after a takeover ("1.1": the first recovery under the first successor).
func epochString(e uint64) string {
	if gen := e >> epochGenShift; gen > 0 {
		return fmt.Sprintf("%d.%d", gen, e&(1<<epochGenShift-1))
	}
	return fmt.Sprint(e)
}

// maxRecoveries caps a job's rollbacks: a fault that comes back every time fails the job.
const maxRecoveries = 50

func newCoordinator(n *Node, sub *messages.SubmitJob) *coordinator {
	return &coordinator{node: n, sub: sub, job: sub.JobId, client: pidOf(sub.Client), epoch: 1, done: map[int64]*messages.ShardDone{},
		ft: faultState{involved: map[string]bool{}, lost: map[string]bool{}, reported: map[int64]map[int64]bool{}}}
}

// Receive implements actor.Actor.
func (c *coordinator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		c.watchMembers(ctx)
		c.startClock(ctx)
		if c.ft.takeover != nil {
			c.takeOver(ctx)
			return
		}
		c.start(ctx)
	case *actor.Stopped:
		if c.watch != nil {
			ctx.ActorSystem().EventStream.Unsubscribe(c.watch)
		}
		close(c.ticks)
		c.node.board.remove(c.job)
	case coordTick:
		c.onTick(ctx)
	case *messages.LeaseRenew:
		if m.JobId != c.job {
			return
		}
		if !owns(ctx, c.sub, m.OwnerToken) {
			c.node.guard.drop(dropOwnerPrefix+"LeaseRenew", 1)
			return
		}
		c.leaseAt = time.Now()
	case cluster.Event:
		c.onMemberEvent(ctx, m)
	case *messages.Placed:
		c.onPlaced(ctx, m)
	case *messages.IterationDone:
		c.onIteration(ctx, m)
	case *messages.ShardDone:
		c.onShardDone(ctx, m)
	case *messages.ReducerDone:
		c.onReducerDone(ctx, m)
	case *messages.CheckpointDone:
		c.onCheckpointDone(ctx, m)
	case *quorumTimeout:
		if c.ft.paused && m.epoch == c.epoch && !c.over {
			msg := fmt.Sprintf("%s; the job's nodes stayed without a majority for %v", c.ft.pauseCause, c.node.cfg.Timeouts.Quorum)
			if c.ft.takeover != nil {
				c.node.logger.Warn("giving up a job taken over without a quorum", slog.String("job", c.job), slog.String("why", msg))
				c.client = nil
			}
			c.fail(ctx, KindFailure, msg)
		}
	case *messages.ActorFailed:
		if m.JobId == c.job && !c.over {
			c.recover(ctx, fmt.Sprintf("%s panicked on node %s (%s)", m.Actor, m.Node, m.Reason), nil)
		}
	case *messages.JobError:
		if m.JobId == c.job {
			c.fail(ctx, m.Kind, m.Message)
		}
	case *messages.CancelJob:
		if m.JobId != c.job {
			return
		}
		if !owns(ctx, c.sub, m.OwnerToken) {
			c.node.guard.drop(dropOwnerPrefix+"CancelJob", 1)
			return
		}
		c.fail(ctx, KindCanceled, "job canceled by the client")
	}
}

// startClock starts the coordinator's ticks; they stop when it stops.
func (c *coordinator) startClock(ctx actor.Context) {
	c.leaseAt = time.Now()
	c.ticks = make(chan struct{})
	system, self, stop := ctx.ActorSystem(), ctx.Self(), c.ticks
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				system.Root.Send(self, coordTick{})
			}
		}
	}()
}

// onTick cancels the job when its client stopped renewing its lease, or when it ran past the
// node's cap on job time.
func (c *coordinator) onTick(ctx actor.Context) {
	if c.over {
		return
	}
	cfg := c.node.cfg
	if lease := cfg.Lease; lease > 0 && !c.sub.Spec.GetDetached() && time.Since(c.leaseAt) > lease {
		c.node.logger.Warn("canceling a job whose client is gone", slog.String("job", c.job), slog.Duration("lease", lease))
		c.fail(ctx, KindCanceled, fmt.Sprintf("job %s canceled: its client sent no word for %v (killed, or cut off from the cluster); submit with --detach for a job that runs on without its client", c.job, lease))
		return
	}
	if cfg.MaxJobTime > 0 && !c.started.IsZero() && time.Since(c.started) > cfg.MaxJobTime {
		c.fail(ctx, KindCanceled, fmt.Sprintf("job %s canceled: it ran past the node's --max-job-time of %v", c.job, cfg.MaxJobTime))
	}
}

// publish tells the node's job board how the job stands (at most every 200 ms unless forced).
func (c *coordinator) publish(state string, force bool) {
	if c.over || (!force && time.Since(c.published) < 200*time.Millisecond) {
		return
	}
	c.published = time.Now()
	spec := c.sub.GetSpec()
	info := &messages.JobInfo{JobId: c.job, Owner: c.sub.GetOwner(), Coordinator: c.node.Address(), Algorithm: spec.GetAlgorithm(),
		Rank: spec.GetRank(), Shards: spec.GetShards(), Iteration: c.ft.lastIter, MaxIter: spec.GetStop().GetMaxIter(),
		Objective: c.objective, Detached: spec.GetDetached(), State: state}
	if !c.started.IsZero() {
		info.Seconds = time.Since(c.started).Seconds()
	}
	if c.initial > 0 {
		info.Ratio = c.objective / c.initial
	}
	if h := c.history; len(h) > 1 {
		info.RelErr2 = h[len(h)-1].RelErr2
		from := h[max(len(h)-11, 0)]
		if last := h[len(h)-1]; last.Seconds > from.Seconds {
			info.Rate = float64(last.Iteration-from.Iteration) / (last.Seconds - from.Seconds)
		}
	}
	c.node.board.set(info)
}

// watchMembers subscribes the coordinator to the membership events its node publishes on its
// event stream (see server), so that a job whose node leaves or dies fails at once instead of
// waiting for messages that will never come.
func (c *coordinator) watchMembers(ctx actor.Context) {
	system, self := ctx.ActorSystem(), ctx.Self()
	c.watch = system.EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(cluster.Event); ok {
			system.Root.Send(self, e)
		}
	})
}

// onMemberEvent recovers the job when a node holding its actors or checkpoint copies left the
// cluster or died, finds a new standby when the standby did, and retries a recovery that
// waited for a quorum when a node joins.
func (c *coordinator) onMemberEvent(ctx actor.Context, e cluster.Event) {
	if c.over || c.ft.shardNode == nil {
		return
	}
	addr := e.Member.Meta.Actor
	if e.Kind != cluster.EventLeave {
		// A node (back) in the cluster while the job waits for a quorum or is being
		// recovered: recover again with it, since messages to it may have been lost.
		if e.Kind == cluster.EventJoin && e.Member.Meta.Role == cluster.RoleMember && (c.ft.paused || (!c.running && c.ft.recovering != nil)) {
			delete(c.ft.lost, addr)
			c.recover(ctx, cmp.Or(c.ft.pauseCause, c.ft.recovering.GetCause()), nil)
		}
		return
	}
	if !c.ft.involved[addr] || c.ft.lost[addr] {
		return
	}
	how := "left the cluster"
	if e.Dead {
		how = "died (declared dead by the gossip)"
	}
	if addr == c.ft.standby && !c.holdsActors(addr) && !slices.Contains(c.ft.buddy, addr) {
		c.ft.lost[addr] = true
		c.pickStandby(ctx)
		return
	}
	c.recover(ctx, fmt.Sprintf("node %s (%s) %s", e.Member.Name, addr, how), []string{addr})
}

// holdsActors tells whether a node holds shards or reducers of the job.
func (c *coordinator) holdsActors(addr string) bool {
	for _, a := range c.ft.shardNode {
		if a == addr {
			return true
		}
	}
	return false
}

// start validates the job, checks the nodes and places the job's actors.
func (c *coordinator) start(ctx actor.Context) {
	spec := c.sub.Spec
	var err error
	if c.spec, err = parseSpec(spec); err != nil {
		c.fail(ctx, KindInput, err.Error())
		return
	}
	name, err := c.shape(spec)
	if err != nil {
		c.fail(ctx, KindInput, err.Error())
		return
	}
	if err := kernels.CheckRank(int(spec.Rank), c.m, c.n); err != nil {
		c.fail(ctx, KindInput, fmt.Sprintf("%v for %s (%d samples x %d features)", err, name, c.n, c.m))
		return
	}
	if spec.Shards > int64(c.n) {
		c.fail(ctx, KindInput, fmt.Sprintf("shards %d is more than the %d samples of %s", spec.Shards, c.n, name))
		return
	}
	if c.spec.init == kernels.InitCustom {
		if err := checkCustomInit(c.node.cfg.Roots, spec, c.m, c.n); err != nil {
			c.fail(ctx, KindInput, err.Error())
			return
		}
	}
	if spec.OutShared != "" {
		if err := c.prepareSharedCoef(); err != nil {
			c.fail(ctx, KindInput, err.Error())
			return
		}
	}
	var shardNode func(int64) string
	reserve := c.shardNeeds()
	switch {
	case len(spec.Nodes) > 0 || c.node.cfg.Members == nil:
		nodes := spec.Nodes
		if err := c.checkNodes(nodes); err != nil {
			c.fail(ctx, KindInput, err.Error())
			return
		}
		if len(nodes) == 0 {
			nodes = []string{ctx.Self().Address}
		}
		pongs, err := c.ping(ctx, nodes)
		if err != nil {
			c.fail(ctx, KindFailure, err.Error())
			return
		}
		shardNode = func(s int64) string { return nodes[s%int64(len(nodes))] }
		if err := checkFit(nodes, pongs, shardNode, reserve); err != nil {
			c.fail(ctx, KindInput, err.Error())
			return
		}
		c.ft.ring = uniqueStrings(nodes)
	default:
		if shardNode, err = c.placeOnMembers(ctx, reserve); err != nil {
			return // failed
		}
	}
	c.ft.quorumOf = len(c.ft.ring)
	c.ft.startSet = slices.Clone(c.ft.ring)
	p := spec.Shards
	c.ft.shardNode = make([]string, p)
	for s := range c.ft.shardNode {
		c.ft.shardNode[s] = shardNode(int64(s))
	}
	c.ft.reserve = reserve
	c.assignBuddies(ctx)
	c.publish("placing", true)
	ctx.Send(c.client, &messages.JobAccepted{JobId: c.job, Coordinator: wirePid(ctx.Self()), Samples: int64(c.n), Features: int64(c.m)})
	c.place(ctx, 0, nil)
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
func (c *coordinator) nextInRing(addr string) string {
	ring := c.ft.ring
	if len(ring) < 2 {
		return ""
	}
	i := slices.Index(ring, addr)
	if i < 0 {
		return ring[0]
	}
	return ring[(i+1)%len(ring)]
}

// assignBuddies gives every shard a buddy, the next node in the ring after its own, and
// chooses the standby.
func (c *coordinator) assignBuddies(ctx actor.Context) {
	c.ft.buddy = make([]string, len(c.ft.shardNode))
	if len(c.ft.holders) != len(c.ft.shardNode) {
		c.ft.holders = make([][]string, len(c.ft.shardNode))
	}
	for s, addr := range c.ft.shardNode {
		c.ft.buddy[s] = c.nextInRing(addr)
		for _, h := range []string{addr, c.ft.buddy[s]} {
			if h != "" && !slices.Contains(c.ft.holders[s], h) {
				c.ft.holders[s] = append(c.ft.holders[s], h)
			}
			if h != "" {
				c.ft.involved[h] = true
			}
		}
	}
	// Each buddy's host learns whose copies to keep: it stores no others.
	of := map[string][]int64{}
	var order []string
	for s, b := range c.ft.buddy {
		if b == "" {
			continue
		}
		if of[b] == nil {
			order = append(order, b)
		}
		of[b] = append(of[b], int64(s))
	}
	for _, b := range order {
		ctx.Send(HostPID(b), &messages.Buddies{JobId: c.job, Epoch: c.epoch, Shards: of[b], CheckpointEvery: c.sub.Spec.CheckpointEvery,
			Coordinator: wirePid(ctx.Self())})
	}
	c.chooseStandby(ctx)
}

// chooseStandby makes the next node in the ring after the coordinator's the standby (none
// outside a cluster, or alone).
func (c *coordinator) chooseStandby(ctx actor.Context) {
	c.ft.standby = ""
	if sb := c.nextInRing(ctx.Self().Address); sb != "" && sb != ctx.Self().Address && c.node.cfg.Members != nil {
		c.ft.standby = sb
		c.ft.involved[sb] = true
	}
}

// pickStandby chooses a new standby after the last one was lost (shards keep their buddies
// until a recovery) and sends it the job's state.
func (c *coordinator) pickStandby(ctx actor.Context) {
	c.ft.ring = c.aliveRing()
	c.chooseStandby(ctx)
	c.sendState(ctx)
}

// aliveRing is the ring without the nodes lost: the cluster's live workers when there is a
// cluster, else the job's nodes that were not lost.
func (c *coordinator) aliveRing() []string {
	var ring []string
	if c.node.cfg.Members != nil {
		for _, w := range c.node.cfg.Members.Workers() {
			if !c.ft.lost[w.Meta.Actor] {
				ring = append(ring, w.Meta.Actor)
			}
		}
		return ring
	}
	for _, a := range c.ft.ring {
		if !c.ft.lost[a] {
			ring = append(ring, a)
		}
	}
	return ring
}

// sendState sends the job's state to the standby, which takes the job over if this
// coordinator's node dies.
func (c *coordinator) sendState(ctx actor.Context) {
	if c.ft.standby == "" || c.over {
		return
	}
	st := &messages.JobState{Submit: c.sub, Epoch: c.epoch, ShardNodes: c.ft.shardNode, Buddies: c.ft.buddy,
		Committed: c.ft.committed, QuorumOf: int64(c.ft.quorumOf), Coordinator: wirePid(ctx.Self()),
		Samples: int64(c.n), Features: int64(c.m), Density: c.density, Initial: c.initial,
		StartedUnixNano: c.started.UnixNano(), StartNodes: c.ft.startSet,
		RecoveriesDone: c.ft.recoveries, Checkpoints: c.ft.checkpoints, LastIteration: c.ft.lastIter}
	if last := c.lastCommitted(); last > 0 {
		for _, h := range c.history {
			if h.Iteration <= last {
				st.History = append(st.History, h)
			}
		}
	}
	ctx.Send(HostPID(c.ft.standby), st)
}

// lastCommitted is the newest committed checkpoint iteration (0: none).
func (c *coordinator) lastCommitted() int64 {
	if len(c.ft.committed) == 0 {
		return 0
	}
	return c.ft.committed[len(c.ft.committed)-1]
}

// shape reads the job's shape: from the inputs when the nodes read them, from the spec when
// the client streams them.
func (c *coordinator) shape(spec *messages.JobSpec) (string, error) {
	if spec.Ingest == IngestStream {
		if spec.Samples <= 0 || spec.Features <= 0 {
			return "", fmt.Errorf("streamed job without a shape (samples %d, features %d)", spec.Samples, spec.Features)
		}
		c.m, c.n = int(spec.Features), int(spec.Samples)
		c.density = float64(spec.StoredEntries) / (float64(c.m) * float64(c.n))
		return strings.Join(spec.Inputs, " + ") + " (streamed by the client)", nil
	}
	src, err := matio.OpenAllWith(c.node.cfg.Roots.Opener("--input"), spec.Inputs)
	if err != nil {
		return "", err
	}
	defer src.Close()
	c.m, c.n = src.Features(), src.Samples()
	if stored, ok := matio.StoredEntries(src); ok {
		c.density = float64(stored) / (float64(c.m) * float64(c.n))
	}
	return src.Name(), nil
}

// freeMemory returns the bytes of job data each answering member (nil pongs are skipped) can
// still take: its offer less its reservations, or, for the members of one machine, which
// share its memory, the largest of their offers less all their reservations. A member
// without a limit (Memory 0) can take any amount, and so can its machine.
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

// placeOnMembers places the job's shards on the cluster's live workers that answer a ping, by
// capacity-weighted rendezvous hashing within the memory each has free. It fails the job when
// the cluster cannot hold it.
func (c *coordinator) placeOnMembers(ctx actor.Context, need []int64) (func(int64) string, error) {
	workers := c.node.cfg.Members.Workers()
	addrs := make([]string, len(workers))
	for i, w := range workers {
		addrs[i] = w.Meta.Actor
	}
	pongs, _ := c.ping(ctx, addrs)
	var cands []cluster.Candidate
	var live []string
	slots := int64(0) // shards the answering members take
	free := freeMemory(pongs)
	for i, p := range pongs {
		if p == nil {
			c.node.logger.Warn("member does not answer; not placing on it", slog.String("job", c.job), slog.String("member", workers[i].Name), slog.String("actor", addrs[i]))
			continue
		}
		cands = append(cands, cluster.Candidate{Name: workers[i].Name, Capacity: int(max(p.Capacity, 1)), Memory: free[i], Machine: p.Machine})
		live = append(live, addrs[i])
		if slots >= 0 && p.MaxShards > 0 {
			slots += max(p.MaxShards-p.Shards, 0)
		} else {
			slots = -1 // a member without a cap
		}
	}
	if len(cands) == 0 {
		err := fmt.Errorf("no member of the cluster answers (%d known)", len(workers))
		c.fail(ctx, KindFailure, err.Error())
		return nil, err
	}
	if p := int64(len(need)); slots >= 0 && p > slots {
		err := fmt.Errorf("%d shards: the cluster's %d members take %d more shards (serve --max-shards); use fewer shards", p, len(cands), slots)
		c.fail(ctx, KindInput, err.Error())
		return nil, err
	}
	at, err := cluster.Place(c.job, need, cands)
	if err != nil {
		c.fail(ctx, KindInput, err.Error())
		return nil, err
	}
	c.ft.ring = live
	return func(s int64) string { return live[at[s]] }, nil
}

// checkNodes checks that the nodes a spec names are members of the cluster (on a cluster):
// a coordinator dials only its peers.
func (c *coordinator) checkNodes(nodes []string) error {
	members := c.node.cfg.Members
	if members == nil {
		return nil
	}
	workers := members.Workers()
	for _, a := range nodes {
		if !slices.ContainsFunc(workers, func(w cluster.Member) bool { return w.Meta.Actor == a }) {
			return fmt.Errorf("nodes: %s is not a member of the cluster", a)
		}
	}
	return nil
}

// shardNeeds estimates every shard's memory (see shardFootprint).
func (c *coordinator) shardNeeds() []int64 {
	p := int(c.sub.Spec.Shards)
	cols := kernels.ColumnRanges(c.n, p)
	need := make([]int64, p)
	for s := range need {
		need[s] = shardFootprint(int64(c.m), int64(cols[s+1]-cols[s]), c.sub.Spec.Rank, c.density, c.spec.layout)
	}
	return need
}

// checkFit checks that the shards placed on given nodes fit the memory and shard count the
// nodes have free, as their pongs tell.
func checkFit(nodes []string, pongs []*messages.Pong, shardNode func(int64) string, need []int64) error {
	mem := map[string]int64{}
	count := map[string]int64{}
	for s := range need {
		a := shardNode(int64(s))
		mem[a] += need[s]
		count[a]++
	}
	for i, a := range nodes {
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

// shardFootprint estimates the bytes a shard of m features, cols samples and rank k holds: its
// block of X (dense, or CSC when the input's density is known and the layout makes it sparse),
// C and its work copies, and the replicas of B and the products the algorithms keep.
func shardFootprint(m, cols, k int64, density float64, layout matio.Layout) int64 {
	x := 8 * m * cols
	sparse := layout == matio.LayoutSparse || (layout != matio.LayoutDense && density < layout.Crossing())
	if density > 0 && density < 1 && sparse {
		x = int64(12*density*float64(m*cols)) + 8*(cols+1)
	}
	return shardOverhead + x + 8*4*cols*k + 8*8*m*k + 8*4*k*k
}

// checkCustomInit checks the shapes of a custom initialisation before anything is placed.
func checkCustomInit(roots *fsroot.Roots, spec *messages.JobSpec, m, n int) error {
	k := int(spec.Rank)
	for _, f := range []struct {
		path, what string
		rows       int
	}{{spec.InitBasis, "init basis", m}, {spec.InitCoef, "init coef", n}} {
		src, err := matio.OpenWith(roots.Opener("--"+strings.ReplaceAll(f.what, " ", "-")), f.path)
		if err != nil {
			return fmt.Errorf("%s: %v", f.what, err)
		}
		r, cols := src.Samples(), src.Features()
		src.Close()
		if r != f.rows || cols != k {
			return fmt.Errorf("%s %s: shape (%d, %d), want (%d, %d)", f.what, f.path, r, cols, f.rows, k)
		}
	}
	return nil
}

// ping asks every node's host for a sign of life and its load, all at once. It returns the
// answers (nil for a node that did not answer) and an error naming the first node that did not.
func (c *coordinator) ping(ctx actor.Context, nodes []string) ([]*messages.Pong, error) {
	futures := make([]actor.Future, len(nodes))
	for i, addr := range nodes {
		futures[i] = ctx.RequestFuture(HostPID(addr), &messages.Ping{Nonce: uint64(i)}, c.node.cfg.Timeouts.Ping)
	}
	pongs := make([]*messages.Pong, len(nodes))
	var first error
	for i, f := range futures {
		res, err := f.Result()
		pong, ok := res.(*messages.Pong)
		switch {
		case err != nil:
			err = fmt.Errorf("node %s is unreachable: %v", nodes[i], err)
		case !ok:
			err = fmt.Errorf("node %s answered a ping with %T", nodes[i], res)
		case pong.Address != nodes[i] || pong.Nonce != uint64(i):
			err = fmt.Errorf("node %s: the answer to its ping came from %s", nodes[i], pong.Address)
		}
		if err != nil {
			first = cmp.Or(first, err)
			continue
		}
		pongs[i] = pong
	}
	return pongs, first
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
		level[s] = member{lo: s, hi: s + 1, pid: jobActor(shardNode(s), shardName(job, s))}
	}
	shardParent := make([]*messages.Pid, p)
	var all []*treeNode
	for l := int64(1); ; l++ {
		var next []member
		for i := 0; i < len(level); i += int(fanIn) {
			group := level[i:min(i+int(fanIn), len(level))]
			t := &treeNode{level: l, lo: group[0].lo, hi: group[len(group)-1].hi}
			t.node = majorityNode(t.lo, t.hi, shardNode)
			t.pid = jobActor(t.node, reducerName(job, epoch, l, t.lo))
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
func (c *coordinator) place(ctx actor.Context, resume int64, at [][]string) {
	spec := c.sub.Spec
	p := spec.Shards
	c.meter.init = true // placement counts with initialisation, not with the iterations
	shardNode := func(s int64) string { return c.ft.shardNode[s] }
	tree, shardParent := buildTree(c.job, c.epoch, p, int64(c.spec.fanIn), shardNode)
	c.hosts, c.shards, c.reducers, c.shardOf = nil, nil, nil, make(map[string]int, p)
	seen := map[string]bool{}
	for s := int64(0); s < p; s++ {
		if addr := shardNode(s); !seen[addr] {
			seen[addr] = true
			c.hosts = append(c.hosts, HostPID(addr))
		}
	}
	self := wirePid(ctx.Self())
	for _, t := range tree {
		c.reducers = append(c.reducers, pidOf(t.pid))
		c.meter.send(ctx, HostPID(t.node), &messages.ReducerAssignment{JobId: c.job, Epoch: c.epoch, Level: t.level, Lo: t.lo, Hi: t.hi,
			Children: t.children, ChildRanges: t.ranges, Parent: t.parent, Coordinator: self, Shards: p})
	}
	cols := kernels.ColumnRanges(c.n, int(p))
	for s := int64(0); s < p; s++ {
		pid := jobActor(shardNode(s), shardName(c.job, s))
		c.shardOf[pid.Id] = len(c.shards)
		c.shards = append(c.shards, pidOf(pid))
		a := &messages.ShardAssignment{JobId: c.job, Epoch: c.epoch, Shard: s, Shards: p,
			ColLo: int64(cols[s]), ColHi: int64(cols[s+1]), TotalCols: int64(c.n), Spec: spec,
			Coordinator: self, Reducer: shardParent[s], Client: c.sub.Client, Buddy: c.ft.buddy[s], ResumeFrom: resume,
			OwnerToken: c.sub.OwnerToken, Owner: c.sub.Owner}
		if c.ft.reserve != nil {
			a.Reserve = c.ft.reserve[s]
		}
		if at != nil {
			a.CheckpointAt = at[s]
		}
		c.meter.send(ctx, HostPID(shardNode(s)), a)
	}
}

func (c *coordinator) onPlaced(ctx actor.Context, m *messages.Placed) {
	if m.JobId == c.job && !c.over && m.Superseded > c.epoch {
		// Another coordinator took the job over (this one was cut off, or thought to be dead):
		// leave the job to it, without a word to the client.
		c.node.logger.Warn("superseded by a coordinator that took the job over", slog.String("job", c.job),
			slog.Uint64("epoch", c.epoch), slog.Uint64("theirs", m.Superseded))
		c.end(ctx)
		return
	}
	if m.JobId != c.job || c.over || c.running || m.Epoch != c.epoch {
		return
	}
	if m.CheckpointError != "" {
		// No valid copy of that checkpoint is left: fall back to the one before (or the start).
		bad := c.lastCommitted()
		c.ft.committed = c.ft.committed[:max(len(c.ft.committed)-1, 0)]
		c.node.logger.Warn("checkpoint unusable, falling back to an older one", slog.String("job", c.job), slog.Int64("iteration", bad), slog.String("error", m.CheckpointError))
		c.recover(ctx, fmt.Sprintf("checkpoint at iteration %d unusable (%s)", bad, m.CheckpointError), nil)
		return
	}
	if m.Error != "" {
		c.fail(ctx, KindInput, m.Error)
		return
	}
	// A shard that read a different number of features than the coordinator saw (the file
	// changed in between, or nodes see different files under one path) would compute garbage.
	if m.Samples > 0 && m.Features != int64(c.m) {
		c.fail(ctx, KindInput, fmt.Sprintf("%s read %d features, the coordinator saw %d: do all nodes see the same input?", m.Actor, m.Features, c.m))
		return
	}
	c.placed++
	if len(c.sqNorms) != len(c.shards) {
		c.sqNorms = make([]float64, len(c.shards))
	}
	if i, ok := c.shardOf[m.Pid.GetId()]; ok && c.shards[i].Address == m.Pid.GetAddress() {
		c.sqNorms[i] = m.SqNormX
	}
	if c.placed < len(c.shards)+len(c.reducers) {
		return
	}
	c.sqNormX = 0
	for _, v := range c.sqNorms { // in shard order, as the driver sums: the same bits
		c.sqNormX += v
	}
	if c.sqNormX == 0 {
		c.fail(ctx, KindInput, kernels.ErrZeroMatrix.Error())
		return
	}
	c.running = true
	resume := c.lastCommitted()
	if c.ft.recovering == nil {
		c.started = time.Now()
		resume = 0
	}
	c.ft.epochAt = time.Since(c.started).Seconds()
	c.ft.lastIter = resume
	c.granted = noGrant
	if c.spec.stop.TimeLimit > 0 {
		c.granted = resume + grantWindow
	}
	for _, s := range c.shards {
		c.meter.send(ctx, s, &messages.StartJob{JobId: c.job, Epoch: c.epoch, Granted: c.granted})
	}
	c.meter.init = false
	c.sendState(ctx)
}

// warn sends the client news it should see although the job goes on.
func (c *coordinator) warn(ctx actor.Context, msg string) {
	if c.client != nil {
		ctx.Send(c.client, &messages.Progress{JobId: c.job, Iteration: c.ft.lastIter, Warning: msg})
	}
}

func (c *coordinator) onIteration(ctx actor.Context, m *messages.IterationDone) {
	if m.JobId != c.job || m.Epoch != c.epoch || !c.running || c.over {
		return
	}
	defer c.publish("running", false)
	if m.Iteration != c.ft.lastIter+1 {
		c.counters.Stale++ // not the next iteration of this epoch: never counted twice
		return
	}
	c.ft.lastIter = m.Iteration
	seconds := c.ft.epochAt + m.Seconds
	if c.ft.recovering != nil {
		c.ft.recovering.Resumed = time.Since(c.started).Seconds()
		c.ft.recoveries = append(c.ft.recoveries, c.ft.recovering)
		c.node.logger.Info("job resumed", slog.String("job", c.job), slog.Uint64("epoch", c.epoch),
			slog.Float64("recovery seconds", c.ft.recovering.Resumed-c.ft.recovering.Noticed))
		c.ft.recovering = nil
	}
	if len(c.history) == 0 {
		re, rmse := kernels.Errors(m.Initial, c.sqNormX, c.m, c.n)
		c.history = append(c.history, &messages.HistoryPoint{Iteration: 0, Seconds: m.InitSeconds, Ratio: 1, RelErr2: re, Rmse: rmse})
		c.lastSec = m.InitSeconds
	}
	ratio := kernels.Ratio(m.Objective, m.Initial)
	re, rmse := kernels.Errors(m.Objective, c.sqNormX, c.m, c.n)
	c.history = append(c.history, &messages.HistoryPoint{Iteration: m.Iteration, Seconds: seconds, Ratio: ratio, RelErr2: re, Rmse: rmse})
	c.iterSec = append(c.iterSec, seconds-c.lastSec)
	c.lastSec = seconds
	c.initial, c.objective = m.Initial, m.Objective
	c.meter.send(ctx, c.client, &messages.Progress{JobId: c.job, Iteration: m.Iteration, Seconds: seconds, Ratio: ratio, Objective: m.Objective,
		RelErr2: re, Rmse: rmse, InitSeconds: c.history[0].Seconds})
	if m.Stop == "" {
		c.autoCheckpoint(ctx, m.Iteration, seconds)
	}
	if m.Stop != "" || c.timeUp || c.spec.stop.TimeLimit == 0 {
		return
	}
	if time.Since(c.started) >= c.spec.stop.TimeLimit {
		c.timeUp = true
		for _, s := range c.shards {
			c.meter.send(ctx, s, &messages.Finish{JobId: c.job, Epoch: c.epoch, At: c.granted})
		}
		return
	}
	if m.Iteration >= c.granted-grantWindow/2 {
		c.granted = m.Iteration + grantWindow
		for _, s := range c.shards {
			c.meter.send(ctx, s, &messages.Grant{JobId: c.job, Epoch: c.epoch, Granted: c.granted})
		}
	}
}

// onCheckpointDone counts a shard's checkpoint; an iteration is committed when every shard
// has written its checkpoint there and had it acknowledged by its buddy.
func (c *coordinator) onCheckpointDone(ctx actor.Context, m *messages.CheckpointDone) {
	if m.JobId != c.job || m.Epoch != c.epoch || c.over {
		return
	}
	if m.Error != "" {
		delete(c.ft.reported, m.Iteration)
		c.node.logger.Warn("checkpoint failed, not committed", slog.String("job", c.job), slog.String("error", m.Error))
		c.warn(ctx, "checkpoint not committed: "+m.Error)
		return
	}
	if m.Iteration <= c.lastCommitted() {
		return
	}
	got := c.ft.reported[m.Iteration]
	if got == nil {
		got = map[int64]bool{}
		c.ft.reported[m.Iteration] = got
	}
	if got[m.Shard] {
		return
	}
	got[m.Shard] = true
	c.ft.ckptSeconds += m.Seconds
	c.ft.ckptCost = max(c.ft.ckptCost, m.Seconds)
	if len(got) < len(c.shards) {
		return
	}
	c.ft.committed = append(c.ft.committed, m.Iteration)
	if len(c.ft.committed) > keepCheckpoints {
		c.ft.committed = c.ft.committed[1:]
	}
	c.ft.checkpoints++
	c.ft.lastCkptCost, c.ft.ckptCost = c.ft.ckptCost, 0
	c.ft.lastCkptTime = time.Since(c.started).Seconds()
	commit := &messages.CheckpointCommitted{JobId: c.job, Iteration: m.Iteration, KeepFrom: c.ft.committed[0], Shards: int64(len(c.shards))}
	for addr := range c.ft.involved {
		if !c.ft.lost[addr] {
			ctx.Send(HostPID(addr), commit)
		}
	}
	for t := range c.ft.reported {
		if t <= m.Iteration {
			delete(c.ft.reported, t)
		}
	}
	c.sendState(ctx)
}

// recover rolls the job back to its last committed checkpoint in a new epoch: shards on lost
// nodes are placed anew (on their buddy, which holds a copy of their checkpoint, when it is
// alive), a new reduce tree is built over the same shard ids and every shard resumes from the
// checkpoint. Without a majority of the nodes known at the start, it waits.
func (c *coordinator) recover(ctx actor.Context, cause string, lost []string) {
	if c.over {
		return
	}
	for _, a := range lost {
		c.ft.lost[a] = true
	}
	c.publish("recovering", true)
	alive := c.aliveRing()
	up := 0
	for _, a := range c.ft.startSet {
		if slices.Contains(alive, a) {
			up++
		}
	}
	if 2*up <= c.ft.quorumOf {
		c.publish("paused", true)
		if !c.ft.paused {
			pause := fmt.Sprintf("%s; paused: only %d of the job's %d nodes reachable, not a majority", cause, up, c.ft.quorumOf)
			if c.ft.recovering == nil {
				c.ft.recovering = &messages.Recovery{Cause: pause, Noticed: time.Since(c.started).Seconds(), FromIteration: c.lastCommitted(),
					Redone: max(c.ft.lastIter-c.lastCommitted(), 0)}
			} else {
				c.ft.recovering.Cause += "; " + pause
			}
			c.node.logger.Warn("no quorum: the job waits", slog.String("job", c.job), slog.Int("alive", up), slog.Int("of", c.ft.quorumOf))
			c.warn(ctx, fmt.Sprintf("%s; only %d of the job's %d nodes are reachable, not a majority: the job waits up to %v for them", cause, up, c.ft.quorumOf, c.node.cfg.Timeouts.Quorum))
			c.running = false
			// Pause the shards still running: they stop at their next iteration boundary.
			for _, s := range c.shards {
				ctx.Send(s, &messages.Finish{JobId: c.job, Epoch: c.epoch, At: -1})
			}
			c.epoch++ // fences them: nothing of theirs is taken any more
			system, self, epoch := ctx.ActorSystem(), ctx.Self(), c.epoch
			time.AfterFunc(c.node.cfg.Timeouts.Quorum, func() { system.Root.Send(self, &quorumTimeout{epoch: epoch}) })
		}
		c.ft.paused, c.ft.pauseCause = true, cause
		return
	}
	c.ft.paused = false
	if len(c.ft.recoveries)+1 > maxRecoveries {
		c.fail(ctx, KindFailure, fmt.Sprintf("%s; the job recovered %d times already, giving up", cause, maxRecoveries))
		return
	}
	resume := c.lastCommitted()
	now := time.Since(c.started).Seconds()
	if c.ft.recovering == nil {
		c.ft.recovering = &messages.Recovery{Cause: cause, Noticed: now, FromIteration: resume, Redone: max(c.ft.lastIter-resume, 0)}
	} else {
		c.ft.recovering.Cause += "; " + cause
		c.ft.recovering.FromIteration = resume
	}
	c.epoch++
	c.ft.recovering.Epoch = c.epoch
	c.node.logger.Warn("recovering the job", slog.String("job", c.job), slog.String("cause", cause),
		slog.Uint64("epoch", c.epoch), slog.Int64("from iteration", resume), slog.Int64("redone", c.ft.recovering.Redone))
	c.warn(ctx, fmt.Sprintf("%s: rolling back to iteration %d (epoch %s)", cause, resume, epochString(c.epoch)))
	if len(alive) == 0 {
		c.fail(ctx, KindFailure, cause+"; no node is left to run the job")
		return
	}
	at := make([][]string, len(c.ft.shardNode))
	for s, addr := range c.ft.shardNode {
		holders := []string{addr, c.ft.buddy[s]}
		if s < len(c.ft.holders) {
			holders = append(holders, c.ft.holders[s]...)
		}
		for _, a := range holders {
			if a != "" && !c.ft.lost[a] && !slices.Contains(at[s], a) {
				at[s] = append(at[s], a)
			}
		}
	}
	if err := c.replaceLost(ctx, alive, at); err != nil {
		c.fail(ctx, KindFailure, fmt.Sprintf("%s; the shards of the lost nodes fit on no live node: %v", cause, err))
		return
	}
	c.ft.ring = alive
	c.assignBuddies(ctx)
	// Forget the epoch that ended: its history after the checkpoint is done again.
	keep := 0
	for keep < len(c.history) && c.history[keep].Iteration <= resume {
		keep++
	}
	if keep > 0 {
		c.history = c.history[:keep]
		c.lastSec = c.history[keep-1].Seconds
	}
	c.iterSec = c.iterSec[:min(int(resume), len(c.iterSec))]
	c.ft.reported = map[int64]map[int64]bool{}
	c.ft.askedAt, c.ft.ckptCost = 0, 0
	c.running, c.placed, c.sqNormX, c.sqNorms, c.done, c.reducerDone = false, 0, 0, nil, map[int64]*messages.ShardDone{}, 0
	c.timeUp = false
	c.place(ctx, resume, at)
}

// replaceLost gives the shards of lost nodes new nodes among the live ones, as the job was
// placed (cluster.PlaceRest): within the load bounds and the memory the nodes have free,
// trying first the nodes at[s] that hold a copy of shard s's checkpoint. The other shards
// stay where they are. A live node that does not answer its ping keeps its shards and is
// taken at its word (capacity 1, memory unknown).
func (c *coordinator) replaceLost(ctx actor.Context, alive []string, at [][]string) error {
	lost := false
	for _, addr := range c.ft.shardNode {
		lost = lost || c.ft.lost[addr]
	}
	if !lost {
		return nil
	}
	pongs, _ := c.ping(ctx, alive)
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
	n := len(c.ft.shardNode)
	keep, prefer, need := make([]int, n), make([][]int, n), make([]int64, n)
	for s, addr := range c.ft.shardNode {
		keep[s] = -1
		if i, ok := index[addr]; ok && !c.ft.lost[addr] {
			keep[s] = i
			continue
		}
		if s < len(c.ft.reserve) {
			need[s] = c.ft.reserve[s]
		}
		for _, h := range at[s] {
			if i, ok := index[h]; ok {
				prefer[s] = append(prefer[s], i)
			}
		}
	}
	out, err := cluster.PlaceRest(c.job, need, keep, prefer, cands)
	if err != nil {
		return err
	}
	for s, i := range out {
		c.ft.shardNode[s] = alive[i]
	}
	return nil
}

func (c *coordinator) onShardDone(ctx actor.Context, m *messages.ShardDone) {
	if m.JobId != c.job || m.Epoch != c.epoch || c.over {
		return
	}
	if m.Error != "" {
		c.fail(ctx, KindFailure, m.Error)
		return
	}
	if _, dup := c.done[m.Shard]; dup || m.Shard < 0 || m.Shard >= int64(len(c.shards)) {
		return
	}
	if len(c.done) > 0 {
		for _, d := range c.done {
			if d.Iteration != m.Iteration || d.Stop != m.Stop {
				c.fail(ctx, KindFailure, fmt.Sprintf("shard %d ended at iteration %d (%s), shard %d at %d (%s)", m.Shard, m.Iteration, m.Stop, d.Shard, d.Iteration, d.Stop))
				return
			}
			break
		}
	}
	c.done[m.Shard] = m
	addCounters(&c.counters, m.Counters)
	if len(c.done) < len(c.shards) {
		return
	}
	for _, r := range c.reducers {
		ctx.Send(r, &messages.StopJob{JobId: c.job})
	}
}

func (c *coordinator) onReducerDone(ctx actor.Context, m *messages.ReducerDone) {
	if m.JobId != c.job || c.over || len(c.done) < len(c.shards) {
		return
	}
	addCounters(&c.counters, m.Counters)
	c.reducerDone++
	if c.reducerDone < len(c.reducers) {
		return
	}
	addCounters(&c.counters, &c.meter.c)
	if dir := c.sub.Spec.OutShared; dir != "" {
		if err := c.commitSharedCoef(dir); err != nil {
			c.fail(ctx, KindFailure, err.Error())
			return
		}
	}
	res := &messages.JobResult{JobId: c.job, M: int64(c.m), N: int64(c.n), K: c.sub.Spec.Rank, Shards: int64(len(c.shards)),
		Initial: c.initial, Objective: c.objective, Seconds: time.Since(c.started).Seconds(), IterSeconds: c.iterSec,
		History: c.history, Counters: proto.Clone(&c.counters).(*messages.Counters),
		InitCollectives: c.counters.InitReductions, Collectives: c.counters.Reductions,
		Recoveries: c.ft.recoveries, Checkpoints: c.ft.checkpoints, CheckpointSeconds: c.ft.ckptSeconds}
	for _, s := range c.shards {
		res.ShardNodes = append(res.ShardNodes, s.Address)
	}
	for s := int64(0); s < int64(len(c.shards)); s++ {
		d := c.done[s]
		res.Iterations, res.Stop = d.Iteration, d.Stop
		res.Residual += d.Residual
		res.SqNormX += d.SqNormX
	}
	if c.sub.Spec.Detached {
		if err := c.commitDetached(c.sub.Spec.OutShared, res); err != nil {
			c.fail(ctx, KindFailure, err.Error())
			return
		}
	}
	c.ownsPartial = false
	ctx.Send(c.client, res)
	c.end(ctx)
}

// fail ends the job with an error that reaches the client, and stops all its actors.
func (c *coordinator) fail(ctx actor.Context, kind messages.ErrorKind, msg string) {
	if c.over {
		return
	}
	c.node.logger.Warn("job ended with an error", slog.String("job", c.job), slog.String("kind", kind.String()), slog.String("error", msg))
	if dir := c.sub.Spec.GetOutShared(); dir != "" && c.ownsPartial {
		_ = c.node.cfg.Roots.Remove("--out-shared", sharedCoefPartial(dir, c.job))
		_ = c.node.cfg.Roots.Remove("--out-shared", sharedBasisPartial(dir, c.job))
	}
	if c.client != nil {
		ctx.Send(c.client, &messages.JobError{JobId: c.job, Kind: kind, Message: msg})
	}
	c.end(ctx)
}

// end stops every actor of the job, this coordinator last, and has every node that holds
// anything of it (checkpoints, standby state) forget it.
func (c *coordinator) end(ctx actor.Context) {
	c.over = true
	c.node.board.remove(c.job)
	sent := map[string]bool{}
	for _, h := range c.hosts {
		sent[h.Address] = true
		ctx.Send(h, &messages.StopJob{JobId: c.job, Epoch: c.epoch, Coordinator: wirePid(ctx.Self())})
	}
	for addr := range c.ft.involved {
		if !sent[addr] {
			sent[addr] = true
			ctx.Send(HostPID(addr), &messages.StopJob{JobId: c.job, Epoch: c.epoch, Coordinator: wirePid(ctx.Self())})
		}
	}
	// A node restarted mid-job (a new actor address under an old name) may still keep
	// checkpoints of the job from its former life: every live member forgets the job.
	if c.node.cfg.Members != nil {
		for _, w := range c.node.cfg.Members.Workers() {
			if !sent[w.Meta.Actor] {
				ctx.Send(HostPID(w.Meta.Actor), &messages.StopJob{JobId: c.job, Epoch: c.epoch, Coordinator: wirePid(ctx.Self())})
			}
		}
	}
	ctx.Stop(ctx.Self())
}

// addCounters adds b into a.
func addCounters(a, b *messages.Counters) {
	if b == nil {
		return
	}
	a.Messages += b.Messages
	a.Bytes += b.Bytes
	a.InitMessages += b.InitMessages
	a.InitBytes += b.InitBytes
	a.Reductions += b.Reductions
	a.InitReductions += b.InitReductions
	a.Duplicates += b.Duplicates
	a.Stale += b.Stale
}

// sharedCoefPartial is the file the shards of a job with --out-shared write their rows of the
// coefficients into; the coordinator renames it to coef.npy when every shard has written.
func sharedCoefPartial(dir, job string) string {
	return filepath.Join(dir, ".coef.npy."+job+".partial")
}

// prepareSharedCoef checks the job's --out-shared directory (under the node's data roots,
// and without a coef.npy unless the job may overwrite it) and creates the file the shards
// fill in: the node never writes into a file it did not create for this job.
func (c *coordinator) prepareSharedCoef() error {
	spec, roots := c.sub.Spec, c.node.cfg.Roots
	st, err := roots.Stat("--out-shared", spec.OutShared)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("--out-shared %s: not a directory", spec.OutShared)
	}
	if err := roots.CheckNew("--out-shared", filepath.Join(spec.OutShared, "coef.npy"), spec.Overwrite); err != nil {
		return err
	}
	if spec.Detached {
		for _, name := range []string{"basis.npy", "report.json"} {
			if err := roots.CheckNew("--out-shared", filepath.Join(spec.OutShared, name), spec.Overwrite); err != nil {
				return err
			}
		}
	}
	c.ownsPartial = true
	if err := prepareNPY(roots, sharedCoefPartial(spec.OutShared, c.job), c.n, int(spec.Rank)); err != nil {
		return err
	}
	if spec.Detached {
		return prepareNPY(roots, sharedBasisPartial(spec.OutShared, c.job), c.m, int(spec.Rank))
	}
	return nil
}

// prepareNPY creates a rows x cols .npy file under the roots for shards to fill in.
func prepareNPY(roots *fsroot.Roots, path string, rows, cols int) error {
	f, err := roots.CreateExclusive("--out-shared", path, 0o644)
	if err != nil {
		return err
	}
	err = matio.PrepareNPYRows(f, rows, cols)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--out-shared: %v", err)
	}
	return nil
}

// sharedBasisPartial is the file shard 0 of a detached job writes the basis into.
func sharedBasisPartial(dir, job string) string {
	return filepath.Join(dir, ".basis.npy."+job+".partial")
}

// commitDetached puts a detached job's basis.npy in place and writes its report.json: the
// report a client writes (package report), with what the coordinator knows of how it ran.
func (c *coordinator) commitDetached(dir string, res *messages.JobResult) error {
	if err := c.commitNPY(sharedBasisPartial(dir, c.job), filepath.Join(dir, "basis.npy"), c.m); err != nil {
		return err
	}
	r := resultOf(c.job, res)
	spec := c.sub.Spec
	rep := report.New(&r.Result, c.spec.stop)
	rep.Algo, rep.Input, rep.Init, rep.Seed = spec.Algorithm, spec.Inputs, string(c.spec.init), spec.Seed
	rep.Kernel, rep.Storage, rep.Ingest = kernels.ActiveKernelPath().String(), cmp.Or(spec.Storage, "auto"), cmp.Or(spec.Ingest, IngestShared)
	rep.CoefShared, rep.ShardNodes = filepath.Join(dir, "coef.npy"), r.ShardNodes
	rep.CheckpointEvery, rep.Checkpoints, rep.Recoveries = checkpointEveryText(spec.CheckpointEvery), r.Checkpoints, r.Recoveries
	rep.MessagesPerIt, rep.BytesPerIt, rep.ReductionsPerIt = &r.MessagesPerIteration, &r.BytesPerIteration, &r.ReductionsPerIteration
	var buf bytes.Buffer
	if err := rep.Write(&buf); err != nil {
		return err
	}
	report := buf.Bytes()
	roots, tmp := c.node.cfg.Roots, filepath.Join(dir, ".report.json."+c.job+".partial")
	w, err := roots.CreateExclusive("--out-shared", tmp, 0o644)
	if err != nil {
		return err
	}
	_, err = w.Write(report)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = roots.Commit("--out-shared", tmp, filepath.Join(dir, "report.json"), c.sub.Spec.Overwrite)
	}
	if err != nil {
		_ = roots.Remove("--out-shared", tmp)
	}
	return err
}

// commitSharedCoef checks that the shards wrote the whole of the job's coef.npy and puts it
// in place (of an earlier one only if the job may overwrite it).
func (c *coordinator) commitSharedCoef(dir string) error {
	return c.commitNPY(sharedCoefPartial(dir, c.job), filepath.Join(dir, "coef.npy"), c.n)
}

// commitNPY checks that a partial .npy of rows x K that the shards filled in is whole and
// puts it in place under its final name.
func (c *coordinator) commitNPY(part, final string, rows int) error {
	roots := c.node.cfg.Roots
	f, err := roots.Open("--out-shared", part)
	if err != nil {
		return err
	}
	err = matio.CheckNPYRows(f, rows, int(c.sub.Spec.Rank))
	f.Close()
	if err != nil {
		return fmt.Errorf("--out-shared: %s: %v: do all nodes see the same directory?", filepath.Base(final), err)
	}
	return roots.Commit("--out-shared", part, final, c.sub.Spec.Overwrite)
}

// newTakeover is the coordinator a standby node starts for a job whose coordinator's node
// left or died (event e), from the job state the old coordinator replicated to it.
func newTakeover(n *Node, st *messages.JobState, e cluster.Event) *coordinator {
	c := newCoordinator(n, st.Submit)
	c.ft.takeover = st
	c.ft.takeoverCause = fmt.Sprintf("the coordinator's node %s (%s) is gone", e.Member.Name, e.Member.Meta.Actor)
	return c
}

// takeOver resumes a job from the replicated state: it tells the client which coordinator it
// now talks to and recovers the job without the old coordinator's node.
func (c *coordinator) takeOver(ctx actor.Context) {
	st := c.ft.takeover
	var err error
	if c.spec, err = parseSpec(c.sub.Spec); err != nil {
		c.fail(ctx, KindFailure, c.ft.takeoverCause+"; taking the job over: "+err.Error())
		return
	}
	// A takeover starts a new generation of epochs, above any the old coordinator may still
	// use if it was only cut off: its messages are then stale everywhere.
	c.epoch = (st.Epoch>>epochGenShift + 1) << epochGenShift
	c.m, c.n, c.density, c.initial = int(st.Features), int(st.Samples), st.Density, st.Initial
	c.ft.shardNode = slices.Clone(st.ShardNodes)
	c.ft.buddy = slices.Clone(st.Buddies)
	if len(c.ft.buddy) != len(c.ft.shardNode) || int64(len(c.ft.shardNode)) != c.sub.Spec.Shards {
		c.fail(ctx, KindFailure, "taking the job over: the replicated state is inconsistent")
		return
	}
	for s, a := range c.ft.shardNode {
		c.ft.involved[a] = true
		if b := c.ft.buddy[s]; b != "" {
			c.ft.involved[b] = true
		}
	}
	c.ft.committed = slices.Clone(st.Committed)
	c.ft.quorumOf = int(st.QuorumOf)
	c.ft.startSet = slices.Clone(st.StartNodes)
	c.history = st.History
	if len(c.history) > 0 {
		c.lastSec = c.history[len(c.history)-1].Seconds
	}
	c.started = time.Unix(0, st.StartedUnixNano)
	c.ft.lastIter = max(st.LastIteration, c.lastCommitted())
	c.ft.recoveries = slices.Clone(st.RecoveriesDone)
	c.ft.checkpoints = st.Checkpoints
	c.ownsPartial = c.sub.Spec.GetOutShared() != "" // the job's partial coef.npy, made by the first coordinator
	c.publish("recovering", true)
	if c.client != nil {
		ctx.Send(c.client, &messages.JobAccepted{JobId: c.job, Coordinator: wirePid(ctx.Self()), Samples: int64(c.n), Features: int64(c.m), Takeover: true})
	}
	old := ""
	if st.Coordinator != nil {
		old = st.Coordinator.Address
	}
	c.recover(ctx, c.ft.takeoverCause, []string{old})
}

// checkpointEveryText is a spec's checkpoint interval as factorize's --checkpoint-every says it.
func checkpointEveryText(every int64) string {
	if every < 0 {
		return "auto"
	}
	return strconv.FormatInt(every, 10)
}
