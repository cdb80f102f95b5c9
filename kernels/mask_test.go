package kernels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// Missing values and held-out entries: masked DID against masked BCD, a plain masked solver
// written here, the unmasked bits when nothing is unobserved, the held-out error against a
// direct computation, and the invariances of the mask.

// withNaN returns a copy of x (dense) with about frac of its entries NaN, chosen by seed.
func withNaN(x *Dense, frac float64, seed uint64) *Dense {
	y := &Dense{Rows: x.Rows, Cols: x.Cols, Data: slices.Clone(x.Data)}
	r := NewRNG(seed, 123, 0)
	for i := range y.Data {
		if r.Float64() < frac {
			y.Data[i] = math.NaN()
		}
	}
	return y
}

// exact32Dense rounds every value of x to float32, so that float32 storage holds it exactly.
func exact32Dense(x *Dense) *Dense {
	y := &Dense{Rows: x.Rows, Cols: x.Cols, Data: slices.Clone(x.Data)}
	for i, v := range y.Data {
		y.Data[i] = float64(float32(v))
	}
	return y
}

// maskInputs are the data of the masked tests: dense and sparse, with missing entries.
type maskInput struct {
	name string
	x    Block
}

func maskInputs() []maskInput {
	dense := exact32Dense(synthDense(16, 420, 3, 71, 0.1))
	sparse := ToCSC(withNaN(sparsify(dense, 0.5, 7), 0.08, 8)) // NaN stored where they fell
	// Heavy: 60% missing (the Gram matrices are summed directly), a row and a column missing
	// entirely.
	heavy := withNaN(dense, 0.6, 9)
	for j := 0; j < heavy.Cols; j++ {
		heavy.Data[j*heavy.Rows+3] = math.NaN()
	}
	for i := 0; i < heavy.Rows; i++ {
		heavy.Data[5*heavy.Rows+i] = math.NaN()
	}
	return []maskInput{
		{"dense", withNaN(dense, 0.1, 5)},
		{"sparse", sparse},
		{"heavy", heavy},
	}
}

// maskOptions are the mask settings of the tests.
var maskOptions = []struct {
	name string
	o    Options
}{
	{"missing", Options{Missing: true}},
	{"test", Options{Missing: true, TestFraction: 0.15, TestSeed: 4}},
	{"test+penalty", Options{Missing: true, TestFraction: 0.1, TestSeed: 5, AlphaCoef: 0.01, AlphaBasis: 0.02, L1Ratio: 0.5}},
}

// direct returns the masked residual and the held-out error of B, C on x (NaN missing; with
// o.TestFraction the held-out entries), computed entry by entry.
func direct(x Block, b, c []float64, k int, o Options) (obs, test float64) {
	d := ToDense(x)
	m, n := d.Rows, d.Cols
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			v := d.Data[j*m+i]
			if math.IsNaN(v) {
				continue
			}
			var bc float64
			for p := 0; p < k; p++ {
				bc += b[p*m+i] * c[j*k+p]
			}
			r := (v - bc) * (v - bc)
			if HeldOut(o.TestSeed, j, i, o.TestFraction) {
				test += r
			} else {
				obs += r
			}
		}
	}
	return obs, test
}

func relDiff(a, b float64) float64 {
	if a == b {
		return 0
	}
	return math.Abs(a-b) / math.Max(math.Abs(a), math.Abs(b))
}

// TestMaskedDIDMatchesBCD: masked DID (1 and 3 shards) and masked DBCD (3 shards) make masked
// BCD's updates in its order, so their iterates, objectives and held-out errors agree to
// round-off.
func TestMaskedDIDMatchesBCD(t *testing.T) {
	const iters = 40
	for _, in := range maskInputs() {
		for _, mo := range maskOptions {
			cfg := baseConfig(BCD, 3, StopRule{MaxIter: iters})
			cfg.Options = mo.o
			ref := mustRun(t, in.x, 1, cfg)
			for _, c := range []struct {
				algo Algorithm
				p    int
				form Form
			}{{DID, 1, FormAuto}, {DID, 3, FormResidual}, {DBCD, 3, FormAuto}} {
				name := fmt.Sprintf("%s/%s/%s/P=%d", in.name, mo.name, c.algo, c.p)
				cfg := baseConfig(c.algo, 3, StopRule{MaxIter: iters})
				cfg.Options = mo.o
				cfg.Options.Form = c.form
				got := mustRun(t, in.x, c.p, cfg)
				if db, dc := maxRelDiff(ref.B, got.B), maxRelDiff(ref.C, got.C); db > 1e-11 || dc > 1e-11 {
					t.Errorf("%s: differs from masked BCD: B by %.3g, C by %.3g", name, db, dc)
				}
				for i, h := range got.History {
					r := ref.History[i]
					if d := relDiff(h.RelErr2, r.RelErr2); d > 1e-11 {
						t.Errorf("%s: iteration %d: objective differs from BCD's by %.3g", name, h.Iteration, d)
						break
					}
					if d := relDiff(h.TestSSE, r.TestSSE); d > 1e-11 {
						t.Errorf("%s: iteration %d: held-out error %.15g, BCD's %.15g", name, h.Iteration, h.TestSSE, r.TestSSE)
						break
					}
				}
				if got.Observed != ref.Observed || got.TestCount != ref.TestCount || got.Missing != ref.Missing {
					t.Errorf("%s: counts %d/%d/%d, BCD's %d/%d/%d", name, got.Observed, got.Missing, got.TestCount, ref.Observed, ref.Missing, ref.TestCount)
				}
			}
		}
	}
}

// plainMasked runs masked BCD (hals false) or masked HALS from b, c (updated in place) on the
// dense x with observed(i, j), written plainly: every coordinate's numerator and denominator
// are summed afresh from X, B and C.
func plainMasked(x *Dense, observed func(i, j int) bool, b, c []float64, k, iters int, hals bool) {
	m, n := x.Rows, x.Cols
	stepC := func(p int) {
		for j := 0; j < n; j++ {
			var num, den float64
			for i := 0; i < m; i++ {
				if !observed(i, j) {
					continue
				}
				r := x.Data[j*m+i]
				for q := 0; q < k; q++ {
					if q != p {
						r -= b[q*m+i] * c[j*k+q]
					}
				}
				num += r * b[p*m+i]
				den += b[p*m+i] * b[p*m+i]
			}
			if den > 0 {
				c[j*k+p] = math.Max(0, num/den)
			}
		}
	}
	stepB := func(p int) {
		for i := 0; i < m; i++ {
			var num, den float64
			for j := 0; j < n; j++ {
				if !observed(i, j) {
					continue
				}
				r := x.Data[j*m+i]
				for q := 0; q < k; q++ {
					if q != p {
						r -= b[q*m+i] * c[j*k+q]
					}
				}
				num += r * c[j*k+p]
				den += c[j*k+p] * c[j*k+p]
			}
			if den > 0 {
				b[p*m+i] = math.Max(0, num/den)
			}
		}
	}
	for it := 0; it < iters; it++ {
		if hals {
			for p := 0; p < k; p++ {
				stepB(p)
				stepC(p)
			}
			continue
		}
		// BCD: all of C, then all of B. Given B the columns of C are independent (and given C
		// the rows of B), so coordinate p over every column before coordinate p+1 is a
		// column's own order.
		for p := 0; p < k; p++ {
			stepC(p)
		}
		for p := 0; p < k; p++ {
			stepB(p)
		}
	}
}

