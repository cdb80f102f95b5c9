package cli

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"github.com/didnmf/didnmf/internal/proccluster"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/didnmf/didnmf/pki"
)

// serveProc is a real `didnmf serve` process, started and followed by proccluster.
type serveProc struct {
	*proccluster.Node                    // Gossip, Actor, Cmd
	name              string             // the node's name, as the test gave it
	serving           proccluster.Record // the node's "serving" record
	exited            chan error         // receives the process's exit error once
}

// logText is the node's log (JSON records, a line each).
func (p *serveProc) logText() string { return p.Log() }

// nodeCmd is the test binary acting as the node command.
func nodeCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = nodeEnv()
	return cmd
}

// nodeEnv is the environment in which the test binary acts as the node command.
func nodeEnv() []string { return append(os.Environ(), "NODE_TEST_MAIN=1") }

// startServe starts `didnmf serve --bind 127.0.0.1:0 --name name` with extra args and waits
// until it serves; it is killed at the end of the test.
func startServe(t *testing.T, name string, args ...string) *serveProc {
	t.Helper()
	return startServeArgs(t, name, append([]string{"serve", "--bind", "127.0.0.1:0", "--name", name, "--data-dir", filepath.Join(t.TempDir(), name), "--threads", "1"}, args...))
}

// startServeArgs is startServe with the whole command line given (serve and its flags). The
// node may read and write job files under the temporary directory, where the tests keep
// theirs, unless the arguments name data roots.
func startServeArgs(t *testing.T, name string, args []string) *serveProc {
	t.Helper()
	return startServeUnder(t, nil, name, args)
}

// startServeUnder is startServeArgs with the node run under the command line wrap (see
// proccluster.Options.Wrap; nil: none).
func startServeUnder(t *testing.T, wrap []string, name string, args []string) *serveProc {
	t.Helper()
	return startServeWith(t, proccluster.Options{Wrap: wrap}, name, args)
}

