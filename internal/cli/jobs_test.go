package cli

import (
	"strings"
	"testing"

	"github.com/didnmf/didnmf/messages"
)

// TestPrintJobsWords: the jobs table shows a job's state and algorithm as the words the CLI
// takes, not as the wire enums' names.
func TestPrintJobsWords(t *testing.T) {
	var b strings.Builder
	jobs := []*messages.JobInfo{
		{JobId: "a", Owner: "alice", State: messages.JobPhase_JOB_PHASE_RUNNING, Algorithm: messages.Algorithm_ALGORITHM_HPC_ANLS, Rank: 3, Shards: 4},
		{JobId: "b", Owner: "bob", State: messages.JobPhase_JOB_PHASE_PAUSED, Algorithm: messages.Algorithm_ALGORITHM_DID, Rank: 2, Shards: 1},
	}
	if err := printJobs(&b, jobs, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want a header and 2 jobs:\n%s", len(lines), b.String())
	}
	for i, want := range [][]string{{"a", "alice", "running", "hpc-anls", "3", "4"}, {"b", "bob", "paused", "did", "2", "1"}} {
		if got := strings.Fields(lines[i+1])[:6]; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("row %d is %q, want it to start with %q", i, lines[i+1], want)
		}
	}
}

// TestPrintJobsAll: with --all, an ended job shows when it ended and why: its error (kind,
// field, message on one line) or the stop rule that ended it; a running one shows dashes.
func TestPrintJobsAll(t *testing.T) {
	var b strings.Builder
	jobs := []*messages.JobInfo{
		{JobId: "a", Owner: "alice", State: messages.JobPhase_JOB_PHASE_FAILED, Algorithm: messages.Algorithm_ALGORITHM_DID, Rank: 2, Shards: 2,
			EndedUnixMs: 1700000000000, ErrorKind: messages.ErrorKind_ERROR_KIND_INPUT, ErrorField: "input", Error: "open x.npy:\nno such file"},
		{JobId: "b", Owner: "alice", State: messages.JobPhase_JOB_PHASE_DONE, Algorithm: messages.Algorithm_ALGORITHM_DID, Rank: 2, Shards: 2,
			EndedUnixMs: 1700000000000, Stop: "max_iter"},
		{JobId: "c", Owner: "alice", State: messages.JobPhase_JOB_PHASE_RUNNING, Algorithm: messages.Algorithm_ALGORITHM_DID, Rank: 2, Shards: 2},
	}
	if err := printJobs(&b, jobs, true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.HasSuffix(strings.Join(strings.Fields(lines[0]), " "), "ENDED REASON") {
		t.Fatalf("got:\n%s", b.String())
	}
	for i, want := range []string{"failed", "done", "running"} {
		if f := strings.Fields(lines[i+1]); f[2] != want {
			t.Errorf("row %d: state %q, want %q", i, f[2], want)
		}
	}
	for i, want := range []string{"2023-11-14T22:13:20Z input (input): open x.npy: no such file", "2023-11-14T22:13:20Z stop: max_iter", "false - -"} {
		if !strings.HasSuffix(strings.Join(strings.Fields(lines[i+1]), " "), want) {
			t.Errorf("row %d is %q, want it to end with %q", i, lines[i+1], want)
		}
	}
}
