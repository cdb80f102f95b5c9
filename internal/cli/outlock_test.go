package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutInUse: factorize, consensus and demo refuse an --out another command holds (as
// sweep does, TestSweepOutInUse), with exit status 2 and the directory as it was; with the
// lock let go, each writes there (consensus, whose refit writes into the --out it holds,
// included).
func TestOutInUse(t *testing.T) {
	dir := t.TempDir()
	input, sweepDir := consensusInput(t, dir)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"factorize", []string{"factorize", "--input", input, "--rank", "3", "--max-iter", "20"}},
		{"consensus", []string{"consensus", "--input", input, "--sweep", sweepDir, "--k", "3"}},
		{"demo", []string{"demo", "--max-iter", "5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name)
			if err := os.Mkdir(out, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(out, "mine.txt"), []byte("kept"), 0o644); err != nil {
				t.Fatal(err)
			}
			before := dirFiles(t, out)
			unlock, held, err := lockOutDir(out) // as a running command does
			if err != nil || held {
				t.Fatalf("lock: held %v, %v", held, err)
			}
			args := append(tc.args, "--quiet", "--out", out)
			code, _, stderr := runNode(t, args...)
			if want := "--out " + out + ": another didnmf command is writing into it"; code != 2 || !strings.Contains(stderr, want) {
				t.Errorf("into a locked --out: exit %d, %q; want exit 2 and %q", code, stderr, want)
			}
			unchangedDir(t, out, before)
			unlock()
			if code, _, stderr := runNode(t, args...); code != 0 {
				t.Fatalf("with the lock let go: exit %d: %s", code, stderr)
			}
			if _, err := os.Stat(filepath.Join(out, "basis.npy")); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestConsensusOfASweepStillWriting: consensus of a --sweep directory a command still holds
// (a sweep writing it) says so, exit 2, instead of that the directory holds no sweep.json;
// once let go, it runs.
func TestConsensusOfASweepStillWriting(t *testing.T) {
	dir := t.TempDir()
	input, sweepDir := consensusInput(t, dir)
	unlock, held, err := lockOutDir(sweepDir)
	if err != nil || held {
		t.Fatalf("lock: held %v, %v", held, err)
	}
	args := []string{"consensus", "--input", input, "--sweep", sweepDir, "--k", "3", "--quiet", "--out", filepath.Join(dir, "out")}
	code, _, stderr := runNode(t, args...)
	if want := "--sweep " + sweepDir + ": a didnmf command (its sweep?) is still writing into it"; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, %q; want exit 2 and %q", code, stderr, want)
	}
	unlock()
	if code, _, stderr := runNode(t, args...); code != 0 {
		t.Fatalf("with the lock let go: exit %d: %s", code, stderr)
	}
}

// TestOutDanglingLink: an --out that is a symbolic link to nothing is named as that, with
// exit status 2 (it said "mkdir ...: file exists"), and nothing is made at its target.
func TestOutDanglingLink(t *testing.T) {
	dir := t.TempDir()
	out, target := filepath.Join(dir, "out"), filepath.Join(dir, "gone")
	if err := os.Symlink(target, out); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runNode(t, "factorize", "--input", "synthetic:m=10,n=40,k=2,seed=1", "--rank", "2", "--max-iter", "5", "--out", out)
	if want := "--out " + out + " is a symbolic link to " + target + ", which does not exist"; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, want)
	}
	if _, err := os.Lstat(target); err == nil {
		t.Errorf("%s was made", target)
	}
}

// TestPlotOutDanglingLink: plot names an --out that is a symbolic link to nothing, as the
// commands that make their --out do (it said "mkdir: file exists").
func TestPlotOutDanglingLink(t *testing.T) {
	result := plotResultDir(t, 64, 4, nil)
	out, target := filepath.Join(t.TempDir(), "figs"), filepath.Join(t.TempDir(), "gone")
	if err := os.Symlink(target, out); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runNode(t, "plot", "--result", result, "--out", out)
	if want := "a symbolic link to " + target + ", which does not exist"; code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, want)
	}
}
