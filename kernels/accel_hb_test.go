package kernels

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// Accelerated hals and bcd (Options.Accel; hals.go's runHALSAccel, dbcd.go's accelerated
// residual form). Accel's zero value keeps every bit of the plain algorithms: the golden and
// bits tests (golden_test.go, bits_test.go) hold them to that.

// accelHBInput is one data matrix of the accelerated hals/bcd tests: a planted rank-k matrix
// with a little noise (so the objective stays well above the round-off of the Gram-identity
// trackers), dense or half sparse.
type accelHBInput struct {
	name string
	x    Block
}

func accelHBInputs(m, n, k int) []accelHBInput {
	return []accelHBInput{{"dense", synthPlanted(m, n, k, 11, 0.3, 0.05, false)}, {"sparse", synthPlanted(m, n, k, 11, 0.3, 0.05, true)}}
}

// synthPlanted returns a planted rank-k matrix X = B* C* + noise whose factors have each entry
// nonzero with probability frac (uniform in (0, 1) then): sparse factors make the planted
// factorization well separated, so plain and accelerated runs head for the same minimum. The
// uniform noise of the given amplitude goes on every entry (dense, a Dense) or on X's nonzero
// entries only (sparse, a CSC of about 40% density at frac 0.3 and k 6).
func synthPlanted(m, n, k int, seed uint64, frac, noise float64, sparse bool) Block {
	draw := func(r *RNG) float64 {
		if r.Float64() < frac {
			return r.Float64()
		}
		return 0
	}
	rb := NewRNG(seed, DomainSyntheticB, 1)
	b := make([]float64, m*k)
	for i := range b {
		b[i] = draw(&rb)
	}
	x := NewDense(m, n)
	c := make([]float64, k)
	for j := 0; j < n; j++ {
		rc := NewRNG(seed, DomainSyntheticC, uint64(n+j))
		for p := range c {
			c[p] = draw(&rc)
		}
		col := x.Col(j)
		for p, cp := range c {
			axpy(col, cp, b[p*m:(p+1)*m])
		}
		rn := NewRNG(seed, DomainSyntheticNoise, uint64(n+j))
		for i, v := range col {
			if v != 0 || !sparse {
				col[i] = v + float64(noise*rn.Float64())
			}
		}
	}
	if sparse {
		return ToCSC(x)
	}
	return x
}

// accelHBPenalties: none, and both factors penalized with L1 and L2 (mildly: a strong L1
// penalty on B can zero a component for good in an early iteration, where exact inner
// minimization takes it to the penalty's kink, and the runs then end in other minima).
var accelHBPenalties = []penaltyCase{{0, 0, 0}, {0.0002, 0.0001, 0.5}}

// accelHBSpec is a one-shard job of algo on x with accel and the penalty pc.
func accelHBSpec(algo Algorithm, x Block, k int, accel Accel, pc penaltyCase, pool *Pool) ShardSpec {
	_, n := x.Dims()
	opts := pc.options()
	opts.Accel = accel
	return ShardSpec{Algo: algo, Shard: 0, Shards: 1, TotalCols: n, X: x, K: k, Seed: 5,
		Init: InitSpec{Method: InitRandom}, Options: opts, Pool: pool}
}

