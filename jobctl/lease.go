package jobctl

import (
	"fmt"
	"time"

	"github.com/didnmf/didnmf/messages"
)

// A job that is not detached lives on a lease: its client renews it every LeaseConfig.Renew
// while it follows the job, and the job's coordinator cancels the job when no renewal came
// for Config.Lease (the client was killed or cut off). Two machines decide the lease, one at
// each end, in the style of Job: Step takes events that carry their time, Ready returns the
// effects; neither reads a clock, sends or arms anything itself.
//
//   - LeaseClient is the client's end: when to renew, what an unanswered renewal means, and
//     when the client gives the job up as lost because its coordinator is gone and no other
//     spoke of it.
//   - LeaseWatch is the coordinator's end: when the job's client is considered gone.

// LeaseConfig is what the client's end of a job's lease knows: fixed for the job's life.
type LeaseConfig struct {
	// JobID names the job in the verdicts' reasons.
	JobID string
	// Renew is how often the client renews the lease (actors.Timeouts.LeaseRenew); it must
	// be > 0 for a job that is not detached.
	Renew time.Duration
	// Quorum is how long the client waits, once a renewal found the coordinator gone, for a
	// coordinator to speak of the job again (as long as a successor may wait for a majority)
	// before it gives the job up as lost.
	Quorum time.Duration
	// Detached is a job that runs on without its client: the client renews nothing.
	Detached bool
}

// LeaseVerdict says why a lease's end stopped following a job.
type LeaseVerdict uint8

const (
	// LeaseReleased: the client let a (detached) job go; the job runs on.
	LeaseReleased LeaseVerdict = iota + 1
	// LeaseAbandoned: the client's caller gave the job up (its coordinator's node died and
	// nobody took it over, or the client closed); the coordinator is asked to cancel it.
	LeaseAbandoned
	// LeaseLost: the client's renewals found the coordinator gone, and no coordinator spoke
	// of the job for LeaseConfig.Quorum.
	LeaseLost
	// LeaseExpired: the coordinator heard no renewal from the client for Config.Lease.
	LeaseExpired
)

var leaseVerdictNames = [...]string{LeaseReleased: "released", LeaseAbandoned: "abandoned", LeaseLost: "lost", LeaseExpired: "expired"}

func (v LeaseVerdict) String() string {
	if int(v) < len(leaseVerdictNames) && leaseVerdictNames[v] != "" {
		return leaseVerdictNames[v]
	}
	return fmt.Sprintf("LeaseVerdict(%d)", uint8(v))
}

// LeaseEnd is a lease's end giving the job up.
type LeaseEnd struct {
	Verdict LeaseVerdict
	// Reason is the error the job ends with ("" for LeaseReleased: no error). For
	// LeaseAbandoned it is the caller's Err.
	Reason string
	// Err is the caller's error for LeaseAbandoned (nil otherwise).
	Err error
}

// LeaseRenewal is one lease renewal to send, a request whose outcome comes back as a
// LeaseRenewAnswered event.
type LeaseRenewal struct {
	// To is the coordinator; Host, when set, is the address of the node whose host is asked
	// instead (the coordinator is gone: its host keeps the job's answer if the job ended
	// there), and the outcome comes back as a LeaseHostAnswered event.
	To   *messages.Pid
	Host string
}

// LeaseReady is what a lease's end asks its runtime to do after a Step.
type LeaseReady struct {
	// Renew, when set, is a renewal to send now.
	Renew *LeaseRenewal
	// Timer, when > 0, asks for a LeaseTimerFired event that long from now (at most one is
	// armed at a time: the machine asks again only after the last one fired).
	Timer time.Duration
	// Cancel, when set, asks this coordinator to cancel the job.
	Cancel *messages.Pid
	// End, when set (once), ends the job at this end of the lease with the verdict.
	End *LeaseEnd
}

// The client's events.

// LeaseAccepted is a coordinator accepting the job (messages.JobAccepted): the first starts
// the renewals; a later one with Takeover set moves them to the coordinator that took the job
// over.
type LeaseAccepted struct {
	At          time.Time
	Coordinator *messages.Pid
	Takeover    bool
}

// LeaseHeard is a coordinator sending the client anything of the job.
type LeaseHeard struct{ At time.Time }

// LeaseTimerFired is the timer LeaseReady.Timer asked for coming due.
type LeaseTimerFired struct{ At time.Time }

// LeaseRenewOutcome is how a renewal request ended.
type LeaseRenewOutcome uint8

