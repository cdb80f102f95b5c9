package jobctl

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/didnmf/didnmf/internal/jobctl/internal/bugs"
	"github.com/didnmf/didnmf/messages"
)

// MaxRecoveries caps a job's rollbacks: a fault that comes back every time fails the job.
const MaxRecoveries = 50

// RecoveryCause says why a job began a recovery, in one word of a fixed set (for metrics,
// which must not take the free-form cause of messages.Recovery as a label).
type RecoveryCause string

// The causes of recoveries.
const (
	CauseNodeLeft        RecoveryCause = "node_left"           // a node of the job left the cluster
	CauseNodeDead        RecoveryCause = "node_dead"           // a node of the job was declared dead
	CauseActorPanic      RecoveryCause = "actor_panic"         // a shard or reducer panicked
	CauseStall           RecoveryCause = "stall"               // the job made no progress (a message lost)
	CauseCheckpoint      RecoveryCause = "checkpoint_unusable" // the checkpoint to resume from had no valid copy
	CauseCoordinatorLost RecoveryCause = "coordinator_lost"    // this node took the job over from its coordinator's
)

// RecoveryCauses lists every RecoveryCause.
var RecoveryCauses = []RecoveryCause{CauseNodeLeft, CauseNodeDead, CauseActorPanic, CauseStall, CauseCheckpoint, CauseCoordinatorLost}

// faultState is what the control keeps to recover its job from failures.
type faultState struct {
	shardNode []string   // actor address of each shard's node
	buddy     []string   // of the node keeping copies of each shard's checkpoints ("" none)
	holders   [][]string // every node that held each shard or its buddy copies: where copies may be
	reserve   []int64    // memory each shard reserves
	ring      []string   // the live nodes in placement order; buddies follow it
	standby   string     // the node that takes the job over if the coordinator's node dies
	involved  map[string]bool
	lost      map[string]bool // nodes lost during the job
	quorumOf  int             // nodes known at the start
	startSet  []string        // their addresses
	takenOver bool            // this control took the job over from a lost coordinator

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
	// noticedAt is when recovering's failure was noticed, kept while the job had not started
	// (its Noticed waits for a start to count from; see noticed).
	noticedAt  time.Time
	why        RecoveryCause // of recovering
	paused     bool          // the job waits for a quorum
	pauseCause string
	// pending is a recovery that waits for the pings of the live nodes (Pongs of its epoch).
	pending *pendingRecovery
}

// pendingRecovery is a recovery between its decision and the pings that place the lost
// shards.
type pendingRecovery struct {
	cause  string
	alive  []string
	at     [][]string
	resume int64
}

// lastCommitted is the newest committed checkpoint iteration (0: none).
func (j *Job) lastCommitted() int64 {
	if len(j.ft.committed) == 0 {
		return 0
	}
	return j.ft.committed[len(j.ft.committed)-1]
}

// holdsActors tells whether a node holds shards of the job.
func (j *Job) holdsActors(addr string) bool {
	return slices.Contains(j.ft.shardNode, addr)
}

// aliveRing is the ring without the nodes lost: the cluster's live workers when there is a
// cluster, else the job's nodes that were not lost.
func (j *Job) aliveRing() []string {
	var ring []string
	from := j.ft.ring
	if j.cfg.Cluster {
		from = j.workers
	}
	for _, a := range from {
		if !j.ft.lost[a] {
			ring = append(ring, a)
		}
	}
	return ring
}