// TestAccelHBObjective: accelerated hals and bcd, dense and sparse, with and without
// penalties, never increase the objective they report, and it is the objective computed
// directly from the factors (ResidualSq plus the penalties) at every iteration, to 1e-9
// relative.
func TestAccelHBObjective(t *testing.T) {
	const k, iters = 5, 40
	pool := NewPool(2)
	defer pool.Close()
	for _, algo := range []Algorithm{HALS, BCD} {
		for _, in := range accelHBInputs(30, 700, k) {
			for _, pc := range accelHBPenalties {
				for _, accel := range []Accel{accelSweepsOnly, {CSweeps: 4, BSweeps: 8, Eps: 0.01}, {CSweeps: 3, BSweeps: 1, Eps: 0.1}, {CSweeps: 1, BSweeps: 4, Eps: 0.1}} {
					name := fmt.Sprintf("%s/%s/%v/accel=%v", algo, in.name, pc, accel)
					t.Run(name, func(t *testing.T) {
						m := newMachines(t, []ShardSpec{accelHBSpec(algo, in.x, k, accel, pc, pool)}, nil)[0]
						prev := math.Inf(1)
						n := 0
						eachBoundary(t, m, iters, func(st Step) {
							n++
							obj := st.Objective
							if st.Iteration == 1 && !(obj <= st.Initial) {
								t.Errorf("iteration 1: objective %.17g above the initial %.17g", obj, st.Initial)
							}
							if !(obj <= prev) {
								t.Errorf("iteration %d: objective %.17g above the previous %.17g", st.Iteration, obj, prev)
							}
							prev = obj
							direct := directObjective(in.x, m.Basis(), m.Coef(), k, pc)
							if d := math.Abs(obj-direct) / direct; !(d <= 1e-9) {
								t.Errorf("iteration %d: reported objective %.17g, direct %.17g (relative %.3g)", st.Iteration, obj, direct, d)
							}
						})
						if n != iters {
							t.Fatalf("%d boundaries, want %d", n, iters)
						}
					})
				}
			}
		}
	}
}

// eachBoundary runs a one-shard machine to iteration last, calling fn at every iteration
// boundary (the machine's factors are those of the step).
func eachBoundary(t *testing.T, m *Machine, last int, fn func(Step)) {
	t.Helper()
	for {
		st, err := m.Next()
		if err != nil {
			t.Fatal(err)
		}
		if st.Kind == StepIterationDone {
			fn(st)
			if st.Iteration >= last {
				return
			}
			continue
		}
		out, err := Collective([]Step{st})
		if err != nil {
			t.Fatal(err)
		}
		m.Deliver(out[0])
	}
}

// firstReaching returns the first iteration whose objective is at most target (0 if none).
func firstReaching(objs []float64, target float64) int {
	for i, o := range objs {
		if o <= target {
			return i + 1
		}
	}
	return 0
}

// runObjectives runs cfg on x (one shard) and returns the objective of every iteration.
func runObjectives(t *testing.T, x Block, cfg Config) []float64 {
	t.Helper()
	var objs []float64
	res, err := Run(context.Background(), []Block{x}, cfg, func(p Progress) { objs = append(objs, p.Objective) })
	if err != nil {
		t.Fatalf("%s: %v", cfg.Algo, err)
	}
	if len(objs) != res.Iterations {
		t.Fatalf("%s: %d progress reports for %d iterations", cfg.Algo, len(objs), res.Iterations)
	}
	return objs
}

// TestAccelHBFewerIterations: on a planted low-rank matrix, accelerated hals and bcd reach the
// objective plain hals and bcd have after 200 iterations in fewer iterations than plain needs
// for it (the counts are logged).
func TestAccelHBFewerIterations(t *testing.T) {
	const k, iters = 6, 200
	var table []string
	for _, algo := range []Algorithm{HALS, BCD} {
		for _, in := range accelHBInputs(40, 1500, k) {
			for _, pc := range accelHBPenalties {
				name := fmt.Sprintf("%s/%s/%v", algo, in.name, pc)
				t.Run(name, func(t *testing.T) {
					cfg := baseConfig(algo, k, StopRule{MaxIter: iters})
					cfg.Options = pc.options()
					plain := runObjectives(t, in.x, cfg)
					target := plain[len(plain)-1]
					nPlain := firstReaching(plain, target)
					cfg.Options.Accel = accelSweepsOnly
					acc := runObjectives(t, in.x, cfg)
					nAcc := firstReaching(acc, target)
					if sp, ok := in.x.(*CSC); ok && algo == HALS && pc.alphaW == 0 {
						t.Logf("sparse input: %.0f%% of the entries stored", 100*float64(sp.NNZ())/float64(40*1500))
					}
					row := fmt.Sprintf("%-40s plain %3d, accel %3d iterations to %.10g (accel at 200: %.10g)", name, nPlain, nAcc, target, acc[len(acc)-1])
					table = append(table, row)
					t.Log(row)
					if nAcc == 0 || nAcc >= nPlain {
						t.Errorf("accelerated %s took %d iterations (0: never) to plain's 200-iteration objective %.17g, plain %d",
							algo, nAcc, target, nPlain)
					}
				})
			}
		}
	}
	t.Log("iterations to plain's 200-iteration objective:\n" + strings.Join(table, "\n"))
}