// TestMaskedMatchesPlainSolver: masked BCD, DID and DBCD against plainMasked's BCD, and masked
// HALS against its HALS, from the same start, dense and sparse, with missing and held-out
// entries.
func TestMaskedMatchesPlainSolver(t *testing.T) {
	const iters, k = 25, 3
	for _, in := range maskInputs() {
		x := ToDense(in.x)
		m, n := x.Rows, x.Cols
		o := Options{Missing: true, TestFraction: 0.12, TestSeed: 9}
		observed := func(i, j int) bool {
			return !math.IsNaN(x.Data[j*m+i]) && !HeldOut(o.TestSeed, j, i, o.TestFraction)
		}
		b0, c0 := penaltyStart(m, n, k)
		for _, hals := range []bool{false, true} {
			b, c := slices.Clone(b0), slices.Clone(c0)
			plainMasked(x, observed, b, c, k, iters, hals)
			algos := []struct {
				a Algorithm
				p int
			}{{BCD, 1}, {DID, 1}, {DID, 3}, {DBCD, 2}}
			if hals {
				algos = algos[:0]
				algos = append(algos, struct {
					a Algorithm
					p int
				}{HALS, 1})
			}
			for _, ac := range algos {
				cfg := customConfig(ac.a, k, b0, c0, iters, penaltyCase{})
				cfg.Options = o
				got := mustRun(t, in.x, ac.p, cfg)
				if db, dc := maxRelDiff(b, got.B), maxRelDiff(c, got.C); db > 1e-10 || dc > 1e-10 {
					t.Errorf("%s/%s/P=%d: differs from the plain masked solver: B by %.3g, C by %.3g", in.name, ac.a, ac.p, db, dc)
				}
				obs, test := direct(in.x, b, c, k, o)
				if d := relDiff(got.Objective, obs); d > 1e-9 {
					t.Errorf("%s/%s: objective %.15g, plain solver's %.15g", in.name, ac.a, got.Objective, obs)
				}
				if d := relDiff(got.TestSSE, test); d > 1e-9 {
					t.Errorf("%s/%s: held-out error %.15g, plain solver's %.15g", in.name, ac.a, got.TestSSE, test)
				}
			}
		}
	}
}

// TestMaskAllObservedSameBits: with Missing set (and a test fraction that selects nothing) but
// no unobserved entry, every masked algorithm gives exactly the unmasked bits.
func TestMaskAllObservedSameBits(t *testing.T) {
	dense := synthDense(14, 300, 3, 73, 0.05)
	inputs := []maskInput{{"dense", dense}, {"sparse", ToCSC(sparsify(dense, 0.5, 3))}}
	for _, in := range inputs {
		for _, a := range MaskAlgorithms() {
			p := 1
			if info, _ := LookupAlgorithm(a); info.Distributed {
				p = 3
			}
			for _, pen := range []penaltyCase{{}, {0.02, 0.01, 0.5}} {
				cfg := baseConfig(a, 3, StopRule{MaxIter: 20})
				cfg.Options = pen.options()
				ref := mustRun(t, in.x, p, cfg)
				for _, mo := range []Options{{Missing: true}, {Missing: true, TestFraction: 1e-300, TestSeed: 3}, {TestFraction: 1e-300}} {
					cfg.Options = pen.options()
					cfg.Options.Missing, cfg.Options.TestFraction, cfg.Options.TestSeed = mo.Missing, mo.TestFraction, mo.TestSeed
					got := mustRun(t, in.x, p, cfg)
					name := fmt.Sprintf("%s/%s/%v/missing=%v,test=%v", in.name, a, pen, mo.Missing, mo.TestFraction)
					if !sameBits(ref.B, got.B) || !sameBits(ref.C, got.C) {
						t.Errorf("%s: not the unmasked bits (B %.3g, C %.3g)", name, maxRelDiff(ref.B, got.B), maxRelDiff(ref.C, got.C))
					}
					for i := range ref.History {
						if math.Float64bits(ref.History[i].Ratio) != math.Float64bits(got.History[i].Ratio) ||
							math.Float64bits(ref.History[i].RelErr2) != math.Float64bits(got.History[i].RelErr2) {
							t.Errorf("%s: iteration %d: history differs", name, i)
							break
						}
					}
					m, n := in.x.Dims()
					if got.Observed != int64(m*n) || got.TestCount != 0 || got.TestSSE != 0 {
						t.Errorf("%s: observed %d test %d (%v), want %d and none", name, got.Observed, got.TestCount, got.TestSSE, m*n)
					}
				}
			}
		}
	}
}

// otherUnobserved returns a copy of x (dense, with NaN for missing entries) whose NaN have
// other bit patterns and whose held-out entries under o are held(v): the entries a masked run
// must never read. It counts the NaN and held-out entries it changed.
func otherUnobserved(x *Dense, o Options, held func(v float64) float64) (other *Dense, nNaN, nHeld int) {
	payloads := []uint64{0x7ff0000000000001, 0xfff8000000000000, 0x7ff8dead0000beef}
	other = &Dense{Rows: x.Rows, Cols: x.Cols, Data: slices.Clone(x.Data)}
	for j := 0; j < other.Cols; j++ {
		for i := 0; i < other.Rows; i++ {
			v := &other.Data[j*other.Rows+i]
			switch {
			case math.IsNaN(*v):
				*v = math.Float64frombits(payloads[nNaN%len(payloads)])
				nNaN++
			case HeldOut(o.TestSeed, j, i, o.TestFraction):
				*v = held(*v)
				nHeld++
			}
		}
	}
	return other, nNaN, nHeld
}

