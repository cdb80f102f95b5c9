package kernels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The losses of MU (loss.go, beta.go, "Losses" in doc.go): against scikit-learn 1.2's
// solver="mu", across shard counts, threads and kernel paths, the Frobenius MU's single-shard
// bits, the reported objective, resumes, and the refusals.

// lossCase is a loss with a penalty, on dense or CSC data.
type lossCase struct {
	loss   Loss
	sparse bool
	pen    penaltyCase
}

func (c lossCase) String() string {
	layout := "dense"
	if c.sparse {
		layout = "sparse"
	}
	return fmt.Sprintf("%s/%s/%s", c.loss, layout, c.pen)
}

// lossData returns the test matrix of a loss: positive everywhere for beta <= 0 (IS needs it;
// "sparse" is then its CSC form with every entry stored), otherwise with about 40% zeros.
func lossData(loss Loss, sparse bool, m, n, k int, seed uint64) Block {
	x := synthDense(m, n, k, seed, 0.1)
	if loss.Beta() > 0 {
		x = sparsify(x, 0.4, seed+1)
	}
	if sparse {
		return ToCSC(x)
	}
	return x
}

// lossSklearnScript runs scikit-learn's NMF(solver="mu") for every case of job.json on X
// (x<i>.bin: dense, or scipy.sparse CSR for "sparse"), from W0 = C0^T, H0 = B0^T
// (wstart.bin, hstart.bin), and writes w<i>.bin,
// h<i>.bin and div<i>.bin (its _beta_divergence at the result).
const lossSklearnScript = `
import json, sys, warnings
import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import NMF
from sklearn.decomposition._nmf import _beta_divergence
d = sys.argv[1]
job = json.load(open(d + "/job.json"))
n, m, k = job["n"], job["m"], job["k"]
warnings.simplefilter("ignore")
for i, c in enumerate(job["cases"]):
    X = np.fromfile(d + "/x%d.bin" % i, dtype="<f8").reshape(n, m)
    W0 = np.fromfile(d + "/wstart.bin", dtype="<f8").reshape(n, k)
    H0 = np.fromfile(d + "/hstart.bin", dtype="<f8").reshape(k, m)
    if c["sparse"]:
        X = sp.csr_matrix(X)
    model = NMF(n_components=k, init="custom", solver="mu", beta_loss=c["beta"], tol=0,
                max_iter=c["iters"], alpha_W=c["alpha_W"], alpha_H=c["alpha_H"],
                l1_ratio=c["l1_ratio"])
    W = model.fit_transform(X, W=W0, H=H0)
    if model.n_iter_ != c["iters"]:
        sys.exit("case %d: %d iterations, want %d" % (i, model.n_iter_, c["iters"]))
    H = model.components_
    np.ascontiguousarray(W, dtype="<f8").tofile(d + "/w%d.bin" % i)
    np.ascontiguousarray(H, dtype="<f8").tofile(d + "/h%d.bin" % i)
    np.array([_beta_divergence(X, W, H, c["beta"])], dtype="<f8").tofile(d + "/div%d.bin" % i)
`

// sklearnLossResult is scikit-learn's B (= H^T), C (= W^T) and _beta_divergence of a case.
type sklearnLossResult struct {
	b, c []float64
	div  float64
}

// runSklearnLosses fits every case with scikit-learn for iters iterations from (b0, c0).
func runSklearnLosses(t *testing.T, xs []Block, k int, b0, c0 []float64, cases []lossCase, iters int) []sklearnLossResult {
	t.Helper()
	dir := t.TempDir()
	m, n := xs[0].Dims()
	writeFloats(t, filepath.Join(dir, "wstart.bin"), c0)
	writeFloats(t, filepath.Join(dir, "hstart.bin"), b0)
	type jobCase struct {
		Beta    float64 `json:"beta"`
		Sparse  bool    `json:"sparse"`
		Iters   int     `json:"iters"`
		AlphaW  float64 `json:"alpha_W"`
		AlphaH  float64 `json:"alpha_H"`
		L1Ratio float64 `json:"l1_ratio"`
	}
	job := struct {
		N     int       `json:"n"`
		M     int       `json:"m"`
		K     int       `json:"k"`
		Cases []jobCase `json:"cases"`
	}{N: n, M: m, K: k}
	for i, c := range cases {
		writeFloats(t, filepath.Join(dir, fmt.Sprintf("x%d.bin", i)), ToDense(xs[i]).Data)
		job.Cases = append(job.Cases, jobCase{c.loss.Beta(), c.sparse, iters, c.pen.alphaW, c.pen.alphaH, c.pen.l1Ratio})
	}
	js, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "job.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "nmf.py")
	if err := os.WriteFile(script, []byte(lossSklearnScript), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sklearnPython, script, dir).CombinedOutput(); err != nil {
		t.Fatalf("scikit-learn: %v\n%s", err, out)
	}
	res := make([]sklearnLossResult, len(cases))
	for i := range cases {
		res[i].b = readFloats(t, filepath.Join(dir, fmt.Sprintf("h%d.bin", i)), m*k)
		res[i].c = readFloats(t, filepath.Join(dir, fmt.Sprintf("w%d.bin", i)), k*n)
		res[i].div = readFloats(t, filepath.Join(dir, fmt.Sprintf("div%d.bin", i)), 1)[0]
	}
	return res
}

// lossCases: KL, IS and beta 1.5 (and 0.5 and 3, whose steps take the power gamma = 2/3 and
// 1/2), dense and sparse, without and with penalties on both factors.
func lossCases() []lossCase {
	var cases []lossCase
	for _, loss := range []Loss{LossKL, LossIS, BetaLoss(1.5), BetaLoss(0.5), BetaLoss(3)} {
		for _, sparse := range []bool{false, true} {
			for _, pen := range []penaltyCase{{}, {0.05, 0.02, 0.5}} {
				cases = append(cases, lossCase{loss, sparse, pen})
			}
		}
	}
	return cases
}

