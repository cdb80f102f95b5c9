package actors

import (
	"testing"
	"time"
)

func TestTimeoutsPresets(t *testing.T) {
	lan := DefaultLAN()
	for _, c := range []struct {
		name string
		t    Timeouts
	}{
		{"DefaultLAN", lan},
		{"DefaultTimeouts", DefaultTimeouts()},
		{"Loopback", Loopback()},
	} {
		for _, f := range []struct {
			field string
			v     time.Duration
		}{{"Ping", c.t.Ping}, {"Quorum", c.t.Quorum}, {"LeaseRenew", c.t.LeaseRenew}, {"CheckpointFetch", c.t.CheckpointFetch},
			{"Stall", c.t.Stall}, {"Orphan", c.t.Orphan}, {"StreamIdle", c.t.StreamIdle},
			{"DataRetry", c.t.DataRetry}, {"DataAckEvery", c.t.DataAckEvery}, {"DataAckTimeout", c.t.DataAckTimeout}} {
			if f.v <= 0 {
				t.Errorf("%s: %s is %v, want > 0 (a zero field would be taken from DefaultTimeouts)", c.name, f.field, f.v)
			}
		}
		if c.t != c.t.orDefault() {
			t.Errorf("%s: orDefault changed a complete preset: %+v -> %+v", c.name, c.t, c.t.orDefault())
		}
		// A client renews its lease at least twice before a node's default lease runs out.
		if 2*c.t.LeaseRenew >= DefaultLease {
			t.Errorf("%s: LeaseRenew %v renews fewer than twice per DefaultLease %v", c.name, c.t.LeaseRenew, DefaultLease)
		}
		// A node keeps an orphaned job's actors past a takeover's wait for a majority.
		if c.t.Orphan <= c.t.Quorum {
			t.Errorf("%s: Orphan %v is not longer than Quorum %v", c.name, c.t.Orphan, c.t.Quorum)
		}
		// One machine's nodes share its cores: a wait that load stretches is no shorter than on
		// a LAN, or a loaded node would look unreachable.
		if c.t.Ping < lan.Ping || c.t.CheckpointFetch < lan.CheckpointFetch {
			t.Errorf("%s: Ping %v, CheckpointFetch %v shorter than DefaultLAN's %v, %v", c.name, c.t.Ping, c.t.CheckpointFetch, lan.Ping, lan.CheckpointFetch)
		}
	}
	if DefaultTimeouts() != lan {
		t.Errorf("DefaultTimeouts %+v, want DefaultLAN %+v", DefaultTimeouts(), lan)
	}
}

func TestTimeoutsOrDefault(t *testing.T) {
	d := DefaultTimeouts()
	for _, c := range []struct {
		name string
		in   Timeouts
		want Timeouts
	}{
		{"zero", Timeouts{}, d},
		{"negative", Timeouts{Ping: -1, Quorum: -1, LeaseRenew: -1, CheckpointFetch: -1, Stall: -1, Orphan: -1, StreamIdle: -1,
			DataRetry: -1, DataAckEvery: -1, DataAckTimeout: -1}, d},
		{"one field", Timeouts{Ping: 500 * time.Millisecond},
			Timeouts{Ping: 500 * time.Millisecond, Quorum: d.Quorum, LeaseRenew: d.LeaseRenew, CheckpointFetch: d.CheckpointFetch, Stall: d.Stall, Orphan: d.Orphan, StreamIdle: d.StreamIdle,
				DataRetry: d.DataRetry, DataAckEvery: d.DataAckEvery, DataAckTimeout: d.DataAckTimeout}},
		{"preset changed", func() Timeouts { l := Loopback(); l.LeaseRenew = time.Second; return l }(),
			Timeouts{Ping: Loopback().Ping, Quorum: Loopback().Quorum, LeaseRenew: time.Second, CheckpointFetch: Loopback().CheckpointFetch,
				Stall: Loopback().Stall, Orphan: Loopback().Orphan, StreamIdle: Loopback().StreamIdle,
				DataRetry: Loopback().DataRetry, DataAckEvery: Loopback().DataAckEvery, DataAckTimeout: Loopback().DataAckTimeout}},
	} {
		if got := c.in.orDefault(); got != c.want {
			t.Errorf("%s: %+v.orDefault() = %+v, want %+v", c.name, c.in, got, c.want)
		}
	}
}
