package cli

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
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

// TestDetachedJobLeavesItsReason: a detached job canceled by its owner leaves error.json in
// its --out-shared directory (the reason, for whoever opens it), and `jobs --all` lists it
// with its outcome (in the table and in JSON) once `jobs` no longer does.
func TestDetachedJobLeavesItsReason(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	isolateGossip(t)
	b := startJoined(t, []string{"a", "b"})[1]
	shared := filepath.Join(t.TempDir(), "runs", "det2")
	code, stdout, stderr := runNodeProc(t, "factorize", "--cluster", b.Gossip, "--input", "synthetic:m=8,n=4000,k=2,seed=3", "--out-shared", shared,
		"--detach", "--rank", "2", "--shards", "2", "--max-iter", "1000000000", "--tol", "0")
	id := strings.TrimSpace(stdout)
	if code != 0 || id == "" {
		t.Fatalf("factorize --detach: exit %d: %s%s", code, stdout, stderr)
	}
	waitFor(t, "the detached job listed", 30*time.Second, func() bool {
		return slices.ContainsFunc(listJobs(t, b.Gossip), func(j jobRow) bool { return j.JobID == id })
	})
	if code, stdout, stderr := runNode(t, "cancel", "--cluster", b.Gossip, id); code != 0 {
		t.Fatalf("cancel: exit %d: %s%s", code, stdout, stderr)
	}

	var ef struct{ Job, State, Kind, Message, Ended string }
	waitFor(t, "error.json in the --out-shared directory", 30*time.Second, func() bool {
		data, err := os.ReadFile(filepath.Join(shared, "error.json"))
		return err == nil && json.Unmarshal(data, &ef) == nil
	})
	if ef.Job != id || ef.State != "canceled" || ef.Kind != "canceled" || !strings.Contains(ef.Message, "canceled") || ef.Ended == "" {
		t.Errorf("error.json says %+v, want job %s canceled, with the message and the time", ef, id)
	}

	if jobs := listJobs(t, b.Gossip); len(jobs) != 0 {
		t.Errorf("jobs lists an ended job: %+v", jobs)
	}
	code, stdout, stderr = runNode(t, "jobs", "--cluster", b.Gossip, "--all")
	var row string
	for _, line := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(line, id+" ") {
			row = strings.Join(strings.Fields(line), " ")
		}
	}
	if code != 0 || !strings.Contains(row, " canceled ") || !strings.Contains(row, "canceled: job canceled") {
		t.Errorf("jobs --all: exit %d, row %q:\n%s%s", code, row, stdout, stderr)
	}
	code, stdout, stderr = runNode(t, "jobs", "--cluster", b.Gossip, "--all", "--json")
	var listed struct {
		Jobs []struct {
			JobID     string `json:"job_id"`
			State     string `json:"state"`
			ErrorKind string `json:"error_kind"`
			Error     string `json:"error"`
			EndedMs   int64  `json:"ended_unix_ms"`
			OutShared string `json:"out_shared"`
		}
	}
	if err := json.Unmarshal([]byte(stdout), &listed); code != 0 || err != nil || len(listed.Jobs) != 1 {
		t.Fatalf("jobs --all --json: exit %d, %v: %s%s", code, err, stdout, stderr)
	}
	if j := listed.Jobs[0]; j.JobID != id || j.State != "canceled" || j.ErrorKind != "canceled" || j.Error == "" || j.EndedMs == 0 || j.OutShared != shared {
		t.Errorf("jobs --all --json: %+v", j)
	}

	// A detached job whose input its coordinator cannot read is refused before it starts: the
	// submitter hears why (exit 2); the node makes no directory and writes no error.json.
	missing, badShared := filepath.Join(filepath.Dir(shared), "missing.npy"), filepath.Join(filepath.Dir(shared), "det3")
	code, stdout, stderr = runNodeProc(t, "factorize", "--cluster", b.Gossip, "--input", missing, "--ingest", "shared", "--out-shared", badShared,
		"--detach", "--rank", "2", "--shards", "2", "--max-iter", "10")
	if code != 2 || !strings.Contains(stderr, "missing.npy") {
		t.Errorf("factorize --detach of a missing input: exit %d: %s%s", code, stdout, stderr)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(badShared); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused job's --out-shared directory was made: %v", err)
	}
	code, stdout, stderr = runNode(t, "jobs", "--cluster", b.Gossip, "--all")
	t.Logf("jobs --all:\n%s", stdout)
	if code != 0 || !strings.Contains(strings.Join(strings.Fields(stdout), " "), "failed") {
		t.Errorf("jobs --all does not list the failed job: exit %d:\n%s%s", code, stdout, stderr)
	}
}
