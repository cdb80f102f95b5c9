package kernels

import (
	"fmt"
	"math"
	"strings"
)

// L1/L2 penalties with scikit-learn 1.2's parameterization (see "Penalties" in doc.go and the
// Options fields AlphaCoef, AlphaBasis, L1Ratio).

// penalty holds the scaled coefficients of the penalized objective
//
//	||X - BC||^2 + 2 l1C ||C||_1 + l2C ||C||^2 + 2 l1B ||B||_1 + l2B ||B||^2,
//
// twice scikit-learn's 0.5 ||X - WH||^2 + l1_reg_W ||W||_1 + 0.5 l2_reg_W ||W||^2 + ..., with
// W = C^T and H = B^T: l1C = l1_reg_W = M alpha_W l1_ratio, l2C = l2_reg_W = M alpha_W
// (1 - l1_ratio), l1B = l1_reg_H = N alpha_H l1_ratio, l2B = l2_reg_H = N alpha_H (1 - l1_ratio),
// computed with scikit-learn's operations in its order (_compute_regularization).
type penalty struct {
	l1C, l2C float64 // on C
	l1B, l2B float64 // on B
}

// newPenalty scales the options' alphas for M features and N samples (all of X's columns,
// not a shard's). Each coefficient is a rounded product (the explicit conversions keep the
// compiler from fusing it into the additions it later feeds, see "Pinned arithmetic").
func newPenalty(o Options, m, n int) penalty {
	fm, fn := float64(m), float64(n)
	return penalty{
		l1C: float64(float64(fm*o.AlphaCoef) * o.L1Ratio),
		l2C: float64(float64(fm*o.AlphaCoef) * (1 - o.L1Ratio)),
		l1B: float64(float64(fn*o.AlphaBasis) * o.L1Ratio),
		l2B: float64(float64(fn*o.AlphaBasis) * (1 - o.L1Ratio)),
	}
}

// coef reports whether C is penalized, basis whether B is, on whether either is. The kernels
// branch on these rather than add zeros, so an unpenalized run keeps its bits.
func (p penalty) coef() bool  { return p.l1C != 0 || p.l2C != 0 }
func (p penalty) basis() bool { return p.l1B != 0 || p.l2B != 0 }
func (p penalty) on() bool    { return p.coef() || p.basis() }

// coefValue returns 2 l1C s1 + l2C sq, the penalty of a C with ||C||_1 = s1, ||C||^2 = sq.
func (p penalty) coefValue(s1, sq float64) float64 { return penaltyValue(p.l1C, p.l2C, s1, sq) }

// basisValue is coefValue for B.
func (p penalty) basisValue(s1, sq float64) float64 { return penaltyValue(p.l1B, p.l2B, s1, sq) }

func penaltyValue(l1, l2, s1, sq float64) float64 {
	return float64(2*float64(l1*s1)) + float64(l2*sq)
}

// factorNorms returns ||x||_1 and ||x||^2 (four partial sums each, by index mod 4, combined as
// dot combines them), looking at the interrupt flag between blocks; the blocks do not change
// the bits. Only on the machine's goroutine.
func factorNorms(x []float64, flag *interruptFlag) (s1, sq float64) {
	var acc normSums
	span := flag.span(2, 4)
	for i0 := 0; i0 < len(x); i0 += span {
		flag.poll()
		acc.add(x[i0:min(i0+span, len(x))])
	}
	return acc.result()
}

// normSums are factorNorms' partial sums: |x| and x^2 by index mod 4, and n the entries
// pushed so far (push).
type normSums struct {
	a, q [4]float64
	n    int
}

// add adds x's entries to the partial sums; x's length must be a multiple of 4 but at the
// end of the vector, whose last entries (fewer than 4) go to the first sums.
func (n *normSums) add(x []float64) {
	a0, a1, a2, a3 := n.a[0], n.a[1], n.a[2], n.a[3]
	q0, q1, q2, q3 := n.q[0], n.q[1], n.q[2], n.q[3]
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		v0, v1, v2, v3 := v[0], v[1], v[2], v[3]
		q0 += float64(v0 * v0)
		q1 += float64(v1 * v1)
		q2 += float64(v2 * v2)
		q3 += float64(v3 * v3)
		// |v| by a sign test, not math.Abs: factors are nonnegative, so the branches are
		// never taken and the values stay in vector registers (math.Abs moves each through a
		// general register here). A -0 stays -0, which adds as +0 does to any sum but -0,
		// and the sums start at +0: the same bits as math.Abs.
		if v0 < 0 {
			v0 = -v0
		}
		if v1 < 0 {
			v1 = -v1
		}
		if v2 < 0 {
			v2 = -v2
		}
		if v3 < 0 {
			v3 = -v3
		}
		a0 += v0
		a1 += v1
		a2 += v2
		a3 += v3
	}
	for ; i < len(x); i++ {
		a0 += math.Abs(x[i])
		q0 += float64(x[i] * x[i])
	}
	n.a, n.q = [4]float64{a0, a1, a2, a3}, [4]float64{q0, q1, q2, q3}
}

