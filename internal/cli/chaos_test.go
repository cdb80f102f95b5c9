package cli

import (
	"bufio"
	"fmt"
	"github.com/didnmf/didnmf/report"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The chaos suite runs jobs on a cluster of real `didnmf serve` processes (5 nodes, a..e, every
// one with --chaos-delay so that jobs last long enough for faults to land mid-job) and hurts
// the nodes while the job runs: kill -9, SIGSTOP/SIGCONT, a restart under the same identity, a
// flipped byte in a checkpoint file. Whatever happens, the job must write the bits of the
// fault-free in-process run. The faults are chosen by a seed that is logged, so that a failing
// schedule can be replayed:
//
//	DIDNMF_CHAOS_SEED=N go test ./cmd/node -run 'TestChaos/kill-one$' -v
//
// DIDNMF_CHAOS_LONG=1 runs the long version: every scenario three times with other schedules,
// on a bigger job. DIDNMF_CHAOS_LOGS=1 logs the end of the nodes' logs after every scenario,
// not only after a failing one. Figures (detection, recovery, iterations redone, slowdown) are
// logged, never asserted: only "did not finish within N s" guards are timed.
//
// Placement is not replayed: job ids are random, so rendezvous hashing puts the shards on
// other nodes in every run. The seed picks the fault iterations, delays and draws; victims are
// drawn among the nodes that run shards when the fault is due.

// chaosSuite is what the scenarios share: the seed, the job and its golden result.
type chaosSuite struct {
	seed  uint64
	long  bool
	reps  int
	delay string   // serve --chaos-delay
	job   []string // factorize flags of the job (input and stop rule), without --out and --cluster
	every int64    // --checkpoint-every
	iters int      // --max-iter
	limit time.Duration

	goldenOnce sync.Once
	goldenDir  string
	goldenIt   int

	mu      sync.Mutex
	results []*chaosResult
}

// chaosResult is what one scenario run measured.
type chaosResult struct {
	name       string
	faults     []string
	detect     []time.Duration // fault -> the client's recovery warning
	recovery   []float64       // resumed - noticed, from report.json
	redone     int64
	recoveries int
	wall, base time.Duration // faulty and fault-free job, wall time of factorize
	secs, bsec float64       // the same, as report.json says
	note       string
	failed     bool
}

// TestChaos: faults injected into a running cluster never change a job's bits.
func TestChaos(t *testing.T) {
	runChaos(t, "", nil, nil)
}

// TestChaosAccel: accelerated DID (--accel auto: inner sweeps and extrapolation, whose state a
// checkpoint carries) writes the bits of its fault-free in-process run through a node killed
// with SIGKILL and through a node restarted under its identity. Its input is noisy and it does
// not stop at a stall, so that it runs every iteration and the faults land mid-job (exact data
// would reach the objective's round-off floor and stop).
func TestChaosAccel(t *testing.T) {
	runChaos(t, "synthetic:m=6,n=20000,k=3,seed=4,noise=0.05", []string{"--accel", "auto", "--stall-tol", "0"}, []string{"kill-one", "restart"})
}

// runChaos runs the chaos scenarios (only those named in only, when it is not nil) on the
// suite's job, on input instead of the default one when it is not "", with extra factorize
// flags.
func runChaos(t *testing.T, input string, extra, only []string) {
	if testing.Short() {
		t.Skip("starts node processes and hurts them")
	}
	isolateGossip(t)
	began := time.Now()
	s := &chaosSuite{reps: 1, delay: "2ms", every: 20, iters: 1200, limit: 90 * time.Second}
	if v := os.Getenv("DIDNMF_CHAOS_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("DIDNMF_CHAOS_SEED=%q: %v", v, err)
		}
		s.seed = seed
	} else {
		s.seed = uint64(time.Now().UnixNano()) % 1_000_000_000
	}
	if input == "" {
		input = "synthetic:m=6,n=20000,k=3,seed=4"
	}
	long := ""
	if os.Getenv("DIDNMF_CHAOS_LONG") == "1" {
		s.long, s.reps, s.iters, s.limit = true, 3, 2500, 240*time.Second
		input = "synthetic:m=8,n=60000,k=4,seed=9"
		long = "DIDNMF_CHAOS_LONG=1 "
	}
	rank := "3"
	if s.long {
		rank = "4"
	}
	s.job = []string{"--input", input, "--rank", rank, "--shards", "10", "--seed", "3", "--max-iter", strconv.Itoa(s.iters),
		"--tol", "0", "--checkpoint-every", strconv.FormatInt(s.every, 10)}
	s.job = append(s.job, extra...)
	t.Logf("chaos seed %d (replay: %sDIDNMF_CHAOS_SEED=%d go test ./cmd/node -run TestChaos/... -v -count=1)", s.seed, long, s.seed)
	t.Logf("job: %s; nodes a..e with --chaos-delay %s", strings.Join(s.job, " "), s.delay)
	s.goldenDir = filepath.Join(t.TempDir(), "golden")

	scenarios := []struct {
		name string
		run  func(t *testing.T, s *chaosSuite, rng *rand.Rand, cl *chaosCluster, res *chaosResult)
	}{
		{"kill-one", chaosKillOne},
		{"kill-repeatedly", chaosKillRepeatedly},
		{"kill-coordinator", chaosKillCoordinator},
		{"stop-short", chaosStopShort},
		{"stop-long", chaosStopLong},
		{"restart", chaosRestart},
		{"corrupt-checkpoint", chaosCorruptCheckpoint},
	}
	for i, sc := range scenarios {
		if only != nil && !slices.Contains(only, sc.name) {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			for rep := 0; rep < s.reps; rep++ {
				name := sc.name
				if s.reps > 1 {
					name = fmt.Sprintf("%s#%d", sc.name, rep+1)
				}
				body := func(t *testing.T) {
					rng := rand.New(rand.NewPCG(s.seed, uint64(i)<<8|uint64(rep)))
					t.Logf("seed %d (replay: %sDIDNMF_CHAOS_SEED=%d go test ./cmd/node -run 'TestChaos/%s$' -v -count=1)", s.seed, long, s.seed, sc.name)
					res := &chaosResult{name: name}
					defer func() {
						res.failed = t.Failed()
						s.record(res)
					}()
					cl := startChaosCluster(t, s.delay)
					s.golden(t)
					res.base, res.bsec = s.baseline(t, cl)
					sc.run(t, s, rng, cl, res)
				}
				if s.reps == 1 {
					body(t)
				} else {
					t.Run(fmt.Sprintf("rep%d", rep+1), body)
				}
			}
		})
	}
	s.summary(t, time.Since(began))
}

