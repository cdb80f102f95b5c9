package actors

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/usererr"
)

// driverRun runs a job spec with the kernels' in-process driver, reading the blocks the way
// the shards do.
func driverRun(t *testing.T, spec *messages.JobSpec) *kernels.Result {
	t.Helper()
	p, err := jobspec.FromWire(spec)
	if err != nil {
		t.Fatal(err)
	}
	src, err := matio.OpenAll(spec.Inputs)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	r := kernels.ColumnRanges(src.Samples(), int(spec.Shards))
	blocks := make([]kernels.Block, spec.Shards)
	for s := range blocks {
		if blocks[s], err = src.Read(r[s], r[s+1], p.Layout); err != nil {
			t.Fatal(err)
		}
	}
	res, err := kernels.Run(context.Background(), blocks, kernels.Config{Algo: p.Algo, K: int(spec.Rank), Seed: spec.Seed,
		Init: kernels.InitSpec{Method: p.Init}, Options: kernels.Options{Form: p.Form, Rho: spec.Rho}, Stop: p.Stop})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// runJob submits a spec through a client on the first node and waits for its result.
func runJob(t *testing.T, cl *Client, spec *messages.JobSpec) (*Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job, err := cl.Submit(ctx, "", spec)
	if err != nil {
		return nil, err
	}
	return job.Wait(ctx)
}

// sameBits reports the first index where a and b differ bitwise, or -1.
func sameBits(a, b []float64) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return i
		}
	}
	return -1
}

func checkSame(t *testing.T, what string, got *Result, want *kernels.Result) {
	t.Helper()
	if got.Iterations != want.Iterations || got.StopReason != want.StopReason {
		t.Fatalf("%s: %d iterations (%s), driver %d (%s)", what, got.Iterations, got.StopReason, want.Iterations, want.StopReason)
	}
	if i := sameBits(got.B, want.B); i >= 0 {
		t.Fatalf("%s: B differs from the driver's at %d (len %d vs %d)", what, i, len(got.B), len(want.B))
	}
	if i := sameBits(got.C, want.C); i >= 0 {
		t.Fatalf("%s: C differs from the driver's at %d (len %d vs %d)", what, i, len(got.C), len(want.C))
	}
	if math.Float64bits(got.Objective) != math.Float64bits(want.Objective) {
		t.Fatalf("%s: objective %v, driver %v", what, got.Objective, want.Objective)
	}
}

// testCluster starts n nodes and a client on the first; both are closed at the end of the test.
func testCluster(t *testing.T, n int, faults *Faults) (*LocalCluster, *Client) {
	t.Helper()
	return testClusterWith(t, n, NodeConfig{Threads: 2, Faults: faults})
}

