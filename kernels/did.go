package kernels

import "math"

// DID (Gao & Chu 2018, Algorithm 3). Each iteration a shard updates its columns of C by
// coordinate descent with the current B, forms W_i = E_i C_i^T and V_i = C_i C_i^T, and one
// allreduce gives W and V to every shard, which then update B column by column:
//
//	b_k <- max(0, b_k + (w_k - sum_{l<k} v_kl db_l) / v_kk),  db_k = b_k_new - b_k
//
// The partial also carries two scalars: ||X_i - B C_i_old||^2 (the previous iterate's
// objective, which at iteration 1 is ||E_0||^2) and ||X_i - B_old C_i_new||^2, from which every
// shard gets the exact objective after the B update without another pass:
//
//	||E_new||^2 = ||E'||^2 - 2 <dB, W> + <dB^T dB, V>,  E' = X - B_old C_new.
//
// Penalties (see "Penalties" in doc.go). The C update takes the penalty on C in its coordinate
// steps (cStep). The penalty on B is a constant shift of the reduced W and V, applied by every
// shard after the allreduce,
//
//	W' = W - l2B B_old - l1B,   V' = V + l2B I,
//
// after which the same B update is scikit-learn's coordinate step on C C^T + l2B I and
// X C^T - l1B, and the same identity with W' and V' gives the change of the penalized
// objective ||X - BC||^2 + 2 l1B ||B||_1 + l2B ||B||^2. B is replicated, so ||B_old||_1 and
// ||B_old||^2 are local; the C penalty needs ||C||_1 and ||C||^2 summed over shards, which
// travel as four extra scalars of the same allreduce, only when C is penalized (so the
// unpenalized payload keeps its length): ||C_i_old||_1, ||C_i_old||^2 (for the objective
// before the iteration, which iteration 1 reports as the initial one), ||C_i_new||_1,
// ||C_i_new||^2. Still one allreduce per iteration.

// didPartialLen is the length of DID's allreduce payload: W, V's lower triangle, with a
// penalty on C the four norms of C_i, and the two objective scalars.
func didPartialLen(m, k int, coefPenalized bool) int {
	n := m*k + lowerLen(k) + 2
	if coefPenalized {
		n += didNormsLen
	}
	return n
}

// didNormsLen is the number of norms of C_i a penalized DID payload carries.
const didNormsLen = 4

