package kernels

import (
	"math"
	"slices"
)

// MU for the beta-divergences (Options.Loss other than LossFrobenius), as scikit-learn 1.2's
// solver="mu" computes them (sklearn/decomposition/_nmf.py: _multiplicative_update_w and _h,
// _beta_divergence), with its epsilon conventions. With Y = BC (scikit-learn's W H, transposed),
// EPS = float32 eps = 2^-23 and gamma = 1/(2 - beta) for beta < 1, 1/(beta - 1) for beta > 2,
// else 1, an iteration makes
//
//	R   = X .* Ys^(beta-2)              (KL: X ./ Ys; IS: (1 ./ Ys)^2 .* X), Ys = Y with 0 -> EPS
//	                                    when beta < 2; R is 0 wherever X is, so only the stored
//	                                    (nonzero) entries of X enter it
//	Dn  = Yd^(beta-1)                   (beta != 1), Yd = Y with 0 -> EPS when beta < 1
//	C  <- C .* ((B^T R) ./ den_C)^gamma, den_C = B^T Dn, or for KL the column sums of B;
//	      den = (den + l1C) + l2C C (each term when > 0), then 0 -> EPS
//	      then, for beta < 1, entries below float64 eps -> 0
//	B  <- B .* ((R C^T) ./ den_B)^gamma, with R, Dn at B C_new: den_B = Dn C^T, or for KL the
//	      row sums of C (0 -> 1); the same penalty and EPS rules with l1B, l2B;
//	      then, for beta <= 1, entries below float64 eps -> 0
//
// Powers follow numpy's: exponent 1, -1, 0, 0.5 and 2 are x, 1/x, 1, sqrt(x) and x*x, the
// others powPinned (math.Pow's algorithm with an exp of our own: math.Exp on amd64 uses FMA
// when the CPU has it, and math.Pow calls it, so neither is pinned).
//
// The objective is 2 D_beta(X | BC) plus the penalties ("Losses" in doc.go), D_beta exactly
// as _beta_divergence sums it: over the entries with x > EPS (Ys for Y), and for KL
// sum x log(x/Ys) + (sum_k colsum(B)_k rowsum(C)_k - sum x); for IS
// (sum x/Ys - M N) - sum log(x/Ys); otherwise
// ((sum x^beta - beta sum x Ys^(beta-1)) + (beta - 1) sum_all Y^beta) / (beta (beta - 1)).
//
// Arithmetic (beta_lane.go): the products with the factors, Y = B C, B^T R, B^T Dn, R C^T and
// Dn C^T, run on the Gram lane's steps 1 and 3 (gramlane.go) of the process's kernel path,
// fma in a fixed order, a batch of columns at a time; the quotients, powers and loss terms
// entry by entry, and the C update, in plain Go. KL's and IS's logarithms are sumLogs's
// table-driven log (beta_log.go), within about an ulp of math.Log; IS's x/Ys is x (1/Ys), its
// weight times x; y^beta is y y^(beta-1), the weight times y; sum x^beta, a constant of X, is
// summed once. (Before, every product was a plain-Go dot or axpy, unfused, and the loss took
// math.Log and powNumpy: the factors now differ from those by rounding, and stay as close to
// scikit-learn's, TestLossesMatchScikitLearn; the objective at given factors is within 1e-13
// relative of the former's, TestLossObjectiveMatchesReference.)
//
// Sparse-aware: KL touches only the stored entries of a CSC block: with fewer than a quarter
// stored (perEntryY) Y there is the same fma chain over a row of B and a column of C, entry by
// entry, and the products run on the stored entries; otherwise, as for IS and the other betas,
// which need Y at every entry for their denominators (and the loss), a batch of columns is made
// dense. Y is formed a batch of columns at a time, never the whole of it. An entry x = 0 has
// R = +0, which leaves the products' sums as they are, so dense and CSC blocks give the same
// bits (their lanes are cut alike, by columns).
//
// Distribution: one allreduce per iteration. A shard's pass over its columns does everything
// that needs its data: with B (replicated) and its C_i it computes the loss terms of (B, C_i),
// the C update C_i_new, and with B and C_i_new the partial sums of the B update's numerator
// R C^T (M x K) and denominator (M x K, for KL the K row sums of C_i_new). One allreduce
// ("mu.beta") sums, in the reduce tree's fixed order,
//
//	numerator (M x K) | denominator (M x K, KL: K) | loss terms | ||C_i||_1, ||C_i||^2 (penalty on C)
//
// with loss terms [sum x log(x/Ys), sum x, rowsum(C_i) (K)] for KL, [sum x/Ys, sum log(x/Ys)]
// for IS and [sum x^beta, sum x Ys^(beta-1), sum Y^beta] otherwise. Every shard then makes
// the same B update.
//
// The loss of (B_new, C_new) needs another pass with B_new, which only the next iteration
// makes. So the pipeline runs half an iteration ahead: the pass of the initialisation
// (allreduce "mu.beta" of iteration 0) gives the initial objective and B_1, C_1; the pass of
// iteration t, over (B_t, C_t), gives their loss, C_{t+1} and B_{t+1}, and iteration t ends
// reporting (B_t, C_t) and their objective, exactly, with C_{t+1} and B_{t+1} held for
// iteration t+1. A run of T iterations returns scikit-learn's iterate T (its max_iter = T) at
// the cost of one pass more than T. The Snapshot State is [B_{t+1}] (M x K, the reduced part;
// snapshot.go's list of State layouts, which says none for mu, holds for the Frobenius loss
// only): a resumed shard recomputes C_{t+1} from (B_t, C_t), bitwise, without a collective.
// An interrupted iteration t+1 leaves Basis and Coef at (B_{t+1}, C_{t+1}): the consistent
// iterate it started from and would have reported, not a mix of two.
//
// Every sum runs in a fixed order: entries of a column in row order, columns in order within
// a lane (laneBounds, a function of the block), lanes in lane order, shards by the reduce
// tree: so the bits depend on the shard count but not on the thread count, the kernel path
// (every path's Gram lane steps give the same bits) or GOAMD64.