// TestAccelHBSameBitsAnyPath: the accelerated iterates do not depend on the thread count,
// the kernel path, float32 storage of an exactly representable block, or (bcd, which is
// layout invariant) the layout: the inner loops' decisions are per column or from values
// summed in an order fixed by the lanes, and every product they use is pinned.
func TestAccelHBSameBitsAnyPath(t *testing.T) {
	const k = 5
	counts := countsBlock(30, 500, 61) // small integers: float32 holds them exactly
	for _, algo := range []Algorithm{HALS, BCD} {
		for _, in := range append(accelHBInputs(25, 600, k), accelHBInput{"counts", counts}, accelHBInput{"counts-csc", ToCSC(counts)}) {
			for _, pc := range accelHBPenalties {
				var ref *Result
				for _, p := range AvailableKernelPaths() {
					for _, threads := range []int{1, 2, 4} {
						for _, storage := range []Storage{StorageAsIs, StorageFloat32} {
							if storage == StorageFloat32 && !strings.HasPrefix(in.name, "counts") {
								continue
							}
							cfg := baseConfig(algo, k, StopRule{MaxIter: 12})
							cfg.Options = pc.options()
							cfg.Options.Accel = accelSweepsOnly
							cfg.Options.Kernel, cfg.Options.Storage, cfg.Threads = p, storage, threads
							got := mustRun(t, in.x, 1, cfg)
							if ref == nil {
								ref = got
								continue
							}
							if !sameBits(ref.B, got.B) || !sameBits(ref.C, got.C) ||
								math.Float64bits(ref.Objective) != math.Float64bits(got.Objective) {
								t.Errorf("%s/%s/%v: path %s, %d threads, storage %v differ from the first run (B %.3g, C %.3g)",
									algo, in.name, pc, p, threads, storage, maxRelDiff(ref.B, got.B), maxRelDiff(ref.C, got.C))
							}
						}
					}
				}
			}
		}
		cfg := baseConfig(algo, k, StopRule{MaxIter: 12})
		cfg.Options.Accel = accelSweepsOnly
		dense, sparse := mustRun(t, counts, 1, cfg), mustRun(t, ToCSC(counts), 1, cfg)
		if algo == BCD && (!sameBits(dense.B, sparse.B) || !sameBits(dense.C, sparse.C)) {
			t.Errorf("bcd: CSC differs from dense (B %.3g, C %.3g)", maxRelDiff(dense.B, sparse.B), maxRelDiff(dense.C, sparse.C))
		}
	}
}

// TestAccelHBInterruptChecksKeepBits: looking at the interrupt flag every column changes no
// bit of accelerated hals's and bcd's steps (TestInterruptChecksKeepBits for the plain ones).
func TestAccelHBInterruptChecksKeepBits(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	for _, algo := range []Algorithm{HALS, BCD} {
		for _, in := range accelHBInputs(20, 900, 4) {
			mk := func(fine bool) [][]Step {
				ms := newMachines(t, []ShardSpec{accelHBSpec(algo, in.x, 4, accelSweepsOnly, accelHBPenalties[1], pool)}, nil)
				var looks atomic.Int64
				if fine {
					ms[0].intr.work = 1
					ms[0].intr.hook = func() { looks.Add(1) }
				}
				steps := driveMachines(t, ms, 4, nil)
				if fine && looks.Load() == 0 {
					t.Errorf("%s/%s: no looks at the flag", algo, in.name)
				}
				return append(steps, []Step{{Data: ms[0].Basis()}, {Data: ms[0].Coef()}})
			}
			coarse, fine := mk(false), mk(true)
			for s := range coarse {
				for i := range coarse[s] {
					if d := sameStep(coarse[s][i], fine[s][i]); d != "" {
						t.Fatalf("%s/%s: step %d of %d: %s", algo, in.name, i, s, d)
					}
				}
			}
		}
	}
}

