package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/internal/proccluster"
	"github.com/didnmf/didnmf/internal/server"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/pki"
)

// ProcsOptions are the `didnmf serve` processes StartProcs starts.
type ProcsOptions struct {
	// Exe is the didnmf binary ("": this executable).
	Exe string
	// N is the number of processes, Threads each one's worker threads (0: all its cores).
	N, Threads int
	// CPUs, when set, are each process's CPUs as `serve --cpus` takes them ("0,2").
	CPUs []string
}

// Procs are `didnmf serve` processes on loopback, joined by gossip, with a cluster secret of
// their own.
type Procs struct {
	// JoinSec are the times from each joining process's start (after the first) until every
	// process listed it.
	JoinSec   []float64
	kids      []*proc
	secret    []byte
	secretDir string
}

// proc is one `didnmf serve` process, with the temporary data directory it is given.
type proc struct {
	*proccluster.Node
	name string
	dir  string
}

// StartProcs starts o.N `didnmf serve` processes on loopback, one after the other, each
// joining the first, and waits until every process lists each newcomer. The caller closes
// the processes.
func StartProcs(o ProcsOptions) (_ *Procs, err error) {
	if o.Exe == "" {
		if o.Exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	secretDir, err := os.MkdirTemp("", "didnmf-bench-secret-")
	if err != nil {
		return nil, err
	}
	p := &Procs{secret: pki.NewSecret(), secretDir: secretDir}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	secretFile := filepath.Join(secretDir, "cluster.secret")
	if err := pki.WriteSecret(secretFile, p.secret); err != nil {
		return nil, err
	}
	for i := 0; i < o.N; i++ {
		join, cpus := "", ""
		if i > 0 {
			join = p.kids[0].Gossip
		}
		if o.CPUs != nil {
			cpus = o.CPUs[i]
		}
		k, err := startProc(o.Exe, fmt.Sprintf("bench-%d", i+1), join, secretFile, o.Threads, cpus)
		if err != nil {
			return nil, err
		}
		p.kids = append(p.kids, k)
		// Joined: every node, the newcomer included, lists it.
		var last time.Time
		for _, other := range p.kids {
			t, err := other.waitSeen("member joined", k.name, 30*time.Second)
			if err != nil {
				return nil, err
			}
			if t.After(last) {
				last = t
			}
		}
		if i > 0 {
			p.JoinSec = append(p.JoinSec, last.Sub(k.Started).Seconds())
		}
	}
	return p, nil
}

// startProc starts `didnmf serve` from exe and waits until it serves.
func startProc(exe, name, join, secretFile string, threads int, cpus string) (*proc, error) {
	dir, err := os.MkdirTemp("", "didnmf-bench-"+name+"-")
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--bind", "127.0.0.1:0", "--name", name, "--data-dir", dir, "--threads", fmt.Sprint(threads), "--secret-file", secretFile}
	if join != "" {
		args = append(args, "--join", join)
	}
	if cpus != "" {
		args = append(args, "--cpus", cpus)
	}
	n, err := proccluster.Start(proccluster.Options{Exe: exe}, args...)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("didnmf serve %s: %v", name, err)
	}
	return &proc{Node: n, name: name, dir: dir}, nil
}

// waitSeen waits until the process logged a member event ("member joined", "member failed
// (declared dead)") about member, and returns when it did.
func (c *proc) waitSeen(event, member string, limit time.Duration) (time.Time, error) {
	r, err := c.WaitFor(limit, event, "member", member)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %v", c.name, err)
	}
	return r.At, nil
}

// Target is where jobs run on the processes: the cluster, reached through the first.
func (p *Procs) Target() didnmf.Target {
	return didnmf.OnCluster(server.ClientConfig{Cluster: []string{p.kids[0].Gossip}, Secret: p.secret})
}

// Detect kills the last process with SIGKILL and returns the seconds until every other
// declared it dead (0 with fewer than two processes).
func (p *Procs) Detect() (float64, error) {
	n := len(p.kids)
	if n < 2 {
		return 0, nil
	}
	victim := p.kids[n-1]
	killed := time.Now()
	if err := victim.Cmd.Process.Kill(); err != nil {
		return 0, err
	}
	var last time.Time
	for _, o := range p.kids[:n-1] {
		t, err := o.waitSeen("member failed (declared dead)", victim.name, 60*time.Second)
		if err != nil {
			return 0, err
		}
		if t.After(last) {
			last = t
		}
	}
	p.kids = slices.Delete(p.kids, n-1, n)
	<-victim.Exited()
	os.RemoveAll(victim.dir)
	return last.Sub(killed).Seconds(), nil
}

// Close ends the processes with SIGTERM (a graceful leave), all at once, waits for them and
// removes their directories and the secret's.
func (p *Procs) Close() {
	for _, k := range p.kids {
		_ = k.Cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, k := range p.kids {
		<-k.Exited()
		os.RemoveAll(k.dir)
	}
	p.kids = nil
	os.RemoveAll(p.secretDir)
}

// ProcsTiming is what a run on processes measures.
type ProcsTiming struct {
	ActorTiming
	// JoinSec is the median time from a joining process's start until every process lists
	// it; DetectSec the time from kill -9 of one until every other declared it dead (0: not
	// measured).
	JoinSec, DetectSec float64
	Allreduce          AllreduceProbe
}

// TimeProcs times job (opened in this process, its blocks read) on the processes against the
// driver, alternately, pairs times; then the allreduce probe (a job the caller opened in this
// process: see ProbeInput); then, with detect, the time a killed process takes to be declared
// dead.
func (p *Procs) TimeProcs(job *didnmf.Job, blocks []kernels.Block, probe *didnmf.Job, pairs int, detect bool) (*ProcsTiming, error) {
	target := p.Target()
	runner, err := didnmf.NewRunner(target)
	if err != nil {
		return nil, err
	}
	defer runner.Close()
	submit := func(spec *jobspec.Spec) (*didnmf.Result, error) {
		s := *spec
		s.Inputs = AbsInputs(s.Inputs) // the nodes resolve only absolute paths
		cj, err := didnmf.Open(&s, target)
		if err != nil {
			return nil, err
		}
		return runner.Run(context.Background(), cj, didnmf.Options{})
	}
	ab, err := TimePairs(blocks, job.Config(), job.Spec.FanIn, pairs, func() (*didnmf.Result, error) { return submit(job.Spec) })
	if err != nil {
		return nil, err
	}
	out := &ProcsTiming{ActorTiming: *ab, JoinSec: Median(p.JoinSec)}
	if out.Allreduce, err = ProbeAllreduce(probe, pairs, submit); err != nil {
		return nil, fmt.Errorf("allreduce probe: %w", err)
	}
	if detect {
		if out.DetectSec, err = p.Detect(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// AbsInputs returns the inputs with relative file paths made absolute (synthetic inputs stay
// as they are).
func AbsInputs(inputs []string) []string {
	out := slices.Clone(inputs)
	for i, in := range out {
		if !matio.IsSynthetic(in) && !filepath.IsAbs(in) {
			if abs, err := filepath.Abs(in); err == nil {
				out[i] = abs
			}
		}
	}
	return out
}