// TestMissingEntriesDoNotMatter: the values of unobserved entries never reach the fit: NaN of
// other bit patterns, held-out entries with other values (stored or not, for CSC) give the
// same bits, and so does the storage (float32) of the same values.
func TestMissingEntriesDoNotMatter(t *testing.T) {
	base := exact32Dense(synthDense(15, 330, 3, 79, 0.1))
	o := Options{Missing: true, TestFraction: 0.2, TestSeed: 11}
	nan := withNaN(base, 0.1, 12)
	// other: other NaN payloads and other values at the held-out entries.
	other, nNaN, nHeld := otherUnobserved(nan, o, func(v float64) float64 { return float64(float32(3.5 + 100*v)) })
	if nNaN == 0 || nHeld == 0 {
		t.Fatalf("no missing (%d) or held-out (%d) entry to change", nNaN, nHeld)
	}
	sparseNaN := ToCSC(sparsify(nan, 0.5, 13))
	sparseOther := &Dense{Rows: nan.Rows, Cols: nan.Cols, Data: slices.Clone(ToDense(sparseNaN).Data)}
	for j := 0; j < sparseOther.Cols; j++ {
		for i := 0; i < sparseOther.Rows; i++ {
			if v := &sparseOther.Data[j*sparseOther.Rows+i]; !math.IsNaN(*v) && HeldOut(o.TestSeed, j, i, o.TestFraction) {
				*v = float64(float32(2.25 + *v)) // stores the held-out zeros too
			}
		}
	}
	pairs := []struct {
		name    string
		x, y    Block
		storage Storage
	}{
		{"dense", nan, other, StorageAsIs},
		{"dense-float32", nan, other, StorageFloat32},
		{"sparse", sparseNaN, ToCSC(sparseOther), StorageAsIs},
		{"sparse-float32", sparseNaN, ToCSC(sparseOther), StorageFloat32},
	}
	for _, pr := range pairs {
		for _, a := range MaskAlgorithms() {
			p := 1
			if info, _ := LookupAlgorithm(a); info.Distributed {
				p = 3
			}
			cfg := baseConfig(a, 3, StopRule{MaxIter: 15})
			cfg.Options = o
			ref := mustRun(t, pr.x, p, cfg)
			cfg.Options.Storage = pr.storage
			got := mustRun(t, pr.y, p, cfg)
			if !sameBits(ref.B, got.B) || !sameBits(ref.C, got.C) || math.Float64bits(ref.Objective) != math.Float64bits(got.Objective) {
				t.Errorf("%s/%s: changing unobserved entries changed the fit (B %.3g, C %.3g)", pr.name, a, maxRelDiff(ref.B, got.B), maxRelDiff(ref.C, got.C))
			}
			if ref.TestSSE == got.TestSSE {
				t.Errorf("%s/%s: the held-out error did not change with the held-out values", pr.name, a)
			}
		}
	}
}

// TestMaskedBitsAcrossPathsAndThreads: a masked fit is bitwise the same on every kernel path,
// thread count and storage.
func TestMaskedBitsAcrossPathsAndThreads(t *testing.T) {
	t.Parallel()
	o := Options{Missing: true, TestFraction: 0.1, TestSeed: 2}
	for _, in := range maskInputs()[:2] {
		for _, a := range MaskAlgorithms() {
			shards := []int{1}
			if info, _ := LookupAlgorithm(a); info.Distributed {
				shards = []int{1, 3}
			}
			for _, p := range shards {
				var ref *Result
				for _, path := range AvailableKernelPaths() {
					for _, threads := range []int{1, 2, 4} {
						for _, st := range []Storage{StorageFloat64, StorageFloat32} {
							cfg := baseConfig(a, 3, StopRule{MaxIter: 12})
							cfg.Options = o
							cfg.Options.Storage = st
							cfg.Threads = threads
							cfg.Options.Kernel = path
							res := mustRun(t, in.x, p, cfg)
							if ref == nil {
								ref = res
								continue
							}
							if !sameBits(res.B, ref.B) || !sameBits(res.C, ref.C) ||
								math.Float64bits(res.TestSSE) != math.Float64bits(ref.TestSSE) {
								t.Errorf("%s/%s/P=%d: path %s, %d threads, %s storage: bits differ (B %.3g, C %.3g)",
									in.name, a, p, path, threads, st, maxRelDiff(res.B, ref.B), maxRelDiff(res.C, ref.C))
							}
						}
					}
				}
			}
		}
	}
}

// maskedSpecs returns the specs of a masked job over p column blocks of x, from the custom
// start b0, c0 (all of C0).
func maskedSpecs(t *testing.T, x Block, p int, algo Algorithm, k int, o Options, b0, c0 []float64, pool *Pool) []ShardSpec {
	t.Helper()
	blocks, err := Split(x, p)
	if err != nil {
		t.Fatal(err)
	}
	_, n := x.Dims()
	specs := make([]ShardSpec, p)
	off := 0
	for s, b := range blocks {
		_, bn := b.Dims()
		init := InitSpec{Method: InitRandom}
		if b0 != nil {
			init = InitSpec{Method: InitCustom, B0: b0, C0: c0[off*k : (off+bn)*k]}
		}
		specs[s] = ShardSpec{Algo: algo, Shard: s, Shards: p, ColOffset: off, TotalCols: n, X: b, K: k,
			Seed: 3, Init: init, Options: o, Pool: pool}
		off += bn
	}
	return specs
}

