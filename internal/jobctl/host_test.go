package jobctl

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/messages"
)

func newTestHost(t *testing.T, cfg HostConfig) *Host {
	t.Helper()
	if cfg.Node == "" {
		cfg.Node = hostNode
	}
	if cfg.Orphan == 0 {
		cfg.Orphan = time.Minute
	}
	h, err := NewHost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestHostConfigValidate(t *testing.T) {
	ok := HostConfig{Node: "n1", MaxRestarts: 20, Orphan: time.Minute}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(*HostConfig)
		want string
	}{
		{"no node", func(c *HostConfig) { c.Node = "" }, "no node address"},
		{"negative memory", func(c *HostConfig) { c.Memory = -1 }, "negative limit"},
		{"negative owner quota", func(c *HostConfig) { c.OwnerMaxJobs = -1 }, "negative limit"},
		{"negative restarts", func(c *HostConfig) { c.MaxRestarts = -1 }, "MaxRestarts -1"},
		{"no orphan wait", func(c *HostConfig) { c.Orphan = 0 }, "Orphan 0s"},
	} {
		cfg := ok
		c.edit(&cfg)
		_, err := NewHost(cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// TestHostRefusesEvents: an event the host does not know, or one without its message, is an
// error and asks for nothing.
func TestHostRefusesEvents(t *testing.T) {
	for _, c := range []struct {
		name string
		ev   any
		want string
	}{
		{"unknown type", struct{}{}, "unknown event struct {}"},
		{"a wire message as is", &messages.ShardAssignment{JobId: "j"}, "unknown event *messages.ShardAssignment"},
		{"a pointer to an event", &HostMemberLeft{Addr: "n2"}, "unknown event *jobctl.HostMemberLeft"},
		{"submit without its message", HostSubmit{}, "without its SubmitJob"},
		{"shard without its assignment", HostShardAssign{}, "without its ShardAssignment"},
		{"reducer without its assignment", HostReducerAssign{}, "without its ReducerAssignment"},
		{"stop without its message", HostStop{}, "without its StopJob"},
		{"commit without its message", HostCheckpointCommitted{}, "without its CheckpointCommitted"},
		{"buddies without their message", HostBuddies{}, "without its Buddies"},
		{"state without its message", HostJobState{}, "without its JobState"},
		{"answer without the answer", HostAnswerKept{Job: "j"}, "without its answer"},
		{"answer without its time", HostAnswerKept{Job: "j", Answer: &messages.JobError{JobId: "j"}}, "without its answer or its time"},
		{"renewal without its message", HostLeaseRenew{At: time.Unix(0, 0)}, "without its LeaseRenew"},
		{"renewal without its time", HostLeaseRenew{Renew: &messages.LeaseRenew{JobId: "j"}}, "without its LeaseRenew or its time"},
		{"a spawn it did not ask for", HostSpawnFailed{Name: "j-s0", Err: "boom"}, `HostSpawnFailed of "j-s0"`},
	} {
		h := newTestHost(t, HostConfig{})
		err := h.Step(c.ev)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
		if rd := h.Ready(); fmt.Sprint(rd) != fmt.Sprint(HostReady{}) {
			t.Errorf("%s: the refused event asked for %+v", c.name, rd)
		}
	}
}

// TestHostOwnerQuotas: a host refuses a shard that would take its owner past a quota (jobs,
// shards, memory) with an error naming the quota, what the owner holds and the flag, and
// takes the same shard of another owner; actors that stop give their share back. (It was
// actors' TestOwnerQuotasOfShards, on the host actor's book.)
func TestHostOwnerQuotas(t *testing.T) {
	h := newTestHost(t, HostConfig{OwnerMaxJobs: 2, OwnerMaxShards: 3, OwnerMemory: 1000})
	held := map[string]int64{}
	coord := func(job string) *messages.Pid { return coordPid("n2", job) }
	place := func(owner, job string, shard, reserve int64) string {
		t.Helper()
		a := &messages.ShardAssignment{JobId: job, Owner: owner, Shard: shard, Epoch: 1, Coordinator: coord(job)}
		if err := h.Step(HostShardAssign{Assignment: a, Reserve: reserve, OwnerHeld: held[owner]}); err != nil {
			t.Fatal(err)
		}
		rd := h.Ready()
		for _, s := range rd.Spawns {
			held[s.Owner] += s.Reserve
		}
		for _, s := range rd.Sends {
			if p, ok := s.Msg.(*messages.Placed); ok && p.Error != "" {
				return p.Error
			}
		}
		if len(rd.Spawns) != 1 {
			t.Fatalf("shard %d of %s: neither spawned nor refused: %+v", shard, job, rd)
		}
		return ""
	}
	stopped := func(name string) {
		t.Helper()
		if err := h.Step(HostChildStopped{ID: childID(name)}); err != nil {
			t.Fatal(err)
		}
		for _, r := range h.Ready().Releases {
			held[r.Owner] -= r.Bytes
		}
	}
	// bob holds job a (a coordinator and two shards of 300 bytes) and job b (a shard of 300).
	if err := h.Step(HostSubmit{Submit: &messages.SubmitJob{JobId: "a"}, Caller: "bob"}); err != nil || len(h.Ready().Spawns) != 1 {
		t.Fatalf("bob's job a: %v", err)
	}
	for _, s := range []struct {
		job   string
		shard int64
	}{{"a", 0}, {"a", 1}, {"b", 0}} {
		if err := place("bob", s.job, s.shard, 300); err != "" {
			t.Fatalf("bob's shard %d of %s: %s", s.shard, s.job, err)
		}
	}
	for _, c := range []struct {
		name, owner, job string
		reserve          int64
		want             []string // nil: admitted
	}{
		{"memory", "bob", "a", 200, []string{`owner "bob" holds 900 B`, "quota is 1000 B", "--owner-memory", "shard 7 needs 200 B"}},
		{"shards", "bob", "a", 100, []string{`owner "bob" holds 3 shards`, "--owner-max-shards"}},
		{"alice", "alice", "c", 1000, nil},
		{"alice's memory", "alice", "c", 1001, []string{"--owner-memory"}},
	} {
		shard := int64(7)
		if c.want == nil {
			shard = 8
		}
		got := place(c.owner, c.job, shard, c.reserve)
		if c.want == nil && got != "" {
			t.Errorf("%s: refused: %s", c.name, got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q, want it to say %q", c.name, got, w)
			}
		}
	}
	stopped("a-s1") // bob: 2 shards, 600 bytes, jobs a and b
	if got := place("bob", "c", 0, 100); !strings.Contains(got, `owner "bob" runs 2 jobs`) || !strings.Contains(got, "--owner-max-jobs") {
		t.Errorf("bob's third job: %q, want it refused for his quota of jobs", got)
	}
	if got := place("bob", "a", 9, 100); got != "" {
		t.Errorf("bob's shard after one of his stopped: refused: %s", got)
	}
	if err := h.Step(HostSubmit{Submit: &messages.SubmitJob{JobId: "d", Client: hostClient}, Caller: "bob"}); err != nil {
		t.Fatal(err)
	}
	if rd := h.Ready(); len(rd.Sends) != 1 || !strings.Contains(hostMsg(rd.Sends[0].Msg), "--owner-max-jobs") {
		t.Errorf("bob's third job at submission: %+v, want it refused for his quota of jobs", rd)
	}
	for _, name := range []string{"a-coord", "a-s0", "a-s9", "b-s0", "b-s0", "c-s8"} {
		stopped(name)
	}
	if len(h.children) != 0 {
		t.Errorf("after every actor stopped the host holds %v", h.children)
	}
	for id, j := range h.jobs { // the epochs and coordinators stay until the jobs end
		if j.submit != nil || j.owner != "" {
			t.Errorf("after every actor stopped job %s keeps its submission or owner (%q)", id, j.owner)
		}
	}
	for owner, b := range held {
		if b != 0 {
			t.Errorf("after every actor stopped %s holds %d B", owner, b)
		}
	}
}

// TestHostKeptAnswersBounds: the host keeps at most HostKeptAnswers answers, dropping the
// oldest, and none larger than HostKeptAnswerBytes.
func TestHostKeptAnswersBounds(t *testing.T) {
	h := newTestHost(t, HostConfig{})
	at := time.Unix(0, 0)
	for i := 0; i <= HostKeptAnswers; i++ {
		job := fmt.Sprintf("j%d", i)
		if err := h.Step(HostAnswerKept{Job: job, Token: "t", Answer: &messages.JobError{JobId: job}, At: at.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	if len(h.answers) != HostKeptAnswers {
		t.Fatalf("%d answers kept, want %d", len(h.answers), HostKeptAnswers)
	}
	if _, ok := h.answers["j0"]; ok {
		t.Error("the oldest answer is kept past the bound")
	}
	huge := &messages.JobError{JobId: "big", Message: strings.Repeat("x", HostKeptAnswerBytes)}
	if err := h.Step(HostAnswerKept{Job: "big", Token: "t", Answer: huge, At: at}); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.answers["big"]; ok {
		t.Error("an answer larger than the bound is kept")
	}
	if err := h.Step(HostLeaseRenew{Renew: &messages.LeaseRenew{JobId: "j1", OwnerToken: ""}, At: at}); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Ready().Reply.(*messages.LeaseAck); !ok {
		t.Error("a renewal without the token got the kept answer")
	}
}
