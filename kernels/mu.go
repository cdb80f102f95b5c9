package kernels

// MU (Lee & Seung 2001): C <- C .* (B^T X) ./ (B^T B C), then B <- B .* (X C^T) ./ (B C C^T).
// An entry whose denominator is 0 keeps its value (no epsilon is added, so the updates are the
// textbook ones). MU never moves an entry away from 0: its known slow tail.
//
// Penalties (see "Penalties" in doc.go), as scikit-learn's solver="mu" with beta_loss
// "frobenius" adds them: the L1 coefficient to each denominator, then the L2 coefficient times
// the entry,
//
//	C <- C .* (B^T X) ./ ((B^T B C + l1C) + l2C C),   B <- B .* (X C^T) ./ ((B C C^T + l1B) + l2B B),
//
// and the penalties of the new factors to the objective.
//
// Distribution. The C update is local to a shard: B^T X_i and B^T B need only the replicated
// B. The B update needs X C^T = sum_i X_i C_i^T and C C^T = sum_i C_i C_i^T, so a shard sends
// one allreduce per iteration ("mu.partial"):
//
//	A_i = X_i C_i^T (M x K),  the lower triangle of V_i = C_i C_i^T,  ||X_i||^2,
//	and with a penalty on C, ||C_i||_1 and ||C_i||^2,
//
// after which every shard makes the same B update (its denominator B V from the reduced V) and
// computes the objective by the Gram identity ||X||^2 - 2 <B, A> + <B^T B, V> plus the
// penalties. The initial objective takes one allreduce during initialisation ("mu.initial":
// ||X_i - B0 C0_i||^2, and the norms of C0_i with a penalty on C). On one shard the reduce
// tree returns the shard's own values, so the factors and objectives are bitwise those of the
// single-shard MU this replaced (testdata/mu_p1.golden); on P shards they agree with one shard
// to round-off, and are bitwise fixed for each P.
//
// The other losses (Options.Loss: KL, IS, any beta) take runMUBeta (beta.go). A masked run
// with unobserved entries takes mumask.go's code, for every loss, the Frobenius one too.

// muPartialLen is the length of the Frobenius MU allreduce payload.
func muPartialLen(m, k int, coefPenalized bool) int {
	n := m*k + lowerLen(k) + 1
	if coefPenalized {
		n += 2
	}
	return n
}

// muState is MU's Snapshot.State layout: none for the Frobenius loss; for the others the basis
// the next iteration starts from (see beta.go).
func muState(s *ShardSpec) []stateSlot {
	if s.Loss == LossFrobenius {
		return nil
	}
	m, _ := s.X.Dims()
	return []stateSlot{{"B_next, the basis of the next iteration (M x K)", m * s.K}}
}

func runMU(e *shardEnv) {
	if err := e.spec.Loss.check(); err != nil {
		panic(err)
	}
	if e.maskable() {
		runMUMaskable(e) // mumask.go: the masked code, or this one when nothing is unobserved
		return
	}
	if e.spec.Loss != LossFrobenius {
		runMUBeta(e)
		return
	}
	first, initial, _ := e.begin()
	runMUFrobenius(e, first, initial)
}