// TestHeldOutErrorIsDirect: at every iteration the reported held-out error (and at iteration
// 0 that of B0 C0) equals the squared error over the held-out entries computed directly from
// the shards' factors, to 1e-12 relative, and the objective the masked residual: to 1e-12 as
// well, but for DID's Gram form, whose per-column identity loses about
// eps ||x_o||^2 / objective (1e-9 here, where the exact data's objective falls to 1e-6 of
// ||X_o||^2).
func TestHeldOutErrorIsDirect(t *testing.T) {
	const iters, k = 40, 3
	pool := NewPool(2)
	defer pool.Close()
	o := Options{Missing: true, TestFraction: 0.2, TestSeed: 17}
	inputs := append(maskInputs(), maskInput{"exact", withNaN(synthDense(16, 420, 3, 5, 0), 0.1, 3)})
	for _, in := range inputs {
		m, n := in.x.Dims()
		b0, c0 := penaltyStart(m, n, k)
		for _, a := range MaskAlgorithms() {
			p, forms := 1, []Form{FormAuto}
			if info, _ := LookupAlgorithm(a); info.Distributed {
				p = 3
			}
			if a == DID {
				forms = []Form{FormGram, FormResidual}
			}
			for _, form := range forms {
				specs := maskedSpecs(t, in.x, p, a, k, o, b0, c0, pool)
				for s := range specs {
					specs[s].Form = form
				}
				objTol := 1e-12
				if a == DID && form == FormGram {
					objTol = 1e-9
				}
				ms := newMachines(t, specs, nil)
				name := fmt.Sprintf("%s/%s/%s/P=%d", in.name, a, form, p)
				driveMachines(t, ms, iters, func(it int) {
					st := ms[0].last
					c := []float64{}
					for _, mc := range ms {
						c = append(c, mc.Coef()...)
					}
					obs, test := direct(in.x, ms[0].Basis(), c, k, o)
					if d := relDiff(st.TestSSE, test); d > 1e-12 {
						t.Errorf("%s: iteration %d: held-out error %.17g, direct %.17g (%.3g)", name, it, st.TestSSE, test, d)
					}
					if d := relDiff(st.Objective, obs); d > objTol {
						t.Errorf("%s: iteration %d: objective %.17g, direct masked residual %.17g (%.3g)", name, it, st.Objective, obs, d)
					}
					var local, resid float64
					for _, mc := range ms {
						local += mc.LocalTestSSE()
						resid += mc.LocalResidual()
					}
					if d := relDiff(local, test); d > 1e-12 {
						t.Errorf("%s: iteration %d: LocalTestSSE sums to %.17g, direct %.17g", name, it, local, test)
					}
					if d := relDiff(resid, obs); d > 1e-12 {
						t.Errorf("%s: iteration %d: LocalResidual sums to %.17g, direct %.17g", name, it, resid, obs)
					}
					if it == 1 {
						obs0, test0 := direct(in.x, b0, c0, k, o)
						if d := relDiff(st.InitialTestSSE, test0); d > 1e-12 {
							t.Errorf("%s: initial held-out error %.17g, direct %.17g", name, st.InitialTestSSE, test0)
						}
						if d := relDiff(st.Initial, obs0); d > objTol {
							t.Errorf("%s: initial objective %.17g, direct %.17g", name, st.Initial, obs0)
						}
					}
					if st.Mask.Test == 0 || st.Mask.Observed+st.Mask.Missing+st.Mask.Test != int64(m*n) {
						t.Errorf("%s: mask counts %+v", name, st.Mask)
					}
				})
			}
		}
	}
}

// TestHeldOutSetIgnoresShards: the held-out entries, and so the held-out error and counts, are
// the same on 1, 3 and 5 shards, and are exactly the entries HeldOut selects.
func TestHeldOutSetIgnoresShards(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	o := Options{TestFraction: 0.1, TestSeed: 21}
	for _, in := range maskInputs()[:2] {
		d := ToDense(in.x)
		m, n := d.Rows, d.Cols
		want := map[[2]int]bool{}
		for j := 0; j < n; j++ {
			for i := 0; i < m; i++ {
				if HeldOut(o.TestSeed, j, i, o.TestFraction) && !math.IsNaN(d.Data[j*m+i]) {
					want[[2]int{j, i}] = true
				}
			}
		}
		o := o
		o.Missing = true
		var ref *Result
		for _, p := range []int{1, 3, 5} {
			ms := newMachines(t, maskedSpecs(t, in.x, p, DID, 3, o, nil, nil, pool), nil)
			driveMachines(t, ms, 1, nil)
			got := map[[2]int]bool{}
			for _, mc := range ms {
				sm := mc.mask.sm
				for j := 0; j < sm.n; j++ {
					for u := sm.uptr[j]; u < sm.uptr[j+1]; u++ {
						if !math.IsNaN(sm.uval[u]) {
							got[[2]int{mc.spec.ColOffset + j, int(sm.urow[u])}] = true
						}
					}
				}
			}
			if len(got) != len(want) {
				t.Errorf("%s/P=%d: %d held-out entries, want %d", in.name, p, len(got), len(want))
			}
			for e := range want {
				if !got[e] {
					t.Errorf("%s/P=%d: entry (sample %d, feature %d) not held out", in.name, p, e[0], e[1])
					break
				}
			}
			cfg := baseConfig(DID, 3, StopRule{MaxIter: 10})
			cfg.Options = o
			res := mustRun(t, in.x, p, cfg)
			if res.TestCount != int64(len(want)) {
				t.Errorf("%s/P=%d: Result.TestCount %d, want %d", in.name, p, res.TestCount, len(want))
			}
			if ref == nil {
				ref = res
				continue
			}
			if res.Observed != ref.Observed || relDiff(res.TestSSE, ref.TestSSE) > 1e-11 || maxRelDiff(ref.B, res.B) > 1e-11 {
				t.Errorf("%s/P=%d: held-out error %.15g (B %.3g), on 1 shard %.15g", in.name, p, res.TestSSE, maxRelDiff(ref.B, res.B), ref.TestSSE)
			}
		}
	}
	// HeldOut is the i-th draw of the stream of the sample's pattern, the top byte of the
	// first draw of the sample's pattern stream.
	pr := NewRNG(5, DomainHeldOutPattern, 42)
	pat := pr.Uint64() >> 56
	if got := HeldOutPattern(5, 42); got != int(pat) {
		t.Fatalf("HeldOutPattern(5, 42) = %d, the stream says %d", got, pat)
	}
	r := NewRNG(5, DomainHeldOut, pat)
	for i := 0; i < 100; i++ {
		if got, want := HeldOut(5, 42, i, 0.3), r.Float64() < 0.3; got != want {
			t.Fatalf("HeldOut(5, 42, %d, 0.3) = %v, the stream says %v", i, got, want)
		}
	}
}

// TestTestFractionIsAMask: a fit with a test fraction is bitwise the fit with those entries
// marked missing (NaN, stored for CSC), on any shard count.
func TestTestFractionIsAMask(t *testing.T) {
	o := Options{Missing: true, TestFraction: 0.15, TestSeed: 23}
	for _, in := range maskInputs()[:2] {
		d := ToDense(in.x)
		m := d.Rows
		explicit := &Dense{Rows: d.Rows, Cols: d.Cols, Data: slices.Clone(d.Data)}
		for j := 0; j < d.Cols; j++ {
			for i := 0; i < m; i++ {
				if HeldOut(o.TestSeed, j, i, o.TestFraction) {
					explicit.Data[j*m+i] = math.NaN()
				}
			}
		}
		var ex Block = explicit
		if _, ok := in.x.(*CSC); ok {
			ex = ToCSC(explicit) // the held-out zeros become stored NaN
		}
		for _, a := range MaskAlgorithms() {
			shards := []int{1}
			if info, _ := LookupAlgorithm(a); info.Distributed {
				shards = []int{1, 3, 5}
			}
			for _, p := range shards {
				cfg := baseConfig(a, 3, StopRule{MaxIter: 15})
				cfg.Options = o
				got := mustRun(t, in.x, p, cfg)
				cfg.Options = Options{Missing: true}
				want := mustRun(t, ex, p, cfg)
				if !sameBits(got.B, want.B) || !sameBits(got.C, want.C) {
					t.Errorf("%s/%s/P=%d: test fraction differs from the explicit mask (B %.3g, C %.3g)",
						in.name, a, p, maxRelDiff(got.B, want.B), maxRelDiff(got.C, want.C))
				}
				if got.Observed != want.Observed || got.TestCount == 0 || want.TestCount != 0 {
					t.Errorf("%s/%s/P=%d: observed %d vs %d, test %d vs %d", in.name, a, p, got.Observed, want.Observed, got.TestCount, want.TestCount)
				}
			}
		}
	}
}