func runDID(e *shardEnv) {
	first, initial, state := e.begin()
	if e.masked() {
		if e.m.mask.sm.held != nil {
			runDIDHeld(e, first, initial)
		} else {
			runDIDMasked(e, first, initial)
		}
		return
	}
	st := newCStep(e.spec.X, e.k, e.spec.Pool, e.spec.Form, e.flag, e.gram())
	m, k := e.rows, e.k
	ex := newExtrapolation(e.spec.Accel, m, k, e.cols)
	if first > 1 {
		ex.restore(state[len(state)-ex.slots():])
		st.restore(state[:len(state)-ex.slots()])
	} else {
		ex.begin(e.B, e.C)
	}
	e.state = func() [][]float64 { return append(st.state(), ex.state()...) }
	pen := e.penalty()
	st.l1, st.l2, st.norms = pen.l1C, pen.l2C, pen.coef()
	partial := make([]float64, didPartialLen(m, k, pen.coef()))
	normsAt := m*k + lowerLen(k) // the norms of C_i in the payload (with a penalty on C)
	w := make([]float64, m*k)
	v := make([]float64, k*k)
	db := make([]float64, m*k)
	st.setAccel(e.spec.Accel)
	bs := newBasisSweeps(e.spec.Accel, m, k)
	var c1, c2 float64 // ||C_i||_1 and ||C_i||^2 of the C the next C update starts from
	if pen.coef() {
		c1, c2 = st.normsByLane(e.C)
	}
	for it := first; ; it++ {
		if ex != nil {
			ex.start(e.B, e.C)
			st.setExtrapolation(ex.beta, ex.cprev)
		}
		prev, post := st.run(e.B, e.C, w, v)
		copy(partial, w)
		packLower(partial[m*k:], v, k)
		if pen.coef() {
			norms := partial[normsAt : normsAt+didNormsLen]
			norms[0], norms[1] = c1, c2
			c1, c2 = st.coefNorms()
			norms[2], norms[3] = c1, c2
		}
		partial[len(partial)-2] = prev
		partial[len(partial)-1] = post
		sum := e.allReduce("did.partial", it, partial)
		copy(w, sum[:m*k])
		unpackLower(v, sum[m*k:], k)
		prev, post = sum[len(sum)-2], sum[len(sum)-1]
		if pen.on() {
			// The penalized objective before the B update (the B penalty of B_old); the
			// identity adds the change the B update makes.
			var penC0, penC1 float64
			if pen.coef() {
				norms := sum[normsAt : normsAt+didNormsLen]
				penC0, penC1 = pen.coefValue(norms[0], norms[1]), pen.coefValue(norms[2], norms[3])
			}
			penB := pen.basisPenalty(e.B, e.flag)
			prev = prev + penC0 + penB
			post = post + penC1 + penB
			if pen.basis() {
				shiftBasisStep(w, v, e.B, m, k, pen.l1B, pen.l2B)
			}
		}
		if it == 1 {
			initial = prev
		}
		bs.begin(e.B)
		incrementalBStep(e.B, w, v, db, m, k, e.flag)
		bs.sweep(e.B, w, v, db, m, k, e.flag)
		obj := basisObjective(w, v, db, m, k, post, e.flag)
		ex.finish(obj)
		e.iterationDone(it, obj, initial)
	}
}

// shiftBasisStep turns the reduced W = X C^T - B_old C C^T and V = C C^T into those of the
// penalized B update: w_ik <- (w_ik - l2 b_ik) - l1 and v_kk <- v_kk + l2.
func shiftBasisStep(w, v, b []float64, m, k int, l1, l2 float64) {
	for i, bi := range b[:m*k] {
		w[i] = w[i] - float64(l2*bi) - l1
	}
	shiftGram(v, k, l2)
}

// didState is DID's Snapshot.State layout: the Gram form's cache (see cStep.state), then with
// Accel.Extrapolate the extrapolation's state (see extrapolation.state).
func didState(s *ShardSpec) []stateSlot {
	form := s.Form
	if form == FormAuto {
		form = ChooseForm(s.X, s.K)
	}
	m, n := s.X.Dims()
	var slots []stateSlot
	if form == FormGram {
		slots = []stateSlot{{"A = X_i C_i^T (M x K)", m * s.K}, {"V = C_i C_i^T (K x K)", s.K * s.K}}
	}
	if s.Accel.Extrapolate {
		slots = append(slots, stateSlot{"previous plain C_i (K x n)", s.K * n}, stateSlot{"previous plain B (M x K)", m * s.K},
			stateSlot{"extrapolation: beta, its cap, lowest objective, restart, beta of the last iteration", extrapScalars})
	}
	return slots
}

