package jobsim

import (
	"slices"
	"time"

	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/messages"
)

// coordinator runs a jobctl.Job on a simulated node, as the coordinator actor does: it
// feeds it events and carries out its Ready.
type coordinator struct {
	w   *World
	n   *node
	id  string
	pid *messages.Pid
	ctl *jobctl.Job
	// token is its job's owner token, which the host keeps its answer under.
	token string
	// commits are the checkpoints it committed last (the distinct iterations, oldest first):
	// those it may fall back to, which no live node may drop (see disk.go).
	commits []int64
}

// newCoordinator makes a job's coordinator on node n under the actor id.
func (w *World) newCoordinator(n *node, sub *messages.SubmitJob, id string) *coordinator {
	pid := &messages.Pid{Address: n.addr, Id: id}
	cfg := jobctl.Config{Self: pid, Cluster: true, QuorumWait: w.opt.QuorumWait, ReportInterval: 10 * time.Millisecond,
		FanIn: w.opt.FanIn, StallTimeout: w.opt.StallTimeout, Lease: lease, Bugs: w.opt.Bugs, TimeLimit: w.opt.TimeLimit}
	ctl, err := jobctl.New(cfg, sub)
	if err != nil {
		panic(err) // the simulation's own configuration: a bug of the test
	}
	c := &coordinator{w: w, n: n, id: id, pid: pid, ctl: ctl, token: sub.GetOwnerToken()}
	n.coords[id] = c
	w.coords = append(w.coords, c)
	w.coordinators++
	w.after(time.Second, c.tick)
	return c
}

// tick is the coordinator's clock (the actor ticks every second): the control checks its
// client's lease.
func (c *coordinator) tick() {
	if !c.n.alive || c.n.coords[c.id] != c {
		return
	}
	c.step(jobctl.Tick{})
	c.w.after(time.Second, c.tick)
}

// step feeds the control one event at the simulated time, unless the coordinator is gone.
func (c *coordinator) step(ev any) {
	if !c.n.alive || c.n.coords[c.id] != c {
		return
	}
	c.w.stats.Steps++
	start := time.Now()
	if err := c.ctl.Step(c.w.now(), ev); err != nil {
		c.w.violation("coordinator on %s: %v", c.n.addr, err)
	}
	rd := c.ctl.Ready()
	took := time.Since(start)
	kind := "other"
	switch e := ev.(type) {
	case jobctl.Begin:
		kind = "placement"
	case jobctl.MemberEvent:
		kind = "membership"
		if !e.Join {
			kind = "node lost"
		}
	case jobctl.Pongs:
		kind = "re-placement"
	}
	st := &c.w.stats
	if st.Decisions == nil {
		st.Decisions = map[string]Decision{}
	}
	d := st.Decisions[kind]
	d.Steps++
	d.Total += took
	d.Longest = max(d.Longest, took)
	d.Messages += len(rd.Sends)
	st.Decisions[kind] = d
	st.ControlMessages += len(rd.Sends)
	c.apply(rd)
}

// claimEpoch checks that no other coordinator has sent a message of the epoch msg carries:
// two coordinators acting in one epoch would have the job's actors take orders from both.
func (c *coordinator) claimEpoch(msg any) {
	m, ok := msg.(interface{ GetEpoch() uint64 })
	if !ok || m.GetEpoch() == 0 {
		return
	}
	e := m.GetEpoch()
	if owner := c.w.epochOwners[e]; owner == nil {
		c.w.epochOwners[e] = c
	} else if owner != c {
		c.w.violation("two coordinators act in epoch %s: %s on %s and %s on %s", jobctl.EpochString(e), owner.id, owner.n.addr, c.id, c.n.addr)
	}
}

