package kernels

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Loss is the divergence D(X | BC) an algorithm minimises: scikit-learn's beta_loss, the
// beta-divergence of Fevotte & Idier (2011) for a real beta (see "Losses" in doc.go). beta = 2
// is the Frobenius loss, 1 the generalized Kullback-Leibler divergence and 0 the
// Itakura-Saito divergence; MU minimises any of them, every other algorithm the Frobenius
// loss only (Options.ValidateLoss).
//
// A Loss holds its beta exactly (Beta returns it, BetaLoss makes one) in an encoding whose
// zero value is beta = 2, so that Options without a loss keep today's Frobenius problem: the
// bits of beta XOR the bits of 2.0. Compare losses with ==; print them with String, which
// ParseLoss reads back.
type Loss uint64

// lossBits2 is math.Float64bits(2).
const lossBits2 = 0x4000000000000000

// The named losses.
const (
	// LossFrobenius is beta = 2: ||X - BC||_F^2 (the zero value).
	LossFrobenius Loss = 0
	// LossKL is beta = 1: the generalized Kullback-Leibler divergence
	// sum x log(x/y) - x + y, y = BC.
	LossKL Loss = 0x3FF0000000000000 ^ lossBits2 // Float64bits(1) ^ Float64bits(2)
	// LossIS is beta = 0: the Itakura-Saito divergence sum x/y - log(x/y) - 1. It needs
	// X > 0 everywhere (Loss.CheckData).
	LossIS Loss = 0 ^ lossBits2 // Float64bits(0) ^ Float64bits(2)
)

// BetaLoss returns the loss of that beta: LossFrobenius, LossKL and LossIS for 2, 1 and 0
// (and -0). Options.ValidateLoss refuses a beta that is not finite.
func BetaLoss(beta float64) Loss {
	if beta == 0 {
		beta = 0 // -0 is IS too
	}
	return Loss(math.Float64bits(beta) ^ lossBits2)
}

// Beta returns the loss's beta.
func (l Loss) Beta() float64 { return math.Float64frombits(uint64(l) ^ lossBits2) }

// String returns "frobenius", "kl", "is" or the beta as the shortest decimal that reads back
// exactly ("1.5").
func (l Loss) String() string {
	switch l {
	case LossFrobenius:
		return "frobenius"
	case LossKL:
		return "kl"
	case LossIS:
		return "is"
	}
	return strconv.FormatFloat(l.Beta(), 'g', -1, 64)
}

// ParseLoss parses a loss: "frobenius", "kl" or "is" (scikit-learn's "kullback-leibler" and
// "itakura-saito" too, any case), or a finite number, the beta ("2" is frobenius, "1" kl, "0"
// is). It is what the --loss flag takes.
func ParseLoss(s string) (Loss, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "frobenius", "":
		return LossFrobenius, nil
	case "kl", "kullback-leibler":
		return LossKL, nil
	case "is", "itakura-saito":
		return LossIS, nil
	}
	beta, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(beta) || math.IsInf(beta, 0) {
		return LossFrobenius, fmt.Errorf("unknown loss %q (known: frobenius, kl, is, or a finite number: the beta of the beta-divergence)", s)
	}
	return BetaLoss(beta), nil
}