// TestMaskedResumeBitwise: masked machines resumed from snapshots produce bitwise the steps,
// factors and state of the uninterrupted job, with unobserved entries and without (the
// unmasked code behind the mask's slot).
func TestMaskedResumeBitwise(t *testing.T) {
	const last = 7
	pool := NewPool(2)
	defer pool.Close()
	dense := synthDense(14, 500, 3, 83, 0.05)
	inputs := []struct {
		name string
		x    Block
		o    Options
	}{
		{"dense", withNaN(dense, 0.1, 1), Options{Missing: true, TestFraction: 0.1, TestSeed: 1}},
		{"sparse", ToCSC(withNaN(sparsify(dense, 0.5, 2), 0.1, 3)), Options{Missing: true, AlphaCoef: 0.01, AlphaBasis: 0.01}},
		{"all-observed", dense, Options{Missing: true}},
	}
	for _, in := range inputs {
		for _, a := range MaskAlgorithms() {
			shards := []int{1}
			if info, _ := LookupAlgorithm(a); info.Distributed {
				shards = []int{1, 3}
			}
			for _, p := range shards {
				specs := maskedSpecs(t, in.x, p, a, 3, in.o, nil, nil, pool)
				ref := newMachines(t, specs, nil)
				snaps := map[int][]Snapshot{}
				refSteps := driveMachines(t, ref, last, func(it int) {
					if it == 3 || it == last {
						snaps[it] = snapshotAll(t, ref)
					}
				})
				resumed := newMachines(t, specs, snaps[3])
				got := driveMachines(t, resumed, last, nil)
				name := fmt.Sprintf("%s/%s/P=%d", in.name, a, p)
				sameStepsAfter(t, name, refSteps, got, 3, sameMaskedStep)
				for s, snap := range snapshotAll(t, resumed) {
					if d := sameSnapshot(snap, snaps[last][s]); d != "" {
						t.Fatalf("%s: shard %d at iteration %d: %s", name, s, last, d)
					}
				}
			}
		}
	}
	// A snapshot without the mask slot is refused.
	specs := maskedSpecs(t, dense, 1, BCD, 3, Options{}, nil, nil, pool)
	ms := newMachines(t, specs, nil)
	driveMachines(t, ms, 1, nil)
	snap := snapshotAll(t, ms)[0]
	spec := specs[0]
	spec.Options.Missing = true
	spec.Resume = &snap
	if _, err := NewMachine(spec); err == nil || !strings.Contains(err.Error(), "mask totals") {
		t.Errorf("an unmasked snapshot resumed a masked machine: %v", err)
	}
}

// TestMaskValidation: the options are checked, and the algorithms and inits without a mask
// refuse one with an error naming those that have it.
func TestMaskValidation(t *testing.T) {
	x := withNaN(synthDense(8, 60, 2, 3, 0), 0.1, 1)
	for _, a := range Algorithms() {
		err := Options{Missing: true}.ValidateMask(a.Name, InitRandom)
		if slices.Contains(MaskAlgorithms(), a.Name) {
			if err != nil {
				t.Errorf("%s: %v", a.Name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "did, dbcd, bcd, hals") {
			t.Errorf("%s accepted missing values or named no alternative: %v", a.Name, err)
		}
		cfg := baseConfig(a.Name, 2, StopRule{MaxIter: 2})
		cfg.Options.TestFraction = 0.1
		if _, err := Run(context.Background(), []Block{x}, cfg); err == nil {
			t.Errorf("%s: Run accepted a test fraction", a.Name)
		}
	}
	for _, init := range []InitMethod{InitNNDSVD, InitNNDSVDA, InitKMeans} {
		if err := (Options{TestFraction: 0.2}).ValidateMask(DID, init); err == nil || !strings.Contains(err.Error(), "random") {
			t.Errorf("init %s accepted with a test set: %v", init, err)
		}
		if err := (Options{}).ValidateMask(DID, init); err != nil {
			t.Errorf("init %s refused without a mask: %v", init, err)
		}
	}
	for _, f := range []float64{-0.1, 1, 2, math.NaN(), math.Inf(1)} {
		if err := (Options{TestFraction: f}).ValidateMask(DID, InitRandom); err == nil {
			t.Errorf("test fraction %v accepted", f)
		}
	}
	if err := (Options{Missing: true}).ValidateMask("nope", InitRandom); err == nil {
		t.Error("unknown algorithm accepted")
	}
	// NaN entries without Missing are refused (when the run scans X: with a test fraction).
	cfg0 := baseConfig(DID, 2, StopRule{MaxIter: 2})
	cfg0.Options.TestFraction = 0.1
	if _, err := Run(context.Background(), []Block{x}, cfg0); err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("NaN entries without Missing: %v", err)
	}
	ms := newMachines(t, maskedSpecs(t, x, 1, DID, 2, cfg0.Options, nil, nil, NewPool(1)), nil)
	if _, err := ms[0].Next(); err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("a machine with NaN entries without Missing: %v", err)
	}
	// Everything missing or held out: nothing to fit.
	all := withNaN(synthDense(6, 20, 2, 3, 0), 1.1, 1)
	cfg := baseConfig(DID, 2, StopRule{MaxIter: 2})
	cfg.Options.Missing = true
	if _, err := Run(context.Background(), []Block{all}, cfg); err == nil {
		t.Error("a matrix with no observed entry was accepted")
	}
}

