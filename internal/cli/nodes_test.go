package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/bench"
	"github.com/didnmf/didnmf/report"
)

// TestFactorizeOnNodesSameBits: factorize --nodes N writes the same files as the in-process
// driver, for every distributed algorithm, in 1 and 3 actor systems, and reports the measured
// message accounting.
func TestFactorizeOnNodesSameBits(t *testing.T) {
	dir := t.TempDir()
	for _, run := range []struct{ algo, accel string }{{"did", "off"}, {"did", "auto"}, {"did", "3,4,0.2"}, {"dbcd", "off"}, {"dadmm", "off"}, {"hpc-anls", "off"}} {
		algo := run.algo
		var files [3][2][]byte
		var reps [3]report.Report
		for i, nodes := range []string{"0", "1", "3"} {
			out := filepath.Join(dir, algo+run.accel+nodes)
			code, _, stderr := runNode(t, "factorize", "--input", "synthetic:m=6,n=1500,k=3,seed=2,noise=0.01", "--rank", "3",
				"--algo", algo, "--accel", run.accel, "--shards", "5", "--nodes", nodes, "--out", out, "--max-iter", "25", "--quiet")
			if code != 0 {
				t.Fatalf("%s --nodes %s: exit %d: %s", algo, nodes, code, stderr)
			}
			files[i][0], _ = os.ReadFile(filepath.Join(out, "basis.npy"))
			files[i][1], _ = os.ReadFile(filepath.Join(out, "coef.npy"))
			reps[i] = readReport(t, out)
		}
		for i := 1; i < 3; i++ {
			if !bytes.Equal(files[0][0], files[i][0]) || !bytes.Equal(files[0][1], files[i][1]) {
				t.Fatalf("%s --accel %s: factors on %d node(s) differ from the driver's", algo, run.accel, reps[i].Nodes)
			}
			r := reps[i]
			if r.MessagesPerIt == nil || *r.MessagesPerIt <= 0 || r.BytesPerIt == nil || *r.BytesPerIt <= 0 ||
				r.ReductionsPerIt == nil || *r.ReductionsPerIt != reps[0].Collectives {
				t.Fatalf("%s: report %+v lacks the message accounting (driver: %v collectives per iteration)", algo, r, reps[0].Collectives)
			}
		}
		if reps[0].MessagesPerIt != nil {
			t.Fatal("the driver's report claims messages")
		}
	}
}

func TestNodesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nodes", "-1"}, "--nodes must be between 0 and 64"},
		{[]string{"--nodes", "2", "--fan-in", "3"}, "--fan-in must be a power of two"},
		{[]string{"--fan-in", "4"}, "needs --nodes"},
		{[]string{"--nodes", "2", "--rank", "9"}, "rank 9 out of range"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		args := append([]string{"factorize", "--input", "synthetic:m=5,n=40,k=3,seed=1", "--rank", "3", "--out", out}, tc.args...)
		code, _, stderr := runNode(t, args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: output directory left behind", tc.args)
		}
	}
}

func TestBenchOnNodesJSON(t *testing.T) {
	code, stdout, stderr := runNode(t, "bench", "--input", "synthetic:m=5,n=20000,k=3,seed=1", "--rank", "3", "--iters", "5",
		"--json", "--roofline-reps", "3", "--shards", "4", "--nodes", "3", "--reps", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r bench.Result
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v: %q", err, stdout)
	}
	if r.Nodes != 3 || r.FanIn != 8 || r.ActorSecPerIter <= 0 || r.ActorRatio <= 0 || r.MessagesPerIter != 10 {
		t.Errorf("bench result %+v", r)
	}
	// Every iteration's allreduce makes each shard wait a little, and each computes.
	if !(r.ShardsBusy > 0 && r.ShardsBusy < 1) {
		t.Errorf("shards_busy = %v, want in (0, 1)", r.ShardsBusy)
	}
}

// TestAccelStallSameOnNodes: an extrapolating job, whose objective can stay above its lowest
// for an iteration after a restart, stops by the same stall rule on the in-process driver and
// on nodes, at the same iteration with the same bits.
func TestAccelStallSameOnNodes(t *testing.T) {
	dir := t.TempDir()
	var files [2][]byte
	var reps [2]report.Report
	for i, nodes := range []string{"0", "3"} {
		out := filepath.Join(dir, nodes)
		code, _, stderr := runNode(t, "factorize", "--input", "synthetic:m=6,n=1500,k=3,seed=2,noise=0.05", "--rank", "3",
			"--accel", "auto", "--shards", "4", "--nodes", nodes, "--out", out, "--max-iter", "3000", "--quiet")
		if code != 0 {
			t.Fatalf("--nodes %s: exit %d: %s", nodes, code, stderr)
		}
		files[i], _ = os.ReadFile(filepath.Join(out, "basis.npy"))
		reps[i] = readReport(t, out)
	}
	if reps[0].StopReason != "stalled" {
		t.Fatalf("the job stopped for %q after %d iterations, want stalled", reps[0].StopReason, reps[0].Iterations)
	}
	if reps[1].Iterations != reps[0].Iterations || reps[1].StopReason != reps[0].StopReason || !bytes.Equal(files[0], files[1]) {
		t.Fatalf("on 3 nodes: %d iterations (%s), in process %d (%s); same basis %v", reps[1].Iterations, reps[1].StopReason,
			reps[0].Iterations, reps[0].StopReason, bytes.Equal(files[0], files[1]))
	}
}