// onMember recovers the job when a node holding its actors or checkpoint copies left the
// cluster or died, finds a new standby when the standby did, and retries a recovery that
// waited for a quorum when a node joins.
func (j *Job) onMember(now time.Time, e MemberEvent) {
	j.workers = slices.Clone(e.Workers)
	if j.over || j.ft.shardNode == nil {
		return
	}
	if e.Join {
		// A node (back) in the cluster while the job waits for a quorum or is being
		// recovered: recover again with it, since messages to it may have been lost.
		if e.Worker && (j.ft.paused || (!j.running && j.ft.recovering != nil)) {
			delete(j.ft.lost, e.Addr)
			j.recover(now, j.ft.why, cmp.Or(j.ft.pauseCause, j.ft.recovering.GetCause()), nil)
		}
		return
	}
	if !j.ft.involved[e.Addr] || j.ft.lost[e.Addr] {
		return
	}
	how, why := "left the cluster", CauseNodeLeft
	if e.Dead {
		how, why = "died (declared dead by the gossip)", CauseNodeDead
	}
	if e.Addr == j.ft.standby && !j.holdsActors(e.Addr) && !slices.Contains(j.ft.buddy, e.Addr) {
		j.ft.lost[e.Addr] = true
		j.ft.ring = j.aliveRing()
		j.chooseStandby()
		j.sendState()
		return
	}
	j.failure(now, why, fmt.Sprintf("node %s (%s) %s", e.Name, e.Addr, how), []string{e.Addr})
}

// onTimer ends a wait for a quorum that did not come.
func (j *Job) onTimer(now time.Time, t Timer) {
	if t.Kind == TimerStall {
		j.onStall(now)
		return
	}
	if t.Kind != TimerQuorum || !j.ft.paused || t.Epoch != j.epoch || j.over {
		return
	}
	msg := fmt.Sprintf("%s; the job's nodes stayed without a majority for %v", j.ft.pauseCause, j.cfg.QuorumWait)
	if j.ft.takenOver {
		// The client follows this coordinator since the takeover: it must hear the end. (A
		// coordinator cut off in a minority cannot reach a client in the majority; and were
		// the cut to heal in time, this one would have recovered, superseding the other.)
		j.log(warn, "giving up a job taken over without a quorum", slog.String("why", msg))
	}
	j.fail(kindFailure, msg)
}

// failure records a failure noticed (a FAILURE event with its cause) and recovers the job
// from it (see recover); a recovery tried again (a node back while the job waits for a
// quorum or its pings) calls recover itself, being no new failure.
func (j *Job) failure(now time.Time, why RecoveryCause, cause string, lost []string) {
	if !j.over {
		j.event(now, messages.JobEventKind_JOB_EVENT_KIND_FAILURE, j.ft.lastIter, cause)
	}
	j.recover(now, why, cause, lost)
}

