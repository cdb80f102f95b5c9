package actors

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/didnmf/didnmf/messages"
)

// TestHostAnswersASupersededAssignment: a shard assignment of an earlier epoch than the job's
// on a node (from a coordinator a recovery or a takeover superseded, arriving late) is
// answered by the node's host itself with Placed.Superseded naming the job's epoch there,
// also for a shard that does not live on that node (the host used to forward it to that
// shard's name, where it was lost); the job goes on undisturbed until it is canceled.
func TestHostAnswersASupersededAssignment(t *testing.T) {
	lc, cl := testClusterWith(t, 2, NodeConfig{Threads: 2, Faults: &Faults{IterationDelay: time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job, err := cl.Submit(ctx, "", spec("synthetic:m=6,n=400,k=3,seed=1", "did", 3, 2, lc.Addresses(), 1_000_000))
	if err != nil {
		t.Fatal(err)
	}
	<-job.Progress() // every shard is placed: the hosts serve the job at epoch 1
	node := lc.Nodes[1]
	answers := make(chan *messages.Placed, 1)
	old, err := node.System().Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		if p, ok := c.Message().(*messages.Placed); ok {
			answers <- p
		}
	}), "superseded-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	node.System().Root.Send(node.Host(), &messages.ShardAssignment{JobId: job.ID, Shard: 99, Shards: 100, Epoch: 0, Coordinator: wirePid(old)})
	select {
	case p := <-answers:
		if p.JobId != job.ID || p.Superseded != 1 || p.Epoch != 0 || p.Actor != "shard 99" || p.Error != "" {
			t.Fatalf("the superseded coordinator got %v, want Placed shard 99 of epoch 0 superseded by epoch 1", p)
		}
	case <-ctx.Done():
		t.Fatal("the superseded coordinator was never told")
	}
	select {
	case <-job.Progress(): // the job goes on
	case <-job.Done():
		_, err := job.Wait(ctx)
		t.Fatalf("the job ended with %v", err)
	}
	job.Cancel()
	if _, err := job.Wait(ctx); err == nil {
		t.Fatal("the job ended without an error after it was canceled")
	}
}

// TestNodeMaxRestartsCapsRestarts: the node's MaxRestarts is the host's restart cap. Shard 1
// panics at iteration 3 on every start; with a cap of 2 its third panic on its node fails the
// job, and the error says so (with the default, 20, it would be the 21st).
func TestNodeMaxRestartsCapsRestarts(t *testing.T) {
	lc, cl := testClusterWith(t, 2, NodeConfig{Threads: 2, MaxRestarts: 2, Faults: &Faults{PanicAtIteration: 3}})
	_, err := runJob(t, cl, spec("synthetic:m=5,n=300,k=3,seed=1", "did", 3, 4, lc.Addresses(), 20))
	var je *JobError
	if !errors.As(err, &je) || je.Kind != KindFailure || !strings.Contains(err.Error(), "(3 failures of this job's actors on this node: not restarting any more)") {
		t.Fatalf("want the shard's third failure to fail the job, got %v", err)
	}
	waitIdle(t, lc)
}
