package matio

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/didnmf/didnmf/kernels"
)

const syntheticPrefix = "synthetic:"

// maxSyntheticB bounds M*K, the entries of the true basis every reader of a synthetic source
// generates in full (2^28 entries are 2 GiB).
const maxSyntheticB = 1 << 28

// syntheticSpec is a parsed "synthetic:m=M,n=N,k=K,seed=S[,noise=E]".
type syntheticSpec struct {
	spec    string
	m, n, k int
	seed    uint64
	noise   float64
}

// parseSyntheticSpec parses a synthetic spec; keys may come in any order.
func parseSyntheticSpec(spec string) (*syntheticSpec, error) {
	s := &syntheticSpec{spec: spec}
	body, ok := strings.CutPrefix(spec, syntheticPrefix)
	if !ok {
		return nil, inputErrorf(spec, "a synthetic spec starts with %q", syntheticPrefix)
	}
	seen := map[string]bool{}
	if strings.TrimSpace(body) != "" {
		for _, field := range strings.Split(body, ",") {
			key, val, ok := strings.Cut(field, "=")
			key, val = strings.TrimSpace(key), strings.TrimSpace(val)
			if !ok {
				return nil, inputErrorf(spec, "%q is not key=value", field)
			}
			if seen[key] {
				return nil, inputErrorf(spec, "%s given twice", key)
			}
			seen[key] = true
			if err := s.set(key, val); err != nil {
				return nil, err
			}
		}
	}
	for _, key := range []string{"m", "n", "k", "seed"} {
		if !seen[key] {
			return nil, inputErrorf(spec, "missing %s (want synthetic:m=M,n=N,k=K,seed=S[,noise=E])", key)
		}
	}
	if s.k > min(s.m, s.n) {
		return nil, inputErrorf(spec, "k must be <= min(m, n) = %d", min(s.m, s.n))
	}
	if s.m > maxFeatures {
		return nil, inputErrorf(spec, "m must be <= %d", maxFeatures)
	}
	if mk, ok := mulFits(int64(s.m), int64(s.k), maxSyntheticB); !ok || mk > maxSyntheticB {
		return nil, inputErrorf(spec, "m*k must be <= %d", maxSyntheticB)
	}
	return s, nil
}

func (s *syntheticSpec) set(key, val string) error {
	switch key {
	case "m", "n", "k":
		v, err := ParseCount(val)
		if err != nil {
			return inputErrorf(s.spec, "%s=%v", key, err)
		}
		if v < 1 {
			return inputErrorf(s.spec, "%s must be >= 1", key)
		}
		switch key {
		case "m":
			s.m = v
		case "n":
			s.n = v
		default:
			s.k = v
		}
	case "seed":
		v, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			return inputErrorf(s.spec, "seed=%q is not an unsigned integer", val)
		}
		s.seed = v
	case "noise":
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return inputErrorf(s.spec, "noise=%q is not a number", val)
		}
		if !(v >= 0) || math.IsInf(v, 0) {
			return inputErrorf(s.spec, "noise must be finite and >= 0")
		}
		s.noise = v
	default:
		return inputErrorf(s.spec, "unknown key %q (want m, n, k, seed, noise)", key)
	}
	return nil
}

// ParseCount parses a size: a decimal integer, or one written with an exponent (1e7, 2.5e6)
// whose value is exactly an integer (read digit by digit: 1.00000000000000001e3 is not 1000)
// that an int holds.
func ParseCount(val string) (int, error) {
	bad := fmt.Errorf("%q is not an integer (e.g. 1000000 or 1e6)", val)
	if v, err := strconv.Atoi(val); err == nil {
		return v, nil
	} else if errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%q is too large (at most %d)", val, math.MaxInt)
	} else if !strings.ContainsAny(val, "eE") {
		return 0, bad
	}
	mant, exp, _ := strings.Cut(strings.ToLower(val), "e")
	sign := ""
	if mant != "" && (mant[0] == '-' || mant[0] == '+') {
		sign, mant = mant[:1], mant[1:]
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits := whole + frac
	e, err := strconv.Atoi(exp)
	if digits == "" || strings.Trim(digits, "0123456789") != "" || err != nil || e < -30 || e > 30 {
		return 0, bad
	}
	point := len(whole) + e // digits[:point] is the integer part
	if point < 0 {
		point = 0
	}
	for len(digits) < point {
		digits += "0"
	}
	if strings.Trim(digits[point:], "0") != "" {
		return 0, bad
	}
	v, err := strconv.Atoi(sign + "0" + digits[:point])
	if err != nil {
		return 0, fmt.Errorf("%q is too large (at most %d)", val, math.MaxInt)
	}
	return v, nil
}

// basis returns B*, M x K column-major: entry k*M+i is the (k*M+i)-th draw of one stream.
func (s *syntheticSpec) basis() []float64 {
	b := make([]float64, s.m*s.k)
	rng := kernels.NewRNG(s.seed, kernels.DomainSyntheticB, 0)
	for p := range b {
		b[p] = rng.Float64()
	}
	return b
}

// coef fills dst[:K] with column j of C*.
func (s *syntheticSpec) coef(j int, dst []float64) {
	rng := kernels.NewRNG(s.seed, kernels.DomainSyntheticC, uint64(j))
	for k := range dst[:s.k] {
		dst[k] = rng.Float64()
	}
}

