package main

import (
	"context"
	"strings"
	"testing"
)

func TestActorsExample(t *testing.T) {
	res, err := factorize(context.Background(), "synthetic:m=10,n=5000,k=3,seed=2", 3, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Converged || res.RelErr2() > 1e-5 || res.ReductionsPerIteration != 1 {
		t.Errorf("converged %v, rel_err2 %.3g, %.1f reductions per iteration", res.Converged, res.RelErr2(), res.ReductionsPerIteration)
	}
	if _, err := factorize(context.Background(), "synthetic:m=10,n=5000,k=3,seed=2", 11, 2, nil); err == nil ||
		!strings.Contains(err.Error(), "rank 11 out of range") {
		t.Errorf("rank 11 of a 10-feature matrix: %v", err)
	}
}
