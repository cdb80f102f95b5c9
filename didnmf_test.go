package didnmf

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/internal/server"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/pki"
	"github.com/didnmf/didnmf/report"
	"github.com/didnmf/didnmf/usererr"
)

// testSpec is a small job every target runs in well under a second.
func testSpec(algo kernels.Algorithm) *jobspec.Spec {
	s := jobspec.New([]string{"synthetic:m=6,n=1500,k=3,seed=2,noise=0.01"}, algo, 3, 5)
	s.Stop = kernels.StopRule{MaxIter: 25}
	return s
}

// startCluster starts n members in this process and returns the target of a client of
// theirs. The members read and write files of jobs under roots (none: no file).
func startCluster(t *testing.T, n int, roots ...string) Target {
	t.Helper()
	secret := pki.NewSecret()
	var members []*server.Server
	t.Cleanup(func() {
		for _, m := range members {
			m.Close()
		}
	})
	for i := 0; i < n; i++ {
		cfg := server.Config{Name: "m" + string(rune('1'+i)), Bind: "127.0.0.1:0", Secret: secret, DataRoots: roots}
		if i > 0 {
			cfg.Join = []string{members[0].Gossip()}
		}
		m, err := server.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, m)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(members[0].Members.Workers()) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return OnCluster(server.ClientConfig{Cluster: []string{members[0].Gossip()}, Secret: secret})
}

// TestTargetsGiveTheSameBits: one spec, run through Run on the driver, on 1 and 3 in-process
// actor systems and on a cluster of 3 members (its nodes reading the input, and the client
// streaming it), gives bitwise the same factors for every distributed algorithm.
func TestTargetsGiveTheSameBits(t *testing.T) {
	cluster := startCluster(t, 3)
	for _, algo := range []kernels.Algorithm{kernels.DID, kernels.DBCD, kernels.DADMM, kernels.HPCANLS} {
		want, err := Run(context.Background(), testSpec(algo), Local(0), Options{})
		if err != nil {
			t.Fatalf("%s on the driver: %v", algo, err)
		}
		stream := testSpec(algo)
		stream.Ingest = jobspec.IngestStream
		for _, c := range []struct {
			name   string
			spec   *jobspec.Spec
			target Target
		}{
			{"1 in-process node", testSpec(algo), InProcess(1, 0)},
			{"3 in-process nodes", testSpec(algo), InProcess(3, 0)},
			{"a cluster, shared ingest", testSpec(algo), cluster},
			{"a cluster, streamed", stream, cluster},
		} {
			var its []int
			got, err := Run(context.Background(), c.spec, c.target, Options{Progress: func(p kernels.Progress) { its = append(its, p.Iteration) }})
			if err != nil {
				t.Fatalf("%s on %s: %v", algo, c.name, err)
			}
			if !slices.Equal(got.B, want.B) || !slices.Equal(got.C, want.C) || got.Iterations != want.Iterations {
				t.Errorf("%s on %s: factors differ from the driver's", algo, c.name)
			}
			if len(its) != want.Iterations || got.JobID == "" || len(got.ShardNodes) != 5 || got.MessagesPerIteration <= 0 {
				t.Errorf("%s on %s: %d progress calls for %d iterations, job %q, shard nodes %v, %v messages per iteration",
					algo, c.name, len(its), want.Iterations, got.JobID, got.ShardNodes, got.MessagesPerIteration)
			}
		}
	}
}

