package didnmf_test

import (
	"context"
	"fmt"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/jobspec"
	"github.com/didnmf/didnmf/kernels"
)

// A job on the in-process driver: DID at rank 3 on 4 shards of a synthetic matrix.
func Example() {
	spec := jobspec.New([]string{"synthetic:m=10,n=5000,k=3,seed=2"}, kernels.DID, 3, 4)
	res, err := didnmf.Run(context.Background(), spec, didnmf.Local(0), didnmf.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d x %d basis, %d x %d coef, converged %v, rel_err2 below 1e-5: %v\n",
		res.M, res.K, res.N, res.K, res.Converged, res.RelErr2() < 1e-5)
	// Output: 10 x 3 basis, 5000 x 3 coef, converged true, rel_err2 below 1e-5: true
}

// The same job on three actor systems in this process, which speak the whole protocol to each
// other over gRPC on loopback: the same bits as the driver.
func ExampleInProcess() {
	spec := jobspec.New([]string{"synthetic:m=10,n=5000,k=3,seed=2"}, kernels.DID, 3, 4)
	local, err := didnmf.Run(context.Background(), spec, didnmf.Local(0), didnmf.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	onActors, err := didnmf.Run(context.Background(), spec, didnmf.InProcess(3, 0), didnmf.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	same := fmt.Sprint(local.B) == fmt.Sprint(onActors.B) && fmt.Sprint(local.C) == fmt.Sprint(onActors.C)
	fmt.Printf("same factors: %v; %.0f reduction per iteration\n", same, onActors.ReductionsPerIteration)
	// Output: same factors: true; 1 reduction per iteration
}

// A spec the data refuses: the error is the user's to fix, and names the field and the value.
func ExampleIsInput() {
	spec := jobspec.New([]string{"synthetic:m=10,n=5000,k=3,seed=2"}, kernels.DID, 11, 4)
	_, err := didnmf.Run(context.Background(), spec, didnmf.Local(0), didnmf.Options{})
	fmt.Println(didnmf.IsInput(err))
	fmt.Println(err)
	// Output:
	// true
	// rank: rank 11 out of range: it must be between 1 and min(M, N) = min(10, 5000) = 10 for synthetic:m=10,n=5000,k=3,seed=2 (5000 samples x 10 features)
}

// A rank sweep: the job at ranks 2 to 5 with two seeds each, two at a time, summarized per
// rank with the rank it suggests (by held-out error, since 10% of the entries are held out).
func ExampleRunner_Sweep() {
	spec := jobspec.New([]string{"synthetic:m=12,n=600,k=3,seed=5"}, kernels.DID, 5, 2)
	spec.TestFraction = 0.1
	runner, err := didnmf.NewRunner(didnmf.Local(0))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer runner.Close()
	job, err := didnmf.Open(spec, didnmf.Local(0)) // at the largest rank: refused early if the data cannot take it
	if err != nil {
		fmt.Println(err)
		return
	}
	defer job.Close()
	res, err := runner.Sweep(context.Background(), job, didnmf.SweepOptions{Ranks: []int{2, 3, 4, 5}, Seeds: 2, FirstSeed: 1, Parallel: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range res.Summary {
		fmt.Printf("K=%d: %d runs, train error below 1e-3: %v\n", s.K, s.Runs, s.Train.Mean < 1e-3)
	}
	// Output:
	// K=2: 2 runs, train error below 1e-3: false
	// K=3: 2 runs, train error below 1e-3: true
	// K=4: 2 runs, train error below 1e-3: true
	// K=5: 2 runs, train error below 1e-3: true
}