// TestMaskedReporting: History, Progress and Result carry the observed count and the held-out
// error (omitted from JSON without a test set); the driver's figures are over the observed
// entries; the tracked objective matches the direct residual; the masked algorithms are
// monotone.
func TestMaskedReporting(t *testing.T) {
	x := maskInputs()[0].x
	m, n := x.Dims()
	for _, a := range MaskAlgorithms() {
		p := 1
		if info, _ := LookupAlgorithm(a); info.Distributed {
			p = 2
		}
		cfg := baseConfig(a, 3, StopRule{MaxIter: 60})
		cfg.Options = Options{Missing: true, TestFraction: 0.1, TestSeed: 8}
		var progress []Progress
		blocks, _ := Split(x, p)
		res, err := Run(context.Background(), blocks, cfg, func(pr Progress) { progress = append(progress, pr) })
		if err != nil {
			t.Fatal(err)
		}
		st := ObservedStats(x, 0, cfg.Options)
		if res.Observed != st.Observed || res.Missing != st.Missing || res.TestCount != st.Test || relDiff(res.SqNormX, st.ObservedSqNorm) > 1e-14 ||
			res.Observed+res.Missing+res.TestCount != int64(m*n) || res.Missing == 0 {
			t.Errorf("%s: counts %d/%d/%d, norm %v; stats %+v", a, res.Observed, res.Missing, res.TestCount, res.SqNormX, st)
		}
		if d := relDiff(res.Objective, res.Residual); d > 1e-10 {
			t.Errorf("%s: tracked objective %.15g, direct masked residual %.15g", a, res.Objective, res.Residual)
		}
		last := res.History[len(res.History)-1]
		re, rmse := ObservedErrors(res.Objective, res.SqNormX, res.Observed)
		if last.RelErr2 != re || last.RMSE != rmse || last.TestSSE != res.TestSSE || last.TestCount != res.TestCount ||
			last.TestRMSE != res.TestRMSE() || last.TestRelErr2 != res.TestRelErr2() || res.TestRMSE() == 0 {
			t.Errorf("%s: last history point %+v; result %v %v %v", a, last, res.TestSSE, res.TestRMSE(), res.TestRelErr2())
		}
		if len(progress) != res.Iterations || progress[len(progress)-1].TestSSE != res.TestSSE || progress[0].TestCount != res.TestCount {
			t.Errorf("%s: progress %+v", a, progress[len(progress)-1])
		}
		if res.History[0].TestSSE == 0 || res.History[0].TestSSE <= last.TestSSE {
			t.Errorf("%s: held-out error %v at the start, %v at the end", a, res.History[0].TestSSE, last.TestSSE)
		}
		for i := 1; i < len(res.History); i++ {
			if res.History[i].Ratio > res.History[i-1].Ratio*(1+1e-12) {
				t.Errorf("%s: objective rose at iteration %d", a, i)
				break
			}
		}
		js, _ := json.Marshal(last)
		if !strings.Contains(string(js), `"test_rmse"`) {
			t.Errorf("%s: %s has no held-out error", a, js)
		}
		cfg.Options.TestFraction = 0
		res = mustRun(t, x, p, cfg)
		js, _ = json.Marshal(res.History[len(res.History)-1])
		if strings.Contains(string(js), "test_") || res.TestSSE != 0 || res.TestCount != 0 {
			t.Errorf("%s: without a test set: %s, %v %d", a, js, res.TestSSE, res.TestCount)
		}
	}
	res := mustRun(t, synthDense(10, 200, 2, 3, 0), 1, baseConfig(BCD, 2, StopRule{MaxIter: 1}))
	if res.Observed != 2000 {
		t.Errorf("unmasked Observed %d, want M N = 2000", res.Observed)
	}
}

// TestObservedStatsMatchBlockSums: without unobserved entries a block's observed sums are
// bitwise its Sum and SqNorm (dense and sparse, float64 and float32, column slices of odd
// offsets and lengths), and with them they are those of the block with its unobserved entries
// zeroed.
func TestObservedStatsMatchBlockSums(t *testing.T) {
	d := exact32Dense(synthDense(7, 53, 2, 3, 0.1))
	sp := ToCSC(sparsify(d, 0.4, 1))
	for _, x := range []Block{d, sp} {
		for _, lohi := range [][2]int{{0, 53}, {3, 50}, {5, 6}, {1, 38}} {
			b := x.ColSlice(lohi[0], lohi[1])
			n32, _ := Narrow(b)
			for _, blk := range []Block{b, n32} {
				st := ObservedStats(blk, lohi[0], Options{Missing: true})
				if math.Float64bits(st.ObservedSqNorm) != math.Float64bits(blk.SqNorm()) || math.Float64bits(st.ObservedSum) != math.Float64bits(blk.Sum()) {
					t.Errorf("%T [%d, %d): observed sums %v %v, the block's %v %v", blk, lohi[0], lohi[1], st.ObservedSum, st.ObservedSqNorm, blk.Sum(), blk.SqNorm())
				}
			}
		}
	}
	nan := withNaN(d, 0.2, 4)
	o := Options{Missing: true, TestFraction: 0.2, TestSeed: 1}
	sm := scanMask(nan, 0, o, true, false, nil)
	zeroed := ToDense(sm.x)
	if st := sm.local; st.ObservedSqNorm != zeroed.SqNorm() || st.ObservedSum != zeroed.Sum() || st != ObservedStats(nan, 0, o) {
		t.Errorf("masked sums %+v, X_o's %v %v", st, zeroed.Sum(), zeroed.SqNorm())
	}
}

// TestMaskedCancel: cancelling a masked run returns its last iterate.
func TestMaskedCancel(t *testing.T) {
	x := maskInputs()[0].x
	for _, a := range MaskAlgorithms() {
		p := 1
		if info, _ := LookupAlgorithm(a); info.Distributed {
			p = 2
		}
		ctx, cancel := context.WithCancel(context.Background())
		blocks, _ := Split(x, p)
		cfg := baseConfig(a, 3, StopRule{MaxIter: 1000})
		cfg.Options = Options{Missing: true, TestFraction: 0.1}
		k := 0
		res, err := Run(ctx, blocks, cfg, func(Progress) {
			if k++; k == 4 {
				cancel()
			}
		})
		cancel()
		if err != context.Canceled || res == nil || res.Iterations != 4 || res.StopReason != StopCanceled {
			t.Errorf("%s: cancel: %v, %+v", a, err, res)
		}
	}
}

const maskBitsGolden = "testdata/mask_bits.golden"