// column writes column j of X = B* C* (+ noise) into x (length M). The sum over k runs in
// order k = 0..K-1 for every entry; the explicit float64 conversions forbid fused
// multiply-adds, so the values are the same bits on every platform.
func (s *syntheticSpec) column(b []float64, j int, c, x []float64) {
	s.coef(j, c)
	m := s.m
	clear(x)
	for k := 0; k < s.k; k++ {
		ck, bk := c[k], b[k*m:(k+1)*m]
		for i := range x {
			x[i] += float64(bk[i] * ck)
		}
	}
	if s.noise > 0 {
		rn := kernels.NewRNG(s.seed, kernels.DomainSyntheticNoise, uint64(j))
		for i := range x {
			x[i] += float64(s.noise * rn.Float64())
		}
	}
}

// SyntheticFactors parses a synthetic spec "synthetic:m=M,n=N,k=K,seed=S[,noise=E]" and
// returns its dimensions and true factors: b is B*, M x K column-major, and c(j, dst) fills
// dst[:k] with column j of C*.
//
// The synthetic X is B* C* (+ noise), generated with the keyed RNG of package kernels:
// B*[k*M+i] is the (k*M+i)-th draw of NewRNG(S, DomainSyntheticB, 0); column j of C* is the
// first K draws of NewRNG(S, DomainSyntheticC, j); x_ij is the sum of B*[i,k]*c_j[k] over
// k = 0..K-1 in order, plus E times the i-th draw of NewRNG(S, DomainSyntheticNoise, j) when
// E > 0. Each column depends only on (spec, j), so any range can be generated on its own.
// Keys may come in any order; m*k is limited to 2^28.
func SyntheticFactors(spec string) (m, n, k int, b []float64, c func(j int, dst []float64), err error) {
	s, err := parseSyntheticSpec(spec)
	if err != nil {
		return 0, 0, 0, nil, nil, err
	}
	return s.m, s.n, s.k, s.basis(), s.coef, nil
}

// syntheticSource generates the columns of X on demand; B* is made at the first Read.
type syntheticSource struct {
	*syntheticSpec
	once sync.Once
	b    []float64
}

func openSynthetic(spec string) (Source, error) {
	s, err := parseSyntheticSpec(spec)
	if err != nil {
		return nil, err
	}
	return &syntheticSource{syntheticSpec: s}, nil
}

func (s *syntheticSource) Name() string  { return s.spec }
func (s *syntheticSource) Samples() int  { return s.n }
func (s *syntheticSource) Features() int { return s.m }
func (s *syntheticSource) Close() error  { return nil }

// syntheticParallelCols is the block width from which a synthetic block is generated on every
// processor.
const syntheticParallelCols = 1 << 16

func (s *syntheticSource) Read(lo, hi int, layout Layout) (kernels.Block, error) {
	if err := checkRead(s.spec, s.n, lo, hi, layout); err != nil {
		return nil, err
	}
	d, err := newDense(s.spec, s.m, hi-lo)
	if err != nil {
		return nil, err
	}
	s.once.Do(func() { s.b = s.basis() })
	// Columns are generated on every processor: each depends only on (spec, j).
	parts := 1
	if hi-lo >= syntheticParallelCols {
		parts = runtime.GOMAXPROCS(0)
	}
	bounds := kernels.ColumnRanges(hi-lo, parts)
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() {
			c := make([]float64, s.k)
			for j := lo + bounds[p]; j < lo+bounds[p+1]; j++ {
				s.column(s.b, j, c, d.Col(j-lo))
			}
		})
	}
	wg.Wait()
	if _, err := checkDense(s.spec, d, lo, false, false); err != nil {
		return nil, fmt.Errorf("%w (synthetic data should never be invalid)", err)
	}
	return shapeDense(d, layout), nil
}

// DefaultSeed returns spec with ",seed=SEED" added when it is a synthetic spec without a seed
// key, and spec unchanged otherwise: the command line's --seed seeds synthetic data that does
// not choose its own seed, and the spec that reaches the nodes of a cluster names it.
func DefaultSeed(spec string, seed uint64) string {
	body, ok := strings.CutPrefix(spec, syntheticPrefix)
	if !ok {
		return spec
	}
	for _, kv := range strings.Split(body, ",") {
		if key, _, _ := strings.Cut(kv, "="); strings.TrimSpace(key) == "seed" {
			return spec
		}
	}
	if strings.TrimSpace(body) == "" {
		return fmt.Sprintf("%sseed=%d", spec, seed)
	}
	return fmt.Sprintf("%s,seed=%d", spec, seed)
}

// IsSynthetic tells whether input names a synthetic source ("synthetic:m=...,n=...") rather
// than a file: whether it starts with the prefix every reader of this package takes as one,
// well formed or not.
func IsSynthetic(input string) bool { return strings.HasPrefix(input, syntheticPrefix) }

// SameSynthetic tells whether a and b are synthetic specs of the same matrix: both parse,
// and their m, n, k, seed and noise are equal whatever the keys' order or the numbers' forms
// ("n=1e3" and "n=1000").
func SameSynthetic(a, b string) bool {
	x, err := parseSyntheticSpec(a)
	if err != nil {
		return false
	}
	y, err := parseSyntheticSpec(b)
	if err != nil {
		return false
	}
	return x.m == y.m && x.n == y.n && x.k == y.k && x.seed == y.seed && x.noise == y.noise
}