// TestLossesMatchScikitLearn: MU with each loss, from the same start as scikit-learn's
// NMF(solver="mu", beta_loss=beta, init="custom", tol=0, max_iter=40), gives its iterates,
// on 1 and 3 shards, dense and sparse (CSR for scikit-learn), with and without penalties, and
// reports 2 x its _beta_divergence (plus the penalties) as the objective. The updates are the
// same; the sums differ in order (BLAS and numpy's pairwise sums against our fixed loops) and
// the non-trivial powers by a few ulps (glibc's pow against powPinned): measured at most
// 6.7e-14 relative (beta 0.5, whose gamma = 2/3 power amplifies), so the bound is 1e-12. The
// objective's relative difference is larger for IS (up to 5e-13): its sum x/y - M N -
// sum log(x/y) cancels to a small fraction of M N; the bound is 1e-11.
func TestLossesMatchScikitLearn(t *testing.T) {
	v := needSklearn(t)
	const iters, m, n, k = 40, 12, 240, 3
	b0, c0 := penaltyStart(m, n, k)
	cases := lossCases()
	xs := make([]Block, len(cases))
	for i, c := range cases {
		xs[i] = lossData(c.loss, c.sparse, m, n, k, 67)
	}
	want := runSklearnLosses(t, xs, k, b0, c0, cases, iters)
	worst := map[Loss]float64{}
	for i, c := range cases {
		if c.pen != (penaltyCase{}) {
			if d := maxRelDiff(want[i-1].c, want[i].c); d < 1e-2 {
				t.Errorf("%s: the penalty moves scikit-learn's C by only %.3g: the case tests little", c, d)
			}
		}
		for _, p := range []int{1, 3} {
			cfg := customConfig(MU, k, b0, c0, iters, c.pen)
			cfg.Options.Loss = c.loss
			got := mustRun(t, xs[i], p, cfg)
			db, dc := maxRelDiff(want[i].b, got.B), maxRelDiff(want[i].c, got.C)
			obj := 2*want[i].div + penaltyOf(want[i].b, want[i].c, m, n, c.pen)
			do := math.Abs(got.Objective-obj) / obj
			worst[c.loss] = max(worst[c.loss], db, dc)
			t.Logf("%s P=%d: B %.3g, C %.3g, objective %.3g (relative to scikit-learn)", c, p, db, dc, do)
			if db > 1e-12 || dc > 1e-12 || do > 1e-11 {
				t.Errorf("%s P=%d: B differs from scikit-learn's by %.3g, C by %.3g, the objective %.17g from 2 x its divergence (+ penalty) %.17g by %.3g (relative)",
					c, p, db, dc, got.Objective, obj, do)
			}
		}
	}
	for _, l := range slices.SortedFunc(maps.Keys(worst), func(a, b Loss) int { return strings.Compare(a.String(), b.String()) }) {
		t.Logf("scikit-learn %s mu, %d iterations, loss %s: largest relative difference of the factors %.3g", v, iters, l, worst[l])
	}
}

// penaltyOf is the penalty term of the objective at (b, c) with scikit-learn's scaling, for
// M features and N samples.
func penaltyOf(b, c []float64, m, n int, pc penaltyCase) float64 {
	l1W := float64(m) * pc.alphaW * pc.l1Ratio
	l2W := float64(m) * pc.alphaW * (1 - pc.l1Ratio)
	l1H := float64(n) * pc.alphaH * pc.l1Ratio
	l2H := float64(n) * pc.alphaH * (1 - pc.l1Ratio)
	norms := func(f []float64) (s1, s2 float64) {
		for _, v := range f {
			s1 += math.Abs(v)
			s2 += v * v
		}
		return s1, s2
	}
	c1, c2 := norms(c)
	b1, b2 := norms(b)
	return 2*l1W*c1 + l2W*c2 + 2*l1H*b1 + l2H*b2
}

// directDivergence is scikit-learn's _beta_divergence(X, W, H, beta) for X (M x N), W = C^T,
// H = B^T, from its definition in plain loops: over the entries with x > float32 eps (BC
// there 0 -> eps) for the terms in x, over all entries for the terms in BC alone (beta = 2:
// half the squared residual). With observed non-nil every sum runs over the entries it
// accepts only (a masked run's objective).
func directDivergence(x Block, observed func(i, j int) bool, b, c []float64, k int, beta float64) float64 {
	m, n := x.Dims()
	xd := ToDense(x)
	const eps = 0x1p-23
	var sx, sxlog, sdiv, slog, sxb, sxy, sy, syb, sq, count float64
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			if observed != nil && !observed(i, j) {
				continue
			}
			count++
			var y float64
			for p := 0; p < k; p++ {
				y += b[p*m+i] * c[j*k+p]
			}
			v := xd.At(i, j)
			sq += (v - y) * (v - y)
			sy += y
			syb += math.Pow(y, beta)
			if !(v > eps) {
				continue
			}
			ys := y
			if ys == 0 {
				ys = eps
			}
			sx += v
			sxlog += v * math.Log(v/ys)
			sdiv += v / ys
			slog += math.Log(v / ys)
			sxb += math.Pow(v, beta)
			sxy += v * math.Pow(ys, beta-1)
		}
	}
	switch beta {
	case 2:
		return sq / 2
	case 1:
		return sxlog + sy - sx
	case 0:
		return sdiv - count - slog
	}
	return (sxb - beta*sxy + (beta-1)*syb) / (beta * (beta - 1))
}

