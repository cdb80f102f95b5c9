package jobctl

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/didnmf/didnmf/messages"
)

// TestLeaseData runs the scenarios in testdata/lease: each command steps the client's end
// (LeaseClient) or the coordinator's end (LeaseWatch) of a job's lease and prints what its
// Ready asks for. Times are offsets from the scenario's start ("at=2s").
//
// Commands, the client's end:
//
//	client job=ID renew=D quorum=D [detached]   a new LeaseClient
//	accepted at=T coord=ADDR/ID [takeover]      LeaseAccepted
//	heard at=T                                  LeaseHeard
//	fire at=T                                   LeaseTimerFired
//	renew-answer at=T outcome=acked|unanswered|dead-letter
//	host-answer at=T [kept]                     LeaseHostAnswered
//	answered                                    LeaseAnswered
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
				client = NewLeaseClient(LeaseConfig{JobID: job, Renew: leaseDuration(t, d, "renew"), Quorum: leaseDuration(t, d, "quorum"),
					Detached: d.HasArg("detached")})
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
				ev = LeaseAccepted{At: at(), Coordinator: &messages.Pid{Address: addr, Id: id}, Takeover: d.HasArg("takeover")}
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
				ev = LeaseAnswered{}
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