// TestAccelHBChangesIterates: with Accel on, hals and bcd run the accelerated algorithm (other
// iterates than plain), and Accel{1, 1} (not On) is the plain one, bit for bit.
func TestAccelHBChangesIterates(t *testing.T) {
	const k = 4
	x := synthDense(20, 500, k, 2, 0.05)
	for _, algo := range []Algorithm{HALS, BCD} {
		cfg := baseConfig(algo, k, StopRule{MaxIter: 5})
		plain := mustRun(t, x, 1, cfg)
		cfg.Options.Accel = Accel{CSweeps: 1, BSweeps: 1, Eps: 0.5}
		one := mustRun(t, x, 1, cfg)
		if !slices.Equal(plain.B, one.B) || !slices.Equal(plain.C, one.C) {
			t.Errorf("%s: Accel{1, 1} changed the iterates", algo)
		}
		cfg.Options.Accel = accelSweepsOnly
		acc := mustRun(t, x, 1, cfg)
		if slices.Equal(plain.B, acc.B) {
			t.Errorf("%s: accelSweepsOnly gave plain's iterates", algo)
		}
	}
}

// TestAccelHBResumeBitwise: a run of accelerated hals or bcd resumed from a snapshot makes the
// steps of the run that was not stopped, bit for bit (bcd's snapshot holds the residual with
// the pending B steps applied, the further sweeps' included).
func TestAccelHBResumeBitwise(t *testing.T) {
	const last = 7
	snapAt := []int{1, 4}
	pool := NewPool(2)
	defer pool.Close()
	for _, algo := range []Algorithm{HALS, BCD} {
		for _, in := range accelHBInputs(14, 800, 5) {
			for _, pc := range accelHBPenalties {
				t.Run(fmt.Sprintf("%s/%s/%v", algo, in.name, pc), func(t *testing.T) {
					specs := []ShardSpec{accelHBSpec(algo, in.x, 5, accelSweepsOnly, pc, pool)}
					ref := newMachines(t, specs, nil)
					snaps := map[int][]Snapshot{}
					refSteps := driveMachines(t, ref, last, func(it int) {
						if it == last || slices.Contains(snapAt, it) {
							snaps[it] = snapshotAll(t, ref)
						}
					})
					for _, at := range snapAt {
						resumed := newMachines(t, specs, snaps[at])
						got := driveMachines(t, resumed, last, nil)
						sameStepsAfter(t, "snapshot", refSteps, got, at, nil)
						if d := sameSnapshot(snapshotAll(t, resumed)[0], snaps[last][0]); d != "" {
							t.Fatalf("resumed at %d: at iteration %d: %s", at, last, d)
						}
					}
				})
			}
		}
	}
}

// TestAccelHBMaskedRefused: masked hals and bcd have no accelerated form yet, and say so
// rather than run the plain algorithm under an accelerated name.
func TestAccelHBMaskedRefused(t *testing.T) {
	x := synthDense(10, 200, 3, 4, 0.05)
	for _, algo := range []Algorithm{HALS, BCD} {
		cfg := baseConfig(algo, 3, StopRule{MaxIter: 3})
		cfg.Options.TestFraction = 0.1
		cfg.Options.Accel = accelSweepsOnly
		blocks, err := Split(x, 1)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Run(context.Background(), blocks, cfg)
		if err == nil || !strings.Contains(err.Error(), "no accelerated inner loops") {
			t.Errorf("%s masked with accel: error %v, want a refusal naming the accelerated inner loops", algo, err)
		}
	}
}

