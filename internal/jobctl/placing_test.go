package jobctl

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/didnmf/didnmf/messages"
)

// TestPlacingSpreadsJobsSetUpAtOnce: three one-shard jobs set up at once ping three idle
// members, whose pongs all say idle; with the coordinator's book each goes to its own member,
// for every triple of job ids (without it, hashing doubles up one member in most triples).
func TestPlacingSpreadsJobsSetUpAtOnce(t *testing.T) {
	nodes := []Node{{"m1", "h1:1"}, {"m2", "h2:1"}, {"m3", "h3:1"}}
	idle := func() []*messages.Pong {
		return []*messages.Pong{{Capacity: 1}, {Capacity: 1}, {Capacity: 1}}
	}
	now := time.Unix(1000, 0)
	doubled := 0
	for j := range 200 {
		var pl Placing
		used := map[string]bool{}
		plain := map[string]bool{}
		for r := range 3 {
			job := fmt.Sprintf("job-%d-%d", j, r)
			b := Begin{Samples: 10, Reserve: []int64{100}, Nodes: nodes, Pongs: idle()}
			pongs := pl.Claim(job, "", b, now)
			plan, err := PlanPlacement(PlanInput{Job: job, Samples: 10, Reserve: b.Reserve, Nodes: nodes, Pongs: pongs})
			if err != nil {
				t.Fatal(err)
			}
			used[plan.Shards[0].Node] = true
			bare, _ := PlanPlacement(PlanInput{Job: job, Samples: 10, Reserve: b.Reserve, Nodes: nodes, Pongs: idle()})
			plain[bare.Shards[0].Node] = true
		}
		if len(used) != 3 {
			t.Fatalf("triple %d: the jobs went to %v; want one a member", j, used)
		}
		if len(plain) < 3 {
			doubled++
		}
	}
	if doubled == 0 {
		t.Error("without the book no triple doubled up: the test shows nothing")
	}
}