// testClusterWith is testCluster with a node configuration of its own.
func testClusterWith(t *testing.T, n int, cfg NodeConfig) (*LocalCluster, *Client) {
	t.Helper()
	c, err := StartLocalCluster(n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl := NewClient(c.Nodes[0].System(), cfg.Timeouts)
	t.Cleanup(func() {
		cl.Close()
		c.Close()
	})
	return c, cl
}

func spec(input, algo string, rank, shards int64, nodes []string, maxIter int64) *messages.JobSpec {
	return &messages.JobSpec{Inputs: []string{input}, Algorithm: jobspec.WireAlgorithm(kernels.Algorithm(algo)), Rank: rank, Shards: shards, Seed: 7,
		Stop: &messages.StopRule{Tol: 0, MaxIter: maxIter}, Nodes: nodes}
}

func TestActorRunIsBitwiseTheDriver(t *testing.T) {
	one, cl1 := testCluster(t, 1, nil)
	three, cl3 := testCluster(t, 3, nil)
	cases := []struct {
		algo   string
		init   messages.Init
		shards int64
		fanIn  int64
	}{
		{"did", messages.Init_INIT_RANDOM, 4, 0},
		{"did", messages.Init_INIT_NNDSVD, 5, 2},
		{"dbcd", messages.Init_INIT_RANDOM, 4, 2},
		{"dbcd", messages.Init_INIT_KMEANS, 3, 0},
		{"dadmm", messages.Init_INIT_RANDOM, 4, 0},
		{"dadmm", messages.Init_INIT_NNDSVDA, 6, 4},
		{"hpc-anls", messages.Init_INIT_RANDOM, 4, 2},
		{"hpc-anls", messages.Init_INIT_KMEANS, 5, 0},
	}
	for _, tc := range cases {
		for _, cluster := range []struct {
			name string
			lc   *LocalCluster
			cl   *Client
		}{{"1 system", one, cl1}, {"3 systems", three, cl3}} {
			name := fmt.Sprintf("%s/%s/P%d/fanin%d/%s", tc.algo, tc.init.Name(), tc.shards, tc.fanIn, cluster.name)
			t.Run(name, func(t *testing.T) {
				s := spec("synthetic:m=7,n=240,k=3,seed=5,noise=0.05", tc.algo, 3, tc.shards, cluster.lc.Addresses(), 12)
				s.Init, s.FanIn = tc.init, tc.fanIn
				want := driverRun(t, s)
				got, err := runJob(t, cluster.cl, s)
				if err != nil {
					t.Fatal(err)
				}
				checkSame(t, name, got, want)
				if len(got.History) != len(want.History) || len(got.IterSeconds) != got.Iterations {
					t.Fatalf("history has %d points (driver %d), %d iteration times for %d iterations",
						len(got.History), len(want.History), len(got.IterSeconds), got.Iterations)
				}
				if d := math.Abs(got.Residual-want.Residual) / want.Residual; d > 1e-12 {
					t.Fatalf("residual %v, driver %v", got.Residual, want.Residual)
				}
			})
		}
	}
}

func TestMessageAccounting(t *testing.T) {
	lc, cl := testCluster(t, 3, nil)
	for _, tc := range []struct {
		algo string
		k    int64
		want float64
	}{{"did", 3, 1}, {"did", 5, 1}, {"dbcd", 3, 3}, {"dbcd", 5, 5}, {"dadmm", 3, 1}, {"hpc-anls", 3, 3}} {
		t.Run(fmt.Sprintf("%s/K%d", tc.algo, tc.k), func(t *testing.T) {
			s := spec("synthetic:m=8,n=200,k=5,seed=2", tc.algo, tc.k, 4, lc.Addresses(), 10)
			got, err := runJob(t, cl, s)
			if err != nil {
				t.Fatal(err)
			}
			if got.ReductionsPerIteration != tc.want {
				t.Fatalf("%v reductions per iteration, want %v", got.ReductionsPerIteration, tc.want)
			}
			// Per collective: P partials up and P results down through one reducer (P <= fan-in).
			// Per iteration: shard 0 reports once and the coordinator sends the client progress.
			wantMsgs := tc.want*2*4 + 2
			if got.MessagesPerIteration != wantMsgs {
				t.Fatalf("%v messages per iteration, want %v", got.MessagesPerIteration, wantMsgs)
			}
			if got.BytesPerIteration <= 0 || got.Counters.Duplicates != 0 || got.Counters.Stale != 0 {
				t.Fatalf("counters %v", got.Counters)
			}
		})
	}
}

func TestDuplicateAndStalePartialsAreDropped(t *testing.T) {
	lc, cl := testCluster(t, 3, &Faults{DuplicatePartials: true, ReplayPartials: true})
	for _, algo := range []string{"did", "hpc-anls"} {
		t.Run(algo, func(t *testing.T) {
			s := spec("synthetic:m=6,n=150,k=3,seed=3", algo, 3, 5, lc.Addresses(), 10)
			s.FanIn = 2
			want := driverRun(t, s)
			got, err := runJob(t, cl, s)
			if err != nil {
				t.Fatal(err)
			}
			checkSame(t, algo, got, want)
			if got.Counters.Duplicates == 0 || got.Counters.Stale == 0 {
				t.Fatalf("no duplicate or stale partial counted: %v", got.Counters)
			}
			if float64(got.Counters.Reductions) != want.Comm.PerIteration*float64(want.Iterations) {
				t.Fatalf("%d reductions, driver ran %d collectives", got.Counters.Reductions, want.Comm.Collectives)
			}
		})
	}
}

func TestLargePayloadsCrossNodesInChunks(t *testing.T) {
	lc, cl := testCluster(t, 3, nil)
	// DID's partial holds W = M x K: 200000 x 3 doubles = 4.8 MB, over gRPC's 4 MiB default.
	s := spec("synthetic:m=200000,n=12,k=3,seed=4", "did", 3, 3, lc.Addresses(), 3)
	want := driverRun(t, s)
	got, err := runJob(t, cl, s)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "large", got, want)
	if got.BytesPerIteration < 4<<20 {
		t.Fatalf("only %v bytes per iteration: the payload was not large", got.BytesPerIteration)
	}
}

