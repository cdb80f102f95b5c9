package kernels

import (
	"context"
	"math"
	"testing"
	"time"
)

func baseConfig(algo Algorithm, k int, stop StopRule) Config {
	return Config{Algo: algo, K: k, Seed: 7, Init: InitSpec{Method: InitRandom}, Stop: stop, Threads: 2}
}

// TestBCDFamilySameIterates is the paper's correctness check: DID, DBCD and BCD make the same
// updates in the same order, so they give the same iterates and the same iteration count.
func TestBCDFamilySameIterates(t *testing.T) {
	x := synthDense(20, 3000, 4, 3, 0) // exact, so the tolerance is reachable
	fixed := StopRule{Tol: 0, MaxIter: 60}
	ref := mustRun(t, x, 1, baseConfig(BCD, 4, fixed))
	toTol := StopRule{Tol: 1e-6, MaxIter: 5000}
	refTol := mustRun(t, x, 1, baseConfig(BCD, 4, toTol))
	if !refTol.Converged {
		t.Fatalf("bcd did not converge in %d iterations", refTol.Iterations)
	}
	cases := []struct {
		algo   Algorithm
		shards int
		form   Form
	}{
		{DID, 1, FormGram}, {DID, 1, FormResidual}, {DID, 5, FormGram}, {DID, 5, FormResidual},
		{DBCD, 1, FormAuto}, {DBCD, 5, FormAuto},
	}
	for _, c := range cases {
		cfg := baseConfig(c.algo, 4, fixed)
		cfg.Options.Form = c.form
		got := mustRun(t, x, c.shards, cfg)
		if d := maxRelDiff(ref.B, got.B); d > 1e-12 {
			t.Errorf("%s/%d/%s: B differs from BCD by %.3g relative", c.algo, c.shards, c.form, d)
		}
		if d := maxRelDiff(ref.C, got.C); d > 1e-12 {
			t.Errorf("%s/%d/%s: C differs from BCD by %.3g relative", c.algo, c.shards, c.form, d)
		}
		cfg.Stop = toTol
		gotTol := mustRun(t, x, c.shards, cfg)
		if gotTol.Iterations != refTol.Iterations || !gotTol.Converged {
			t.Errorf("%s/%d/%s: %d iterations to tol (converged %v), BCD took %d",
				c.algo, c.shards, c.form, gotTol.Iterations, gotTol.Converged, refTol.Iterations)
		}
	}
}

// TestCollectivesPerIteration counts what the driver actually ran.
func TestCollectivesPerIteration(t *testing.T) {
	x := synthDense(12, 900, 3, 5, 0)
	stop := StopRule{MaxIter: 17}
	cases := []struct {
		algo   Algorithm
		shards int
		want   int
		floats int // per shard per iteration
	}{
		{DID, 4, 1, 12*3 + 6 + 2},
		{DBCD, 4, 3, 3*(12+1) + 2},
		{DADMM, 4, 1, 6 + 2*12*3 + 2},
		{HPCANLS, 4, 3, 6 + 12*3 + 3*3 + 1}, // cct + xct + own rows of B (3 of 12) and a scalar
		{BCD, 1, 0, 0},
	}
	for _, c := range cases {
		res := mustRun(t, x, c.shards, baseConfig(c.algo, 3, stop))
		if res.Comm.Collectives != c.want*17 || res.Comm.PerIteration != float64(c.want) {
			t.Errorf("%s: %d collectives in 17 iterations (%.2f per iteration), want %d per iteration",
				c.algo, res.Comm.Collectives, res.Comm.PerIteration, c.want)
		}
		if got := res.Comm.FloatsPerIteration / float64(c.shards); got != float64(c.floats) {
			t.Errorf("%s: %.1f floats per shard per iteration, want %d", c.algo, got, c.floats)
		}
	}
}

