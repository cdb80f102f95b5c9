// Command actors factorizes a matrix on three actor systems talking over gRPC on loopback,
// through the didnmf Go API: the same job as examples/local on another target, followed as it
// runs, with the messages it took. Cancel it with Ctrl-C.
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

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/kernels"
)

func main() {
	input, rank := "synthetic:m=20,n=200000,k=4,seed=1,noise=0.01", 4
	if len(os.Args) > 1 {
		input = os.Args[1]
	}
	if len(os.Args) > 2 {
		r, err := strconv.Atoi(os.Args[2])
		if err != nil {
			log.Fatalf("rank: %v", err)
		}
		rank = r
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := factorize(ctx, input, rank, 3, func(p didnmf.Progress) {
		if p.Iteration%50 == 0 {
			fmt.Printf("iteration %4d  objective ratio %.3e\n", p.Iteration, p.Ratio)
		}
	})
	if errors.Is(err, context.Canceled) {
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
// When ctx is canceled, the job is canceled on its actors.
func factorize(ctx context.Context, input string, rank, nodes int, progress func(didnmf.Progress)) (*didnmf.Result, error) {
	spec := didnmf.NewSpec([]string{input}, didnmf.DID, rank, 6)
	spec.Init = kernels.InitNNDSVDA
	spec.Stop.Tol, spec.Stop.MaxIter = 1e-6, 500
	return didnmf.Run(ctx, spec, didnmf.InProcess(nodes, 0), didnmf.Options{Progress: progress})
}
