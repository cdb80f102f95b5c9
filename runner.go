package didnmf

import (
	"context"
	"errors"
	"time"

	"github.com/didnmf/didnmf/internal/actors"
	"github.com/didnmf/didnmf/internal/server"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/usererr"
)

// Options are a run's callbacks. Both are called from one goroutine, the caller's of Run,
// and must not block for long: the job does not wait for them, but its progress does.
type Options struct {
	// Progress is called after every iteration (nil: none).
	Progress func(Progress)
	// Warn receives news about a running job on actors that does not end it: a node lost
	// and the job rolled back, a checkpoint that failed (nil: dropped).
	Warn func(string)
}

// Runner runs jobs on one target, keeping what the target needs between jobs: the
// in-process nodes and their client, or the client of a running cluster. It is safe for
// concurrent use by several goroutines, each running its own jobs.
type Runner struct {
	target Target
	local  *actors.LocalCluster
	client *actors.Client
	remote *server.Client
}

// NewRunner prepares t: starts its in-process nodes or joins its cluster (where no member
// answers for the client's reach, the error is an *UnreachableError; a malformed address
// gives an *AddressError).
func NewRunner(t Target) (*Runner, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	r := &Runner{target: t}
	switch {
	case t.Cluster != nil:
		c, err := server.Connect(*t.Cluster)
		if err != nil {
			return nil, err
		}
		r.remote = c
	case t.Nodes > 0:
		lc, err := actors.StartLocalCluster(t.Nodes, actors.NodeConfig{Threads: t.Threads})
		if err != nil {
			return nil, err
		}
		r.local, r.client = lc, actors.NewClient(lc.Nodes[0].System(), actors.DefaultTimeouts())
	}
	return r, nil
}

// Parallelism is how many jobs the runner's target runs well at once: 1 on the driver (a job
// takes every core), the number of in-process nodes, or the cluster members this client sees.
func (r *Runner) Parallelism() int {
	switch {
	case r.remote != nil:
		return max(1, len(r.remote.Members.Workers()))
	case r.local != nil:
		return len(r.local.Nodes)
	}
	return 1
}

// Target returns where the runner runs jobs.
func (r *Runner) Target() Target { return r.target }

// Close stops the in-process nodes or leaves the cluster. Jobs still running on a cluster
// are canceled when their lease runs out, detached ones excepted.
func (r *Runner) Close() {
	if r.client != nil {
		r.client.Close()
	}
	if r.local != nil {
		r.local.Close()
	}
	if r.remote != nil {
		r.remote.Close()
	}
}

// Run runs the job, opened for the runner's target, and waits for its result. When ctx is
// canceled, a job on actors is canceled there and Run returns ctx's error and no result; the
// driver returns the factors of the last finished iteration with ctx's error, when one
// finished. Errors that are the user's to fix wrap usererr.ErrUser.
func (r *Runner) Run(ctx context.Context, j *Job, opts Options) (*Result, error) {
	if j.Target.Nodes != r.target.Nodes || (j.Target.Cluster == nil) != (r.target.Cluster == nil) {
		return nil, errors.New("the job was opened for another target than the runner's")
	}
	if !r.target.OnActors() {
		return r.runDriver(ctx, j, opts)
	}
	job, err := r.submit(ctx, j)
	if err != nil {
		return nil, err
	}
	res, err := follow(ctx, job, opts)
	if res == nil {
		return nil, err
	}
	return fromActors(j, res), err
}

// Submit submits a detached job (Spec.Detached, on a cluster) and returns its id without
// waiting: the job runs on without this client and writes its factors and report into
// Spec.OutShared.
func (r *Runner) Submit(ctx context.Context, j *Job) (string, error) {
	if !j.Spec.Detached || r.remote == nil {
		return "", usererr.Field("detached", "only a {detached} job on a cluster is submitted without waiting for it")
	}
	job, err := r.submit(ctx, j)
	if err != nil {
		return "", err
	}
	job.Release()
	return job.ID, nil
}

// submit submits the job to the runner's actors, its shards placed on the in-process nodes
// or by the cluster's coordinator.
func (r *Runner) submit(ctx context.Context, j *Job) (*actors.Job, error) {
	if r.remote != nil {
		return r.remote.Submit(ctx, j.Spec.Wire())
	}
	spec := *j.Spec
	spec.Nodes = r.local.Addresses()
	return r.client.Submit(ctx, "", spec.Wire())
}

// runDriver reads the blocks and runs the job with the in-process driver.
func (r *Runner) runDriver(ctx context.Context, j *Job, opts Options) (*Result, error) {
	start := time.Now()
	blocks, err := j.ReadBlocks()
	if err != nil {
		return nil, err
	}
	read := j.openSeconds + time.Since(start).Seconds()
	offset := 0
	for _, b := range blocks {
		if err := j.Spec.Loss.CheckObserved(b, offset, j.Spec.Options()); err != nil {
			return nil, usererr.At(j.Name(), "%w", err)
		}
		_, n := b.Dims()
		offset += n
	}
	var progress []func(Progress)
	if opts.Progress != nil {
		progress = append(progress, opts.Progress)
	}
	res, err := kernels.Run(ctx, blocks, j.Config(), progress...)
	if res == nil {
		if errors.Is(err, kernels.ErrZeroMatrix) {
			err = usererr.At(j.Name(), "%w", err) // the input it is about
		}
		return nil, err
	}
	out := &Result{Result: *res, Job: j, ReadSeconds: read, Threads: threadsOf(r.target)}
	out.Storage, out.XBytes = kernels.StoredAs(blocks)
	return out, err
}

// follow waits for a submitted job, relaying progress and warnings; when ctx is canceled it
// cancels the job.
func follow(ctx context.Context, job *actors.Job, opts Options) (*actors.Result, error) {
	warnings := job.Warnings()
	for {
		select {
		case w, ok := <-warnings:
			if !ok {
				warnings = nil
			} else if opts.Warn != nil {
				opts.Warn(w)
			}
		case p, ok := <-job.Progress():
			if !ok {
				return job.Wait(context.Background())
			}
			if opts.Progress != nil {
				opts.Progress(p)
			}
		case <-ctx.Done():
			// Ask the cluster to cancel, but never hang on it: a cluster that does not
			// answer cancels the job anyway when this client's lease runs out.
			job.Cancel()
			wait, stop := context.WithTimeout(context.Background(), cancelWait)
			_, _ = job.Wait(wait)
			stop()
			return nil, ctx.Err()
		}
	}
}

// cancelWait is how long an interrupted client waits for its job's cancellation to be
// confirmed before it returns anyway.
const cancelWait = 3 * time.Second

// Run opens spec for t, runs it and closes it: the one call for a job whose caller needs
// nothing between. See Open, NewRunner and Runner.Run.
func Run(ctx context.Context, spec *Spec, t Target, opts Options) (*Result, error) {
	j, err := Open(spec, t)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	r, err := NewRunner(t)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Run(ctx, j, opts)
}
