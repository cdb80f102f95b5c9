package kernels

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The L1/L2 penalties (penalty.go, "Penalties" in doc.go) against scikit-learn 1.2 and against
// the package's own rules: bits across kernel paths, threads, layouts, interrupt checks and
// resumes, unpenalized bits when the alphas are 0, and the reported objective.

// sklearnPython is the interpreter the scikit-learn comparisons run (Debian's python3-sklearn
// installs scikit-learn 1.2.1 for it).
const sklearnPython = "/usr/bin/python3"

// penaltyCase is one setting of the penalty options (scikit-learn's alpha_W, alpha_H and
// l1_ratio).
type penaltyCase struct {
	alphaW, alphaH, l1Ratio float64
}

func (c penaltyCase) String() string {
	return fmt.Sprintf("alpha_W=%g/alpha_H=%g/l1_ratio=%g", c.alphaW, c.alphaH, c.l1Ratio)
}

func (c penaltyCase) options() Options {
	return Options{AlphaCoef: c.alphaW, AlphaBasis: c.alphaH, L1Ratio: c.l1Ratio}
}

// sklearnCases covers l1_ratio 0, 0.5 and 1, alpha_W != alpha_H, each factor penalized alone,
// and no penalty (the harness itself, against today's code).
var sklearnCases = []penaltyCase{
	{0, 0, 0},
	{0.05, 0.05, 0},
	{0.04, 0.01, 0.5},
	{0.03, 0.015, 1},
	{0.08, 0, 0.5},
	{0, 0.02, 0.5},
}

// sklearnScript runs scikit-learn's NMF on the job in directory argv[1] (job.json, x.bin: X as
// n_samples x n_features float64 little-endian, w0.bin, h0.bin) and writes w<i>.bin and
// h<i>.bin for every case. tol=0: the cd solver then stops only at an exact fixed point and the
// mu solver never tests convergence, so both run exactly max_iter iterations (checked).
const sklearnScript = `
import json, sys, warnings
import numpy as np
from sklearn.decomposition import NMF
d = sys.argv[1]
job = json.load(open(d + "/job.json"))
n, m, k = job["n"], job["m"], job["k"]
X = np.fromfile(d + "/x.bin", dtype="<f8").reshape(n, m)
W0 = np.fromfile(d + "/w0.bin", dtype="<f8").reshape(n, k)
H0 = np.fromfile(d + "/h0.bin", dtype="<f8").reshape(k, m)
warnings.simplefilter("ignore")
for i, c in enumerate(job["cases"]):
    model = NMF(n_components=k, init="custom", solver=c["solver"], beta_loss="frobenius", tol=0,
                max_iter=c["iters"], alpha_W=c["alpha_W"], alpha_H=c["alpha_H"],
                l1_ratio=c["l1_ratio"], shuffle=False)
    W = model.fit_transform(X, W=W0.copy(), H=H0.copy())
    if model.n_iter_ != c["iters"]:
        sys.exit("case %d: %d iterations, want %d" % (i, model.n_iter_, c["iters"]))
    np.ascontiguousarray(W, dtype="<f8").tofile(d + "/w%d.bin" % i)
    np.ascontiguousarray(model.components_, dtype="<f8").tofile(d + "/h%d.bin" % i)
`

// needSklearn skips the test unless /usr/bin/python3 imports scikit-learn, and returns its
// version.
func needSklearn(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(sklearnPython); err != nil {
		t.Skipf("%s not found: the scikit-learn comparison needs it with scikit-learn 1.2 (Debian: apt-get install python3-sklearn)", sklearnPython)
	}
	out, err := exec.Command(sklearnPython, "-c", "import sklearn; print(sklearn.__version__)").Output()
	if err != nil {
		t.Skipf("%s cannot import sklearn (%v): the comparison needs scikit-learn 1.2 (Debian: apt-get install python3-sklearn)", sklearnPython, err)
	}
	v := strings.TrimSpace(string(out))
	if !strings.HasPrefix(v, "1.2.") {
		t.Logf("scikit-learn %s: the parameterization compared is 1.2's", v)
	}
	return v
}

func writeFloats(t *testing.T, path string, v []float64) {
	t.Helper()
	buf := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(x))
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFloats(t *testing.T, path string, n int) []float64 {
	t.Helper()
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(buf) != 8*n {
		t.Fatalf("%s: %d bytes, want %d floats", path, len(buf), n)
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(buf[8*i:]))
	}
	return v
}

// sklearnRun is one scikit-learn fit: the solver, its iterations and its penalties.
type sklearnRun struct {
	solver string
	iters  int
	pen    penaltyCase
}

