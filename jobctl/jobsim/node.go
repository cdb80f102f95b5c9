package jobsim

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/jobctl"
	"github.com/didnmf/didnmf/messages"
)

// node is a simulated `node serve`: a host that makes the job's shards and reducers, keeps
// checkpoint copies and standby state, and runs coordinators (jobctl.Job) it was given.
type node struct {
	w     *World
	addr  string
	alive bool
	slow  bool
	// full makes checkpoint writes fail (a full disk): for the whole run (Faults.FullDisks),
	// or while filled (Faults.FillDisks).
	full, filled bool

	epochs   map[string]uint64             // the latest epoch of each job seen in an assignment
	coordOf  map[string]string             // the node of each job's coordinator, as its assignments say
	ended    map[string]bool               // jobs that ended here (a StopJob, or forgotten as orphans)
	answers  map[string]proto.Message      // the answers of jobs whose coordinator ended here
	shards   map[string]*shard             // by actor id ("host/<job>-s<i>")
	reducers map[string]*reducer           // by actor id
	coords   map[string]*coordinator       // by actor id ("host/<job>-coord")
	standby  map[string]*messages.JobState // replicated job state, by job
	// incarnation counts the node's restarts.
	incarnation int
	// committed is each job's newest committed checkpoint, as the node heard.
	committed map[string]int64
	// store is the node's disk (see disk.go): checkpoints, own copies and buddy copies.
	store map[storeKey]*record
}

func newNode(w *World, addr string) *node {
	return &node{w: w, addr: addr, alive: true, epochs: map[string]uint64{}, coordOf: map[string]string{}, ended: map[string]bool{}, answers: map[string]proto.Message{}, shards: map[string]*shard{}, reducers: map[string]*reducer{},
		coords: map[string]*coordinator{}, standby: map[string]*messages.JobState{}, committed: map[string]int64{}, store: map[storeKey]*record{}}
}

