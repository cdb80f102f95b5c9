package didnmf_test

import (
	"context"
	"errors"
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/didnmf/didnmf"
)

// A job in this process, without actors (Local): DID at rank 3 on 4 shards of a synthetic matrix.
func Example() {
	spec := didnmf.NewSpec([]string{"synthetic:m=10,n=5000,k=3,seed=2"}, didnmf.DID, 3, 4)
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
// other over gRPC on loopback: the same bits as Local.
func ExampleInProcess() {
	spec := didnmf.NewSpec([]string{"synthetic:m=10,n=5000,k=3,seed=2"}, didnmf.DID, 3, 4)
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

// Members of a cluster started from this program (on loopback, with a fresh secret), and the
// job run on them as a client: the same bits as Local. On machines, each runs
// `didnmf serve` (or Serve with LANNode) and clients join with the secret.
func ExampleServe() {
	secret := didnmf.NewSecret()
	var members []*didnmf.Member
	defer func() {
		for _, m := range members {
			m.Close()
		}
	}()
	for _, name := range []string{"a", "b"} {
		cfg := didnmf.LocalNode()
		cfg.Name, cfg.Secret, cfg.Node.Threads = name, secret, 1
		if len(members) > 0 {
			cfg.Join = []string{members[0].Gossip()}
		}
		m, err := didnmf.Serve(cfg)
		if err != nil {
			fmt.Println(err)
			return
		}
		members = append(members, m)
	}
	spec := didnmf.NewSpec([]string{"synthetic:m=10,n=5000,k=3,seed=2"}, didnmf.DID, 3, 4)
	onCluster, err := didnmf.Run(context.Background(), spec, didnmf.OnCluster(didnmf.ClusterConfig{Cluster: []string{members[0].Gossip()}, Secret: secret}), didnmf.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	local, err := didnmf.Run(context.Background(), spec, didnmf.Local(0), didnmf.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("same factors: %v\n", fmt.Sprint(local.B, local.C) == fmt.Sprint(onCluster.B, onCluster.C))
	// Output: same factors: true
}

// Following a job's progress, and canceling it: the context ends the job wherever it runs.
func ExampleOptions() {
	spec := didnmf.NewSpec([]string{"synthetic:m=10,n=5000,k=3,seed=2"}, didnmf.DID, 3, 4)
	spec.Stop.Tol = 0 // run until canceled (or max-iter)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var last int
	_, err := didnmf.Run(ctx, spec, didnmf.InProcess(2, 1), didnmf.Options{Progress: func(p didnmf.Progress) {
		last = p.Iteration
		if p.Iteration == 5 {
			cancel()
		}
	}})
	fmt.Println(errors.Is(err, context.Canceled), last >= 5)
	// Output: true true
}

// The factors as gonum matrices: the basis (features x K) and the coefficients (samples x K).
func ExampleResult_Coef() {
	spec := didnmf.NewSpec([]string{"synthetic:m=10,n=5000,k=3,seed=2"}, didnmf.DID, 3, 4)
	res, err := didnmf.Run(context.Background(), spec, didnmf.Local(0), didnmf.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	basis, coef := res.Basis(), res.Coef()
	fb, kb := basis.Dims()
	sc, kc := coef.Dims()
	var approx mat.Dense
	approx.Mul(coef, basis.T()) // samples x features: X ~ coef basis^T
	r, c := approx.Dims()
	fmt.Printf("basis %d x %d, coef %d x %d, coef basis^T %d x %d\n", fb, kb, sc, kc, r, c)
	// Output: basis 10 x 3, coef 5000 x 3, coef basis^T 5000 x 10
}

// A spec the data refuses: the error is the user's to fix, and names the field and the value.
func ExampleIsInput() {
	spec := didnmf.NewSpec([]string{"synthetic:m=10,n=5000,k=3,seed=2"}, didnmf.DID, 11, 4)
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
	spec := didnmf.NewSpec([]string{"synthetic:m=12,n=600,k=3,seed=5"}, didnmf.DID, 5, 2)
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