// EPSILON and np.finfo(np.float64).eps of scikit-learn's _nmf.py.
const (
	sklearnEps   = 0x1p-23 // np.finfo(np.float32).eps
	sklearnEps64 = 0x1p-52 // np.finfo(np.float64).eps
)

// betaLoss is a loss's beta with the constants of its updates.
type betaLoss struct {
	beta, gamma float64
	kl, is      bool // beta == 1, beta == 0
}

func newBetaLoss(l Loss) betaLoss {
	beta := l.Beta()
	gamma := 1.0
	switch {
	case beta < 1:
		gamma = 1 / (2 - beta)
	case beta > 2:
		gamma = 1 / (beta - 1)
	}
	return betaLoss{beta: beta, gamma: gamma, kl: beta == 1, is: beta == 0}
}

// ratio returns the entry x Ys^(beta-2) of R for x != 0 and y = (BC)_ij.
func (l *betaLoss) ratio(x, y float64) float64 {
	if y == 0 && l.beta < 2 {
		y = sklearnEps
	}
	switch {
	case l.kl:
		return x / y
	case l.is:
		r := 1 / y
		return float64(float64(r*r) * x)
	}
	return float64(powNumpy(y, l.beta-2) * x)
}

// weight returns Yd^(beta-1), the entry of the denominators' Dn (beta != 1).
func (l *betaLoss) weight(y float64) float64 {
	if y == 0 && l.beta < 1 {
		y = sklearnEps
	}
	return powNumpy(y, l.beta-1)
}

