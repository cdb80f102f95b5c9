package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
)

// ActorTiming is a job timed on actors against the driver, over pairs of runs.
type ActorTiming struct {
	// FanIn is the reduce tree's fan-in.
	FanIn int
	// DriverSec and ActorSec are the medians over the pairs of each run's median seconds per
	// iteration; Ratio the median of actor / driver, Overhead the median of actor - driver
	// (on a tiny matrix, the latency of one allreduce).
	DriverSec, ActorSec, Ratio, Overhead float64
	// Messages and Bytes are the actors' messages and bytes per iteration (the last run's).
	Messages, Bytes float64
	// Busy is the median share of the shards' iteration time in their steps (didnmf.Traffic.Busy).
	Busy float64
}

// TimeActors runs job pairs times with the driver on blocks (the job's) and on its target's
// actors, alternately, and returns the medians.
func TimeActors(job *didnmf.Job, blocks []kernels.Block, pairs int) (*ActorTiming, error) {
	runner, err := didnmf.NewRunner(job.Target)
	if err != nil {
		return nil, err
	}
	defer runner.Close()
	return TimePairs(blocks, job.Config(), job.Spec.FanIn, pairs, func() (*didnmf.Result, error) {
		return runner.Run(context.Background(), job, didnmf.Options{})
	})
}

// TimePairs runs the driver on blocks with cfg, and runActors, alternately, pairs times, and
// returns the medians. fanIn is the actors' reduce tree's (0: jobspec.DefaultFanIn).
func TimePairs(blocks []kernels.Block, cfg kernels.Config, fanIn, pairs int, runActors func() (*didnmf.Result, error)) (*ActorTiming, error) {
	out := &ActorTiming{FanIn: cmp.Or(fanIn, jobspec.DefaultFanIn)}
	var drv, act, ratios, over, busy []float64
	for r := 0; r < pairs; r++ {
		res, err := kernels.Run(context.Background(), blocks, cfg)
		if err != nil {
			return nil, err
		}
		ares, err := runActors()
		if err != nil {
			return nil, err
		}
		d, a := Median(res.IterSeconds), Median(ares.IterSeconds)
		drv, act = append(drv, d), append(act, a)
		ratios, over = append(ratios, a/d), append(over, a-d)
		out.Messages, out.Bytes = ares.MessagesPerIteration, ares.BytesPerIteration
		busy = append(busy, ares.Traffic.Busy())
	}
	out.DriverSec, out.ActorSec, out.Ratio, out.Overhead, out.Busy = Median(drv), Median(act), Median(ratios), Median(over), Median(busy)
	return out, nil
}

// CheckpointCost is the fault-free cost of checkpoints.
type CheckpointCost struct {
	// Overhead is the median over pairs of (job seconds with checkpoints) / (without) - 1.
	Overhead float64
	// Checkpoints is the number committed per job.
	Checkpoints int64
}

// CheckpointOverhead runs job pairs times on its target's actors with its checkpoints and
// without any, alternately, and compares the whole jobs' times (a median per iteration would
// not see checkpoints that cost only on their own iterations).
func CheckpointOverhead(job *didnmf.Job, pairs int) (*CheckpointCost, error) {
	runner, err := didnmf.NewRunner(job.Target)
	if err != nil {
		return nil, err
	}
	defer runner.Close()
	noneSpec := *job.Spec
	noneSpec.CheckpointEvery = 0
	none, err := didnmf.Open(&noneSpec, job.Target)
	if err != nil {
		return nil, err
	}
	defer none.Close()
	out := &CheckpointCost{}
	var ratios []float64
	for r := 0; r < pairs; r++ {
		with, err := runner.Run(context.Background(), job, didnmf.Options{})
		if err != nil {
			return nil, err
		}
		without, err := runner.Run(context.Background(), none, didnmf.Options{})
		if err != nil {
			return nil, err
		}
		ratios = append(ratios, with.Seconds/without.Seconds-1)
		out.Checkpoints = with.Checkpoints
	}
	out.Overhead = Median(ratios)
	return out, nil
}

// ProbeIterations is the length of the allreduce probe's job (about a second on loopback).
const ProbeIterations = 2000

// ProbeInput is the allreduce probe's input for a job of m features, rank k on shards shards:
// synthetic data of the job's features and rank over ProbeSamples samples.
func ProbeInput(m, shards, k int) string {
	return fmt.Sprintf("synthetic:m=%d,n=%d,k=%d,seed=1", m, ProbeSamples(shards, k), k)
}

// ProbeSamples is the probe's number of samples: 64, or 8 a shard, or the rank, when that is
// more.
func ProbeSamples(shards, rank int) int { return max(64, 8*shards, rank) }

// AllreduceProbe is the latency of one allreduce between processes, measured on a tiny job of
// a real job's shape where an iteration is (nearly) all communication: the job's features,
// rank, algorithm, shards and fan-in over ProbeSamples samples.
type AllreduceProbe struct {
	// Sec is the median over pairs of (processes' median seconds per iteration - the
	// driver's) / collectives per iteration.
	Sec                 float64
	Input               string
	Iterations, Pairs   int
	PerIteration        float64 // collectives per iteration
	DriverSec, ActorSec float64 // medians per iteration
	PayloadFloats       float64 // floats a shard sends per collective
}

// WriteText writes the probe's line of bench's text output.
func (p AllreduceProbe) WriteText(w io.Writer) {
	fmt.Fprintf(w, "  allreduce between the processes: %.3g ms (%s, %d iterations, %.3g floats a shard, %.3g collective(s) an iteration: %.3g ms per iteration against the driver's %.3g; median of %d pairs)\n",
		1e3*p.Sec, p.Input, p.Iterations, p.PayloadFloats, p.PerIteration, 1e3*p.ActorSec, 1e3*p.DriverSec, p.Pairs)
}

// ProbeAllreduce times the probe job (opened in this process, of ProbeIterations iterations
// on ProbeInput) with the driver and with submit, alternately, pairs times.
func ProbeAllreduce(probe *didnmf.Job, pairs int, submit func(*jobspec.Spec) (*didnmf.Result, error)) (AllreduceProbe, error) {
	blocks, err := probe.ReadBlocks()
	if err != nil {
		return AllreduceProbe{}, err
	}
	cfg := probe.Config()
	var over []float64
	out := AllreduceProbe{Input: probe.Spec.Inputs[0], Iterations: probe.Spec.Stop.MaxIter, Pairs: pairs}
	var drv, act []float64
	for r := 0; r < pairs; r++ {
		res, err := kernels.Run(context.Background(), blocks, cfg)
		if err != nil {
			return AllreduceProbe{}, err
		}
		ares, err := submit(probe.Spec)
		if err != nil {
			return AllreduceProbe{}, err
		}
		d, a := Median(res.IterSeconds), Median(ares.IterSeconds)
		drv, act = append(drv, d), append(act, a)
		out.PerIteration = max(res.Comm.PerIteration, 1)
		out.PayloadFloats = res.Comm.FloatsPerIteration / out.PerIteration / float64(probe.Spec.Shards)
		over = append(over, (a-d)/out.PerIteration)
	}
	out.Sec, out.DriverSec, out.ActorSec = Median(over), Median(drv), Median(act)
	return out, nil
}
