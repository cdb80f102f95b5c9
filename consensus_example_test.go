package didnmf_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/didnmf/didnmf"
)

// cNMF's consensus of a sweep's runs at one rank: the sweep is saved (its spectra_K.npy are
// every run's basis), the spectra of K=3 are read back, filtered by cNMF's local density,
// clustered and combined by medians, and the usages of the input are refit against the
// consensus programs by the transform job.
func ExampleRunner_Consensus() {
	spec := didnmf.NewSpec([]string{"synthetic:m=12,n=600,k=3,seed=5"}, didnmf.DID, 3, 2)
	runner, err := didnmf.NewRunner(didnmf.Local(0))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer runner.Close()
	job, err := didnmf.Open(spec, didnmf.Local(0))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer job.Close()
	ctx := context.Background()
	res, err := runner.Sweep(ctx, job, didnmf.SweepOptions{Ranks: []int{2, 3}, Seeds: 10, FirstSeed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, err := os.MkdirTemp("", "sweep")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	if err := res.Save(dir); err != nil {
		fmt.Println(err)
		return
	}

	spectra, err := didnmf.ReadSpectra(dir, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := spectra.Consensus(didnmf.ConsensusOptions{}) // cNMF's defaults: threshold 0.5, 30% of the runs
	if err != nil {
		fmt.Println(err)
		return
	}
	rep := c.Report()
	fmt.Printf("K=%d: %d spectra of %d runs, %d kept + %d dropped, local density over %d neighbours\n",
		rep.K, rep.Components, rep.Runs, rep.Kept, rep.FilteredCount, rep.Neighbors)
	usages, err := runner.Consensus(ctx, job, c, filepath.Join(dir, "consensus_basis.npy"), didnmf.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	sums := true
	for p := 0; p < usages.K; p++ {
		var s float64
		for _, v := range usages.B[p*usages.M : (p+1)*usages.M] {
			s += v
		}
		sums = sums && math.Abs(s-1) < 1e-12
	}
	fmt.Printf("usages of %d samples for %d programs of %d features, each summing to 1: %v\n", usages.N, usages.K, usages.M, sums)
	// Output:
	// K=3: 30 spectra of 10 runs, 30 kept + 0 dropped, local density over 3 neighbours
	// usages of 600 samples for 3 programs of 12 features, each summing to 1: true
}