// TestLossObjectiveIsDirect: the objective MU reports with each loss, at the start and after
// the last iteration, on 1 and 3 shards, is 2 D_beta(X | BC) plus the penalties, D_beta
// computed directly at the factors it returns (directDivergence): the returned factors are the
// reported objective's, not the next iterate's. Within 1e-12 relative (measured 3.2e-13): the
// sums run in other orders and cancel (KL: sum y - sum x; IS: sum x/y - M N). With beta in
// [1, 2] (gamma = 1) and no
// penalty the objective never rises.
func TestLossObjectiveIsDirect(t *testing.T) {
	const m, n, k = 15, 500, 4
	b0, c0 := penaltyStart(m, n, k)
	worst := 0.0
	for _, c := range lossCases() {
		x := lossData(c.loss, c.sparse, m, n, k, 13)
		for _, p := range []int{1, 3} {
			cfg := customConfig(MU, k, b0, c0, 25, c.pen)
			cfg.Options.Loss = c.loss
			res := mustRun(t, x, p, cfg)
			beta := c.loss.Beta()
			w0 := 2*directDivergence(x, nil, b0, c0, k, beta) + penaltyOf(b0, c0, m, n, c.pen)
			w1 := 2*directDivergence(x, nil, res.B, res.C, k, beta) + penaltyOf(res.B, res.C, m, n, c.pen)
			d0, d1 := math.Abs(res.Initial-w0)/w0, math.Abs(res.Objective-w1)/w1
			worst = max(worst, d0, d1)
			if d0 > 1e-12 || d1 > 1e-12 {
				t.Errorf("%s P=%d: initial %.17g (direct %.17g, %.3g), final %.17g (direct %.17g, %.3g)",
					c, p, res.Initial, w0, d0, res.Objective, w1, d1)
			}
			if beta >= 1 && beta <= 2 && c.pen == (penaltyCase{}) {
				for i := 1; i < len(res.History); i++ {
					if prev, cur := res.History[i-1].Ratio, res.History[i].Ratio; cur > prev*(1+1e-12) {
						t.Errorf("%s P=%d: objective ratio rose from %.15g to %.15g at iteration %d", c, p, prev, cur, i)
						break
					}
				}
			}
			if res.Objective >= res.Initial {
				t.Errorf("%s P=%d: objective %.6g, initial %.6g: no progress", c, p, res.Objective, res.Initial)
			}
		}
	}
	t.Logf("largest relative difference from the direct objective: %.3g", worst)
}

// TestLossShardCounts: with each loss, P = 2, 3 and 5 shards agree with P = 1 to round-off
// (the payload sums in another grouping: measured at most 2.2e-15 relative for the factors,
// 3e-14 for the objective but 2.2e-13 for IS, whose sum x/y - M N - sum log(x/y) cancels;
// bound 1e-12), every
// P gives bitwise the same factors and objective on every kernel path and thread count, and
// each iteration runs exactly one collective (the "mu.beta" allreduce, whose payload is
// counted) after one during initialisation.
func TestLossShardCounts(t *testing.T) {
	t.Parallel()
	const m, n, k, iters = 14, 700, 4, 30
	for _, c := range []lossCase{
		{LossKL, false, penaltyCase{}}, {LossKL, true, testPenalty}, {LossIS, false, penaltyCase{}},
		{LossIS, true, testPenalty}, {BetaLoss(1.5), true, penaltyCase{}}, {BetaLoss(-0.5), false, testPenalty},
	} {
		x := lossData(c.loss, c.sparse, m, n, k, 23)
		var one *Result
		for _, p := range []int{1, 2, 3, 5} {
			var ref *Result
			for _, path := range AvailableKernelPaths() {
				for _, threads := range []int{1, 2, 4} {
					cfg := baseConfig(MU, k, StopRule{MaxIter: iters})
					cfg.Options = c.pen.options()
					cfg.Options.Loss = c.loss
					cfg.Threads = threads
					cfg.Options.Kernel = path
					res := mustRun(t, x, p, cfg)
					if ref == nil {
						ref = res
						continue
					}
					if !sameBits(res.B, ref.B) || !sameBits(res.C, ref.C) ||
						math.Float64bits(res.Objective) != math.Float64bits(ref.Objective) ||
						math.Float64bits(res.Initial) != math.Float64bits(ref.Initial) {
						t.Errorf("%s P=%d: path %s with %d threads differs (B %.3g, C %.3g)", c, p, path, threads,
							maxRelDiff(ref.B, res.B), maxRelDiff(ref.C, res.C))
					}
				}
			}
			payload := m*k + m*k + 3
			switch c.loss {
			case LossKL:
				payload = m*k + k + 2 + k
			case LossIS:
				payload = m*k + m*k + 2
			}
			if c.pen.alphaW != 0 {
				payload += 2
			}
			if ref.Comm.PerIteration != 1 || ref.Comm.Collectives != iters || ref.Comm.InitCollectives < 1 ||
				ref.Comm.FloatsPerIteration != float64(p*payload) {
				t.Errorf("%s P=%d: %+v; want 1 collective per iteration of %d floats per shard", c, p, ref.Comm, payload)
			}
			if p == 1 {
				one = ref
				continue
			}
			db, dc := maxRelDiff(one.B, ref.B), maxRelDiff(one.C, ref.C)
			do := math.Abs(one.Objective-ref.Objective) / one.Objective
			t.Logf("%s P=%d vs P=1: B %.3g, C %.3g, objective %.3g", c, p, db, dc, do)
			if db > 1e-12 || dc > 1e-12 || do > 1e-12 {
				t.Errorf("%s P=%d vs P=1: B differs by %.3g, C by %.3g, the objective by %.3g", c, p, db, dc, do)
			}
		}
	}
}

