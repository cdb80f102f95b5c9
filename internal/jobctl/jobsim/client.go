package jobsim

import (
	"strings"
	"time"

	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/messages"
)

// client is the job's client: it counts what ends the job.
type client struct {
	w        *World
	result   *messages.JobResult
	err      *messages.JobError
	answers  int
	at       time.Duration
	accepted bool // a coordinator accepted the job
	progress []int64
	// lease is the client's end of the job's lease, which knows the coordinator the client
	// follows; dead is set once the client's process died (Faults.ClientDies).
	lease *jobctl.LeaseClient
	dead  bool
	// errFrom is the node the client's error came from.
	errFrom string
}

// clientAddr is the client's address on the simulated network; ownerToken the token it
// submits its job with (a host gives the job's kept answer only to that token).
const (
	clientAddr = "client"
	ownerToken = "jsim-owner-token"
)

// leaseRenew is how often the client renews its lease (actors.Timeouts.LeaseRenew), and
// lease how long a coordinator goes on without a renewal (actors.DefaultLease).
const (
	leaseRenew = 2 * time.Second
	lease      = 10 * time.Second
)

// step feeds the client's end of the lease (the production jobctl.LeaseClient, as
// actors.Client runs it) and carries out what it asks; it returns the Ready, whose Stale
// drops the acceptance or error stepped.
func (c *client) step(ev any) jobctl.LeaseReady {
	w := c.w
	if c.dead {
		return jobctl.LeaseReady{}
	}
	if err := c.lease.Step(ev); err != nil {
		w.violation("client: %v", err)
		return jobctl.LeaseReady{}
	}
	rd := c.lease.Ready()
	if r := rd.Renew; r != nil {
		w.after(2*w.opt.Latency, func() { c.renewed(r) })
	}
	if rd.Timer > 0 {
		w.after(rd.Timer, func() { c.step(jobctl.LeaseTimerFired{At: w.now()}) })
	}
	if e := rd.End; e != nil && e.Verdict == jobctl.LeaseLost {
		c.receive(&messages.JobError{JobId: "jsim", Kind: messages.ErrorKind_ERROR_KIND_FAILURE, Message: e.Reason})
	}
	return rd
}

// renewed is a renewal's outcome, as the runtime finds it: a coordinator that lives takes it
// (its lease runs on) and acknowledges; a live node without it answers with a dead letter,
// or, asked as the host, with the job's kept answer; a dead node does not answer.
func (c *client) renewed(r *jobctl.LeaseRenewal) {
	w := c.w
	n := w.nodes[r.To.GetAddress()]
	alive := n != nil && n.alive
	if r.Host != "" {
		kept := false
		if alive {
			if a := n.keptAnswer("jsim", ownerToken); a != nil {
				w.send(n.addr, &messages.Pid{Address: clientAddr, Id: clientAddr}, a)
				kept = true
			}
		}
		c.step(jobctl.LeaseHostAnswered{At: w.now(), Kept: kept})
		return
	}
	outcome := jobctl.LeaseUnanswered
	if alive {
		outcome = jobctl.LeaseDeadLetter
		if coord := n.coords[r.To.GetId()]; coord != nil {
			coord.step(jobctl.LeaseRenewed{})
			outcome = jobctl.LeaseAcked
		}
	}
	c.step(jobctl.LeaseRenewAnswered{At: w.now(), Outcome: outcome})
}

// die is the client's process dying (Faults.ClientDies): it renews nothing more and hears
// nothing; the coordinator must find its lease run out and cancel the job.
func (c *client) die() {
	c.w.logf("the client dies")
	c.dead = true
}

func (c *client) receive(msg any) {
	if c.dead {
		return
	}
	c.step(jobctl.LeaseHeard{At: c.w.now()})
	switch m := msg.(type) {
	case *messages.JobAccepted:
		if !c.accepted {
			// The faults hit an accepted job (a submission whose node dies before it answers
			// is the client's own case).
			c.accepted = true
			c.w.scheduleFaults()
		}
		if c.step(jobctl.LeaseAccepted{At: c.w.now(), Coordinator: m.Coordinator, Epoch: m.Epoch}).Stale {
			c.stale("acceptance", m.Epoch)
		}
	case *messages.Progress:
		if m.Warning == "" {
			c.progress = append(c.progress, m.Iteration)
		}
	case *messages.JobResult:
		if c.answer() {
			c.result = m
		}
		c.step(jobctl.LeaseAnswered{Epoch: m.Epoch})
	case *messages.JobError:
		if c.step(jobctl.LeaseAnswered{Epoch: m.Epoch, Error: true}).Stale {
			c.stale("error", m.Epoch)
			return
		}
		if c.answer() {
			c.err = m
		}
	}
}

// stale counts an acceptance or an error of a superseded coordinator that the client's lease
// dropped.
func (c *client) stale(what string, epoch uint64) {
	c.w.stats.StaleWords++
	c.w.logf("the client drops a superseded coordinator's %s (epoch %s)", what, jobctl.EpochString(epoch))
}

// checkLease checks the lease's promise to a client that lives: its job is never canceled
// for the lease (it renews the coordinator of the newest epoch it heard of, which tells it of
// itself until it does, and it drops a superseded coordinator's cancel).
func (c *client) checkLease() {
	if e := c.err; e != nil && !c.dead && strings.Contains(e.Message, "sent no word") {
		follows := "no coordinator: it heard no acceptance"
		if coord := c.lease.Coordinator(); coord != nil {
			follows = "the coordinator on " + coord.Address
		}
		c.w.violation("the job of a live client was canceled for its lease by the coordinator on %s (epoch %s; the client follows %s): %s",
			c.errFrom, jobctl.EpochString(e.Epoch), follows, e.Message)
	}
}

// answer counts an answer and tells whether it is the first: the one the client keeps (as
// actors.Client does; later ones are ignored).
func (c *client) answer() bool {
	c.answers++
	if c.answers > 1 {
		c.w.stats.LateAnswers++
		c.w.logf("a late answer reached the client")
		return false
	}
	c.at = c.w.clock
	return true
}

// takeoverWait is how long the client waits for a job whose coordinator's node is gone to be
// taken over (server.DefaultTakeoverWait).
const takeoverWait = 30 * time.Second

// coordinatorGone is the client seeing its job's coordinator's node leave: as server.Client
// does, it gives the job up unless another node takes it over, or the node comes back, within
// takeoverWait.
func (c *client) coordinatorGone(addr string) {
	if coord := c.lease.Coordinator(); coord == nil || coord.Address != addr || c.answers > 0 {
		return
	}
	c.w.after(takeoverWait, func() {
		if c.answers > 0 || c.lease.Coordinator().GetAddress() != addr || c.w.nodes[addr].alive {
			return
		}
		c.receive(&messages.JobError{JobId: "jsim", Kind: messages.ErrorKind_ERROR_KIND_FAILURE,
			Message: "its coordinator's node died, and no node took the job over (its standby died too, or the cluster lost its majority)"})
	})
}