// TestAccelDIDMatchesBCD: accelerated DID (Gram and residual forms, 1 and 3 shards) makes
// accelerated BCD's iterates up to round-off, as plain DID makes plain BCD's
// (TestBCDFamilySameIterates). It skips while DID ignores Options.Accel (DID with and
// without it giving the same bits), i.e. before the lead's wiring of Accel into DID.
func TestAccelDIDMatchesBCD(t *testing.T) {
	const k = 4
	accel := Accel{CSweeps: 3, BSweeps: 5, Eps: 0.1}
	for _, in := range accelHBInputs(20, 1200, k) {
		for _, pc := range accelHBPenalties {
			fixed := StopRule{MaxIter: 30}
			cfg := baseConfig(DID, k, fixed)
			cfg.Options = pc.options()
			plainDID := mustRun(t, in.x, 1, cfg)
			cfg.Options.Accel = accel
			accDID := mustRun(t, in.x, 1, cfg)
			if slices.Equal(plainDID.B, accDID.B) && slices.Equal(plainDID.C, accDID.C) {
				t.Skip("DID ignores Options.Accel at this commit (same bits with and without it): nothing to compare accelerated BCD with until Accel is wired into did.go/cstep.go")
			}
			bcd := baseConfig(BCD, k, fixed)
			bcd.Options = cfg.Options
			ref := mustRun(t, in.x, 1, bcd)
			for _, form := range []Form{FormGram, FormResidual} {
				for _, shards := range []int{1, 3} {
					c := cfg
					c.Options.Form = form
					got := mustRun(t, in.x, shards, c)
					what := fmt.Sprintf("%s/%v/%s/%d shards", in.name, pc, form, shards)
					if d := maxRelDiff(ref.B, got.B); d > 1e-9 {
						t.Errorf("%s: B differs from accelerated BCD's by %.3g relative", what, d)
					}
					if d := maxRelDiff(ref.C, got.C); d > 1e-9 {
						t.Errorf("%s: C differs from accelerated BCD's by %.3g relative", what, d)
					}
					if d := math.Abs(ref.Objective-got.Objective) / ref.Objective; d > 1e-9 {
						t.Errorf("%s: objective %.17g, accelerated BCD's %.17g", what, got.Objective, ref.Objective)
					}
				}
			}
		}
	}
}

// denseOf returns x as plain column-major values.
func denseOf(x Block) (m, n int, v []float64) {
	m, n = x.Dims()
	v = make([]float64, m*n)
	for j := 0; j < n; j++ {
		columnInto(x, j, v[j*m:(j+1)*m])
	}
	return m, n, v
}

// refSweeps runs sweep up to most times, the second and later only while the squared norm of
// the last step exceeds eps2 times the first's: the inner loops' stop rule, written from the
// description in accel.go.
func refSweeps(most int, eps2 float64, sweep func() float64) {
	first := sweep()
	for l, st := 1, first; l < most && st > eps2*first; l++ {
		st = sweep()
	}
}