// Extrapolation (Ang & Gillis, "Accelerating nonnegative matrix factorization algorithms
// using extrapolation", Neural Computation 2019: their HER scheme on DID's two blocks). Every
// iteration n, with plain iterates B_n, C_n (what DID's updates give from the iteration's
// starting point) and beta_n:
//
//	C^_n = max(0, C_n + beta_n (C_n - C_{n-1}))   (each column in its update's pass)
//	B_n from the reduced W, V of C^_n             (DID's B update, and its further sweeps)
//	e_n = ||X - B_n C^_n||^2                       (DID's identity: exact, and what is reported)
//
// and the next iteration starts from C^_n and B^_n = max(0, B_n + beta_n (B_n - B_{n-1})).
// If e_n is above the lowest objective so far, min(e_0..e_{n-1}), it restarts instead, from
// the plain C_n and the plain B_{n-1} (B_n was fitted to the C^_n that overshot: starting from
// it, measured on the paper's synthetic, undid tens of iterations' progress), with cap = beta_n
// and beta = beta_n / 1.5; otherwise beta = min(cap, 1.05 beta_n), cap = min(1, 1.01 cap).
// beta_1 = 0.5, cap 1, e_0 = +Inf.
//
// Ang & Gillis compare e_n with e_{n-1} alone. After an overshoot that lets the iterations that
// follow it count as successes while they are still above the best objective, and beta grows
// again from a bad point: on a sparse count matrix that plain DID solves in 17 passes, the
// comparison with e_{n-1} took 54 passes to plain's error, with the lowest objective 34, and
// it changed no pass on the paper's synthetic or Fashion-MNIST (BENCHMARKS.md, "Fewer passes").
// It also keeps the stall rule's default window right for extrapolating runs.
//
// The machine holds (B_n, C^_n) at an iteration boundary, the pair whose objective e_n is, so
// results and snapshots are consistent; B^_n is formed when the next iteration starts. The
// objective can rise at a restart; it falls otherwise.
type extrapolation struct {
	beta, cap    float64
	best         float64 // the lowest objective so far
	restart      bool
	used         float64   // beta of the last iteration (B^ of the next start moves by it)
	cprev, bprev []float64 // C_{n-1}'s columns of this shard (replaced as the lanes go), B_{n-1}
	started      bool
}

// The extrapolation's constants (Ang & Gillis's defaults) and its scalar state's length.
const (
	extrapBeta0   = 0.5
	extrapShrink  = 1.5
	extrapGrow    = 1.05
	extrapCapGrow = 1.01
	extrapScalars = 5
)

// newExtrapolation returns the extrapolation of accel for an M x K basis and n columns of C
// (nil without Accel.Extrapolate).
func newExtrapolation(a Accel, m, k, n int) *extrapolation {
	if !a.Extrapolate {
		return nil
	}
	return &extrapolation{cprev: makeFloats(k * n), bprev: make([]float64, m*k)}
}

// slots is the number of Snapshot.State slices the extrapolation adds.
func (x *extrapolation) slots() int {
	if x == nil {
		return 0
	}
	return 3
}

// begin starts a fresh run from B0, C0.
func (x *extrapolation) begin(b, c []float64) {
	if x == nil {
		return
	}
	copy(x.cprev, c)
	copy(x.bprev, b)
	x.beta, x.cap, x.best, x.restart, x.used, x.started = extrapBeta0, 1, math.Inf(1), false, 0, false
}

// start forms the iteration's starting point in b and c from the last iteration's (B_n, C^_n):
// B^_n (or, after a restart, B_{n-1} and C_n).
func (x *extrapolation) start(b, c []float64) {
	if !x.started {
		x.started = true // iteration 1 starts from B0, C0
		return
	}
	if x.restart {
		copy(c, x.cprev)
		copy(b, x.bprev)
		return
	}
	for i, v := range b {
		n := math.FMA(x.used, v-x.bprev[i], v)
		if n < 0 {
			n = 0
		}
		x.bprev[i] = v
		b[i] = n
	}
}

// finish takes the iteration's objective and sets the next beta, restarting when the objective
// is above the lowest so far.
func (x *extrapolation) finish(obj float64) {
	if x == nil {
		return
	}
	x.used = x.beta
	if obj <= x.best {
		x.restart = false
		x.best = obj
		x.beta = min(x.cap, extrapGrow*x.beta)
		x.cap = min(1, extrapCapGrow*x.cap)
		return
	}
	x.restart = true // above the lowest objective so far, or NaN
	x.cap = x.beta
	x.beta = x.beta / extrapShrink
}