// TestPlacingBook: what Claim adds to a pong, and when a booking goes: when the node's pong
// lists the job (it counts it then), after PlacingTTL, for the job itself, and never for a
// fixed placement.
func TestPlacingBook(t *testing.T) {
	nodes := []Node{{"m1", "h1:1"}, {"m2", "h2:1"}}
	now := time.Unix(1000, 0)
	pongs := func(ids ...[]string) []*messages.Pong {
		return []*messages.Pong{{Capacity: 1, JobIds: ids[0]}, {Capacity: 1, JobIds: ids[1]}}
	}
	var pl Placing
	// Job a: two shards of 40 bytes, one a member.
	pl.Claim("a", "", Begin{Samples: 10, Reserve: []int64{40, 40}, Nodes: nodes, Pongs: pongs(nil, nil)}, now)
	got := pl.Claim("b", "", Begin{Samples: 10, Reserve: []int64{1}, Nodes: nodes, Pongs: pongs(nil, nil)}, now)
	for i, p := range got {
		if p.Shards != 1 || p.Reserved != 40 {
			t.Errorf("node %d with a booked: shards %d reserved %d; want 1 and 40", i, p.Shards, p.Reserved)
		}
	}
	// m1 now runs a's shard (its pong says so, and counts it): only b's booking and a's on m2 are added.
	got = pl.Claim("c", "", Begin{Samples: 10, Reserve: []int64{1}, Nodes: nodes, Pongs: []*messages.Pong{{Capacity: 1, Shards: 1, JobIds: []string{"a"}}, {Capacity: 1}}}, now)
	wantShards := []int64{1, 1} // m1: its own count of a; m2: a's booking
	for _, s := range []int{0, 1} {
		if got[s].Shards < wantShards[s] {
			t.Errorf("node %d: shards %d; want at least %d", s, got[s].Shards, wantShards[s])
		}
	}
	total := got[0].Shards + got[1].Shards
	if total != 3 { // a's two shards (one counted by m1, one booked on m2) and b's one
		t.Errorf("shards counted %d (%d + %d); want 3: a's on m1 counted once", total, got[0].Shards, got[1].Shards)
	}
	// A released job's bookings go: b's.
	pl.Release("b", now)
	got = pl.Claim("c2", "", Begin{Samples: 10, Reserve: []int64{1}, Nodes: nodes, Pongs: []*messages.Pong{{Capacity: 1, Shards: 1, JobIds: []string{"a"}}, {Capacity: 1}}}, now)
	if total := got[0].Shards + got[1].Shards; total != 2+1 { // a's two, and c's booking (c2's own is not added)
		t.Errorf("after b's release: %d shards counted; want 3 (a's two and c's one)", total)
	}
	// A job released before it claims (cancelled during its setup) is not booked.
	pl.Release("early", now)
	pl.Claim("early", "", Begin{Samples: 10, Reserve: []int64{1, 1}, Nodes: nodes, Pongs: pongs(nil, nil)}, now)
	got = pl.Claim("c3", "", Begin{Samples: 10, Reserve: []int64{1}, Nodes: nodes, Pongs: []*messages.Pong{{Capacity: 1, Shards: 1, JobIds: []string{"a"}}, {Capacity: 1}}}, now)
	if total := got[0].Shards + got[1].Shards; total != 4 { // a's two, c's and c2's: none of "early"'s
		t.Errorf("a job released before its claim: %d shards counted; want 4", total)
	}
	// After the TTL nothing is booked.
	later := pl.Claim("d", "", Begin{Samples: 10, Reserve: []int64{1}, Nodes: nodes, Pongs: pongs(nil, nil)}, now.Add(PlacingTTL))
	if later[0].Shards+later[1].Shards != 0 {
		t.Errorf("after the TTL: shards %d + %d still booked", later[0].Shards, later[1].Shards)
	}
	// A fixed placement reads no loads: its pongs come back as they are, and nothing is booked.
	fixed := Begin{Fixed: true, Reserve: []int64{1}, Nodes: nodes, Pongs: pongs(nil, nil)}
	if out := pl.Claim("e", "", fixed, now.Add(PlacingTTL)); !slices.Equal(out, fixed.Pongs) {
		t.Error("a fixed placement's pongs changed")
	}
	// The originals are never written to.
	in := pongs(nil, nil)
	pl.Claim("f", "", Begin{Samples: 10, Reserve: []int64{1}, Nodes: nodes, Pongs: in}, now.Add(PlacingTTL))
	if in[0].Shards != 0 || in[1].Shards != 0 {
		t.Error("Claim wrote into the pongs it was given")
	}
}

// TestPlacingKeepsSelfBookings: the coordinator's own pong lists every job it coordinates
// before their shards are there, so a booking on itself is not dropped for that; one on
// another node is, once that node lists the job.
func TestPlacingKeepsSelfBookings(t *testing.T) {
	nodes := []Node{{"m1", "h1:1"}, {"m2", "h2:1"}}
	now := time.Unix(1000, 0)
	var pl Placing
	// Job a: one shard a node.
	pl.Claim("a", "h1:1", Begin{Samples: 10, Reserve: []int64{1, 1}, Nodes: nodes, Pongs: []*messages.Pong{{Capacity: 1}, {Capacity: 1}}}, now)
	// Both pongs list a (h1 coordinates it; h2 runs its shard, and counts it), neither counts a's shard on h1 yet.
	got := pl.Claim("b", "h1:1", Begin{Samples: 10, Reserve: []int64{1}, Nodes: nodes,
		Pongs: []*messages.Pong{{Capacity: 1, JobIds: []string{"a"}}, {Capacity: 1, Shards: 1, JobIds: []string{"a"}}}}, now)
	if got[0].Shards != 1 || got[1].Shards != 1 {
		t.Errorf("shards %d on the coordinator, %d on the other; want 1 and 1 (a's on each, counted once)", got[0].Shards, got[1].Shards)
	}
}
