package rankbank

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/gonum/mat"

	"github.com/didnmf/didnmf/matio"
)

// Family is the noise of a case.
type Family string

// The noise families.
const (
	// Gaussian: X = max(0, S + σZ), Z standard normal (clipped at 0, as NMF needs).
	Gaussian Family = "gaussian"
	// Poisson: X ~ Poisson(cS), counts.
	Poisson Family = "poisson"
	// NegBin: X ~ Poisson(G·cS), G ~ Gamma(NegBinDispersion, 1/NegBinDispersion): negative
	// binomial counts of variance cS + (cS)²/NegBinDispersion, overdispersed as scRNA-seq.
	NegBin Family = "negbin"
	// Uniform: X = max(0, S + U), U uniform on [-a/2, a/2) (zero mean: no offset).
	Uniform Family = "uniform"
)

// wBase and hBase lift the factors of the additive families (see Generate).
const wBase, hBase = 2.0, 1.0

// NegBinDispersion is the negative binomial's size r (variance μ + μ²/r).
const NegBinDispersion = 10

// Case is one planted-rank matrix of the bank: samples x features, X ≈ W·H with W samples x K
// and H K x features nonnegative, plus noise of the family, scaled so that the planted
// signal's visibility is Visibility (see Case.Visibility).
type Case struct {
	Family            Family
	Samples, Features int
	// K is the planted rank.
	K int
	// Visibility is how far the planted signal stands out of the noise: the weakest planted
	// component's singular value σ_K(S) over the noise's largest singular value, the edge of
	// its spectrum: σ·(√samples + √features) for the iid additive families (σ² the noise's
	// variance), and for counts, whose noise is not iid, the draw's own (Matrix.NoiseEdge,
	// 1.04-2.4 times σ·(√samples + √features) with σ² the mean variance). Below 1 the
	// component is hidden in the noise's spectrum. For iid noise, below 0.5 it is below the
	// BBP threshold σ·(samples·features)^¼ too (0.48 to 0.5 of the edge for the bank's
	// shapes), where no method can tell a rank-one signal from the noise as the matrix grows.
	// Count noise's largest singular values come from its most variable entries, and a
	// method that weighs entries by their variance (a fit of √X, say) can see a program
	// somewhat under that edge: the bank's count cases below the noise (0.4 of the draw's
	// edge) lie at 0.41-0.84 of σ·(√samples + √features), and its first calibration's
	// visible-labeled count cases (0.54-0.97 of the draw's edge) are scored apart
	// (BENCHMARKS.md). For a case below the noise (Visibility < 1) the ratio is that of the
	// second singular value σ_2(S) (the first is the data's mean, always visible), so that no
	// planted component but the mean can be seen, and the right answer is "cannot tell".
	// The matrices are the same bits on amd64 builds; other architectures may round the
	// bisection's SVDs differently.
	Visibility float64
	// Depth is the mean count of a count family (Poisson, NegBin): the visibility is then
	// set by the programs' contrast rather than by the noise's scale (see Generate).
	Depth float64
	// Sparse cases are written as MatrixMarket coordinate files (zeros not stored).
	Sparse bool
	// Seed makes the case: the same seed, the same matrix.
	Seed uint64
	// Ranks are the ranks the bank sweeps; Range names how they were chosen.
	Ranks []int
	Range string
}

// BelowNoise tells whether the right answer is "cannot tell".
func (c Case) BelowNoise() bool { return c.Visibility < 1 }

// Name is the case's name: family, shape, planted rank, visibility, range.
func (c Case) Name() string {
	shape := "tall"
	if c.Features > c.Samples {
		shape = "wide"
	}
	sp := ""
	if c.Sparse {
		sp = "-sparse"
	}
	return fmt.Sprintf("%s%s-%s-%dx%d-K%d-v%g-%s", c.Family, sp, shape, c.Samples, c.Features, c.K, c.Visibility, c.Range)
}

// Matrix is a generated case: X row-major samples x features, and what it was made of.
type Matrix struct {
	X []float64
	// Scale is the signal's factor c (the mean of S is 1 before it), Sigma the noise's
	// standard deviation (the root of the mean variance), Density the share of nonzeros,
	// Clipped the share of entries whose additive noise was clipped at 0.
	Scale, Sigma, Density, Clipped float64
	// Singular are the planted signal's K singular values (of c·S).
	Singular []float64
	// NoiseEdge is the largest singular value of this draw's noise, X − c·S: what a planted
	// component must exceed to stand out of it. Count cases are calibrated on it.
	NoiseEdge float64
}

// Edge is the largest singular value of an n x m matrix of iid noise of variance 1, about
// √n + √m: the noise's spectrum's edge, over which Visibility measures a signal.
func Edge(n, m int) float64 { return math.Sqrt(float64(n)) + math.Sqrt(float64(m)) }

