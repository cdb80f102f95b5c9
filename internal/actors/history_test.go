package actors

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/pki"
)

// listJobs asks a host for its jobs as a party.
func listJobs(t *testing.T, from *actor.RootContext, host string, req *messages.ListJobs) []*messages.JobInfo {
	t.Helper()
	res, err := from.RequestFuture(HostPID(host), req, 5*time.Second).Result()
	list, ok := res.(*messages.JobList)
	if err != nil || !ok {
		t.Fatalf("ListJobs %v to %s: %v %v", req, host, res, err)
	}
	return list.Jobs
}

// TestEndedJobsListed: a job's coordinator publishes its sizes, placement, stop rule and
// timeline while it runs (history and events only when ListJobs asks for detail); once it
// ended (its owner canceled it), its node keeps its record, which ListJobs with ended lists
// to its owner and to peers, and to no other client.
func TestEndedJobsListed(t *testing.T) {
	h := newHostileSetup(t, &Faults{IterationDelay: 5 * time.Millisecond})
	coordNode := h.lc.Nodes[0].Address()
	s := spec("synthetic:m=5,n=600,k=2,seed=1", "did", 2, 3, h.lc.Addresses(), 100000)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job, err := h.alice.Submit(ctx, coordNode, s)
	if err != nil {
		t.Fatal(err)
	}
	alice := startParty(t, creds(t, h.ca, "alice", pki.RoleClient)).System().Root
	mallory := startParty(t, creds(t, h.ca, "mallory", pki.RoleClient)).System().Root
	peer := h.lc.Nodes[1].System().Root

	// While it runs: sizes, shard nodes and stop rule always; history and events with detail.
	var running *messages.JobInfo
	deadline := time.Now().Add(30 * time.Second)
	for running == nil || running.Iteration < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the running job was not listed with progress: %v", running)
		}
		time.Sleep(50 * time.Millisecond)
		if jobs := listJobs(t, alice, coordNode, &messages.ListJobs{Detail: true}); len(jobs) == 1 {
			running = jobs[0]
		}
	}
	if running.Samples != 600 || running.Features != 5 || len(running.ShardNodes) != 3 || running.StopRule != "100000 iterations (no convergence test)" ||
		running.SubmittedUnixMs == 0 || len(running.History) == 0 || len(running.Events) == 0 ||
		running.Events[0].Kind != messages.JobEventKind_JOB_EVENT_KIND_STARTED {
		t.Errorf("the running job's detail: %v", running)
	}
	if jobs := listJobs(t, alice, coordNode, &messages.ListJobs{}); len(jobs) != 1 || len(jobs[0].History) != 0 || len(jobs[0].Events) != 0 {
		t.Errorf("without detail, a job's history and events are left out: %v", jobs)
	}

	alice.Send(HostPID(coordNode), &messages.CancelJob{JobId: job.ID})
	if _, err := job.Wait(ctx); err == nil {
		t.Fatal("the canceled job ended without an error")
	}
	var rec *messages.JobInfo
	for deadline := time.Now().Add(10 * time.Second); rec == nil; {
		if time.Now().After(deadline) {
			t.Fatal("the ended job's record was not listed")
		}
		if jobs := listJobs(t, alice, coordNode, &messages.ListJobs{Ended: true, Detail: true}); len(jobs) == 1 {
			rec = jobs[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	if rec.JobId != job.ID || rec.State != messages.JobPhase_JOB_PHASE_CANCELED || rec.ErrorKind != messages.ErrorKind_ERROR_KIND_CANCELED ||
		rec.Error != "job canceled by its owner alice" || rec.EndedUnixMs < rec.SubmittedUnixMs || rec.Owner != "alice" || len(rec.History) == 0 ||
		len(rec.History) > jobctl.MaxInfoHistory || rec.Events[len(rec.Events)-1].Kind != messages.JobEventKind_JOB_EVENT_KIND_ENDED {
		t.Errorf("the canceled job's record: %v", rec)
	}
	if jobs := listJobs(t, alice, coordNode, &messages.ListJobs{}); len(jobs) != 0 {
		t.Errorf("an ended job listed without ended: %v", jobs)
	}
	if jobs := listJobs(t, mallory, coordNode, &messages.ListJobs{Ended: true}); len(jobs) != 0 {
		t.Errorf("another client lists alice's ended job: %v", jobs)
	}
	if jobs := listJobs(t, peer, coordNode, &messages.ListJobs{Ended: true}); len(jobs) != 1 || len(jobs[0].History) != 0 {
		t.Errorf("a peer lists the ended job (without detail: no history): %v", jobs)
	}
}