func (s *chaosSuite) record(r *chaosResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results = append(s.results, r)
}

// summary logs every scenario's figures in one table.
func (s *chaosSuite) summary(t *testing.T, took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "chaos seed %d: %d scenario runs in %v\n", s.seed, len(s.results), took.Round(100*time.Millisecond))
	fmt.Fprintf(&b, "%-22s %-10s %-16s %-16s %-7s %-22s %s\n", "scenario", "recoveries", "detection", "recovery", "redone", "job vs fault-free", "faults")
	for _, r := range s.results {
		var det, rec []string
		for _, d := range r.detect {
			det = append(det, fmt.Sprintf("%.2fs", d.Seconds()))
		}
		for _, v := range r.recovery {
			rec = append(rec, fmt.Sprintf("%.3fs", v))
		}
		slow := "-"
		if r.base > 0 && r.wall > 0 {
			slow = fmt.Sprintf("%.1fs/%.1fs (x%.2f)", r.wall.Seconds(), r.base.Seconds(), r.wall.Seconds()/r.base.Seconds())
		}
		name := r.name
		if r.failed {
			name += " FAIL"
		}
		fmt.Fprintf(&b, "%-22s %-10d %-16s %-16s %-7d %-22s %s", name, r.recoveries, orDash(strings.Join(det, ",")), orDash(strings.Join(rec, ",")),
			r.redone, slow, strings.Join(r.faults, "; "))
		if r.note != "" {
			fmt.Fprintf(&b, " [%s]", r.note)
		}
		b.WriteString("\n")
	}
	t.Log("\n" + b.String())
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// golden computes the fault-free result once, with the in-process driver.
func (s *chaosSuite) golden(t *testing.T) {
	t.Helper()
	s.goldenOnce.Do(func() {
		code, _, stderr := runNode(t, append([]string{"factorize", "--out", s.goldenDir, "--quiet"}, s.job...)...)
		if code != 0 {
			s.goldenDir = ""
			t.Fatalf("golden run: exit %d: %s", code, stderr)
		}
		s.goldenIt = readReport(t, s.goldenDir).Iterations
	})
	if s.goldenDir == "" {
		t.Fatal("no golden result (its run failed)")
	}
}

// baseline runs the job without faults on the cluster: the reference for the slowdown, and a
// check that the cluster works before it is hurt.
func (s *chaosSuite) baseline(t *testing.T, cl *chaosCluster) (time.Duration, float64) {
	t.Helper()
	run := cl.startJob(t, s, filepath.Join(t.TempDir(), "fault-free"))
	run.wait(t, s.limit)
	rep := s.verify(t, cl, run, false)
	t.Logf("fault-free on this cluster: %v wall, %.2f s in report.json, %d checkpoints", run.took().Round(time.Millisecond), rep.Seconds, rep.Checkpoints)
	return run.took(), rep.Seconds
}

// verify checks a finished job: exit status 0, the golden bits, the golden iteration count,
// recoveries (none, or at least one when faulted) and shards only on live nodes.
func (s *chaosSuite) verify(t *testing.T, cl *chaosCluster, run *jobRun, faulted bool) report.Report {
	t.Helper()
	if run.code != 0 {
		cl.dumpLogs(t)
		t.Fatalf("factorize: exit %d:\n%s", run.code, run.text())
	}
	sameFiles(t, filepath.Join(s.goldenDir, "basis.npy"), filepath.Join(run.out, "basis.npy"))
	sameFiles(t, filepath.Join(s.goldenDir, "coef.npy"), filepath.Join(run.out, "coef.npy"))
	rep := readReport(t, run.out)
	if rep.Iterations != s.goldenIt {
		t.Errorf("report.json: %d iterations, the fault-free in-process run %d", rep.Iterations, s.goldenIt)
	}
	switch {
	case !faulted && len(rep.Recoveries) != 0:
		t.Errorf("%d recoveries without a fault that should cause one: %s", len(rep.Recoveries), recoveryText(rep))
	case faulted && len(rep.Recoveries) == 0:
		t.Errorf("no recovery in report.json after the fault")
	}
	live := cl.liveActors()
	if len(rep.ShardNodes) != 10 {
		t.Errorf("report.json: %d shard_nodes, want 10", len(rep.ShardNodes))
	}
	for sh, a := range rep.ShardNodes {
		if !live[a] {
			t.Errorf("shard %d ended on %s, which is not a live node (live: %v)", sh, a, cl.describe())
		}
	}
	if t.Failed() {
		cl.dumpLogs(t)
		t.Logf("factorize stderr:\n%s", run.text())
	}
	if left := cl.residue(t, run); left != "" {
		t.Logf("note: 3 s after the job, the live nodes still hold something of it: %s", left)
	}
	return rep
}

