package didnmf

import "github.com/didnmf/didnmf/matio"

// SweepTransform is what a sweep fits and holds out instead of the input's values
// (SweepOptions.Transform): a matio.Transform, which a job takes as Spec.Transform.
type SweepTransform = matio.Transform

// The transforms.
const (
	// TransformNone fits the input as it is: the held-out error is the squared error of its
	// values.
	TransformNone = matio.TransformNone
	// TransformSqrt fits √X, every entry's square root, and the held-out error is that of
	// the model's square on the input's scale: the squared error of max(BC, 0)² against the
	// square roots' squares (the input's values to within a rounding) over the held-out
	// entries, which the shards compute where the data are (kernels.Options.TestOfSquares),
	// in this process or on the nodes of a cluster. The square root stabilizes the variance
	// of counts (a Poisson count's square root has variance about 1/4 whatever its mean), so
	// that the Frobenius fit weighs every entry alike instead of chasing the noisiest,
	// largest counts; zeros stay zeros, so a sparse input stays sparse. On the planted-rank
	// bank's count matrices it found the planted rank where the raw counts' held-out error
	// chose a smaller one, and on Gaussian and uniform noise the same ranks
	// (internal/rankbank, BenchmarkCountCV). The bases a sweep so fitted (its consensus
	// spectra), its train errors and its runs' histories are of √X.
	TransformSqrt = matio.TransformSqrt
)

// SweepTransforms are the transforms a sweep knows.
var SweepTransforms = matio.Transforms
