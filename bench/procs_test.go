package bench_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/bench"
	"github.com/didnmf/didnmf/internal/cli"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
)

// nodeEnv makes this test binary act as the didnmf command, for the processes StartProcs
// starts.
const nodeEnv = "BENCH_TEST_NODE"

func TestMain(m *testing.M) {
	if os.Getenv(nodeEnv) == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestProcs: two `didnmf serve` processes (this test binary acting as the command) join; a
// tiny job and the allreduce probe run on them against the driver; the last process is
// killed and declared dead; Close leaves no directory behind.
func TestProcs(t *testing.T) {
	t.Setenv(nodeEnv, "1")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the processes' directories and the secret's go there
	p, err := bench.StartProcs(bench.ProcsOptions{N: 2, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if len(p.JoinSec) != 1 || !(p.JoinSec[0] > 0) {
		t.Errorf("join times %v, want one (the second process's)", p.JoinSec)
	}
	open := func(input string, iters int) *didnmf.Job {
		s := jobspec.New([]string{input}, kernels.DID, 3, 2)
		s.Stop = kernels.StopRule{MaxIter: iters}
		j, err := didnmf.Open(s, didnmf.InProcess(0, 1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { j.Close() })
		return j
	}
	job := open("synthetic:m=5,n=200,k=3,seed=1", 5)
	blocks, err := job.ReadBlocks()
	if err != nil {
		t.Fatal(err)
	}
	pt, err := p.TimeProcs(job, blocks, open(bench.ProbeInput(5, 2, 3), 50), 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if !(pt.ActorSec > 0) || !(pt.DriverSec > 0) || pt.Messages <= 0 || pt.JoinSec != p.JoinSec[0] || !(pt.DetectSec > 0) {
		t.Errorf("timing %+v", pt)
	}
	if pt.Allreduce.Input != "synthetic:m=5,n=64,k=3,seed=1" || pt.Allreduce.Iterations != 50 || !(pt.Allreduce.ActorSec > 0) {
		t.Errorf("probe %+v", pt.Allreduce)
	}
	p.Close()
	if left, err := os.ReadDir(tmp); err != nil || len(left) != 0 {
		t.Errorf("left behind in %s: %v (%v)", tmp, left, err)
	}
}

func TestAbsInputs(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	in := []string{"synthetic:m=5,n=10,k=2", "x.npy", "/data/y.npz"}
	got := bench.AbsInputs(in)
	want := []string{"synthetic:m=5,n=10,k=2", filepath.Join(wd, "x.npy"), "/data/y.npz"}
	if !slices.Equal(got, want) || in[1] != "x.npy" {
		t.Errorf("AbsInputs(%v) = %v, want %v (the input unchanged)", in, got, want)
	}
}
