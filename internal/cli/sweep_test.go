package cli

import (
	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/sweep"
	"math"

	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// readSweep reads an output directory's sweep.json.
func readSweep(t *testing.T, dir string) didnmf.SweepReport {
	t.Helper()
	var r didnmf.SweepReport
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "sweep.json")), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// sameSweep fails unless two sweeps found the same runs, bit for bit, and the same
// consensus bases.
func sameSweep(t *testing.T, a, b string) {
	t.Helper()
	ra, rb := readSweep(t, a), readSweep(t, b)
	if len(ra.Runs) != len(rb.Runs) || ra.Suggested != rb.Suggested {
		t.Fatalf("%d runs suggesting K=%d against %d suggesting K=%d", len(ra.Runs), ra.Suggested, len(rb.Runs), rb.Suggested)
	}
	for i := range ra.Runs {
		x, y := ra.Runs[i], rb.Runs[i]
		if x.K != y.K || x.Seed != y.Seed || x.TrainRelErr2 != y.TrainRelErr2 || x.Iterations != y.Iterations ||
			(x.TestRelErr2 == nil) != (y.TestRelErr2 == nil) || (x.TestRelErr2 != nil && *x.TestRelErr2 != *y.TestRelErr2) {
			t.Errorf("run %d: %+v against %+v", i, x, y)
		}
	}
	for _, r := range ra.PerRank {
		sameFiles(t, filepath.Join(a, r.ConsensusBasis), filepath.Join(b, r.ConsensusBasis))
	}
}

// sweepInput is a planted rank-4 matrix: a sweep over 2..6 must suggest 4.
const sweepInput = "synthetic:m=20,n=5000,k=4,seed=3,noise=0.05"

// TestSweepCommand: didnmf sweep writes its files, finds the planted rank, and gives the same
// runs and consensus in this process and on 3 actor systems.
func TestSweepCommand(t *testing.T) {
	dir := t.TempDir()
	local := filepath.Join(dir, "local")
	if code, _, stderr := runNode(t, "sweep", "--input", sweepInput, "--ranks", "2:6", "--seeds", "3", "--quiet", "--out", local); code != 0 {
		t.Fatal(stderr)
	}
	// By default a sweep cross-validates: 10% held out, one fold per seed.
	r := readSweep(t, local)
	if r.Suggested != 4 || r.RuleName != "cv-paired-one-se" || r.CannotTell || r.Folds != 3 || len(r.Runs) != 15 || len(r.PerRank) != 5 {
		t.Errorf("suggested K=%d by %s (%q), %d folds; %d runs, %d ranks", r.Suggested, r.RuleName, r.Rule, r.Folds, len(r.Runs), len(r.PerRank))
	}
	for i, run := range r.Runs {
		if run.Fold != i%3 || run.TestSeed != 1+uint64(i%3) || run.TestRelErr2 == nil {
			t.Errorf("run %d: fold %d, test seed %d", i, run.Fold, run.TestSeed)
		}
	}
	if b := r.Busy; b == nil || b.CPUSeconds <= 0 || b.Cores < 1 || b.Share <= 0 {
		t.Errorf("sweep.json says nothing of how busy the cores were: %+v", b)
	}
	for _, name := range []string{"sweep.tsv", "sweep.png", "sweep.svg", "consensus_basis_2.npy", "consensus_basis_6.npy"} {
		if _, err := os.Stat(filepath.Join(local, name)); err != nil {
			t.Error(err)
		}
	}
	tsv := strings.Split(strings.TrimSpace(string(mustRead(t, filepath.Join(local, "sweep.tsv")))), "\n")
	if len(tsv) != 16 || !strings.HasPrefix(tsv[0], "k\tseed\tfold\ttrain_rel_err2") {
		t.Errorf("sweep.tsv: %d lines, header %q", len(tsv), tsv[0])
	}
	// The same sweep (shorter) in this process and on 3 actor systems, 3 jobs at once.
	short := []string{"sweep", "--input", sweepInput, "--ranks", "2:4", "--seeds", "2", "--max-iter", "100", "--shards", "2", "--quiet",
		"--test-fraction", "0.1"}
	a, b := filepath.Join(dir, "short"), filepath.Join(dir, "nodes")
	if code, _, stderr := runNode(t, append(short, "--out", a)...); code != 0 {
		t.Fatal(stderr)
	}
	if code, _, stderr := runNode(t, append(short, "--nodes", "3", "--out", b)...); code != 0 {
		t.Fatal(stderr)
	}
	sameSweep(t, a, b)
	s := readSweep(t, b)
	if !strings.Contains(s.Rule, "test error") || s.Runs[0].TestRelErr2 == nil || s.PerRank[0].TestMean == nil {
		t.Errorf("a sweep with a test set: rule %q, first run's test error %v", s.Rule, s.Runs[0].TestRelErr2)
	}
}

