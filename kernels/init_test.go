package kernels

import (
	"math"
	"sort"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// initialBasis runs only the initialisation of a DID job and returns B0.
func initialBasis(t *testing.T, blocks []Block, cfg Config) []float64 {
	t.Helper()
	pool := NewPool(2)
	defer pool.Close()
	n := 0
	for _, bl := range blocks {
		_, bn := bl.Dims()
		n += bn
	}
	var ms []*Machine
	off := 0
	for s, bl := range blocks {
		_, bn := bl.Dims()
		m, err := NewMachine(ShardSpec{Algo: DID, Shard: s, Shards: len(blocks), ColOffset: off, TotalCols: n,
			X: bl, K: cfg.K, Seed: cfg.Seed, Init: cfg.Init, Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ms = append(ms, m)
		off += bn
	}
	steps := make([]Step, len(ms))
	for {
		for s, m := range ms {
			st, err := m.Next()
			if err != nil {
				t.Fatal(err)
			}
			steps[s] = st
		}
		if !steps[0].Init {
			break // first collective of iteration 1: the C update has not touched B yet
		}
		out, err := Collective(steps)
		if err != nil {
			t.Fatal(err)
		}
		for s, m := range ms {
			m.Deliver(out[s])
		}
	}
	// Iteration 1's C step has run, B is still B0.
	return append([]float64(nil), ms[0].env.B...)
}

// TestRandomInitKeyedByColumn: C0 does not depend on the shard layout (only the mean's
// round-off could), and B0 and C0 have scikit-learn's scale.
func TestRandomInitKeyedByColumn(t *testing.T) {
	x := synthDense(8, 500, 3, 41, 0)
	blocks1, _ := Split(x, 1)
	blocks4, _ := Split(x, 4)
	cfg := baseConfig(DID, 3, StopRule{MaxIter: 1})
	b1 := initialBasis(t, blocks1, cfg)
	b4 := initialBasis(t, blocks4, cfg)
	if d := maxRelDiff(b1, b4); d > 1e-15 {
		t.Errorf("B0 differs between 1 and 4 shards by %.3g", d)
	}
	mean := x.Sum() / float64(8*500)
	var s float64
	for _, v := range b1 {
		s += v
	}
	// E|N(0,1)| = sqrt(2/pi); the scale is sqrt(mean/K).
	want := math.Sqrt(mean/3) * math.Sqrt(2/math.Pi)
	if got := s / float64(len(b1)); math.Abs(got-want) > 0.5*want {
		t.Errorf("B0 mean %.3g, want about %.3g", got, want)
	}
}

// TestNNDSVDMatchesExactSVD compares the randomized NNDSVD with one built from gonum's exact
// SVD on a small matrix whose spectrum decays (so the sketch is exact to round-off).
func TestNNDSVDMatchesExactSVD(t *testing.T) {
	x := synthDense(9, 300, 4, 43, 0)
	k := 3
	blocks, _ := Split(x, 3)
	cfg := baseConfig(DID, k, StopRule{MaxIter: 1})
	cfg.Init.Method = InitNNDSVD
	got := initialBasis(t, blocks, cfg)

	// Exact: X = U S V^T.
	xm := mat.NewDense(9, 300, nil)
	for i := 0; i < 9; i++ {
		for j := 0; j < 300; j++ {
			xm.Set(i, j, x.At(i, j))
		}
	}
	var svd mat.SVD
	if !svd.Factorize(xm, mat.SVDThin) {
		t.Fatal("svd failed")
	}
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	sv := svd.Values(nil)
	want := make([]float64, 9*k)
	for p := 0; p < k; p++ {
		col := make([]float64, 9)
		if p == 0 {
			for i := range col {
				col[i] = math.Sqrt(sv[0]) * math.Abs(u.At(i, 0))
			}
		} else {
			var xp, xn, yp, yn float64
			for i := 0; i < 9; i++ {
				if w := u.At(i, p); w > 0 {
					xp += w * w
				} else {
					xn += w * w
				}
			}
			for j := 0; j < 300; j++ {
				if w := v.At(j, p); w > 0 {
					yp += w * w
				} else {
					yn += w * w
				}
			}
			xp, xn, yp, yn = math.Sqrt(xp), math.Sqrt(xn), math.Sqrt(yp), math.Sqrt(yn)
			sign, xs, mag := 1.0, xp, xp*yp
			if xn*yn > mag {
				sign, xs, mag = -1, xn, xn*yn
			}
			lbd := math.Sqrt(sv[p] * mag)
			for i := range col {
				if w := sign * u.At(i, p); w > 0 {
					col[i] = lbd * w / xs
				}
			}
		}
		for i, w := range col {
			if w < nndsvdEps {
				w = 0
			}
			want[p*9+i] = w
		}
	}
	if d := maxRelDiff(want, got); d > 1e-8 {
		t.Errorf("NNDSVD basis differs from the exact-SVD construction by %.3g\n got %v\nwant %v", d, got, want)
	}
}

// TestKMeansInitFindsClusters: on well-separated clusters, the k-means centroids are the
// cluster means, whatever the shard count.
func TestKMeansInitFindsClusters(t *testing.T) {
	m, n, k := 6, 600, 3
	x := NewDense(m, n)
	centers := [][]float64{{10, 0, 0, 1, 0, 0}, {0, 10, 0, 0, 1, 0}, {0, 0, 10, 0, 0, 1}}
	r := NewRNG(5, 5, 5)
	for j := 0; j < n; j++ {
		c := centers[(j*7)%3]
		for i := 0; i < m; i++ {
			x.Data[j*m+i] = c[i] + 0.1*r.Float64()
		}
	}
	for _, p := range []int{1, 4} {
		blocks, _ := Split(x, p)
		cfg := baseConfig(DID, k, StopRule{MaxIter: 1})
		cfg.Init.Method = InitKMeans
		b := initialBasis(t, blocks, cfg)
		// Sort the found centroids by their argmax row and compare with the true means.
		type cen struct {
			arg int
			v   []float64
		}
		var found []cen
		for q := 0; q < k; q++ {
			v := b[q*m : (q+1)*m]
			arg := 0
			for i := range v {
				if v[i] > v[arg] {
					arg = i
				}
			}
			found = append(found, cen{arg, v})
		}
		sort.Slice(found, func(a, b int) bool { return found[a].arg < found[b].arg })
		for q, f := range found {
			if f.arg != q {
				t.Fatalf("p=%d: centroids %v do not separate the clusters", p, b)
			}
			for i, w := range f.v {
				if math.Abs(w-(centers[q][i]+0.05)) > 0.02 {
					t.Errorf("p=%d: centroid %d entry %d = %.4f, want about %.4f", p, q, i, w, centers[q][i]+0.05)
				}
			}
		}
	}
}

// TestNNDSVDAFillsZeros: nndsvda replaces NNDSVD's zeros by mean(X), so no entry of B0 is 0,
// while nndsvd keeps them.
func TestNNDSVDAFillsZeros(t *testing.T) {
	x := sparsify(synthDense(12, 400, 4, 47, 0.05), 0.5, 3)
	blocks, _ := Split(x, 2)
	cfg := baseConfig(DID, 4, StopRule{MaxIter: 1})
	cfg.Init.Method = InitNNDSVD
	plain := initialBasis(t, blocks, cfg)
	cfg.Init.Method = InitNNDSVDA
	filled := initialBasis(t, blocks, cfg)
	mean := x.Sum() / float64(12*400)
	zeros := 0
	for i, v := range plain {
		if v == 0 {
			zeros++
			if math.Abs(filled[i]-mean) > 1e-12*mean {
				t.Errorf("entry %d: nndsvda %.6g, want mean %.6g", i, filled[i], mean)
			}
		} else if filled[i] != v {
			t.Errorf("entry %d: nndsvda changed a nonzero %.6g to %.6g", i, v, filled[i])
		}
	}
	if zeros == 0 {
		t.Fatal("nndsvd produced no zero to fill; the test data does not exercise nndsvda")
	}
}

// TestRandomInitSameOnAnyThreads: the random C0 is drawn on the pool's workers, in lanes whose
// bounds depend on the worker count; each column's draw is keyed by the column, so 1, 2 and 5
// workers give the same bits (checked on the factors after two iterations, which start from
// it).
func TestRandomInitSameOnAnyThreads(t *testing.T) {
	const m, n, k = 4, 20000, 3 // about 7 lanes of draws: n is several interrupt spans
	x := synthDense(m, n, k, 5, 0.01)
	var ref *Result
	for _, threads := range []int{1, 2, 5} {
		cfg := baseConfig(DID, k, StopRule{MaxIter: 2})
		cfg.Threads = threads
		res := mustRun(t, x, 1, cfg)
		if ref == nil {
			ref = res
			continue
		}
		if !sameBits(res.B, ref.B) || !sameBits(res.C, ref.C) {
			t.Errorf("%d threads: the factors after two iterations differ from 1 thread's", threads)
		}
	}
}
