package actors

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/messages"
)

// TestHostAnswersASupersededAssignment: a shard assignment of an earlier epoch than the job's
// on a node (from a coordinator a recovery or a takeover superseded, arriving late) is
// answered by the node's host itself with Placed.Superseded naming the job's epoch there,
// also for a shard that does not live on that node (the host used to forward it to that
// shard's name, where it was lost); the job goes on undisturbed until it is canceled.
func TestHostAnswersASupersededAssignment(t *testing.T) {
	testSupersededAnswer(t, "shard 99", func(job string, coord *messages.Pid) proto.Message {
		return &messages.ShardAssignment{JobId: job, Shard: 99, Shards: 100, Epoch: 0, Coordinator: coord}
	})
}

// TestHostAnswersASupersededReducerAssignment: a reducer assignment of an earlier epoch is
// answered as a shard's is, naming the reducer as its own Placed does (the host used to drop
// it, and its sender heard nothing); the job goes on.
func TestHostAnswersASupersededReducerAssignment(t *testing.T) {
	testSupersededAnswer(t, "reducer [4, 6)", func(job string, coord *messages.Pid) proto.Message {
		return &messages.ReducerAssignment{JobId: job, Epoch: 0, Level: 1, Lo: 4, Hi: 6, Shards: 100, Coordinator: coord}
	})
}

// testSupersededAnswer runs a job on 2 nodes, sends the second node's host the assignment
// (of epoch 0) from a coordinator that is not the job's, and wants it answered Placed of
// what, epoch 0, superseded by epoch 1; the job goes on until it is canceled.
func testSupersededAnswer(t *testing.T, what string, assignment func(job string, coord *messages.Pid) proto.Message) {
	t.Helper()
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
	node.System().Root.Send(node.Host(), assignment(job.ID, wirePid(old)))
	select {
	case p := <-answers:
		if p.JobId != job.ID || p.Superseded != 1 || p.Epoch != 0 || p.Actor != what || p.Error != "" || p.Ended {
			t.Fatalf("the superseded coordinator got %v, want Placed %s of epoch 0 superseded by epoch 1", p, what)
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