// TestLossOneCollectivePerIteration: a machine with a loss asks, between two iteration
// boundaries, for exactly one collective, the allreduce "mu.beta", and for one before
// iteration 1 (after the initialisation's own).
func TestLossOneCollectivePerIteration(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	x := lossData(LossKL, true, 10, 300, 3, 5)
	specs := shardSpecs(t, x, 3, MU, FormAuto, pool)
	for s := range specs {
		specs[s].Loss = LossKL
	}
	steps := driveMachines(t, newMachines(t, specs, nil), 5, nil)
	var labels []string
	for _, st := range steps[0] {
		switch {
		case st.Kind == StepIterationDone:
			labels = append(labels, fmt.Sprintf("|%d", st.Iteration))
		case st.Init && st.Label != "mu.beta":
			// the initialisation's own collectives
		default:
			labels = append(labels, fmt.Sprintf("%s/%s/%d", st.Op, st.Label, st.Iteration))
		}
	}
	want := "allreduce/mu.beta/0 allreduce/mu.beta/1 |1 allreduce/mu.beta/2 |2 allreduce/mu.beta/3 |3 allreduce/mu.beta/4 |4 allreduce/mu.beta/5 |5"
	if got := strings.Join(labels, " "); got != want {
		t.Errorf("steps: %s\nwant:  %s", got, want)
	}
}

// TestMUFrobeniusOneShardBits: the Frobenius MU on one shard gives bitwise the factors,
// initial and final objectives and history ratios of the single-shard MU it replaced
// (testdata/mu_p1.golden, taken before the change: its B and C lines are those the bits
// golden files held for mu/p1), unpenalized and penalized, dense and sparse.
func TestMUFrobeniusOneShardBits(t *testing.T) {
	want, err := readGolden("testdata/mu_p1.golden")
	if err != nil {
		t.Fatal(err)
	}
	dense := synthDense(20, 300, 4, 31, 0.05)
	sparse := ToCSC(sparsify(synthDense(20, 300, 4, 37, 0.05), 0.6, 5))
	got := map[string]string{}
	for _, data := range []struct {
		name string
		x    Block
	}{{"dense", dense}, {"sparse", sparse}} {
		for _, pc := range []penaltyCase{{}, testPenalty, {0.02, 0.01, 1}} {
			cfg := bitsConfig(MU, StopRule{MaxIter: 30})
			cfg.Options = pc.options()
			name := data.name + "/mu/p1"
			if pc != (penaltyCase{}) {
				name += "/auto/" + pc.String()
			}
			res := mustRun(t, data.x, 1, cfg)
			obj := []float64{res.Initial, res.Objective}
			for _, h := range res.History {
				obj = append(obj, h.Ratio)
			}
			got[name+"/B"], got[name+"/C"], got[name+"/objective"] = hashFloats(res.B), hashFloats(res.C), hashFloats(obj)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d hashes computed, %d in the golden file", len(got), len(want))
	}
	for name, h := range got {
		if want[name] != h {
			t.Errorf("%s: bits differ from the single-shard MU", name)
		}
	}
}

// TestLossLayoutStorageResume: with a loss, MU gives the same bits on a dense block, its CSC
// form and both stored as float32; looking at the interrupt flag every column changes no bit;
// and machines resumed from snapshots (which hold B_next) make bitwise the steps of the
// uninterrupted job.
func TestLossLayoutStorageResume(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	for _, loss := range []Loss{LossKL, LossIS, BetaLoss(1.5)} {
		dense := countsBlock(16, 400, 29)
		for i := range dense.Data {
			if loss.Beta() <= 0 {
				dense.Data[i]++
			}
		}
		var ref *Result
		for _, x := range []Block{dense, ToCSC(dense)} {
			for _, st := range []Storage{StorageFloat64, StorageFloat32} {
				cfg := baseConfig(MU, 3, StopRule{MaxIter: 15})
				cfg.Options = testPenalty.options()
				cfg.Options.Loss, cfg.Options.Storage = loss, st
				res := mustRun(t, x, 2, cfg)
				if ref == nil {
					ref = res
				} else if !sameBits(res.B, ref.B) || !sameBits(res.C, ref.C) ||
					math.Float64bits(res.Objective) != math.Float64bits(ref.Objective) {
					t.Errorf("%s %T %s: differs from the dense float64 block (B %.3g, C %.3g)", loss, x, st,
						maxRelDiff(ref.B, res.B), maxRelDiff(ref.C, res.C))
				}
			}
		}
		for _, x := range []Block{dense, ToCSC(dense)} {
			const last = 6
			name := fmt.Sprintf("%s/%T", loss, x)
			specs := shardSpecs(t, x, 3, MU, FormAuto, pool)
			for s := range specs {
				specs[s].Loss = loss
				specs[s].AlphaCoef, specs[s].AlphaBasis, specs[s].L1Ratio = testPenalty.alphaW, testPenalty.alphaH, testPenalty.l1Ratio
			}
			refMs := newMachines(t, specs, nil)
			snaps := map[int][]Snapshot{}
			refSteps := driveMachines(t, refMs, last, func(it int) {
				if it == 1 || it == 3 {
					snaps[it] = snapshotAll(t, refMs)
				}
			})
			fine := newMachines(t, specs, nil)
			for _, m := range fine {
				m.intr.work = 1
			}
			for s, steps := range driveMachines(t, fine, last, nil) {
				for i := range steps {
					if d := sameStep(refSteps[s][i], steps[i]); d != "" {
						t.Fatalf("%s: checking the flag every column: shard %d step %d: %s", name, s, i, d)
					}
				}
			}
			for _, at := range []int{1, 3} {
				if len(snaps[at][0].State) != 1 || len(snaps[at][0].State[0]) != 16*5 {
					t.Fatalf("%s: snapshot state %d slices, want B_next", name, len(snaps[at][0].State))
				}
				got := driveMachines(t, newMachines(t, specs, snaps[at]), last, nil)
				sameStepsAfter(t, name, refSteps, got, at, nil)
			}
		}
	}
}

// TestLossInterrupt: a machine with a loss interrupted in the middle of an iteration's pass
// returns ErrInterrupted at once, its factors a consistent iterate: the (B_t, C_t) the
// iteration started from and would have reported (the pass writes C_{t+1} aside).
func TestLossInterrupt(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	x := lossData(LossKL, false, 12, 1600, 4, 41)
	specs := shardSpecs(t, x, 2, MU, FormAuto, pool)
	for s := range specs {
		specs[s].Loss = LossKL
	}
	ref := newMachines(t, specs, nil)
	driveMachines(t, ref, 3, nil)
	ms := newMachines(t, specs, nil)
	ms[0].intr.work = 1 // a look every column
	driveMachines(t, ms, 2, nil)
	looks := 0
	ms[0].intr.hook = func() {
		if looks++; looks == 50 {
			ms[0].Interrupt()
		}
	}
	if _, err := ms[0].Next(); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("Next returned %v, want ErrInterrupted", err)
	}
	if looks > 50+2*maxLanes {
		t.Errorf("%d looks after the interrupt", looks-50)
	}
	if !sameBits(ms[0].Basis(), ref[0].Basis()) || !sameBits(ms[0].Coef(), ref[0].Coef()) {
		t.Errorf("the interrupted iteration 3 left other factors than the (B_3, C_3) it reports")
	}
}