// TestSweepRefuses: what a sweep cannot do is said before any job runs.
func TestSweepRefuses(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	long := make([]string, 10002)
	for i := range long {
		long[i] = strconv.Itoa(i + 1)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no ranks", []string{"--input", sweepInput}, "--ranks is required"},
		{"an empty input", []string{"--input", "", "--ranks", "2"}, `invalid value "" for flag -input: an empty path`},
		{"bad ranks", []string{"--input", sweepInput, "--ranks", "5:2"}, `--ranks "5:2": want FROM:TO[:STEP]`},
		{"unsorted list", []string{"--input", sweepInput, "--ranks", "3,2"}, "increasing order"},
		{"rank above the features", []string{"--input", sweepInput, "--ranks", "2:21"}, "--ranks: rank 21 out of range"},
		{"too many ranks", []string{"--input", sweepInput, "--ranks", "2:100000"}, `--ranks "2:100000" gives 99999 ranks: a sweep runs at most 10000 jobs (ranks x --seeds)`},
		{"too many ranks by step", []string{"--input", sweepInput, "--ranks", "1:20001:2"}, `--ranks "1:20001:2" gives 10001 ranks: a sweep runs at most 10000 jobs`},
		{"too long a list", []string{"--input", sweepInput, "--ranks", strings.Join(long, ",")}, `gives 10002 ranks: a sweep runs at most 10000 jobs`},
		{"too many runs", []string{"--input", sweepInput, "--ranks", "1:3000", "--seeds", "5"}, "--ranks and --seeds make 15000 runs; at most 10000"},
		{"no seeds", []string{"--input", sweepInput, "--ranks", "2:3", "--seeds", "0"}, "--seeds must be between 1 and 1000"},
		{"negative seeds", []string{"--input", sweepInput, "--ranks", "2:3", "--seeds", "-1"}, "--seeds must be between 1 and 1000, got -1"},
		{"seeds past an int", []string{"--input", sweepInput, "--ranks", "2", "--seeds", "2", "--seed", "9223372036854775807"},
			"--seed 9223372036854775807: its 2 seeds must stay at most 9223372036854775807"},
		{"test seeds past a uint64", []string{"--input", sweepInput, "--ranks", "2", "--seeds", "2", "--test-seed", "18446744073709551615"},
			"--test-seed 18446744073709551615: its 2 folds' test seeds must stay at most 18446744073709551615"},
		{"seedless init", []string{"--input", sweepInput, "--ranks", "2:3", "--init", "nndsvd", "--test-fraction", "0"}, "--init nndsvd does not depend on the seed"},
		{"seedless init, cross-validated", []string{"--input", sweepInput, "--ranks", "2:3", "--init", "nndsvd", "--seeds", "1"}, "--init nndsvd needs every entry of X: with --test-fraction"},
		{"folds above seeds", []string{"--input", sweepInput, "--ranks", "2:3", "--seeds", "2", "--folds", "3"}, "--folds must be between 1 and --seeds (2)"},
		{"folds, no test set", []string{"--input", sweepInput, "--ranks", "2:3", "--folds", "2", "--test-fraction", "0"}, "--folds 2 needs held-out entries"},
		{"extrapolation, the default test set", []string{"--input", sweepInput, "--ranks", "2:3", "--accel", "auto"},
			"--accel auto: a sweep holds out --test-fraction 0.1 of the entries by default (its cross-validation), and did cannot extrapolate"},
		{"extrapolation, a test set given", []string{"--input", sweepInput, "--ranks", "2:3", "--accel", "x", "--test-fraction", "0.2"},
			"did cannot extrapolate (--accel x) with held-out entries (test fraction 0.2) yet"},
		{"rank flag", []string{"--input", sweepInput, "--ranks", "2:3", "--rank", "3"}, "flag provided but not defined: -rank"},
		{"unknown transform", []string{"--input", sweepInput, "--ranks", "2:3", "--transform", "log"}, `--transform "log": want none or sqrt`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runNode(t, append(append([]string{"sweep"}, c.args...), "--out", out)...)
			if code != 2 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, %q; want exit 2 and %q", code, stderr, c.want)
			}
		})
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused sweep left its --out")
	}
}