func TestChecksumMismatchFailsTheJob(t *testing.T) {
	lc, cl := testCluster(t, 3, &Faults{CorruptChunks: true})
	s := spec("synthetic:m=200000,n=12,k=3,seed=4", "did", 3, 3, lc.Addresses(), 3)
	_, err := runJob(t, cl, s)
	var je *JobError
	if !errors.As(err, &je) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("want a checksum error, got %v", err)
	}
	waitIdle(t, lc)
}

// waitIdle waits until no node has actors of any job left.
func waitIdle(t *testing.T, lc *LocalCluster) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		busy := 0
		for _, n := range lc.Nodes {
			res, err := n.System().Root.RequestFuture(n.Host(), &messages.HostStatus{}, 5*time.Second).Result()
			if err != nil {
				t.Fatal(err)
			}
			busy += int(res.(*messages.Pong).Actors)
		}
		if busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d job actors still running", busy)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCancelStopsEveryActorAndGoroutine(t *testing.T) {
	lc, cl := testCluster(t, 3, nil)
	// Warm up the connections between the nodes, which stay.
	if _, err := runJob(t, cl, spec("synthetic:m=5,n=300,k=3,seed=1", "did", 3, 4, lc.Addresses(), 3)); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, lc)
	linkAll(t, lc)                        // the data plane links the next job may make, which stay
	time.Sleep(runnerIdle + runnerIdle/2) // the mailbox runners of the first job exit
	before, _ := ownGoroutines()
	ctx := context.Background()
	job, err := cl.Submit(ctx, "", spec("synthetic:m=5,n=20000,k=3,seed=1", "did", 3, 4, lc.Addresses(), 1<<30))
	if err != nil {
		t.Fatal(err)
	}
	for p := range job.Progress() {
		if p.Iteration >= 5 {
			break
		}
	}
	job.Cancel()
	if _, err := job.Wait(ctx); !errors.Is(err, ErrCanceled) {
		t.Fatalf("want a cancelled job, got %v", err)
	}
	waitIdle(t, lc)
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, stacks := ownGoroutines()
		if n <= before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines running didnmf's code, %d before the job:\n%s", n, before, stacks)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ownGoroutines counts the goroutines running didnmf's code (actors, mailbox runners, kernel
// workers, the data plane), other than the caller, and returns their stacks. The actor
// remote's gRPC connections are shared by every job and come and go on their own (a
// connection a test before this one left to a node that is gone retries in the
// background), so they are not counted.
func ownGoroutines() (int, string) {
	buf := make([]byte, 1<<22)
	all := string(buf[:runtime.Stack(buf, true)])
	var own []string
	for i, g := range strings.Split(all, "\n\n") {
		if i > 0 && strings.Contains(g, "github.com/didnmf/didnmf/") { // the first is the caller's
			own = append(own, g)
		}
	}
	return len(own), strings.Join(own, "\n\n")
}

func TestConcurrentJobsStayIsolated(t *testing.T) {
	lc, cl := testCluster(t, 3, nil)
	specs := []*messages.JobSpec{
		spec("synthetic:m=6,n=400,k=3,seed=8", "did", 3, 4, lc.Addresses(), 20),
		spec("synthetic:m=6,n=400,k=3,seed=8", "dbcd", 3, 4, lc.Addresses(), 20),
		spec("synthetic:m=9,n=300,k=4,seed=9", "hpc-anls", 4, 3, lc.Addresses(), 15),
	}
	wants := make([]*kernels.Result, len(specs))
	for i, s := range specs {
		wants[i] = driverRun(t, s)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(specs))
	gots := make([]*Result, len(specs))
	for i, s := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			job, err := cl.Submit(ctx, "", s)
			if err != nil {
				errs[i] = err
				return
			}
			gots[i], errs[i] = job.Wait(ctx)
		}()
	}
	wg.Wait()
	for i := range specs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		checkSame(t, specs[i].Algorithm.Name(), gots[i], wants[i])
	}
	waitIdle(t, lc)
}