// TestMaskedBitsDoNotDependOnBuildFlags pins the bits of the masked algorithms' factors and
// held-out errors (dense and sparse, missing and held-out entries), as
// TestBitsDoNotDependOnBuildFlags does for the unmasked ones; rewrite with
// go test ./kernels -run TestMaskedBitsDoNotDependOnBuildFlags -update.
func TestMaskedBitsDoNotDependOnBuildFlags(t *testing.T) {
	got := map[string]string{}
	o := Options{Missing: true, TestFraction: 0.1, TestSeed: 1}
	for _, in := range maskInputs()[:2] {
		for _, a := range MaskAlgorithms() {
			p := 1
			if info, _ := LookupAlgorithm(a); info.Distributed {
				p = 3
			}
			for _, pen := range []penaltyCase{{}, {0.02, 0.01, 0.5}} {
				cfg := bitsConfig(a, StopRule{MaxIter: 20})
				cfg.K = 3
				cfg.Options = pen.options()
				cfg.Options.Missing, cfg.Options.TestFraction, cfg.Options.TestSeed = o.Missing, o.TestFraction, o.TestSeed
				res := mustRun(t, in.x, p, cfg)
				name := fmt.Sprintf("%s/%s/p%d/%v", in.name, a, p, pen)
				got[name+"/B"] = hashFloats(res.B)
				got[name+"/C"] = hashFloats(res.C)
				got[name+"/test"] = hashFloats([]float64{res.TestSSE, res.Objective})
			}
		}
	}
	// DID with a held-out set and no missing values (didheld.go).
	for _, in := range heldInputs() {
		for _, pen := range []penaltyCase{{}, {0.02, 0.01, 0.5}} {
			cfg := bitsConfig(DID, StopRule{MaxIter: 20})
			cfg.K = 3
			cfg.Options = pen.options()
			cfg.Options.TestFraction, cfg.Options.TestSeed = o.TestFraction, o.TestSeed
			res := mustRun(t, in.x, 3, cfg)
			name := fmt.Sprintf("held/%s/did/p3/%v", in.name, pen)
			got[name+"/B"] = hashFloats(res.B)
			got[name+"/C"] = hashFloats(res.C)
			got[name+"/test"] = hashFloats([]float64{res.TestSSE, res.Objective})
		}
	}
	golden{path: maskBitsGolden, what: "masked factors", test: "TestMaskedBitsDoNotDependOnBuildFlags"}.check(t, got)
}

// TestMaskedCollectives: masked DID keeps one allreduce per iteration, of M K + M K(K+1)/2 + 2
// values (twice the matrices and two more scalars with a test set; without missing values,
// didheld.go's 2 M K + HeldOutPatterns K(K+1)/2 + 3); masked DBCD K, of 2M
// values (4M with a test set) and the scalars of phase 0; the mask's counts come from one
// init collective, which also gives random init its mean.
func TestMaskedCollectives(t *testing.T) {
	x := maskInputs()[0].x
	m, _ := x.Dims()
	const k, iters, p = 3, 9, 3
	l := k * (k + 1) / 2
	cases := []struct {
		algo    Algorithm
		test    float64
		per     int
		floats  int // per shard per iteration
		init    int
		missing bool
	}{
		{DID, 0, 1, m*k + m*l + 2, 1, true},
		{DID, 0.1, 1, 2*(m*k+m*l) + 4, 1, true},
		{DID, 0.1, 1, 2*m*k + HeldOutPatterns*l + 3, 1, false}, // didheld.go
		{DBCD, 0, k, k*2*m + 2, 1, true},
		{DBCD, 0.1, k, k*4*m + 4, 1, true},
	}
	for _, c := range cases {
		cfg := baseConfig(c.algo, k, StopRule{MaxIter: iters})
		cfg.Options = Options{Missing: c.missing, TestFraction: c.test}
		in := x
		if !c.missing {
			in = heldInputs()[0].x
		}
		res := mustRun(t, in, p, cfg)
		if res.Comm.PerIteration != float64(c.per) || res.Comm.InitCollectives != c.init {
			t.Errorf("%s test=%v: %.2f collectives per iteration, %d init; want %d, %d", c.algo, c.test, res.Comm.PerIteration, res.Comm.InitCollectives, c.per, c.init)
		}
		if got := res.Comm.FloatsPerIteration / p; got != float64(c.floats) {
			t.Errorf("%s test=%v: %.1f floats per shard per iteration, want %d", c.algo, c.test, got, c.floats)
		}
	}
}

// TestMaskedInterrupt interrupts shard 0 of every masked algorithm in the middle of each of
// its steps up to iteration 2 (the mask's scan included), at a look chosen from an
// uninterrupted run: Next returns ErrInterrupted, every loop ends at its first look after the
// interrupt, and the step makes fewer looks than the uninterrupted one. Looking at the flag at
// every column changes no bit.
func TestMaskedInterrupt(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	cases := []struct {
		inputs []maskInput
		algos  []Algorithm
		o      Options
	}{
		{maskInputs()[:2], MaskAlgorithms(), Options{Missing: true, TestFraction: 0.1, TestSeed: 3}},
		{heldInputs()[:2], []Algorithm{DID}, Options{TestFraction: 0.1, TestSeed: 3}}, // didheld.go
	}
	for _, c := range cases {
		o := c.o
		for _, in := range c.inputs {
			for _, a := range c.algos {
				p := 1
				if info, _ := LookupAlgorithm(a); info.Distributed {
					p = 2
				}
				specs := maskedSpecs(t, in.x, p, a, 3, o, nil, nil, pool)
				ref := &checkLog{}
				ms := newMachines(t, specs, nil)
				ref.watch(ms[0])
				run := newStepper(t, ms, ref)
				for run.boundaries[2] == 0 {
					if err := run.round(); err != nil {
						t.Fatalf("%s/%s: uninterrupted run: %v", in.name, a, err)
					}
				}
				plain := mustRun(t, in.x, p, Config{Algo: a, K: 3, Seed: 3, Init: InitSpec{Method: InitRandom}, Options: o, Stop: StopRule{MaxIter: 2}})
				if !sameBits(plain.B, ms[0].Basis()) {
					t.Errorf("%s/%s: looking at every column changed the bits", in.name, a)
				}
				tried := 0
				for i := range run.ends {
					lo, hi := int64(0), run.ends[i]
					if i > 0 {
						lo = run.ends[i-1]
					}
					if hi-lo < 4 {
						continue
					}
					tried++
					target := lo + (hi-lo)/2
					log := &checkLog{target: target}
					ms := newMachines(t, specs, nil)
					log.watch(ms[0])
					for _, m := range ms[1:] {
						m.intr.work = 1
					}
					st := newStepper(t, ms, log)
					var err error
					for err == nil && st.boundaries[2] == 0 {
						err = st.round()
					}
					name := fmt.Sprintf("%s/%s interrupted at look %d of step %d", in.name, a, target, i)
					if !errors.Is(err, ErrInterrupted) {
						t.Errorf("%s: %v, want ErrInterrupted", name, err)
						continue
					}
					if after := log.after.Load(); after > 2*maxLanes+2 || log.count.Load() >= hi {
						t.Errorf("%s (%s): %d looks found the interrupt, %d in all; the step made %d", name, log.where, after, log.count.Load(), hi)
					}
				}
				if tried < 3 {
					t.Errorf("%s/%s: only %d steps to interrupt", in.name, a, tried)
				}
				t.Logf("%s/%s: interrupted %d steps", in.name, a, tried)
			}
		}
	}
}