// residue is what the live nodes still hold of a finished job 3 s after it ended (running
// actors, jobs in their status, checkpoint directories), or "" for nothing. It is logged, not
// asserted.
func (cl *chaosCluster) residue(t *testing.T, run *jobRun) string {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		left = left[:0]
		for name, r := range clusterStatus(t, cl.statusAddr()) {
			if r.Error != "" {
				left = append(left, fmt.Sprintf("%s: %s", name, r.Error))
			} else if r.Actors > 0 || len(r.Jobs) > 0 || r.Reserved > 0 {
				left = append(left, fmt.Sprintf("%s: %d actors, jobs %v, %d bytes reserved", name, r.Actors, r.Jobs, r.Reserved))
			}
		}
		for _, n := range cl.nodes {
			if n.killed {
				continue
			}
			dirs, _ := filepath.Glob(filepath.Join(n.dataDir, "checkpoints", "*"))
			for _, d := range dirs {
				if !run.skip[filepath.Base(d)] {
					left = append(left, fmt.Sprintf("%s: checkpoint directory %s", n.name, filepath.Base(d)))
				}
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	slices.Sort(left)
	return strings.Join(left, "; ")
}

func recoveryText(rep report.Report) string {
	var parts []string
	for _, r := range rep.Recoveries {
		parts = append(parts, fmt.Sprintf("{epoch %d, %q, noticed %.3f, resumed %.3f, from %d, redone %d}",
			r.Epoch, r.Cause, r.Noticed, r.Resumed, r.FromIteration, r.Redone))
	}
	return strings.Join(parts, " ")
}

// figures logs and records what a faulty run measured: for each fault (at the wall times
// given) the delay until the client printed the recovery warning, and from report.json the
// recoveries' durations and the iterations redone; the job's time against the fault-free one.
func (s *chaosSuite) figures(t *testing.T, run *jobRun, rep report.Report, res *chaosResult, faultAt []time.Time, warning string) {
	t.Helper()
	res.wall, res.secs, res.recoveries = run.took(), rep.Seconds, len(rep.Recoveries)
	start, hasStart := run.jobStart()
	used := 0
	for i, at := range faultAt {
		line, ok := run.firstAfter(warning, at, used)
		if !ok {
			t.Logf("fault %d (%s): no %q warning after it", i+1, res.faults[i], warning)
			continue
		}
		used = line.index + 1
		d := line.at.Sub(at)
		res.detect = append(res.detect, d)
		t.Logf("fault %d (%s): the client warned %v later: %s", i+1, res.faults[i], d.Round(time.Millisecond), line.text)
	}
	for i, r := range rep.Recoveries {
		res.recovery = append(res.recovery, r.Resumed-r.Noticed)
		res.redone += r.Redone
		msg := fmt.Sprintf("recovery %d: epoch %d, noticed at %.3f s, resumed at %.3f s (recovery %.3f s), from iteration %d, %d iterations redone; cause: %s",
			i+1, r.Epoch, r.Noticed, r.Resumed, r.Resumed-r.Noticed, r.FromIteration, r.Redone, r.Cause)
		if hasStart {
			// The latest fault before the recovery was noticed, on the job's timeline.
			noticed := start.Add(time.Duration(r.Noticed * float64(time.Second)))
			var last time.Time
			for _, at := range faultAt {
				if at.Before(noticed) {
					last = at
				}
			}
			if !last.IsZero() {
				msg += fmt.Sprintf("; detection by report.json %.2f s (job start estimated from progress lines, ±0.05 s)", noticed.Sub(last).Seconds())
			}
		}
		t.Log(msg)
	}
	t.Logf("job %v wall (report %.2f s) vs fault-free %v (report %.2f s): x%.2f; %d checkpoints committed",
		res.wall.Round(time.Millisecond), res.secs, res.base.Round(time.Millisecond), res.bsec, res.wall.Seconds()/res.base.Seconds(), rep.Checkpoints)
}

// chaosCluster is the scenario's cluster: nodes a..e, a the coordinator (jobs are submitted
// through its gossip address).
type chaosCluster struct {
	delay  string
	nodes  []*chaosNode
	dumped bool
}

type chaosNode struct {
	*serveProc
	dataDir string
	killed  bool // killed and not restarted
}

func startChaosCluster(t *testing.T, delay string) *chaosCluster {
	t.Helper()
	cl := &chaosCluster{delay: delay}
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		args := []string{"--chaos-delay", delay}
		if name != "a" {
			args = append(args, "--join", cl.nodes[0].Gossip)
		}
		p := startServe(t, name, args...)
		cl.nodes = append(cl.nodes, &chaosNode{serveProc: p, dataDir: argAfter(p.Cmd.Args, "--data-dir")})
	}
	waitFor(t, "5 members seen by a", 30*time.Second, func() bool { return len(clusterStatus(t, cl.nodes[0].Gossip)) == 5 })
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("DIDNMF_CHAOS_LOGS") == "1" {
			cl.dumpLogs(t)
		}
	})
	return cl
}

func argAfter(args []string, flag string) string {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return ""
	}
	return args[i+1]
}

func (cl *chaosCluster) coordinator() *chaosNode { return cl.nodes[0] }

func (cl *chaosCluster) liveActors() map[string]bool {
	live := map[string]bool{}
	for _, n := range cl.nodes {
		if !n.killed {
			live[n.Actor] = true
		}
	}
	return live
}

func (cl *chaosCluster) describe() string {
	var parts []string
	for _, n := range cl.nodes {
		state := "live"
		if n.killed {
			state = "killed"
		}
		parts = append(parts, fmt.Sprintf("%s=%s(%s)", n.name, n.Actor, state))
	}
	return strings.Join(parts, " ")
}