// TestSweepSurvivesKill: a sweep on a cluster of 3 processes, one of them killed with
// SIGKILL while jobs run, completes with every run the bits of the same sweep in this
// process.
func TestSweepSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	isolateGossip(t)
	a := startServe(t, "a")
	b := startServe(t, "b", "--join", a.Gossip)
	c := startServe(t, "c", "--join", a.Gossip)
	waitFor(t, "3 members seen by a", 20*time.Second, func() bool { return len(clusterStatus(t, a.Gossip)) == 3 })
	dir := t.TempDir()
	// Jobs of about a second each, so that the kill finds some running.
	job := []string{"sweep", "--input", "synthetic:m=10,n=200000,k=3,seed=2,noise=0.02", "--ranks", "2:3", "--seeds", "2",
		"--shards", "3", "--tol", "0", "--max-iter", "150", "--checkpoint-every", "10"}
	local := filepath.Join(dir, "local")
	if code, _, stderr := runNode(t, append(job, "--quiet", "--out", local)...); code != 0 {
		t.Fatal(stderr)
	}
	cmd := nodeCmd(t, append(job, "--cluster", a.Gossip, "--parallel", "2", "--out", filepath.Join(dir, "cluster"))...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var lines []string
	var mu sync.Mutex
	first := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		once := sync.Once{}
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
			if strings.Contains(sc.Text(), "[1/4]") {
				once.Do(func() { close(first) })
			}
		}
	}()
	select {
	case <-first:
	case <-time.After(2 * time.Minute):
		t.Fatalf("no job finished: %s", strings.Join(lines, "\n"))
	}
	if err := c.Cmd.Process.Kill(); err != nil { // jobs 2 to 4 run or wait: one of their nodes dies
		t.Fatal(err)
	}
	_ = b
	werr := cmd.Wait()
	mu.Lock()
	log := strings.Join(lines, "\n")
	mu.Unlock()
	if werr != nil {
		t.Fatalf("the sweep failed after a node was killed: %v\n%s", werr, log)
	}
	t.Logf("the sweep's output:\n%s", log)
	sameSweep(t, local, filepath.Join(dir, "cluster"))
	// The members share this machine: its cores count once, their CPU time is theirs.
	if b := readSweep(t, filepath.Join(dir, "cluster")).Busy; b == nil || b.CPUSeconds <= 0 || b.Cores != runtime.NumCPU() {
		t.Errorf("cores_busy of a sweep on 3 processes of this machine: %+v", b)
	}
}