// step returns f .* (num/den)^gamma with den penalized as scikit-learn does, and the entries
// below float64 eps set to 0 when zero is set.
func (l *betaLoss) step(f, num, den, l1, l2 float64, zero bool) float64 {
	if l1 > 0 {
		den += l1
	}
	if l2 > 0 {
		den = den + float64(l2*f)
	}
	if den == 0 {
		den = sklearnEps
	}
	delta := num / den
	if l.gamma != 1 {
		delta = powNumpy(delta, l.gamma)
	}
	v := float64(f * delta)
	if zero && v < sklearnEps64 {
		v = 0
	}
	return v
}

// lossLen is the number of loss terms in the payload.
func (l *betaLoss) lossLen(k int) int {
	switch {
	case l.kl:
		return 2 + k
	case l.is:
		return 2
	}
	return 3
}

// divergence returns D_beta from the reduced loss terms t (see lossLen), the column sums of B
// (KL) and the size of X, in _beta_divergence's order.
func (l *betaLoss) divergence(t, bsum []float64, m, n int) float64 {
	switch {
	case l.kl:
		var sumY float64
		for p, s := range bsum {
			sumY += float64(s * t[2+p])
		}
		return t[0] + (sumY - t[1])
	case l.is:
		return (t[0] - float64(m*n)) - t[1]
	}
	b := l.beta
	return ((t[0] - float64(b*t[1])) + float64(t[2]*(b-1))) / float64(b*(b-1))
}

// muBeta runs MU for a beta-divergence on one shard.
type muBeta struct {
	e       *shardEnv
	x       Block
	m, n, k int
	mp, kp  int // M and K rounded up to multiples of 4 (the Gram lane's widths)
	loss    betaLoss
	pen     penalty
	kern    *gramKernels
	lanes   []int
	lane    []betaLane
	span    int       // columns between two looks at the interrupt flag
	bt      []float64 // B^T in K rows of Mp (pads 0): Y = B C on the Gram lane's step 1
	bp      []float64 // B in M rows of Kp (pads 0): B^T R and R C^T on steps 1 and 3
	bsum    []float64 // the column sums of B (KL)
	denLen  int       // M*K, or K for KL
	// sparseY: a CSC block's KL quotients take Y at its stored entries, one dot each, instead
	// of whole columns of Y (the same values: see perEntryY).
	sparseY bool
	// cols: B^T R, B^T Dn and the B update's sums run on the path's column-lane kernels
	// (gramlane.go's denseCols, the same bits), and the lanes hold those sums column-major
	// (M x K, as B) rather than in M rows of Kp.
	cols *denseCols
	// mk is the mask of a masked run with unobserved entries (mumask.go), nil otherwise: the
	// pass, the payload, the B update and the objective are then its.
	mk *muMask
}

func newMUBeta(e *shardEnv) *muBeta {
	x, m, n, k := e.spec.X, e.rows, e.cols, e.k
	s := &muBeta{e: e, x: x, m: m, n: n, k: k, mp: paddedK(m), kp: paddedK(k), loss: newBetaLoss(e.spec.Loss),
		pen: e.penalty(), kern: e.gram(), lanes: laneBounds(x, 2*k), bsum: make([]float64, k), denLen: m * k}
	s.bt = make([]float64, k*s.mp)
	s.bp = make([]float64, colsRows(m)*s.kp) // rows from M on stay 0 (denseCols reads them)
	if sp, ok := x.(*CSC); ok {
		if s.kern != &genericGram && sp.Validate() != nil {
			s.kern = &genericGram // the assembly trusts row indices
		}
		s.sparseY = s.loss.kl && perEntryY(sp, m)
	}
	if s.kern.cols != nil && m >= colsMinRows && !s.sparseY {
		s.cols = s.kern.cols
	}
	if s.loss.kl {
		s.denLen = k
	}
	work := 4 * colWork(x, k)
	if !s.loss.kl {
		work = 6 * m * k
	}
	s.span = e.flag.span(work, 1)
	if s.loss.kl || s.loss.is {
		initLogTable()
	}
	s.lane = make([]betaLane, len(s.lanes)-1)
	for l := range s.lane {
		s.lane[l] = s.newLane()
	}
	return s
}

