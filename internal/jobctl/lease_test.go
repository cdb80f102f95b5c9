package jobctl

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/didnmf/didnmf/internal/jobctl/internal/bugs"
	"github.com/didnmf/didnmf/messages"
)

// TestLeaseData runs the scenarios in testdata/lease: each command steps the client's end
// (LeaseClient) or the coordinator's end (LeaseWatch) of a job's lease and prints what its
// Ready asks for. Times are offsets from the scenario's start ("at=2s").
//
// Commands, the client's end:
//
//	client job=ID renew=D quorum=D [detached] [bug=keep-first]
//	                                            a new LeaseClient (with a planted bug)
//	accepted at=T coord=ADDR/ID epoch=E         LeaseAccepted
//	heard at=T                                  LeaseHeard
//	fire at=T                                   LeaseTimerFired
//	renew-answer at=T outcome=acked|unanswered|dead-letter
//	host-answer at=T [kept]                     LeaseHostAnswered
//	answered [epoch=E error]                    LeaseAnswered (an error of epoch E)
//	release                                     LeaseRelease
//	abandon (the error's text as input)         LeaseAbandon
//
// and the coordinator's end:
//
//	watch job=ID lease=D [detached]             a new LeaseWatch
//	start at=T                                  LeaseStart
//	renewal at=T                                LeaseRenewalCame
//	tick at=T                                   LeaseTick
func TestLeaseData(t *testing.T) {
	datadriven.Walk(t, "testdata/lease", func(t *testing.T, path string) {
		var (
			client *LeaseClient
			watch  *LeaseWatch
		)
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			at := func() time.Time { return start.Add(leaseDuration(t, d, "at")) }
			var ev any
			switch d.Cmd {
			case "client":
				var job string
				d.ScanArgs(t, "job", &job)
				cfg := LeaseConfig{JobID: job, Renew: leaseDuration(t, d, "renew"), Quorum: leaseDuration(t, d, "quorum"),
					Detached: d.HasArg("detached")}
				if d.HasArg("bug") {
					cfg.Bugs = bugs.LeaseKeepsFirstCoordinator
				}
				client = NewLeaseClient(cfg)
				return "ok"
			case "watch":
				var job string
				d.ScanArgs(t, "job", &job)
				watch = NewLeaseWatch(job, leaseDuration(t, d, "lease"), d.HasArg("detached"))
				return "ok"
			case "accepted":
				var coord string
				d.ScanArgs(t, "coord", &coord)
				addr, id, _ := strings.Cut(coord, "/")
				ev = LeaseAccepted{At: at(), Coordinator: &messages.Pid{Address: addr, Id: id}, Epoch: leaseEpoch(t, d)}
			case "heard":
				ev = LeaseHeard{At: at()}
			case "fire":
				ev = LeaseTimerFired{At: at()}
			case "renew-answer":
				var outcome string
				d.ScanArgs(t, "outcome", &outcome)
				o, ok := map[string]LeaseRenewOutcome{"acked": LeaseAcked, "unanswered": LeaseUnanswered, "dead-letter": LeaseDeadLetter}[outcome]
				if !ok {
					d.Fatalf(t, "unknown outcome %q", outcome)
				}
				ev = LeaseRenewAnswered{At: at(), Outcome: o}
			case "host-answer":
				ev = LeaseHostAnswered{At: at(), Kept: d.HasArg("kept")}
			case "answered":
				ev = LeaseAnswered{Epoch: leaseEpoch(t, d), Error: d.HasArg("error")}
			case "release":
				ev = LeaseRelease{}
			case "abandon":
				ev = LeaseAbandon{Err: errors.New(strings.TrimSpace(d.Input))}
			case "start":
				ev = LeaseStart{At: at()}
			case "renewal":
				ev = LeaseRenewalCame{At: at()}
			case "tick":
				ev = LeaseTick{At: at()}
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			var (
				err error
				rd  LeaseReady
			)
			switch ev.(type) {
			case LeaseStart, LeaseRenewalCame, LeaseTick:
				if watch == nil {
					d.Fatalf(t, "%s before watch", d.Cmd)
				}
				err = watch.Step(ev)
				rd = watch.Ready()
			default:
				if client == nil {
					d.Fatalf(t, "%s before client", d.Cmd)
				}
				err = client.Step(ev)
				rd = client.Ready()
			}
			if err != nil {
				return "error: " + err.Error()
			}
			return leaseReadyString(rd)
		})
	})
}

// leaseDuration reads the duration argument key (0 when absent).
func leaseDuration(t *testing.T, d *datadriven.TestData, key string) time.Duration {
	if !d.HasArg(key) {
		return 0
	}
	var s string
	d.ScanArgs(t, key, &s)
	v, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return v
}

// leaseEpoch reads the epoch argument (0 when absent), written as EpochString shows it
// ("1.0": the first generation after a takeover).
func leaseEpoch(t *testing.T, d *datadriven.TestData) uint64 {
	if !d.HasArg("epoch") {
		return 0
	}
	var s string
	d.ScanArgs(t, "epoch", &s)
	gen, rec, ok := strings.Cut(s, ".")
	if !ok {
		gen, rec = "0", s
	}
	g, err1 := strconv.ParseUint(gen, 10, 32)
	r, err2 := strconv.ParseUint(rec, 10, 32)
	if err1 != nil || err2 != nil {
		d.Fatalf(t, "epoch %q: want N or GEN.N", s)
	}
	return g<<EpochGenShift | r
}

