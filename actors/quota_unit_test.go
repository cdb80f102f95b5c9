package actors

import (
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/didnmf/didnmf/messages"
)

func TestOwnerQuotaDefaults(t *testing.T) {
	for _, c := range []struct {
		name string
		in   NodeConfig
		want [4]int64 // jobs, shards, memory, streams
	}{
		{"serve's defaults", NodeConfig{MaxJobs: DefaultMaxJobs, MaxShards: DefaultMaxShards, Memory: 8 << 30},
			[4]int64{DefaultMaxJobs / 4, DefaultMaxShards / 4, 6 << 30, DefaultOwnerMaxStreams}},
		{"at least one", NodeConfig{MaxJobs: 2, MaxShards: 3, Memory: 1}, [4]int64{1, 1, 1, DefaultOwnerMaxStreams}},
		{"no node limit, no quota", NodeConfig{}, [4]int64{0, 0, 0, DefaultOwnerMaxStreams}},
		{"set", NodeConfig{MaxJobs: 64, MaxShards: 64, Memory: 100, OwnerMaxJobs: 5, OwnerMaxShards: 6, OwnerMemory: 7, OwnerMaxStreams: 8},
			[4]int64{5, 6, 7, 8}},
		{"none", NodeConfig{MaxJobs: 64, MaxShards: 64, Memory: 100, OwnerMaxJobs: -1, OwnerMaxShards: -1, OwnerMemory: -1, OwnerMaxStreams: -1},
			[4]int64{0, 0, 0, 0}},
	} {
		cfg := c.in
		resolveQuotas(&cfg)
		if got := [4]int64{int64(cfg.OwnerMaxJobs), int64(cfg.OwnerMaxShards), cfg.OwnerMemory, int64(cfg.OwnerMaxStreams)}; got != c.want {
			t.Errorf("%s: quotas (jobs, shards, memory, streams) %v, want %v", c.name, got, c.want)
		}
	}
	// A node started alone takes the defaults; the nodes of one process (a LocalCluster) have
	// no quota unless the config sets one.
	n, err := StartNode(NodeConfig{Threads: 1, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.cfg.OwnerMaxJobs != DefaultMaxJobs/4 || n.cfg.OwnerMaxShards != DefaultMaxShards/4 || n.cfg.OwnerMaxStreams != DefaultOwnerMaxStreams {
		t.Errorf("StartNode: quotas %d jobs, %d shards, %d streams; want the defaults", n.cfg.OwnerMaxJobs, n.cfg.OwnerMaxShards, n.cfg.OwnerMaxStreams)
	}
	lc, err := StartLocalCluster(1, NodeConfig{Threads: 1, Insecure: true, Memory: 1 << 30, OwnerMaxShards: 9})
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	if cfg := lc.Nodes[0].cfg; cfg.OwnerMaxJobs != 0 || cfg.OwnerMemory != 0 || cfg.OwnerMaxStreams != 0 || cfg.OwnerMaxShards != 9 {
		t.Errorf("LocalCluster: quotas %d jobs, %d shards, %d bytes, %d streams; want none but the shards' 9",
			cfg.OwnerMaxJobs, cfg.OwnerMaxShards, cfg.OwnerMemory, cfg.OwnerMaxStreams)
	}
}

// TestOwnerQuotasOfShards: a host refuses a shard that would take its owner past a quota
// (jobs, shards, memory) with an error naming the quota, what the owner holds and the flag,
// and takes the same shard of another owner; actors that stop give their share back.
func TestOwnerQuotasOfShards(t *testing.T) {
	system := actor.NewActorSystem()
	h := newHost(&Node{system: system, cfg: NodeConfig{OwnerMaxJobs: 2, OwnerMaxShards: 3, OwnerMemory: 1000}})
	// bob holds job a (a coordinator and two shards of 300 bytes) and job b (a shard of 300).
	h.hold("host/a-coord", "bob", "a", false, 0)
	h.hold("host/a-s0", "bob", "a", true, 300)
	h.hold("host/a-s1", "bob", "a", true, 300)
	h.hold("host/b-s0", "bob", "b", true, 300)
	shard := func(owner, job string, reserve int64) string {
		return h.admitShard(&messages.ShardAssignment{JobId: job, Owner: owner, Shard: 7}, reserve)
	}
	for _, c := range []struct {
		name, owner, job string
		reserve          int64
		want             []string // "" admitted
	}{
		{"memory", "bob", "a", 200, []string{`owner "bob" holds 900 B`, "quota is 1000 B", "--owner-memory", "shard 7 needs 200 B"}},
		{"shards", "bob", "a", 100, []string{`owner "bob" holds 3 shards`, "--owner-max-shards"}},
		{"alice", "alice", "c", 1000, nil},
		{"alice's memory", "alice", "c", 1001, []string{"--owner-memory"}},
	} {
		got := shard(c.owner, c.job, c.reserve)
		if c.want == nil && got != "" {
			t.Errorf("%s: refused: %s", c.name, got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q, want it to say %q", c.name, got, w)
			}
		}
	}
	h.unhold("host/a-s1") // bob: 2 shards, 600 bytes, jobs a and b
	if got := shard("bob", "a", 100); got != "" {
		t.Errorf("bob's shard after one of his stopped: refused: %s", got)
	}
	if got := shard("bob", "c", 100); !strings.Contains(got, `owner "bob" runs 2 jobs`) || !strings.Contains(got, "--owner-max-jobs") {
		t.Errorf("bob's third job: %q, want it refused for his quota of jobs", got)
	}
	if got := h.admitOwnerJob("bob"); !strings.Contains(got, "--owner-max-jobs") {
		t.Errorf("bob's third job at submission: %q, want it refused for his quota of jobs", got)
	}
	for _, id := range []string{"host/a-coord", "host/a-s0", "host/b-s0", "host/b-s0"} {
		h.unhold(id)
	}
	if len(h.book.owners) != 0 || len(h.book.children) != 0 {
		t.Errorf("after every actor stopped the book holds %v, %v", h.book.owners, h.book.children)
	}
}

func TestStreamSlots(t *testing.T) {
	var s streamSlots
	told := map[string]int{}
	notify := func(id string) func() { return func() { told[id]++ } }
	for _, id := range []string{"a", "b"} {
		if !s.acquire("bob", id, 2, notify(id)) {
			t.Fatalf("%s: no slot under the bound", id)
		}
	}
	if s.acquire("bob", "c", 2, notify("c")) || s.acquire("bob", "d", 2, notify("d")) || s.acquire("bob", "c", 2, notify("c")) {
		t.Fatal("a slot past the bound")
	}
	if !s.acquire("alice", "x", 2, notify("x")) {
		t.Fatal("alice waits for bob's streams")
	}
	if active, waiting := s.streaming("bob"); active != 2 || waiting != 2 {
		t.Fatalf("bob: %d streams, %d waiting; want 2 and 2", active, waiting)
	}
	s.release("bob", "a") // c takes a's slot
	if told["c"] != 1 || !s.holds("c") || told["d"] != 0 {
		t.Fatalf("after a stream ended: told %v, c holds %v", told, s.holds("c"))
	}
	s.release("bob", "d") // d gives up its wait
	s.release("bob", "b")
	s.release("bob", "c")
	s.release("bob", "zz") // neither: ignored
	if active, waiting := s.streaming("bob"); active != 0 || waiting != 0 || told["d"] != 0 {
		t.Fatalf("bob: %d streams, %d waiting, told %v; want none", active, waiting, told)
	}
	if !s.acquire("bob", "e", 2, notify("e")) {
		t.Fatal("no slot once every stream ended")
	}
}