// TestSweepCappedLine: the console names how many runs hit a cap and at which ranks.
func TestSweepCappedLine(t *testing.T) {
	row := func(k int, stop string) didnmf.SweepReportRun { return didnmf.SweepReportRun{K: k, StopReason: stop} }
	for _, tc := range []struct {
		name string
		runs []didnmf.SweepReportRun
		want string
	}{
		{"none", []didnmf.SweepReportRun{row(2, "converged"), row(3, "stalled"), row(4, "canceled")},
			"no run of 3 hit the iteration cap or time limit"},
		{"the issue's: 15 of 24", func() []didnmf.SweepReportRun {
			var rs []didnmf.SweepReportRun
			for k := 2; k <= 13; k++ {
				for seed := range 2 {
					stop := "converged"
					if k >= 5 && k <= 11 || k == 12 && seed == 0 { // 7*2 + 1
						stop = "max-iter"
					}
					rs = append(rs, row(k, stop))
				}
			}
			return rs
		}(), "15 of 24 runs hit the iteration cap or time limit (K=5..12)"},
		{"time limit, ranks apart", []didnmf.SweepReportRun{row(2, "time-limit"), row(3, "converged"), row(6, "max-iter")},
			"2 of 3 runs hit the iteration cap or time limit (K=2,6)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cappedLine(didnmf.SweepReport{Runs: tc.runs}); !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %q, want it to start %q", got, tc.want)
			}
		})
	}
	// What it says of the suggestion agrees with the suggestion's own lines: the CV rule rests
	// on the ranks up to the lowest test error's (unreliable when runs there hit the cap),
	// not on those above; the stability rule on every rank.
	capped := []didnmf.SweepReportRun{row(2, "converged"), row(3, "max-iter")}
	for _, tc := range []struct {
		rule, unreliable string
		cannotTell       bool
		want             string
	}{
		{sweep.RuleCV, "", false, "; they are above the rank of the lowest test error, and the suggestion does not rest on them"},
		{sweep.RuleCV, "1 of 2 runs (K=3) ...", false, "; the suggestion rests on those up to the rank of the lowest test error, and is unreliable (below)"},
		// Cannot tell: every capped run counts (a fresh-eye review: the line said the rule
		// rested on those up to the lowest's rank, which it does not then).
		{sweep.RuleCV, "1 of 2 runs (K=3) ...", true, "; the sweep cannot tell the rank, and they may be why (below)"},
		{sweep.RuleStability, "1 of 2 runs (K=3) ...", false, "; raise --max-iter (or the time limit) before trusting the suggestion"},
	} {
		if got := cappedLine(didnmf.SweepReport{Runs: capped, RuleName: tc.rule, Unreliable: tc.unreliable, CannotTell: tc.cannotTell}); !strings.HasSuffix(got, tc.want) {
			t.Errorf("%s, unreliable %q: %q; want it to end %q", tc.rule, tc.unreliable, got, tc.want)
		}
	}
	// The one capped run left out by the rule (poor_fits[].capped): named as that, not as a
	// run above the lowest's rank.
	leftOut := didnmf.SweepReport{Runs: capped, RuleName: sweep.RuleCV, PerRank: []didnmf.SweepReportRank{{K: 3, PoorFits: []didnmf.SweepReportPoorFit{{Fold: 1, Capped: true}}}}}
	if got, want := cappedLine(leftOut), "; the rule left them out, far from their ranks' other fits (below), and the suggestion does not rest on them"; !strings.HasSuffix(got, want) {
		t.Errorf("%q; want it to end %q", got, want)
	}
}