// statusAddr is the gossip address of a live node, for status.
func (cl *chaosCluster) statusAddr() string {
	for _, n := range cl.nodes {
		if !n.killed {
			return n.Gossip
		}
	}
	return ""
}

// kill kills a node with SIGKILL and returns when it was sent.
func (cl *chaosCluster) kill(t *testing.T, n *chaosNode) time.Time {
	t.Helper()
	at := time.Now()
	if err := n.Cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9 %s: %v", n.name, err)
	}
	n.killed = true
	t.Logf("%s kill -9 node %s (%s)", utc(at), n.name, n.Actor)
	return at
}

func (cl *chaosCluster) signal(t *testing.T, n *chaosNode, sig syscall.Signal) time.Time {
	t.Helper()
	at := time.Now()
	if err := n.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%v to %s: %v", sig, n.name, err)
	}
	t.Logf("%s %v node %s (%s)", utc(at), sig, n.name, n.Actor)
	return at
}

// utc formats a time as the nodes' logs do.
func utc(at time.Time) string { return at.UTC().Format("15:04:05.000Z") }

// dumpLogs logs the end of every node's log, once, without the joins and leaves of clients
// (status and factorize).
func (cl *chaosCluster) dumpLogs(t *testing.T) {
	t.Helper()
	if cl.dumped {
		return
	}
	cl.dumped = true
	for _, n := range cl.nodes {
		var lines []string
		for _, r := range n.Records() {
			if r.Attr("role") != "client" {
				lines = append(lines, r.Line)
			}
		}
		if len(lines) > 80 {
			lines = lines[len(lines)-80:]
		}
		t.Logf("node %s log (last %d lines but clients' joins and leaves):\n%s", n.name, len(lines), strings.Join(lines, "\n"))
	}
}

// ckptFile is a checkpoint file in a node's data directory.
type ckptFile struct {
	node      *chaosNode
	job, kind string
	shard     int
	iteration int64
	path      string
}

var ckptPath = regexp.MustCompile(`checkpoints/([^/]+)/(own|buddy)/shard-(\d+)/iter-(\d+)\.ckpt$`)

// checkpoints lists the checkpoint files of kind on the live nodes, but those of the jobs in
// skip.
func (cl *chaosCluster) checkpoints(kind string, skip map[string]bool) []ckptFile {
	return cl.checkpointFiles(kind, skip, false)
}

// checkpointFiles lists the checkpoint files of kind in the nodes' data directories (also the
// killed nodes' with killed), but those of the jobs in skip.
func (cl *chaosCluster) checkpointFiles(kind string, skip map[string]bool, killed bool) []ckptFile {
	var out []ckptFile
	for _, n := range cl.nodes {
		if n.killed && !killed {
			continue
		}
		paths, _ := filepath.Glob(filepath.Join(n.dataDir, "checkpoints", "*", kind, "shard-*", "iter-*.ckpt"))
		for _, p := range paths {
			m := ckptPath.FindStringSubmatch(filepath.ToSlash(p))
			if m == nil || skip[m[1]] {
				continue
			}
			sh, _ := strconv.Atoi(m[3])
			it, _ := strconv.ParseInt(m[4], 10, 64)
			out = append(out, ckptFile{node: n, job: m[1], kind: m[2], shard: sh, iteration: it, path: p})
		}
	}
	return out
}

// jobDirs are the jobs with checkpoint directories on the live nodes.
func (cl *chaosCluster) jobDirs() map[string]bool {
	jobs := map[string]bool{}
	for _, n := range cl.nodes {
		if n.killed {
			continue
		}
		dirs, _ := filepath.Glob(filepath.Join(n.dataDir, "checkpoints", "*"))
		for _, d := range dirs {
			jobs[filepath.Base(d)] = true
		}
	}
	return jobs
}

// newest is the newest own checkpoint iteration on the live nodes: the job's clock, at the
// checkpoint interval's resolution.
func (cl *chaosCluster) newest(skip map[string]bool) int64 {
	newest := int64(-1)
	for _, f := range cl.checkpoints("own", skip) {
		newest = max(newest, f.iteration)
	}
	return newest
}