// payloadLen is the length of the allreduce payload.
func (s *muBeta) payloadLen() int {
	if s.mk != nil {
		return s.mk.payloadLen()
	}
	n := s.m*s.k + s.denLen + s.loss.lossLen(s.k)
	if s.pen.coef() {
		n += 2
	}
	return n
}

// prepare sets the packed copies and the column sums of B.
func (s *muBeta) prepare(b []float64) {
	m, k, mp := s.m, s.k, s.mp
	packRows(s.bp, b, m, k)
	for p := 0; p < k; p++ {
		s.e.flag.poll()
		col := b[p*m : (p+1)*m]
		copy(s.bt[p*mp:p*mp+m], col) // pads stay 0
		var t float64
		for _, v := range col {
			t += v
		}
		s.bsum[p] = t
	}
}

// pass sweeps the shard's columns with B (prepared) and C, writing the C update into cn;
// with full it also sums, per lane, the loss terms of (B, C) and the B update's numerator and
// denominator at (B, cn), and returns the payload (nil without full).
func (s *muBeta) pass(c, cn, payload []float64, full bool) []float64 {
	if s.mk != nil {
		return s.mk.pass(c, cn, payload, full)
	}
	s.e.spec.Pool.Run(len(s.lane), func(l int) {
		s.runLane(&s.lane[l], s.lanes[l], s.lanes[l+1], c, cn, full)
	})
	s.e.flag.poll()
	if !full {
		return nil
	}
	m, k := s.m, s.k
	// Lane sums in lane order, into lane 0's accumulators.
	first := &s.lane[0]
	for l := 1; l < len(s.lane); l++ {
		s.e.flag.poll()
		ln := &s.lane[l]
		for i, v := range ln.numB {
			first.numB[i] += v
		}
		for i, v := range ln.denB {
			first.denB[i] += v
		}
		for i, v := range ln.terms {
			first.terms[i] += v
		}
	}
	// The payload: numerator and denominator column-major, as B.
	den := payload[m*k : m*k+s.denLen]
	switch {
	case s.cols != nil:
		copy(payload[:m*k], first.numB)
		copy(den, first.denB)
	case s.loss.kl:
		unpackRows(payload[:m*k], first.numB, m, k)
		copy(den, first.denB)
	default:
		unpackRows(payload[:m*k], first.numB, m, k)
		unpackRows(den, first.denB, m, k)
	}
	at := m*k + s.denLen
	copy(payload[at:], first.terms)
	if s.pen.coef() {
		at += len(first.terms)
		payload[at], payload[at+1] = factorNorms(c, s.e.flag)
	}
	return payload
}

// updateB writes into bn the B update of b from the reduced payload.
func (s *muBeta) updateB(b, bn, sum []float64) {
	if s.mk != nil {
		s.mk.updateB(b, bn, sum)
		return
	}
	m, k, l := s.m, s.k, &s.loss
	num, den := sum[:m*k], sum[m*k:m*k+s.denLen]
	for p := 0; p < k; p++ {
		s.e.flag.poll()
		var dk float64
		if l.kl {
			if dk = den[p]; dk == 0 {
				dk = 1 // scikit-learn's W_sum[W_sum == 0] = 1
			}
		}
		for i := p * m; i < (p+1)*m; i++ {
			d := dk
			if !l.kl {
				d = den[i]
			}
			bn[i] = l.step(b[i], num[i], d, s.pen.l1B, s.pen.l2B, l.beta <= 1)
		}
	}
}