// TestSweepSaysCapped: a sweep whose runs all stop at --max-iter says so on the console, in
// sweep.json and in sweep.svg.
func TestSweepSaysCapped(t *testing.T) {
	out := filepath.Join(t.TempDir(), "capped")
	code, _, stderr := runNode(t, "sweep", "--input", sweepInput, "--ranks", "2:3", "--seeds", "2", "--max-iter", "2", "--out", out)
	if code != 0 {
		t.Fatal(stderr)
	}
	for _, want := range []string{"4 of 4 runs hit the iteration cap or time limit (K=2,3)",
		"the suggestion is unreliable: 4 of 4 runs (K=2, 3) stopped at the iteration cap or the time limit before converging: their errors (every run)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the console does not say %q:\n%s", want, stderr)
		}
	}
	svg := string(mustRead(t, filepath.Join(out, "sweep.svg")))
	for _, want := range []string{"4 of 4 runs hit the iteration cap", "unreliable: 4 of 4 runs"} {
		if !strings.Contains(svg, want) {
			t.Errorf("sweep.svg does not say %q", want)
		}
	}
	rep := readSweep(t, out)
	if rep.CappedRuns != 4 || !slices.Equal(rep.CappedRanks, []int{2, 3}) || !strings.HasPrefix(rep.Unreliable, "4 of 4 runs (K=2, 3) stopped at the iteration cap") {
		t.Errorf("sweep.json: %d capped runs at ranks %v, unreliable %q; want 4 at [2 3], said", rep.CappedRuns, rep.CappedRanks, rep.Unreliable)
	}
	for _, r := range rep.Runs {
		if r.StopReason != "max-iter" {
			t.Errorf("K=%d seed %d stopped by %q", r.K, r.Seed, r.StopReason)
		}
	}
}

// TestSweepCannotTell: on noise, with no planted rank, the sweep says it cannot tell, in
// sweep.json, on the console and on the figure, and suggests no number.
func TestSweepCannotTell(t *testing.T) {
	dir := t.TempDir()
	// Uniform noise: nothing but its mean fits held-out entries.
	data := make([]float64, 300*20)
	x := uint64(12345)
	for i := range data {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		data[i] = float64(x>>11) / (1 << 53)
	}
	in := filepath.Join(dir, "noise.npy")
	writeNPY(t, in, 300, 20, data)
	out := filepath.Join(dir, "out")
	code, _, stderr := runNode(t, "sweep", "--input", in, "--ranks", "1:4", "--seeds", "3", "--out", out)
	if code != 0 {
		t.Fatal(stderr)
	}
	if want := "suggested rank: cannot tell: no rank fits the held-out entries better than the smallest tried (K=1"; !strings.Contains(stderr, want) {
		t.Errorf("the console does not say %q:\n%s", want, stderr)
	}
	rep := readSweep(t, out)
	if !rep.CannotTell || rep.Suggested != 0 || !strings.Contains(rep.Reason, "the signal beyond one component is below the noise") || rep.Folds != 3 {
		t.Errorf("sweep.json: cannot tell %v, K=%d, reason %q, %d folds", rep.CannotTell, rep.Suggested, rep.Reason, rep.Folds)
	}
	if svg := string(mustRead(t, filepath.Join(out, "sweep.svg"))); !strings.Contains(svg, "cannot tell the rank") {
		t.Error("sweep.svg does not say it cannot tell")
	}
}