// Generate makes the case's matrix, deterministically from its seed.
func (c Case) Generate() (*Matrix, error) {
	n, m, k := c.Samples, c.Features, c.K
	if k < 1 || k > min(n, m) || !(c.Visibility > 0) {
		return nil, fmt.Errorf("rankbank: case %s: bad shape, rank or visibility", c.Name())
	}
	switch c.Family {
	case Gaussian, Uniform, Poisson, NegBin:
	default:
		return nil, fmt.Errorf("rankbank: case %s: unknown family %q", c.Name(), c.Family)
	}
	counts := c.Family == Poisson || c.Family == NegBin
	if counts && !(c.Depth > 0) {
		return nil, fmt.Errorf("rankbank: case %s: a count family needs a depth", c.Name())
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x9e3779b97f4a7c15))
	// Sparse, nonnegative factors: each sample mixes about half of the programs, each
	// program uses about a third of the features, every sample and program has one. With
	// additive noise (Gaussian, uniform), which must be clipped at 0, the factors are lifted
	// (W by wBase, H by hBase: still rank K) so that the signal stays well above the noise
	// and nothing is clipped where the signal is visible (Matrix.Clipped): clipped noise has
	// a positive mean, an offset that an extra component fits (the bank's first version,
	// without the lift, had a third of the entries clipped and the sweeps found K+1).
	base := 0.0
	if !counts {
		base = hBase
	}
	w := factor(rng, n, k, 0.5, wBase*base)
	h := factor(rng, k, m, 0.3, base)
	edge := Edge(n, m)
	which := k - 1 // the singular value the visibility is of
	if c.BelowNoise() {
		which = min(1, k-1)
	}
	out := &Matrix{X: make([]float64, n*m)}
	var s []float64
	var sv []float64
	if !counts {
		// The noise's scale sets the visibility: iid noise of standard deviation σ has its
		// edge at σ·Edge (TestGenerate checks the draw's).
		s, _, sv = signal(w, h, n, m, k, 0)
		out.Scale, out.Sigma = 1, sv[which]/(c.Visibility*edge)
		for i, v := range s {
			var x float64
			if c.Family == Gaussian {
				x = v + out.Sigma*rng.NormFloat64()
			} else {
				x = v + out.Sigma*math.Sqrt(12)*(rng.Float64()-0.5)
			}
			if x < 0 {
				x = 0
				out.Clipped++
			}
			out.X[i] = x
		}
		out.NoiseEdge = noiseEdge(out.X, s, 1, n, m)
	} else {
		// Counts of mean Depth: the programs' contrast sets the visibility. Every sample
		// gets b of every program besides its own mix, W + b (still rank K), which makes the
		// samples alike and the components weaker; b is found by bisection. Count noise is
		// not iid, so its edge is not σ·Edge (see Case.Visibility): each step of the
		// bisection draws the counts and measures the draw's edge. The draw is the same at
		// every step (common random numbers: each entry's variates are fixed, and its count
		// is their quantile at its mean), so the visibility moves smoothly with b.
		out.Scale = c.Depth
		u := make([]float64, 2*n*m)
		for i := range u {
			u[i] = rng.Float64()
		}
		// draw returns the counts at contrast b, the signal's mean square and singular values,
		// and the draw's noise edge.
		draw := func(b float64) (x []float64, m2 float64, sv []float64, edge float64) {
			s, m2, sv := signal(w, h, n, m, k, b)
			x = make([]float64, n*m)
			for i, v := range s {
				mu := c.Depth * v
				if c.Family == NegBin {
					mu *= gammaQuantile(u[2*i+1], NegBinDispersion) / NegBinDispersion
				}
				x[i] = poissonQuantile(u[2*i], mu)
			}
			return x, m2, sv, noiseEdge(x, s, c.Depth, n, m)
		}
		vis := func(b float64) float64 {
			_, _, sv, edge := draw(b)
			return c.Depth * sv[which] / edge
		}
		if v0 := vis(0); v0 < c.Visibility {
			return nil, fmt.Errorf("rankbank: case %s: depth %g reaches a visibility of %.3g only", c.Name(), c.Depth, v0)
		}
		lo, hi := 0.0, 0.1
		for vis(hi) > c.Visibility {
			lo, hi = hi, 2*hi
		}
		for range 30 {
			if mid := (lo + hi) / 2; vis(mid) > c.Visibility {
				lo = mid
			} else {
				hi = mid
			}
		}
		var m2 float64
		out.X, m2, sv, out.NoiseEdge = draw((lo + hi) / 2)
		out.Sigma = math.Sqrt(c.Depth + c.Depth*c.Depth*m2/NegBinDispersion*b2f(c.Family == NegBin))
	}
	for i := range sv {
		out.Singular = append(out.Singular, sv[i]*out.Scale)
	}
	nz := 0
	for _, x := range out.X {
		if x != 0 {
			nz++
		}
	}
	out.Density = float64(nz) / float64(n*m)
	out.Clipped /= float64(n * m)
	return out, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// signal is S = (W + b)·H scaled to mean 1 (row-major n x m), the mean of S², and S's K