// objective returns 2 D_beta + the penalties of (B, C) from the reduced payload (B prepared).
func (s *muBeta) objective(b, sum []float64) float64 {
	if s.mk != nil {
		return s.mk.objective(b, sum)
	}
	at := s.m*s.k + s.denLen
	terms := sum[at : at+s.loss.lossLen(s.k)]
	obj := 2 * s.loss.divergence(terms, s.bsum, s.m, s.e.spec.TotalCols)
	if s.pen.on() {
		var penC float64
		if s.pen.coef() {
			at += len(terms)
			penC = s.pen.coefValue(sum[at], sum[at+1])
		}
		obj = obj + penC + s.pen.basisPenalty(b, s.e.flag)
	}
	return obj
}

func runMUBeta(e *shardEnv) {
	if err := e.spec.Loss.CheckData(e.spec.X, e.spec.ColOffset); err != nil {
		panic(err)
	}
	s := newMUBeta(e)
	first, initial, state := e.begin()
	s.run(first, initial, state)
}

// run runs the iterations from the first iteration, initial objective and state e.begin
// returned. A masked muBeta (mk, mumask.go) also reports the held-out error of (B_t, C_t).
func (s *muBeta) run(first int, initial float64, state [][]float64) {
	e := s.e
	m, k := s.m, s.k
	bn := make([]float64, m*k)      // B_{t+1}
	cn := make([]float64, len(e.C)) // C_{t+1}
	payload := make([]float64, s.payloadLen())
	if first == 1 {
		s.prepare(e.B)
		sum := e.allReduce("mu.beta", 0, s.pass(e.C, cn, payload, true))
		initial = s.objective(e.B, sum)
		if s.mk != nil {
			s.mk.ms.initialTest = s.mk.heldOut(sum)
		}
		s.updateB(e.B, bn, sum)
	} else {
		copy(bn, state[0])
		s.prepare(e.B)
		s.pass(e.C, cn, nil, false)
	}
	e.state = func() [][]float64 { return [][]float64{slices.Clone(bn)} }
	for it := first; ; it++ {
		e.B, bn = bn, e.B
		e.C, cn = cn, e.C
		s.prepare(e.B)
		sum := e.allReduce("mu.beta", it, s.pass(e.C, cn, payload, true))
		obj := s.objective(e.B, sum)
		if s.mk != nil {
			s.mk.ms.test = s.mk.heldOut(sum)
		}
		s.updateB(e.B, bn, sum)
		e.iterationDone(it, obj, initial)
	}
}

// powNumpy returns x**e as numpy computes an array to a scalar power: exponents 1, -1, 0, 0.5
// and 2 are x, 1/x, 1, sqrt(x) and x*x (numpy's fast paths), the others powPinned.
func powNumpy(x, e float64) float64 {
	switch e {
	case 1:
		return x
	case -1:
		return 1 / x
	case 0:
		return 1
	case 0.5:
		return math.Sqrt(x)
	case 2:
		return float64(x * x)
	}
	return powPinned(x, e)
}