// runMUFrobenius runs MU for the Frobenius loss from the first iteration and initial
// objective e.begin returned.
func runMUFrobenius(e *shardEnv, first int, initial float64) {
	x, m, n, k := e.spec.X, e.rows, e.cols, e.k
	b, c := e.B, e.C
	ops := newBlockOps(x, k, e.spec.Pool, e.flag, e.gram())
	sqXi := x.SqNorm()
	h := make([]float64, k*n)
	g := make([]float64, k*k)
	a := make([]float64, m*k)
	v := make([]float64, k*k)
	bv := make([]float64, m*k)
	pen := e.penalty()
	if first == 1 {
		start := make([]float64, 1, 3)
		start[0] = residualSq(x, b, c, k, e.spec.Pool, e.flag)
		if pen.coef() {
			c1, c2 := factorNorms(c, e.flag)
			start = append(start, c1, c2)
		}
		sum := e.allReduce("mu.initial", 0, start)
		initial = sum[0]
		if pen.on() {
			var penC float64
			if pen.coef() {
				penC = pen.coefValue(sum[1], sum[2])
			}
			initial = initial + penC + pen.basisPenalty(b, e.flag)
		}
	}
	partial := make([]float64, muPartialLen(m, k, pen.coef()))
	at := m*k + lowerLen(k)       // ||X_i||^2, then the norms of C_i
	span := e.flag.span(k*k+k, 1) // columns of the C update between two looks at the flag
	for it := first; ; it++ {
		ops.btx(b, h)
		gramCols(b, m, k, g, e.flag)
		ops.run(func(_, lo, hi int) {
			den := make([]float64, k) // one per lane and iteration, not per column
			for j0 := lo; j0 < hi; j0 += span {
				if e.flag.stopped() {
					return
				}
				for j, j1 := j0, min(j0+span, hi); j < j1; j++ {
					cj := c[j*k : (j+1)*k]
					for p := 0; p < k; p++ {
						den[p] = dot(g[p*k:(p+1)*k], cj)
					}
					if pen.coef() {
						penalizeDenominators(den, cj, pen.l1C, pen.l2C)
					}
					for p, d := range den {
						if d > 0 {
							cj[p] *= h[j*k+p] / d
						}
					}
				}
			}
		})
		ops.xct(c, a)
		ops.cct(c, v)
		copy(partial, a)
		packLower(partial[m*k:], v, k)
		partial[at] = sqXi
		if pen.coef() {
			partial[at+1], partial[at+2] = factorNorms(c, e.flag)
		}
		sum := e.allReduce("mu.partial", it, partial)
		copy(a, sum[:m*k])
		unpackLower(v, sum[m*k:], k)
		sqX := sum[at]
		// B <- B .* A ./ (B V), all entries from the same B.
		clear64(bv)
		for p := 0; p < k; p++ {
			e.flag.poll()
			for q := 0; q < k; q++ {
				if vq := v[q*k+p]; vq != 0 {
					axpy(bv[p*m:(p+1)*m], vq, b[q*m:(q+1)*m])
				}
			}
		}
		if pen.basis() {
			penalizeDenominators(bv, b, pen.l1B, pen.l2B)
		}
		for i, d := range bv {
			if d > 0 {
				b[i] *= a[i] / d
			}
		}
		gramCols(b, m, k, g, e.flag)
		obj := gramObjective(sqX, b, a, g, v)
		if pen.on() {
			var penC float64
			if pen.coef() {
				penC = pen.coefValue(sum[at+1], sum[at+2])
			}
			obj = obj + penC + pen.basisPenalty(b, e.flag)
		}
		e.iterationDone(it, obj, initial)
	}
}

// frobStep is one entry f of a Frobenius MU update with numerator num and denominator den,
// penalized as penalizeDenominators does (den + l1, then + l2 f) and kept as it is when the
// denominator is not positive.
func frobStep(f, num, den, l1, l2 float64) float64 {
	if l1 > 0 {
		den += l1
	}
	if l2 > 0 {
		den += float64(l2 * f)
	}
	if den > 0 {
		f = float64(f * (num / den))
	}
	return f
}

// penalizeDenominators adds the penalty to MU's denominators as scikit-learn does:
// den = den + l1 (when l1 > 0), then den = den + l2 * f (when l2 > 0), f the factor's entries.
func penalizeDenominators(den, f []float64, l1, l2 float64) {
	if l1 > 0 {
		for i := range den {
			den[i] += l1
		}
	}
	if l2 > 0 {
		for i, v := range f[:len(den)] {
			den[i] += float64(l2 * v)
		}
	}
}
