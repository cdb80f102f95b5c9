package actors

import "testing"

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
