package kernels

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
		runDIDMasked(e, first, initial)
		return
	}
	st := newCStep(e.spec.X, e.k, e.spec.Pool, e.spec.Form, e.flag, e.gram())
	if first > 1 {
		st.restore(state)
	}
	e.state = st.state
	m, k := e.rows, e.k
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

// didState is DID's Snapshot.State layout: the Gram form's cache (see cStep.state).
func didState(s *ShardSpec) []stateSlot {
	form := s.Form
	if form == FormAuto {
		form = ChooseForm(s.X, s.K)
	}
	if form != FormGram {
		return nil
	}
	m, _ := s.X.Dims()
	return []stateSlot{{"A = X_i C_i^T (M x K)", m * s.K}, {"V = C_i C_i^T (K x K)", s.K * s.K}}
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