// runSklearn fits every run on X (our M x N, so scikit-learn's N x M is the same bytes) from
// W0 = C0^T, H0 = B0^T, and returns each run's B = H^T (M x K column-major, H's bytes) and
// C = W^T (K x N column-major, W's bytes).
func runSklearn(t *testing.T, x *Dense, k int, b0, c0 []float64, runs []sklearnRun) (bs, cs [][]float64) {
	t.Helper()
	dir := t.TempDir()
	m, n := x.Rows, x.Cols
	writeFloats(t, filepath.Join(dir, "x.bin"), x.Data)
	writeFloats(t, filepath.Join(dir, "w0.bin"), c0)
	writeFloats(t, filepath.Join(dir, "h0.bin"), b0)
	type jobCase struct {
		Solver  string  `json:"solver"`
		Iters   int     `json:"iters"`
		AlphaW  float64 `json:"alpha_W"`
		AlphaH  float64 `json:"alpha_H"`
		L1Ratio float64 `json:"l1_ratio"`
	}
	job := struct {
		N, M, K int
		Cases   []jobCase `json:"cases"`
	}{N: n, M: m, K: k}
	for _, r := range runs {
		job.Cases = append(job.Cases, jobCase{r.solver, r.iters, r.pen.alphaW, r.pen.alphaH, r.pen.l1Ratio})
	}
	js, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	js = []byte(strings.NewReplacer(`"N"`, `"n"`, `"M"`, `"m"`, `"K"`, `"k"`).Replace(string(js)))
	if err := os.WriteFile(filepath.Join(dir, "job.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "nmf.py")
	if err := os.WriteFile(script, []byte(sklearnScript), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sklearnPython, script, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scikit-learn: %v\n%s", err, out)
	}
	for i := range runs {
		bs = append(bs, readFloats(t, filepath.Join(dir, fmt.Sprintf("h%d.bin", i)), m*k))
		cs = append(cs, readFloats(t, filepath.Join(dir, fmt.Sprintf("w%d.bin", i)), k*n))
	}
	return bs, cs
}

// penaltyStart returns a deterministic nonnegative start B0 (M x K), C0 (K x N) of X's scale.
func penaltyStart(m, n, k int) (b0, c0 []float64) {
	rb := NewRNG(101, DomainInitB, 0)
	b0 = make([]float64, m*k)
	for i := range b0 {
		b0[i] = 0.1 + 0.5*math.Abs(rb.Norm())
	}
	c0 = make([]float64, k*n)
	for j := 0; j < n; j++ {
		rc := NewRNG(101, DomainInitC, uint64(j))
		for p := 0; p < k; p++ {
			c0[j*k+p] = 0.1 + 0.5*math.Abs(rc.Norm())
		}
	}
	return b0, c0
}

// customConfig is a job of algo from the given start for iters iterations with the penalty.
func customConfig(algo Algorithm, k int, b0, c0 []float64, iters int, pen penaltyCase) Config {
	return Config{Algo: algo, K: k, Init: InitSpec{Method: InitCustom, B0: b0, C0: c0},
		Options: pen.options(), Stop: StopRule{MaxIter: iters}, Threads: 2}
}

// TestPenaltiesMatchScikitLearnCD: DID (both forms, 1 and 3 shards), DBCD and BCD, with
// penalties, from the same start as scikit-learn's solver="cd" (shuffle=False: W then H each
// iteration, components in order, which is DID's C then B), give its iterates after a fixed
// number of iterations. The updates are the same in exact arithmetic; what differs is
// round-off (scikit-learn forms X H^T and H H^T with BLAS, its coordinate step as
// W - grad/hess, ours in the Gram lane's FMA order or from residuals), a few ulps per
// iteration that the iterations carry along without growing much: measured at most 1.1e-14
// relative over 25 iterations, so the bound is 1e-13.
func TestPenaltiesMatchScikitLearnCD(t *testing.T) {
	v := needSklearn(t)
	const iters, k = 25, 3
	x := synthDense(12, 240, k, 61, 0.1)
	b0, c0 := penaltyStart(x.Rows, x.Cols, k)
	runs := make([]sklearnRun, len(sklearnCases))
	for i, pc := range sklearnCases {
		runs[i] = sklearnRun{"cd", iters, pc}
	}
	wantB, wantC := runSklearn(t, x, k, b0, c0, runs)
	variants := []struct {
		algo   Algorithm
		shards int
		form   Form
	}{
		{DID, 1, FormGram}, {DID, 3, FormGram}, {DID, 1, FormResidual}, {DID, 3, FormResidual},
		{DBCD, 3, FormAuto}, {BCD, 1, FormAuto},
	}
	worst := 0.0
	for i, pc := range sklearnCases {
		if i > 0 && maxRelDiff(wantC[0], wantC[i]) < 1e-2 {
			t.Errorf("%s: scikit-learn's C moves by only %.3g from the unpenalized one: the case tests little", pc, maxRelDiff(wantC[0], wantC[i]))
		}
		t.Logf("%s: the penalty moves scikit-learn's B by %.3g, C by %.3g", pc, maxRelDiff(wantB[0], wantB[i]), maxRelDiff(wantC[0], wantC[i]))
		for _, vr := range variants {
			cfg := customConfig(vr.algo, k, b0, c0, iters, pc)
			cfg.Options.Form = vr.form
			got := mustRun(t, x, vr.shards, cfg)
			db, dc := maxRelDiff(wantB[i], got.B), maxRelDiff(wantC[i], got.C)
			worst = max(worst, db, dc)
			t.Logf("%s: %s/P=%d/%s: B %.3g, C %.3g", pc, vr.algo, vr.shards, vr.form, db, dc)
			if db > 2e-13 || dc > 2e-13 {
				t.Errorf("%s: %s/P=%d/%s: B differs from scikit-learn's by %.3g, C by %.3g (relative)",
					pc, vr.algo, vr.shards, vr.form, db, dc)
			}
		}
	}
	t.Logf("scikit-learn %s cd, %d iterations: largest relative difference %.3g", v, iters, worst)
}

// TestPenaltiesMatchScikitLearnMU: MU with penalties from the same start as scikit-learn's
// solver="mu", beta_loss="frobenius" gives its iterates. Both apply the same multiplicative
// factors; the products differ in round-off (BLAS vs the Gram lane's order), measured at most
// 1.6e-14 relative over 40 iterations, so the bound is 1e-13.
func TestPenaltiesMatchScikitLearnMU(t *testing.T) {
	v := needSklearn(t)
	const iters, k = 40, 3
	x := synthDense(12, 240, k, 67, 0.1)
	b0, c0 := penaltyStart(x.Rows, x.Cols, k)
	runs := make([]sklearnRun, len(sklearnCases))
	for i, pc := range sklearnCases {
		runs[i] = sklearnRun{"mu", iters, pc}
	}
	wantB, wantC := runSklearn(t, x, k, b0, c0, runs)
	worst := 0.0
	for i, pc := range sklearnCases {
		got := mustRun(t, x, 1, customConfig(MU, k, b0, c0, iters, pc))
		db, dc := maxRelDiff(wantB[i], got.B), maxRelDiff(wantC[i], got.C)
		worst = max(worst, db, dc)
		t.Logf("%s: mu: B %.3g, C %.3g (the penalty moves scikit-learn's C by %.3g)", pc, db, dc, maxRelDiff(wantC[0], wantC[i]))
		if db > 2e-14 || dc > 2e-14 {
			t.Errorf("%s: mu: B differs from scikit-learn's by %.3g, C by %.3g (relative)", pc, db, dc)
		}
	}
	t.Logf("scikit-learn %s mu, %d iterations: largest relative difference %.3g", v, iters, worst)
}

// penalizedAlgorithms are the algorithms that implement the penalties.
func penalizedAlgorithms() []AlgorithmInfo {
	var out []AlgorithmInfo
	for _, a := range Algorithms() {
		if a.Penalties {
			out = append(out, a)
		}
	}
	return out
}

// testPenalty is the penalty of the bitwise tests: both factors, L1 and L2.
var testPenalty = penaltyCase{0.03, 0.004, 0.4}

// TestPenalizedBCDFamilySameIterates: with penalties DID (both forms, 1 and 5 shards), DBCD
// and BCD still make the same updates in the same order, so they agree to round-off, as
// TestBCDFamilySameIterates requires without them.
func TestPenalizedBCDFamilySameIterates(t *testing.T) {
	x := synthDense(20, 3000, 4, 3, 0.02)
	for _, pc := range []penaltyCase{testPenalty, {0.02, 0.01, 1}, {0.05, 0.002, 0}} {
		cfg := baseConfig(BCD, 4, StopRule{MaxIter: 60})
		cfg.Options = pc.options()
		ref := mustRun(t, x, 1, cfg)
		for _, c := range []struct {
			algo   Algorithm
			shards int
			form   Form
		}{
			{DID, 1, FormGram}, {DID, 1, FormResidual}, {DID, 5, FormGram}, {DID, 5, FormResidual},
			{DBCD, 1, FormAuto}, {DBCD, 5, FormAuto},
		} {
			cfg := baseConfig(c.algo, 4, StopRule{MaxIter: 60})
			cfg.Options = pc.options()
			cfg.Options.Form = c.form
			got := mustRun(t, x, c.shards, cfg)
			if d := maxRelDiff(ref.B, got.B); d > 1e-12 {
				t.Errorf("%s: %s/%d/%s: B differs from BCD by %.3g relative", pc, c.algo, c.shards, c.form, d)
			}
			if d := maxRelDiff(ref.C, got.C); d > 1e-12 {
				t.Errorf("%s: %s/%d/%s: C differs from BCD by %.3g relative", pc, c.algo, c.shards, c.form, d)
			}
			if d := math.Abs(got.Objective-ref.Objective) / ref.Objective; d > 1e-12 {
				t.Errorf("%s: %s/%d/%s: objective %.17g, BCD's %.17g", pc, c.algo, c.shards, c.form, got.Objective, ref.Objective)
			}
		}
	}
}

// TestPenalizedKernelPathsSameFactors: every penalized algorithm gives bitwise the same
// factors and objectives on every kernel path and thread count, dense and sparse, on 1 and 3
// shards (TestKernelPathsSameFactors with penalties), on shapes that reach DID's fused
// small-shape kernel (which subtracts the L1 term itself) and its column-lane kernels.
func TestPenalizedKernelPathsSameFactors(t *testing.T) {
	t.Parallel()
	paths := AvailableKernelPaths()
	dense := synthDense(12, 300, 4, 41, 0.05)
	small := synthDense(6, 300, 4, 43, 0.05) // M <= 8, K = 4: DID's fused kernel
	tall := synthDense(20, 300, 4, 47, 0.05) // M >= 16: the column-lane kernels
	blocks := []struct {
		name string
		x    Block
	}{{"dense", dense}, {"sparse", ToCSC(sparsify(dense, 0.6, 42))}, {"small", small}, {"tall", tall}}
	for _, info := range penalizedAlgorithms() {
		for _, in := range blocks {
			for _, pc := range []penaltyCase{testPenalty, {0.02, 0.01, 1}, {0.02, 0.01, 0}} {
				for _, shards := range []int{1, 3} {
					if shards > 1 && !info.Distributed {
						continue
					}
					var ref *Result
					for _, p := range paths {
						for _, threads := range []int{1, 2} {
							cfg := baseConfig(info.Name, 4, StopRule{MaxIter: 12})
							cfg.Options = pc.options()
							cfg.Threads = threads
							cfg.Options.Kernel = p
							res := mustRun(t, in.x, shards, cfg)
							if ref == nil {
								ref = res
								continue
							}
							if !sameBits(res.B, ref.B) || !sameBits(res.C, ref.C) ||
								math.Float64bits(res.Objective) != math.Float64bits(ref.Objective) {
								t.Errorf("%s %s %s P=%d: path %s with %d threads differs from generic (B %.3g, C %.3g)",
									info.Name, in.name, pc, shards, p, threads, maxRelDiff(res.B, ref.B), maxRelDiff(res.C, ref.C))
							}
						}
					}
				}
			}
		}
	}
}

// TestPenalizedShardCounts: a penalized distributed algorithm is bitwise the same on 1, 2, 3
// and 7 shards wherever the unpenalized one is, and otherwise agrees to round-off with the
// tolerances of TestShardCountAndDeterminism; runs with other thread counts are bitwise equal.
func TestPenalizedShardCounts(t *testing.T) {
	x := synthDense(25, 2500, 5, 19, 0.01)
	stop := StopRule{MaxIter: 80}
	for _, info := range penalizedAlgorithms() {
		if !info.Distributed {
			continue
		}
		cfg := baseConfig(info.Name, 5, stop)
		plain1 := mustRun(t, x, 1, cfg)
		cfg.Options = testPenalty.options()
		one := mustRun(t, x, 1, cfg)
		for _, p := range []int{2, 3, 7} {
			plainCfg := baseConfig(info.Name, 5, stop)
			plain := mustRun(t, x, p, plainCfg)
			plainBitwise := sameBits(plain.B, plain1.B) && sameBits(plain.C, plain1.C)
			got := mustRun(t, x, p, cfg)
			bitwise := sameBits(got.B, one.B) && sameBits(got.C, one.C)
			tol := 1e-11
			if info.Name == HPCANLS {
				tol = 1e-8 // BPP's pivoting amplifies round-off where a constraint is nearly active
			}
			switch {
			case plainBitwise && !bitwise:
				t.Errorf("%s: %d shards vs 1: the unpenalized factors are bitwise equal, the penalized ones differ (B %.3g, C %.3g)",
					info.Name, p, maxRelDiff(one.B, got.B), maxRelDiff(one.C, got.C))
			case maxRelDiff(one.B, got.B) > tol || maxRelDiff(one.C, got.C) > tol:
				t.Errorf("%s: %d shards vs 1: B differs by %.3g, C by %.3g", info.Name, p, maxRelDiff(one.B, got.B), maxRelDiff(one.C, got.C))
			}
			cfg1 := cfg
			cfg1.Threads = 1
			again := mustRun(t, x, p, cfg1)
			if !sameBits(got.B, again.B) || !sameBits(got.C, again.C) {
				t.Errorf("%s: %d shards: not bitwise identical across thread counts", info.Name, p)
			}
			t.Logf("%-8s P=%d: unpenalized bitwise to P=1: %v, penalized: %v", info.Name, p, plainBitwise, bitwise)
		}
	}
}

// TestPenalizedLayoutAndStorageSameBits: with penalties, the layout-invariant algorithms give
// the same bits on a dense block and its CSC form, and every algorithm the same bits on a block
// stored as float32, on every kernel path (TestLayoutSameBits, TestNarrowStorageSameBits).
func TestPenalizedLayoutAndStorageSameBits(t *testing.T) {
	t.Parallel()
	dense := countsBlock(40, 300, 53)
	sparse := ToCSC(dense)
	for _, info := range penalizedAlgorithms() {
		shards := 1
		if info.Distributed {
			shards = 3
		}
		for _, p := range AvailableKernelPaths() {
			cfg := baseConfig(info.Name, 5, StopRule{MaxIter: 10})
			cfg.Options = testPenalty.options()
			cfg.Options.Kernel = p
			a := mustRun(t, dense, shards, cfg)
			b := mustRun(t, sparse, shards, cfg)
			if info.LayoutInvariant && (!sameBits(a.B, b.B) || !sameBits(a.C, b.C)) {
				t.Errorf("%s on %s: CSC differs from dense (B %.3g, C %.3g)", info.Name, p, maxRelDiff(a.B, b.B), maxRelDiff(a.C, b.C))
			}
			for name, x := range map[string]Block{"dense": dense, "sparse": sparse} {
				wide := a
				if name == "sparse" {
					wide = b
				}
				narrow := cfg
				narrow.Options.Storage = StorageFloat32
				n := mustRun(t, x, shards, narrow)
				if !sameBits(n.B, wide.B) || !sameBits(n.C, wide.C) {
					t.Errorf("%s %s on %s: float32 storage differs from float64", info.Name, name, p)
				}
			}
		}
	}
}

// TestPenalizedInterruptChecksAndResume: with penalties, looking at the interrupt flag every
// column changes no bit of any step, and machines resumed from snapshots at iterations 1 and 3
// give bitwise the steps of the uninterrupted job (TestInterruptChecksKeepBits,
// TestResumeBitwise).
func TestPenalizedInterruptChecksAndResume(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	const last = 6
	dense := synthDense(14, 800, 5, 41, 0.05)
	for _, info := range penalizedAlgorithms() {
		for _, in := range []struct {
			name string
			x    Block
		}{{"dense", dense}, {"sparse", ToCSC(sparsify(dense, 0.5, 1))}} {
			forms := []Form{FormAuto}
			if info.Name == DID {
				forms = []Form{FormGram, FormResidual}
			}
			p := 1
			if info.Distributed {
				p = 3
			}
			for _, form := range forms {
				name := fmt.Sprintf("%s/%s/%s/P=%d", info.Name, in.name, form, p)
				specs := shardSpecs(t, in.x, p, info.Name, form, pool)
				for s := range specs {
					specs[s].AlphaCoef, specs[s].AlphaBasis, specs[s].L1Ratio = testPenalty.alphaW, testPenalty.alphaH, testPenalty.l1Ratio
				}
				ref := newMachines(t, specs, nil)
				snaps := map[int][]Snapshot{}
				refSteps := driveMachines(t, ref, last, func(it int) {
					if it == 1 || it == 3 || it == last {
						snaps[it] = snapshotAll(t, ref)
					}
				})
				fine := newMachines(t, specs, nil)
				for _, m := range fine {
					m.intr.work = 1
				}
				fineSteps := driveMachines(t, fine, last, nil)
				for s := range refSteps {
					for i := range refSteps[s] {
						if d := sameStep(refSteps[s][i], fineSteps[s][i]); d != "" {
							t.Fatalf("%s: checking the flag every column: shard %d step %d: %s", name, s, i, d)
						}
					}
				}
				for _, at := range []int{1, 3} {
					got := driveMachines(t, newMachines(t, specs, snaps[at]), last, nil)
					sameStepsAfter(t, name, refSteps, got, at, nil)
				}
			}
		}
	}
}

// directObjective is twice scikit-learn's objective at (B, C), computed here from the
// definition: ||X - BC||^2 (ResidualSq, column by column) plus 2 l1 ||.||_1 + l2 ||.||^2 of
// each factor with scikit-learn's scaling, all in plain loops.
func directObjective(x Block, b, c []float64, k int, pc penaltyCase) float64 {
	m, n := x.Dims()
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
	return ResidualSq(x, b, c, k, nil) + 2*l1W*c1 + l2W*c2 + 2*l1H*b1 + l2H*b2
}

// TestPenalizedObjective: the objective every penalized algorithm reports, at the start and
// after the last iteration, is twice scikit-learn's objective computed directly at those
// factors, to 1e-12 relative (the trackers' identities round differently from the direct
// sum, by a few ulps of ||X||^2); and the monotone algorithms never increase it.
func TestPenalizedObjective(t *testing.T) {
	const k = 4
	// Noisy data: the Gram-identity trackers (DID's Gram form, HALS, MU, ANLS, HPC-ANLS) round
	// at a few ulps of ||X||^2 with or without a penalty, so a relative bound of 1e-12 needs an
	// objective above about 1e-3 ||X||^2 (here about 1e-2).
	x := synthDense(15, 800, k, 13, 0.3)
	b0, c0 := penaltyStart(x.Rows, x.Cols, k)
	worst := 0.0
	defer func() { t.Logf("largest relative difference from the direct objective: %.3g", worst) }()
	for _, info := range penalizedAlgorithms() {
		p := 1
		if info.Distributed {
			p = 3
		}
		for _, pc := range []penaltyCase{testPenalty, {0.02, 0.01, 1}, {0.05, 0, 0}, {0, 0.003, 0.5}} {
			forms := []Form{FormAuto}
			if info.Name == DID {
				forms = []Form{FormGram, FormResidual}
			}
			for _, form := range forms {
				cfg := customConfig(info.Name, k, b0, c0, 60, pc)
				cfg.Options.Form = form
				res := mustRun(t, x, p, cfg)
				name := fmt.Sprintf("%s/%s/%s", info.Name, form, pc)
				w0, w1 := directObjective(x, b0, c0, k, pc), directObjective(x, res.B, res.C, k, pc)
				worst = max(worst, math.Abs(res.Initial-w0)/w0, math.Abs(res.Objective-w1)/w1)
				if want := w0; math.Abs(res.Initial-want) > 1e-12*want {
					t.Errorf("%s: initial objective %.17g, direct %.17g (%.3g relative)", name, res.Initial, want, math.Abs(res.Initial-want)/want)
				}
				if want := w1; math.Abs(res.Objective-want) > 1e-12*want {
					t.Errorf("%s: objective %.17g, direct %.17g (%.3g relative)", name, res.Objective, want, math.Abs(res.Objective-want)/want)
				}
				if info.Monotone {
					for i := 1; i < len(res.History); i++ {
						if prev, cur := res.History[i-1].Ratio, res.History[i].Ratio; cur > prev*(1+1e-12) {
							t.Errorf("%s: objective ratio rose from %.15g to %.15g at iteration %d", name, prev, cur, i)
							break
						}
					}
				}
			}
		}
	}
}

// TestPenaltySparsifies: penalizing both factors (scikit-learn's alpha_H = "same"; one factor
// alone only moves scale into the other) makes them smaller and sparser in every penalized
// algorithm, measured scale-free since (sB, C/s) is the same model: L1 lowers ||B||_1 ||C||_1
// and, in the algorithms that reach exact zeros (all but MU, whose multiplicative steps only
// approach 0), at least doubles the zeros of C and makes at least a tenth of C zero; L2 lowers
// ||B||_F ||C||_F.
func TestPenaltySparsifies(t *testing.T) {
	const k = 4
	x := synthDense(15, 600, k, 71, 0.2)
	zeros := func(v []float64) int {
		n := 0
		for _, f := range v {
			if f == 0 {
				n++
			}
		}
		return n
	}
	l1 := func(v []float64) float64 { s, _ := factorNorms(v, nil); return s }
	l2 := func(v []float64) float64 { return math.Sqrt(dot(v, v)) }
	for _, info := range penalizedAlgorithms() {
		p := 1
		if info.Distributed {
			p = 3
		}
		run := func(pc penaltyCase) *Result {
			cfg := baseConfig(info.Name, k, StopRule{MaxIter: 300})
			cfg.Options = pc.options()
			return mustRun(t, x, p, cfg)
		}
		plain, lasso, ridge := run(penaltyCase{}), run(penaltyCase{0.01, 0.01, 1}), run(penaltyCase{0.01, 0.01, 0})
		if a, b := l1(plain.B)*l1(plain.C), l1(lasso.B)*l1(lasso.C); !(b < a) {
			t.Errorf("%s: L1: ||B||_1 ||C||_1 = %.5g, %.5g without the penalty", info.Name, b, a)
		}
		if z0, z1 := zeros(plain.C), zeros(lasso.C); info.Name != MU && (z1 < 2*z0 || z1 < len(lasso.C)/10) {
			t.Errorf("%s: L1: %d zeros of %d in C, %d without the penalty", info.Name, z1, len(lasso.C), z0)
		}
		if a, b := l2(plain.B)*l2(plain.C), l2(ridge.B)*l2(ridge.C); !(b < a) {
			t.Errorf("%s: L2: ||B|| ||C|| = %.5g, %.5g without the penalty", info.Name, b, a)
		}
		t.Logf("%-8s zeros in C: %4d plain, %4d with L1; ||B||_1 ||C||_1: %.5g plain, %.5g with L1; ||B|| ||C||: %.5g plain, %.5g with L2",
			info.Name, zeros(plain.C), zeros(lasso.C), l1(plain.B)*l1(plain.C), l1(lasso.B)*l1(lasso.C),
			l2(plain.B)*l2(plain.C), l2(ridge.B)*l2(ridge.C))
	}
}

// TestZeroPenaltyBitwise: alphas 0 (with an l1_ratio set, and -0) give bitwise the factors,
// objectives, history and collective sizes of Options without the fields, for every algorithm.
func TestZeroPenaltyBitwise(t *testing.T) {
	dense := synthDense(14, 500, 4, 31, 0.05)
	for _, info := range Algorithms() {
		p := 1
		if info.Distributed {
			p = 3
		}
		for name, x := range map[string]Block{"dense": dense, "sparse": ToCSC(sparsify(dense, 0.6, 5))} {
			ref := mustRun(t, x, p, baseConfig(info.Name, 4, StopRule{MaxIter: 20}))
			for _, o := range []Options{{L1Ratio: 0.5}, {L1Ratio: 1}, {AlphaCoef: math.Copysign(0, -1), AlphaBasis: math.Copysign(0, -1), L1Ratio: 0.3}} {
				cfg := baseConfig(info.Name, 4, StopRule{MaxIter: 20})
				cfg.Options = o
				got := mustRun(t, x, p, cfg)
				same := sameBits(got.B, ref.B) && sameBits(got.C, ref.C) &&
					math.Float64bits(got.Objective) == math.Float64bits(ref.Objective) &&
					math.Float64bits(got.Initial) == math.Float64bits(ref.Initial) &&
					got.Comm == ref.Comm && len(got.History) == len(ref.History)
				for i := range got.History {
					same = same && math.Float64bits(got.History[i].Ratio) == math.Float64bits(ref.History[i].Ratio)
				}
				if !same {
					t.Errorf("%s %s with %+v: differs from the unpenalized run", info.Name, name, o)
				}
			}
		}
	}
}

// TestPenaltyCollectives: the penalties add no collective; with a penalty on C, DID, DBCD and
// HPC-ANLS carry the norms of C_i as 4, 4 and 2 extra scalars per shard and iteration, and a
// penalty on B alone adds nothing (B is replicated).
func TestPenaltyCollectives(t *testing.T) {
	x := synthDense(12, 900, 3, 5, 0)
	stop := StopRule{MaxIter: 17}
	for _, c := range []struct {
		algo  Algorithm
		extra int
	}{{DID, 4}, {DBCD, 4}, {HPCANLS, 2}} {
		plain := mustRun(t, x, 4, baseConfig(c.algo, 3, stop))
		for _, pc := range []penaltyCase{testPenalty, {0.01, 0, 1}, {0, 0.01, 0.5}} {
			cfg := baseConfig(c.algo, 3, stop)
			cfg.Options = pc.options()
			pen := mustRun(t, x, 4, cfg)
			if pen.Comm.Collectives != plain.Comm.Collectives || pen.Comm.InitCollectives != plain.Comm.InitCollectives {
				t.Errorf("%s %s: %d + %d init collectives, %d + %d without a penalty", c.algo, pc,
					pen.Comm.Collectives, pen.Comm.InitCollectives, plain.Comm.Collectives, plain.Comm.InitCollectives)
			}
			want := c.extra
			if pc.alphaW == 0 {
				want = 0
			}
			if d := (pen.Comm.FloatsPerIteration - plain.Comm.FloatsPerIteration) / 4; d != float64(want) {
				t.Errorf("%s %s: %.2f extra floats per shard and iteration, want %d", c.algo, pc, d, want)
			}
		}
	}
}

// TestPenaltyOptionsRefused: invalid penalty options and penalties for admm and dadmm are
// refused, by Run and by Options.ValidatePenalties, with errors naming the option.
func TestPenaltyOptionsRefused(t *testing.T) {
	x := synthDense(6, 40, 2, 31, 0)
	blocks, _ := Split(x, 2)
	cases := []struct {
		name string
		algo Algorithm
		o    Options
		want string
	}{
		{"negative alpha_coef", DID, Options{AlphaCoef: -0.1}, "alpha_coef must be a finite number >= 0, got -0.1"},
		{"NaN alpha_coef", DID, Options{AlphaCoef: math.NaN()}, "alpha_coef must be a finite number >= 0, got NaN"},
		{"infinite alpha_coef", DID, Options{AlphaCoef: math.Inf(1)}, "alpha_coef must be a finite number >= 0, got +Inf"},
		{"negative alpha_basis", DBCD, Options{AlphaBasis: -1}, "alpha_basis must be a finite number >= 0, got -1"},
		{"NaN alpha_basis", DBCD, Options{AlphaBasis: math.NaN()}, "alpha_basis must be a finite number >= 0, got NaN"},
		{"negative l1_ratio", DID, Options{AlphaCoef: 0.1, L1Ratio: -0.5}, "l1_ratio must be a number between 0 and 1, got -0.5"},
		{"l1_ratio above 1", DID, Options{L1Ratio: 1.5}, "l1_ratio must be a number between 0 and 1, got 1.5"},
		{"NaN l1_ratio", DID, Options{L1Ratio: math.NaN()}, "l1_ratio must be a number between 0 and 1, got NaN"},
		{"admm", ADMM, Options{AlphaCoef: 0.1}, "algorithm admm has no L1/L2 penalties (alpha_coef 0.1, alpha_basis 0): the algorithms that have them are did, dbcd, bcd, hals, mu, anls, hpc-anls"},
		{"dadmm", DADMM, Options{AlphaBasis: 0.2, L1Ratio: 1}, "algorithm dadmm has no L1/L2 penalties (alpha_coef 0, alpha_basis 0.2): the algorithms that have them are did, dbcd, bcd, hals, mu, anls, hpc-anls"},
		{"overflow", DID, Options{AlphaBasis: 1e308}, "alpha_basis 1e+308 times N = 40 overflows"},
	}
	for _, c := range cases {
		cfg := baseConfig(c.algo, 2, StopRule{MaxIter: 3})
		cfg.Options = c.o
		bl := blocks
		if info, _ := LookupAlgorithm(c.algo); !info.Distributed {
			bl = []Block{x}
		}
		_, err := Run(context.Background(), bl, cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Run returned %v, want an error containing %q", c.name, err, c.want)
		}
		if c.name != "overflow" {
			if err := c.o.ValidatePenalties(c.algo); err == nil || err.Error() != c.want {
				t.Errorf("%s: ValidatePenalties returned %v, want %q", c.name, err, c.want)
			}
		}
	}
	// Zero alphas are no penalty: admm and dadmm accept them, whatever l1_ratio says.
	for _, a := range []Algorithm{ADMM, DADMM} {
		if err := (Options{L1Ratio: 0.5}).ValidatePenalties(a); err != nil {
			t.Errorf("%s with zero alphas: %v", a, err)
		}
	}
}

const penaltyBitsGolden = "testdata/penalty_bits.golden"

// TestPenaltyBitsDoNotDependOnBuildFlags pins the bits of every penalized algorithm's factors,
// as TestBitsDoNotDependOnBuildFlags does without penalties (its golden file stays as it was):
// B and C after 30 iterations, dense and sparse, for an L1/L2 mix and for pure L1 (where DID's
// Gram lane subtracts the L1 term). Rewrite with -update.
func TestPenaltyBitsDoNotDependOnBuildFlags(t *testing.T) {
	dense := synthDense(20, 300, 4, 31, 0.05)
	sparse := ToCSC(sparsify(synthDense(20, 300, 4, 37, 0.05), 0.6, 5))
	got := map[string]string{}
	for _, data := range []struct {
		name string
		x    Block
	}{{"dense", dense}, {"sparse", sparse}} {
		for _, a := range penalizedAlgorithms() {
			p := 1
			if a.Distributed {
				p = 3
			}
			forms := []Form{FormAuto}
			if a.Name == DID {
				forms = []Form{FormGram, FormResidual}
			}
			for _, pc := range []penaltyCase{testPenalty, {0.02, 0.01, 1}} {
				for _, form := range forms {
					cfg := bitsConfig(a.Name, StopRule{MaxIter: 30})
					cfg.Options = pc.options()
					cfg.Options.Form = form
					name := fmt.Sprintf("%s/%s/p%d/%s/%s", data.name, a.Name, p, form, pc)
					res := mustRun(t, data.x, p, cfg)
					got[name+"/B"] = hashFloats(res.B)
					got[name+"/C"] = hashFloats(res.C)
				}
			}
		}
	}
	golden{path: penaltyBitsGolden, what: "penalized B and C", test: "TestPenaltyBitsDoNotDependOnBuildFlags"}.check(t, got)
}

// TestNormSumsPushInPieces: pushing a vector in pieces of any lengths gives the bits of
// pushing it whole (a lane pushes its new coefficients batch by batch; a resumed run pushes
// the lane's whole C), and on pieces that are multiples of 4 long push agrees with add.
func TestNormSumsPushInPieces(t *testing.T) {
	x := make([]float64, 103)
	r := NewRNG(3, DomainInitB, 0)
	for i := range x {
		x[i] = r.Norm()
	}
	var whole normSums
	whole.push(x)
	w1, w2 := whole.result()
	for _, pieces := range [][]int{{103}, {1, 102}, {3, 5, 7, 88}, {4, 4, 95}, {50, 0, 53}, {2, 2, 2, 97}} {
		var n normSums
		at := 0
		for _, p := range pieces {
			n.push(x[at : at+p])
			at += p
		}
		if a, q := n.result(); math.Float64bits(a) != math.Float64bits(w1) || math.Float64bits(q) != math.Float64bits(w2) {
			t.Errorf("pieces %v: %v, %v; whole: %v, %v", pieces, a, q, w1, w2)
		}
	}
	var byAdd, byPush normSums
	byAdd.add(x[:100])
	byPush.push(x[:40])
	byPush.push(x[40:100])
	a1, q1 := byAdd.result()
	a2, q2 := byPush.result()
	if a1 != a2 || q1 != q2 {
		t.Errorf("add %v, %v; push %v, %v", a1, q1, a2, q2)
	}
}
