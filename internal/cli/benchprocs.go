package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/internal/proccluster"
	"github.com/didnmf/didnmf/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/pki"
	"github.com/didnmf/didnmf/server"
)

// child is a `didnmf serve` process started by bench --procs, with the temporary data directory
// it is given.
type child struct {
	*proccluster.Node
	name string
	dir  string
}

// startChild starts `didnmf serve` from this executable and waits until it serves.
func startChild(name, join, secretFile string, threads int, cpus []int) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "didnmf-bench-"+name+"-")
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--bind", "127.0.0.1:0", "--name", name, "--data-dir", dir, "--threads", fmt.Sprint(threads), "--secret-file", secretFile}
	if join != "" {
		args = append(args, "--join", join)
	}
	if len(cpus) > 0 {
		args = append(args, "--cpus", cpuListString(cpus))
	}
	n, err := proccluster.Start(proccluster.Options{Exe: exe}, args...)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("didnmf serve %s: %v", name, err)
	}
	return &child{Node: n, name: name, dir: dir}, nil
}

// waitSeen waits until the child logged a member event ("member joined", "member failed
// (declared dead)") about member, and returns when it did.
func (c *child) waitSeen(event, member string, limit time.Duration) (time.Time, error) {
	r, err := c.WaitFor(limit, event, "member", member)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %v", c.name, err)
	}
	return r.At, nil
}

// stop ends the child with SIGTERM (a graceful leave), waits for it and removes its directory.
func (c *child) stop() {
	_ = c.Cmd.Process.Signal(syscall.SIGTERM)
	<-c.Exited()
	os.RemoveAll(c.dir)
}

// procsBench is what bench --procs measures.
type procsBench struct {
	actorBench
	joinSec, detectSec float64
	allreduce          allreduceProbe
}

// allreduceProbe is the latency of one allreduce between the processes, measured on a tiny job
// of the same shape where an iteration is (nearly) all communication: the job's features,
// rank, algorithm, shards and fan-in over probeSamples samples. sec is the median over pairs of
// (processes' median seconds per iteration - the driver's) / collectives per iteration.
type allreduceProbe struct {
	sec                 float64
	input               string
	iterations, pairs   int
	perIteration        float64 // collectives per iteration
	driverSec, actorSec float64 // medians per iteration
	payloadFloats       float64 // floats a shard sends per collective
}

// print writes the probe's line of bench's text output.
func (p allreduceProbe) print(w io.Writer) {
	fmt.Fprintf(w, "  allreduce between the processes: %.3g ms (%s, %d iterations, %.3g floats a shard, %.3g collective(s) an iteration: %.3g ms per iteration against the driver's %.3g; median of %d pairs)\n",
		1e3*p.sec, p.input, p.iterations, p.payloadFloats, p.perIteration, 1e3*p.actorSec, 1e3*p.driverSec, p.pairs)
}

// probeIterations is the length of the allreduce probe's job (about a second on loopback).
const probeIterations = 2000

// probeSamples is the probe's number of samples: 64, or 8 a shard when that is more.
func probeSamples(shards, rank int) int { return max(64, 8*shards, rank) }

// probeAllreduce times the allreduce probe on the processes c submits to, against the driver,
// alternately, pairs times.
func probeAllreduce(jf *jobFlags, j *job, pairs int, submit func(*jobspec.Spec) (*didnmf.Result, error)) (allreduceProbe, error) {
	pf := *jf
	pf.inputs = stringList{fmt.Sprintf("synthetic:m=%d,n=%d,k=%d,seed=1", j.m, probeSamples(j.shards, j.cfg.K), j.cfg.K)}
	pf.init, pf.initBasis, pf.initCoef = string(kernels.InitRandom), "", ""
	pf.tol, pf.maxIter, pf.timeLimit, pf.stallTol = 0, probeIterations, 0, 0
	pj, err := pf.open()
	if err != nil {
		return allreduceProbe{}, err
	}
	defer pj.src.Close()
	blocks, err := pj.readBlocks()
	if err != nil {
		return allreduceProbe{}, err
	}
	spec := pj.spec
	var over []float64
	out := allreduceProbe{input: pf.inputs[0], iterations: probeIterations, pairs: pairs}
	var drv, act []float64
	for r := 0; r < pairs; r++ {
		res, err := kernels.Run(context.Background(), blocks, pj.cfg)
		if err != nil {
			return allreduceProbe{}, err
		}
		ares, err := submit(spec)
		if err != nil {
			return allreduceProbe{}, err
		}
		d, a := median(res.IterSeconds), median(ares.IterSeconds)
		drv, act = append(drv, d), append(act, a)
		out.perIteration = max(res.Comm.PerIteration, 1)
		out.payloadFloats = res.Comm.FloatsPerIteration / out.perIteration / float64(pj.shards)
		over = append(over, (a-d)/out.perIteration)
	}
	out.sec, out.driverSec, out.actorSec = median(over), median(drv), median(act)
	return out, nil
}