// apply carries out what the control asks.
func (c *coordinator) apply(rd jobctl.Ready) {
	w := c.w
	for _, l := range rd.Logs {
		w.logf("%s: %s %v", c.id, l.Msg, l.Attrs)
	}
	for _, s := range rd.Sends {
		c.claimEpoch(s.Msg)
		switch m := s.Msg.(type) {
		case *messages.CheckpointCommitted:
			c.committedBy(m.Iteration)
			if w.actingCoordinator() != c {
				// A superseded coordinator, cut off and healed, that runs on (see the
				// package doc's known gaps): its commit carries no epoch a node could fence.
				w.supersededCommits[m] = true
			}
		case *messages.ShardAssignment:
			c.resumesFrom(m.ResumeFrom)
		}
		w.send(c.n.addr, s.To, s.Msg)
	}
	if p := rd.Pings; p != nil {
		pongs := make([]*messages.Pong, len(p.Nodes))
		for i, a := range p.Nodes {
			if w.reachable(c.n.addr, a) {
				pongs[i] = &messages.Pong{Address: a, Nonce: uint64(i), Capacity: 1}
			}
		}
		w.after(2*w.opt.Latency, func() { c.step(jobctl.Pongs{Epoch: p.Epoch, Nodes: p.Nodes, Pongs: pongs}) })
	}
	for _, t := range rd.Timers {
		w.after(t.After, func() { c.step(jobctl.TimerFired{Timer: t}) })
	}
	if rd.Commit != nil {
		w.after(time.Millisecond, func() { c.step(jobctl.OutputCommitted{}) })
	}
	if rd.Record != nil {
		c.checkRecord(rd)
	}
	if rd.Over {
		w.logf("%s on %s: over", c.id, c.n.addr)
		c.n.coordinatorOver(c)
	}
}

// checkRecord checks an ended job's record against the job's end: it comes with the end, of
// the coordinator's epoch, within JobInfo's bounds, its timeline closed by the end; it says
// what the client was told (the result's iterations, or the error) and went to this node's
// host.
func (c *coordinator) checkRecord(rd jobctl.Ready) {
	w, r := c.w, rd.Record
	if !rd.Over || r.Epoch != c.ctl.Epoch() || len(r.History) > jobctl.MaxInfoHistory || len(r.Events) == 0 || len(r.Events) > jobctl.MaxInfoEvents ||
		r.Events[len(r.Events)-1].Kind != messages.JobEventKind_JOB_EVENT_KIND_ENDED || r.EndedUnixMs != w.now().UnixMilli() {
		w.violation("%s on %s: a record that does not match the job's end (over %v, epoch %s of %s, %d history points, %d events): %v",
			c.id, c.n.addr, rd.Over, jobctl.EpochString(r.Epoch), jobctl.EpochString(c.ctl.Epoch()), len(r.History), len(r.Events), r)
	}
	switch a := c.ctl.Answer().(type) {
	case *messages.JobResult:
		if r.State != messages.JobPhase_JOB_PHASE_DONE || r.Iteration != a.Iterations || r.Stop != a.Stop ||
			len(r.History) > 0 && r.History[len(r.History)-1].Iteration != a.Iterations {
			w.violation("%s on %s: the record of a job done at iteration %d (%s) says %s at %d (%s)", c.id, c.n.addr, a.Iterations, a.Stop,
				r.State.Name(), r.Iteration, r.Stop)
		}
	case *messages.JobError:
		want := messages.JobPhase_JOB_PHASE_FAILED
		if a.Kind == messages.ErrorKind_ERROR_KIND_CANCELED {
			want = messages.JobPhase_JOB_PHASE_CANCELED
		}
		if r.State != want || r.Error != a.Message || r.ErrorKind != a.Kind {
			w.violation("%s on %s: the record of a job that ended with %s (%s) says %s (%s, %s)", c.id, c.n.addr, a.Kind, a.Message,
				r.State.Name(), r.ErrorKind, r.Error)
		}
	}
	if !slices.ContainsFunc(rd.Sends, func(s jobctl.Send) bool {
		_, ok := s.Msg.(*messages.JobRecord)
		return ok && s.To.GetAddress() == c.n.addr
	}) {
		w.violation("%s on %s: the record of the ended job was not sent to its own host", c.id, c.n.addr)
	}
}