func TestBadJobsAreRefused(t *testing.T) {
	// Jobs placed on a node that does not exist fail after a ping: a short one.
	lc, cl := testClusterWith(t, 2, NodeConfig{Threads: 2, Timeouts: Timeouts{Ping: 500 * time.Millisecond}})
	nodes := lc.Addresses()
	in := "synthetic:m=5,n=40,k=3,seed=1"
	cases := []struct {
		name, want string
		edit       func(*messages.JobSpec)
	}{
		{"rank 0", "rank must be >= 1", func(s *messages.JobSpec) { s.Rank = 0 }},
		{"rank -2", "rank must be >= 1", func(s *messages.JobSpec) { s.Rank = -2 }},
		{"rank > min(M, N)", "rank 6 out of range", func(s *messages.JobSpec) { s.Rank = 6 }},
		{"shards > N", "shards 41 is more than the 40 samples", func(s *messages.JobSpec) { s.Shards = 41 }},
		{"shards 0", "shards must be >= 1", func(s *messages.JobSpec) { s.Shards = 0 }},
		{"shards -1", "shards must be >= 1", func(s *messages.JobSpec) { s.Shards = -1 }},
		{"unknown algorithm", "algorithm: unknown value 99", func(s *messages.JobSpec) { s.Algorithm = 99 }},
		{"no algorithm", "algorithm: no algorithm given", func(s *messages.JobSpec) { s.Algorithm = messages.Algorithm_ALGORITHM_UNSPECIFIED }},
		{"tol < 0", "tol must be a finite number >= 0", func(s *messages.JobSpec) { s.Stop.Tol = -1 }},
		{"tol NaN", "tol must be a finite number >= 0, got NaN", func(s *messages.JobSpec) { s.Stop.Tol = math.NaN() }},
		{"fan-in 3", "fan-in must be a power of two", func(s *messages.JobSpec) { s.FanIn = 3 }},
		{"missing file", "no-such.npy", func(s *messages.JobSpec) { s.Inputs = []string{"no-such.npy"} }},
		{"unreachable node", "node 127.0.0.1:1 is unreachable", func(s *messages.JobSpec) { s.Nodes = append(s.Nodes, "127.0.0.1:1") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := spec(in, "did", 3, 4, append([]string(nil), nodes...), 5)
			tc.edit(s)
			_, err := runJob(t, cl, s)
			var je *JobError
			if !errors.As(err, &je) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want a job error containing %q, got %v", tc.want, err)
			}
			// Refused for the user's fault, the kind came back over the wire as the one
			// error of it; a node that does not answer is a failure.
			var ue *usererr.Error
			if user := errors.Is(err, usererr.ErrUser) && errors.As(err, &ue); user != (tc.name != "unreachable node") || (user && ue.Error() != je.Message) {
				t.Errorf("%v (kind %v): user's fault %v", err, je.Kind, user)
			}
			waitIdle(t, lc)
		})
	}
}

func TestTimeLimitStopsAtAConsistentIteration(t *testing.T) {
	lc, cl := testCluster(t, 3, nil)
	s := spec("synthetic:m=5,n=20000,k=3,seed=6", "did", 3, 4, lc.Addresses(), 1<<30)
	s.Stop.TimeLimitSeconds = 0.3
	got, err := runJob(t, cl, s)
	if err != nil {
		t.Fatal(err)
	}
	if got.StopReason != kernels.StopTimeLimit || got.Iterations < 2 {
		t.Fatalf("stopped after %d iterations (%s), want the time limit", got.Iterations, got.StopReason)
	}
	// Every shard stopped at the same iteration: the factors are the driver's after exactly
	// that many iterations.
	s.Stop.TimeLimitSeconds, s.Stop.MaxIter = 0, int64(got.Iterations)
	want := driverRun(t, s)
	if i, j := sameBits(got.B, want.B), sameBits(got.C, want.C); i >= 0 || j >= 0 {
		t.Fatalf("factors after the time limit (%d iterations) differ from the driver's at that iteration", got.Iterations)
	}
}