// startServeWith is startServeArgs with the launcher's options (its Exe and Env are the
// test binary's and nodeEnv's).
func startServeWith(t *testing.T, opts proccluster.Options, name string, args []string) *serveProc {
	t.Helper()
	if !slices.Contains(args, "--data-root") {
		args = append(slices.Clone(args), "--data-root", os.TempDir())
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	opts.Exe, opts.Env = exe, nodeEnv()
	n, err := proccluster.Start(opts, args...)
	if err != nil {
		t.Fatalf("serve %s: %v", name, err)
	}
	t.Cleanup(n.Kill)
	serving, _ := n.WaitFor(0, "serving")
	p := &serveProc{Node: n, name: name, serving: serving, exited: make(chan error, 1)}
	go func() {
		<-n.Exited()
		p.exited <- n.Err()
	}()
	return p
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool, why ...func() string) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			for _, w := range why {
				what += ": " + w()
			}
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// logLinesAbout is the records of p's log that name the member called name.
func logLinesAbout(p *serveProc, name string) string {
	var out []string
	for _, line := range strings.Split(p.logText(), "\n") {
		if strings.Contains(line, `"member":"`+name+`"`) || strings.Contains(line, `"peer":"`+name+`"`) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// statusRow is one member in `status --json`.
type statusRow struct {
	Name     string   `json:"name"`
	Role     string   `json:"role"`
	Actor    string   `json:"actor"`
	Memory   int64    `json:"memory"`
	Reserved int64    `json:"reserved"`
	Actors   int64    `json:"actors"`
	Jobs     []string `json:"jobs"`
	Drops    []string `json:"drops"`
	Error    string   `json:"error"`
}

func clusterStatus(t *testing.T, addr string, extra ...string) map[string]statusRow {
	t.Helper()
	code, stdout, stderr := runNode(t, append([]string{"status", "--cluster", addr, "--json"}, extra...)...)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	return parseStatus(t, stdout)
}

// parseStatus reads the members of `status --json`'s output by name.
func parseStatus(t *testing.T, stdout string) map[string]statusRow {
	t.Helper()
	var st struct{ Members []statusRow }
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatalf("status json: %v\n%s", err, stdout)
	}
	out := map[string]statusRow{}
	for _, r := range st.Members {
		if r.Role == "member" {
			out[r.Name] = r
		}
	}
	return out
}

// runProc runs the node command as a separate process and returns its exit code and output.
func runProc(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := nodeCmd(t, args...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// runNodeProc runs the node command as a process and returns its exit code, stdout and stderr.
func runNodeProc(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := nodeCmd(t, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), o.String(), e.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, o.String(), e.String()
}

func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x, y) {
		t.Errorf("%s and %s differ", a, b)
	}
}

// TestClusterOfProcesses starts three `didnmf serve` processes that join by gossip and submits
// jobs from a fourth process with factorize --cluster: every ingest mode, and C written by
// the shards into a shared directory, give the driver's bits. A node that joins while a job
// runs does not disturb it and takes shards of the next job; a node stopped with SIGTERM
// leaves, and the others see a leave, not a failure.
func TestClusterOfProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	isolateGossip(t)
	a := startServe(t, "a")
	b := startServe(t, "b", "--join", a.Gossip)
	c := startServe(t, "c", "--join", a.Gossip)
	waitFor(t, "3 members seen by a", 20*time.Second, func() bool { return len(clusterStatus(t, a.Gossip)) == 3 })

	dir := t.TempDir()
	x := filepath.Join(dir, "x.npy")
	if code, out := runProc(t, "convert", "--input", "synthetic:m=12,n=30000,k=4,seed=5", "--out", x); code != 0 {
		t.Fatalf("convert: %s", out)
	}
	job := []string{"--rank", "4", "--shards", "5", "--max-iter", "25", "--tol", "0", "--quiet"}
	golden := filepath.Join(dir, "golden")
	if code, _, stderr := runNode(t, append([]string{"factorize", "--input", x, "--out", golden}, job...)...); code != 0 {
		t.Fatal(stderr)
	}
	shared := filepath.Join(dir, "shared-coef")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		flags []string
	}{
		{"shared", []string{"--ingest", "shared"}},
		{"stream", []string{"--ingest", "stream"}},
		{"out-shared", []string{"--out-shared", shared}},
	} {
		out := filepath.Join(dir, c.name)
		if c.name == "out-shared" { // an earlier run's coef.npy must not pass for this run's
			if err := os.MkdirAll(out, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(out, "coef.npy"), []byte("stale"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		args := append(append([]string{"factorize", "--cluster", b.Gossip, "--input", x, "--out", out}, job...), c.flags...)
		if code, text := runProc(t, args...); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, text)
		}
		sameFiles(t, filepath.Join(golden, "basis.npy"), filepath.Join(out, "basis.npy"))
		coef := filepath.Join(out, "coef.npy")
		if c.name == "out-shared" {
			coef = filepath.Join(shared, "coef.npy")
			if _, err := os.Stat(filepath.Join(out, "coef.npy")); err == nil {
				t.Errorf("out-shared: a coef.npy left in the client's --out")
			}
		}
		sameFiles(t, filepath.Join(golden, "coef.npy"), coef)
		if r := readReport(t, out); len(r.ShardNodes) != 5 || r.Cluster != b.Gossip {
			t.Errorf("%s: report shard_nodes %v cluster %q", c.name, r.ShardNodes, r.Cluster)
		}
	}

	// A second job into the same --out-shared does not replace the first one's coef.npy
	// unless asked to; a detached job runs on without its client and writes everything there.
	shared2 := append(append([]string{"factorize", "--cluster", b.Gossip, "--input", x}, job...), "--out-shared", shared)
	if code, text := runProc(t, append(shared2, "--out", filepath.Join(dir, "again"))...); code != 2 || !strings.Contains(text, "--overwrite") {
		t.Fatalf("a second job into the same --out-shared: exit %d: %s", code, text)
	}
	sameFiles(t, filepath.Join(golden, "coef.npy"), filepath.Join(shared, "coef.npy"))
	detached := filepath.Join(dir, "detached")
	if err := os.Mkdir(detached, 0o755); err != nil {
		t.Fatal(err)
	}
	detach := append(append([]string{"factorize", "--cluster", b.Gossip, "--input", x}, job...), "--out-shared", detached, "--detach")
	code, stdout, stderr := runNodeProc(t, detach...)
	if code != 0 || !strings.HasPrefix(stdout, "j") {
		t.Fatalf("--detach: exit %d: %s %s", code, stdout, stderr)
	}
	waitFor(t, "the detached job's files", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(detached, "report.json"))
		return err == nil
	})
	sameFiles(t, filepath.Join(golden, "coef.npy"), filepath.Join(detached, "coef.npy"))
	sameFiles(t, filepath.Join(golden, "basis.npy"), filepath.Join(detached, "basis.npy"))
	// The detached job's report is the client's report (one schema): the same iterations and
	// errors, and didnmf plot draws it.
	want, got := readReport(t, golden), readReport(t, detached)
	if got.Iterations != want.Iterations || got.RelErr2 != want.RelErr2 || got.RMSE != want.RMSE || got.Stop != want.Stop ||
		got.Algo != want.Algo || len(got.History) != len(want.History) || got.CoefShared != filepath.Join(detached, "coef.npy") {
		t.Errorf("detached report.json differs from the client's: got %+v\nwant %+v", got, want)
	}
	if code, stdout, stderr := runNode(t, "plot", "--result", detached); code != 0 || !strings.Contains(stdout, "basis.png") {
		t.Errorf("didnmf plot of the detached result: exit %d: %s%s", code, stdout, stderr)
	}

	// Synthetic ingest: every shard generates its block.
	syn := []string{"--input", "synthetic:m=6,n=40000,k=3,seed=2", "--rank", "3", "--shards", "6", "--max-iter", "20", "--tol", "0", "--quiet"}
	synGolden := filepath.Join(dir, "syn-golden")
	if code, _, stderr := runNode(t, append([]string{"factorize", "--out", synGolden}, syn...)...); code != 0 {
		t.Fatal(stderr)
	}
	synOut := filepath.Join(dir, "syn")
	if code, text := runProc(t, append([]string{"factorize", "--cluster", c.Gossip, "--out", synOut}, syn...)...); code != 0 {
		t.Fatal(text)
	}
	sameFiles(t, filepath.Join(synGolden, "basis.npy"), filepath.Join(synOut, "basis.npy"))
	sameFiles(t, filepath.Join(synGolden, "coef.npy"), filepath.Join(synOut, "coef.npy"))

	// Every job feature (penalties, ...) gives the driver's bits on the processes too.
	for _, f := range jobFeatures {
		job := append(featureJob(x), f.flags...)
		fGolden, fOut := filepath.Join(dir, f.name+"-golden"), filepath.Join(dir, f.name)
		if code, _, stderr := runNode(t, append([]string{"factorize", "--out", fGolden}, job...)...); code != 0 {
			t.Fatalf("%s: %s", f.name, stderr)
		}
		if code, text := runProc(t, append([]string{"factorize", "--cluster", a.Gossip, "--out", fOut}, job...)...); code != 0 {
			t.Fatalf("%s on the cluster: %s", f.name, text)
		}
		sameResult(t, fGolden, fOut)
		f.check(t, fOut)
	}
	// A transform onto the first job's basis: the nodes read the basis and solve their samples
	// (shared), or the client streams them the basis with their samples (stream).
	// likeLocal runs a command here and on the cluster with each ingest, and compares the bits.
	likeLocal := func(name string, args ...string) {
		local := filepath.Join(dir, name+"-golden")
		if code, _, stderr := runNode(t, append(args, "--out", local)...); code != 0 {
			t.Fatalf("%s: %s", name, stderr)
		}
		for _, ingest := range []string{"shared", "stream"} {
			out := filepath.Join(dir, name+"-"+ingest)
			if code, text := runProc(t, append(args, "--cluster", a.Gossip, "--ingest", ingest, "--out", out)...); code != 0 {
				t.Fatalf("%s on the cluster, %s ingest: %s", name, ingest, text)
			}
			sameResult(t, local, out)
		}
	}
	likeLocal("transform", "transform", "--basis", filepath.Join(golden, "basis.npy"), "--input", x, "--shards", "5", "--quiet")
	// cNMF's consensus of a sweep, its usages refit on the cluster: the nodes read the input
	// (shared) or the client streams it, and reads it for the shape check before the
	// clustering too, refusing an input of another shape there.
	sweepDir := filepath.Join(dir, "sweep")
	if code, _, stderr := runNode(t, "sweep", "--input", x, "--ranks", "4", "--seeds", "4", "--max-iter", "30", "--test-fraction", "0", "--quiet", "--out", sweepDir); code != 0 {
		t.Fatalf("sweep: %s", stderr)
	}
	likeLocal("consensus", "consensus", "--sweep", sweepDir, "--k", "4", "--input", x, "--shards", "5", "--quiet")
	wrong := filepath.Join(dir, "wrong.npy")
	if code, out := runProc(t, "convert", "--input", "synthetic:m=12,n=200,k=4,seed=5", "--out", wrong); code != 0 {
		t.Fatalf("convert: %s", out)
	}
	wrongOut := filepath.Join(dir, "consensus-wrong")
	code, text := runProc(t, "consensus", "--sweep", sweepDir, "--k", "4", "--input", wrong, "--cluster", a.Gossip, "--ingest", "stream", "--out", wrongOut)
	if want := "200 samples"; code != 2 || !strings.Contains(text, want) {
		t.Errorf("consensus of another shape, streamed: exit %d, %q; want exit 2 and %q", code, text, want)
	}
	if _, err := os.Stat(wrongOut); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused consensus made its --out: %v", err)
	}

	// Missing values: the nodes read the NaNs (shared) or the client streams them.
	nanX, _ := nanInput(t, dir)
	miss := []string{"factorize", "--input", nanX, "--rank", "3", "--shards", "3", "--max-iter", "20", "--tol", "0", "--quiet", "--missing", "nan"}
	mGolden := filepath.Join(dir, "missing-golden")
	if code, _, stderr := runNode(t, append(miss, "--out", mGolden)...); code != 0 {
		t.Fatalf("missing: %s", stderr)
	}
	for _, ingest := range []string{"shared", "stream"} {
		mOut := filepath.Join(dir, "missing-"+ingest)
		if code, text := runProc(t, append(miss, "--cluster", a.Gossip, "--ingest", ingest, "--out", mOut)...); code != 0 {
			t.Fatalf("missing on the cluster, %s ingest: %s", ingest, text)
		}
		sameResult(t, mGolden, mOut)
	}

	// A node joins while a longer job runs: the job is undisturbed (same bits). It must run
	// long enough for status (a process that joins the gossip) to see it on a loaded
	// machine: 150 iterations (a fraction of a second) were missed once in CI; 3000 take a few.
	long := []string{"--input", "synthetic:m=6,n=200000,k=3,seed=4", "--rank", "3", "--shards", "8", "--max-iter", "3000", "--tol", "0", "--quiet"}
	longGolden := filepath.Join(dir, "long-golden")
	if code, _, stderr := runNode(t, append([]string{"factorize", "--out", longGolden}, long...)...); code != 0 {
		t.Fatal(stderr)
	}
	longOut := filepath.Join(dir, "long")
	running := nodeCmd(t, append([]string{"factorize", "--cluster", a.Gossip, "--out", longOut}, long...)...)
	var runningOut bytes.Buffer
	running.Stdout, running.Stderr = &runningOut, &runningOut
	if err := running.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the long job running on a", 20*time.Second, func() bool {
		return len(clusterStatus(t, a.Gossip)["a"].Jobs) > 0
	})
	d := startServe(t, "d", "--join", a.Gossip)
	if err := running.Wait(); err != nil {
		t.Fatalf("long job: %v\n%s", err, runningOut.String())
	}
	sameFiles(t, filepath.Join(longGolden, "basis.npy"), filepath.Join(longOut, "basis.npy"))
	sameFiles(t, filepath.Join(longGolden, "coef.npy"), filepath.Join(longOut, "coef.npy"))
	for _, s := range readReport(t, longOut).ShardNodes {
		if s == d.Actor {
			t.Errorf("the job that was running when d joined has a shard on d")
		}
	}
	// The next job (enough shards that rendezvous hashing gives d some) uses it.
	waitFor(t, "a sees d", 20*time.Second, func() bool { return len(clusterStatus(t, a.Gossip)) == 4 })
	next := filepath.Join(dir, "next")
	if code, text := runProc(t, "factorize", "--cluster", a.Gossip, "--input", "synthetic:m=4,n=4000,k=2,seed=1", "--rank", "2",
		"--shards", "24", "--max-iter", "3", "--tol", "0", "--quiet", "--out", next); code != 0 {
		t.Fatal(text)
	}
	onD := 0
	for _, s := range readReport(t, next).ShardNodes {
		if s == d.Actor {
			onD++
		}
	}
	if onD == 0 {
		t.Errorf("no shard of the next job on the new node d (%v)", readReport(t, next).ShardNodes)
	}

	// SIGTERM: c leaves gracefully; the others see a leave, not a failure.
	if err := c.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-c.exited:
		if err != nil {
			t.Errorf("serve c after SIGTERM: %v\n%s", err, c.logText())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("serve c did not exit after SIGTERM")
	}
	took := waitFor(t, "a and b see c leave", 15*time.Second, func() bool {
		return len(a.Find("member left", "member", "c")) > 0 && len(b.Find("member left", "member", "c")) > 0
	}, func() string {
		return "\nwhat a logged of c:\n" + logLinesAbout(a, "c") + "\nwhat b logged of c:\n" + logLinesAbout(b, "c") + "\nc's log:\n" + c.logText()
	})
	t.Logf("SIGTERM: the others saw c leave %v after it exited", took)
	if len(a.Find("member failed (declared dead)", "member", "c")) > 0 {
		t.Errorf("a declared c dead instead of seeing it leave")
	}
	if st := clusterStatus(t, b.Gossip); len(st) != 3 {
		t.Errorf("after c left, status lists %d members: %v", len(st), st)
	}

	// kill -9: the others declare the node dead.
	killed := time.Now()
	if err := d.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	took = waitFor(t, "a sees d fail", 30*time.Second, func() bool {
		return len(a.Find("member failed (declared dead)", "member", "d")) > 0
	})
	t.Logf("kill -9: a declared d dead %v after the kill", time.Since(killed).Round(time.Millisecond))
	_ = took
}

