package didnmf_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/usererr"
)

// TestSweepTransformSqrt: a sweep with the transform sqrt fits √X: its run is, bit for bit,
// the run of the same job on a file of √X, its test error is that fit's on X's scale (the
// model's square against the square roots' squares), and its result and report say sqrt. On
// actor systems, whose nodes read the input themselves, the nodes apply the transform and
// compute the test error where the data are: the same bits as in this process.
func TestSweepTransformSqrt(t *testing.T) {
	r, j := sweepJob(t, 3)
	defer r.Close()
	defer j.Close()
	res, err := r.Sweep(context.Background(), j, didnmf.SweepOptions{Ranks: []int{3}, Seeds: 1, FirstSeed: 2, Transform: didnmf.TransformSqrt})
	if err != nil {
		t.Fatal(err)
	}
	if res.Transform != didnmf.TransformSqrt || res.Report().Transform != "sqrt" {
		t.Errorf("the result says %q, its report %q", res.Transform, res.Report().Transform)
	}
	// The same job on a file of √X.
	blk, err := j.Source.Read(0, j.Samples, matio.LayoutDense)
	if err != nil {
		t.Fatal(err)
	}
	raw := blk.(*kernels.Dense).Data // features x samples column-major: samples x features row-major
	x := make([]float64, len(raw))
	for i, v := range raw {
		x[i] = math.Sqrt(v)
	}
	path := filepath.Join(t.TempDir(), "sqrt.npy")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := matio.WriteNPY(f, j.Samples, j.Features, x); err != nil {
		t.Fatal(err)
	}
	f.Close()
	spec := *j.Spec
	spec.Inputs, spec.Rank, spec.Seed = []string{path}, 3, 2
	js, err := didnmf.Open(&spec, didnmf.Local(1))
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	want, err := r.Run(context.Background(), js, didnmf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := res.Runs[0].Result
	if got.Residual != want.Residual || got.Iterations != want.Iterations || got.TestCount != want.TestCount {
		t.Errorf("swept with sqrt: residual %v, %d iterations; on a file of sqrt(X): %v, %d", got.Residual, got.Iterations, want.Residual, want.Iterations)
	}
	// The test error is on X's scale: the held-out squared error of max(BC, 0)² against
	// (√x)², which is x to within a rounding. The shards add their own sums, so the order
	// differs from this loop's: equal to round-off.
	m, k := j.Features, 3
	var sse, sq float64
	for jj := range j.Samples {
		for i := range m {
			if !kernels.HeldOut(j.Spec.TestSeed, jj, i, j.Spec.TestFraction) {
				continue
			}
			var y float64
			for p := range k {
				y += want.B[p*m+i] * want.C[jj*k+p]
			}
			y = max(y, 0)
			v := x[jj*m+i] * x[jj*m+i]
			e := v - y*y
			sse += e * e
			sq += v * v
		}
	}
	if math.Abs(got.TestSSE-sse) > 1e-12*sse || math.Abs(got.TestSqNorm-sq) > 1e-12*sq || sse == 0 || sse == want.TestSSE {
		t.Errorf("swept with sqrt: test SSE %v of %v; want %v of %v, on X's scale (sqrt(X)'s: %v)", got.TestSSE, got.TestSqNorm, sse, sq, want.TestSSE)
	}
	for i := range want.B {
		if got.B[i] != want.B[i] {
			t.Fatalf("basis entry %d: %v against %v", i, got.B[i], want.B[i])
		}
	}
	plain, err := r.Sweep(context.Background(), j, didnmf.SweepOptions{Ranks: []int{3}, Seeds: 1, FirstSeed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Transform != didnmf.TransformNone || plain.Runs[0].Result.TestSSE == got.TestSSE {
		t.Errorf("without a transform: %q, test SSE %v (sqrt's %v)", plain.Transform, plain.Runs[0].Result.TestSSE, got.TestSSE)
	}

	// On actor systems in this process, whose nodes read the input: the same bits.
	nodes := didnmf.Target{Nodes: 2}
	rn, err := didnmf.NewRunner(nodes)
	if err != nil {
		t.Fatal(err)
	}
	defer rn.Close()
	spec2 := *j.Spec
	jn, err := didnmf.Open(&spec2, nodes)
	if err != nil {
		t.Fatal(err)
	}
	defer jn.Close()
	onNodes, err := rn.Sweep(context.Background(), jn, didnmf.SweepOptions{Ranks: []int{3}, Seeds: 1, FirstSeed: 2, Transform: didnmf.TransformSqrt})
	if err != nil {
		t.Fatal(err)
	}
	gn := onNodes.Runs[0].Result
	if onNodes.Transform != didnmf.TransformSqrt || gn.TestSSE != got.TestSSE || gn.TestSqNorm != got.TestSqNorm || gn.TestCount != got.TestCount ||
		gn.Residual != got.Residual || gn.Iterations != got.Iterations {
		t.Errorf("on 2 nodes: %q, test SSE %v of %v (%d entries), residual %v, %d iterations; in this process %v of %v (%d), %v, %d",
			onNodes.Transform, gn.TestSSE, gn.TestSqNorm, gn.TestCount, gn.Residual, gn.Iterations, got.TestSSE, got.TestSqNorm, got.TestCount, got.Residual, got.Iterations)
	}
	for i := range got.B {
		if gn.B[i] != got.B[i] {
			t.Fatalf("on 2 nodes, basis entry %d: %v against %v in this process", i, gn.B[i], got.B[i])
		}
	}
}

// TestConsensusOfASqrtSweep: the spectra of a sweep that fitted sqrt(X) say so, and the
// consensus refits the usages on sqrt(X) too: to the bit, the transform job for the consensus
// basis on the input read through sqrt. An unknown transform in sweep.json is the user's
// error.
func TestConsensusOfASqrtSweep(t *testing.T) {
	spec := jobspec.New([]string{"synthetic:m=12,n=300,k=3,seed=5"}, kernels.DID, 3, 2)
	spec.Stop.MaxIter = 150
	r, err := didnmf.NewRunner(didnmf.Local(1))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	j, err := didnmf.Open(spec, didnmf.Local(1))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	res, err := r.Sweep(context.Background(), j, didnmf.SweepOptions{Ranks: []int{3}, Seeds: 6, FirstSeed: 1, Transform: didnmf.TransformSqrt})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := res.Save(dir); err != nil {
		t.Fatal(err)
	}
	sp, err := didnmf.ReadSpectra(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	if sp.Transform != didnmf.TransformSqrt {
		t.Fatalf("the spectra of a sqrt sweep say transform %q", sp.Transform)
	}
	c, err := sp.Consensus(didnmf.ConsensusOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	basisFile := filepath.Join(t.TempDir(), "basis.npy")
	got, err := r.Consensus(context.Background(), j, c, basisFile, didnmf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := *spec
	didnmf.TransformSpec(basisFile, 3)(&want)
	want.Transform = didnmf.TransformSqrt
	tj, err := didnmf.Open(&want, didnmf.Local(1))
	if err != nil {
		t.Fatal(err)
	}
	defer tj.Close()
	wr, err := r.Run(context.Background(), tj, didnmf.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range wr.C {
		if got.C[i] != wr.C[i] {
			t.Fatalf("usage %d: %v, the transform on sqrt(X) gives %v", i, got.C[i], wr.C[i])
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "sweep.json"), []byte(`{"transform":"log","ranks_summary":[{"k":3}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := didnmf.ReadSpectra(dir, 3); !usererr.Is(err) || !strings.Contains(err.Error(), `transform "log"`) {
		t.Errorf("ReadSpectra of a sweep with transform log: %v", err)
	}
}