// TestEveryAlgorithmReachesTol: on exact rank-K data each algorithm reaches the paper's
// tolerance 1e-6 of the initial objective.
func TestEveryAlgorithmReachesTol(t *testing.T) {
	x := synthDense(16, 1500, 3, 11, 0)
	for _, a := range Algorithms() {
		p := 1
		if a.Distributed {
			p = 3
		}
		res := mustRun(t, x, p, baseConfig(a.Name, 3, StopRule{Tol: 1e-6, MaxIter: 20000}))
		if !res.Converged {
			t.Errorf("%s: not converged after %d iterations, ratio %.3g", a.Name, res.Iterations, Ratio(res.Objective, res.Initial))
			continue
		}
		// The tracked objective must match the directly computed residual.
		if d := math.Abs(res.Objective-res.Residual) / res.Initial; d > 1e-9 {
			t.Errorf("%s: tracked objective %.6g vs direct %.6g (diff %.3g of E0)", a.Name, res.Objective, res.Residual, d)
		}
		t.Logf("%-9s %5d iterations, ratio %.3g, rel_err2 %.3g", a.Name, res.Iterations, Ratio(res.Objective, res.Initial), res.RelErr2())
	}
}

// TestMonotone: the monotone algorithms never increase the objective.
func TestMonotone(t *testing.T) {
	x := synthDense(15, 800, 4, 13, 0.05)
	for _, a := range Algorithms() {
		if !a.Monotone {
			continue
		}
		p := 1
		if a.Distributed {
			p = 2
		}
		res := mustRun(t, x, p, baseConfig(a.Name, 4, StopRule{MaxIter: 150}))
		for i := 1; i < len(res.History); i++ {
			prev, cur := res.History[i-1].Ratio, res.History[i].Ratio
			if cur > prev*(1+1e-12) {
				t.Errorf("%s: objective ratio rose from %.15g to %.15g at iteration %d", a.Name, prev, cur, res.History[i].Iteration)
				break
			}
		}
	}
}

// kktViolation returns the largest violation of the KKT conditions of
// min ||X - BC||^2, B, C >= 0, relative to the gradient's scale: negative entries, negative
// gradient where the entry is 0, and entry*gradient (complementarity).
func kktViolation(x *Dense, b, c []float64, k int) float64 {
	m, n := x.Rows, x.Cols
	// Residual R = BC - X; grad_B = R C^T, grad_C = B^T R.
	r := make([]float64, m*n)
	for j := 0; j < n; j++ {
		rj := r[j*m : (j+1)*m]
		for p := 0; p < k; p++ {
			axpy(rj, c[j*k+p], b[p*m:(p+1)*m])
		}
		for i := range rj {
			rj[i] -= x.Data[j*m+i]
		}
	}
	gb := make([]float64, m*k)
	gc := make([]float64, k*n)
	for j := 0; j < n; j++ {
		rj := r[j*m : (j+1)*m]
		for p := 0; p < k; p++ {
			axpy(gb[p*m:(p+1)*m], c[j*k+p], rj)
			gc[j*k+p] = dot(b[p*m:(p+1)*m], rj)
		}
	}
	// Scale: the gradient's size if the factors were zero: X C^T and B^T X.
	var sb, sc float64
	for p := 0; p < k; p++ {
		for i := 0; i < m; i++ {
			var s float64
			for j := 0; j < n; j++ {
				s += x.Data[j*m+i] * c[j*k+p]
			}
			sb = math.Max(sb, math.Abs(s)*math.Max(b[p*m+i], 1e-300))
		}
	}
	for j := 0; j < n; j++ {
		for p := 0; p < k; p++ {
			sc = math.Max(sc, math.Abs(dot(b[p*m:(p+1)*m], x.Data[j*m:(j+1)*m]))*math.Max(c[j*k+p], 1e-300))
		}
	}
	worst := 0.0
	check := func(f, g []float64, scale float64) {
		for i := range f {
			if f[i] < 0 {
				worst = math.Inf(1)
			}
			worst = math.Max(worst, math.Abs(f[i]*g[i])/scale)
		}
	}
	check(b, gb, sb)
	check(c, gc, sc)
	return worst
}