// TestSweepTransform: --transform sqrt sweeps sqrt(X) and sweep.json says so (and "none"
// without it), with other test errors than the raw input's.
func TestSweepTransform(t *testing.T) {
	dir := t.TempDir()
	var reps []didnmf.SweepReport
	for _, tr := range []string{"none", "sqrt"} {
		out := filepath.Join(dir, tr)
		if code, _, stderr := runNode(t, "sweep", "--input", sweepInput, "--ranks", "3:4", "--seeds", "2", "--transform", tr, "--quiet", "--out", out); code != 0 {
			t.Fatal(stderr)
		}
		rep := readSweep(t, out)
		if rep.Transform != tr {
			t.Errorf("--transform %s: sweep.json says %q", tr, rep.Transform)
		}
		reps = append(reps, rep)
	}
	if a, b := reps[0].Runs[0].TestRelErr2, reps[1].Runs[0].TestRelErr2; a == nil || b == nil || *a == *b {
		t.Errorf("the same test error with and without sqrt: %v, %v", a, b)
	}
	// On 2 nodes, which read the input and apply the transform themselves: the same runs.
	out := filepath.Join(dir, "nodes")
	if code, _, stderr := runNode(t, "sweep", "--input", sweepInput, "--ranks", "3:4", "--seeds", "2", "--transform", "sqrt", "--nodes", "2", "--quiet", "--out", out); code != 0 {
		t.Fatal(stderr)
	}
	rep := readSweep(t, out)
	if rep.Transform != "sqrt" || len(rep.Runs) != len(reps[1].Runs) {
		t.Fatalf("on 2 nodes: transform %q, %d runs", rep.Transform, len(rep.Runs))
	}
	for i, run := range rep.Runs {
		local := reps[1].Runs[i]
		if run.TestRelErr2 == nil || local.TestRelErr2 == nil || *run.TestRelErr2 != *local.TestRelErr2 || run.Iterations != local.Iterations {
			t.Errorf("run %d on 2 nodes: test rel_err2 %v, %d iterations; in this process %v, %d", i, run.TestRelErr2, run.Iterations, local.TestRelErr2, local.Iterations)
		}
	}
}

// TestSweepRecordsAccel: sweep.json says which accelerated DID setting the runs used.
func TestSweepRecordsAccel(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ flag, want string }{{"", "off"}, {"2,4", "2,4,0.1"}, {"3,20,0.2", "3,20,0.2"}} {
		out := filepath.Join(dir, "a"+c.want)
		args := []string{"sweep", "--input", sweepInput, "--ranks", "3:4", "--seeds", "2", "--quiet", "--out", out}
		if c.flag != "" {
			args = append(args, "--accel", c.flag)
		}
		if code, _, stderr := runNode(t, args...); code != 0 {
			t.Fatal(stderr)
		}
		if got := readSweep(t, out).Accel; got != c.want {
			t.Errorf("--accel %q: sweep.json says accel %q, want %q", c.flag, got, c.want)
		}
	}
}

// TestSweepStopsOnBadInput: a sweep whose input a run refuses (a NaN, a negative value) stops
// at the first such run instead of running every one to the same failure: exit status 2, one
// error naming the run, the file, the entry and the flag to give, and no run recorded.
func TestSweepStopsOnBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name  string
		value float64
		want  string
	}{
		{"nan", math.NaN(), "sample 7, feature 3 (0-based): NaN value"},
		{"negative", -2, "sample 7, feature 3 (0-based): negative value -2"},
	} {
		data := make([]float64, 60*8)
		for i := range data {
			data[i] = float64(1 + i%5)
		}
		data[7*8+3] = c.value
		in := filepath.Join(dir, c.name+".npy")
		writeNPY(t, in, 60, 8, data)
		out := filepath.Join(dir, c.name+"-out")
		code, _, stderr := runNode(t, "sweep", "--input", in, "--ranks", "2:6", "--seeds", "4", "--out", out)
		if code != 2 || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "failed, and every run would") ||
			strings.Count(stderr, c.want) != 1 || strings.Contains(stderr, "failed:") {
			t.Errorf("%s: exit %d:\n%s", c.name, code, stderr)
		}
		if c.name == "nan" && !strings.Contains(stderr, "--missing nan") {
			t.Errorf("%s: the error does not name the flag --missing:\n%s", c.name, stderr)
		}
		if entries, _ := os.ReadDir(filepath.Join(out, "runs")); len(entries) > 0 {
			t.Errorf("%s: %d file(s) in runs/ after a sweep no run of which could run", c.name, len(entries))
		}
	}
}

