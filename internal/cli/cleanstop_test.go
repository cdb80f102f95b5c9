package cli

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestCleanStopLogsNoError: a serve process stopped with SIGTERM, with a peer joined (so the
// gossip and the data plane are live) and a client and a job served, leaves gracefully; a graceful leave
// is not an error, so neither node logs a line at ERROR level.
func TestCleanStopLogsNoError(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	isolateGossip(t)
	nodes := startJoined(t, []string{"a", "b"})
	a, b := nodes[0], nodes[1]
	if code, _, stderr := runNodeProc(t, "status", "--cluster", a.Gossip); code != 0 {
		t.Fatalf("status: exit %d\n%s", code, stderr)
	}
	// A job whose shards run on both nodes, so the data plane carries frames.
	dir := t.TempDir()
	x := filepath.Join(dir, "x.npy")
	if code, out := runProc(t, "convert", "--input", "synthetic:m=8,n=4000,k=2,seed=3", "--out", x); code != 0 {
		t.Fatalf("convert: %s", out)
	}
	if code, out := runProc(t, "factorize", "--cluster", b.Gossip, "--input", x, "--out", filepath.Join(dir, "out"),
		"--rank", "2", "--shards", "4", "--max-iter", "5", "--tol", "0", "--quiet"); code != 0 {
		t.Fatalf("factorize: exit %d: %s", code, out)
	}
	for _, p := range []*serveProc{a, b} {
		if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-p.exited:
			if err != nil {
				t.Errorf("serve %s after SIGTERM: %v", p.name, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("serve %s did not exit after SIGTERM", p.name)
		}
		for _, r := range p.Records() {
			if r.Attr("level") == "ERROR" {
				t.Errorf("serve %s logged at ERROR level on a clean stop: %s", p.name, r.Line)
			}
		}
	}
}
