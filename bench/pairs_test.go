package bench

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
)

// openTiny opens a tiny synthetic job of algo on shards shards for target, closed with the
// test.
func openTiny(t *testing.T, algo kernels.Algorithm, shards, iters int, target didnmf.Target) *didnmf.Job {
	t.Helper()
	s := jobspec.New([]string{"synthetic:m=5,n=200,k=3,seed=1"}, algo, 3, shards)
	s.Stop = kernels.StopRule{MaxIter: iters}
	j, err := didnmf.Open(s, target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// TestTimePairs: a tiny job on in-process actors and with the driver, alternately: both runs
// counted, the medians consistent with each other, the actors' messages and busy share taken
// from their result.
func TestTimePairs(t *testing.T) {
	j := openTiny(t, kernels.DID, 4, 5, didnmf.InProcess(2, 1))
	blocks, err := j.ReadBlocks()
	if err != nil {
		t.Fatal(err)
	}
	a, err := TimeActors(j, blocks, 3)
	if err != nil {
		t.Fatal(err)
	}
	if a.FanIn != jobspec.DefaultFanIn || !(a.DriverSec > 0) || !(a.ActorSec > 0) || !(a.Ratio > 0) || a.Messages <= 0 || a.Bytes <= 0 {
		t.Errorf("timing %+v", a)
	}
	if !(a.Busy > 0 && a.Busy <= 1) {
		t.Errorf("busy %v, want in (0, 1]", a.Busy)
	}
	// A failing run ends the timing with its error.
	calls := 0
	_, err = TimePairs(blocks, j.Config(), 2, 3, func() (*didnmf.Result, error) {
		calls++
		return nil, errTest
	})
	if err != errTest || calls != 1 {
		t.Errorf("TimePairs: %v after %d runs, want errTest after 1", err, calls)
	}
}

var errTest = errors.New("test")

// TestCheckpointOverhead: the job with its checkpoints against the job without, on tiny
// in-process actors: a ratio of the two jobs' times, and the checkpoints one job committed,
// at most one every CheckpointEvery iterations. (How many commit varies from run to run on so
// short a job, from none to 9 in 30 runs of `didnmf bench` before the harness moved here: an
// iteration is committed when every shard's report of its checkpoint came, and the job may
// end first.)
func TestCheckpointOverhead(t *testing.T) {
	s := jobspec.New([]string{"synthetic:m=5,n=200,k=3,seed=1"}, kernels.DID, 3, 2)
	s.Stop, s.CheckpointEvery = kernels.StopRule{MaxIter: 40}, 4
	j, err := didnmf.Open(s, didnmf.InProcess(2, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	c, err := CheckpointOverhead(j, 3)
	if err != nil {
		t.Fatal(err)
	}
	if c.Checkpoints < 0 || c.Checkpoints > 40/4 || math.IsNaN(c.Overhead) || math.IsInf(c.Overhead, 0) || c.Overhead <= -1 {
		t.Errorf("cost %+v, want at most 10 checkpoints and a ratio of times", c)
	}
}

// TestProbe: the probe's input has the job's features and rank over its samples, and the
// probe times a job against a submit that runs it on in-process actors.
func TestProbe(t *testing.T) {
	for _, tc := range []struct{ shards, rank, want int }{{1, 3, 64}, {16, 3, 128}, {2, 100, 100}} {
		if got := ProbeSamples(tc.shards, tc.rank); got != tc.want {
			t.Errorf("ProbeSamples(%d, %d) = %d, want %d", tc.shards, tc.rank, got, tc.want)
		}
	}
	if got := ProbeInput(7, 16, 3); got != "synthetic:m=7,n=128,k=3,seed=1" {
		t.Errorf("ProbeInput = %q", got)
	}
	probe := openTiny(t, kernels.DID, 2, 20, didnmf.InProcess(0, 1))
	runner, err := didnmf.NewRunner(didnmf.InProcess(2, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer runner.Close()
	submit := func(s *jobspec.Spec) (*didnmf.Result, error) {
		j, err := didnmf.Open(s, didnmf.InProcess(2, 1))
		if err != nil {
			return nil, err
		}
		defer j.Close()
		return runner.Run(t.Context(), j, didnmf.Options{})
	}
	p, err := ProbeAllreduce(probe, 2, submit)
	if err != nil {
		t.Fatal(err)
	}
	if p.Input != "synthetic:m=5,n=200,k=3,seed=1" || p.Iterations != 20 || p.Pairs != 2 || p.PerIteration != 1 || !(p.ActorSec > 0) || !(p.DriverSec > 0) {
		t.Errorf("probe %+v", p)
	}
	// DID's one allreduce an iteration carries B's update, M x K floats a shard.
	if p.PayloadFloats <= 0 {
		t.Errorf("payload %v floats a shard", p.PayloadFloats)
	}
	var w bytes.Buffer
	p.WriteText(&w)
	if !strings.HasPrefix(w.String(), "  allreduce between the processes: ") || !strings.Contains(w.String(), "(synthetic:m=5,n=200,k=3,seed=1, 20 iterations,") ||
		!strings.HasSuffix(w.String(), "median of 2 pairs)\n") {
		t.Errorf("probe text %q", w.String())
	}
}