const (
	// LeaseAcked: the coordinator answered (messages.LeaseAck).
	LeaseAcked LeaseRenewOutcome = iota + 1
	// LeaseUnanswered: no answer in time (the node is unreachable, slow or down): the
	// membership judges a node that is gone, not the lease.
	LeaseUnanswered
	// LeaseDeadLetter: the coordinator's node answered that no such actor lives there (it
	// ended the job, and its answer was lost, or it was superseded).
	LeaseDeadLetter
)

// LeaseRenewAnswered is the outcome of a LeaseReady.Renew sent to the coordinator.
type LeaseRenewAnswered struct {
	At      time.Time
	Outcome LeaseRenewOutcome
}

// LeaseHostAnswered is the outcome of a renewal sent to the coordinator's host: Kept is set
// when the host answered with the job's kept answer (the runtime hands it to the client as if
// it had come the first time; a LeaseAnswered follows).
type LeaseHostAnswered struct {
	At   time.Time
	Kept bool
}

// LeaseAnswered is the job's answer (a result or an error) reaching the client, or the client
// ending the job on its own account: the renewals stop.
type LeaseAnswered struct{}

// LeaseRelease is the client letting the job go (Job.Release).
type LeaseRelease struct{}

// LeaseAbandon is the client's caller giving the job up with Err (Job.Abandon, Client.Close).
type LeaseAbandon struct{ Err error }

// leaseClientPhase is where the client's end is.
type leaseClientPhase uint8

const (
	leaseSubmitted leaseClientPhase = iota // no coordinator accepted the job yet
	leaseFollowing                         // following the job
	leaseOver                              // answered, released, abandoned or lost
)

// LeaseClient is the client's end of a job's lease as a deterministic state machine: it
// renews the lease every Renew while it follows the job, and it tells what an unanswered
// renewal means. A renewal nobody answers in time means nothing here (the node may be slow,
// or gone: the membership judges that). A renewal answered by a dead letter means the
// coordinator is gone: the client asks the coordinator's host, which keeps the job's answer if
// the job ended there; if the host keeps none, and no coordinator speaks of the job for
// Quorum from then (a successor taking it over would), the client gives the job up as lost.
//
// A LeaseClient is not safe for concurrent use.
type LeaseClient struct {
	cfg   LeaseConfig
	phase leaseClientPhase
	coord *messages.Pid
	// inflight is set while a renewal (to the coordinator or its host) awaits its outcome:
	// the timer then fires without a renewal.
	inflight bool
	armed    bool
	// heard is when a coordinator last spoke of the job; goneAt when a renewal first found
	// the coordinator gone since (zero: not gone).
	heard, goneAt time.Time
	ready         LeaseReady
}

// NewLeaseClient returns the client's end of the lease of a job just submitted.
func NewLeaseClient(cfg LeaseConfig) *LeaseClient {
	return &LeaseClient{cfg: cfg}
}

// Coordinator returns the coordinator the client follows (nil before acceptance).
func (c *LeaseClient) Coordinator() *messages.Pid { return c.coord }

// Over tells whether the client stopped following the job.
func (c *LeaseClient) Over() bool { return c.phase == leaseOver }

// Step feeds the client's end one event. It returns an error for an event it does not know
// (and changes nothing); events after the end are ignored.
func (c *LeaseClient) Step(ev any) error {
	switch e := ev.(type) {
	case LeaseAccepted:
		c.accepted(e)
	case LeaseHeard:
		if e.At.After(c.heard) {
			c.heard = e.At
		}
	case LeaseTimerFired:
		c.fired()
	case LeaseRenewAnswered:
		c.renewAnswered(e)
	case LeaseHostAnswered:
		c.hostAnswered(e)
	case LeaseAnswered:
		c.phase = leaseOver
	case LeaseRelease:
		c.end(LeaseEnd{Verdict: LeaseReleased})
	case LeaseAbandon:
		if c.phase != leaseOver {
			c.ready.Cancel = c.coord
		}
		reason := ""
		if e.Err != nil {
			reason = e.Err.Error()
		}
		c.end(LeaseEnd{Verdict: LeaseAbandoned, Reason: reason, Err: e.Err})
	default:
		return fmt.Errorf("lease client: unknown event %T", ev)
	}
	return nil
}

// Ready returns the effects asked for since the last call, and forgets them.
func (c *LeaseClient) Ready() LeaseReady {
	r := c.ready
	c.ready = LeaseReady{}
	return r
}

func (c *LeaseClient) accepted(e LeaseAccepted) {
	if e.At.After(c.heard) {
		c.heard = e.At
	}
	switch {
	case c.phase == leaseOver || e.Coordinator == nil:
	case c.phase == leaseSubmitted:
		c.phase, c.coord = leaseFollowing, e.Coordinator
		c.arm()
	case e.Takeover:
		c.coord = e.Coordinator // renewals go to the coordinator that took the job over
	}
}

