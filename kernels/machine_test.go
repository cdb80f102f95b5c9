package kernels

import (
	"strings"
	"testing"
)

// TestMachineProtocol: misuse and failures surface as errors, never as panics in the caller.
func TestMachineProtocol(t *testing.T) {
	x := synthDense(5, 50, 2, 1, 0)
	pool := NewPool(1)
	defer pool.Close()
	spec := ShardSpec{Algo: DID, Shards: 1, TotalCols: 50, X: x, K: 2, Seed: 1, Init: InitSpec{Method: InitRandom}, Pool: pool}
	m, err := NewMachine(spec)
	if err != nil {
		t.Fatal(err)
	}
	st, err := m.Next()
	if err != nil || st.Kind != StepCollective || st.Label != "init.mean" || !st.Init {
		t.Fatalf("first step %+v, %v", st, err)
	}
	if _, err := m.Next(); err == nil {
		t.Fatal("Next before Deliver accepted")
	}
	// Deliver a result of the wrong length: the shard's code fails, the machine reports it.
	m.Deliver([]float64{1})
	if _, err := m.Next(); err == nil || !strings.Contains(err.Error(), "failed") {
		t.Fatalf("bad delivery: %v", err)
	}
	if _, err := m.Next(); err == nil {
		t.Fatal("a failed machine went on")
	}
	m.Close()

	// Close while waiting on a collective ends the coroutine cleanly.
	m2, _ := NewMachine(spec)
	if _, err := m2.Next(); err != nil {
		t.Fatal(err)
	}
	m2.Close()
}