// recover rolls the job back to its last committed checkpoint in a new epoch: shards on lost
// nodes are placed anew (on a node that holds a copy of their checkpoint when one is alive),
// a new reduce tree is built over the same shard ids and every shard resumes from the
// checkpoint. Without a majority of the nodes known at the start, it waits. why classifies
// cause; a recovery that begins (none was under way) is told in Ready.Recoveries.
func (j *Job) recover(now time.Time, why RecoveryCause, cause string, lost []string) {
	if j.over {
		return
	}
	for _, a := range lost {
		j.ft.lost[a] = true
	}
	j.publish(now, messages.JobPhase_JOB_PHASE_RECOVERING, true)
	alive := j.aliveRing()
	up := 0
	for _, a := range j.ft.startSet {
		if slices.Contains(alive, a) {
			up++
		}
	}
	if 2*up <= j.ft.quorumOf {
		j.pause(now, why, cause, up)
		return
	}
	if j.ft.paused {
		j.event(now, messages.JobEventKind_JOB_EVENT_KIND_RESUMED, j.lastCommitted(),
			fmt.Sprintf("%d of the job's %d nodes reachable again", up, j.ft.quorumOf))
	}
	j.ft.paused = false
	if r := j.ft.pending; r != nil {
		// A recovery waits for its pings: it places without the nodes lost since, in the
		// same epoch (a rack's nodes are seen dead one by one, within a detection window).
		r.cause += "; " + cause
		j.ft.recovering.Cause += "; " + cause
		return
	}
	if len(j.ft.recoveries)+1 > MaxRecoveries {
		j.fail(kindFailure, fmt.Sprintf("%s; the job recovered %d times already, giving up", cause, MaxRecoveries))
		return
	}
	resume := j.lastCommitted()
	if j.ft.recovering == nil {
		j.ft.recovering = &messages.Recovery{Cause: cause, Noticed: j.noticed(now), FromIteration: resume, Redone: max(j.ft.lastIter-resume, 0)}
		j.began(why)
	} else {
		j.ft.recovering.Cause += "; " + cause
		j.ft.recovering.FromIteration = resume
	}
	j.epoch++
	j.ft.recovering.Epoch = j.epoch
	j.running = false
	j.log(warn, "recovering the job", slog.String("cause", cause), uint64Attr("epoch", j.epoch), slog.Int64("from iteration", resume),
		slog.Int64("redone", j.ft.recovering.Redone))
	j.warn(fmt.Sprintf("%s: rolling back to iteration %d (epoch %s)", cause, resume, EpochString(j.epoch)))
	if len(alive) == 0 {
		j.fail(kindFailure, cause+"; no node is left to run the job")
		return
	}
	at := make([][]string, len(j.ft.shardNode))
	for s, addr := range j.ft.shardNode {
		holders := []string{addr, j.ft.buddy[s]}
		if s < len(j.ft.holders) {
			holders = append(holders, j.ft.holders[s]...)
		}
		for _, a := range holders {
			if a != "" && !j.ft.lost[a] && !slices.Contains(at[s], a) {
				at[s] = append(at[s], a)
			}
		}
	}
	j.ft.pending = &pendingRecovery{cause: cause, alive: alive, at: at, resume: resume}
	if !slices.ContainsFunc(j.ft.shardNode, func(a string) bool { return j.ft.lost[a] }) {
		j.resume(nil)
		return
	}
	// The lost shards are placed by the load and memory of the live nodes: ask them.
	j.ready.Pings = &PingRequest{Epoch: j.epoch, Nodes: slices.Clone(alive)}
}

// noticed is Recovery.Noticed for a failure noticed now: the seconds since the job started.
// A failure noticed before the start (a node lost while the job was set up) has no start to
// count from yet: it reads 0 until the job starts, and the start makes it the negative
// seconds it came before (started).
func (j *Job) noticed(now time.Time) float64 {
	if j.started.IsZero() {
		j.ft.noticedAt = now
		return 0
	}
	j.ft.noticedAt = time.Time{}
	return now.Sub(j.started).Seconds()
}

// began records that a recovery began (the job's recovering record was made), for Ready.
func (j *Job) began(why RecoveryCause) {
	j.ft.why = why
	j.ready.Recoveries = append(j.ready.Recoveries, why)
}

// pause stops the job until a majority of its nodes is back, or the quorum wait ends.
func (j *Job) pause(now time.Time, why RecoveryCause, cause string, up int) {
	j.publish(now, messages.JobPhase_JOB_PHASE_PAUSED, true)
	if !j.ft.paused {
		pause := fmt.Sprintf("%s; paused: only %d of the job's %d nodes reachable, not a majority", cause, up, j.ft.quorumOf)
		if j.ft.recovering == nil {
			j.ft.recovering = &messages.Recovery{Cause: pause, Noticed: j.noticed(now), FromIteration: j.lastCommitted(),
				Redone: max(j.ft.lastIter-j.lastCommitted(), 0)}
			j.began(why)
		} else {
			j.ft.recovering.Cause += "; " + pause
		}
		j.log(warn, "no quorum: the job waits", slog.Int("alive", up), slog.Int("of", j.ft.quorumOf))
		j.event(now, messages.JobEventKind_JOB_EVENT_KIND_PAUSED, j.ft.lastIter,
			fmt.Sprintf("only %d of the job's %d nodes reachable, not a majority", up, j.ft.quorumOf))
		j.warn(fmt.Sprintf("%s; only %d of the job's %d nodes are reachable, not a majority: the job waits up to %v for them", cause, up, j.ft.quorumOf, j.cfg.QuorumWait))
		j.running = false
		j.ft.pending = nil
		// Pause the shards still running: they stop at their next iteration boundary.
		for _, s := range j.shards {
			j.send(s, &messages.Finish{JobId: j.id, Epoch: j.epoch, At: -1})
		}
		j.epoch++ // fences them: nothing of theirs is taken any more
		j.ready.Timers = append(j.ready.Timers, Timer{Kind: TimerQuorum, Epoch: j.epoch, After: j.cfg.QuorumWait})
	}
	j.ft.paused, j.ft.pauseCause = true, cause
}