// state returns the extrapolation's Snapshot.State slices (nil when off): C_{n-1}, B_{n-1}
// and [beta, cap, lowest objective, restart (0 or 1), beta of the last iteration].
func (x *extrapolation) state() [][]float64 {
	if x == nil {
		return nil
	}
	r := 0.0
	if x.restart {
		r = 1
	}
	return cloneAll(x.cprev, x.bprev, []float64{x.beta, x.cap, x.best, r, x.used})
}

// restore sets the state that state returned, as if the machine had run to the snapshot.
func (x *extrapolation) restore(st [][]float64) {
	if x == nil {
		return
	}
	copy(x.cprev, st[0])
	copy(x.bprev, st[1])
	sc := st[2]
	x.beta, x.cap, x.best, x.restart, x.used, x.started = sc[0], sc[1], sc[2], sc[3] != 0, sc[4], true
}

// basisSweeps holds accelerated DID's further B sweeps (nil: plain DID): B before the
// iteration's first sweep.
type basisSweeps struct {
	extra int
	eps2  float64
	old   []float64
}

// newBasisSweeps returns the further B sweeps of accel for an M x K basis (nil without any).
func newBasisSweeps(a Accel, m, k int) *basisSweeps {
	if a.bExtra() == 0 {
		return nil
	}
	return &basisSweeps{extra: a.bExtra(), eps2: a.eps2(), old: make([]float64, m*k)}
}

// begin keeps B before the iteration's first sweep.
func (s *basisSweeps) begin(b []float64) {
	if s != nil {
		copy(s.old, b)
	}
}

// sweep runs the further sweeps (sweepBasis) after the first, db holding the first's steps.
func (s *basisSweeps) sweep(b, w, v, db []float64, m, k int, flag *interruptFlag) {
	if s != nil {
		sweepBasis(b, s.old, w, v, db, m, k, s.extra, s.eps2, flag)
	}
}

// incrementalBUpdate applies DID's B update in place given the reduced W (M x K column-major)
// and V (K x K full symmetric), storing the steps in db, and returns the objective after it
// given post = ||X - B_old C_new||^2 (incrementalBStep, then basisObjective).
func incrementalBUpdate(b, w, v, db []float64, m, k int, post float64, flag *interruptFlag) float64 {
	incrementalBStep(b, w, v, db, m, k, flag)
	return basisObjective(w, v, db, m, k, post, flag)
}

// incrementalBStep is DID's B sweep: it updates b in place from the reduced W and V and stores
// the steps in db. A component with v_kk = 0 (no mass in C) keeps its b_k. It polls flag before
// each component.
func incrementalBStep(b, w, v, db []float64, m, k int, flag *interruptFlag) {
	for p := 0; p < k; p++ {
		flag.poll()
		bp, wp, dbp := b[p*m:(p+1)*m], w[p*m:(p+1)*m], db[p*m:(p+1)*m]
		vpp := v[p*k+p]
		if !(vpp > 0) {
			clear64(dbp)
			continue
		}
		vrow := v[p*k : p*k+p]
		for i := 0; i < m; i++ {
			num := wp[i]
			for q, vq := range vrow {
				num -= float64(vq * db[q*m+i])
			}
			nb := bp[i] + num/vpp
			if nb < 0 {
				nb = 0
			}
			dbp[i] = nb - bp[i]
			bp[i] = nb
		}
	}
}

// basisObjective returns ||X - B_new C_new||^2 = post - 2<dB, W> + <dB^T dB, V> (clamped at 0)
// given post = ||X - B_old C_new||^2 and dB = B_new - B_old.
func basisObjective(w, v, db []float64, m, k int, post float64, flag *interruptFlag) float64 {
	obj := post - float64(2*frob(db, w))
	for p := 0; p < k; p++ {
		flag.poll()
		for q := 0; q < k; q++ {
			if v[p*k+q] != 0 {
				obj += float64(v[p*k+q] * dot(db[p*m:(p+1)*m], db[q*m:(q+1)*m]))
			}
		}
	}
	if obj < 0 {
		obj = 0
	}
	return obj
}