// TestSweepQuietWarnsUnreliable: --quiet prints nothing of a sweep whose suggestion stands,
// and one warning line for a suggestion that rests on runs that hit the iteration cap.
func TestSweepQuietWarnsUnreliable(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name  string
		args  []string
		warns bool
	}{
		{"converged", nil, false},
		{"every run capped", []string{"--max-iter", "2"}, true},
	} {
		args := append([]string{"sweep", "--input", sweepInput, "--ranks", "2:3", "--seeds", "2", "--quiet", "--out", filepath.Join(dir, c.name)}, c.args...)
		code, _, stderr := runNode(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, stderr)
		}
		warned := strings.HasPrefix(stderr, "sweep: warning: the suggestion is unreliable: ") && strings.Count(stderr, "\n") == 1
		if warned != c.warns || (!c.warns && stderr != "") {
			t.Errorf("%s: --quiet printed %q", c.name, stderr)
		}
	}
}

// TestSweepOutInUse: a sweep refuses an --out another sweep is writing into (it holds a lock on
// the directory until it ends), and an --out that holds a finished sweep's results without
// its runs (whose per-rank files it would leave beside its own); either way with exit status 2
// and nothing changed.
func TestSweepOutInUse(t *testing.T) {
	dir := t.TempDir()
	busy := filepath.Join(dir, "busy")
	if err := os.Mkdir(busy, 0o755); err != nil {
		t.Fatal(err)
	}
	unlock, held, err := lockOutDir(busy) // as a running sweep does
	if err != nil || held {
		t.Fatalf("lock: held %v, %v", held, err)
	}
	code, _, stderr := runNode(t, "sweep", "--input", sweepInput, "--ranks", "2:3", "--seeds", "2", "--out", busy)
	if want := "--out " + busy + ": another didnmf command is writing into it"; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("into a locked --out: exit %d, %q; want exit 2 and %q", code, stderr, want)
	}
	if entries, _ := os.ReadDir(busy); len(entries) != 0 {
		t.Errorf("the refused sweep wrote %d file(s)", len(entries))
	}
	unlock()

	done := filepath.Join(dir, "done")
	if code, _, stderr := runNode(t, "sweep", "--input", sweepInput, "--ranks", "2:3", "--seeds", "2", "--quiet", "--out", done); code != 0 {
		t.Fatal(stderr)
	}
	if err := os.RemoveAll(filepath.Join(done, "runs")); err != nil { // as README allows once it is done
		t.Fatal(err)
	}
	before := dirFiles(t, done)
	for _, resume := range []bool{false, true} {
		args := []string{"sweep", "--input", sweepInput, "--ranks", "4:5", "--seeds", "2", "--out", done}
		if resume {
			args = append(args, "--resume")
		}
		code, _, stderr := runNode(t, args...)
		if want := "holds the results of an earlier sweep (sweep.json) and no runs to go on from"; code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("resume %v: exit %d, %q; want exit 2 and %q", resume, code, stderr, want)
		}
	}
	unchangedDir(t, done, before)
}

// TestHeldOutWarning: a held-out fraction that leaves fewer observed entries per sample or
// feature than a fit's unknowns, or that holds out most entries, is warned of; the default
// and an unknown shape are not.
func TestHeldOutWarning(t *testing.T) {
	for _, tc := range []struct {
		name    string
		f       float64
		m, n, k int
		want    string
	}{
		{"the review's: 19 entries to 360 unknowns", 0.99, 20, 100, 3, "leaves each sample about 0.2 observed entries and each feature about 1, fewer than the 3 unknowns"},
		{"fewer per sample than the rank", 0.5, 20, 10000, 12, "leaves each sample about 10 observed entries, fewer than the 12 unknowns"},
		{"most held out", 0.6, 1000, 1000, 10, "holds out most of the entries"},
		{"the default", 0.1, 20, 100, 3, ""},
		{"no test set", 0, 2, 2, 3, ""},
		{"shape not known here", 0.99, 0, 0, 3, ""},
	} {
		got := heldOutWarning(tc.f, tc.m, tc.n, tc.k)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