// benchProcs starts n `didnmf serve` processes on loopback, measures how long each joining node
// takes to be seen by all, times the job on them against the driver (alternately, pairs
// times), and with detect kills one with SIGKILL and measures how long the others take to
// declare it dead.
func benchProcs(jf *jobFlags, j *job, blocks []kernels.Block, n, threads int, cpus [][]int, pairs int, detect bool) (*procsBench, error) {
	var kids []*child
	defer func() {
		for _, k := range kids {
			_ = k.Cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, k := range kids {
			k.stop()
		}
	}()
	// The bench's cluster has a secret of its own.
	secretDir, err := os.MkdirTemp("", "didnmf-bench-secret-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(secretDir)
	secret, secretFile := pki.NewSecret(), filepath.Join(secretDir, "cluster.secret")
	if err := pki.WriteSecret(secretFile, secret); err != nil {
		return nil, err
	}
	var joins []float64
	for i := 0; i < n; i++ {
		join := ""
		if i > 0 {
			join = kids[0].Gossip
		}
		var own []int
		if cpus != nil {
			own = cpus[i]
		}
		k, err := startChild(fmt.Sprintf("bench-%d", i+1), join, secretFile, threads, own)
		if err != nil {
			return nil, err
		}
		kids = append(kids, k)
		// Joined: every node, the newcomer included, lists it.
		var last time.Time
		for _, o := range kids {
			t, err := o.waitSeen("member joined", k.name, 30*time.Second)
			if err != nil {
				return nil, err
			}
			if t.After(last) {
				last = t
			}
		}
		if i > 0 {
			joins = append(joins, last.Sub(k.Started).Seconds())
		}
	}
	target := didnmf.OnCluster(server.ClientConfig{Cluster: []string{kids[0].Gossip}, Secret: secret})
	runner, err := didnmf.NewRunner(target)
	if err != nil {
		return nil, err
	}
	defer runner.Close()
	submit := func(spec *jobspec.Spec) (*didnmf.Result, error) {
		s := *spec
		s.Inputs = absInputs(s.Inputs) // the nodes resolve only absolute paths
		cj, err := didnmf.Open(&s, target)
		if err != nil {
			return nil, err
		}
		return runner.Run(context.Background(), cj, didnmf.Options{})
	}
	spec := j.spec
	ab, err := timePairs(jf, j, blocks, pairs, func() (*didnmf.Result, error) { return submit(spec) })
	if err != nil {
		return nil, err
	}
	out := &procsBench{actorBench: *ab}
	out.joinSec = median(joins)
	if out.allreduce, err = probeAllreduce(jf, j, pairs, submit); err != nil {
		return nil, fmt.Errorf("allreduce probe: %w", err)
	}
	if detect && n > 1 {
		victim := kids[n-1]
		killed := time.Now()
		if err := victim.Cmd.Process.Kill(); err != nil {
			return nil, err
		}
		var last time.Time
		for _, o := range kids[:n-1] {
			t, err := o.waitSeen("member failed (declared dead)", victim.name, 60*time.Second)
			if err != nil {
				return nil, err
			}
			if t.After(last) {
				last = t
			}
		}
		out.detectSec = last.Sub(killed).Seconds()
		kids = slices.Delete(kids, n-1, n)
		<-victim.Exited()
		os.RemoveAll(victim.dir)
	}
	return out, nil
}

// absInputs returns the inputs with relative file paths made absolute.
func absInputs(inputs []string) []string {
	out := slices.Clone(inputs)
	for i, in := range out {
		if !strings.HasPrefix(in, "synthetic:") && !filepath.IsAbs(in) {
			if abs, err := filepath.Abs(in); err == nil {
				out[i] = abs
			}
		}
	}
	return out
}
