package cluster

import (
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func TestTimingOrDefault(t *testing.T) {
	d := DefaultTiming()
	for _, c := range []struct {
		name string
		in   Timing
		want Timing
	}{
		{"zero", Timing{}, d},
		{"negative", Timing{ProbeInterval: -1, IndirectChecks: -1, TCPTimeout: -1}, d},
		{"complete", d, d},
		{"two fields", Timing{ProbeInterval: time.Second, SuspicionMult: 6},
			func() Timing { w := d; w.ProbeInterval, w.SuspicionMult = time.Second, 6; return w }()},
	} {
		if got := c.in.orDefault(); got != c.want {
			t.Errorf("%s: %+v.orDefault() = %+v, want %+v", c.name, c.in, got, c.want)
		}
	}
}

// TestDefaultTimingTolerance: a node is declared dead only after it was silent for 2 s or
// more (a loaded machine's nodes must not look dead), and a probe waits for the direct ack
// less than its interval.
func TestDefaultTimingTolerance(t *testing.T) {
	d := DefaultTiming()
	if silent := time.Duration(d.SuspicionMult) * d.ProbeInterval; silent < 2*time.Second {
		t.Errorf("suspicion window %v (SuspicionMult x ProbeInterval), want >= 2s", silent)
	}
	if d.ProbeTimeout >= d.ProbeInterval {
		t.Errorf("ProbeTimeout %v >= ProbeInterval %v", d.ProbeTimeout, d.ProbeInterval)
	}
}

func TestTimingApply(t *testing.T) {
	tm := Timing{ProbeInterval: 1, ProbeTimeout: 2, IndirectChecks: 3, SuspicionMult: 4, SuspicionMaxTimeoutMult: 5,
		GossipInterval: 6, GossipNodes: 7, RetransmitMult: 8, TCPTimeout: 9, PushPullInterval: 10, DeadNodeReclaimTime: 11}
	mc := memberlist.DefaultLocalConfig()
	tm.apply(mc)
	got := Timing{ProbeInterval: mc.ProbeInterval, ProbeTimeout: mc.ProbeTimeout, IndirectChecks: mc.IndirectChecks,
		SuspicionMult: mc.SuspicionMult, SuspicionMaxTimeoutMult: mc.SuspicionMaxTimeoutMult, GossipInterval: mc.GossipInterval,
		GossipNodes: mc.GossipNodes, RetransmitMult: mc.RetransmitMult, TCPTimeout: mc.TCPTimeout,
		PushPullInterval: mc.PushPullInterval, DeadNodeReclaimTime: mc.DeadNodeReclaimTime}
	if got != tm {
		t.Errorf("memberlist config after apply(%+v): %+v", tm, got)
	}
}
