package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOutSharedMadeByTheNodes: a job on a cluster of processes with --out-shared naming a
// directory that does not exist yet (under the nodes' data root) runs, the nodes making it as
// --out is made.
func TestOutSharedMadeByTheNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	isolateGossip(t)
	b := startJoined(t, []string{"a", "b"})[1]
	dir := t.TempDir()
	x := filepath.Join(dir, "x.npy")
	if code, out := runProc(t, "convert", "--input", "synthetic:m=8,n=4000,k=2,seed=3", "--out", x); code != 0 {
		t.Fatalf("convert: %s", out)
	}
	shared := filepath.Join(dir, "runs", "det1")
	if code, out := runProc(t, "factorize", "--cluster", b.Gossip, "--input", x, "--out", filepath.Join(dir, "out"), "--out-shared", shared,
		"--rank", "2", "--shards", "4", "--max-iter", "5", "--tol", "0", "--quiet"); code != 0 {
		t.Fatalf("factorize --out-shared %s: exit %d: %s", shared, code, out)
	}
	if _, err := os.Stat(filepath.Join(shared, "coef.npy")); err != nil {
		t.Errorf("no coef.npy in the --out-shared directory: %v", err)
	}
}
