package didnmf

import (
	"fmt"
	"math"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/usererr"
)

// SweepTransform is what a sweep fits and holds out instead of the input's values
// (SweepOptions.Transform).
type SweepTransform string

// The transforms.
const (
	// TransformNone fits the input as it is: the held-out error is the squared error of its
	// values.
	TransformNone SweepTransform = "none"
	// TransformSqrt fits √X, every entry's square root, and the held-out error is that of
	// the model's square on the input's scale: the squared error of max(BC, 0)² against X
	// over the held-out entries, which the sweep computes from the run's factors and the
	// input (sqrtTestError). The square root stabilizes the variance of counts (a Poisson
	// count's square root has variance about 1/4 whatever its mean), so that the Frobenius
	// fit weighs every entry alike instead of chasing the noisiest, largest counts; zeros
	// stay zeros, so a sparse input stays sparse. On the planted-rank bank's count matrices
	// it found the planted rank where the raw counts' held-out error chose a smaller one, and
	// on Gaussian and uniform noise the same ranks (internal/rankbank, BenchmarkCountCV). The
	// bases a sweep so fitted (its consensus spectra), its train errors and its runs'
	// histories are of √X.
	TransformSqrt SweepTransform = "sqrt"
)

// SweepTransforms are the transforms a sweep knows.
var SweepTransforms = []SweepTransform{TransformNone, TransformSqrt}

// Check tells what is wrong with the transform for a sweep on target t: an unknown name, or
// a transform on a target whose nodes read the input (Runner.Sweep checks it too).
func (tr SweepTransform) Check(t Target) error {
	switch tr {
	case "", TransformNone:
		return nil
	case TransformSqrt:
		if t.OnActors() {
			return usererr.Field("transform", "{transform} %s is applied as this process reads the input, and on %s the nodes read it: "+
				"run the sweep in this process, or transform the input's values beforehand", tr, t)
		}
		return nil
	}
	return usererr.Field("transform", "{transform} %q: want none or sqrt", string(tr))
}

// wrap returns src read through the transform (src itself for none).
func (tr SweepTransform) wrap(src matio.Source) matio.Source {
	if tr != TransformSqrt || src == nil {
		return src
	}
	return sqrtSource{src}
}

// sqrtSource reads its source's blocks with every value replaced by its square root (a NaN,
// a missing value, stays NaN; the source has refused negative values).
type sqrtSource struct{ matio.Source }

// Name names the source as read: sqrt(name).
func (s sqrtSource) Name() string { return "sqrt(" + s.Source.Name() + ")" }

// Read reads the block and takes the square root of its values in place.
func (s sqrtSource) Read(lo, hi int, layout matio.Layout) (kernels.Block, error) {
	b, err := s.Source.Read(lo, hi, layout)
	if err != nil {
		return nil, err
	}
	switch b := b.(type) {
	case *kernels.Dense:
		sqrt64(b.Data)
		sqrt32(b.Data32)
	case *kernels.CSC:
		sqrt64(b.Val)
		sqrt32(b.Val32)
	default:
		return nil, fmt.Errorf("%s: a %T block cannot be transformed", s.Name(), b)
	}
	return b, nil
}

func sqrt64(v []float64) {
	for i, x := range v {
		v[i] = math.Sqrt(x)
	}
}

func sqrt32(v []float32) {
	for i, x := range v {
		v[i] = float32(math.Sqrt(float64(x)))
	}
}

// sqrtTestError is the held-out error of a run fitted to √X on the input's scale: over the
// entries (sample j, feature i) that kernels.HeldOut(testSeed, j, i, frac) holds out and that
// are not missing (NaN), the sum of (x - max(y, 0)²)², y = (BC)_ij, and the sum of x², x read
// from src (the input itself, not its square roots) in blocks of a bounded size.
func sqrtTestError(src matio.Source, res *kernels.Result, testSeed uint64, frac float64) (sse, sqNorm float64, err error) {
	m, n, k := res.M, res.N, res.K
	if len(res.B) != m*k || len(res.C) != k*n || src.Features() != m || src.Samples() != n {
		return 0, 0, fmt.Errorf("%s: a %d x %d input and factors of %d x %d, rank %d", src.Name(), src.Samples(), src.Features(), n, m, k)
	}
	step := max(1, (1<<22)/max(m, 1)) // samples a block: at most 32 MB of float64
	for lo := 0; lo < n; lo += step {
		hi := min(n, lo+step)
		b, err := src.Read(lo, hi, matio.LayoutDense)
		if err != nil {
			return 0, 0, err
		}
		d, ok := b.(*kernels.Dense)
		if !ok {
			return 0, 0, fmt.Errorf("%s: a %T block read as dense", src.Name(), b)
		}
		for j := lo; j < hi; j++ {
			c := res.C[j*k : (j+1)*k]
			for i := range m {
				if !kernels.HeldOut(testSeed, j, i, frac) {
					continue
				}
				x := d.At(i, j-lo)
				if math.IsNaN(x) {
					continue
				}
				var y float64
				for p, cv := range c {
					y += res.B[p*m+i] * cv
				}
				y = max(y, 0)
				e := x - y*y
				sse += e * e
				sqNorm += x * x
			}
		}
	}
	return sse, sqNorm, nil
}