// TestOpenRefuses: what is wrong with a job is an error that names the field, in wire and in
// flag names, before anything runs.
func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	wrongBasis := filepath.Join(dir, "b.npy")
	f, err := os.Create(wrongBasis)
	if err != nil {
		t.Fatal(err)
	}
	if err := matio.WriteNPY(f, 5, 3, make([]float64, 15)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cluster := OnCluster(server.ClientConfig{Cluster: []string{"127.0.0.1:1"}})
	for _, c := range []struct {
		name   string
		change func(*jobspec.Spec)
		target Target
		field  string // "" for an error about no field
		want   string
	}{
		{"rank above the shape", func(s *jobspec.Spec) { s.Rank = 7 }, Local(0), "rank", "rank: rank 7 out of range"},
		{"rank 0", func(s *jobspec.Spec) { s.Rank = 0 }, Local(0), "rank", "rank: rank 0 out of range"},
		{"rank 0 on a cluster", func(s *jobspec.Spec) { s.Rank = 0 }, cluster, "rank", "rank must be >= 1, got 0"},
		{"shards above the samples", func(s *jobspec.Spec) { s.Shards = 1501 }, Local(0), "shards", "shards 1501 is more than the 1500 samples"},
		{"custom basis shape", func(s *jobspec.Spec) {
			s.Init, s.InitBasis, s.InitCoef = kernels.InitCustom, wrongBasis, wrongBasis
		}, Local(0), "init_basis", "b.npy: shape (5, 3), but synthetic:m=6,n=1500,k=3,seed=2,noise=0.01 has 6 features and rank is 3: want features x K = (6, 3)"},
		{"missing file", func(s *jobspec.Spec) { s.Inputs = []string{filepath.Join(dir, "none.npy")} }, Local(0), "", "none.npy"},
		{"relative path on a cluster", func(s *jobspec.Spec) { s.Inputs = []string{"x.npy"} }, cluster, "input",
			"input x.npy: give an absolute path with ingest shared"},
		{"stream ingest here", func(s *jobspec.Spec) { s.Ingest = jobspec.IngestStream }, InProcess(2, 0), "ingest", "ingest stream is for jobs on a cluster"},
		{"detached without out_shared", func(s *jobspec.Spec) { s.Detached = true }, cluster, "detached", "detached needs out_shared"},
		{"too many nodes", func(*jobspec.Spec) {}, InProcess(MaxNodes+1, 0), "nodes", "nodes must be between 0 and 64, got 65"},
		{"unknown algorithm", func(s *jobspec.Spec) { s.Algo = "svd" }, Local(0), "algorithm", "svd"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := testSpec(kernels.DID)
			c.change(s)
			j, err := Open(s, c.target)
			if err == nil {
				j.Close()
				t.Fatal("accepted")
			}
			if !errors.Is(err, usererr.ErrUser) || !IsInput(err) {
				t.Errorf("%v: not the user's to fix", err)
			}
			var fe *usererr.Error
			msg := err.Error()
			if !errors.As(err, &fe) {
				t.Errorf("%v (%T): not a *usererr.Error", err, err)
			}
			if c.field != "" && (fe == nil || fe.Field != c.field) {
				t.Errorf("%v: want a field error of %s", err, c.field)
			}
			if !strings.Contains(msg, c.want) {
				t.Errorf("%q lacks %q", msg, c.want)
			}
		})
	}
}

// TestOpenKeepsTheCallersSpec: Open works on a copy; the caller's spec, layout auto
// included, is unchanged and can be opened again for another target.
func TestOpenKeepsTheCallersSpec(t *testing.T) {
	s := testSpec(kernels.DID)
	before := *s
	j, err := Open(s, Local(0))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if s.Layout != before.Layout || j.Spec == s {
		t.Errorf("the caller's spec changed: layout %v, was %v", s.Layout, before.Layout)
	}
	if j.Samples != 1500 || j.Features != 6 || j.Name() == "" {
		t.Errorf("shape %d x %d, name %q", j.Samples, j.Features, j.Name())
	}
}