// TestClusterRefusesTooLargeJob: a job that needs more memory than the members offer is
// refused with exit status 2 before any shard is placed.
func TestClusterRefusesTooLargeJob(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	isolateGossip(t)
	// Two machines (their memory adds up; nodes on one machine would share it).
	a := startServe(t, "a", "--memory", "2MiB", "--machine", "machine-a")
	startServe(t, "b", "--memory", "2MiB", "--machine", "machine-b", "--join", a.Gossip)
	waitFor(t, "2 members", 20*time.Second, func() bool { return len(clusterStatus(t, a.Gossip)) == 2 })
	// 5 x 400000 dense doubles = 16 MB of X: more than 2 x 2 MiB.
	code, text := runProc(t, "factorize", "--cluster", a.Gossip, "--input", "synthetic:m=5,n=400000,k=3,seed=1", "--rank", "3",
		"--shards", "4", "--max-iter", "3", "--quiet", "--out", filepath.Join(t.TempDir(), "out"))
	if code != 2 || !strings.Contains(text, "offer") {
		t.Fatalf("exit %d, want 2 and a capacity error: %s", code, text)
	}
	t.Logf("refused: %s", strings.TrimSpace(text))
	for name, r := range clusterStatus(t, a.Gossip) {
		if r.Actors != 0 || r.Reserved != 0 || len(r.Jobs) != 0 {
			t.Errorf("%s after the refusal: %d actors, %d bytes reserved, jobs %v", name, r.Actors, r.Reserved, r.Jobs)
		}
	}
	// A job that fits runs.
	if code, text := runProc(t, "factorize", "--cluster", a.Gossip, "--input", "synthetic:m=5,n=20000,k=3,seed=1", "--rank", "3",
		"--shards", "4", "--max-iter", "3", "--quiet", "--out", filepath.Join(t.TempDir(), "out")); code != 0 {
		t.Fatalf("a job that fits: exit %d: %s", code, text)
	}
}