// refAccelDID is accelerated DID written from its description (accel.go, design of issue 35)
// in plain loops over a dense X (M x N column-major), with the penalty pen: per column of C the
// coordinate sweep from h_j = B^T x_j and G = B^T B, repeated by the stop rule; then from
// W = X C^T - B C C^T and V = C C^T (penalty-shifted) the incremental B sweep, repeated by the
// stop rule with the step measured against the B the iteration started from.
func refAccelDID(x []float64, m, n, k int, b, c []float64, iters int, acc Accel, pen penalty) {
	eps2 := acc.Eps * acc.Eps
	g := make([]float64, k*k)
	v := make([]float64, k*k)
	w := make([]float64, m*k)
	db := make([]float64, m*k)
	h := make([]float64, k)
	for it := 0; it < iters; it++ {
		for p := 0; p < k; p++ {
			for q := 0; q < k; q++ {
				g[p*k+q] = dot(b[p*m:(p+1)*m], b[q*m:(q+1)*m])
			}
		}
		for j := 0; j < n; j++ {
			cj := c[j*k : (j+1)*k]
			for p := range h {
				h[p] = dot(b[p*m:(p+1)*m], x[j*m:(j+1)*m])
			}
			refSweeps(max(acc.CSweeps, 1), eps2, func() (st float64) {
				for p := 0; p < k; p++ {
					hpp := g[p*k+p] + pen.l2C
					if !(hpp > 0) {
						continue
					}
					num := h[p] - pen.l1C
					for q := 0; q < k; q++ {
						if q != p {
							num -= g[p*k+q] * cj[q]
						}
					}
					nc := max(num/hpp, 0)
					st += (nc - cj[p]) * (nc - cj[p])
					cj[p] = nc
				}
				return st
			})
		}
		for p := 0; p < k; p++ {
			for q := 0; q < k; q++ {
				var s float64
				for j := 0; j < n; j++ {
					s += c[j*k+p] * c[j*k+q]
				}
				v[p*k+q] = s
			}
			v[p*k+p] += pen.l2B
		}
		for i := 0; i < m; i++ {
			for p := 0; p < k; p++ {
				var s float64
				for j := 0; j < n; j++ {
					s += x[j*m+i] * c[j*k+p]
				}
				for q := 0; q < k; q++ {
					s -= b[q*m+i] * v[q*k+p] // v includes l2B on the diagonal: the shift of W
				}
				w[p*m+i] = s - pen.l1B
			}
		}
		clear64(db)
		refSweeps(max(acc.BSweeps, 1), eps2, func() (st float64) {
			for p := 0; p < k; p++ {
				vpp := v[p*k+p]
				if !(vpp > 0) {
					continue
				}
				for i := 0; i < m; i++ {
					num := w[p*m+i]
					for q := 0; q < k; q++ {
						num -= v[p*k+q] * db[q*m+i]
					}
					nb := max(b[p*m+i]+num/vpp, 0)
					d := nb - b[p*m+i]
					st += d * d
					db[p*m+i] += d
					b[p*m+i] = nb
				}
			}
			return st
		})
	}
}

// refAccelHALS is accelerated HALS written from its description (hals.go) in plain loops:
// from A = X C^T and V = C C^T the HALS sweeps over B's components, then from H = B^T X and
// G = B^T B those over C's rows, each repeated by the stop rule on the whole factor's step.
func refAccelHALS(x []float64, m, n, k int, b, c []float64, iters int, acc Accel, pen penalty) {
	eps2 := acc.Eps * acc.Eps
	a := make([]float64, m*k)
	v := make([]float64, k*k)
	h := make([]float64, k*n)
	g := make([]float64, k*k)
	for it := 0; it < iters; it++ {
		for p := 0; p < k; p++ {
			for i := 0; i < m; i++ {
				var s float64
				for j := 0; j < n; j++ {
					s += x[j*m+i] * c[j*k+p]
				}
				a[p*m+i] = s
			}
			for q := 0; q < k; q++ {
				var s float64
				for j := 0; j < n; j++ {
					s += c[j*k+p] * c[j*k+q]
				}
				v[p*k+q] = s
			}
		}
		refSweeps(max(acc.BSweeps, 1), eps2, func() (st float64) {
			for p := 0; p < k; p++ {
				hpp := v[p*k+p] + pen.l2B
				if !(hpp > 0) {
					continue
				}
				for i := 0; i < m; i++ {
					num := a[p*m+i] - pen.l1B
					for q := 0; q < k; q++ {
						if q != p {
							num -= b[q*m+i] * v[q*k+p]
						}
					}
					nb := max(num/hpp, 0)
					st += (nb - b[p*m+i]) * (nb - b[p*m+i])
					b[p*m+i] = nb
				}
			}
			return st
		})
		for p := 0; p < k; p++ {
			for j := 0; j < n; j++ {
				h[j*k+p] = dot(b[p*m:(p+1)*m], x[j*m:(j+1)*m])
			}
			for q := 0; q < k; q++ {
				g[p*k+q] = dot(b[p*m:(p+1)*m], b[q*m:(q+1)*m])
			}
		}
		refSweeps(max(acc.CSweeps, 1), eps2, func() (st float64) {
			for p := 0; p < k; p++ {
				hpp := g[p*k+p] + pen.l2C
				if !(hpp > 0) {
					continue
				}
				for j := 0; j < n; j++ {
					num := h[j*k+p] - pen.l1C
					for q := 0; q < k; q++ {
						if q != p {
							num -= g[p*k+q] * c[j*k+q]
						}
					}
					nc := max(num/hpp, 0)
					st += (nc - c[j*k+p]) * (nc - c[j*k+p])
					c[j*k+p] = nc
				}
			}
			return st
		})
	}
}