// Set parses s into l (so that *Loss is a flag.Value).
func (l *Loss) Set(s string) error {
	v, err := ParseLoss(s)
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// MarshalText writes String (so that JSON and the like carry "kl", not the encoding).
func (l Loss) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText reads what ParseLoss reads.
func (l *Loss) UnmarshalText(b []byte) error { return l.Set(string(b)) }

// lossAlgorithms are the algorithms that minimise a loss other than the Frobenius one.
var lossAlgorithms = []Algorithm{MU}

// ValidateLoss checks the loss option for an algorithm: a finite beta, and a loss other than
// the Frobenius one only for mu (the other algorithms' updates are least-squares ones).
// The CLI and job validation should call it with the penalties' ValidatePenalties; the data
// condition of IS (X > 0) is Loss.CheckData's, and a mu machine checks both itself.
func (o Options) ValidateLoss(algo Algorithm) error {
	if err := o.Loss.check(); err != nil {
		return err
	}
	if o.Loss == LossFrobenius {
		return nil
	}
	for _, a := range lossAlgorithms {
		if a == algo {
			return nil
		}
	}
	var others []string
	for _, a := range algorithms {
		if a.Name != MU {
			others = append(others, string(a.Name))
		}
	}
	return fmt.Errorf("loss %s needs algo mu; %s minimise the Frobenius loss", o.Loss, strings.Join(others, ", "))
}

// check refuses a beta that is not finite.
func (l Loss) check() error {
	if beta := l.Beta(); math.IsNaN(beta) || math.IsInf(beta, 0) {
		return fmt.Errorf("loss beta must be a finite number, got %v", beta)
	}
	return nil
}

// CheckData checks a block of X for the loss, as scikit-learn checks X: every loss other than
// the Frobenius one needs X >= 0 (a KL or beta term of a negative entry is not defined), and a
// beta <= 0 (IS) needs every entry of X > 0: scikit-learn refuses X.min() == 0 there (the
// divergence and the updates are unbounded at a zero), and so does this, for an entry stored
// as 0 and for an entry a CSC block does not store. colOffset is the block's first column in
// X, so that the error names the sample (column) and the feature (row) of all of X, counted
// from 0.
func (l Loss) CheckData(x Block, colOffset int) error { return l.checkData(x, colOffset, nil) }

// CheckObserved is CheckData for a run with options o: with a mask (o.Masked) it checks only
// the entries the fit sees, so that a missing entry (NaN, with o.Missing) or a held-out one
// (HeldOut, with o.TestFraction), stored or not, may hold anything; without a mask it is
// CheckData. colOffset is the block's first column in X. It draws two hashes per entry of
// the block when o holds entries out.
func (l Loss) CheckObserved(x Block, colOffset int, o Options) error {
	if !o.Masked() {
		return l.CheckData(x, colOffset)
	}
	return l.checkData(x, colOffset, func(j, i int, v float64) bool {
		return o.Missing && v != v || HeldOut(o.TestSeed, colOffset+j, i, o.TestFraction)
	})
}

// checkData is CheckData, skipping the entries (column j of the block, row i, value v: 0 for
// an unstored entry) for which unobserved, when not nil, returns true.
func (l Loss) checkData(x Block, colOffset int, unobserved func(j, i int, v float64) bool) error {
	if l == LossFrobenius {
		return nil
	}
	skip := func(j, i int, v float64) bool { return unobserved != nil && unobserved(j, i, v) }
	positive := l.Beta() <= 0
	bad := func(j, i int, v float64) error {
		if v < 0 || math.IsNaN(v) {
			return fmt.Errorf("loss %s needs X >= 0: sample %d, feature %d is %v", l, colOffset+j, i, v)
		}
		return fmt.Errorf("loss %s (beta %v) needs X > 0 everywhere, as scikit-learn does for beta <= 0: sample %d, feature %d is 0 "+
			"(add a small value to X, or use a loss with beta > 0 such as kl)", l, l.Beta(), colOffset+j, i)
	}
	m, n := x.Dims()
	switch xb := x.(type) {
	case *Dense:
		for j := 0; j < n; j++ {
			for i := 0; i < m; i++ {
				if v := xb.At(i, j); (!(v >= 0) || positive && v == 0) && !skip(j, i, v) {
					return bad(j, i, v)
				}
			}
		}
	case *CSC:
		// gap returns the first row of [lo, hi), all unstored, that the check does not skip.
		gap := func(j, lo, hi int) int {
			for i := lo; i < hi; i++ {
				if !skip(j, i, 0) {
					return i
				}
			}
			return -1
		}
		for j := 0; j < n; j++ {
			next := 0 // the first row not yet seen stored in column j
			for t := xb.ColPtr[j]; t < xb.ColPtr[j+1]; t++ {
				i := int(xb.RowIdx[t])
				if positive && i > next {
					if g := gap(j, next, i); g >= 0 {
						return bad(j, g, 0)
					}
				}
				if v := xb.value(t); (!(v >= 0) || positive && v == 0) && !skip(j, i, v) {
					return bad(j, i, v)
				}
				next = i + 1
			}
			if positive && next < m {
				if g := gap(j, next, m); g >= 0 {
					return bad(j, g, 0)
				}
			}
		}
	default:
		return fmt.Errorf("kernels: unknown block type %T", x)
	}
	return nil
}
