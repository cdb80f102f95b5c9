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
	// TransformSqrt fits √X, every entry's square root, and the held-out error is the squared
	// error on that scale. It stabilizes the variance of counts (a Poisson count's square
	// root has variance about 1/4 whatever its mean), so that the Frobenius fit weighs every
	// entry alike instead of chasing the noisiest, largest counts. Zeros stay zeros: a
	// sparse input stays sparse. On the planted-rank bank's count matrices it found the
	// planted rank where the raw counts' held-out error chose a smaller one (see
	// internal/rankbank, CountStudy). The bases a sweep so fitted (its consensus spectra) are
	// of √X, not of X.
	TransformSqrt SweepTransform = "sqrt"
)

// SweepTransforms are the transforms a sweep knows.
var SweepTransforms = []SweepTransform{TransformNone, TransformSqrt}

// check tells what is wrong with the transform for a sweep on target t.
func (tr SweepTransform) check(t Target) error {
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
