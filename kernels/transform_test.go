package kernels

import (
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// exhaustiveNNLS solves min_{c>=0} ||x - B c||^2 + 2 l1 sum(c) + l2 ||c||^2 for one column by
// trying every passive set (2^K of them) with an unconstrained solve on it: independent of
// block principal pivoting, for small K.
func exhaustiveNNLS(b, x []float64, m, k int, l1, l2 float64) []float64 {
	g := make([]float64, k*k)
	h := make([]float64, k)
	for p := 0; p < k; p++ {
		for q := 0; q < k; q++ {
			s := 0.0
			for i := 0; i < m; i++ {
				s += b[p*m+i] * b[q*m+i]
			}
			g[p*k+q] = s
		}
		g[p*k+p] += l2
		s := 0.0
		for i := 0; i < m; i++ {
			s += b[p*m+i] * x[i]
		}
		h[p] = s - l1
	}
	value := func(c []float64) float64 { // the objective up to the constant ||x||^2
		v := 0.0
		for p := 0; p < k; p++ {
			v -= 2 * h[p] * c[p]
			for q := 0; q < k; q++ {
				v += c[p] * g[p*k+q] * c[q]
			}
		}
		return v
	}
	best, bestVal := make([]float64, k), 0.0
	for set := 1; set < 1<<k; set++ {
		var idx []int
		for p := 0; p < k; p++ {
			if set&(1<<p) != 0 {
				idx = append(idx, p)
			}
		}
		// Solve G[idx, idx] c = h[idx] by Gaussian elimination with partial pivoting.
		s := len(idx)
		a := make([]float64, s*(s+1))
		for r, p := range idx {
			for cc, q := range idx {
				a[r*(s+1)+cc] = g[p*k+q]
			}
			a[r*(s+1)+s] = h[p]
		}
		ok := true
		for col := 0; col < s && ok; col++ {
			piv := col
			for r := col + 1; r < s; r++ {
				if math.Abs(a[r*(s+1)+col]) > math.Abs(a[piv*(s+1)+col]) {
					piv = r
				}
			}
			if math.Abs(a[piv*(s+1)+col]) < 1e-300 {
				ok = false
				break
			}
			for cc := 0; cc <= s; cc++ {
				a[col*(s+1)+cc], a[piv*(s+1)+cc] = a[piv*(s+1)+cc], a[col*(s+1)+cc]
			}
			for r := 0; r < s; r++ {
				if r != col {
					f := a[r*(s+1)+col] / a[col*(s+1)+col]
					for cc := col; cc <= s; cc++ {
						a[r*(s+1)+cc] -= f * a[col*(s+1)+cc]
					}
				}
			}
		}
		if !ok {
			continue
		}
		c := make([]float64, k)
		feasible := true
		for r, p := range idx {
			c[p] = a[r*(s+1)+s] / a[r*(s+1)+r]
			if c[p] < 0 {
				feasible = false
			}
		}
		if feasible {
			if v := value(c); v < bestVal {
				best, bestVal = c, v
			}
		}
	}
	return best
}

// transformConfig is the transform of X for the basis b0 (M x K column-major).
func transformConfig(k int, b0 []float64, o Options) Config {
	return Config{Algo: Transform, K: k, Init: InitSpec{Method: InitCustom, B0: b0}, Options: o, Stop: StopRule{MaxIter: 1}}
}

// TestTransformIsExactNNLS: every column of the transform is the exact NNLS solution, with
// and without penalties, dense and sparse, as an exhaustive search over passive sets finds it.
func TestTransformIsExactNNLS(t *testing.T) {
	m, n, k := 12, 300, 4
	basis := mustRun(t, synthDense(m, 2000, k, 3, 0.05), 1, Config{Algo: ANLS, K: k, Seed: 1, Stop: StopRule{MaxIter: 30}}).B
	for _, c := range []struct {
		name   string
		x      Block
		l1, l2 float64 // alpha_coef and l1_ratio
	}{
		{"dense", synthDense(m, n, k, 9, 0.1), 0, 0},
		{"sparse", ToCSC(sparsify(synthDense(m, n, k, 9, 0.1), 0.6, 4)), 0, 0},
		{"penalized L1", synthDense(m, n, k, 9, 0.1), 0.01, 1},
		{"penalized L1+L2", ToCSC(sparsify(synthDense(m, n, k, 9, 0.1), 0.6, 4)), 0.02, 0.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := Options{AlphaCoef: c.l1, AlphaBasis: c.l1, L1Ratio: c.l2}
			res := mustRun(t, c.x, 3, transformConfig(k, basis, o))
			if res.Iterations != 1 || !slices.Equal(res.B, basis) {
				t.Fatalf("%d iterations; basis changed: %v", res.Iterations, !slices.Equal(res.B, basis))
			}
			pen := newPenalty(o, m, n)
			dense := ToDense(c.x)
			worst := 0.0
			for j := 0; j < n; j++ {
				want := exhaustiveNNLS(basis, dense.Col(j), m, k, pen.l1C, pen.l2C)
				for p := 0; p < k; p++ {
					worst = math.Max(worst, math.Abs(res.C[j*k+p]-want[p]))
				}
			}
			if worst > 1e-9 {
				t.Errorf("max |c - exhaustive| = %.3g, want <= 1e-9", worst)
			}
			direct := residualSq(c.x, res.B, res.C, k, NewPool(1), nil) + pen.coefPenalty(res.C, nil)
			if math.Abs(res.Objective-direct) > 1e-12*direct {
				t.Errorf("objective %v, direct %v", res.Objective, direct)
			}
			if c.l1 == 0 && res.Objective != res.Residual {
				t.Errorf("unpenalized objective %v != residual %v", res.Objective, res.Residual)
			}
		})
	}
}