// TestKKTAtConvergence: at a tight tolerance the factors satisfy B, C >= 0 and
// complementarity B .* grad_B ~ 0, C .* grad_C ~ 0.
func TestKKTAtConvergence(t *testing.T) {
	x := synthDense(12, 600, 3, 17, 0.02) // noisy: the optimum is not exact, so constraints matter
	for _, a := range []Algorithm{DID, HALS, ANLS, HPCANLS, DADMM, BCD} {
		p := 1
		if info, _ := LookupAlgorithm(a); info.Distributed {
			p = 3
		}
		cfg := baseConfig(a, 3, StopRule{Tol: 0, MaxIter: 3000})
		res := mustRun(t, x, p, cfg)
		if v := kktViolation(x, res.B, res.C, 3); v > 1e-5 {
			t.Errorf("%s: KKT violation %.3g after %d iterations", a, v, res.Iterations)
		}
	}
}

// TestShardCountAndDeterminism: P shards match 1 shard to round-off; the same job twice, or
// with another thread count, is bitwise identical.
func TestShardCountAndDeterminism(t *testing.T) {
	x := synthDense(25, 2500, 5, 19, 0.01)
	stop := StopRule{MaxIter: 80}
	for _, a := range []Algorithm{DID, DBCD, DADMM, HPCANLS} {
		one := mustRun(t, x, 1, baseConfig(a, 5, stop))
		for _, p := range []int{2, 3, 7} {
			cfg := baseConfig(a, 5, stop)
			got := mustRun(t, x, p, cfg)
			tol := 1e-11
			if a == DADMM || a == HPCANLS {
				tol = 1e-8 // BPP's pivoting amplifies round-off where a constraint is nearly active
			}
			if d := maxRelDiff(one.B, got.B); d > tol {
				t.Errorf("%s: %d shards vs 1: B differs by %.3g", a, p, d)
			}
			cfg.Threads = 1
			again := mustRun(t, x, p, cfg)
			if !sameBits(got.B, again.B) || !sameBits(got.C, again.C) {
				t.Errorf("%s: %d shards: not bitwise identical across runs / thread counts", a, p)
			}
		}
	}
}

// TestSparseDenseSameFactors: the same matrix stored sparse and dense gives the same factors.
func TestSparseDenseSameFactors(t *testing.T) {
	d := sparsify(synthDense(30, 1200, 3, 23, 0.1), 0.7, 1)
	s := ToCSC(d)
	for _, a := range Algorithms() {
		p := 1
		if a.Distributed {
			p = 3
		}
		for _, init := range []InitMethod{InitRandom, InitNNDSVD, InitKMeans} {
			cfg := baseConfig(a.Name, 3, StopRule{MaxIter: 40})
			cfg.Init.Method = init
			rd := mustRun(t, d, p, cfg)
			rs := mustRun(t, s, p, cfg)
			tol := 1e-10
			if a.Name == ADMM || a.Name == DADMM || a.Name == ANLS || a.Name == HPCANLS {
				tol = 1e-7
			}
			if db, dc := maxRelDiff(rd.B, rs.B), maxRelDiff(rd.C, rs.C); db > tol || dc > tol {
				t.Errorf("%s/%s: sparse vs dense: B differs by %.3g, C by %.3g", a.Name, init, db, dc)
			}
		}
	}
}

