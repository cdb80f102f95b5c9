package server

import (
	"context"
	"math"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/checkpoint"
	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/internal/actors"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/pki"
)

func TestCheckSecurity(t *testing.T) {
	key := make([]byte, 16)
	tls := &pki.Config{}
	for _, c := range []struct {
		host     string
		key      []byte
		tls      *pki.Config
		insecure bool
		refused  string
	}{
		{"127.0.0.1", nil, nil, false, ""},
		{"::1", nil, nil, false, ""},
		{"10.0.0.5", key, tls, false, ""},
		{"10.0.0.5", nil, nil, true, ""},
		{"10.0.0.5", nil, nil, false, "--gossip-key-file (or DIDNMF_GOSSIP_KEY) to encrypt the gossip and --tls-cert"},
		{"10.0.0.5", key, nil, false, "without --tls-cert"},
		{"10.0.0.5", nil, tls, false, "need --gossip-key-file"},
		{"127.0.0.1", nil, tls, false, "need --gossip-key-file"}, // loopback too: the gossip would be open
		{"127.0.0.1", key, tls, false, ""},
	} {
		err := CheckSecurity(c.host, c.key, c.tls, c.insecure)
		if c.refused == "" && err != nil || c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)) {
			t.Errorf("%s key=%v tls=%v insecure=%v: %v, want %q", c.host, c.key != nil, c.tls != nil, c.insecure, err, c.refused)
		}
	}
}