// TestLossRefusals: the loss options and data that are refused, with their messages: another
// algorithm than mu, a beta that is not a finite number, zeros in X for beta <= 0 (stored or,
// in a CSC block, not stored), negative entries; and what ParseLoss accepts.
func TestLossRefusals(t *testing.T) {
	for _, a := range Algorithms() {
		err := Options{Loss: LossKL}.ValidateLoss(a.Name)
		if a.Name == MU {
			if err != nil {
				t.Errorf("mu with kl: %v", err)
			}
			continue
		}
		want := "loss kl needs algo mu; did, dbcd, bcd, hals, anls, admm, dadmm, hpc-anls"
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), " minimise the Frobenius loss") {
			t.Errorf("%s with kl: %v, want %q...", a.Name, err, want)
		}
		if err := (Options{}).ValidateLoss(a.Name); err != nil {
			t.Errorf("%s with the Frobenius loss: %v", a.Name, err)
		}
	}
	if err := (Options{Loss: BetaLoss(math.NaN())}).ValidateLoss(MU); err == nil || err.Error() != "loss beta must be a finite number, got NaN" {
		t.Errorf("NaN beta: %v", err)
	}
	if err := (Options{Loss: BetaLoss(1.5)}).ValidateLoss(DID); err == nil || !strings.HasPrefix(err.Error(), "loss 1.5 needs algo mu; ") {
		t.Errorf("did with beta 1.5: %v", err)
	}

	// Data: on 3 shards the error names the sample of all of X.
	pos := synthDense(6, 30, 2, 3, 0.1)
	withZero := &Dense{Rows: 6, Cols: 30, Data: slices.Clone(pos.Data)}
	withZero.Data[25*6+4] = 0 // sample 25, feature 4 (shard 2 holds samples 20-29)
	negative := &Dense{Rows: 6, Cols: 30, Data: slices.Clone(pos.Data)}
	negative.Data[7*6+1] = -0.5
	missing := ToCSC(pos)
	missing = &CSC{Rows: missing.Rows, Cols: missing.Cols, ColPtr: slices.Clone(missing.ColPtr), RowIdx: slices.Clone(missing.RowIdx), Val: slices.Clone(missing.Val)}
	// Drop sample 12's feature 0 from the CSC block.
	drop := missing.ColPtr[12]
	missing.RowIdx = slices.Delete(missing.RowIdx, drop, drop+1)
	missing.Val = slices.Delete(missing.Val, drop, drop+1)
	for j := 13; j <= missing.Cols; j++ {
		missing.ColPtr[j]--
	}
	isMsg := func(j, i int) string {
		return fmt.Sprintf("loss is (beta 0) needs X > 0 everywhere, as scikit-learn does for beta <= 0: sample %d, feature %d is 0", j, i)
	}
	cases := []struct {
		name string
		x    Block
		loss Loss
		want string
	}{
		{"is, a stored zero", withZero, LossIS, isMsg(25, 4)},
		{"beta -1, a stored zero", withZero, BetaLoss(-1), "loss -1 (beta -1) needs X > 0 everywhere, as scikit-learn does for beta <= 0: sample 25, feature 4 is 0"},
		{"is, an entry CSC does not store", missing, LossIS, isMsg(12, 0)},
		{"is, sparse data", ToCSC(withZero), LossIS, isMsg(25, 4)},
		{"kl, a negative entry", negative, LossKL, "loss kl needs X >= 0: sample 7, feature 1 is -0.5"},
		{"beta 1.5, a negative entry", negative, BetaLoss(1.5), "loss 1.5 needs X >= 0: sample 7, feature 1 is -0.5"},
	}
	for _, c := range cases {
		blocks, _ := Split(c.x, 3)
		cfg := baseConfig(MU, 2, StopRule{MaxIter: 3})
		cfg.Options.Loss = c.loss
		_, err := Run(context.Background(), blocks, cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Run returned %v, want an error containing %q", c.name, err, c.want)
		}
		if err := c.loss.CheckData(c.x, 0); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: CheckData returned %v, want %q...", c.name, err, c.want)
		}
	}
	// What the losses accept: zeros for beta > 0, and the Frobenius loss anything.
	for _, l := range []Loss{LossKL, BetaLoss(0.5), LossFrobenius} {
		if err := l.CheckData(withZero, 0); err != nil {
			t.Errorf("%s with a zero: %v", l, err)
		}
	}
	if err := LossFrobenius.CheckData(negative, 0); err != nil {
		t.Errorf("frobenius with a negative entry: %v", err)
	}
}

