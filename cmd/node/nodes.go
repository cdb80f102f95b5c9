package main

import (
	"context"
	"errors"
	"time"

	"github.com/didnmf/didnmf/actors"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

// wireSpec returns the job's spec in wire form, its shards placed on nodes (none: the
// coordinator's node).
func (f *jobFlags) wireSpec(j *job, nodes []string) *messages.JobSpec {
	spec := *j.spec
	spec.Nodes = nodes
	return spec.Wire()
}

// runOnNodes runs the job on an in-process cluster of f.nodes actor systems on loopback: the
// coordinator and client on the first, shards placed round-robin, all traffic between
// systems over gRPC. Progress is called after every iteration. When ctx is cancelled the job is
// cancelled and nothing is returned.
func runOnNodes(ctx context.Context, f *jobFlags, j *job, progress func(kernels.Progress)) (*actors.Result, error) {
	client, spec, stop, err := f.startLocal(j)
	if err != nil {
		return nil, err
	}
	defer stop()
	return runJob(ctx, client, spec, progress, f.warn)
}

// startLocal starts f.nodes actor systems on loopback and a client on the first, and returns
// the job's spec placed on them; stop closes it all.
func (f *jobFlags) startLocal(j *job) (*actors.Client, *messages.JobSpec, func(), error) {
	lc, err := actors.StartLocalCluster(f.nodes, actors.NodeConfig{Threads: j.cfg.Threads})
	if err != nil {
		return nil, nil, nil, err
	}
	client := actors.NewClient(lc.Nodes[0].System(), actors.DefaultTimeouts())
	stop := func() {
		client.Close()
		lc.Close()
	}
	return client, f.wireSpec(j, lc.Addresses()), stop, nil
}

// runJob submits a job through a client and waits for it, relaying progress and warnings.
func runJob(ctx context.Context, client *actors.Client, spec *messages.JobSpec, progress func(kernels.Progress), warn func(string)) (*actors.Result, error) {
	job, err := client.Submit(ctx, "", spec)
	if err != nil {
		return nil, jobErr(err)
	}
	return follow(ctx, job, progress, warn)
}

// follow waits for a submitted job, relaying progress and warnings; when ctx is cancelled it
// cancels the job.
func follow(ctx context.Context, job *actors.Job, progress func(kernels.Progress), warn func(string)) (*actors.Result, error) {
	warnings := job.Warnings()
	for {
		select {
		case w, ok := <-warnings:
			if !ok {
				warnings = nil
			} else if warn != nil {
				warn(w)
			}
		case p, ok := <-job.Progress():
			if !ok {
				res, err := job.Wait(context.Background())
				return res, jobErr(err)
			}
			if progress != nil {
				progress(p)
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
// confirmed before it exits anyway.
const cancelWait = 3 * time.Second

// jobErr maps a refused job to a usage error (exit status 2).
func jobErr(err error) error {
	var je *actors.JobError
	if errors.As(err, &je) && je.Kind == actors.KindInput {
		return usageError{err}
	}
	return err
}
