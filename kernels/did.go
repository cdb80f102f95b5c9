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

// didPartialLen is the length of DID's allreduce payload.
func didPartialLen(m, k int) int { return m*k + lowerLen(k) + 2 }

func runDID(e *shardEnv) {
	first, initial, state := e.begin()
	st := newCStep(e.spec.X, e.k, e.spec.Pool, e.spec.Form, e.flag)
	if first > 1 {
		st.restore(state)
	}
	e.state = st.state
	m, k := e.rows, e.k
	partial := make([]float64, didPartialLen(m, k))
	w := make([]float64, m*k)
	v := make([]float64, k*k)
	db := make([]float64, m*k)
	for it := first; ; it++ {
		prev, post := st.run(e.B, e.C, w, v)
		copy(partial, w)
		packLower(partial[m*k:], v, k)
		partial[len(partial)-2] = prev
		partial[len(partial)-1] = post
		sum := e.allReduce("did.partial", it, partial)
		copy(w, sum[:m*k])
		unpackLower(v, sum[m*k:], k)
		if it == 1 {
			initial = sum[len(sum)-2]
		}
		obj := incrementalBUpdate(e.B, w, v, db, m, k, sum[len(sum)-1], e.flag)
		e.iterationDone(it, obj, initial)
	}
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

// incrementalBUpdate applies DID's B update in place given the reduced W (M x K column-major)
// and V (K x K full symmetric), storing the steps in db, and returns the objective after it
// given post = ||X - B_old C_new||^2. A component with v_kk = 0 (no mass in C) keeps its b_k.
// It polls flag before each component.
func incrementalBUpdate(b, w, v, db []float64, m, k int, post float64, flag *interruptFlag) float64 {
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
	// ||E_new||^2 = post - 2<dB, W> + <dB^T dB, V>
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