// TestParseLoss: names, numbers and their round trip through String and MarshalText.
func TestParseLoss(t *testing.T) {
	var zero Options
	if zero.Loss != LossFrobenius || LossFrobenius.Beta() != 2 || LossKL.Beta() != 1 || LossIS.Beta() != 0 {
		t.Fatalf("constants: zero value %v, betas %v %v %v", zero.Loss, LossFrobenius.Beta(), LossKL.Beta(), LossIS.Beta())
	}
	for _, c := range []struct {
		in   string
		want Loss
		str  string
	}{
		{"frobenius", LossFrobenius, "frobenius"}, {"", LossFrobenius, "frobenius"}, {"2", LossFrobenius, "frobenius"},
		{"kl", LossKL, "kl"}, {"KL", LossKL, "kl"}, {"kullback-leibler", LossKL, "kl"}, {"1", LossKL, "kl"}, {"1.0", LossKL, "kl"},
		{"is", LossIS, "is"}, {"itakura-saito", LossIS, "is"}, {"0", LossIS, "is"}, {"-0", LossIS, "is"},
		{"1.5", BetaLoss(1.5), "1.5"}, {"-0.25", BetaLoss(-0.25), "-0.25"}, {"3", BetaLoss(3), "3"},
		{"0.1", BetaLoss(0.1), "0.1"}, {"1e-300", BetaLoss(1e-300), "1e-300"},
	} {
		got, err := ParseLoss(c.in)
		if err != nil || got != c.want || got.String() != c.str {
			t.Errorf("ParseLoss(%q) = %v (%q), %v; want %v (%q)", c.in, got, got.String(), err, c.want, c.str)
		}
		back, err := ParseLoss(got.String())
		if err != nil || back != got {
			t.Errorf("%q does not read back: %v, %v", got.String(), back, err)
		}
		js, err := json.Marshal(Options{Loss: got})
		var o Options
		if err != nil || json.Unmarshal(js, &o) != nil || o.Loss != got {
			t.Errorf("%v: JSON round trip %s gives %v", got, js, o.Loss)
		}
	}
	for _, in := range []string{"l2", "nan", "inf", "-Inf", "1,5"} {
		if _, err := ParseLoss(in); err == nil || !strings.Contains(err.Error(), "unknown loss") {
			t.Errorf("ParseLoss(%q): %v", in, err)
		}
	}
}

// TestPowPinned: powPinned and expPinned are math.Pow and math.Exp to a few ulps: they are
// their algorithms, rounded as a GOAMD64=v1 build rounds them, but math.Exp on amd64 is
// assembly that fuses when the CPU has FMA (measured: 2 ulps apart), and math.Pow's squarings
// carry that along (measured: 4 ulps).
func TestPowPinned(t *testing.T) {
	r := NewRNG(5, DomainInitB, 0)
	ulps := func(a, b float64) float64 {
		if a == b {
			return 0
		}
		return math.Abs(a-b) / (math.Nextafter(math.Abs(b), math.Inf(1)) - math.Abs(b))
	}
	worst := 0.0
	for i := 0; i < 100000; i++ {
		x := math.Exp(40 * (r.Float64() - 0.5))
		y := 8 * (r.Float64() - 0.5)
		if d := ulps(powPinned(x, y), math.Pow(x, y)); d > worst {
			worst = d
		}
		e := 1400 * (r.Float64() - 0.5)
		if d := ulps(expPinned(e), math.Exp(e)); d > worst {
			worst = d
		}
	}
	if worst > 8 {
		t.Errorf("powPinned/expPinned differ from math.Pow/math.Exp by up to %.3g ulps", worst)
	}
	for _, c := range [][3]float64{{0, -1.5, math.Inf(1)}, {0, 1.5, 0}, {2, 0, 1}, {1, 7.5, 1}, {4, 0.5, 2}, {4, -0.5, 0.5}, {2, 10, 1024}, {2, -3, 0.125}} {
		if got := powPinned(c[0], c[1]); got != c[2] {
			t.Errorf("powPinned(%v, %v) = %v, want %v", c[0], c[1], got, c[2])
		}
	}
	t.Logf("largest difference from math.Pow / math.Exp: %.3g ulps", worst)
}

const lossBitsGolden = "testdata/loss_bits.golden"

// TestLossBitsDoNotDependOnBuildFlags pins the bits of MU with each loss, as
// TestBitsDoNotDependOnBuildFlags does for the Frobenius algorithms: B and C after 30
// iterations on 1 and 3 shards, dense and sparse, without and with a penalty. Rewrite with
// -update.
func TestLossBitsDoNotDependOnBuildFlags(t *testing.T) {
	got := map[string]string{}
	for _, loss := range []Loss{LossKL, LossIS, BetaLoss(1.5), BetaLoss(-0.5), BetaLoss(3)} {
		for _, sparse := range []bool{false, true} {
			x := lossData(loss, sparse, 20, 300, 4, 31)
			for _, pc := range []penaltyCase{{}, testPenalty} {
				for _, p := range []int{1, 3} {
					cfg := bitsConfig(MU, StopRule{MaxIter: 30})
					cfg.Options = pc.options()
					cfg.Options.Loss = loss
					res := mustRun(t, x, p, cfg)
					name := fmt.Sprintf("%s/p%d", lossCase{loss, sparse, pc}, p)
					got[name+"/B"] = hashFloats(res.B)
					got[name+"/C"] = hashFloats(res.C)
					got[name+"/objective"] = hashFloats([]float64{res.Initial, res.Objective})
				}
			}
		}
	}
	golden{path: lossBitsGolden, what: "MU's B, C and [initial, final objective] with each loss", test: "TestLossBitsDoNotDependOnBuildFlags"}.check(t, got)
}