// arm asks for the renewal timer (none for a detached job).
func (c *LeaseClient) arm() {
	if c.cfg.Detached || c.armed || c.cfg.Renew <= 0 {
		return
	}
	c.armed = true
	c.ready.Timer = c.cfg.Renew
}

// fired renews the lease unless a renewal still awaits its outcome, and arms the timer again.
func (c *LeaseClient) fired() {
	c.armed = false
	if c.phase != leaseFollowing {
		return
	}
	if !c.inflight {
		c.inflight = true
		c.ready.Renew = &LeaseRenewal{To: c.coord}
	}
	c.arm()
}

func (c *LeaseClient) renewAnswered(e LeaseRenewAnswered) {
	if c.phase != leaseFollowing || !c.inflight {
		return
	}
	if e.Outcome != LeaseDeadLetter {
		c.inflight = false // alive, or unreachable: the membership judges a node that is gone
		return
	}
	// The coordinator is gone: its host keeps the job's answer if the job ended there.
	c.ready.Renew = &LeaseRenewal{To: c.coord, Host: c.coord.GetAddress()}
}

func (c *LeaseClient) hostAnswered(e LeaseHostAnswered) {
	if c.phase != leaseFollowing || !c.inflight {
		return
	}
	c.inflight = false
	if e.Kept {
		return // the kept answer ends the job (LeaseAnswered)
	}
	switch {
	case c.goneAt.IsZero() || c.heard.After(c.goneAt):
		c.goneAt = e.At // first found gone, or a coordinator spoke since: wait again
	case e.At.Sub(c.goneAt) >= c.cfg.Quorum:
		c.end(LeaseEnd{Verdict: LeaseLost, Reason: fmt.Sprintf(
			"job %s: its coordinator on node %s is gone and no answer reached this client (lost on a connection that broke?); no coordinator spoke of the job for %v",
			c.cfg.JobID, c.coord.GetAddress(), c.cfg.Quorum)})
	}
}

// end stops following the job with a verdict (once).
func (c *LeaseClient) end(e LeaseEnd) {
	if c.phase == leaseOver {
		return
	}
	c.phase = leaseOver
	c.ready.End = &e
}

// The coordinator's events.

// LeaseStart is the coordinator beginning the job, or taking it over: the lease runs from
// then.
type LeaseStart struct{ At time.Time }

// LeaseRenewalCame is a renewal from the job's owner reaching the coordinator.
type LeaseRenewalCame struct{ At time.Time }

// LeaseTick is the coordinator's clock: the watch checks the lease.
type LeaseTick struct{ At time.Time }

// LeaseWatch is the coordinator's end of a job's lease: it declares the client gone (the
// verdict LeaseExpired) when no renewal came for Lease since the job began, was taken over,
// or last heard one. A detached job, or a Lease <= 0, has no lease.
//
// A LeaseWatch is not safe for concurrent use.
type LeaseWatch struct {
	jobID    string
	lease    time.Duration
	detached bool
	started  bool
	over     bool
	at       time.Time // the lease runs from then
	ready    LeaseReady
}

// NewLeaseWatch returns the coordinator's end of job's lease of length lease.
func NewLeaseWatch(jobID string, lease time.Duration, detached bool) *LeaseWatch {
	return &LeaseWatch{jobID: jobID, lease: lease, detached: detached}
}

// Step feeds the watch one event; it returns an error for an event it does not know (and
// changes nothing).
func (w *LeaseWatch) Step(ev any) error {
	switch e := ev.(type) {
	case LeaseStart:
		w.started, w.at = true, e.At
	case LeaseRenewalCame:
		if w.started && e.At.After(w.at) {
			w.at = e.At
		}
	case LeaseTick:
		if w.over || !w.started || w.detached || w.lease <= 0 || e.At.Sub(w.at) <= w.lease {
			return nil
		}
		w.over = true
		w.ready.End = &LeaseEnd{Verdict: LeaseExpired, Reason: fmt.Sprintf(
			"job %s canceled: its client sent no word for %v (killed, or cut off from the cluster); submit with --detach for a job that runs on without its client",
			w.jobID, w.lease)}
	default:
		return fmt.Errorf("lease watch: unknown event %T", ev)
	}
	return nil
}

// Ready returns the effects asked for since the last call, and forgets them.
func (w *LeaseWatch) Ready() LeaseReady {
	r := w.ready
	w.ready = LeaseReady{}
	return r
}