// TestTransformSameBitsEverywhere: a sample's coefficients do not depend on the shard count,
// the threads or the kernel path, and a warm start from the solution finds it again.
func TestTransformSameBitsEverywhere(t *testing.T) {
	t.Parallel()
	m, n, k := 10, 900, 3
	basis := mustRun(t, synthDense(m, 2000, k, 5, 0.02), 1, Config{Algo: ANLS, K: k, Seed: 2, Stop: StopRule{MaxIter: 20}}).B
	x := synthDense(m, n, k, 8, 0.05)
	want := mustRun(t, x, 1, transformConfig(k, basis, Options{}))
	for _, shards := range []int{2, 3, 7} {
		for _, threads := range []int{1, 2} {
			cfg := transformConfig(k, basis, Options{})
			cfg.Threads = threads
			got := mustRun(t, x, shards, cfg)
			if !slices.Equal(got.C, want.C) {
				t.Errorf("%d shards, %d threads: coef differs from 1 shard's (max %.3g)", shards, threads, maxRelDiff(got.C, want.C))
			}
		}
	}
	forEachKernelPath(t, func(t *testing.T, path KernelPath) {
		if got := mustRun(t, x, 3, transformConfig(k, basis, Options{Kernel: path})); !slices.Equal(got.C, want.C) {
			t.Errorf("coef differs from the default path's")
		}
	})
	warm := transformConfig(k, basis, Options{})
	warm.Init.C0 = want.C
	if got := mustRun(t, x, 2, warm); !slices.Equal(got.C, want.C) || got.Objective != want.Objective {
		t.Errorf("a warm start from the solution moved it")
	}
}

// TestTransformAgainstScipy: the coefficients match scipy.optimize.nnls per sample to 1e-9.
func TestTransformAgainstScipy(t *testing.T) {
	needSklearn(t) // scipy comes with it
	m, n, k := 15, 200, 5
	basis := mustRun(t, synthDense(m, 1500, k, 11, 0.05), 1, Config{Algo: ANLS, K: k, Seed: 3, Stop: StopRule{MaxIter: 30}}).B
	x := synthDense(m, n, k, 12, 0.2)
	res := mustRun(t, x, 4, transformConfig(k, basis, Options{}))
	dir := t.TempDir()
	writeFloats(t, filepath.Join(dir, "b.bin"), basis)
	writeFloats(t, filepath.Join(dir, "x.bin"), x.Data)
	script := fmt.Sprintf(`
import numpy as np
from scipy.optimize import nnls
m, n, k = %d, %d, %d
B = np.fromfile(%q).reshape(k, m).T   # column-major M x K
X = np.fromfile(%q).reshape(n, m).T   # column-major M x N
C = np.stack([nnls(B, X[:, j])[0] for j in range(n)])
C.astype('<f8').tofile(%q)            # N x K row-major = K x N column-major
`, m, n, k, filepath.Join(dir, "b.bin"), filepath.Join(dir, "x.bin"), filepath.Join(dir, "c.bin"))
	if out, err := exec.Command(sklearnPython, "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("scipy nnls: %v: %s", err, strings.TrimSpace(string(out)))
	}
	want := readFloats(t, filepath.Join(dir, "c.bin"), k*n)
	worst := 0.0
	for i := range want {
		worst = math.Max(worst, math.Abs(res.C[i]-want[i]))
	}
	t.Logf("max |c - scipy nnls| = %.3g", worst)
	if worst > 1e-9 {
		t.Errorf("max |c - scipy nnls| = %.3g, want <= 1e-9", worst)
	}
}

// TestTransformRefuses: a transform needs its basis.
func TestTransformRefuses(t *testing.T) {
	x := synthDense(6, 50, 2, 1, 0)
	blocks, _ := Split(x, 1)
	for _, cfg := range []Config{
		{Algo: Transform, K: 2, Stop: StopRule{MaxIter: 1}},
		{Algo: Transform, K: 2, Init: InitSpec{Method: InitCustom}, Stop: StopRule{MaxIter: 1}},
	} {
		if _, err := Run(t.Context(), blocks, cfg); err == nil || !strings.Contains(err.Error(), "transform needs the basis") {
			t.Errorf("%+v: %v", cfg.Init, err)
		}
	}
}

// forEachKernelPath runs f once on every kernel path this CPU offers, with the path to use
// (Options.Kernel).
func forEachKernelPath(t *testing.T, f func(t *testing.T, path KernelPath)) {
	for _, p := range AvailableKernelPaths() {
		t.Run(p.String(), func(t *testing.T) { f(t, p) })
	}
}