func TestStartRefusesBadConfig(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Bind: "localhost"}, "want IP:PORT"},
		{Config{Bind: "node1:7946"}, "not an IP address"},
		{Config{Bind: "127.0.0.1:99999"}, "bad port"},
		{Config{Bind: "0.0.0.0:0", Insecure: true}, "not a wildcard"},
		{Config{Bind: "127.0.0.1:0", Node: actors.NodeConfig{Capacity: -1}}, "--capacity"},
		{Config{Bind: "127.0.0.1:0", Node: actors.NodeConfig{Memory: -1}}, "--memory"},
		// What the server sets from its own fields is not given twice.
		{Config{Bind: "127.0.0.1:0", Insecure: true, Node: actors.NodeConfig{Host: "127.0.0.2"}}, "leave Config.Node.Host unset"},
		{Config{Bind: "127.0.0.1:0", Insecure: true, Node: actors.NodeConfig{Insecure: true, TLS: &pki.Config{}}}, "leave Config.Node.TLS, Insecure unset"},
		{Config{Bind: "127.0.0.1:0", Insecure: true, Node: actors.NodeConfig{Partition: cluster.NewPartition()}}, "leave Config.Node.Partition unset"},
		// The version and URL go into the gossip meta, under its rules.
		{Config{Bind: "127.0.0.1:0", Insecure: true, Version: "v1 beta"}, "Config.Version"},
		{Config{Bind: "127.0.0.1:0", Insecure: true, Version: strings.Repeat("v", cluster.MaxVersionBytes+1)}, "more than 64"},
		{Config{Bind: "127.0.0.1:0", Insecure: true, HTTP: "javascript:alert(1)"}, "scheme must be http or https"},
		{Config{Bind: "127.0.0.1:0", Insecure: true, HTTP: "127.0.0.1:8265"}, "Config.HTTP"},
	} {
		c.cfg.Node.DataDir = filepath.Join(dir, "d")
		if s, err := Start(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			if s != nil {
				s.Close()
			}
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

// TestClusterInProcess: three members join by gossip and a client connects through a
// member's front door; a second node cannot use a data directory in use; a job placed on the
// members is bitwise the driver's; the client is in no member's list and status lists the
// members only; a member that leaves is gone from the others' lists and the client's.
func TestClusterInProcess(t *testing.T) {
	pool := kernels.NewPool(2)
	key := testKey()
	defer pool.Close()
	dir := t.TempDir()
	var members []*Server
	defer func() {
		for _, m := range members {
			m.Close()
		}
	}()
	for i, name := range []string{"a", "b", "c"} {
		cfg := Config{Name: name, Bind: "127.0.0.1:0", Node: actors.NodeConfig{Pool: pool, DataDir: filepath.Join(dir, name)}, Secret: key}
		if i > 0 {
			cfg.Join = []string{members[0].Gossip()}
		}
		s, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, s)
	}
	if s, err := Start(Config{Name: "d", Bind: "127.0.0.1:0", Node: actors.NodeConfig{DataDir: filepath.Join(dir, "a")}}); err == nil || !strings.Contains(err.Error(), "in use") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("a second node on a's data directory: %v", err)
	}
	client, err := Connect(ClientConfig{Cluster: []string{members[1].Gossip()}, Secret: key})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	deadline := time.Now().Add(10 * time.Second)
	// The members never list the client: they admit only proven peers (issue 30).
	for len(client.Members.Workers()) < 3 || len(members[2].Members.Members()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("client sees %d workers, c sees %d members", len(client.Members.Workers()), len(members[2].Members.Members()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, m := range members {
		if ms := m.Members.Members(); len(ms) != 3 {
			t.Errorf("member %s lists %v, want the 3 members and not the client", m.name, names(ms))
		}
		if m.Node.DataPlaneAddress() == "" {
			t.Errorf("member %s has no data plane", m.name)
		}
	}
	if a := client.Node.DataPlaneAddress(); a != "" {
		t.Errorf("the client opened a data plane at %s", a)
	}
	if co, _ := client.Coordinator(); co.Name != "b" {
		t.Errorf("jobs go to %s, want the seed b", co.Name)
	}
	spec := &messages.JobSpec{Inputs: []string{"synthetic:m=6,n=3000,k=3,seed=3"}, Rank: 3, Algorithm: messages.Algorithm_ALGORITHM_DID, Shards: 6, Seed: 2,
		Stop: &messages.StopRule{MaxIter: 15}}
	job, err := client.Submit(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := job.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// An ended job is no longer followed: a client running hundreds of jobs (a sweep) must
	// not keep each one's coefficients.
	for deadline := time.Now().Add(5 * time.Second); client.watched() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the client still follows %d job(s) after the job ended", client.watched())
		}
	}
	src, err := matio.Open(spec.Inputs[0])
	if err != nil {
		t.Fatal(err)
	}
	r := kernels.ColumnRanges(src.Samples(), 6)
	blocks := make([]kernels.Block, 6)
	for s := range blocks {
		if blocks[s], err = src.Read(r[s], r[s+1], matio.LayoutAuto); err != nil {
			t.Fatal(err)
		}
	}
	want, err := kernels.Run(context.Background(), blocks, kernels.Config{Algo: kernels.DID, K: 3, Seed: 2, Stop: kernels.StopRule{MaxIter: 15}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.B {
		if math.Float64bits(want.B[i]) != math.Float64bits(got.B[i]) {
			t.Fatalf("B differs from the driver's at %d", i)
		}
	}
	for i := range want.C {
		if math.Float64bits(want.C[i]) != math.Float64bits(got.C[i]) {
			t.Fatalf("C differs from the driver's at %d", i)
		}
	}
	// The client is not a member: no member lists it, and status lists the members only.
	for _, m := range members {
		for _, mem := range m.Members.Members() {
			if mem.Meta.Role != cluster.RoleMember || mem.Meta.Actor == client.Node.Address() {
				t.Errorf("%s lists the client: %+v", m.Name(), mem)
			}
		}
		if n := len(m.Members.Members()); n != 3 {
			t.Errorf("%s lists %d nodes, want the 3 members", m.Name(), n)
		}
	}
	st := client.Status(time.Second)
	if len(st) != 3 {
		t.Errorf("status lists %d members, want 3", len(st))
	}
	for _, s := range st {
		if s.Member.Meta.Role != cluster.RoleMember || s.Load == nil {
			t.Errorf("status lists %+v (load %v, %v)", s.Member, s.Load, s.Err)
		}
	}
	if err := members[2].Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for len(members[0].Members.Workers()) != 2 || len(client.Members.Workers()) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("a lists %d workers, the client %d, after c left", len(members[0].Members.Workers()), len(client.Members.Workers()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestVersionInMeta: a member's Config.Version and HTTP are in its gossip meta: every member
// and a client (through a front door's view) see them; a member that advertises neither (as a
// build from before them, whose meta is version 1) is seen with both empty.
func TestVersionInMeta(t *testing.T) {
	key := testKey()
	dir := t.TempDir()
	want := map[string][2]string{"a": {"v0.4.0", "https://127.0.0.1:8265"}, "b": {"(devel)", ""}, "c": {"", ""}}
	var members []*Server
	defer func() {
		for _, m := range members {
			m.Close()
		}
	}()
	for i, name := range []string{"a", "b", "c"} {
		cfg := Config{Name: name, Bind: "127.0.0.1:0", Node: actors.NodeConfig{Threads: 1, DataDir: filepath.Join(dir, name)}, Secret: key,
			Version: want[name][0], HTTP: want[name][1]}
		if i > 0 {
			cfg.Join = []string{members[0].Gossip()}
		}
		s, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, s)
	}
	client, err := Connect(ClientConfig{Cluster: []string{members[2].Gossip()}, Secret: key})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	views := map[string]func() []cluster.Member{"client": client.Members.Workers}
	for _, m := range members {
		views[m.Name()] = m.Members.Members
	}
	for who, list := range views {
		for deadline := time.Now().Add(10 * time.Second); len(list()) < 3; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s sees %d members, want 3", who, len(list()))
			}
		}
		for _, m := range list() {
			if got := [2]string{m.Meta.Version, m.Meta.HTTP}; got != want[m.Name] {
				t.Errorf("%s sees %s with version and HTTP %q, want %q", who, m.Name, got, want[m.Name])
			}
		}
	}
}

// TestStaleCheckpointsRemovedAtStart: a node that starts with checkpoints of a job no live
// member knows (it ended while the node was down) removes them; those of a job a member runs
// stay.
func TestStaleCheckpointsRemovedAtStart(t *testing.T) {
	key := testKey()
	dir := t.TempDir()
	store, err := checkpoint.Open(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &checkpoint.Record{Job: "ended", Shard: 0, Shards: 1, Epoch: 1, Iteration: 5, B: []float64{1}, C: []float64{2}}
	if err := store.Write(checkpoint.Own, rec); err != nil {
		t.Fatal(err)
	}
	a, err := Start(Config{Name: "a", Bind: "127.0.0.1:0", Node: actors.NodeConfig{DataDir: filepath.Join(dir, "a"), Threads: 1}, Secret: key})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Start(Config{Name: "b", Bind: "127.0.0.1:0", Node: actors.NodeConfig{DataDir: filepath.Join(dir, "b"), Threads: 1}, Secret: key, Join: []string{a.Gossip()}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if jobs, err := b.Node.Checkpoints().Jobs(); err != nil || len(jobs) != 0 {
		t.Fatalf("checkpoints of an ended job kept: %v %v", jobs, err)
	}
}

// TestGossipFloodIsCounted: the gossip port's refused connections are among the node's
// drops, which its peers see in status.
func TestGossipFloodIsCounted(t *testing.T) {
	s := startMembers(t, nil, nil, testKey(), "a")[0]
	attacker := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
	for range 40 {
		c, err := attacker.Dial("tcp", s.Gossip())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	for deadline := time.Now().Add(10 * time.Second); s.Node.Drops()["gossip: too many connections"] == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("40 idle connections from one address to the gossip port, and no drop counted: %v", s.Node.Drops())
		}
	}
}