func TestCustomInitFromFiles(t *testing.T) {
	lc, cl := testCluster(t, 2, nil)
	dir := t.TempDir()
	const m, n, k = 6, 90, 2
	b0 := make([]float64, m*k)
	c0 := make([]float64, n*k)
	for i := range b0 {
		b0[i] = 0.5 + float64(i%5)/7
	}
	for i := range c0 {
		c0[i] = 0.25 + float64(i%11)/13
	}
	writeNPY(t, dir+"/b0.npy", m, k, b0)
	writeNPY(t, dir+"/c0.npy", n, k, c0)
	s := spec(fmt.Sprintf("synthetic:m=%d,n=%d,k=%d,seed=3", m, n, k), "did", k, 3, lc.Addresses(), 8)
	s.Init, s.InitBasis, s.InitCoef = messages.Init_INIT_CUSTOM, dir+"/b0.npy", dir+"/c0.npy"
	got, err := runJob(t, cl, s)
	if err != nil {
		t.Fatal(err)
	}
	// The driver with the same B0 and C0.
	src, _ := matio.Open(s.Inputs[0])
	defer src.Close()
	r := kernels.ColumnRanges(n, 3)
	blocks := make([]kernels.Block, 3)
	for i := range blocks {
		blocks[i], _ = src.Read(r[i], r[i+1], matio.LayoutAuto)
	}
	bcol := kernels.Transpose(b0, k, m)
	want, err := kernels.Run(context.Background(), blocks, kernels.Config{Algo: "did", K: k, Seed: 7,
		Init: kernels.InitSpec{Method: kernels.InitCustom, B0: bcol, C0: c0}, Stop: kernels.StopRule{MaxIter: 8}})
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "custom init", got, want)

	s.InitCoef = dir + "/b0.npy" // wrong shape: refused before placing
	if _, err := runJob(t, cl, s); err == nil || !strings.Contains(err.Error(), "b0.npy: shape (6, 2), but synthetic:m=6,n=90,k=2,seed=3 has 90 samples") {
		t.Fatalf("want an init_coef shape error, got %v", err)
	}
	waitIdle(t, lc)
}

func writeNPY(t *testing.T, path string, rows, cols int, data []float64) {
	t.Helper()
	var buf strings.Builder
	if err := matio.WriteNPY(&buf, rows, cols, data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(buf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPanickingShardIsStoppedAndFailsTheJob(t *testing.T) {
	lc, cl := testCluster(t, 3, &Faults{PanicAtIteration: 3})
	_, err := runJob(t, cl, spec("synthetic:m=5,n=300,k=3,seed=1", "did", 3, 4, lc.Addresses(), 20))
	var je *JobError
	if !errors.As(err, &je) || je.Kind != KindFailure || !strings.Contains(err.Error(), "injected fault: shard 1 panics at iteration 3") {
		t.Fatalf("want the shard's failure, got %v", err)
	}
	waitIdle(t, lc)
}

func TestMalformedMessagesAreDroppedWhileAJobRuns(t *testing.T) {
	lc, cl := testCluster(t, 3, nil)
	s := spec("synthetic:m=5,n=3000,k=3,seed=2", "did", 3, 4, lc.Addresses(), 300)
	want := driverRun(t, s)
	ctx := context.Background()
	job, err := cl.Submit(ctx, "", s)
	if err != nil {
		t.Fatal(err)
	}
	<-job.Progress()
	// The root reducer of this job sits on the first node; hit it from another node, over gRPC.
	root := pidOf(jobctl.ChildPid(lc.Nodes[0].Address(), jobctl.ReducerName(job.ID, 1, 1, 0)))
	shard := pidOf(jobctl.ChildPid(lc.Nodes[1].Address(), jobctl.ShardName(job.ID, 1)))
	sys := lc.Nodes[2].System().Root
	bad := []any{
		&messages.Partial{JobId: job.ID, Epoch: 1, Seq: 1 << 40, Lo: 0, Hi: 1, Chunk: chunked.Split([]float64{1, 2, 3}, 2)[0]},
		&messages.Partial{JobId: job.ID, Epoch: 1, Seq: 1 << 40, Lo: 7, Hi: 9, Chunk: &messages.Chunk{Count: 1}},
		&messages.Partial{JobId: job.ID, Epoch: 9, Seq: 2, Lo: 0, Hi: 1},
		&messages.Partial{JobId: "other", Epoch: 1, Seq: 2, Lo: 0, Hi: 1},
		&messages.Partial{JobId: job.ID, Epoch: 1, Seq: 1 << 40, Lo: 0, Hi: 1, Chunk: &messages.Chunk{Seq: 5, Count: 2, Total: 1 << 40}},
		&messages.Reduced{JobId: job.ID, Epoch: 1, Seq: 1 << 40, Lo: 0, Hi: 4, Chunk: &messages.Chunk{Count: 1, Total: 1 << 50}},
		&messages.Reduced{JobId: job.ID, Epoch: 1, Seq: 1 << 40, Lo: 0, Hi: 1},
		&messages.Grant{JobId: job.ID, Epoch: 3, Granted: 5},
		&messages.Ping{},
	}
	for _, m := range bad {
		sys.Send(root, m)
		sys.Send(shard, m)
	}
	got, err := job.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, "after malformed messages", got, want)
	if got.Counters.Stale == 0 {
		t.Fatalf("no message counted as dropped: %v", got.Counters)
	}
}
