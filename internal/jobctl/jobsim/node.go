package jobsim

import (
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/messages"
)

// node is a simulated `node serve`: its host is the production jobctl.Host (the machine
// package actors' host actor runs), which decides what the node admits, which coordinator and
// epoch of a job it serves, when it takes a job over or forgets it, and which answers it
// keeps. The node is only its adapter, as actors/host.go is: it turns the world's messages,
// its children's ends, membership changes and timers into the host's events, and carries out
// its Ready: it makes and stops coordinators, shards and reducers, reserves the node's memory
// for them and gives it back, arms the orphan checks, and keeps checkpoint copies on its disk.
type node struct {
	w     *World
	addr  string
	alive bool
	slow  bool
	// full makes checkpoint writes fail (a full disk): for the whole run (Faults.FullDisks),
	// or while filled (Faults.FillDisks).
	full, filled bool

	// host is the host machine of the node's process (a new one when it restarts); inbox the
	// events waiting for it (the host actor's mailbox), stepping set while it is drained, and
	// reply the answer of the request stepped last.
	host     *jobctl.Host
	inbox    []any
	stepping bool
	reply    proto.Message
	// ended are the jobs that ended here (a StopJob), as actors' Node remembers them.
	ended map[string]bool
	// reserved is the node's memory its job actors reserved (what the host's admission reads),
	// owned what each owner holds of it.
	reserved int64
	owned    map[string]int64

	shards   map[string]*shard       // by actor id ("host/<job>-s<i>")
	reducers map[string]*reducer     // by actor id
	coords   map[string]*coordinator // by actor id ("host/<job>-coord")
	// standby and keeps are what the world sees of the host, to aim its faults and count
	// their effects: the jobs whose replicated state reached the node (until it took them
	// over or forgot them), and those whose answer its host was handed.
	standby map[string]bool
	keeps   map[string]bool
	// served is the latest epoch of each job whose shard assignment the host carried out (a
	// shard made or rolled back): it must never go back while the host keeps the job.
	served map[string]uint64
	// incarnation counts the node's restarts.
	incarnation int
	// committed is each job's newest committed checkpoint, as the node heard.
	committed map[string]int64
	// store is the node's disk (see disk.go): checkpoints, own copies and buddy copies.
	store map[storeKey]*record
}

// maxRestarts is the restarts of a job's actors a simulated host allows (actors' maxRestarts);
// the simulation's actors never panic.
const maxRestarts = 20

func newNode(w *World, addr string) *node {
	n := &node{w: w, addr: addr, alive: true, store: map[storeKey]*record{}}
	n.start()
	return n
}

// start gives the node a new process: an empty host and no actors, memory or standby state.
// Its disk stays.
func (n *node) start() {
	cfg := jobctl.HostConfig{Node: n.addr, MaxRestarts: maxRestarts, Orphan: n.w.opt.QuorumWait + takeoverWait, Bugs: n.w.opt.Bugs}
	host, err := jobctl.NewHost(cfg)
	if err != nil {
		panic(err) // the simulation's own configuration: a bug of the test
	}
	n.host, n.inbox, n.stepping, n.reply = host, nil, false, nil
	n.ended, n.owned, n.reserved = map[string]bool{}, map[string]int64{}, 0
	n.shards, n.reducers, n.coords = map[string]*shard{}, map[string]*reducer{}, map[string]*coordinator{}
	n.standby, n.keeps, n.committed, n.served = map[string]bool{}, map[string]bool{}, map[string]int64{}, map[string]uint64{}
}

// receive dispatches a message to the host or to one of its children.
func (n *node) receive(id string, msg any) {
	if id == jobctl.HostName {
		n.hostMessage(msg)
		return
	}
	if c := n.coords[id]; c != nil {
		c.step(msg)
		return
	}
	if s := n.shards[id]; s != nil {
		s.receive(msg)
		return
	}
	if r := n.reducers[id]; r != nil {
		r.receive(msg)
	}
}

