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
	if err := printJobs(&b, jobs); err != nil {
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