// TestStopRules covers tol 0, max-iter, an exact start and cancellation.
func TestStopRules(t *testing.T) {
	x := synthDense(10, 300, 2, 29, 0)
	res := mustRun(t, x, 2, baseConfig(DID, 2, StopRule{Tol: 0, MaxIter: 37}))
	if res.Iterations != 37 || res.Converged || res.StopReason != StopMaxIter {
		t.Errorf("tol 0: %d iterations, converged %v, reason %s; want exactly 37, max-iter", res.Iterations, res.Converged, res.StopReason)
	}
	if len(res.History) != 38 || res.History[0].Iteration != 0 || res.History[0].Ratio != 1 {
		t.Errorf("history has %d points starting %+v; want 38 starting at iteration 0 ratio 1", len(res.History), res.History[0])
	}
	res = mustRun(t, x, 1, baseConfig(DID, 2, StopRule{Tol: 1e-3, MaxIter: 10000}))
	if !res.Converged || Ratio(res.Objective, res.Initial) > 1e-3 {
		t.Errorf("tol 1e-3: converged %v at ratio %.3g", res.Converged, Ratio(res.Objective, res.Initial))
	}
	// An exact start stays exact. (Its ||E_0||^2 is round-off, so the ratio test itself is
	// meaningless there; what matters is that nothing moves away from the solution.)
	b, c := exactFactors(10, 300, 2, 29)
	cfg := baseConfig(DID, 2, StopRule{Tol: 0, MaxIter: 20})
	cfg.Init = InitSpec{Method: InitCustom, B0: b, C0: c}
	res = mustRun(t, x, 2, cfg)
	if res.RelErr2() > 1e-28 || maxRelDiff(b, res.B) > 1e-13 {
		t.Errorf("exact start drifted: rel_err2 %.3g, B moved by %.3g", res.RelErr2(), maxRelDiff(b, res.B))
	}
	// Cancellation returns the last iterate with the context's error.
	ctx, cancel := context.WithCancel(context.Background())
	blocks, _ := Split(x, 2)
	n := 0
	res, err := Run(ctx, blocks, baseConfig(DID, 2, StopRule{MaxIter: 1000}), func(Progress) {
		if n++; n == 5 {
			cancel()
		}
	})
	if err != context.Canceled || res == nil || res.Iterations != 5 || res.StopReason != StopCanceled {
		t.Errorf("cancel: err %v, result %+v", err, res)
	}
	// A time limit stops the run at an iteration boundary.
	res, err = Run(context.Background(), blocks, baseConfig(DID, 2, StopRule{Tol: 0, MaxIter: 1 << 30, TimeLimit: 30 * time.Millisecond}))
	if err != nil || res.StopReason != StopTimeLimit || res.Converged || res.Iterations < 1 {
		t.Errorf("time limit: %v, %+v", err, res.StopReason)
	}
	// The stall rule ends a run on noisy data, whose objective cannot reach tol, once it stops
	// falling; without it the same run goes to max-iter.
	noisy := synthDense(10, 300, 2, 29, 0.2)
	nb, _ := Split(noisy, 2)
	res, err = Run(context.Background(), nb, baseConfig(DID, 2, StopRule{Tol: 1e-6, MaxIter: 5000, StallTol: 1e-6}))
	if err != nil || res.StopReason != StopStalled || res.Iterations >= 5000 {
		t.Errorf("stall: %v, %s after %d iterations", err, res.StopReason, res.Iterations)
	}
	h := res.History
	if n := len(h); n > 11 && (h[n-11].Ratio-h[n-1].Ratio) >= 1e-6*h[n-11].Ratio {
		t.Errorf("stalled although the ratio fell from %.12g to %.12g over the last 10 iterations", h[n-11].Ratio, h[n-1].Ratio)
	}
	for _, bad := range []StopRule{{Tol: -1, MaxIter: 1}, {Tol: math.NaN(), MaxIter: 1}, {Tol: 1, MaxIter: 0}, {MaxIter: 1, StallTol: -1}, {MaxIter: 1, StallTol: math.NaN()}} {
		if _, err := Run(context.Background(), blocks, baseConfig(DID, 2, bad)); err == nil {
			t.Errorf("stop rule %+v accepted", bad)
		}
	}
}

