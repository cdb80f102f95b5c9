package main

import (
	"context"
	"testing"
)

func TestClusterExample(t *testing.T) {
	res, err := factorize(context.Background(), "synthetic:m=10,n=6000,k=3,seed=2", 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Converged || res.RelErr2() > 1e-5 || len(res.ShardNodes) != 6 {
		t.Errorf("converged %v, rel_err2 %.3g, shard nodes %v", res.Converged, res.RelErr2(), res.ShardNodes)
	}
	nodes := map[string]bool{}
	for _, n := range res.ShardNodes {
		nodes[n] = true
	}
	if len(nodes) < 2 {
		t.Errorf("6 shards all on one of 3 members: %v", res.ShardNodes)
	}
}
