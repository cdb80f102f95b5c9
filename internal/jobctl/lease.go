package jobctl

import (
	"fmt"
	"time"

	"github.com/didnmf/didnmf/internal/jobctl/internal/bugs"
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
//   - LeaseWatch is the coordinator's end: when the job's client is considered gone, and
//     when to tell the client again which coordinator it follows.
//
// Two rules close the gaps a lost or late message would open. A coordinator tells its client
// again that it coordinates the job (messages.JobAccepted) at every tick until the client's
// first renewal reaches it, and the client renews at once when it learns of a coordinator: a
// lost acceptance costs a second, not the job. And every acceptance and every error carries
// the epoch of the coordinator that sent it (a takeover starts a higher generation): the
// client follows the coordinator of the highest epoch it heard of and ignores an acceptance
// or an error of a lower one, so that a superseded coordinator, whose lease runs out because
// the client renews its successor, cannot end the job at the client. A result is taken from
// any coordinator: it is the job's, with the same bits whichever coordinator reached it.

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
	// Bugs plants deliberate bugs (the simulator's bite test); production leaves it empty.
	Bugs bugs.Set
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
	// Announce (the coordinator's end) asks the coordinator to tell the client again that it
	// coordinates the job (messages.JobAccepted): no renewal came since the lease began, so
	// the client may not have heard.
	Announce bool
	// Stale (the client's end) says that the acceptance or the answer just stepped comes from
	// a coordinator of an epoch older than the newest the client heard of: the runtime drops
	// it.
	Stale bool
}

// The client's events.

// LeaseAccepted is a coordinator accepting the job (messages.JobAccepted) in its Epoch: the
// first starts the renewals; one of a higher epoch than the client heard of moves them to that
// coordinator (it took the job over); one of a lower epoch is stale.
type LeaseAccepted struct {
	At          time.Time
	Coordinator *messages.Pid
	Epoch       uint64
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

// LeaseAnswered is the job's answer reaching the client (a result, or an error of the
// coordinator's Epoch), or the client ending the job on its own account (the zero value): the
// renewals stop. An error of an epoch older than the newest the client heard of is stale
// (LeaseReady.Stale) and changes nothing; a result never is, nor an error of epoch 0 (not a
// coordinator's: a host's that saw the job's coordinator fail).
type LeaseAnswered struct {
	Epoch uint64
	Error bool
}

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
// It follows the coordinator of the highest epoch it heard of, renewing at once when it learns
// of one, and calls an acceptance or an error of a lower epoch stale (LeaseReady.Stale).
//
// A LeaseClient is not safe for concurrent use.
type LeaseClient struct {
	cfg   LeaseConfig
	phase leaseClientPhase
	coord *messages.Pid
	// epoch is the highest coordinator epoch the client heard of.
	epoch uint64
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
		if e.Error && e.Epoch != 0 && e.Epoch < c.epoch {
			c.ready.Stale = true // a superseded coordinator's word
			return nil
		}
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
	switch {
	case c.phase == leaseOver || e.Coordinator == nil:
	case e.Epoch < c.epoch:
		c.ready.Stale = true // a superseded coordinator's acceptance
	case c.phase == leaseSubmitted:
		c.phase, c.coord, c.epoch = leaseFollowing, e.Coordinator, e.Epoch
		c.renewNow()
		c.arm()
	case e.Epoch > c.epoch:
		// Renewals go to the coordinator that took the job over, the first at once.
		c.epoch = e.Epoch
		if !c.cfg.Bugs.Has(bugs.LeaseKeepsFirstCoordinator) {
			c.coord = e.Coordinator
			c.renewNow()
		}
	}
	if !c.ready.Stale && e.At.After(c.heard) {
		c.heard = e.At
	}
}

// renewNow renews the lease at once, unless a renewal awaits its outcome (the timer then
// renews): the coordinator, which tells the client of itself until a renewal comes, learns
// the client heard it.
func (c *LeaseClient) renewNow() {
	if c.cfg.Detached || c.cfg.Renew <= 0 || c.inflight {
		return
	}
	c.inflight = true
	c.ready.Renew = &LeaseRenewal{To: c.coord}
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
	c.renewNow()
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
// or last heard one; until the first renewal since then, it asks at every tick to tell the
// client again that this coordinator has the job (LeaseReady.Announce). A detached job, or a
// Lease <= 0, has no lease.
//
// A LeaseWatch is not safe for concurrent use.
type LeaseWatch struct {
	jobID    string
	lease    time.Duration
	detached bool
	started  bool
	over     bool
	renewed  bool      // a renewal came since the lease began
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
		w.started, w.renewed, w.at = true, false, e.At
	case LeaseRenewalCame:
		if w.started {
			w.renewed = true
			if e.At.After(w.at) {
				w.at = e.At
			}
		}
	case LeaseTick:
		if w.over || !w.started || w.detached || w.lease <= 0 {
			return nil
		}
		if e.At.Sub(w.at) <= w.lease {
			w.ready.Announce = !w.renewed
			return nil
		}
		w.over = true
		w.ready.End = &LeaseEnd{Verdict: LeaseExpired, Reason: fmt.Sprintf(
			"job %s canceled: its client sent no word for %v (killed, or cut off from the cluster); submit it detached (factorize --detach; over HTTP, with out_shared) for a job that runs on without its client",
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