// push adds x's entries to the partial sums by their index mod 4 counted over everything
// pushed before (n), so that pushing a vector in pieces of any lengths gives the bits of
// pushing it whole. A nil n takes nothing. (add instead starts every call at index 0 and puts
// a short tail in the first sums; the two agree on vectors whose pieces are multiples of 4
// long.)
func (n *normSums) push(x []float64) {
	if n == nil {
		return
	}
	i := 0
	for ; i < len(x) && (n.n+i)%4 != 0; i++ {
		u := (n.n + i) % 4
		n.a[u] += math.Abs(x[i])
		n.q[u] += float64(x[i] * x[i])
	}
	body := (len(x) - i) / 4 * 4
	n.add(x[i : i+body])
	for i += body; i < len(x); i++ {
		u := (n.n + i) % 4
		n.a[u] += math.Abs(x[i])
		n.q[u] += float64(x[i] * x[i])
	}
	n.n += len(x)
}

// result combines the partial sums: (s0 + s1) + (s2 + s3).
func (n *normSums) result() (s1, sq float64) {
	return (n.a[0] + n.a[1]) + (n.a[2] + n.a[3]), (n.q[0] + n.q[1]) + (n.q[2] + n.q[3])
}

// basisPenalty returns the penalty of B (0 without one), computed directly.
func (p penalty) basisPenalty(b []float64, flag *interruptFlag) float64 {
	if !p.basis() {
		return 0
	}
	return p.basisValue(factorNorms(b, flag))
}

// coefPenalty returns the penalty of C (0 without one), computed directly.
func (p penalty) coefPenalty(c []float64, flag *interruptFlag) float64 {
	if !p.coef() {
		return 0
	}
	return p.coefValue(factorNorms(c, flag))
}

// shiftGram adds l2 to the diagonal of the k x k g: the Gram matrix of a penalized
// subproblem.
func shiftGram(g []float64, k int, l2 float64) {
	if l2 == 0 {
		return
	}
	for p := 0; p < k; p++ {
		g[p*k+p] += l2
	}
}

// shiftCross subtracts l1 from every entry of a cross product.
func shiftCross(f []float64, l1 float64) {
	if l1 == 0 {
		return
	}
	for i := range f {
		f[i] -= l1
	}
}

// penaltyAlgorithms lists the algorithms that implement the penalties.
func penaltyAlgorithms() string {
	var names []string
	for _, a := range algorithms {
		if a.Penalties {
			names = append(names, string(a.Name))
		}
	}
	return strings.Join(names, ", ")
}

// ValidatePenalties checks the penalty options for an algorithm: AlphaCoef and AlphaBasis finite
// and >= 0, L1Ratio in [0, 1], and no penalty for an algorithm that does not implement one
// (admm, dadmm). NewMachine (and so Run) calls it.
func (o Options) ValidatePenalties(algo Algorithm) error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"alpha_coef", o.AlphaCoef}, {"alpha_basis", o.AlphaBasis}} {
		if !(f.v >= 0) || math.IsInf(f.v, 1) {
			return fmt.Errorf("%s must be a finite number >= 0, got %v", f.name, f.v)
		}
	}
	if !(o.L1Ratio >= 0 && o.L1Ratio <= 1) {
		return fmt.Errorf("l1_ratio must be a number between 0 and 1, got %v", o.L1Ratio)
	}
	if o.AlphaCoef == 0 && o.AlphaBasis == 0 {
		return nil
	}
	info, err := LookupAlgorithm(algo)
	if err != nil {
		return err
	}
	if !info.Penalties {
		return fmt.Errorf("algorithm %s has no L1/L2 penalties (alpha_coef %v, alpha_basis %v): the algorithms that have them are %s",
			algo, o.AlphaCoef, o.AlphaBasis, penaltyAlgorithms())
	}
	return nil
}

// validatePenaltyScale checks that the scaled coefficients are finite for M features and N
// samples (an alpha near the largest float64 times N overflows).
func (o Options) validatePenaltyScale(m, n int) error {
	p := newPenalty(o, m, n)
	if math.IsInf(p.l1C, 0) || math.IsInf(p.l2C, 0) {
		return fmt.Errorf("alpha_coef %v times M = %d overflows", o.AlphaCoef, m)
	}
	if math.IsInf(p.l1B, 0) || math.IsInf(p.l2B, 0) {
		return fmt.Errorf("alpha_basis %v times N = %d overflows", o.AlphaBasis, n)
	}
	return nil
}