// shardHosts waits until every shard of the running job has an own checkpoint newer than
// iteration after, and returns the nodes holding the newest ones (the nodes the shards run
// on), sorted by name. A node's data directory keeps the checkpoints of a shard that moved
// away, but no newer ones.
func (cl *chaosCluster) shardHosts(t *testing.T, run *jobRun, after int64) []*chaosNode {
	t.Helper()
	start := time.Now()
	for {
		newest := map[int]ckptFile{}
		for _, f := range cl.checkpoints("own", run.skip) {
			if f.iteration > after && f.iteration > newest[f.shard].iteration {
				newest[f.shard] = f
			}
		}
		if len(newest) == 10 {
			var hosts []*chaosNode
			for _, f := range newest {
				if !slices.Contains(hosts, f.node) {
					hosts = append(hosts, f.node)
				}
			}
			slices.SortFunc(hosts, func(a, b *chaosNode) int { return strings.Compare(a.name, b.name) })
			return hosts
		}
		if !run.running() {
			t.Fatalf("the job ended before every shard checkpointed past iteration %d:\n%s", after, run.text())
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the shards did not all checkpoint past iteration %d within 30 s", after)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// victim picks, with the draw r, one of the nodes that run shards of the job, but the
// coordinator's and the excluded ones. A node without shards does not stall the job when it
// dies, so it need not cause a recovery (and the recovery is a scenario's point): one holding
// nothing of the job causes none, and the standby holding only buddy copies causes none
// either (the coordinator just picks another standby).
func (cl *chaosCluster) victim(t *testing.T, run *jobRun, after int64, r uint64, exclude ...*chaosNode) *chaosNode {
	t.Helper()
	hosts := cl.shardHosts(t, run, after)
	var cands []*chaosNode
	var names []string
	for _, n := range hosts {
		names = append(names, n.name)
		if n != cl.coordinator() && !n.killed && !slices.Contains(exclude, n) {
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 {
		t.Fatalf("no node but the coordinator (or the excluded ones) runs shards: %v", names)
	}
	v := cands[r%uint64(len(cands))]
	t.Logf("nodes running shards: %v; victim %s", names, v.name)
	return v
}

// waitIteration waits until the running job checkpointed iteration target.
func (cl *chaosCluster) waitIteration(t *testing.T, run *jobRun, target int64) {
	t.Helper()
	start := time.Now()
	for cl.newest(run.skip) < target {
		if !run.running() {
			cl.dumpLogs(t)
			t.Fatalf("the job ended before iteration %d, where the fault was due:\n%s", target, run.text())
		}
		if time.Since(start) > 60*time.Second {
			t.Fatalf("the job did not reach iteration %d within 60 s (newest checkpoint %d)", target, cl.newest(run.skip))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// restart starts a killed node again: the same name, data directory and gossip address, so
// that it rejoins under its identity (its actor address is new).
func (cl *chaosCluster) restart(t *testing.T, n *chaosNode) {
	t.Helper()
	select {
	case <-n.exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("node %s did not exit within 15 s of its kill", n.name)
	}
	join := cl.statusAddr()
	p := startServeArgs(t, n.name, []string{"serve", "--bind", n.Gossip, "--name", n.name, "--data-dir", n.dataDir, "--threads", "1",
		"--chaos-delay", cl.delay, "--join", join})
	t.Logf("restarted node %s: gossip %s (was %s), actor %s (was %s)", n.name, p.Gossip, n.Gossip, p.Actor, n.Actor)
	n.serveProc, n.killed = p, false
}

// jobRun is a factorize --cluster process whose stderr lines are kept with the time they
// came.
type jobRun struct {
	out        string
	cmd        *exec.Cmd
	skip       map[string]bool // jobs whose checkpoints were there before this one
	start, end time.Time
	done       chan struct{}
	code       int

	mu    sync.Mutex
	lines []stampedLine
}

type stampedLine struct {
	at    time.Time
	text  string
	index int
}

// startJob submits the suite's job to the cluster through the coordinator's gossip address.
func (cl *chaosCluster) startJob(t *testing.T, s *chaosSuite, out string) *jobRun {
	t.Helper()
	return cl.runJob(t, nodeCmd(t, append([]string{"factorize", "--cluster", cl.coordinator().Gossip, "--out", out}, s.job...)...), out)
}

// runJob starts cmd, a factorize --cluster process that writes its result to out, and keeps
// its stderr lines; it is killed at the end of the test if it still runs.
func (cl *chaosCluster) runJob(t *testing.T, cmd *exec.Cmd, out string) *jobRun {
	t.Helper()
	r := &jobRun{out: out, cmd: cmd, skip: cl.jobDirs(), done: make(chan struct{})}
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.start = time.Now()
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r.running() {
			_ = r.cmd.Process.Kill()
			<-r.done
		}
	})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			r.mu.Lock()
			r.lines = append(r.lines, stampedLine{at: time.Now(), text: sc.Text(), index: len(r.lines)})
			r.mu.Unlock()
		}
		err := r.cmd.Wait()
		r.mu.Lock()
		r.end = time.Now()
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		} else if err != nil {
			r.code = -1
		}
		r.mu.Unlock()
		close(r.done)
	}()
	return r
}

func (r *jobRun) running() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// wait waits for the job to end.
func (r *jobRun) wait(t *testing.T, limit time.Duration) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(limit):
		t.Fatalf("factorize did not finish within %v:\n%s", limit, r.text())
	}
}

func (r *jobRun) took() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.end.Sub(r.start)
}

func (r *jobRun) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, l := range r.lines {
		fmt.Fprintf(&b, "%s %s\n", l.at.Format("15:04:05.000"), l.text)
	}
	return b.String()
}

// count counts the lines that contain sub.
func (r *jobRun) count(sub string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, l := range r.lines {
		if strings.Contains(l.text, sub) {
			n++
		}
	}
	return n
}

// firstAfter is the first line from index from on that contains sub and came after at.
func (r *jobRun) firstAfter(sub string, at time.Time, from int) (stampedLine, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines[min(from, len(r.lines)):] {
		if strings.Contains(l.text, sub) && !l.at.Before(at) {
			return l, true
		}
	}
	return stampedLine{}, false
}

