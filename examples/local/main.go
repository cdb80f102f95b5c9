// Command local factorizes a matrix in this process through the didnmf Go API: read an input,
// split it into shards, run DID, and print what a caller usually wants to know.
//
//	go run ./examples/local [input-spec-or-path] [rank]
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strconv"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
)

func main() {
	spec, rank := "synthetic:m=20,n=200000,k=4,seed=1,noise=0.01", 4
	if len(os.Args) > 1 {
		spec = os.Args[1]
	}
	if len(os.Args) > 2 {
		r, err := strconv.Atoi(os.Args[2])
		if err != nil {
			log.Fatalf("rank: %v", err)
		}
		rank = r
	}
	res, err := factorize(spec, rank, 4, func(p kernels.Progress) {
		if p.Iteration%50 == 0 {
			fmt.Printf("iteration %4d  objective ratio %.3e\n", p.Iteration, p.Ratio)
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d iterations, %s, rel_err2 %.4g, %.1f collectives per iteration, %.3g s\n",
		spec, res.Iterations, res.StopReason, res.RelErr2(), res.Comm.PerIteration, res.Seconds)
	// res.B is the M x K basis (column-major), res.C the K x N coefficients (column-major).
	fmt.Printf("basis column 0: %.3f\n", res.B[:res.M])
}

// factorize reads the input in shards (each shard reads only its own samples) and runs DID.
func factorize(spec string, rank, shards int, progress func(kernels.Progress)) (*kernels.Result, error) {
	src, err := matio.Open(spec)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	ranges := kernels.ColumnRanges(src.Samples(), shards)
	blocks := make([]kernels.Block, shards)
	for s := range blocks {
		if blocks[s], err = src.Read(ranges[s], ranges[s+1], matio.LayoutAuto); err != nil {
			return nil, err
		}
	}
	cfg := kernels.Config{
		Algo: kernels.DID, K: rank, Seed: 1,
		Init: kernels.InitSpec{Method: kernels.InitNNDSVDA},
		Stop: kernels.StopRule{Tol: 1e-6, MaxIter: 500},
	}
	return kernels.Run(context.Background(), blocks, cfg, progress)
}
