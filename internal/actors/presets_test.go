package actors

import (
	"reflect"
	"strings"
	"testing"
)

// TestNodePresetIsComplete: a preset leaves no limit, quota or wait to a zero default, and a
// node started from it runs with exactly those values.
func TestNodePresetIsComplete(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    Timeouts
	}{{"LAN", DefaultLAN()}, {"loopback", Loopback()}} {
		p := NodePreset(tc.t, 1, 1<<30)
		for _, f := range []struct {
			field string
			v     int64
		}{{"Threads", int64(p.Threads)}, {"Memory", p.Memory}, {"Capacity", int64(p.Capacity)}, {"MaxShards", int64(p.MaxShards)},
			{"MaxJobs", int64(p.MaxJobs)}, {"Lease", int64(p.Lease)}, {"OwnerMaxJobs", int64(p.OwnerMaxJobs)},
			{"OwnerMaxShards", int64(p.OwnerMaxShards)}, {"OwnerMemory", p.OwnerMemory}, {"OwnerMaxStreams", int64(p.OwnerMaxStreams)},
			{"MaxRestarts", int64(p.MaxRestarts)}} {
			if f.v <= 0 {
				t.Errorf("%s: %s = %d, want it set", tc.name, f.field, f.v)
			}
		}
		if p.Timeouts.orDefault() != p.Timeouts {
			t.Errorf("%s: waits %+v leave fields to the default", tc.name, p.Timeouts)
		}
		p.Insecure = true
		n, err := StartNode(p)
		if err != nil {
			t.Fatal(err)
		}
		got := n.cfg
		n.Close()
		got.Host, got.Port, got.Insecure, got.Logger, got.DataDir = p.Host, p.Port, p.Insecure, p.Logger, p.DataDir
		got.Pool, got.Partition, got.Roots, got.Members = p.Pool, p.Partition, p.Roots, p.Members
		if !reflect.DeepEqual(got, p) {
			t.Errorf("%s: the node runs with\n%+v\nnot the preset\n%+v", tc.name, got, p)
		}
	}
}

// TestNodeRefusesNegativeMaxRestarts: a negative restart cap is a mistake, not "none": the node
// does not start, and says which field is wrong.
func TestNodeRefusesNegativeMaxRestarts(t *testing.T) {
	p := NodePreset(Loopback(), 1, 1<<30)
	p.Insecure, p.MaxRestarts = true, -1
	n, err := StartNode(p)
	if err == nil {
		n.Close()
		t.Fatal("a node started with MaxRestarts -1")
	}
	if !strings.Contains(err.Error(), "MaxRestarts -1") {
		t.Fatalf("the error %q does not name MaxRestarts", err)
	}
}