// TestCanceledRunOnActors: canceling the context cancels the job on its actors and returns
// the context's error and no result.
func TestCanceledRunOnActors(t *testing.T) {
	s := jobspec.New([]string{"synthetic:m=20,n=200000,k=4,seed=1"}, kernels.DID, 4, 4)
	s.Stop = kernels.StopRule{MaxIter: 100000}
	ctx, cancel := context.WithCancel(context.Background())
	res, err := Run(ctx, s, InProcess(2, 0), Options{Progress: func(p kernels.Progress) {
		if p.Iteration == 3 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || res != nil {
		t.Fatalf("got %v, %v; want context.Canceled and no result", res, err)
	}
}

// TestSaveWritesTheReport: Save writes the factors and a report that says where the job ran.
func TestSaveWritesTheReport(t *testing.T) {
	s := testSpec(kernels.DID)
	s.Storage = kernels.StorageFloat64
	for _, target := range []Target{Local(1), InProcess(2, 1)} {
		res, err := Run(context.Background(), s, target, Options{})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := res.Save(dir, nil); err != nil {
			t.Fatal(err)
		}
		r, c, basis, err := matio.ReadNPYMatrix(filepath.Join(dir, "basis.npy"))
		if err != nil || r != 6 || c != 3 {
			t.Fatalf("basis.npy: %d x %d, %v", r, c, err)
		}
		if !slices.Equal(basis, kernels.Transpose(res.B, res.M, res.K)) {
			t.Error("basis.npy is not the result's basis")
		}
		data, err := os.ReadFile(filepath.Join(dir, "report.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rep report.Report
		if err := json.Unmarshal(data, &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Nodes != target.Nodes || rep.Threads != 1 || rep.Storage != "float64" || rep.Iterations != 25 ||
			math.Abs(rep.RelErr2-res.RelErr2()) > 0 || (target.Nodes > 0) != (rep.MessagesPerIt != nil) {
			t.Errorf("%v: report %+v", target, rep)
		}
	}
}

func TestUsageSince(t *testing.T) {
	before := Usage{Processes: []ProcessUsage{
		{Name: "a", Machine: "m1", CPUSeconds: 10, Cores: 2},
		{Name: "b", Machine: "m1", CPUSeconds: 5, Cores: 2},
		{Name: "c", Machine: "m2", CPUSeconds: 7, Cores: 4},
		{Name: "gone", Machine: "m3", CPUSeconds: 100, Cores: 8},
	}}
	after := Usage{Processes: []ProcessUsage{
		{Name: "a", Machine: "m1", CPUSeconds: 13, Cores: 2},  // 3 in between
		{Name: "b", Machine: "m1", CPUSeconds: 6, Cores: 2},   // 1
		{Name: "c", Machine: "m2", CPUSeconds: 2, Cores: 4},   // restarted: 2
		{Name: "new", Machine: "m2", CPUSeconds: 2, Cores: 4}, // joined: 2
	}}
	got := after.Since(before, 2)
	want := Busy{CPUSeconds: 8, Cores: 6, Wall: 2, Share: 8.0 / 12}
	if got != want {
		t.Fatalf("Since = %+v, want %+v", got, want)
	}
}

// TestUsageOnTargets reads the usage of the driver, of in-process nodes and of a cluster
// around a job: the job's CPU time shows, and each counts this machine's cores once (the
// test's members name no machine, so each counts its own).
func TestUsageOnTargets(t *testing.T) {
	for i, target := range []Target{Local(2), InProcess(2, 1), startCluster(t, 2)} {
		cores := runtime.NumCPU()
		if i == 2 {
			cores *= 2 // members that name no machine each have one of their own
		}
		r, err := NewRunner(target)
		if err != nil {
			t.Fatal(err)
		}
		before, err := r.Usage(5 * time.Second)
		if err != nil {
			r.Close()
			t.Skip(err)
		}
		j, err := Open(testSpec(kernels.DID), target)
		if err != nil {
			r.Close()
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := r.Run(context.Background(), j, Options{}); err != nil {
			t.Fatal(err)
		}
		after, err := r.Usage(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		b := after.Since(before, time.Since(start).Seconds())
		if b.CPUSeconds <= 0 || b.Cores != cores || b.Share <= 0 {
			t.Errorf("%v: busy %+v after a job", target, b)
		}
		j.Close()
		r.Close()
	}
}

// TestStreamedCustomInit: with ingest stream, this process reads a custom initialisation (by
// paths relative to its own directory, which the nodes could not resolve) and streams it with
// each shard's block: a warm-started DID and a transform on a cluster give the driver's bits.
func TestStreamedCustomInit(t *testing.T) {
	cluster := startCluster(t, 3)
	t.Chdir(t.TempDir())
	fit, err := Run(context.Background(), testSpec(kernels.DID), Local(0), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir("fit", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fit.Save("fit", nil); err != nil {
		t.Fatal(err)
	}
	warm := testSpec(kernels.DID)
	warm.Init, warm.InitBasis, warm.InitCoef = kernels.InitCustom, "fit/basis.npy", "fit/coef.npy"
	warm.Stop = kernels.StopRule{MaxIter: 7}
	transform := testSpec(kernels.Transform)
	transform.Shards = 1
	transform.Init, transform.InitBasis = kernels.InitCustom, "fit/basis.npy"
	transform.Stop = kernels.StopRule{MaxIter: 1}
	for _, spec := range []*jobspec.Spec{warm, transform} {
		want, err := Run(context.Background(), spec, Local(0), Options{})
		if err != nil {
			t.Fatalf("%s on the driver: %v", spec.Algo, err)
		}
		streamed := *spec
		streamed.Ingest = jobspec.IngestStream
		got, err := Run(context.Background(), &streamed, cluster, Options{})
		if err != nil {
			t.Fatalf("%s streamed to a cluster: %v", spec.Algo, err)
		}
		if !slices.Equal(got.B, want.B) || !slices.Equal(got.C, want.C) || got.Iterations != want.Iterations {
			t.Errorf("%s streamed to a cluster: factors differ from the driver's", spec.Algo)
		}
		// The same files by relative paths with shared ingest: the nodes could not find them.
		if _, err := Open(spec, cluster); err == nil || !strings.Contains(err.Error(), "give an absolute path") {
			t.Errorf("%s with relative init paths and shared ingest on a cluster: %v", spec.Algo, err)
		}
	}
	// A basis of the wrong width, streamed: refused as the user's to fix, naming the file.
	bad := testSpec(kernels.Transform)
	bad.Shards, bad.Rank, bad.Ingest = 1, 2, jobspec.IngestStream
	bad.Init, bad.InitBasis, bad.Stop = kernels.InitCustom, "fit/basis.npy", kernels.StopRule{MaxIter: 1}
	if _, err := Run(context.Background(), bad, cluster, Options{}); !IsInput(err) || !strings.Contains(err.Error(), "init_basis fit/basis.npy: shape (6, 3)") {
		t.Errorf("a basis of the wrong width, streamed: %v (input: %v)", err, IsInput(err))
	}
}

// TestClusterSpreadsJobsSetUpAtOnce: three one-shard jobs submitted at once to a cluster of
// three members (as a sweep's lanes start) run one a member while they run together.
// Placement reads each member's load (the shards its pong says it runs, and those the
// coordinator has planned there that it does not count yet: jobctl.Placing, whose race
// TestPlacingSpreadsJobsSetUpAtOnce pins down); hashing the job ids alone put two on one
// member in most triples (this test failed without both). Each round has a cluster of its
// own (no shards of an earlier round's left to count), and a round whose three jobs did not
// all run at the same time (a loaded machine can run one to its end before another starts)
// is not judged; at least one must be.
func TestClusterSpreadsJobsSetUpAtOnce(t *testing.T) {
	judged := 0
	for round := range 3 {
		cluster := startCluster(t, 3)
		results := make([]*Result, 3)
		errs := make([]error, 3)
		began, ended := make([]time.Time, 3), make([]time.Time, 3)
		done := make(chan int)
		for i := range 3 {
			s := jobspec.New([]string{"synthetic:m=40,n=50000,k=3,seed=2,noise=0.01"}, kernels.DID, 3, 1)
			s.Seed = uint64(10*round + i + 1)
			s.Stop = kernels.StopRule{MaxIter: 300} // long enough for the three to overlap
			go func() {
				began[i] = time.Now()
				results[i], errs[i] = Run(context.Background(), s, cluster, Options{})
				ended[i] = time.Now()
				done <- i
			}()
		}
		for range 3 {
			<-done
		}
		nodes := map[string]bool{}
		for i, r := range results {
			if errs[i] != nil {
				t.Fatalf("round %d, job %d: %v", round, i, errs[i])
			}
			if len(r.ShardNodes) != 1 {
				t.Fatalf("round %d, job %d: shard nodes %v", round, i, r.ShardNodes)
			}
			nodes[r.ShardNodes[0]] = true
		}
		if slices.MaxFunc(began, time.Time.Compare).After(slices.MinFunc(ended, time.Time.Compare)) {
			t.Logf("round %d: the jobs did not all run at once; not judged", round)
			continue
		}
		judged++
		if len(nodes) != 3 {
			t.Errorf("round %d: the three jobs ran at once on %v; want one a member", round, nodes)
		}
	}
	if judged == 0 {
		t.Error("no round ran its three jobs at once: nothing was judged")
	}
}
