// Command local factorizes a matrix in this process through the didnmf Go API: describe the
// job, run it on the in-process driver, and print what a caller usually wants to know.
//
//	go run ./examples/local [input-spec-or-path] [rank]
package main

import (
	"context"
	"fmt"
	"log"
	"os"
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
	res, err := factorize(input, rank, 4, func(p didnmf.Progress) {
		if p.Iteration%50 == 0 {
			fmt.Printf("iteration %4d  objective ratio %.3e\n", p.Iteration, p.Ratio)
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d iterations, %s, rel_err2 %.4g, %.1f collectives per iteration, %.3g s\n",
		input, res.Iterations, res.StopReason, res.RelErr2(), res.Comm.PerIteration, res.Seconds)
	// res.B is the M x K basis (column-major), res.C the K x N coefficients (column-major).
	fmt.Printf("basis column 0: %.3f\n", res.B[:res.M])
}

// factorize runs DID on the input split into shards, in this process (each shard reads only
// its own samples).
func factorize(input string, rank, shards int, progress func(didnmf.Progress)) (*didnmf.Result, error) {
	spec := didnmf.NewSpec([]string{input}, didnmf.DID, rank, shards)
	spec.Init = kernels.InitNNDSVDA
	spec.Stop.Tol, spec.Stop.MaxIter = 1e-6, 500
	return didnmf.Run(context.Background(), spec, didnmf.Local(0), didnmf.Options{Progress: progress})
}