// waitLine waits until the n-th line containing sub came.
func (r *jobRun) waitLine(t *testing.T, sub string, n int, limit time.Duration) time.Time {
	t.Helper()
	start := time.Now()
	for {
		r.mu.Lock()
		seen := 0
		for _, l := range r.lines {
			if strings.Contains(l.text, sub) {
				if seen++; seen == n {
					r.mu.Unlock()
					return l.at
				}
			}
		}
		r.mu.Unlock()
		if !r.running() {
			t.Fatalf("factorize ended without %d lines with %q:\n%s", n, sub, r.text())
		}
		if time.Since(start) > limit {
			t.Fatalf("no %d lines with %q within %v:\n%s", n, sub, limit, r.text())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var progressLine = regexp.MustCompile(`^iteration \d+: rel_err2 \S+, RMSE \S+, \S+ it/s, ([0-9.]+) s$`)

// jobStart estimates when the coordinator started the job (report.json's time 0) from the
// progress lines: each came at least its seconds after the start.
func (r *jobRun) jobStart() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var best time.Time
	for _, l := range r.lines {
		m := progressLine.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		sec, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			continue
		}
		at := l.at.Add(-time.Duration(sec * float64(time.Second)))
		if best.IsZero() || at.Before(best) {
			best = at
		}
	}
	return best, !best.IsZero()
}

// The client's warnings (factorize prints them as "didnmf: warning: ...").
const (
	warnRollback = "rolling back to iteration"
	warnTakeover = "took the job over"
	warnUnusable = "unusable"
)

// faultIteration picks the checkpoint iteration in [lo, hi) x max-iter at which a fault lands.
func (s *chaosSuite) faultIteration(rng *rand.Rand, lo, hi float64) int64 {
	a, b := int64(lo*float64(s.iters)), int64(hi*float64(s.iters))
	it := a + rng.Int64N(b-a)
	return max(it/s.every*s.every, s.every)
}

// jitter is a delay within one checkpoint interval, so that faults land anywhere in it.
func jitter(rng *rand.Rand) time.Duration { return time.Duration(rng.IntN(60)) * time.Millisecond }

var rollbackLine = regexp.MustCompile(`rolling back to iteration (\d+) `)

// rollbackIteration is the iteration the client's latest recovery warning rolls back to.
func rollbackIteration(run *jobRun) int64 {
	run.mu.Lock()
	defer run.mu.Unlock()
	for i := len(run.lines) - 1; i >= 0; i-- {
		if m := rollbackLine.FindStringSubmatch(run.lines[i].text); m != nil {
			v, _ := strconv.ParseInt(m[1], 10, 64)
			return v
		}
	}
	return 0
}

// Scenario 1: kill -9 a node (not the coordinator's) once, mid-job.
func chaosKillOne(t *testing.T, s *chaosSuite, rng *rand.Rand, cl *chaosCluster, res *chaosResult) {
	at, jit, draw := s.faultIteration(rng, 0.15, 0.5), jitter(rng), rng.Uint64()
	t.Logf("schedule: kill -9 a node running shards (draw %d) at iteration %d + %v", draw, at, jit)

	run := cl.startJob(t, s, filepath.Join(t.TempDir(), "out"))
	cl.waitIteration(t, run, at)
	victim := cl.victim(t, run, 0, draw)
	res.faults = append(res.faults, fmt.Sprintf("kill %s @%d", victim.name, at))
	time.Sleep(jit)
	killed := cl.kill(t, victim)
	run.wait(t, s.limit)
	rep := s.verify(t, cl, run, true)
	s.figures(t, run, rep, res, []time.Time{killed}, warnRollback)
}

// Scenario 2: kill -9 one node after the other, each once the client printed the recovery
// warning of the one before, until 2 of the 5 are dead (3 keep the majority).
func chaosKillRepeatedly(t *testing.T, s *chaosSuite, rng *rand.Rand, cl *chaosCluster, res *chaosResult) {
	at, jit, draw1, draw2 := s.faultIteration(rng, 0.1, 0.3), jitter(rng), rng.Uint64(), rng.Uint64()
	gap := time.Duration(rng.IntN(1000)) * time.Millisecond
	t.Logf("schedule: kill -9 a node running shards (draw %d) at iteration %d + %v; after the client's recovery warning, once the shards "+
		"checkpointed past the rollback, another (draw %d) %v later", draw1, at, jit, draw2, gap)

	run := cl.startJob(t, s, filepath.Join(t.TempDir(), "out"))
	cl.waitIteration(t, run, at)
	v1 := cl.victim(t, run, 0, draw1)
	time.Sleep(jit)
	k1 := cl.kill(t, v1)
	run.waitLine(t, warnRollback, 1, 30*time.Second)
	from := rollbackIteration(run)
	v2 := cl.victim(t, run, from, draw2, v1)
	res.faults = append(res.faults, fmt.Sprintf("kill %s @%d", v1.name, at), fmt.Sprintf("kill %s after rollback to %d +%v", v2.name, from, gap))
	time.Sleep(gap)
	if !run.running() {
		t.Fatalf("the job ended before the second kill; make it longer:\n%s", run.text())
	}
	k2 := cl.kill(t, v2)
	run.wait(t, s.limit)
	rep := s.verify(t, cl, run, true)
	s.figures(t, run, rep, res, []time.Time{k1, k2}, warnRollback)
	if n := run.count(warnRollback); n < 2 {
		t.Errorf("%d recovery warnings for 2 kills:\n%s", n, run.text())
	}
}

// Scenario 3: kill -9 the coordinator's node: the standby takes the job over and the client
// follows it.
func chaosKillCoordinator(t *testing.T, s *chaosSuite, rng *rand.Rand, cl *chaosCluster, res *chaosResult) {
	victim := cl.coordinator()
	at, jit := s.faultIteration(rng, 0.15, 0.45), jitter(rng)
	t.Logf("schedule: kill -9 the coordinator's node %s at iteration %d + %v", victim.name, at, jit)
	res.faults = append(res.faults, fmt.Sprintf("kill coordinator %s @%d", victim.name, at))

	run := cl.startJob(t, s, filepath.Join(t.TempDir(), "out"))
	cl.waitIteration(t, run, at)
	time.Sleep(jit)
	killed := cl.kill(t, victim)
	run.wait(t, s.limit)
	rep := s.verify(t, cl, run, true)
	if run.count(warnTakeover) == 0 {
		t.Errorf("factorize did not say that a node took the job over:\n%s", run.text())
	}
	s.figures(t, run, rep, res, []time.Time{killed}, warnTakeover)
	if l, ok := run.firstAfter(warnRollback, killed, 0); ok {
		t.Logf("the new coordinator's rollback warning came %v after the kill: %s", l.at.Sub(killed).Round(time.Millisecond), l.text)
	}
}

// Scenario 4: SIGSTOP a node for 2 s, then SIGCONT: shorter than the failure detector's
// timeout, so nobody is declared dead and the job does not roll back.
func chaosStopShort(t *testing.T, s *chaosSuite, rng *rand.Rand, cl *chaosCluster, res *chaosResult) {
	at, jit, draw := s.faultIteration(rng, 0.15, 0.5), jitter(rng), rng.Uint64()
	t.Logf("schedule: SIGSTOP a node running shards (draw %d) at iteration %d + %v for 2 s", draw, at, jit)

	run := cl.startJob(t, s, filepath.Join(t.TempDir(), "out"))
	cl.waitIteration(t, run, at)
	victim := cl.victim(t, run, 0, draw)
	res.faults = append(res.faults, fmt.Sprintf("stop %s 2s @%d", victim.name, at))
	time.Sleep(jit)
	stopped := cl.signal(t, victim, syscall.SIGSTOP)
	time.Sleep(2 * time.Second)
	cl.signal(t, victim, syscall.SIGCONT)
	run.wait(t, s.limit)
	rep := s.verify(t, cl, run, false)
	if n := run.count(warnRollback); n > 0 {
		t.Errorf("%d recovery warnings after a 2 s stop:\n%s", n, run.text())
	}
	// Whether a node's failure detector declared it dead anyway (logged: only a recovery would
	// be wrong, and there was none).
	var declared []string
	for _, n := range cl.nodes {
		for _, r := range n.Find("member failed (declared dead)", "member", victim.name) {
			declared = append(declared, fmt.Sprintf("%s: %s", n.name, r.Line))
		}
	}
	if len(declared) > 0 {
		res.note = fmt.Sprintf("%d node(s) declared %s dead during the 2 s stop", len(declared), victim.name)
		t.Logf("note: the 2 s stop began at %s; declared dead by:\n%s", utc(stopped), strings.Join(declared, "\n"))
	}
	s.figures(t, run, rep, res, nil, warnRollback)
}

// Scenario 5: SIGSTOP a node for longer than the failure detector's longest timeout (8 s): it
// is declared dead and the job recovers without it; resumed, it comes back to the cluster.
func chaosStopLong(t *testing.T, s *chaosSuite, rng *rand.Rand, cl *chaosCluster, res *chaosResult) {
	at, jit, draw := s.faultIteration(rng, 0.15, 0.45), jitter(rng), rng.Uint64()
	stop := 8500*time.Millisecond + time.Duration(rng.IntN(1500))*time.Millisecond
	t.Logf("schedule: SIGSTOP a node running shards (draw %d) at iteration %d + %v for %v (and at least until the recovery warning)", draw, at, jit, stop)

	run := cl.startJob(t, s, filepath.Join(t.TempDir(), "out"))
	cl.waitIteration(t, run, at)
	victim := cl.victim(t, run, 0, draw)
	res.faults = append(res.faults, fmt.Sprintf("stop %s %.1fs @%d", victim.name, stop.Seconds(), at))
	time.Sleep(jit)
	stopped := cl.signal(t, victim, syscall.SIGSTOP)
	run.waitLine(t, warnRollback, 1, 30*time.Second)
	time.Sleep(time.Until(stopped.Add(stop)))
	resumed := cl.signal(t, victim, syscall.SIGCONT)
	run.wait(t, s.limit)
	rep := s.verify(t, cl, run, true)
	s.figures(t, run, rep, res, []time.Time{stopped}, warnRollback)
	for _, a := range rep.ShardNodes {
		if a == victim.Actor {
			t.Logf("note: a shard ended on %s, the node that was stopped", victim.name)
		}
	}
	// Resumed, the node refutes its death and is a member again (logged, not asserted).
	back := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if r, ok := clusterStatus(t, cl.statusAddr())[victim.name]; ok && r.Error == "" && r.Actor == victim.Actor {
			back = true
			break
		}
	}
	if back {
		res.note = fmt.Sprintf("%s back in status %v after SIGCONT", victim.name, time.Since(resumed).Round(100*time.Millisecond))
	} else {
		res.note = fmt.Sprintf("%s NOT back in status 30 s after SIGCONT", victim.name)
	}
	t.Log(res.note)
}