// powPinned returns x**y by math.Pow's algorithm (src/math/pow.go) with expPinned for
// math.Exp, so that it is the same in every build and on every CPU (see beta.go's comment).
func powPinned(x, y float64) float64 {
	switch {
	case y == 0 || x == 1:
		return 1
	case y == 1:
		return x
	case math.IsNaN(x) || math.IsNaN(y):
		return math.NaN()
	case x == 0:
		switch {
		case y < 0:
			if math.Signbit(x) && isOddInt(y) {
				return math.Inf(-1)
			}
			return math.Inf(1)
		case y > 0:
			if math.Signbit(x) && isOddInt(y) {
				return x
			}
			return 0
		}
	case math.IsInf(y, 0):
		switch {
		case x == -1:
			return 1
		case (math.Abs(x) < 1) == math.IsInf(y, 1):
			return 0
		default:
			return math.Inf(1)
		}
	case math.IsInf(x, 0):
		if math.IsInf(x, -1) {
			return powPinned(1/x, -y) // Pow(-0, -y)
		}
		switch {
		case y < 0:
			return 0
		case y > 0:
			return math.Inf(1)
		}
	case y == 0.5:
		return math.Sqrt(x)
	case y == -0.5:
		return 1 / math.Sqrt(x)
	}
	yi, yf := math.Modf(math.Abs(y))
	if yf != 0 && x < 0 {
		return math.NaN()
	}
	if yi >= 1<<63 {
		switch {
		case x == -1:
			return 1
		case (math.Abs(x) < 1) == (y > 0):
			return 0
		default:
			return math.Inf(1)
		}
	}
	// ans = a1 * 2**ae (= 1 for now).
	a1 := 1.0
	ae := 0
	// ans *= x**yf
	if yf != 0 {
		if yf > 0.5 {
			yf--
			yi++
		}
		a1 = expPinned(float64(yf * math.Log(x)))
	}
	// ans *= x**yi by successive squarings of x, powers of two into ae.
	x1, xe := math.Frexp(x)
	for i := int64(yi); i != 0; i >>= 1 {
		if xe < -1<<12 || 1<<12 < xe {
			ae += xe
			break
		}
		if i&1 == 1 {
			a1 *= x1
			ae += xe
		}
		x1 = float64(x1 * x1) // rounded before the doubling below
		xe <<= 1
		if x1 < .5 {
			x1 += x1
			xe--
		}
	}
	// ans = a1 * 2**ae; if y < 0 { ans = 1 / ans } but in the opposite order.
	if y < 0 {
		a1 = 1 / a1
		ae = -ae
	}
	return math.Ldexp(a1, ae)
}

func isOddInt(x float64) bool {
	if math.Abs(x) >= 1<<53 {
		return false
	}
	xi, xf := math.Modf(x)
	return xf == 0 && int64(xi)&1 == 1
}

// expPinned returns e**x by math.Exp's pure-Go algorithm (src/math/exp.go, from FreeBSD's
// e_exp.c), every product that feeds an addition rounded on its own ("Pinned arithmetic").
func expPinned(x float64) float64 {
	const (
		ln2Hi = 6.93147180369123816490e-01
		ln2Lo = 1.90821492927058770002e-10
		log2e = 1.44269504088896338700e+00

		overflow  = 7.09782712893383973096e+02
		underflow = -7.45133219101941108420e+02
		nearZero  = 1.0 / (1 << 28) // 2**-28

		p1 = 1.66666666666666657415e-01  /* 0x3FC55555; 0x55555555 */
		p2 = -2.77777777770155933842e-03 /* 0xBF66C16C; 0x16BEBD93 */
		p3 = 6.61375632143793436117e-05  /* 0x3F11566A; 0xAF25DE2C */
		p4 = -1.65339022054652515390e-06 /* 0xBEBBBD41; 0xC5D26BF1 */
		p5 = 4.13813679705723846039e-08  /* 0x3E663769; 0x72BEA4D0 */
	)
	switch {
	case math.IsNaN(x):
		return x
	case x > overflow:
		return math.Inf(1)
	case x < underflow:
		return 0
	case -nearZero < x && x < nearZero:
		return 1 + x
	}
	// Reduce: x = k ln2 + r, r = hi - lo for extra precision.
	var k int
	switch {
	case x < 0:
		k = int(float64(log2e*x) - 0.5)
	case x > 0:
		k = int(float64(log2e*x) + 0.5)
	}
	hi := x - float64(float64(k)*ln2Hi)
	lo := float64(k) * ln2Lo
	r := hi - lo
	t := r * r
	q := p4 + float64(t*p5)
	q = p3 + float64(t*q)
	q = p2 + float64(t*q)
	q = p1 + float64(t*q)
	c := r - float64(t*q)
	y := 1 - ((lo - float64(r*c)/(2-c)) - hi)
	return math.Ldexp(y, k)
}
