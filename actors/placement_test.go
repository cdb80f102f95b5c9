package actors

import (
	"math"
	"slices"
	"testing"

	"github.com/didnmf/didnmf/messages"
)

// TestReducersSitWithMostOfTheirShards: each reducer is placed on the node that holds most of
// the shards it covers (the node of its first shard on a tie), so that fewer partials and
// results cross the network.
func TestReducersSitWithMostOfTheirShards(t *testing.T) {
	for _, tc := range []struct {
		nodes    string // node of each shard
		fanIn    int64
		want     []string
		wantRoot string
	}{
		{"abbc", 8, []string{"b"}, "b"},
		{"abca", 8, []string{"a"}, "a"},
		{"abc", 8, []string{"a"}, "a"},                // a tie: the first shard's node
		{"abbbcccc", 8, []string{"c"}, "c"},           // P=8 on 3 nodes
		{"abbacccc", 4, []string{"a", "c", "c"}, "c"}, // level 1: [0,4) tie a/b -> a; [4,8) c; root: c holds 4 of 8
	} {
		shardNode := func(s int64) string { return tc.nodes[s : s+1] }
		tree, _ := buildTree("j", 1, int64(len(tc.nodes)), tc.fanIn, shardNode)
		var got []string
		for _, r := range tree {
			got = append(got, r.node)
			if r.pid.Address != r.node {
				t.Fatalf("%s: reducer [%d, %d) on %s has pid %v", tc.nodes, r.lo, r.hi, r.node, r.pid)
			}
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%s fan-in %d: reducers on %v, want %v", tc.nodes, tc.fanIn, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("%s fan-in %d: reducers on %v, want %v", tc.nodes, tc.fanIn, got, tc.want)
			}
		}
		if root := tree[len(tree)-1]; root.node != tc.wantRoot {
			t.Fatalf("%s: root on %s, want %s", tc.nodes, root.node, tc.wantRoot)
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
