package jobctl

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/usererr"
)

// TestPrepare: the pure part of a job's setup checks the spec against its data and the
// cluster with the one check (CheckOn), reserves each shard's Footprint, and picks the nodes
// to ping: those the spec names, else the coordinator's own outside a cluster, else the
// cluster's workers.
func TestPrepare(t *testing.T) {
	workers := []Node{{"m1", "h1:1"}, {"m2", "h2:1"}}
	shape := jobspec.Shape{Name: "x.npy", Samples: 10, Features: 6}
	tests := []struct {
		name      string
		nodes     []string // the spec's
		shards    int
		workers   []Node // nil: not a cluster
		wantNodes []string
		wantFixed bool
		wantField string // a refusal's field ("": none)
	}{
		{"alone", nil, 3, nil, []string{"self:1"}, true, ""},
		{"named, no cluster", []string{"a:1", "b:1"}, 3, nil, []string{"a:1", "b:1"}, true, ""},
		{"cluster", nil, 3, workers, []string{"h1:1", "h2:1"}, false, ""},
		{"named members", []string{"h2:1"}, 3, workers, []string{"h2:1"}, true, ""},
		{"named non-member", []string{"h3:1"}, 3, workers, nil, false, "nodes"},
		{"more shards than samples", nil, 11, workers, nil, false, "shards"},
		{"empty cluster", nil, 3, []Node{}, nil, false, ""},
	}
	for _, tt := range tests {
		spec := jobspec.New([]string{"x.npy"}, kernels.DID, 2, tt.shards)
		spec.Nodes, spec.Layout = tt.nodes, matio.AutoFor(kernels.DID, matio.LayoutAuto)
		b, err := Prepare(spec, &shape, "self:1", tt.workers)
		if tt.wantField != "" {
			var ue *usererr.Error
			if !errors.As(err, &ue) || ue.Field != tt.wantField {
				t.Errorf("%s: Prepare: %v, want a refusal of %s", tt.name, err, tt.wantField)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: Prepare: %v", tt.name, err)
		}
		var got []string
		for _, nd := range b.Nodes {
			got = append(got, nd.Addr)
		}
		if !slices.Equal(got, tt.wantNodes) || b.Fixed != tt.wantFixed {
			t.Errorf("%s: nodes %v fixed %v, want %v %v", tt.name, got, b.Fixed, tt.wantNodes, tt.wantFixed)
		}
		if (tt.workers == nil) != (b.Workers == nil) || len(b.Workers) != len(tt.workers) {
			t.Errorf("%s: workers %v, want those of %v", tt.name, b.Workers, tt.workers)
		}
		if !slices.Equal(b.Reserve, spec.Footprint(&shape)) || b.Samples != 10 || b.Features != 6 {
			t.Errorf("%s: begin %+v, want the shape and reserves %v", tt.name, b, spec.Footprint(&shape))
		}
	}
}

// TestPlanPlacement: where shards go, pinned node by node (the bitwise and chaos tests
// depend on it), with their columns and reserves, and why a job does not fit.
func TestPlanPlacement(t *testing.T) {
	nodes := []Node{{"m1", "h1:1"}, {"m2", "h2:1"}, {"m3", "h3:1"}}
	fixed := func(addrs ...string) []Node {
		var out []Node
		for _, a := range addrs {
			out = append(out, Node{a, a})
		}
		return out
	}
	hundreds := func(p int) []int64 {
		r := make([]int64, p)
		for i := range r {
			r[i] = 100
		}
		return r
	}
	tests := []struct {
		name string
		in   PlanInput
		// want is each shard's node, space-separated; wantRing the ring, wantSilent the
		// members that did not answer.
		want, wantRing, wantSilent string
		// wantErr is in a refusal's message; wantUser says whether it is the user's to fix.
		wantErr  string
		wantUser bool
	}{
		{name: "fixed round-robin", in: PlanInput{Samples: 10, Reserve: hundreds(5), Fixed: true, Nodes: fixed("a", "b"), Pongs: []*messages.Pong{{}, {}}},
			want: "a b a b a", wantRing: "a b"},
		{name: "fixed, a node named twice", in: PlanInput{Samples: 10, Reserve: hundreds(4), Fixed: true, Nodes: fixed("a", "a", "b"),
			Pongs: []*messages.Pong{{MaxShards: 3}, {MaxShards: 3}, {}}}, want: "a a b a", wantRing: "a b"},
		{name: "fixed, unreachable", in: PlanInput{Reserve: hundreds(2), Fixed: true, Nodes: fixed("a"), Pongs: []*messages.Pong{nil},
			Unreachable: "node a is unreachable: timeout"}, wantErr: "node a is unreachable: timeout"},
		{name: "fixed, no node", in: PlanInput{Reserve: hundreds(2), Fixed: true}, wantErr: "no node to place on"},
		{name: "fixed, too many shards", in: PlanInput{Samples: 10, Reserve: hundreds(4), Fixed: true, Nodes: fixed("a", "b"),
			Pongs: []*messages.Pong{{}, {MaxShards: 3, Shards: 2}}}, wantErr: "node b would hold 2 shards; it takes 1 more", wantUser: true},
		{name: "fixed, too little memory", in: PlanInput{Samples: 10, Reserve: hundreds(4), Fixed: true, Nodes: fixed("a", "b"),
			Pongs: []*messages.Pong{{Memory: 250, Reserved: 100}, {}}}, wantErr: "node a would need 200 B for its 2 shards; it has 150 B of its 250 B free", wantUser: true},
		{name: "members by capacity", in: PlanInput{Job: "job-7", Samples: 17, Reserve: make([]int64, 7), Nodes: nodes,
			Pongs: []*messages.Pong{{Capacity: 2}, {Capacity: 1}, {Capacity: 4}}}, want: "h1:1 h3:1 h2:1 h3:1 h1:1 h3:1 h3:1", wantRing: "h1:1 h2:1 h3:1"},
		{name: "members sharing a machine's memory", in: PlanInput{Job: "job-7", Samples: 17, Reserve: hundreds(6), Nodes: nodes,
			Pongs: []*messages.Pong{{Capacity: 1, Memory: 300, Machine: "x"}, {Capacity: 1, Memory: 300, Machine: "x"}, {Capacity: 1, Memory: 1000}}},
			want: "h1:1 h2:1 h2:1 h3:1 h3:1 h3:1", wantRing: "h1:1 h2:1 h3:1"},
		// A member running other jobs' shards gets the new ones last: one a member.
		{name: "a busy member waits", in: PlanInput{Job: "job-7", Samples: 17, Reserve: hundreds(2), Nodes: nodes,
			Pongs: []*messages.Pong{{Capacity: 1}, {Capacity: 1, Shards: 1}, {Capacity: 1}}}, want: "h1:1 h3:1", wantRing: "h1:1 h2:1 h3:1"},
		{name: "the idle member first", in: PlanInput{Job: "job-7", Samples: 17, Reserve: hundreds(1), Nodes: nodes,
			Pongs: []*messages.Pong{{Capacity: 1, Shards: 1}, {Capacity: 1}, {Capacity: 1, Shards: 3}}}, want: "h2:1", wantRing: "h1:1 h2:1 h3:1"},
		{name: "a silent member", in: PlanInput{Job: "job-7", Samples: 4, Reserve: hundreds(4), Nodes: nodes,
			Pongs: []*messages.Pong{{Capacity: 1}, nil, {Capacity: 1}}}, want: "h1:1 h3:1 h1:1 h3:1", wantRing: "h1:1 h3:1", wantSilent: "m2"},
		{name: "no member answers", in: PlanInput{Job: "j", Reserve: hundreds(2), Nodes: nodes, Pongs: []*messages.Pong{nil, nil, nil}},
			wantSilent: "m1 m2 m3", wantErr: "no member of the cluster answers (3 known)"},
		{name: "members take too few shards", in: PlanInput{Job: "j", Samples: 10, Reserve: hundreds(5), Nodes: nodes[:2],
			Pongs: []*messages.Pong{{MaxShards: 2}, {MaxShards: 4, Shards: 2}}}, wantErr: "5 shards: the cluster's 2 members take 4 more shards", wantUser: true},
		{name: "members without the memory", in: PlanInput{Job: "j", Samples: 10, Reserve: hundreds(5), Nodes: nodes[:2],
			Pongs: []*messages.Pong{{Memory: 150}, {Memory: 250}}}, wantErr: "job needs 500 B for 5 shards (largest 100 B); the cluster's 2 members offer 400 B", wantUser: true},
	}
	for _, tt := range tests {
		pl, err := PlanPlacement(tt.in)
		var silent []string
		for _, nd := range pl.Silent {
			silent = append(silent, nd.Name)
		}
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || usererr.Is(err) != tt.wantUser {
				t.Errorf("%s: PlanPlacement: %v (the user's: %v), want %q (the user's: %v)", tt.name, err, usererr.Is(err), tt.wantErr, tt.wantUser)
			}
			var ce *cluster.CapacityError
			if strings.HasPrefix(tt.wantErr, "job needs") && !errors.As(err, &ce) {
				t.Errorf("%s: %v is not a *cluster.CapacityError", tt.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: PlanPlacement: %v", tt.name, err)
		}
		var got []string
		cols := kernels.ColumnRanges(tt.in.Samples, len(tt.in.Reserve))
		for s, sh := range pl.Shards {
			got = append(got, sh.Node)
			if sh.ColLo != cols[s] || sh.ColHi != cols[s+1] || sh.Reserve != tt.in.Reserve[s] {
				t.Errorf("%s: shard %d: %+v, want columns [%d, %d) and reserve %d", tt.name, s, sh, cols[s], cols[s+1], tt.in.Reserve[s])
			}
		}
		if strings.Join(got, " ") != tt.want || strings.Join(pl.Ring, " ") != tt.wantRing || strings.Join(silent, " ") != tt.wantSilent {
			t.Errorf("%s: shards on %q, ring %q, silent %q; want %q, %q, %q", tt.name, got, pl.Ring, silent, tt.want, tt.wantRing, tt.wantSilent)
		}
		again, _ := PlanPlacement(tt.in)
		if !slices.Equal(again.Shards, pl.Shards) {
			t.Errorf("%s: a second plan differs: %+v, then %+v", tt.name, pl.Shards, again.Shards)
		}
	}
}

// TestFreeMemory: members of one machine share its memory (the largest offer less all their
// reservations); a member of its own machine keeps its own; no limit means no limit.
func TestFreeMemory(t *testing.T) {
	const gib = int64(1) << 30
	inf := int64(math.MaxInt64)
	tests := []struct {
		name  string
		pongs []*messages.Pong
		want  []int64
	}{
		{"apart", []*messages.Pong{{Memory: 10 * gib, Reserved: 2 * gib}, {Memory: 10 * gib}}, []int64{8 * gib, 10 * gib}},
		{"one machine", []*messages.Pong{{Memory: 10 * gib, Reserved: 2 * gib, Machine: "m"}, {Memory: 9 * gib, Reserved: 3 * gib, Machine: "m"}, {Memory: 4 * gib, Machine: "n"}},
			[]int64{5 * gib, 5 * gib, 4 * gib}},
		{"over-reserved", []*messages.Pong{{Memory: 4 * gib, Reserved: 3 * gib, Machine: "m"}, {Memory: 4 * gib, Reserved: 3 * gib, Machine: "m"}}, []int64{0, 0}},
		{"no limit", []*messages.Pong{{Machine: "m"}, {Memory: 4 * gib, Machine: "m"}, {}}, []int64{inf, inf, inf}},
		{"silent member", []*messages.Pong{nil, {Memory: 4 * gib, Machine: "m"}}, []int64{inf, 4 * gib}},
	}
	for _, tt := range tests {
		if got := freeMemory(tt.pongs); !slices.Equal(got, tt.want) {
			t.Errorf("%s: freeMemory = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestBeginAppliesThePlan: the Job places shards where PlanPlacement says, with their columns
// and reserves in the assignments, and fails a job the plan refuses with the wire's kind: the
// user's (INPUT) when it does not fit, a failure when no node can be reached.
func TestBeginAppliesThePlan(t *testing.T) {
	nodes := []Node{{"m1", "h1:1"}, {"m2", "h2:1"}, {"m3", "h3:1"}}
	for _, tc := range []struct {
		name     string
		pongs    []*messages.Pong
		wantKind messages.ErrorKind // 0: placed
	}{
		{"placed", []*messages.Pong{{Capacity: 2}, {Capacity: 1}, {Capacity: 4}}, 0},
		{"does not fit", []*messages.Pong{{MaxShards: 1}, {MaxShards: 1}, {MaxShards: 1}}, kindInput},
		{"nobody answers", []*messages.Pong{nil, nil, nil}, kindFailure},
	} {
		sub := &messages.SubmitJob{JobId: "job-7", Client: &messages.Pid{Address: "client", Id: "c"},
			Spec: &messages.JobSpec{Algorithm: messages.Algorithm_ALGORITHM_DID, Rank: 2, Shards: 7}}
		j, err := New(Config{Self: &messages.Pid{Address: "h1:1", Id: "host/j-coord"}, Cluster: true, FanIn: 8}, sub)
		if err != nil {
			t.Fatal(err)
		}
		reserve := []int64{10, 11, 12, 13, 14, 15, 16}
		b := Begin{Samples: 17, Features: 5, Reserve: reserve, Nodes: nodes, Pongs: tc.pongs, Workers: []string{"h1:1", "h2:1", "h3:1"}}
		if err := j.Step(t0, b); err != nil {
			t.Fatal(err)
		}
		var assigned []*messages.ShardAssignment
		var failed *messages.JobError
		for _, s := range j.Ready().Sends {
			switch m := s.Msg.(type) {
			case *messages.ShardAssignment:
				assigned = append(assigned, m)
			case *messages.JobError:
				failed = m
			}
		}
		if tc.wantKind != 0 {
			if failed == nil || failed.Kind != tc.wantKind || len(assigned) != 0 {
				t.Errorf("%s: error %v and %d assignments, want an error of kind %v", tc.name, failed, len(assigned), tc.wantKind)
			}
			continue
		}
		plan, err := PlanPlacement(PlanInput{Job: "job-7", Samples: 17, Reserve: reserve, Nodes: nodes, Pongs: tc.pongs})
		if err != nil || failed != nil || len(assigned) != 7 {
			t.Fatalf("%s: plan error %v, job error %v, %d assignments", tc.name, err, failed, len(assigned))
		}
		for _, a := range assigned {
			want := plan.Shards[a.Shard]
			if j.ft.shardNode[a.Shard] != want.Node || a.ColLo != int64(want.ColLo) || a.ColHi != int64(want.ColHi) || a.Reserve != want.Reserve {
				t.Errorf("%s: shard %d on %s [%d, %d) reserving %d; the plan says %+v", tc.name, a.Shard, j.ft.shardNode[a.Shard], a.ColLo, a.ColHi, a.Reserve, want)
			}
		}
	}
}