// BenchmarkBetaMU times MU iterations with the beta-divergences through the driver on the
// shape of the CLI's measurement (M = 50 features, N = 200000 samples, K = 10, dense, X > 0)
// and on a sparse one (40% zeros, CSC; KL only): on 1 and 2 shards with all cores, and on one
// shard with one thread (t1, the least sensitive to other load on the machine). ms/iter is
// the median time of an iteration (the initialisation's pass left out), ns/entry the fastest
// iteration's time per entry of X.
func BenchmarkBetaMU(b *testing.B) {
	const m, n, k = 50, 200000, 10
	dense := synthDense(m, n, k, 4, 0.05)
	sparse := ToCSC(sparsify(dense, 0.4, 5))
	for _, c := range []struct {
		name string
		x    Block
		loss Loss
	}{
		{"dense", dense, LossKL}, {"dense", dense, LossIS}, {"dense", dense, BetaLoss(1.5)}, {"sparse40", sparse, LossKL},
	} {
		for _, run := range []struct {
			name            string
			shards, threads int
		}{{"p1", 1, 0}, {"p2", 2, 0}, {"p1t1", 1, 1}} {
			b.Run(fmt.Sprintf("%s/%s/%s", c.name, c.loss, run.name), func(b *testing.B) {
				blocks, err := Split(c.x, run.shards)
				if err != nil {
					b.Fatal(err)
				}
				cfg := baseConfig(MU, k, StopRule{MaxIter: b.N})
				cfg.Options.Loss = c.loss
				cfg.Threads = run.threads
				b.ResetTimer()
				res, err := Run(context.Background(), blocks, cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(1e3*betaMedian(res.IterSeconds), "ms/iter")
				b.ReportMetric(1e9*slices.Min(res.IterSeconds)/float64(m*n), "ns/entry")
			})
		}
	}
}

// betaMedian returns the median of xs (0 for none).
func betaMedian(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// TestLogPinned: logPinned is math.Log's amd64 assembly bit for bit (checked on amd64, where
// math.Log is that assembly), on random bit patterns, values near 1 and near the reduction's
// boundary sqrt(2)/2, subnormals and the special values.
func TestLogPinned(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("math.Log is logPinned's reference on amd64 only")
	}
	r := NewRNG(11, DomainInitB, 0)
	h := 7.07106781186547524401e-01
	xs := []float64{0, math.Copysign(0, -1), -1, math.Inf(1), math.Inf(-1), math.NaN(), 1, 2, 0.5, h, 2 * h,
		math.Nextafter(h, 0), math.Nextafter(h, 1), 0x1p-1074, 0x1p-1022, math.MaxFloat64, sklearnEps}
	for i := 0; i < 400000; i++ {
		switch i % 4 {
		case 0:
			xs = append(xs, math.Float64frombits(r.Uint64()&^(1<<63)))
		case 1:
			xs = append(xs, 1+0.2*(r.Float64()-0.5))
		case 2:
			xs = append(xs, math.Exp(60*(r.Float64()-0.5)))
		default:
			xs = append(xs, math.Float64frombits(r.Uint64()&(1<<52-1))) // subnormal
		}
	}
	for _, x := range xs {
		if got, want := logPinned(x), math.Log(x); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("logPinned(%v) = %v, math.Log: %v", x, got, want)
		}
	}
}

// TestLogTable: the table-driven log of sumLogs is within 1.5 ulps of math.Log (itself within an ulp of
// log x) over positive normal arguments, exact for 1, without a bias (mean difference below
// 0.01 ulp over values near 1, the ratios of a good fit), and logPinned's value elsewhere
// (0, subnormal, Inf, NaN, negative). Measured: at most 1 ulp.
func TestLogTable(t *testing.T) {
	initLogTable()
	r := NewRNG(12, DomainInitB, 0)
	const n = 600000
	src := make([]float64, 0, n+16)
	for i := 0; i < n; i++ {
		switch i % 3 {
		case 0:
			src = append(src, 1+0.1*(r.Float64()-0.5))
		case 1:
			src = append(src, 1+1e-7*(r.Float64()-0.5))
		default:
			src = append(src, math.Exp(1400*(r.Float64()-0.5)))
		}
	}
	special := []float64{1, 0, math.Copysign(0, -1), -2, math.Inf(1), math.NaN(), 0x1p-1074, 0x1p-1030, math.MaxFloat64, 0x1p-1022}
	src = append(src, special...)
	dst := make([]float64, len(src))
	one := []float64{1}
	for i := range src {
		_, dst[i] = sumLogs(one, src[i:i+1], nil, true, 0, 0) // the log of src[i]
	}
	worst, bias, near := 0.0, 0.0, 0
	for i, x := range src {
		got, want := dst[i], math.Log(x)
		if x <= 0 || x >= math.Inf(1) || x != x || x < 0x1p-1022 {
			if math.Float64bits(got) != math.Float64bits(logPinned(x)) {
				t.Errorf("log(%v) = %v, want logPinned's %v", x, got, logPinned(x))
			}
			continue
		}
		if want == 0 {
			if got != 0 {
				t.Errorf("log(1) = %v", got)
			}
			continue
		}
		ulp := math.Abs(math.Nextafter(want, math.Inf(1)) - want)
		d := (got - want) / ulp
		worst = max(worst, math.Abs(d))
		if i < n && i%3 != 2 {
			bias += d
			near++
		}
	}
	bias /= float64(near)
	t.Logf("largest difference from math.Log %.3g ulp, mean near 1 %.3g ulp", worst, bias)
	if worst > 1.5 || math.Abs(bias) > 0.01 {
		t.Errorf("the table's log differs from math.Log by up to %.3g ulp, on average by %.3g ulp near 1", worst, bias)
	}
}

