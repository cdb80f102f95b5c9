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
	// its spectrum σ·(√samples + √features) (σ² the noise's variance averaged over the
	// entries). Below 1 the component is hidden in the noise's spectrum. Below 0.5 it is
	// below the BBP threshold σ·(samples·features)^¼ too (0.48 to 0.5 of the edge for the
	// bank's shapes), where no method can tell a rank-one signal from iid noise as the matrix
	// grows. For a case below the noise (Visibility < 1) the ratio is that of the second
	// singular value σ_2(S) (the first is the data's mean, always visible), so that no
	// planted component but the mean can be seen, and the right answer is "cannot tell".
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
		// The noise's scale sets the visibility.
		s, _, sv = signal(w, h, n, m, k, 0)
		out.Scale, out.Sigma = 1, sv[which]/(c.Visibility*edge)
	} else {
		// Counts of mean Depth: the programs' contrast sets the visibility. Every sample
		// gets b of every program besides its own mix, W + b (still rank K), which makes the
		// samples alike and the components weaker; b is found by bisection.
		out.Scale = c.Depth
		vis := func(b float64) float64 {
			_, m2, sv := signal(w, h, n, m, k, b)
			sigma2 := c.Depth
			if c.Family == NegBin {
				sigma2 += c.Depth * c.Depth * m2 / NegBinDispersion
			}
			return c.Depth * sv[which] / (math.Sqrt(sigma2) * edge)
		}
		if v0 := vis(0); v0 < c.Visibility {
			return nil, fmt.Errorf("rankbank: case %s: depth %g reaches a visibility of %.3g only", c.Name(), c.Depth, v0)
		}
		lo, hi := 0.0, 0.1
		for vis(hi) > c.Visibility {
			lo, hi = hi, 2*hi
		}
		for range 40 {
			if mid := (lo + hi) / 2; vis(mid) > c.Visibility {
				lo = mid
			} else {
				hi = mid
			}
		}
		var m2 float64
		s, m2, sv = signal(w, h, n, m, k, (lo+hi)/2)
		out.Sigma = math.Sqrt(c.Depth + c.Depth*c.Depth*m2/NegBinDispersion*b2f(c.Family == NegBin))
	}
	for i := range sv {
		out.Singular = append(out.Singular, sv[i]*out.Scale)
	}
	nz := 0
	for i, v := range s {
		mu := out.Scale * v
		var x float64
		switch c.Family {
		case Gaussian:
			x = mu + out.Sigma*rng.NormFloat64()
		case Uniform:
			x = mu + out.Sigma*math.Sqrt(12)*(rng.Float64()-0.5)
		case Poisson:
			x = poisson(rng, mu)
		case NegBin:
			x = poisson(rng, mu*gamma(rng, NegBinDispersion)/NegBinDispersion)
		default:
			return nil, fmt.Errorf("rankbank: unknown family %q", c.Family)
		}
		if x < 0 {
			x = 0
			out.Clipped++
		}
		out.X[i] = x
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

// poisson draws a Poisson variate of mean mu (Knuth's method for small means, a rounded
// normal approximation above 30: the bank needs its variance, not its tails).
func poisson(rng *rand.Rand, mu float64) float64 {
	if mu <= 0 {
		return 0
	}
	if mu > 30 {
		return max(0, math.Round(mu+math.Sqrt(mu)*rng.NormFloat64()))
	}
	l, k, p := math.Exp(-mu), 0.0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// gamma draws a Gamma(shape, 1) variate (Marsaglia and Tsang; shape >= 1).
func gamma(rng *rand.Rand, shape float64) float64 {
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return d * v
		}
	}
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
