package cli

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/proccluster"
)

// TestServeJoinWaits: a member started before the member it joins (--join at an address where
// nothing listens yet, as when a deploy starts every node at once) tries again, says so in its
// log, and joins once that member is up; with --join-wait 0 it gives up at once, exit status
// 2, naming the address.
func TestServeJoinWaits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	isolateGossip(t)
	// An address on a loopback IP no other node here binds (see TestClusterCommandsNoNode).
	l, err := net.Listen("tcp", "127.0.0.4:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	code, text := runProc(t, "serve", "--bind", "127.0.0.1:0", "--name", "early", "--join", addr, "--join-wait", "0",
		"--data-dir", filepath.Join(t.TempDir(), "early"), "--threads", "1")
	if code != 2 || !strings.Contains(text, "could not join the cluster through any seed of ["+addr+"]") ||
		strings.Contains(text, "trying again") {
		t.Fatalf("--join-wait 0 with nothing at %s: exit %d: %s", addr, code, text)
	}

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	type started struct {
		n   *proccluster.Node
		err error
	}
	done := make(chan started, 1)
	go func() {
		n, err := proccluster.Start(proccluster.Options{Exe: exe, Env: nodeEnv(), StartTimeout: 2 * time.Minute}, "serve",
			"--bind", "127.0.0.1:0", "--name", "b", "--join", addr, "--join-wait", "2m",
			"--data-dir", filepath.Join(t.TempDir(), "b"), "--threads", "1", "--data-root", os.TempDir())
		done <- started{n, err}
	}()
	// b tries at once, after 1 s and after 3 s: let it find nothing twice.
	select {
	case s := <-done:
		t.Fatalf("b started with nothing to join (%v)", s.err)
	case <-time.After(2 * time.Second):
	}
	a := startServeArgs(t, "a", []string{"serve", "--bind", addr, "--name", "a", "--data-dir", filepath.Join(t.TempDir(), "a"), "--threads", "1"})
	s := <-done
	if s.err != nil {
		t.Fatalf("b after a started at %s: %v", a.Gossip, s.err)
	}
	b := s.n
	t.Cleanup(b.Kill)
	if tries := len(b.Find("no member answered at --join; trying again")); tries < 1 {
		t.Errorf("b logged no retry before a started:\n%s", b.Log())
	}
	if got := b.Find("serving")[0].Attr("members"); got != "2" {
		t.Errorf("b serves with %s member(s), want 2 (a and b)", got)
	}
	waitFor(t, "a lists b", 10*time.Second, func() bool { return len(clusterStatus(t, a.Gossip)) == 2 })
}