// Scenario 6: kill -9 a node and start it again with the same name, data directory and gossip
// address, either at once (before the others noticed its death) or after the recovery.
func chaosRestart(t *testing.T, s *chaosSuite, rng *rand.Rand, cl *chaosCluster, res *chaosResult) {
	at, jit, draw := s.faultIteration(rng, 0.15, 0.4), jitter(rng), rng.Uint64()
	afterWarning := rng.IntN(2) == 1
	when := "at once"
	if afterWarning {
		when = "after the client's recovery warning"
	}
	t.Logf("schedule: kill -9 a node running shards (draw %d) at iteration %d + %v, restart it %s", draw, at, jit, when)

	run := cl.startJob(t, s, filepath.Join(t.TempDir(), "out"))
	cl.waitIteration(t, run, at)
	victim := cl.victim(t, run, 0, draw)
	res.faults = append(res.faults, fmt.Sprintf("kill %s @%d, restart %s", victim.name, at, when))
	time.Sleep(jit)
	killed := cl.kill(t, victim)
	if afterWarning {
		run.waitLine(t, warnRollback, 1, 30*time.Second)
	}
	cl.restart(t, victim)
	t.Logf("node %s restarted %v after its kill", victim.name, time.Since(killed).Round(time.Millisecond))
	run.wait(t, s.limit)
	rep := s.verify(t, cl, run, true)
	s.figures(t, run, rep, res, []time.Time{killed}, warnRollback)
	took := waitFor(t, "the restarted node in status", 30*time.Second, func() bool {
		r, ok := clusterStatus(t, cl.coordinator().Gossip)[victim.name]
		return ok && r.Error == "" && r.Actor == victim.Actor
	})
	t.Logf("status lists the restarted %s (actor %s), %v after the job", victim.name, victim.Actor, took.Round(time.Millisecond))
}

