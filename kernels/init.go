package kernels

import (
	"fmt"
	"math"
)

// InitMethod names a way to choose the initial factors B0 and C0.
type InitMethod string

// The initialisations. All are deterministic functions of (data, seed); random values are keyed
// by global column index, so they do not depend on the shard count.
const (
	// InitRandom: entries |N(0,1)| * sqrt(mean(X)/K), as scikit-learn's "random".
	InitRandom InitMethod = "random"
	// InitNNDSVD: nonnegative double SVD (Boutsidis & Gallopoulos 2008), zeros kept.
	InitNNDSVD InitMethod = "nndsvd"
	// InitNNDSVDA: NNDSVD with zeros filled by mean(X).
	InitNNDSVDA InitMethod = "nndsvda"
	// InitKMeans: B0 = k-means centroids of the samples, C0 = each sample's least-squares
	// weight on its centroid (the paper's initialisation for real data).
	InitKMeans InitMethod = "kmeans"
	// InitCustom: given B0 and C0 (warm start).
	InitCustom InitMethod = "custom"
)

// ParseInitMethod parses an initialisation name.
func ParseInitMethod(s string) (InitMethod, error) {
	switch m := InitMethod(s); m {
	case InitRandom, InitNNDSVD, InitNNDSVDA, InitKMeans, InitCustom:
		return m, nil
	case "":
		return InitRandom, nil
	}
	return "", fmt.Errorf("unknown init %q (known: random, nndsvd, nndsvda, kmeans, custom)", s)
}

// InitSpec chooses the initial factors of a shard.
type InitSpec struct {
	Method InitMethod
	// B0 (M x K, column-major) and C0 (this shard's K x n_i, column-major) for InitCustom.
	B0, C0 []float64
	// KMeansIters caps Lloyd's iterations for InitKMeans (default 20).
	KMeansIters int
}

func (s *InitSpec) validate(m, n, k int) error {
	if _, err := ParseInitMethod(string(s.Method)); err != nil {
		return err
	}
	if s.Method != InitCustom {
		return nil
	}
	if len(s.B0) != m*k {
		return fmt.Errorf("initial basis has %d values, want M x K = %d x %d", len(s.B0), m, k)
	}
	if len(s.C0) != k*n {
		return fmt.Errorf("initial coefficients of this shard have %d values, want K x n = %d x %d", len(s.C0), k, n)
	}
	for _, f := range []struct {
		name string
		v    []float64
	}{{"basis", s.B0}, {"coefficients", s.C0}} {
		for i, v := range f.v {
			if !(v >= 0) || math.IsInf(v, 1) {
				return fmt.Errorf("initial %s: entry %d is %v (must be finite and >= 0)", f.name, i, v)
			}
		}
	}
	return nil
}

// initialize returns this shard's B0 (M x K) and C0 (K x n_i), running whatever collectives the
// method needs (labels "init.*", iteration 0).
func (e *shardEnv) initialize() (b, c []float64) {
	switch e.spec.Init.Method {
	case InitCustom:
		return append([]float64(nil), e.spec.Init.B0...), append([]float64(nil), e.spec.Init.C0...)
	case InitNNDSVD, InitNNDSVDA:
		return e.initNNDSVD(e.spec.Init.Method == InitNNDSVDA)
	case InitKMeans:
		return e.initKMeans()
	default:
		return e.initRandom()
	}
}

// globalMean returns mean(X) over all shards (one allreduce).
// A masked shard with unobserved entries uses the mean of the observed entries, from the
// counts of its mask (no collective).
func (e *shardEnv) globalMean() float64 {
	if e.masked() {
		t := e.m.mask.totals
		return t.ObservedSum / float64(t.Observed)
	}
	s := e.allReduce("init.mean", 0, []float64{e.spec.X.Sum(), float64(e.rows) * float64(e.cols)})
	return s[0] / s[1]
}

// initRandom draws B0 and C0 as scikit-learn's "random" init does: |N(0,1)| * sqrt(mean/K).
// B0 comes from (seed, DomainInitB, 0); column j of C0 from (seed, DomainInitC, j).
func (e *shardEnv) initRandom() (b, c []float64) {
	m, n, k := e.rows, e.cols, e.k
	scale := math.Sqrt(e.globalMean() / float64(k))
	b = make([]float64, m*k)
	rb := NewRNG(e.spec.Seed, DomainInitB, 0)
	span := e.flag.span(normWork, 1)
	for i0 := 0; i0 < len(b); i0 += span {
		e.flag.poll()
		for i, i1 := i0, min(i0+span, len(b)); i < i1; i++ {
			b[i] = scale * math.Abs(rb.Norm())
		}
	}
	// C0's columns are drawn on the pool's workers: each column's stream is its own, so the
	// bits do not depend on who draws it.
	c = makeFloats(k * n)
	span = e.flag.span(normWork*k, 1)
	lanes := ColumnRanges(n, max(1, min(4*e.spec.Pool.Workers(), n/span)))
	e.spec.Pool.Run(len(lanes)-1, func(l int) {
		for j0 := lanes[l]; j0 < lanes[l+1]; j0 += span {
			if e.flag.stopped() {
				return
			}
			drawInitC(c, e.spec.Seed, e.spec.ColOffset, j0, min(j0+span, lanes[l+1]), k, scale)
		}
	})
	e.flag.poll()
	return b, c
}

// drawInitC writes columns [j0, j1) of the random initial C (k values per column, column j at
// c[j*k:]): scale·|Norm()| of the stream (seed, DomainInitC, colOffset+j), k draws in order.
// Eight columns at a time go through normDraw8 when the CPU has it (the same bits, drawn eight
// streams at once), the rest through RNG.Norm.
func drawInitC(c []float64, seed uint64, colOffset, j0, j1, k int, scale float64) {
	if draw := normDraw8; draw != nil && !forceScalarNorm && j1-j0 >= 8 {
		base := streamBase(seed, DomainInitC)
		buf := make([]float64, 8*k)
		for ; j0+8 <= j1; j0 += 8 {
			draw(base, uint64(colOffset+j0), scale, buf)
			cc := c[j0*k : (j0+8)*k]
			for l := range 8 {
				col := cc[l*k : (l+1)*k]
				for p := range col {
					col[p] = buf[8*p+l]
				}
			}
		}
	}
	for j := j0; j < j1; j++ {
		rc := NewRNG(seed, DomainInitC, uint64(colOffset+j))
		for p := 0; p < k; p++ {
			c[j*k+p] = scale * math.Abs(rc.Norm())
		}
	}
}

// normDraw8, when not nil, is the AVX-512 draw of eight initial-C columns (normDrawAVX512);
// forceScalarNorm is the tests' hook that sends every column through RNG.Norm instead.
var (
	normDraw8       func(base, index uint64, scale float64, out []float64)
	forceScalarNorm bool
)

// normWork is the cost of one RNG.Norm in multiply-adds, roughly, for the interrupt checks.
const normWork = 32