// exactFactors returns the B* and C* that synthDense(m, n, k, seed, 0) multiplies.
func exactFactors(m, n, k int, seed uint64) (b, c []float64) {
	rb := NewRNG(seed, DomainSyntheticB, 0)
	b = make([]float64, m*k)
	for i := range b {
		b[i] = rb.Float64()
	}
	c = make([]float64, k*n)
	for j := 0; j < n; j++ {
		rc := NewRNG(seed, DomainSyntheticC, uint64(j))
		for p := 0; p < k; p++ {
			c[j*k+p] = rc.Float64()
		}
	}
	return b, c
}

// TestBadJobs: specs the driver must refuse with an error, never a panic.
func TestBadJobs(t *testing.T) {
	x := synthDense(6, 40, 2, 31, 0)
	blocks, _ := Split(x, 2)
	good := baseConfig(DID, 2, StopRule{MaxIter: 3})
	cases := map[string]func(c *Config) []Block{
		"rank 0":           func(c *Config) []Block { c.K = 0; return blocks },
		"rank > M":         func(c *Config) []Block { c.K = 7; return blocks },
		"unknown algo":     func(c *Config) []Block { c.Algo = "nope"; return blocks },
		"hals on 2 shards": func(c *Config) []Block { c.Algo = HALS; return blocks },
		"custom B wrong": func(c *Config) []Block {
			c.Init = InitSpec{Method: InitCustom, B0: make([]float64, 3), C0: make([]float64, 80)}
			return blocks
		},
		"custom C wrong": func(c *Config) []Block {
			c.Init = InitSpec{Method: InitCustom, B0: make([]float64, 12), C0: make([]float64, 7)}
			return blocks
		},
		"custom negative": func(c *Config) []Block {
			b0 := make([]float64, 12)
			b0[3] = -1
			c.Init = InitSpec{Method: InitCustom, B0: b0, C0: make([]float64, 80)}
			return blocks
		},
		"unknown init": func(c *Config) []Block { c.Init.Method = "svd"; return blocks },
		"rho NaN":      func(c *Config) []Block { c.Options.Rho = math.NaN(); return blocks },
		"no blocks":    func(c *Config) []Block { return nil },
		"empty block":  func(c *Config) []Block { return []Block{x.ColSlice(0, 40), x.ColSlice(40, 40)} },
	}
	for name, mod := range cases {
		cfg := good
		bl := mod(&cfg)
		if _, err := Run(context.Background(), bl, cfg); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	if _, err := Split(x, 41); err == nil {
		t.Error("41 shards of 40 samples accepted")
	}
}

// TestHALSOrder: HALS updates rank-one pairs, so its first iterate differs from BCD's, while
// both decrease the objective.
func TestHALSOrder(t *testing.T) {
	x := synthDense(10, 400, 3, 37, 0.05)
	one := StopRule{MaxIter: 1}
	h := mustRun(t, x, 1, baseConfig(HALS, 3, one))
	b := mustRun(t, x, 1, baseConfig(BCD, 3, one))
	if maxRelDiff(h.B, b.B) < 1e-6 {
		t.Error("HALS and BCD gave the same first iterate: HALS is not updating in rank-one pairs")
	}
	if h.Objective >= h.Initial || b.Objective >= b.Initial {
		t.Error("first iteration did not decrease the objective")
	}
}

func TestChooseForm(t *testing.T) {
	cases := []struct {
		x    Block
		k    int
		want Form
	}{
		{NewDense(784, 10), 1, FormGram},
		{NewDense(784, 10), 2, FormGram},
		{NewDense(5, 10), 1, FormGram},
		{ToCSC(NewDense(784, 10)), 1, FormGram},
		{NewDense(5, 10), 3, FormGram},
	}
	for _, c := range cases {
		m, _ := c.x.Dims()
		if got := ChooseForm(c.x, c.k); got != c.want {
			t.Errorf("%T M=%d K=%d: %s, want %s", c.x, m, c.k, got, c.want)
		}
	}
}