// TestClusterSecurity: a node with another gossip key cannot join; with mutual TLS a client
// without a certificate, or with one from another authority, cannot submit and nothing runs;
// a client with certificate files needs no gossip key, is in no member's list (status lists
// the members only while it runs a job); the gossip key is taken from a file only its user
// may read or the environment, never from the command line; a non-loopback address without
// key and TLS is refused.
func TestClusterSecurity(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	// No gossip key nor secret from the environment: the clients below have none.
	t.Setenv(gossipKeyEnv, "")
	t.Setenv(pki.SecretFileEnv, filepath.Join(t.TempDir(), "no.secret"))
	certs := filepath.Join(t.TempDir(), "certs")
	evil := filepath.Join(t.TempDir(), "evil")
	for _, c := range [][]string{
		{"certs", "--dir", certs, "--name", "a"}, {"certs", "--dir", certs, "--name", "b"}, {"certs", "--dir", certs, "--name", "client", "--client"},
		{"certs", "--dir", evil, "--name", "client"},
	} {
		if code, _, stderr := runNode(t, c...); code != 0 {
			t.Fatal(stderr)
		}
	}
	tlsFlags := func(dir, name string) []string {
		return []string{"--tls-ca", filepath.Join(dir, "ca.pem"), "--tls-cert", filepath.Join(dir, name+".pem"), "--tls-key", filepath.Join(dir, name+"-key.pem")}
	}
	keyFile := func(key string, mode os.FileMode) string {
		f := filepath.Join(t.TempDir(), "gossip.key")
		if err := os.WriteFile(f, []byte(key+"\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f, mode); err != nil {
			t.Fatal(err)
		}
		return f
	}
	key1 := keyFile("MDEyMzQ1Njc4OWFiY2RlZg==", 0o600) // 16 bytes, base64
	key2 := keyFile("ZmVkY2JhOTg3NjU0MzIxMA==", 0o600)
	a := startServe(t, "a", append([]string{"--gossip-key-file", key1}, tlsFlags(certs, "a")...)...)
	b := startServe(t, "b", append([]string{"--gossip-key-file", key1, "--join", a.Gossip}, tlsFlags(certs, "b")...)...)
	good := tlsFlags(certs, "client") // a client needs no gossip key
	waitFor(t, "a and b", 20*time.Second, func() bool { return len(clusterStatus(t, a.Gossip, good...)) == 2 })

	// Wrong gossip key: cannot join.
	code, text := runProc(t, "serve", "--bind", "127.0.0.1:0", "--name", "intruder", "--data-dir", filepath.Join(t.TempDir(), "i"),
		"--gossip-key-file", key2, "--join", a.Gossip)
	if code == 0 {
		t.Errorf("a node with the wrong gossip key started: %s", text)
	}
	t.Logf("wrong key: %s", strings.TrimSpace(text))

	job := []string{"factorize", "--cluster", a.Gossip, "--input", "synthetic:m=4,n=1000,k=2,seed=1", "--rank", "2", "--shards", "2",
		"--max-iter", "3", "--quiet"}
	for _, c := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"no credentials", []string{"--insecure"}, "closed the connection"},
		{"no client certificate", []string{"--secret-file", filepath.Join(t.TempDir(), "none")}, "no cluster secret"},
		{"untrusted CA", tlsFlags(evil, "client"), "authentication failed"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		code, text := runProc(t, append(append(job, "--out", out), c.flags...)...)
		if code == 0 || !strings.Contains(text, c.want) {
			t.Errorf("%s: exit %d, want a failure saying %q: %s", c.name, code, c.want, text)
		}
		if _, err := os.Stat(filepath.Join(out, "basis.npy")); err == nil {
			t.Errorf("%s: wrote results", c.name)
		}
		t.Logf("%s: exit %d: %s", c.name, code, lastLine(text))
	}
	// A handshake with another authority's certificate on a's actor port: refused, and
	// counted; status shows the counts to a peer (b's certificate), not to a client.
	if conn, err := tls.Dial("tcp", a.Actor, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"},
		Certificates: []tls.Certificate{loadPair(t, evil, "client")}}); err == nil {
		_, _ = conn.Read(make([]byte, 1))
		conn.Close()
	}
	waitFor(t, "a's refusal shown to a peer", 10*time.Second, func() bool {
		return slices.ContainsFunc(clusterStatus(t, a.Gossip, tlsFlags(certs, "b")...)["a"].Drops, func(d string) bool {
			return strings.HasPrefix(d, "TLS handshake failed=")
		})
	})
	st := clusterStatus(t, a.Gossip, good...)
	if len(st) != 2 {
		t.Errorf("members after the attempts: %v", st)
	}
	if d := st["a"].Drops; len(d) != 0 {
		t.Errorf("status shows a client a's refusals: %v", d)
	}
	for name, r := range st {
		if r.Actors != 0 || len(r.Jobs) != 0 {
			t.Errorf("%s ran something: %d actors, jobs %v", name, r.Actors, r.Jobs)
		}
	}
	for _, l := range []string{a.logText(), b.logText()} { // b logs the members it sees too
		if strings.Contains(l, "intruder") {
			t.Errorf("the intruder was seen as a member:\n%s", l)
		}
	}
	// The right certificate works, with no gossip key; while its job runs, the client is in
	// no member's list: status (another client) lists a and b only.
	running := nodeCmd(t, append(append(slices.Clone(job[:len(job)-3]), "--max-iter", "100000000", "--tol", "0", "--quiet",
		"--out", filepath.Join(t.TempDir(), "long")), good...)...)
	running.Env = append(running.Env, gossipKeyEnv+"=")
	if err := running.Start(); err != nil {
		t.Fatal(err)
	}
	defer running.Process.Kill()
	waitFor(t, "the client's job running", 30*time.Second, func() bool {
		for _, r := range clusterStatus(t, a.Gossip, good...) {
			if len(r.Jobs) > 0 {
				return true
			}
		}
		return false
	})
	code, stdout, stderr := runNode(t, append([]string{"status", "--cluster", a.Gossip, "--json"}, good...)...)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	var all struct{ Members []statusRow }
	if err := json.Unmarshal([]byte(stdout), &all); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range all.Members {
		listed = append(listed, r.Name+"/"+r.Role)
	}
	t.Logf("status while a client runs a job: %v", listed)
	if !slices.Equal(listed, []string{"a/member", "b/member"}) {
		t.Errorf("status lists %v while a client runs a job, want a and b, members", listed)
	}
	_ = running.Process.Kill()
	_ = running.Wait()
	if code, text := runProc(t, append(append(job, "--out", filepath.Join(t.TempDir(), "ok")), good...)...); code != 0 {
		t.Errorf("with the right certificate and no gossip key: exit %d: %s", code, text)
	}
	// Certificates without a gossip key on a non-loopback address are refused, and say why.
	code, _, stderr = runNode(t, append([]string{"serve", "--bind", "192.0.2.10:7946", "--data-dir", filepath.Join(t.TempDir(), "n")}, tlsFlags(certs, "a")...)...)
	if code != 2 || !strings.Contains(stderr, "--gossip-key-file") {
		t.Errorf("certificates without a gossip key: exit %d: %s", code, stderr)
	}
	// The gossip key is never taken from the command line, and its file must be private.
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"serve --gossip-key", []string{"serve", "--bind", "127.0.0.1:0", "--gossip-key", "MDEyMzQ1Njc4OWFiY2RlZg=="}, "--gossip-key-file FILE"},
		{"client --gossip-key", []string{"status", "--cluster", a.Gossip, "--gossip-key", "MDEyMzQ1Njc4OWFiY2RlZg=="}, "a client takes no gossip key"},
		{"key file open to others", append([]string{"serve", "--bind", "127.0.0.1:0", "--data-dir", filepath.Join(t.TempDir(), "k"),
			"--gossip-key-file", keyFile("MDEyMzQ1Njc4OWFiY2RlZg==", 0o644)}, tlsFlags(certs, "a")...), "chmod 600"},
	} {
		// A process, ended after 20 s: a build that took the flag would serve.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, nodeCmd(t).Path, c.args...)
		cmd.Env = nodeEnv()
		out, err := cmd.CombinedOutput()
		cancel()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: exit %d (%v), want 2 and %q: %s", c.name, code, err, c.want, out)
		}
	}
	// A cluster secret that other users may read is refused, and says why.
	loose := filepath.Join(t.TempDir(), "loose.secret")
	if err := pki.WriteSecret(loose, pki.NewSecret()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runNode(t, "serve", "--bind", "127.0.0.1:0", "--data-dir", filepath.Join(t.TempDir(), "l"), "--secret-file", loose)
	if code != 2 || !strings.Contains(stderr, "chmod 600") {
		t.Errorf("a secret open to others: exit %d: %s", code, stderr)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// isolateGossip gives the nodes the test starts a fresh gossip key (through the environment
// they inherit; clients take none): members retry the addresses of members they saw die, and on
// loopback a concurrent test's cluster may reuse such a port; clusters with different keys
// never merge.
func isolateGossip(t *testing.T) {
	key := make([]byte, 16)
	_, _ = crand.Read(key)
	t.Setenv(gossipKeyEnv, base64.StdEncoding.EncodeToString(key))
	// And a cluster secret of its own.
	secretFile := filepath.Join(t.TempDir(), "cluster.secret")
	if err := pki.WriteSecret(secretFile, pki.NewSecret()); err != nil {
		t.Fatal(err)
	}
	t.Setenv(pki.SecretFileEnv, secretFile)
}

// loadPair loads the key pair `didnmf certs` wrote for name into dir.
func loadPair(t *testing.T, dir, name string) tls.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return pair
}