// Scenario 7: a flipped byte in a checkpoint file. A node is killed; once the job stalled
// (nothing is checkpointed any more) and before the death is noticed, a byte in the middle of
// the newest complete own checkpoint of a shard on another node (one that lives) is flipped. The
// recovery must not use it: the shard takes its buddy's copy, or the job falls back to an
// older checkpoint.
//
// The flip comes after the kill, not before: checkpoints are taken every ~80 ms here and a
// node keeps 3 per shard, so a file flipped before the kill would be pruned long before the
// ~3 s it takes to notice the death, and the recovery would never read it.
func chaosCorruptCheckpoint(t *testing.T, s *chaosSuite, rng *rand.Rand, cl *chaosCluster, res *chaosResult) {
	// The kill comes 25-45 ms after checkpoint at appeared, halfway to the next one (about 80
	// ms apart here): the one that appeared is committed by then, so the recovery reads the
	// file about to be flipped (a kill while a commit is under way resumes from the one before).
	at, draw, pickSeed := s.faultIteration(rng, 0.15, 0.45), rng.Uint64(), rng.Uint64()
	jit := 25*time.Millisecond + jitter(rng)/3
	t.Logf("schedule: kill -9 a node running shards (draw %d) at iteration %d + %v, then flip a byte in the newest own checkpoint of a shard on a live node (draw %d)",
		draw, at, jit, pickSeed)

	run := cl.startJob(t, s, filepath.Join(t.TempDir(), "out"))
	cl.waitIteration(t, run, at)
	victim := cl.victim(t, run, 0, draw)
	time.Sleep(jit)
	killed := cl.kill(t, victim)
	// Wait for the job to stall: no checkpoint file appears for 300 ms.
	last, stable := cl.newest(run.skip), time.Now()
	for time.Since(stable) < 300*time.Millisecond {
		time.Sleep(20 * time.Millisecond)
		if n := cl.newest(run.skip); n != last {
			last, stable = n, time.Now()
		}
	}
	if run.count(warnRollback) > 0 {
		t.Fatalf("the recovery began before the checkpoint could be flipped (%v after the kill); the schedule cannot test corruption", time.Since(killed))
	}
	// The newest checkpoint the recovery can resume from: every shard wrote it on its node and
	// had it stored by its buddy (looking into the killed node's data directory too), which it
	// does before it reports it for commit. A newer one may be in no buddy's hands: the job
	// would resume from an older one and never read the flipped file.
	have := map[int64]map[string]bool{}
	for _, kind := range []string{"own", "buddy"} {
		for _, f := range cl.checkpointFiles(kind, run.skip, true) {
			if have[f.iteration] == nil {
				have[f.iteration] = map[string]bool{}
			}
			have[f.iteration][kind+strconv.Itoa(f.shard)] = true
		}
	}
	complete := int64(-1)
	for it, got := range have {
		if len(got) == 2*10 && it > complete {
			complete = it
		}
	}
	// Its own copy of one shard on a live node, at random.
	var cands []ckptFile
	for _, f := range cl.checkpoints("own", run.skip) {
		if f.iteration == complete {
			cands = append(cands, f)
		}
	}
	if len(cands) == 0 {
		t.Fatalf("no own copy of the newest complete checkpoint (iteration %d) on the live nodes", complete)
	}
	slices.SortFunc(cands, func(a, b ckptFile) int { return strings.Compare(a.path, b.path) })
	f := cands[pickSeed%uint64(len(cands))]
	data, err := os.ReadFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	off := len(data) / 2
	data[off] ^= 0x10
	if err := os.WriteFile(f.path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	buddy := "none"
	for _, b := range cl.checkpointFiles("buddy", run.skip, true) {
		if b.shard == f.shard && b.iteration == f.iteration {
			buddy = b.node.name
			if b.node.killed {
				buddy += " (killed: the job must fall back to an older checkpoint)"
			} else {
				buddy += " (alive: its copy should be fetched)"
			}
		}
	}
	t.Logf("flipped byte %d of %d in %s (node %s, shard %d, iteration %d, the newest complete checkpoint; newest file: iteration %d); the shard's buddy: %s",
		off, len(data), f.path, f.node.name, f.shard, f.iteration, last, buddy)
	res.faults = append(res.faults, fmt.Sprintf("kill %s @%d", victim.name, at),
		fmt.Sprintf("flip own ckpt shard %d it %d on %s", f.shard, f.iteration, f.node.name))

	run.wait(t, s.limit)
	rep := s.verify(t, cl, run, true)
	s.figures(t, run, rep, res, []time.Time{killed}, warnRollback)
	from := int64(-1)
	if len(rep.Recoveries) > 0 {
		from = rep.Recoveries[len(rep.Recoveries)-1].FromIteration
	}
	switch {
	case run.count(warnUnusable) > 0:
		res.note = fmt.Sprintf("no valid copy of iteration %d: fell back to iteration %d", f.iteration, from)
	case from == f.iteration:
		res.note = fmt.Sprintf("corrupt own copy of iteration %d rejected, another copy used", f.iteration)
	default:
		res.note = fmt.Sprintf("corruption NOT exercised: resumed from iteration %d, the flipped file is iteration %d", from, f.iteration)
	}
	t.Log(res.note)
}
