package matio

import (
	"fmt"
	"math"

	"github.com/didnmf/didnmf/kernels"
)

// Transform is a function of the values applied as a source reads them
// (ReadOptions.Transform): what a job fits instead of the input's values.
type Transform string

// The transforms.
const (
	// TransformNone reads the values as they are. The zero value, "", means the same.
	TransformNone Transform = "none"
	// TransformSqrt reads every value's square root (a NaN, a missing value, stays NaN;
	// negative values are refused before it applies). For counts it stabilizes the variance
	// (a Poisson count's square root has variance about 1/4 whatever its mean), so that a
	// least-squares fit weighs every entry alike instead of chasing the largest, noisiest
	// counts; zeros stay zeros, so a sparse input stays sparse. The square roots are float64
	// whatever the reader stored (a count stored as float32 is widened first), so the same
	// values give the same bits from every format and every reader, and storage float32,
	// which would have to round them, cannot take them.
	TransformSqrt Transform = "sqrt"
)

// Transforms are the transforms ParseTransform reads.
var Transforms = []Transform{TransformNone, TransformSqrt}

// ParseTransform reads a transform's name ("" is none).
func ParseTransform(s string) (Transform, error) {
	switch t := Transform(s); t {
	case "", TransformNone:
		return TransformNone, nil
	case TransformSqrt:
		return t, nil
	}
	return "", fmt.Errorf("transform %q: want none or sqrt", s)
}

// On reports whether t changes the values (it is neither "" nor none).
func (t Transform) On() bool { return t != "" && t != TransformNone }

// Apply returns src read through t (src itself for none, and nil for nil): what
// ReadOptions.Transform does to a source it opens.
func (t Transform) Apply(src Source) Source {
	if t != TransformSqrt || src == nil {
		return src
	}
	return sqrtSource{src}
}

// sqrtSource reads its source's blocks with every value replaced by its square root. It
// keeps what the source says of its layout and stored entries.
type sqrtSource struct{ Source }

// Name names the source as read: sqrt(name).
func (s sqrtSource) Name() string { return "sqrt(" + s.Source.Name() + ")" }

// Read reads the block, widened to float64, and takes the square root of its values.
func (s sqrtSource) Read(lo, hi int, layout Layout) (kernels.Block, error) {
	b, err := s.Source.Read(lo, hi, layout)
	if err != nil {
		return nil, err
	}
	b = kernels.Widen(b) // the square roots in float64, whatever the reader stored
	switch b := b.(type) {
	case *kernels.Dense:
		sqrt64(b.Data)
	case *kernels.CSC:
		sqrt64(b.Val)
	default:
		return nil, fmt.Errorf("%s: a %T block cannot be transformed", s.Name(), b)
	}
	return b, nil
}

func (s sqrtSource) naturalLayout() Layout { return NaturalLayout(s.Source) }
func (s sqrtSource) missingSeen() bool     { return MissingSeen(s.Source) }

func sqrt64(v []float64) {
	for i, x := range v {
		v[i] = math.Sqrt(x)
	}
}
