// Command actors factorizes a matrix on three actor systems talking over gRPC on loopback,
// through the didnmf actors API: start the nodes, submit a job through a client, follow its
// progress, and read B and C from the result. Cancel it with Ctrl-C.
//
//	go run ./examples/actors [input-spec-or-path] [rank]
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"

	"github.com/didnmf/didnmf/actors"
	"github.com/didnmf/didnmf/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
)

func main() {
	input, rank := "synthetic:m=20,n=200000,k=4,seed=1,noise=0.01", int64(4)
	if len(os.Args) > 1 {
		input = os.Args[1]
	}
	if len(os.Args) > 2 {
		r, err := strconv.ParseInt(os.Args[2], 10, 64)
		if err != nil {
			log.Fatalf("rank: %v", err)
		}
		rank = r
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := factorize(ctx, input, rank, 3, func(p kernels.Progress) {
		if p.Iteration%50 == 0 {
			fmt.Printf("iteration %4d  objective ratio %.3e\n", p.Iteration, p.Ratio)
		}
	})
	if errors.Is(err, actors.ErrCanceled) || errors.Is(err, context.Canceled) {
		log.Fatal("cancelled")
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d iterations, %s, rel_err2 %.4g; per iteration %.1f reductions, %.0f messages, %.0f bytes\n",
		input, res.Iterations, res.StopReason, res.RelErr2(), res.ReductionsPerIteration, res.MessagesPerIteration, res.BytesPerIteration)
	// res.B is the M x K basis (column-major), res.C the K x N coefficients (column-major).
	fmt.Printf("basis column 0: %.3f\n", res.B[:res.M])
}

// factorize runs DID with 6 shards on an in-process cluster of the given number of nodes.
func factorize(ctx context.Context, input string, rank int64, nodes int, progress func(kernels.Progress)) (*actors.Result, error) {
	cluster, err := actors.StartLocalCluster(nodes, actors.NodeConfig{})
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	client := actors.NewClient(cluster.Nodes[0].System(), actors.DefaultTimeouts())
	defer client.Close()
	spec := &messages.JobSpec{
		Inputs: []string{input}, Algorithm: "did", Rank: rank, Shards: 6, Seed: 1, Init: "nndsvda",
		Stop:  jobspec.StopRuleOf(kernels.StopRule{Tol: 1e-6, MaxIter: 500}),
		Nodes: cluster.Addresses(),
	}
	job, err := client.Submit(ctx, "", spec)
	if err != nil {
		return nil, err
	}
	for {
		select {
		case p, ok := <-job.Progress():
			if !ok {
				return job.Wait(ctx)
			}
			if progress != nil {
				progress(p)
			}
		case <-ctx.Done():
			job.Cancel()
			return job.Wait(context.Background())
		}
	}
}
