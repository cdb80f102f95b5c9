package didnmf

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRunnerJobsAndCancel: a detached job submitted to a cluster of two members is listed by
// Jobs with its spec's figures and state, canceled by id, and gone from the list; on a target
// that is not a cluster both say so.
func TestRunnerJobsAndCancel(t *testing.T) {
	secret, data := NewSecret(), t.TempDir()
	var members []*Member
	t.Cleanup(func() {
		for _, m := range members {
			m.Close()
		}
	})
	for _, name := range []string{"a", "b"} {
		cfg := LocalNode()
		cfg.Name, cfg.Secret, cfg.Node.Threads, cfg.DataRoots = name, secret, 1, []string{data}
		if len(members) > 0 {
			cfg.Join = []string{members[0].Gossip()}
		}
		m, err := Serve(cfg)
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, m)
	}
	runner, err := NewRunner(OnCluster(ClusterConfig{Cluster: []string{members[0].Gossip()}, Secret: secret, Name: "alice"}))
	if err != nil {
		t.Fatal(err)
	}
	defer runner.Close()
	spec := NewSpec([]string{"synthetic:m=10,n=4000,k=3,seed=2"}, DID, 3, 4)
	spec.Stop.Tol, spec.Stop.MaxIter, spec.Detached, spec.OutShared = 0, 1<<30, true, filepath.Join(data, "out")
	j, err := Open(spec, runner.Target())
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	id, err := runner.Submit(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	var listed JobInfo
	for deadline := time.Now().Add(30 * time.Second); listed.State != "running"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("job %s not listed running: %+v", id, listed)
		}
		jobs, err := runner.Jobs(2 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, info := range jobs {
			if info.ID == id {
				listed = info
			}
		}
	}
	if listed.Owner != "alice" || listed.Algorithm != DID || listed.Rank != 3 || listed.Shards != 4 || !listed.Detached || listed.MaxIter != 1<<30 {
		t.Errorf("listed %+v, want alice's detached DID job of rank 3 on 4 shards", listed)
	}
	if err := runner.Cancel(id, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	jobs, err := runner.Jobs(2 * time.Second)
	if err != nil || len(jobs) != 0 {
		t.Errorf("after the cancel: %+v, %v", jobs, err)
	}
	// The ended job: AllJobs lists it with its outcome, and its --out-shared directory says
	// why it holds no result.
	all, err := runner.AllJobs(2 * time.Second)
	if err != nil || len(all) != 1 {
		t.Fatalf("AllJobs after the cancel: %+v, %v", all, err)
	}
	if e := all[0]; e.ID != id || e.State != "canceled" || e.ErrorKind != "canceled" || e.Error == "" || !e.IsEnded() ||
		e.Ended.Before(e.Submitted) || e.Samples != 4000 || e.Features != 10 || len(e.ShardNodes) != 4 || e.OutShared != spec.OutShared {
		t.Errorf("the canceled job, as AllJobs lists it: %+v", e)
	}
	var ef struct{ Job, State, Kind, Message string }
	for deadline := time.Now().Add(10 * time.Second); ef.Job == ""; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no error.json in the canceled detached job's --out-shared directory")
		}
		if data, err := os.ReadFile(filepath.Join(spec.OutShared, "error.json")); err == nil {
			if err := json.Unmarshal(data, &ef); err != nil {
				t.Fatalf("error.json: %v: %s", err, data)
			}
		}
	}
	if ef.Job != id || ef.State != "canceled" || ef.Kind != "canceled" || ef.Message == "" {
		t.Errorf("error.json: %+v", ef)
	}
	// The record outlives the coordinator's node: its standby keeps it too.
	for _, m := range members {
		if m.Node.Address() == all[0].Coordinator {
			m.Close()
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		all, _ = runner.AllJobs(2 * time.Second) // the closed member does not answer
		if len(all) == 1 && all[0].ID == id && all[0].State == "canceled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the coordinator's node closed, AllJobs lists %+v, want the canceled job from its standby", all)
		}
	}

	local, err := NewRunner(Local(1))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	if _, err := local.Jobs(time.Second); !errors.Is(err, ErrNotCluster) {
		t.Errorf("Jobs on Local: %v", err)
	}
	if err := local.Cancel("x", time.Second); !errors.Is(err, ErrNotCluster) {
		t.Errorf("Cancel on Local: %v", err)
	}
}