// TestAccelHBMatchesReference: accelerated bcd gives the iterates of accelerated DID and
// accelerated hals those of Gillis and Glineur's accelerated HALS, each written from its
// description in plain loops (refAccelDID, refAccelHALS), up to round-off, dense and sparse,
// with and without penalties, for four settings of the inner loops (both loops, C's alone,
// B's alone), at K = 1, 4 and 7. The stop decisions compare
// step norms that round differently here and there; a decision that flipped would show as a
// difference far above round-off.
func TestAccelHBMatchesReference(t *testing.T) {
	const iters = 12
	for _, k := range []int{1, 4, 7} {
		testAccelHBMatchesReference(t, k, iters)
	}
}

func testAccelHBMatchesReference(t *testing.T, k, iters int) {
	for _, in := range accelHBInputs(18, 400, k) {
		m, n, xd := denseOf(in.x)
		b0, c0 := penaltyStart(m, n, k)
		for _, pc := range accelHBPenalties {
			pen := newPenalty(pc.options(), m, n)
			for _, acc := range []Accel{accelSweepsOnly, {CSweeps: 5, BSweeps: 3, Eps: 0.3}, {CSweeps: 3, BSweeps: 1, Eps: 0.1}, {CSweeps: 1, BSweeps: 4, Eps: 0.1}} {
				for _, algo := range []Algorithm{BCD, HALS} {
					what := fmt.Sprintf("%s/%s/K=%d/%v/accel=%v", algo, in.name, k, pc, acc)
					cfg := customConfig(algo, k, b0, c0, iters, pc)
					cfg.Options.Accel = acc
					got := mustRun(t, in.x, 1, cfg)
					b, c := slices.Clone(b0), slices.Clone(c0)
					if algo == BCD {
						refAccelDID(xd, m, n, k, b, c, iters, acc, pen)
					} else {
						refAccelHALS(xd, m, n, k, b, c, iters, acc, pen)
					}
					if d := maxRelDiff(b, got.B); !(d <= 1e-10) {
						t.Errorf("%s: B differs from the reference by %.3g relative", what, d)
					}
					if d := maxRelDiff(c, got.C); !(d <= 1e-10) {
						t.Errorf("%s: C differs from the reference by %.3g relative", what, d)
					}
					plain := cfg
					plain.Options.Accel = Accel{}
					// (At K = 1 one sweep minimizes exactly: the further ones change nothing.)
					if p := mustRun(t, in.x, 1, plain); k > 1 && maxRelDiff(p.B, got.B) < 1e-6 {
						t.Errorf("%s: the accelerated run is plain's", what)
					}
				}
			}
		}
	}
}

// accelSweepsOnly is AccelAuto's inner sweeps without its extrapolation, which hals and bcd
// do not have.
var accelSweepsOnly = Accel{CSweeps: AccelAuto.CSweeps, BSweeps: AccelAuto.BSweeps, Eps: AccelAuto.Eps}