// singular values, decreasing.
func signal(w, h []float64, n, m, k int, b float64) (s []float64, m2 float64, sv []float64) {
	wb := make([]float64, len(w))
	for i, v := range w {
		wb[i] = v + b
	}
	s = make([]float64, n*m)
	for i := range n {
		row := s[i*m : (i+1)*m]
		for p := range k {
			if wv := wb[i*k+p]; wv != 0 {
				for j, hv := range h[p*m : (p+1)*m] {
					row[j] += wv * hv
				}
			}
		}
	}
	var sum float64
	for _, v := range s {
		sum += v
	}
	mean := sum / float64(n*m)
	for i := range s {
		s[i] /= mean
		m2 += s[i] * s[i]
	}
	m2 /= float64(n * m)
	// The singular values of W·H are those of R_w·R_hᵀ (QR of W and of Hᵀ), K x K.
	var qw, qh mat.QR
	qw.Factorize(mat.NewDense(n, k, wb))
	qh.Factorize(mat.NewDense(k, m, h).T())
	var rw, rh, p mat.Dense
	qw.RTo(&rw)
	qh.RTo(&rh)
	p.Mul(rw.Slice(0, k, 0, k), rh.Slice(0, k, 0, k).T())
	var svd mat.SVD
	if !svd.Factorize(&p, mat.SVDNone) {
		panic("rankbank: SVD did not converge")
	}
	sv = svd.Values(nil)
	for i := range sv {
		sv[i] /= mean
	}
	return s, m2, sv
}

// factor is a rows x cols nonnegative matrix of exponential entries, each nonzero with
// probability p, every row with at least one nonzero, plus base.
func factor(rng *rand.Rand, rows, cols int, p, base float64) []float64 {
	f := make([]float64, rows*cols)
	for i := range rows {
		row := f[i*cols : (i+1)*cols]
		any := false
		for j := range row {
			if rng.Float64() < p {
				row[j], any = rng.ExpFloat64(), true
			}
		}
		if !any {
			row[rng.IntN(cols)] = rng.ExpFloat64()
		}
		for j := range row {
			row[j] += base
		}
	}
	return f
}

// poissonQuantile is the Poisson(mu) quantile at u in [0, 1) (inversion; a rounded normal
// approximation above a mean of 30: the bank needs its variance, not its tails).
func poissonQuantile(u, mu float64) float64 {
	if mu <= 0 {
		return 0
	}
	if mu > 30 {
		return max(0, math.Round(mu+math.Sqrt(mu)*normalQuantile(u)))
	}
	p := math.Exp(-mu)
	f, k := p, 0.0
	for u > f {
		k++
		p *= mu / k
		if f+p == f { // the sum rounded short of u near 1: the tail adds nothing more
			return k
		}
		f += p
	}
	return k
}

// gammaQuantile is the Gamma(shape, 1) quantile at u, by Wilson and Hilferty's cube-root
// normal approximation (within 1% of the exact quantile's spread at the bank's shape of 10).
func gammaQuantile(u, shape float64) float64 {
	a := 1 / (9 * shape)
	return shape * math.Pow(max(0, 1-a+normalQuantile(u)*math.Sqrt(a)), 3)
}

// normalQuantile is the standard normal quantile at u in [0, 1), clamped to ±8.
func normalQuantile(u float64) float64 {
	return max(-8, min(8, math.Sqrt2*math.Erfinv(2*u-1)))
}

// noiseEdge is the largest singular value of the noise X − scale·S, both n x m row-major.
func noiseEdge(x, s []float64, scale float64, n, m int) float64 {
	e := make([]float64, n*m)
	for i, v := range s {
		e[i] = x[i] - scale*v
	}
	var svd mat.SVD
	if !svd.Factorize(mat.NewDense(n, m, e), mat.SVDNone) {
		panic("rankbank: SVD did not converge")
	}
	return svd.Values(nil)[0]
}

// Write writes the matrix into dir as the case's file: .npy, or .mtx for a sparse case.
func (c Case) Write(dir string, x *Matrix) (string, error) {
	n, m := c.Samples, c.Features
	if !c.Sparse {
		path := filepath.Join(dir, "x.npy")
		f, err := os.Create(path)
		if err != nil {
			return "", err
		}
		if err := matio.WriteNPY(f, n, m, x.X); err != nil {
			f.Close()
			return "", err
		}
		return path, f.Close()
	}
	path := filepath.Join(dir, "x.mtx")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	bw := bufio.NewWriter(f)
	nnz := 0
	for _, v := range x.X {
		if v != 0 {
			nnz++
		}
	}
	fmt.Fprintf(bw, "%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n", n, m, nnz)
	for i := range n {
		for j, v := range x.X[i*m : (i+1)*m] {
			if v != 0 {
				bw.WriteString(strconv.Itoa(i + 1))
				bw.WriteByte(' ')
				bw.WriteString(strconv.Itoa(j + 1))
				bw.WriteByte(' ')
				bw.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
				bw.WriteByte('\n')
			}
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}
