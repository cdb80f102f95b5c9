package proccluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain makes the test binary a stand-in for `node serve` when asked: it logs JSON
// records on stderr as the real node does (a "serving" record, with its pid and
// $PROCCLUSTER_WRAPPED, then member events), a line that is not JSON, and then waits to be
// killed, or exits at once with "exit".
func TestMain(m *testing.M) {
	switch os.Getenv("PROCCLUSTER_FAKE") {
	case "":
		os.Exit(m.Run())
	case "serve":
		fmt.Fprintf(os.Stderr, `{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"serving","name":"a","gossip":"127.0.0.1:1","actor":"127.0.0.1:2","members":1,"pid":%d,"wrapped":%q}`+"\n",
			os.Getpid(), os.Getenv("PROCCLUSTER_WRAPPED"))
		fmt.Fprintln(os.Stderr, "not json: a stack line")
		time.Sleep(50 * time.Millisecond)
		fmt.Fprintln(os.Stderr, `{"time":"2026-01-01T00:00:01Z","level":"INFO","msg":"member joined","member":"b","role":"member"}`)
		time.Sleep(time.Minute)
	case "exit":
		fmt.Fprintln(os.Stderr, `{"msg":"starting"}`)
		os.Exit(3)
	}
}

func fake(t *testing.T, mode string) Options {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Options{Exe: exe, Env: append(os.Environ(), "PROCCLUSTER_FAKE="+mode), StartTimeout: 10 * time.Second}
}

// TestStartFollowsRecords: Start returns the node's addresses from its "serving" record, the
// records keep their message and attributes in order, WaitFor finds a later record, a record
// that never comes times out, and Kill waits for the process.
func TestStartFollowsRecords(t *testing.T) {
	n, err := Start(fake(t, "serve"), "serve")
	if err != nil {
		t.Fatal(err)
	}
	defer n.Kill()
	if n.Name != "a" || n.Gossip != "127.0.0.1:1" || n.Actor != "127.0.0.1:2" {
		t.Errorf("serving: name %q gossip %q actor %q", n.Name, n.Gossip, n.Actor)
	}
	if !strings.Contains(strings.Join(n.Cmd.Args, " "), "--log-format json") {
		t.Errorf("the node was not asked for JSON records: %v", n.Cmd.Args)
	}
	r, err := n.WaitFor(10*time.Second, "member joined", "member", "b")
	if err != nil {
		t.Fatal(err)
	}
	if r.Attr("role") != "member" || r.Attr("level") != "INFO" || r.At.IsZero() {
		t.Errorf("record %+v", r)
	}
	if got := n.Find("member joined", "member", "c"); len(got) != 0 {
		t.Errorf("Find for member c: %v", got)
	}
	recs := n.Records()
	if len(recs) != 3 || recs[1].Msg != "" || recs[1].Line != "not json: a stack line" || recs[0].Attr("members") != "1" {
		t.Errorf("records %+v", recs)
	}
	if !strings.Contains(n.Log(), "not json: a stack line\n") {
		t.Errorf("log %q", n.Log())
	}
	start := time.Now()
	if _, err := n.WaitFor(200*time.Millisecond, "member left", "member", "b"); err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("waiting for a record that never comes: %v after %v", err, time.Since(start))
	}
	n.Kill()
	select {
	case <-n.Exited():
	default:
		t.Error("Kill returned before the process exited")
	}
}

// TestStartFailsWhenTheNodeExits: a node that exits before serving is an error that says so
// and shows its log.
func TestStartFailsWhenTheNodeExits(t *testing.T) {
	_, err := Start(fake(t, "exit"), "serve")
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), `"msg":"starting"`) {
		t.Fatalf("Start of a node that exits: %v", err)
	}
}

// TestStartWrapped: with Options.Wrap the node runs under the wrapper's command line (here
// env, which sets a variable and execs the node in place): the process started is the
// wrapper, it ran the node with its arguments, and the process Kill reaches is the node's.
func TestStartWrapped(t *testing.T) {
	env, err := exec.LookPath("env")
	if err != nil {
		t.Skipf("no env command to wrap with: %v", err)
	}
	opts := fake(t, "serve")
	opts.Wrap = []string{env, "PROCCLUSTER_WRAPPED=yes"}
	n, err := Start(opts, "serve", "--name", "a")
	if err != nil {
		t.Fatal(err)
	}
	defer n.Kill()
	want := append([]string{env, "PROCCLUSTER_WRAPPED=yes", opts.Exe}, "serve", "--name", "a", "--log-format", "json")
	if !slices.Equal(n.Cmd.Args, want) {
		t.Errorf("command line %q, want %q", n.Cmd.Args, want)
	}
	r := n.Records()[0]
	if r.Attr("wrapped") != "yes" || r.Attr("pid") != strconv.Itoa(n.Cmd.Process.Pid) {
		t.Errorf("serving record %s: want wrapped \"yes\" and the pid of the process started, %d", r.Line, n.Cmd.Process.Pid)
	}
	n.Kill()
}
