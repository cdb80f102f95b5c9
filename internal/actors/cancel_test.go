package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/pki"
)

// TestCancelInterruptsALongStep: a rank-3000 job's first step takes minutes here (3000 x 4000
// data); a cancel issued in the middle of it ends the job and frees its actors within about a
// second, because the node interrupts the shard's kernels between blocks of columns instead of
// waiting for the step to end.
func TestCancelInterruptsALongStep(t *testing.T) {
	if testing.Short() {
		t.Skip("a rank-3000 job")
	}
	lc, cl := testCluster(t, 1, nil)
	s := spec("synthetic:m=3000,n=4000,k=20,seed=1", "did", 3000, 1, lc.Addresses(), 1000)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job, err := cl.Submit(ctx, "", s)
	if err != nil {
		t.Fatal(err)
	}
	node := lc.Nodes[0]
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		node.machinesMu.Lock()
		running := len(node.machines[job.ID]) > 0
		node.machinesMu.Unlock()
		if running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the shard's machine never started")
		}
	}
	time.Sleep(time.Second) // well inside the first step
	start := time.Now()
	job.Cancel()
	if _, err := job.Wait(ctx); !errors.Is(err, ErrCanceled) {
		t.Fatalf("want the job canceled, got %v", err)
	}
	waitIdle(t, lc)
	took := time.Since(start)
	t.Logf("canceled mid-step; the job's actors were gone %v after the cancel", took)
	// The step alone takes minutes: ending within this bound means it was interrupted.
	if took > 20*time.Second {
		t.Fatalf("the cancel took %v: the step was not interrupted", took)
	}
}

// TestCancelerSaysWho: a canceled job's error says who canceled it, as far as the node knows.
func TestCancelerSaysWho(t *testing.T) {
	sub := &messages.SubmitJob{Owner: "alice"}
	for _, c := range []struct {
		caller Caller
		want   string
	}{
		{Caller{}, "the coordinator's node"},
		{Caller{Role: pki.RolePeer, Name: "n2"}, "node n2"},
		{Caller{Role: pki.RolePeer, Name: "insecure"}, "a remote party (the cluster runs without TLS: not named)"},
		{Caller{Role: pki.RoleClient, Name: "alice"}, "its owner alice"},
		{Caller{Role: pki.RoleClient, Name: "bob"}, "client bob (holding its owner token)"},
	} {
		if got := canceler(c.caller, sub); got != c.want {
			t.Errorf("canceler(%+v) = %q, want %q", c.caller, got, c.want)
		}
	}
}