// onPongs goes on with a recovery once the live nodes answered their pings.
func (j *Job) onPongs(now time.Time, e Pongs) {
	if j.over || j.ft.pending == nil || e.Epoch != j.epoch || len(e.Pongs) != len(j.ft.pending.alive) {
		return
	}
	j.resume(e.Pongs)
}

// resume places the lost shards (pongs: the live nodes' answers, nil when none was lost) and
// rolls every shard back to the pending recovery's checkpoint.
func (j *Job) resume(pongs []*messages.Pong) {
	r := j.ft.pending
	j.ft.pending = nil
	// Nodes lost while the pings were out are left out.
	alive, answers := r.alive[:0:0], pongs[:0:0]
	for i, a := range r.alive {
		if !j.ft.lost[a] {
			alive = append(alive, a)
			if pongs != nil {
				answers = append(answers, pongs[i])
			}
		}
	}
	for s := range r.at {
		r.at[s] = slices.DeleteFunc(r.at[s], func(a string) bool { return j.ft.lost[a] })
	}
	r.alive = alive
	if len(alive) == 0 {
		j.fail(kindFailure, r.cause+"; no node is left to run the job")
		return
	}
	if pongs != nil {
		if err := j.replaceLost(r.alive, answers, r.at); err != nil {
			j.fail(kindFailure, fmt.Sprintf("%s; the shards of the lost nodes fit on no live node: %v", r.cause, err))
			return
		}
	}
	j.ft.ring = r.alive
	j.assignBuddies()
	// Forget the epoch that ended: its history after the checkpoint is done again.
	keep := 0
	for keep < len(j.history) && j.history[keep].Iteration <= r.resume {
		keep++
	}
	if keep > 0 {
		j.history = j.history[:keep]
		j.lastSec = j.history[keep-1].Seconds
	}
	j.iterSec = j.iterSec[:min(int(r.resume), len(j.iterSec))]
	if pad := int(r.resume) - len(j.iterSec); pad > 0 {
		// The last reports before the checkpoint were lost (and, after a takeover, are not in
		// the replicated history): those iterations take the mean of the others' times.
		mean := 0.0
		for _, s := range j.iterSec {
			mean += s / float64(len(j.iterSec))
		}
		for range pad {
			j.iterSec = append(j.iterSec, mean)
		}
	}
	j.ft.reported = map[int64]map[int64]bool{}
	j.ft.askedAt, j.ft.ckptCost = 0, 0
	j.running, j.placed, j.sqNormX, j.sqNorms, j.done, j.reducerDone = false, 0, 0, nil, map[int64]*messages.ShardDone{}, 0
	j.timeUp = false
	j.place(r.resume, r.at)
}

// sendState sends the job's state to the standby, which takes the job over if the
// coordinator's node dies.
func (j *Job) sendState() {
	if j.ft.standby == "" || j.over {
		return
	}
	st := &messages.JobState{Submit: j.sub, Epoch: j.epoch, ShardNodes: j.ft.shardNode, Buddies: j.ft.buddy,
		Committed: j.ft.committed, QuorumOf: int64(j.ft.quorumOf), Coordinator: j.cfg.Self,
		Samples: int64(j.n), Features: int64(j.m), Density: j.density, Initial: j.initial,
		StartNodes:     j.ft.startSet,
		RecoveriesDone: j.ft.recoveries, Checkpoints: j.ft.checkpoints, LastIteration: j.ft.lastIter,
		Events: slices.Clone(j.events)}
	if !j.submitted.IsZero() {
		st.SubmittedUnixMs = j.submitted.UnixMilli()
	}
	if !j.started.IsZero() {
		st.StartedUnixNano = j.started.UnixNano()
	}
	if last := j.lastCommitted(); last > 0 {
		for _, h := range j.history {
			if h.Iteration <= last {
				st.History = append(st.History, h)
			}
		}
	}
	j.send(HostPid(j.ft.standby), st)
}

