package actors

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/didnmf/didnmf/messages"
)

// TestClientNoticesItsCoordinatorIsGone: a coordinator that stops without its answer reaching
// the client (here: stopped from outside, as if its JobResult were lost on a connection that
// broke) leaves the client's lease renewals unanswered but for protoactor's dead letter: the
// client ends the job with an error that says so after Timeouts.Quorum, instead of waiting for
// good.
func TestClientNoticesItsCoordinatorIsGone(t *testing.T) {
	timeouts := Timeouts{LeaseRenew: 50 * time.Millisecond, Quorum: time.Second}
	lc, cl := testClusterWith(t, 2, NodeConfig{Threads: 2, Timeouts: timeouts, Faults: &Faults{IterationDelay: time.Millisecond}})
	job, err := cl.Submit(context.Background(), "", spec("synthetic:m=6,n=400,k=3,seed=1", "did", 3, 2, lc.Addresses(), 1_000_000))
	if err != nil {
		t.Fatal(err)
	}
	<-job.Progress()
	coord := actor.NewPID(job.Coordinator(), HostName+"/"+job.ID+coordSuffix)
	lc.Nodes[0].System().Root.Stop(coord)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = job.Wait(ctx)
	if err == nil || !strings.Contains(err.Error(), "no answer reached this client") {
		t.Fatalf("the job ended with %v, want the client to notice its coordinator is gone", err)
	}
	t.Log(err)
}

// TestClientGetsAKeptAnswerAgain: when the coordinator is gone, the client asks its host,
// which keeps the answers of the jobs that ended there; the answer the host kept ends the
// job at the client (here a JobError handed to the host as the coordinator would hand it).
func TestClientGetsAKeptAnswerAgain(t *testing.T) {
	timeouts := Timeouts{LeaseRenew: 50 * time.Millisecond, Quorum: time.Minute}
	lc, cl := testClusterWith(t, 2, NodeConfig{Threads: 2, Timeouts: timeouts, Faults: &Faults{IterationDelay: time.Millisecond}})
	job, err := cl.Submit(context.Background(), "", spec("synthetic:m=6,n=400,k=3,seed=1", "did", 3, 2, lc.Addresses(), 1_000_000))
	if err != nil {
		t.Fatal(err)
	}
	<-job.Progress()
	node := lc.Nodes[0]
	node.System().Root.Send(node.Host(), &answerKept{job: job.ID, token: "not the owner's", answer: &messages.JobError{JobId: job.ID, Message: "a stranger's"}})
	node.System().Root.Send(node.Host(), &answerKept{job: job.ID, token: job.Token(),
		answer: &messages.JobError{JobId: job.ID, Kind: KindFailure, Message: "the answer the host kept"}})
	node.System().Root.Stop(actor.NewPID(job.Coordinator(), HostName+"/"+job.ID+coordSuffix))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err = job.Wait(ctx); err == nil || !strings.Contains(err.Error(), "the answer the host kept") {
		t.Fatalf("the job ended with %v, want the answer its coordinator's host kept", err)
	}
}

// TestLostAcceptanceIsToldAgain: the coordinator's first two JobAccepted are lost on the way.
// The coordinator tells the client again at every tick until the client's first renewal, so
// Submit returns (it waits for an acceptance) and the client renews the lease; the job, which
// runs longer than the lease, ends with its result instead of being canceled for a client
// that never renewed.
func TestLostAcceptanceIsToldAgain(t *testing.T) {
	timeouts := Timeouts{LeaseRenew: 100 * time.Millisecond}
	faults := &Faults{DropAcceptances: 2, IterationDelay: 10 * time.Millisecond}
	lc, cl := testClusterWith(t, 2, NodeConfig{Threads: 2, Timeouts: timeouts, Lease: 5 * time.Second, Faults: faults})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// 600 iterations of at least 10ms: longer than the lease, which cancels the job of a
	// client that does not renew it.
	job, err := cl.Submit(ctx, "", spec("synthetic:m=6,n=400,k=3,seed=1", "did", 3, 2, lc.Addresses(), 600))
	if err != nil {
		t.Fatalf("submit, its first two acceptances lost: %v", err)
	}
	res, err := job.Wait(ctx)
	if err != nil {
		t.Fatalf("the job ended with %v, want its result", err)
	}
	if res.Iterations != 600 {
		t.Fatalf("the job ran %d iterations, want 600", res.Iterations)
	}
	faults.mu.Lock()
	dropped := faults.dropped
	faults.mu.Unlock()
	if dropped < 3 {
		t.Fatalf("%d acceptances sent: want the two lost and one more", dropped)
	}
}

// TestSupersededCoordinatorsCancelIsDropped: once the client heard of a coordinator of a newer
// epoch (a takeover), the cancel of the coordinator it followed before (whose lease ran out
// because the client renews its successor) does not end the job at the client; the job ends
// with its result. Here the takeover's acceptance names the same coordinator in generation 1,
// and the stale cancel is handed to the client actor as it would come off the wire.
func TestSupersededCoordinatorsCancelIsDropped(t *testing.T) {
	timeouts := Timeouts{LeaseRenew: 100 * time.Millisecond}
	lc, cl := testClusterWith(t, 2, NodeConfig{Threads: 2, Timeouts: timeouts, Faults: &Faults{IterationDelay: 5 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job, err := cl.Submit(ctx, "", spec("synthetic:m=6,n=400,k=3,seed=1", "did", 3, 2, lc.Addresses(), 200))
	if err != nil {
		t.Fatal(err)
	}
	<-job.Progress()
	root := lc.Nodes[0].System().Root
	coord := &messages.Pid{Address: job.Coordinator(), Id: HostName + "/" + job.ID + coordSuffix}
	root.Send(cl.pid, &messages.JobAccepted{JobId: job.ID, Coordinator: coord, Takeover: true, Epoch: 1 << 32})
	root.Send(cl.pid, &messages.JobError{JobId: job.ID, Kind: KindCanceled, Epoch: 1,
		Message: "job " + job.ID + " canceled: its client sent no word for 10s (the superseded coordinator's)"})
	res, err := job.Wait(ctx)
	if err != nil {
		t.Fatalf("the job ended with %v, want its result: the superseded coordinator's cancel must be dropped", err)
	}
	if res.Iterations != 200 {
		t.Fatalf("the job ran %d iterations, want 200", res.Iterations)
	}
}