// leaseReadyString prints a LeaseReady one effect a line ("ok" for none).
func leaseReadyString(rd LeaseReady) string {
	var b strings.Builder
	pid := func(p *messages.Pid) string { return p.GetAddress() + "/" + p.GetId() }
	if r := rd.Renew; r != nil && r.Host == "" {
		fmt.Fprintf(&b, "renew to %s\n", pid(r.To))
	} else if r != nil {
		fmt.Fprintf(&b, "renew to the host of %s\n", r.Host)
	}
	if rd.Cancel != nil {
		fmt.Fprintf(&b, "cancel at %s\n", pid(rd.Cancel))
	}
	if rd.Timer > 0 {
		fmt.Fprintf(&b, "timer in %v\n", rd.Timer)
	}
	if rd.Announce {
		b.WriteString("announce: tell the client again\n")
	}
	if rd.Stale {
		b.WriteString("stale: dropped\n")
	}
	if e := rd.End; e != nil {
		fmt.Fprintf(&b, "end: %v", e.Verdict)
		if e.Reason != "" {
			fmt.Fprintf(&b, ": %s", e.Reason)
		}
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		return "ok"
	}
	return b.String()
}

// TestLeaseUnknownEvent: both ends refuse an event they do not know, and change nothing.
func TestLeaseUnknownEvent(t *testing.T) {
	t.Parallel()
	c := NewLeaseClient(LeaseConfig{JobID: "j", Renew: time.Second})
	if err := c.Step(struct{}{}); err == nil {
		t.Error("LeaseClient.Step took an unknown event")
	}
	if err := c.Step(LeaseRenewed{}); err == nil {
		t.Error("LeaseClient.Step took the Job's LeaseRenewed")
	}
	if rd := c.Ready(); rd != (LeaseReady{}) || c.Over() || c.Coordinator() != nil {
		t.Errorf("an unknown event changed the client's end: %+v", rd)
	}
	w := NewLeaseWatch("j", time.Second, false)
	if err := w.Step(Tick{}); err == nil {
		t.Error("LeaseWatch.Step took the Job's Tick")
	}
}

// TestLeaseVerdictString names every verdict, and an unknown one by its number.
func TestLeaseVerdictString(t *testing.T) {
	t.Parallel()
	for v, want := range map[LeaseVerdict]string{LeaseReleased: "released", LeaseAbandoned: "abandoned", LeaseLost: "lost",
		LeaseExpired: "expired", 0: "LeaseVerdict(0)", 9: "LeaseVerdict(9)"} {
		if got := v.String(); got != want {
			t.Errorf("LeaseVerdict(%d).String() = %q, want %q", uint8(v), got, want)
		}
	}
}

// TestJobTellsItsClientUntilRenewed: a coordinator's acceptance names its epoch; it is told
// again at every tick until the client's first renewal (a lost JobAccepted costs a tick), not
// after; the lease's cancel, its error, names the epoch too, so that a client following a
// successor can drop it; and a coordinator that takes the job over tells the client of itself
// in its new generation, again until a renewal reaches it.
func TestJobTellsItsClientUntilRenewed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Lease: 10 * time.Second})
	accepted := func(h *harness) []*messages.JobAccepted {
		var out []*messages.JobAccepted
		for _, s := range h.sends {
			if a, ok := s.Msg.(*messages.JobAccepted); ok && s.To.GetAddress() == "client" {
				out = append(out, a)
			}
		}
		return out
	}
	if a := accepted(h); len(a) != 1 || a[0].Epoch != 1 || a[0].Takeover {
		t.Fatalf("placement told the client %v, want one acceptance of epoch 1", a)
	}
	for i := 1; i <= 2; i++ {
		h.now = h.now.Add(time.Second)
		h.step(Tick{})
		if a := accepted(h); len(a) != 1+i || a[i].Epoch != h.j.epoch {
			t.Fatalf("tick %d without a renewal: acceptances %v, want %d", i, a, 1+i)
		}
	}
	h.now = h.now.Add(100 * time.Millisecond)
	h.step(LeaseRenewed{})
	for range 5 {
		h.now = h.now.Add(time.Second)
		h.step(Tick{})
	}
	if a := accepted(h); len(a) != 3 {
		t.Fatalf("the client was told again after its renewal: %d acceptances", len(a))
	}
	h.now = h.now.Add(10 * time.Second)
	h.step(Tick{})
	var cancel *messages.JobError
	for _, s := range h.sends {
		if e, ok := s.Msg.(*messages.JobError); ok && s.To.GetAddress() == "client" {
			cancel = e
		}
	}
	if cancel == nil || cancel.Kind != messages.ErrorKind_ERROR_KIND_CANCELED || cancel.Epoch != h.j.epoch {
		t.Fatalf("the lease's cancel %v: want a cancel of epoch %d", cancel, h.j.epoch)
	}

	h = newHarness(t, Config{Lease: 10 * time.Second})
	st := h.sends[len(h.sends)-1].Msg.(*messages.JobState)
	k := &harness{t: t, now: t0.Add(time.Minute)}
	var err error
	if k.j, err = New(Config{Self: &messages.Pid{Address: "b", Id: "host/j-coord"}, Cluster: true, FanIn: 8, Lease: 10 * time.Second}, st.Submit); err != nil {
		t.Fatal(err)
	}
	k.step(TakeOver{State: st, Cause: "a died", Workers: []string{"b", "c"}})
	k.now = k.now.Add(time.Second)
	k.step(Tick{})
	a := accepted(k)
	if len(a) != 2 || !a[0].Takeover || a[0].Epoch != 1<<EpochGenShift || a[1].Epoch < a[0].Epoch {
		t.Fatalf("the successor told the client %v: want two takeover acceptances of generation 1", a)
	}
	k.step(LeaseRenewed{})
	k.now = k.now.Add(time.Second)
	k.step(Tick{})
	if n := len(accepted(k)); n != 2 {
		t.Fatalf("the successor told the client again after its renewal: %d acceptances", n)
	}
}