// receive dispatches a message to the host or to one of its children.
func (n *node) receive(id string, msg any) {
	if id == jobctl.HostName {
		n.host(msg)
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

// host handles what the host actor does for a job.
func (n *node) host(msg any) {
	switch m := msg.(type) {
	case *messages.ShardAssignment:
		if n.ended[m.JobId] {
			n.w.send(n.addr, m.Coordinator, &messages.Placed{JobId: m.JobId, Epoch: m.Epoch, Ended: true})
			return
		}
		id := jobctl.HostName + "/" + jobctl.ShardName(m.JobId, m.Shard)
		if m.Epoch < n.epochs[m.JobId] {
			// From a superseded coordinator: the shard tells it so, if it lives here.
			if s := n.shards[id]; s != nil {
				s.receive(m)
			}
			return
		}
		n.newEpoch(m.JobId, m.Epoch)
		n.coordOf[m.JobId] = m.Coordinator.GetAddress()
		s := n.shards[id]
		if s == nil {
			s = newShard(n, m.JobId, m.Shard)
			n.shards[id] = s
		}
		// A shard that lives here rolls back in place (its driver takes the later epoch).
		s.receive(m)
	case *messages.ReducerAssignment:
		if n.ended[m.JobId] {
			n.w.send(n.addr, m.Coordinator, &messages.Placed{JobId: m.JobId, Epoch: m.Epoch, Ended: true})
			return
		}
		if m.Epoch < n.epochs[m.JobId] {
			return
		}
		n.newEpoch(m.JobId, m.Epoch)
		n.coordOf[m.JobId] = m.Coordinator.GetAddress()
		id := jobctl.HostName + "/" + jobctl.ReducerName(m.JobId, m.Epoch, m.Level, m.Lo)
		r, err := newReducer(n, m, id)
		placed := &messages.Placed{JobId: m.JobId, Actor: "reducer", Pid: &messages.Pid{Address: n.addr, Id: id}, Epoch: m.Epoch}
		if err != nil {
			placed.Error = err.Error()
		} else {
			n.reducers[id] = r
		}
		n.w.send(n.addr, m.Coordinator, placed)
	case *checkpointCopy:
		stored := &checkpointStored{key: m.key}
		if err := n.write(m.key, true, m.snap, m.keep); err != nil {
			stored.err = err.Error()
		}
		n.w.send(n.addr, m.replyTo, stored)
	case *messages.CheckpointCommitted:
		n.commit(m)
	case *messages.JobState:
		if m.Submit != nil {
			if old := n.standby[m.Submit.JobId]; old == nil || old.Epoch <= m.Epoch {
				n.standby[m.Submit.JobId] = m
			}
		}
	case *messages.StopJob:
		if m.Epoch < n.epochs[m.JobId] {
			return // from a superseded coordinator
		}
		n.forget(m.JobId, true)
	case *messages.Ping:
		// Pings are answered by the world (pingAll); nothing comes here.
	}
}

// newEpoch records a job's epoch; the children of earlier epochs stop.
func (n *node) newEpoch(job string, epoch uint64) {
	if epoch <= n.epochs[job] {
		return
	}
	n.epochs[job] = epoch
	for _, id := range sortedKeys(n.reducers) {
		if r := n.reducers[id]; r.a.JobId == job && r.a.Epoch < epoch {
			delete(n.reducers, id)
		}
	}
}

// forget stops every actor of a job on the node and drops its checkpoints and standby state;
// a job that ended (not an orphan) is remembered as such (see actors' host.forget).
func (n *node) forget(job string, ended bool) {
	prefix := jobctl.HostName + "/" + job + "-"
	for _, id := range sortedKeys(n.shards) {
		if strings.HasPrefix(id, prefix) {
			n.shards[id].close()
			delete(n.shards, id)
		}
	}
	for _, id := range sortedKeys(n.reducers) {
		if strings.HasPrefix(id, prefix) {
			delete(n.reducers, id)
		}
	}
	for k := range n.store {
		if k.job == job {
			delete(n.store, k)
		}
	}
	delete(n.committed, job)
	delete(n.standby, job)
	delete(n.coordOf, job)
	if ended {
		n.ended[job] = true
	}
}

// kill ends the node's process: its actors are gone, its memory lost. Its disk stays for a
// restart that finds it (World.restart).
func (n *node) kill() {
	n.alive = false
	for _, id := range sortedKeys(n.shards) {
		n.shards[id].close()
	}
	n.shards, n.reducers, n.coords, n.standby = map[string]*shard{}, map[string]*reducer{}, map[string]*coordinator{}, map[string]*messages.JobState{}
	n.epochs, n.coordOf, n.ended, n.committed = map[string]uint64{}, map[string]string{}, map[string]bool{}, map[string]int64{}
	n.answers = map[string]proto.Message{}
}

// memberEvent tells the node's coordinators, and its host (for takeovers), of a change of
// membership it saw.
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
	if e.Join {
		return
	}
	// The jobs whose coordinator was there are forgotten unless a takeover reaches this node
	// in time (as the host actor does: actors.orphanWait).
	for _, job := range sortedKeys(n.coordOf) {
		if n.coordOf[job] == e.Addr {
			n.w.after(n.w.opt.QuorumWait+takeoverWait, func() {
				if n.alive && n.coordOf[job] == e.Addr && !n.w.reachable(n.addr, e.Addr) {
					n.w.logf("%s forgets job %s: its coordinator is gone", n.addr, job)
					n.forget(job, false) // an orphan, not an end: a successor may still come
				}
			})
		}
	}
	// Take over the jobs whose coordinator's node is gone and for which this node is the
	// standby.
	for _, job := range sortedKeys(n.standby) {
		st := n.standby[job]
		if st.GetCoordinator().GetAddress() != e.Addr {
			continue
		}
		delete(n.standby, job)
		id := jobctl.HostName + "/" + job + "-coord"
		if n.coords[id] != nil {
			continue
		}
		n.w.stats.Takeovers++
		n.w.logf("%s takes job %s over", n.addr, job)
		c := n.w.newCoordinator(n, st.Submit, id)
		c.step(jobctl.TakeOver{State: st, Cause: "the coordinator's node " + e.Addr + " is gone", Workers: slices.Clone(e.Workers)})
	}
}
