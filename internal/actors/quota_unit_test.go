package actors

import (
	"testing"
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