// TestMaskedDIDVariantsSameBits: masked DID's internal choices, which depend on the shape
// only, give the same bits: the row sums gathered by the lanes or by the row pass
// (didMaskTuning's laneBudget, rowPassBytes), the tables of B's rows or every G_j formed
// (tableBudget), and the restricted Gram matrices summed in Go or on the kernel path
// (rowSumScalar); at rank 3 and at rank 10 (the AVX-512 indexed kernels).
func TestMaskedDIDVariantsSameBits(t *testing.T) {
	t.Parallel()
	d := didMaskDefaults
	base := [4]int{d.laneBudget, d.tableBudget, d.rowSumScalar, d.rowPassBytes}
	tuning := func(v [4]int) *didMaskTuning {
		return &didMaskTuning{laneBudget: v[0], tableBudget: v[1], rowSumScalar: v[2], rowPassBytes: v[3]}
	}
	variants := []struct {
		name string
		v    [4]int
	}{
		{"lanes gather", [4]int{base[0], base[1], base[2], 0}},
		{"row pass", [4]int{0, base[1], base[2], 0}},
		{"no tables", [4]int{base[0], 0, base[2], base[3]}},
		{"kernel sums", [4]int{base[0], base[1], 0, base[3]}},
		{"Go sums", [4]int{base[0], base[1], 1 << 30, 0}},
		{"all", [4]int{0, 0, 0, 0}},
	}
	for _, k := range []int{3, 10} {
		for _, in := range maskInputs() {
			for _, mo := range maskOptions {
				for _, p := range []int{1, 3} {
					cfg := baseConfig(DID, k, StopRule{MaxIter: 12})
					cfg.Options = mo.o
					ref := mustRun(t, in.x, p, cfg)
					for _, v := range variants {
						cfg.Options.maskTuning = tuning(v.v)
						got := mustRun(t, in.x, p, cfg)
						if !sameBits(got.B, ref.B) || !sameBits(got.C, ref.C) ||
							math.Float64bits(got.TestSSE) != math.Float64bits(ref.TestSSE) ||
							math.Float64bits(got.Objective) != math.Float64bits(ref.Objective) {
							t.Errorf("K=%d %s/%s/P=%d: %s: bits differ (B %.3g, C %.3g)", k, in.name, mo.name, p, v.name,
								maxRelDiff(got.B, ref.B), maxRelDiff(got.C, ref.C))
						}
					}
				}
			}
		}
	}
}

// TestMaskedDIDRank10Paths: at rank 10 (the AVX-512 indexed kernels, two passes on AVX2),
// masked DID gives the same bits on every kernel path and thread count.
func TestMaskedDIDRank10Paths(t *testing.T) {
	t.Parallel()
	for _, in := range maskInputs()[:2] {
		for _, mo := range maskOptions {
			var ref *Result
			for _, path := range AvailableKernelPaths() {
				for _, threads := range []int{1, 2} {
					cfg := baseConfig(DID, 10, StopRule{MaxIter: 8})
					cfg.Options = mo.o
					cfg.Threads = threads
					cfg.Options.Kernel = path
					res := mustRun(t, in.x, 2, cfg)
					if ref == nil {
						ref = res
						continue
					}
					if !sameBits(res.B, ref.B) || !sameBits(res.C, ref.C) ||
						math.Float64bits(res.TestSSE) != math.Float64bits(ref.TestSSE) {
						t.Errorf("%s/%s: path %s, %d threads: bits differ", in.name, mo.name, path, threads)
					}
				}
			}
		}
	}
}

// TestMaskedDIDNoAllocations: a masked DID iteration allocates nothing (one shard, the
// allreduce delivered as is), dense and sparse, with missing entries and with a test set, at
// ranks 3 and 10, with the row sums gathered by the lanes and by the row pass, on one worker
// and on two.
func TestMaskedDIDNoAllocations(t *testing.T) {
	for _, workers := range []int{1, 2} {
		pool := NewPool(workers)
		for _, k := range []int{3, 10} {
			for _, rowPass := range []int{0, 1 << 30} {
				tune := didMaskDefaults
				tune.rowPassBytes = rowPass
				for _, in := range maskInputs()[:2] {
					for _, mo := range maskOptions[:2] {
						o := mo.o
						o.maskTuning = &tune
						ms := newMachines(t, maskedSpecs(t, in.x, 1, DID, k, o, nil, nil, pool), nil)
						driveMachines(t, ms, 2, nil)
						m := ms[0]
						if a := allocsPerIteration(t, m); a != 0 {
							t.Errorf("K=%d %s/%s, row pass bytes %d, %d workers: %.1f allocations per iteration",
								k, in.name, mo.name, rowPass, workers, a)
						}
						m.Close()
					}
				}
			}
		}
		pool.Close()
	}
}

// allocsPerIteration is testing.AllocsPerRun over whole iterations of a single-shard machine
// (its allreduce delivered as is), after whatever the machine ran already.
func allocsPerIteration(t *testing.T, m *Machine) float64 {
	t.Helper()
	return testing.AllocsPerRun(5, func() {
		for {
			st, err := m.Next()
			if err != nil {
				t.Fatal(err)
			}
			if st.Kind == StepIterationDone {
				return
			}
			m.Deliver(st.Data) // an allreduce over one shard is its own data
		}
	})
}

// sameMaskedStep is sameStepsAfter's extra check for masked runs: the mask's counts and the
// held-out errors, bit for bit ("" when they agree).
func sameMaskedStep(got, want Step) string {
	if got.Mask != want.Mask || math.Float64bits(got.TestSSE) != math.Float64bits(want.TestSSE) ||
		math.Float64bits(got.InitialTestSSE) != math.Float64bits(want.InitialTestSSE) {
		return fmt.Sprintf("mask %+v held-out %v/%v, want %+v %v/%v", got.Mask, got.TestSSE, got.InitialTestSSE,
			want.Mask, want.TestSSE, want.InitialTestSSE)
	}
	return ""
}
