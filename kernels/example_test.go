package kernels_test

import (
	"context"
	"fmt"

	"github.com/didnmf/didnmf/kernels"
)

// countsMatrix is a small matrix of counts (exact in float32), 6 features x 200 samples.
func countsMatrix() *kernels.Dense {
	x := kernels.NewDense(6, 200)
	for i := range x.Data {
		x.Data[i] = float64((i*37)%11 + (i/6)%3)
	}
	return x
}

// Every kernel path computes the same bits: choosing one only changes the speed.
func ExampleSetKernelPath() {
	x := countsMatrix()
	cfg := kernels.Config{Algo: kernels.DID, K: 3, Seed: 1, Init: kernels.InitSpec{Method: kernels.InitRandom},
		Stop: kernels.StopRule{MaxIter: 20}}
	var first []float64
	same := true
	for _, p := range kernels.AvailableKernelPaths() {
		if err := kernels.SetKernelPath(p); err != nil {
			panic(err)
		}
		res, err := kernels.Run(context.Background(), []kernels.Block{x}, cfg)
		if err != nil {
			panic(err)
		}
		if first == nil {
			first = res.C
		}
		for i := range first {
			same = same && first[i] == res.C[i]
		}
	}
	kernels.SetKernelPath(kernels.KernelAuto)
	fmt.Println("same factors on every path:", same)
	// Output: same factors on every path: true
}

// Data whose values are all exactly float32 (counts, pixels) can be stored in half the memory;
// the arithmetic stays float64, so the factors are the same bits.
func ExampleNarrow() {
	x := countsMatrix()
	n, err := kernels.Narrow(x)
	if err != nil {
		panic(err)
	}
	fmt.Println(kernels.ValueBytes(x), "->", kernels.ValueBytes(n), "bytes a value")
	x.Data[7] = 0.1 // not a float32
	_, err = kernels.Narrow(x)
	fmt.Println(err)
	// Output:
	// 8 -> 4 bytes a value
	// sample 1, feature 1: value 0.1 is not exactly a float32 (float32 would store 0.10000000149011612); use --storage float64 or auto
}