// hostMessage turns a message for the host actor into its machine's event, with what of the
// node the event carries; checkpoint copies and commits go to the node's disk.
func (n *node) hostMessage(msg any) {
	switch m := msg.(type) {
	case *messages.ShardAssignment:
		n.hostStep(jobctl.HostShardAssign{Assignment: m, Ended: n.ended[m.JobId], Reserve: shardReserve(m),
			MemoryUsed: n.reserved, OwnerHeld: n.owned[m.Owner]})
	case *messages.ReducerAssignment:
		n.hostStep(jobctl.HostReducerAssign{Assignment: m, Ended: n.ended[m.JobId]})
	case *messages.StopJob:
		n.hostStep(jobctl.HostStop{Stop: m})
	case *messages.Buddies:
		n.hostStep(jobctl.HostBuddies{Buddies: m})
	case *messages.JobState:
		if m.Submit != nil {
			n.standby[m.Submit.JobId] = true
		}
		n.hostStep(jobctl.HostJobState{State: m})
	case *checkpointCopy:
		// Only the buddy its coordinator's latest Buddies named keeps a shard's copies (as
		// actors' host.storeCopy asks the host); another node drops them unanswered.
		buddy, every := n.host.KeepsCopies(m.key.job, m.key.shard)
		if !buddy {
			n.w.logf("%s drops a copy of shard %d's checkpoint at iteration %d: it is not the shard's buddy", n.addr, m.key.shard, m.key.iter)
			return
		}
		stored := &checkpointStored{key: m.key}
		if err := n.write(m.key, true, m.snap, jobctl.ShardDriverUncommittedKept(every)); err != nil {
			stored.err = err.Error()
		}
		n.w.send(n.addr, m.replyTo, stored)
	case *messages.CheckpointCommitted:
		n.hostStep(jobctl.HostCheckpointCommitted{Commit: m})
	case *messages.JobRecord:
		n.hostStep(jobctl.HostRecord{Record: m, At: n.w.now()})
	}
}

// shardReserve is the memory a simulated shard reserves: what its assignment says, at least
// its columns' share of the factors (never nothing, so that a reservation that outlives its
// job shows).
func shardReserve(m *messages.ShardAssignment) int64 {
	return max(m.Reserve, 8*max(m.ColHi-m.ColLo, 1)*max(m.GetSpec().GetRank(), 1))
}

// submit hands the host a client's submission (authenticated, as the host actor does): its
// coordinator is to run here.
func (n *node) submit(m *messages.SubmitJob, owner string) {
	n.hostStep(jobctl.HostSubmit{Submit: m, Caller: owner})
}

// keptAnswer asks the host, as a client's LeaseRenew sent to it does, for the kept answer
// of a job whose coordinator is gone: nil when it keeps none for that token.
func (n *node) keptAnswer(job, token string) proto.Message {
	n.hostStep(jobctl.HostLeaseRenew{Renew: &messages.LeaseRenew{JobId: job, OwnerToken: token}, At: n.w.now()})
	reply := n.reply
	n.reply = nil
	if _, ack := reply.(*messages.LeaseAck); ack {
		return nil
	}
	return reply
}

// hostStep feeds the host an event, after those waiting (one at a time, as the actor's
// mailbox), and carries out what it asks.
func (n *node) hostStep(ev any) {
	n.inbox = append(n.inbox, ev)
	if n.stepping {
		return
	}
	n.stepping = true
	defer func() { n.stepping = false }()
	for len(n.inbox) > 0 && n.alive {
		ev := n.inbox[0]
		n.inbox = n.inbox[1:]
		if err := n.host.Step(ev); err != nil {
			n.w.violation("host on %s: %v", n.addr, err)
			continue
		}
		n.perform(n.host.Ready())
	}
}

// perform carries out what the host asks, in the order of jobctl.HostReady's fields (as
// actors' host.perform).
func (n *node) perform(rd jobctl.HostReady) {
	w := n.w
	for _, l := range rd.Logs {
		w.logf("%s host: %s %v", n.addr, l.Msg, l.Attrs)
	}
	for _, what := range rd.Drops {
		w.logf("%s host drops %s", n.addr, what)
	}
	for _, id := range rd.Stops {
		n.stopChild(id)
	}
	for _, f := range rd.Forget {
		n.forget(f)
	}
	for _, sp := range rd.Spawns {
		if sp.Shard != nil {
			n.serve(sp.Shard)
		}
		n.spawn(sp)
	}
	for _, s := range rd.Sends {
		switch m := s.Msg.(type) {
		case *messages.Placed:
			if m.Superseded != 0 {
				w.stats.Superseded++
			}
		case *messages.ShardAssignment:
			n.serve(m) // to a shard that lives here: it rolls back in place
		}
		w.send(n.addr, s.To, s.Msg)
	}
	if rd.Reply != nil {
		n.reply = rd.Reply
	}
	host := n.host
	for _, t := range rd.Timers {
		w.after(t.After, func() {
			if n.alive && n.host == host {
				n.hostStep(jobctl.HostOrphanCheck{Job: t.Job, Coordinator: t.Coordinator, Member: w.views[n.addr][t.Coordinator]})
			}
		})
	}
	for _, m := range rd.Prunes {
		n.commit(m)
	}
	for _, r := range rd.Releases {
		n.reserved -= r.Bytes
		n.owned[r.Owner] -= r.Bytes
	}
}

