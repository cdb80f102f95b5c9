package actors

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/fsroot"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
)

// TestOutSharedMakesItsDirectory: a job's --out-shared directory is made under the node's data
// root, as --out makes its own, with the same confinement (nothing made outside the roots, nor
// through a symbolic link that leads out) and overwrite rules (an existing coef.npy refused
// unless the job may overwrite it).
func TestOutSharedMakesItsDirectory(t *testing.T) {
	base := t.TempDir()
	data, outside := filepath.Join(base, "data"), filepath.Join(base, "outside")
	for _, d := range []string{data, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../outside", filepath.Join(data, "out-link")); err != nil {
		t.Fatal(err)
	}
	roots, err := fsroot.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer roots.Close()
	spec := func(dir string, overwrite bool) *messages.JobSpec {
		return &messages.JobSpec{OutShared: dir, Rank: 2, Overwrite: overwrite}
	}

	dir := filepath.Join(data, "runs", "det1")
	if err := prepareSharedCoef(roots, spec(dir, false), "job-1", 3, 5); err != nil {
		t.Fatalf("a new --out-shared directory: %v", err)
	}
	if _, err := os.Stat(sharedCoefPartial(dir, "job-1")); err != nil {
		t.Errorf("the partial coef.npy was not made: %v", err)
	}

	// Outside the roots, or through a link out of them: refused, nothing made.
	for _, d := range []string{filepath.Join(outside, "det2"), filepath.Join(data, "out-link", "det3")} {
		if err := prepareSharedCoef(roots, spec(d, false), "job-2", 3, 5); err == nil {
			t.Errorf("--out-shared %s: accepted", d)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("made outside the data root: %v", ents)
	}

	// An existing coef.npy: refused without overwrite, accepted with it.
	if err := os.WriteFile(filepath.Join(dir, "coef.npy"), []byte("earlier"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := prepareSharedCoef(roots, spec(dir, false), "job-3", 3, 5); !errors.Is(err, fsroot.ErrExists) {
		t.Errorf("an existing coef.npy without overwrite: %v, want ErrExists", err)
	}
	if err := prepareSharedCoef(roots, spec(dir, true), "job-4", 3, 5); err != nil {
		t.Errorf("an existing coef.npy with overwrite: %v", err)
	}

	// A file where the directory should be: refused.
	file := filepath.Join(data, "afile")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := prepareSharedCoef(roots, spec(file, false), "job-5", 3, 5); err == nil {
		t.Errorf("--out-shared naming a file: accepted")
	}
}

// TestErrorFileNeverReplacesUnasked: error.json is made only in an existing directory, never
// over a file already there unless the job may overwrite, and an overwrite job's success
// removes a stale one.
func TestErrorFileNeverReplacesUnasked(t *testing.T) {
	data := t.TempDir()
	roots, err := fsroot.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer roots.Close()
	rec := &messages.JobInfo{JobId: "job-1", State: messages.JobPhase_JOB_PHASE_FAILED, Error: "it broke"}
	ef := filepath.Join(data, "error.json")
	if err := os.WriteFile(ef, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeErrorFile(roots, data, "job-1", rec, false); err == nil {
		t.Error("an existing error.json without overwrite: written")
	}
	if got, _ := os.ReadFile(ef); string(got) != "mine" {
		t.Errorf("the user's error.json was replaced: %q", got)
	}
	if ents, _ := os.ReadDir(data); len(ents) != 1 {
		t.Errorf("a partial file was left: %v", ents)
	}
	if err := writeErrorFile(roots, data, "job-1", rec, true); err != nil {
		t.Errorf("an existing error.json with overwrite: %v", err)
	}
	if got, _ := os.ReadFile(ef); !strings.Contains(string(got), "it broke") {
		t.Errorf("error.json with overwrite: %q", got)
	}
	deep := filepath.Join(data, "a", "b", "c")
	if err := writeErrorFile(roots, deep, "job-1", rec, false); err == nil {
		t.Error("error.json in a missing directory: written")
	}
	if _, err := os.Stat(filepath.Join(data, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error.json made directories: %v", err)
	}
	if err := removeStaleErrorFile(roots, data); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ef); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the stale error.json stays: %v", err)
	}
	if err := removeStaleErrorFile(roots, data); err != nil {
		t.Errorf("no error.json to remove: %v", err)
	}
}

// TestRefusedJobsLeaveNoErrorFile attacks a node's error.json with detached jobs: one refused
// before it starts (its input missing) into a directory holding the user's own error.json, or
// into a deep path that does not exist; a second job refused in the first one's good results;
// a canceled job into the user's directory. None writes error.json or makes a directory; an
// overwrite job that succeeds removes a stale error.json.
func TestRefusedJobsLeaveNoErrorFile(t *testing.T) {
	root := t.TempDir()
	x := make([]float64, 40*3)
	for i := range x {
		x[i] = float64(i%7) + 1
	}
	var npy bytes.Buffer
	if err := matio.WriteNPY(&npy, 40, 3, x); err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(root, "x.npy")
	if err := os.WriteFile(input, npy.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	users := filepath.Join(root, "users")
	if err := os.Mkdir(users, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(users, "error.json"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	roots, err := fsroot.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer roots.Close()
	lc, cl := testClusterWith(t, 1, NodeConfig{Threads: 1, Roots: roots})
	detached := func(input, out string, overwrite bool, iters int64) *messages.JobSpec {
		s := spec(input, "did", 2, 2, lc.Addresses(), iters)
		s.OutShared, s.Overwrite, s.Detached = out, overwrite, true
		return s
	}
	// settle waits for the node to forget its jobs, then for what their ends wrote.
	settle := func() {
		for deadline := time.Now().Add(10 * time.Second); len(lc.Nodes[0].JobsByState()) > 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond)
	}
	missing := filepath.Join(root, "missing.npy")
	if _, err := runJob(t, cl, detached(missing, users, false, 5)); err == nil {
		t.Fatal("a missing input: accepted")
	}
	deep := filepath.Join(root, "deep", "er", "still")
	if _, err := runJob(t, cl, detached(missing, deep, false, 5)); err == nil {
		t.Fatal("a missing input: accepted")
	}
	// The first job into good follows its result (a detached one's client hears no basis).
	good := filepath.Join(root, "good")
	attached := func(overwrite bool) *messages.JobSpec {
		s := detached(input, good, overwrite, 5)
		s.Detached = false
		return s
	}
	if _, err := runJob(t, cl, attached(false)); err != nil {
		t.Fatal(err)
	}
	if _, err := runJob(t, cl, detached(input, good, false, 5)); err == nil {
		t.Fatal("a second job into the first one's results: accepted")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job, err := cl.Submit(ctx, "", detached(input, users, false, 1000000))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	job.Cancel()
	if _, err := job.Wait(ctx); err == nil {
		t.Fatal("the canceled job succeeded")
	}
	settle()
	if got, _ := os.ReadFile(filepath.Join(users, "error.json")); string(got) != "mine" {
		t.Errorf("the user's error.json was replaced: %q", got)
	}
	if _, err := os.Stat(filepath.Join(root, "deep")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused job made its out_shared directories: %v", err)
	}
	if _, err := os.Stat(filepath.Join(good, "error.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused second job wrote error.json among the first one's results: %v", err)
	}

	// An overwrite job that fails may replace error.json; one that succeeds removes it.
	job, err = cl.Submit(ctx, "", detached(input, good, true, 1000000))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	job.Cancel()
	if _, err := job.Wait(ctx); err == nil {
		t.Fatal("the canceled job succeeded")
	}
	settle()
	if _, err := os.Stat(filepath.Join(good, "error.json")); err != nil {
		t.Errorf("a canceled overwrite job left no error.json: %v", err)
	}
	if _, err := runJob(t, cl, attached(true)); err != nil {
		t.Fatal(err)
	}
	settle()
	if _, err := os.Stat(filepath.Join(good, "error.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a successful overwrite job left a stale error.json: %v", err)
	}
}
