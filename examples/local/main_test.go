package main

import "testing"

func TestFactorizeExample(t *testing.T) {
	res, err := factorize("synthetic:m=10,n=5000,k=3,seed=2", 3, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Converged || res.RelErr2() > 1e-5 || res.Comm.PerIteration != 1 {
		t.Errorf("converged %v, rel_err2 %.3g, %.1f collectives per iteration", res.Converged, res.RelErr2(), res.Comm.PerIteration)
	}
	if _, err := factorize("synthetic:m=10,n=5000,k=3,seed=2", 11, 4, nil); err == nil {
		t.Error("rank 11 of a 10-feature matrix accepted")
	}
}