// takeOver resumes a job from the replicated state: it tells the client which coordinator it
// now talks to and recovers the job without the old coordinator's node.
func (j *Job) takeOver(now time.Time, t TakeOver) {
	if j.over || j.begun {
		return
	}
	j.begun = true
	st := t.State
	j.ft.takenOver = true
	j.workers = slices.Clone(t.Workers)
	_ = j.lease.Step(LeaseStart{At: now})
	// A takeover starts a new generation of epochs, above any the old coordinator may still
	// use if it was only cut off: its messages are then stale everywhere.
	j.epoch = (st.Epoch>>EpochGenShift + 1) << EpochGenShift
	if j.cfg.Bugs.Has(bugs.TakeoverKeepsEpoch) {
		j.epoch = st.Epoch
	}
	j.m, j.n, j.density, j.initial = int(st.Features), int(st.Samples), st.Density, st.Initial
	j.ft.shardNode = slices.Clone(st.ShardNodes)
	j.ft.buddy = slices.Clone(st.Buddies)
	if len(j.ft.buddy) != len(j.ft.shardNode) || int64(len(j.ft.shardNode)) != j.sub.GetSpec().GetShards() {
		j.fail(kindFailure, "taking the job over: the replicated state is inconsistent")
		return
	}
	for s, a := range j.ft.shardNode {
		j.ft.involved[a] = true
		if b := j.ft.buddy[s]; b != "" {
			j.ft.involved[b] = true
		}
	}
	j.ft.committed = slices.Clone(st.Committed)
	j.ft.quorumOf = int(st.QuorumOf)
	j.ft.startSet = slices.Clone(st.StartNodes)
	j.history = st.History
	if len(j.history) > 0 {
		j.lastSec = j.history[len(j.history)-1].Seconds
	}
	j.iterSec = iterSecondsOf(j.history)
	if st.StartedUnixNano != 0 {
		j.started = time.Unix(0, st.StartedUnixNano)
	}
	j.ft.lastIter = max(st.LastIteration, j.lastCommitted())
	j.ft.recoveries = slices.Clone(st.RecoveriesDone)
	j.ft.checkpoints = st.Checkpoints
	if st.SubmittedUnixMs != 0 {
		j.submitted = time.UnixMilli(st.SubmittedUnixMs)
	}
	j.events = slices.Clone(st.Events[max(len(st.Events)-MaxInfoEvents, 0):])
	j.event(now, messages.JobEventKind_JOB_EVENT_KIND_TAKEOVER, j.ft.lastIter, fmt.Sprintf("%s took the job over: %s", j.cfg.Self.GetAddress(), t.Cause))
	j.ownsPartial = j.sub.GetSpec().GetOutShared() != "" // the job's partial coef.npy, made by the first coordinator
	j.publish(now, messages.JobPhase_JOB_PHASE_RECOVERING, true)
	j.announce()
	j.ft.ring = uniqueStrings(append(slices.Clone(j.ft.startSet), j.ft.shardNode...))
	old := st.GetCoordinator().GetAddress()
	j.failure(now, CauseCoordinatorLost, t.Cause, []string{old})
}

// iterSecondsOf rebuilds the seconds of every iteration from a history (iterations in a gap
// between its points share the gap's seconds).
func iterSecondsOf(h []*messages.HistoryPoint) []float64 {
	var out []float64
	for i := 1; i < len(h); i++ {
		n := h[i].Iteration - h[i-1].Iteration
		for range n {
			out = append(out, (h[i].Seconds-h[i-1].Seconds)/float64(n))
		}
	}
	return out
}
