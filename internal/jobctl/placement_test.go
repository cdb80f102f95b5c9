package jobctl

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

func TestBuildTree(t *testing.T) {
	node := func(s int64) string { return []string{"a", "b", "c"}[s%3] }
	for _, tc := range []struct {
		p, fanIn int64
		nodes    int // reducers
		levels   int64
	}{{1, 8, 1, 1}, {8, 8, 1, 1}, {9, 8, 3, 2}, {5, 2, 6, 3}, {16, 4, 5, 2}} {
		tree, parents := buildTree("j", 1, tc.p, tc.fanIn, node)
		root := tree[len(tree)-1]
		if len(tree) != tc.nodes || root.level != tc.levels || root.lo != 0 || root.hi != tc.p || root.parent != nil {
			t.Fatalf("P=%d fan-in %d: %d reducers, root level %d [%d, %d)", tc.p, tc.fanIn, len(tree), root.level, root.lo, root.hi)
		}
		for s, par := range parents {
			if par == nil || tree[s/int(tc.fanIn)].pid != par || tree[s/int(tc.fanIn)].level != 1 {
				t.Fatalf("P=%d fan-in %d: shard %d has parent %v", tc.p, tc.fanIn, s, par)
			}
		}
		for _, r := range tree[:len(tree)-1] {
			if r.parent == nil || r.lo%pow(tc.fanIn, r.level) != 0 {
				t.Fatalf("P=%d: reducer [%d, %d) at level %d misplaced", tc.p, r.lo, r.hi, r.level)
			}
		}
	}
}

func pow(b, e int64) int64 {
	r := int64(1)
	for ; e > 0; e-- {
		r *= b
	}
	return r
}