// serve checks a shard assignment the host carries out: epoch fencing means it is never of an
// earlier epoch than one the host carried out before for the job (unless it forgot the job).
func (n *node) serve(a *messages.ShardAssignment) {
	if a.Epoch < n.served[a.JobId] {
		n.w.violation("the host on %s took an assignment of epoch %s for shard %d after one of epoch %s: a superseded coordinator's",
			n.addr, jobctl.EpochString(a.Epoch), a.Shard, jobctl.EpochString(n.served[a.JobId]))
	}
	n.served[a.JobId] = max(n.served[a.JobId], a.Epoch)
}

// spawn starts a child the host asks for and reserves its memory: a coordinator (submitted,
// or taking a job over), a shard (which takes its assignment at once) or a reducer (which
// tells its coordinator it runs, or why not).
func (n *node) spawn(sp jobctl.HostSpawn) {
	w := n.w
	id := jobctl.ChildPid(n.addr, sp.Name).Id
	n.reserved += sp.Reserve
	n.owned[sp.Owner] += sp.Reserve
	switch {
	case sp.Shard != nil:
		s := newShard(n, sp.Job, sp.Shard.Shard)
		s.reserve = sp.Reserve
		n.shards[id] = s
		s.receive(sp.Shard)
	case sp.Reducer != nil:
		a := sp.Reducer
		r, err := newReducer(n, a, id)
		placed := &messages.Placed{JobId: a.JobId, Actor: "reducer", Pid: r.pid, Epoch: a.Epoch}
		if err != nil {
			placed.Error = err.Error()
			n.hostStep(jobctl.HostChildStopped{ID: id})
		} else {
			n.reducers[id] = r
		}
		w.send(n.addr, a.Coordinator, placed)
	case sp.Takeover != nil:
		delete(n.standby, sp.Job)
		w.stats.Takeovers++
		w.logf("%s takes job %s over", n.addr, sp.Job)
		c := w.newCoordinator(n, sp.Takeover.Submit, id)
		c.step(jobctl.TakeOver{State: sp.Takeover, Cause: sp.Cause, Workers: w.liveWorkers(n.addr)})
	default:
		w.newCoordinator(n, sp.Submit, id)
	}
}

// held is the memory the node's live actors reserved.
func (n *node) held() int64 {
	var sum int64
	for _, s := range n.shards {
		sum += s.reserve
	}
	return sum
}

// stopChild stops a child of the host (if it still runs); the host hears it stopped.
func (n *node) stopChild(id string) {
	if s := n.shards[id]; s != nil {
		s.close()
		delete(n.shards, id)
	}
	delete(n.reducers, id)
	delete(n.coords, id)
	n.hostStep(jobctl.HostChildStopped{ID: id})
}

// coordinatorOver is a coordinator of the node ending: it hands its job's answer to the host
// (for a client that asks again) and stops.
func (n *node) coordinatorOver(c *coordinator) {
	delete(n.coords, c.id)
	if a := c.ctl.Answer(); a != nil {
		n.keeps[c.ctl.ID()] = true
		n.hostStep(jobctl.HostAnswerKept{Job: c.ctl.ID(), Token: c.token, Answer: a, At: n.w.now()})
	}
	n.hostStep(jobctl.HostChildStopped{ID: c.id})
}

// forget stops a job's actors on the node, as the host asks, and drops its checkpoints; a job
// that ended (not an orphan) is remembered as such (see actors' host.forget).
func (n *node) forget(f jobctl.HostForget) {
	for _, id := range f.Actors {
		n.stopChild(id)
	}
	for k := range n.store {
		if k.job == f.Job {
			delete(n.store, k)
		}
	}
	delete(n.committed, f.Job)
	delete(n.standby, f.Job)
	delete(n.served, f.Job)
	if f.Ended {
		n.ended[f.Job] = true
	} else {
		n.w.logf("%s forgets job %s: its coordinator is gone", n.addr, f.Job)
	}
}

// kill ends the node's process: its actors are gone, its memory lost. Its disk stays for a
// restart that finds it (World.restart).
func (n *node) kill() {
	n.alive = false
	for _, id := range sortedKeys(n.shards) {
		n.shards[id].close()
	}
	n.start()
}

// memberEvent tells the node's coordinators, and its host (for takeovers and orphans), of a
// change of membership it saw.
func (n *node) memberEvent(e jobctl.MemberEvent) {
	if !n.alive {
		return
	}
	e.Workers = n.w.liveWorkers(n.addr)
	for _, id := range sortedKeys(n.coords) {
		if c := n.coords[id]; c != nil {
			c.step(e)
		}
	}
	if !e.Join {
		n.hostStep(jobctl.HostMemberLeft{Name: e.Name, Addr: e.Addr})
	}
}