// referenceLossObjective is 2 D_beta(X | BC) on one shard as MU's pass computed it before
// its products moved to the Gram lane's kernels (the objective that change was bound to keep
// within 1e-13, see beta.go), bit for bit: Y by dot, math.Log and powNumpy for every power,
// the terms summed entry by entry in each lane (laneBounds), the lanes' sums in lane order.
func referenceLossObjective(x Block, b, c []float64, k int, loss Loss) float64 {
	m, n := x.Dims()
	xd := ToDense(x)
	l := newBetaLoss(loss)
	br := make([]float64, m*k)
	transpose(br, b, m, k)
	bsum := make([]float64, k)
	for p := range bsum {
		var t float64
		for _, v := range b[p*m : (p+1)*m] {
			t += v
		}
		bsum[p] = t
	}
	lanes := laneBounds(x, 2*k)
	var sum []float64
	for ln := 0; ln+1 < len(lanes); ln++ {
		terms := make([]float64, l.lossLen(k))
		for j := lanes[ln]; j < lanes[ln+1]; j++ {
			cj := c[j*k : (j+1)*k]
			var ty float64
			for i := 0; i < m; i++ {
				y := dot(br[i*k:(i+1)*k], cj)
				if !l.kl && !l.is {
					ty += powNumpy(y, l.beta)
				}
				xv := xd.At(i, j)
				if !(xv > sklearnEps) {
					continue
				}
				ys := y
				if ys == 0 {
					ys = sklearnEps
				}
				switch {
				case l.kl:
					terms[0] += float64(xv * math.Log(xv/ys))
					terms[1] += xv
				case l.is:
					div := xv / ys
					terms[0] += div
					terms[1] += math.Log(div)
				default:
					terms[0] += powNumpy(xv, l.beta)
					terms[1] += float64(xv * powNumpy(ys, l.beta-1))
				}
			}
			if l.kl {
				axpy(terms[2:], 1, cj)
			} else if !l.is {
				terms[2] += ty
			}
		}
		if sum == nil {
			sum = terms
			continue
		}
		for i, v := range terms {
			sum[i] += v
		}
	}
	return 2 * l.divergence(sum, bsum, m, n)
}

// TestLossObjectiveMatchesReference: the objective MU reports on one shard with KL, IS and
// betas 1.5, 0.5 and 3, dense and sparse, at the start, after 60 iterations and after one
// more from there (near a fit, where the divergence is a small difference of large sums), is
// within 1e-13 relative of referenceLossObjective, the objective before the Gram lane's Y, the
// table-driven logarithms and IS's x (1/Ys) for x / Ys: they change only rounding.
// Measured: at most 1.5e-14.
func TestLossObjectiveMatchesReference(t *testing.T) {
	const m, n, k = 30, 2000, 5
	worst := 0.0
	for _, loss := range []Loss{LossKL, LossIS, BetaLoss(1.5), BetaLoss(0.5), BetaLoss(3)} {
		for _, sparse := range []bool{false, true} {
			x := lossData(loss, sparse, m, n, k, 71)
			cfg := baseConfig(MU, k, StopRule{MaxIter: 60})
			cfg.Options.Loss = loss
			res := mustRun(t, x, 1, cfg)
			cfg = customConfig(MU, k, res.B, res.C, 1, penaltyCase{})
			cfg.Options.Loss = loss
			res2 := mustRun(t, x, 1, cfg)
			for _, c := range []struct {
				got  float64
				b, c []float64
			}{{res2.Initial, res.B, res.C}, {res2.Objective, res2.B, res2.C}} {
				want := referenceLossObjective(x, c.b, c.c, k, loss)
				d := math.Abs(c.got-want) / want
				worst = max(worst, d)
				if d > 1e-13 {
					t.Errorf("%s sparse=%v: objective %.17g, reference %.17g: %.3g relative", loss, sparse, c.got, want, d)
				}
			}
		}
	}
	t.Logf("largest relative difference from the reference objective: %.3g", worst)
}

// TestLossSparseSameBits: a block with few stored entries (15%: a CSC block's KL quotients take
// Y at its stored entries, the other losses' passes make its batches dense) gives, with each
// loss, bitwise the factors and objectives of its dense form, stored as float64 or float32, on
// 1 and 3 shards, on every kernel path and thread count, with one lane a shard and with
// several (a CSC block's lanes were once cut at equal stored entries, a dense one's at equal
// columns, and the B update's partial sums grouped otherwise).
func TestLossSparseSameBits(t *testing.T) {
	t.Parallel()
	d := sparsify(countsBlock(20, 6*minLaneCols, 61), 0.85, 3)
	if len(laneBounds(d, 4)) < 4 {
		t.Fatal("the block has fewer than 3 lanes")
	}
	if sp := ToCSC(d); !perEntryY(sp, sp.Rows) {
		t.Fatalf("%d of %d entries stored: the test wants a block whose KL pass takes Y per entry", sp.NNZ(), d.Rows*d.Cols)
	}
	for _, loss := range []Loss{LossKL, BetaLoss(1.5), BetaLoss(0.5)} {
		for _, p := range []int{1, 3} {
			var ref *Result
			for _, x := range []Block{d, ToCSC(d)} {
				for _, st := range []Storage{StorageFloat64, StorageFloat32} {
					for _, path := range AvailableKernelPaths() {
						for _, threads := range []int{1, 2} {
							cfg := baseConfig(MU, 4, StopRule{MaxIter: 12})
							cfg.Options = testPenalty.options()
							cfg.Options.Loss, cfg.Options.Storage = loss, st
							cfg.Threads = threads
							cfg.Options.Kernel = path
							res := mustRun(t, x, p, cfg)
							if ref == nil {
								ref = res
								continue
							}
							if !sameBits(res.B, ref.B) || !sameBits(res.C, ref.C) ||
								math.Float64bits(res.Objective) != math.Float64bits(ref.Objective) ||
								math.Float64bits(res.Initial) != math.Float64bits(ref.Initial) {
								t.Errorf("%s P=%d %T %s %s %d threads: differs from the dense block (B %.3g, C %.3g)", loss, p, x, st, path,
									threads, maxRelDiff(ref.B, res.B), maxRelDiff(ref.C, res.C))
							}
						}
					}
				}
			}
		}
	}
}
