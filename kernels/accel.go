package kernels

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Accelerated DID (the paper's future work: Hsieh & Dhillon 2011, Gillis & Glineur 2012). Two
// inner loops are nearly free in DID and need no further allreduce (see "Accelerated DID" in
// doc.go):
//
//   - C: while h_j = B^T x_j (Gram form) or the residual (residual form) is at hand, further
//     coordinate sweeps over c_j cost K^2 (Gram) per sweep, against the M K of reading the
//     column;
//   - B: after the allreduce every replica holds W and V; further sweeps over B from them cost
//     M K^2 and touch no data.
//
// Each loop stops adaptively, as Gillis and Glineur's accelerated HALS does: after sweep l, the
// next runs while l < the cap and the squared norm of sweep l's step exceeds Eps^2 times the
// first sweep's. The C decision is taken per column from that column's values and the
// replicated B, and the B decision from replicated values only, so the iterates do not depend
// on the node count, the lanes or the kernel path. On another shard count they differ by
// round-off, as plain DID's do (the allreduce sums the shards' W and V in another order).

// Accel sets accelerated DID's inner loops. The zero value is plain DID, bit for bit.
type Accel struct {
	// CSweeps is the most coordinate sweeps over a column of C an iteration makes (1 or 0:
	// one, as plain DID).
	CSweeps int
	// BSweeps is the most sweeps over B an iteration makes from the reduced W and V (1 or 0:
	// one, as plain DID).
	BSweeps int
	// Eps in (0, 1) is the relative step below which an inner loop stops: a column of C (or B)
	// sweeps again only while the squared norm of its last step exceeds Eps^2 times that of
	// its first.
	Eps float64
	// Extrapolate adds Ang & Gillis's extrapolation with restarts (2019) to DID: each
	// iteration's C (in the same pass) and the next iteration's starting B move on along their
	// last step by a factor beta that grows while the objective keeps its lowest value and
	// shrinks, with a restart from the plain iterate, when it is above it (see extrapolation
	// in did.go). beta
	// depends only on the replicated objective, so the iterates stay independent of the
	// sharding.
	Extrapolate bool
}

// AccelAuto is the inner loops --accel auto selects: at most 3 sweeps over each column of C
// and 20 over B, stopping at a tenth of the first step, with extrapolation (chosen on the bank
// of BENCHMARKS.md, "Fewer passes"). B's sweeps touch no data and their step rule stops them
// long before the cap where they no longer pay: against 5, 20 took 44 passes instead of 102 to
// the paper's tolerance on its synthetic. More C sweeps cut passes further there (10: 37) but
// fit C to the random initial B so closely that, with an L1 penalty, components die in the
// first iterations (a 40 x 1500 sparse problem stalled at 9x plain DID's objective with 4 or
// more; TestAccelHBFewerIterations).
var AccelAuto = Accel{CSweeps: 3, BSweeps: 20, Eps: 0.1, Extrapolate: true}

// MaxAccelSweeps bounds CSweeps and BSweeps: more sweeps than this cost more than the pass
// they save on every problem measured.
const MaxAccelSweeps = 100

// On reports whether a makes any extra sweep.
func (a Accel) On() bool { return a.sweeps() || a.Extrapolate }

// sweeps reports whether a makes further inner sweeps.
func (a Accel) sweeps() bool { return a.CSweeps > 1 || a.BSweeps > 1 }

// cExtra and bExtra are the sweeps beyond the first.
func (a Accel) cExtra() int { return max(a.CSweeps-1, 0) }
func (a Accel) bExtra() int { return max(a.BSweeps-1, 0) }

// eps2 is Eps^2, rounded once: the factor of a loop's first step below which it stops.
func (a Accel) eps2() float64 { return a.Eps * a.Eps }

// String gives the form ParseAccel reads: "off", "auto" for AccelAuto, "x" for extrapolation
// alone, else "C,B,eps" with ",x" when it extrapolates.
func (a Accel) String() string {
	switch {
	case !a.On():
		return "off"
	case a == AccelAuto:
		return "auto"
	case !a.sweeps():
		return "x"
	}
	s := fmt.Sprintf("%d,%d,%s", max(a.CSweeps, 1), max(a.BSweeps, 1), strconv.FormatFloat(a.Eps, 'g', -1, 64))
	if a.Extrapolate {
		s += ",x"
	}
	return s
}

// ParseAccel reads --accel: "off" (plain DID), "auto" (AccelAuto), "C,B" (at most C sweeps
// over each column of C and B over B, stopping at AccelAuto's Eps) or "C,B,eps", each
// followed by ",x" to extrapolate as well, or "x" (extrapolation alone).
func ParseAccel(s string) (Accel, error) {
	switch strings.TrimSpace(s) {
	case "off", "1,1":
		return Accel{}, nil
	case "auto":
		return AccelAuto, nil
	case "x":
		return Accel{Extrapolate: true}, nil
	}
	parts := strings.Split(s, ",")
	extrap := len(parts) > 2 && strings.TrimSpace(parts[len(parts)-1]) == "x"
	if extrap {
		parts = parts[:len(parts)-1]
	}
	if len(parts) < 2 || len(parts) > 3 {
		return Accel{}, fmt.Errorf("accel %q: want off, auto, x, C,B or C,B,eps, optionally followed by ,x (C sweeps over each column of C, B over B, eps the relative step that stops them, x to extrapolate)", s)
	}
	var a Accel
	var err error
	if a.CSweeps, err = strconv.Atoi(strings.TrimSpace(parts[0])); err != nil {
		return Accel{}, fmt.Errorf("accel %q: C sweeps %q is not an integer", s, parts[0])
	}
	if a.BSweeps, err = strconv.Atoi(strings.TrimSpace(parts[1])); err != nil {
		return Accel{}, fmt.Errorf("accel %q: B sweeps %q is not an integer", s, parts[1])
	}
	if a.CSweeps < 1 || a.BSweeps < 1 { // the text names sweeps made: 1 is the plain loop's one
		return Accel{}, fmt.Errorf("accel %q: sweeps must be in 1..%d, got C %d and B %d", s, MaxAccelSweeps, a.CSweeps, a.BSweeps)
	}
	a.Eps = AccelAuto.Eps
	if len(parts) == 3 {
		// A decimal number, as Python's accel_flag takes: ParseFloat also reads hexadecimal
		// ("0x1p-3") and underscores after a base prefix ("0_1" is 1).
		if a.Eps, err = strconv.ParseFloat(strings.TrimSpace(parts[2]), 64); err != nil || strings.ContainsAny(parts[2], "_xX") {
			return Accel{}, fmt.Errorf("accel %q: eps %q is not a number", s, parts[2])
		}
		if !(a.Eps > 0 && a.Eps < 1) { // refused even where no extra sweep would read it (1,1,5)
			return Accel{}, fmt.Errorf("accel %q: eps must be a number in (0, 1), got %v", s, a.Eps)
		}
	}
	a.Extrapolate = extrap
	if err := a.check(); err != nil {
		return Accel{}, fmt.Errorf("accel %q: %v", s, err)
	}
	if !a.sweeps() {
		return Accel{Extrapolate: extrap}, nil
	}
	return a, nil
}

// Set implements flag.Value.
func (a *Accel) Set(s string) error {
	v, err := ParseAccel(s)
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// MarshalText gives String's form.
func (a Accel) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText reads what ParseAccel reads.
func (a *Accel) UnmarshalText(b []byte) error { return a.Set(string(b)) }

// check refuses sweep counts out of [0, MaxAccelSweeps] and, with extra sweeps, an Eps outside
// (0, 1).
func (a Accel) check() error {
	if a.CSweeps < 0 || a.CSweeps > MaxAccelSweeps || a.BSweeps < 0 || a.BSweeps > MaxAccelSweeps {
		return fmt.Errorf("sweeps must be in 1..%d, got C %d and B %d", MaxAccelSweeps, a.CSweeps, a.BSweeps)
	}
	if a.sweeps() && !(a.Eps > 0 && a.Eps < 1) {
		return fmt.Errorf("eps must be a number in (0, 1), got %v", a.Eps)
	}
	return nil
}

// accelAlgorithms are the algorithms with accelerated inner loops.
var accelAlgorithms = []Algorithm{DID, BCD, HALS}

// AccelAlgorithms lists the algorithms that take Options.Accel.
func AccelAlgorithms() []Algorithm { return slices.Clone(accelAlgorithms) }

// ValidateAccel checks Options.Accel for an algorithm: counts in range, Eps in (0, 1), extra
// sweeps only for did, bcd and hals, and extrapolation only for did without missing values or
// a test set. NewMachine (and so Run) calls it.
func (o Options) ValidateAccel(algo Algorithm) error {
	if err := o.Accel.check(); err != nil {
		return fmt.Errorf("accel: %v", err)
	}
	if o.Accel.On() && o.Masked() && (algo == BCD || algo == HALS) {
		return fmt.Errorf("algorithm %s has no accelerated inner loops with %s (--accel %s): use --accel off, or algorithm did", algo, o.maskWhat(), o.Accel)
	}
	if !o.Accel.On() {
		return nil
	}
	if slices.Contains(accelAlgorithms, algo) {
		return o.validateExtrapolation(algo)
	}
	names := make([]string, len(accelAlgorithms))
	for i, a := range accelAlgorithms {
		names[i] = string(a)
	}
	return fmt.Errorf("algorithm %s has no accelerated inner loops (--accel %s): the algorithms that have are %s",
		algo, o.Accel, strings.Join(names, ", "))
}

// validateExtrapolation refuses Accel.Extrapolate for an algorithm with inner loops other
// than did, and for did with missing values or a test set.
func (o Options) validateExtrapolation(algo Algorithm) error {
	if o.Accel.Extrapolate {
		if algo != DID {
			return fmt.Errorf("algorithm %s does not extrapolate (--accel %s): only did does; use --accel C,B for its inner sweeps alone", algo, o.Accel)
		}
		if o.Masked() {
			return fmt.Errorf("did cannot extrapolate (--accel %s) with %s yet: use --accel C,B (inner sweeps alone), which can", o.Accel, o.maskWhat())
		}
	}
	return nil
}

// Pinned arithmetic of the inner loops (the assembly paths match it bit for bit).
//
// C, per column j with coefficients c (K values) before the iteration's first sweep and c1
// after it (updateCoefsGo's step 2), h_j, -G and 1/diag(G) as step 2 reads them:
//
//	first = 0; for p < K: d = c1[p] - c0[p]; first = fma(d, d, first)
//	thr = first * eps2                       (one rounded product)
//	st = first; l = 1
//	while l < CSweeps and st > thr:          (NaN stops)
//	    o = c; c = step 2 on c (updateCoefsGo's operations for this column)
//	    st = 0; for p < K: d = c[p] - o[p]; st = fma(d, d, st)
//	    l = l + 1
//
// A vector path may run the sweeps of several columns together, each lane keeping its
// column's values once its loop has stopped.

// sweepCoefsGo runs the further C sweeps on ncols columns after update: old holds the
// coefficients before update (k per column), c and cs (kp per column) the coefficients after
// it. It leaves the final coefficients in c and cs (cs's pads untouched). extra is
// CSweeps - 1 and eps2 is Accel.eps2().
func sweepCoefsGo(h, cs, c, old, gneg, ginv []float64, k, kp, ncols, extra int, eps2 float64) {
	if extra <= 0 {
		return
	}
	var o [16]float64
	prev := o[:0]
	if k <= len(o) {
		prev = o[:k]
	} else {
		prev = make([]float64, k)
	}
	for j := 0; j < ncols; j++ {
		cj := c[j*k : j*k+k]
		row := cs[j*kp : j*kp+k]
		hj := h[j*kp : j*kp+k]
		var first float64
		for p, v := range row {
			d := v - old[j*k+p]
			first = math.FMA(d, d, first)
		}
		thr := first * eps2
		st := first
		for l := 0; l < extra && st > thr; l++ {
			copy(prev, row)
			updateCoefRow(row, hj, gneg, ginv, k)
			st = 0
			for p, v := range row {
				d := v - prev[p]
				st = math.FMA(d, d, st)
			}
		}
		copy(cj, row)
	}
}

// sweepBasis runs the further B sweeps after DID's first (incrementalBUpdate's loop), from the
// reduced w (W = X C^T - B_old C C^T, M x K column-major, penalty-shifted when B is penalized)
// and v (C C^T, K x K full, shifted likewise). bOld is B before the first sweep, db holds
// B - B_old on entry and on return. A sweep updates each component p with v_pp > 0 in order:
//
//	b_pi <- max(0, b_pi + (w_pi - sum_q v_pq db_qi) / v_pp),  db_pi = b_pi - bOld_pi
//
// (each product v_pq db_qi rounded, subtracted in q order), and the loop runs while the squared
// norm of a sweep's step (st = fma(d, d, st) component by component, row by row) exceeds
// eps2 times the first sweep's (db on entry). It polls flag before each component.
func sweepBasis(b, bOld, w, v, db []float64, m, k, extra int, eps2 float64, flag *interruptFlag) {
	if extra <= 0 {
		return
	}
	var first float64
	for _, d := range db[:m*k] {
		first = math.FMA(d, d, first)
	}
	thr := first * eps2
	st := first
	for l := 0; l < extra && st > thr; l++ {
		st = 0
		for p := 0; p < k; p++ {
			flag.poll()
			vpp := v[p*k+p]
			if !(vpp > 0) {
				continue
			}
			bp, wp, dbp, op := b[p*m:(p+1)*m], w[p*m:(p+1)*m], db[p*m:(p+1)*m], bOld[p*m:(p+1)*m]
			vrow := v[p*k : p*k+k]
			for i := 0; i < m; i++ {
				num := wp[i]
				for q, vq := range vrow {
					num -= float64(vq * db[q*m+i])
				}
				nb := bp[i] + num/vpp
				if nb < 0 {
					nb = 0
				}
				d := nb - bp[i]
				st = math.FMA(d, d, st)
				bp[i] = nb
				dbp[i] = nb - op[i]
			}
		}
	}
}
