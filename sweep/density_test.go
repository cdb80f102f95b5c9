package sweep

import (
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/usererr"
)

func TestDensityFilterValues(t *testing.T) {
	sq2 := math.Sqrt2
	cases := []struct {
		name   string
		bases  [][]float64 // m = 2, k = 1 unless k says
		k      int
		f      Filter
		values []float64
		kept   []bool
		err    string
	}{
		{name: "one outlier", bases: [][]float64{{1, 0}, {3, 0}, {0, 2}}, f: Filter{Threshold: 0.5, NeighborhoodSize: 0.5},
			values: []float64{0, 0, sq2}, kept: []bool{true, true, false}},
		{name: "threshold 2 keeps all", bases: [][]float64{{1, 0}, {3, 0}, {0, 2}}, f: Filter{Threshold: 2, NeighborhoodSize: 0.5},
			values: []float64{0, 0, sq2}, kept: []bool{true, true, true}},
		{name: "two neighbours", bases: [][]float64{{1, 0}, {3, 0}, {0, 2}, {0, 1}}, f: Filter{Threshold: 0.8, NeighborhoodSize: 0.5},
			values: []float64{sq2 / 2, sq2 / 2, sq2 / 2, sq2 / 2}, kept: []bool{true, true, true, true}},
		{name: "zero column", bases: [][]float64{{1, 0}, {0, 0}, {2, 0}}, f: Filter{Threshold: 0.5, NeighborhoodSize: 0.5},
			values: []float64{0, 1, 0}, kept: []bool{true, false, true}},
		{name: "strict less than", bases: [][]float64{{1, 0}, {0, 1}}, f: Filter{Threshold: sq2, NeighborhoodSize: 0.5},
			values: []float64{sq2, sq2}, kept: []bool{false, false}},
		{name: "k 2: run of two", k: 2, bases: [][]float64{{1, 0, 0, 1}, {0, 1, 1, 0}}, f: Filter{Threshold: 0.5, NeighborhoodSize: 0.5},
			values: []float64{0, 0, 0, 0}, kept: []bool{true, true, true, true}},
		{name: "no neighbour", bases: [][]float64{{1, 0}, {3, 0}, {0, 2}}, f: DefaultFilter(), err: "makes 0 neighbours"},
		{name: "too many neighbours", bases: [][]float64{{1, 0}, {3, 0}}, f: Filter{Threshold: 0.5, NeighborhoodSize: 1}, err: "only 1 other"},
		{name: "threshold 0", bases: [][]float64{{1, 0}, {3, 0}}, f: Filter{Threshold: 0, NeighborhoodSize: 0.5}, err: "threshold must be > 0"},
		{name: "threshold NaN", bases: [][]float64{{1, 0}, {3, 0}}, f: Filter{Threshold: math.NaN(), NeighborhoodSize: 0.5}, err: "threshold must be > 0"},
		{name: "size above 1", bases: [][]float64{{1, 0}, {3, 0}}, f: Filter{Threshold: 0.5, NeighborhoodSize: 1.5}, err: "in (0, 1]"},
		{name: "NaN value", bases: [][]float64{{1, math.NaN()}, {3, 0}}, f: Filter{Threshold: 0.5, NeighborhoodSize: 0.5}, err: "value NaN at feature 1 of column 0"},
		{name: "wrong length", bases: [][]float64{{1, 0}, {3}}, f: Filter{Threshold: 0.5, NeighborhoodSize: 0.5}, err: "base 1 has 1 values"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := max(c.k, 1)
			d, err := DensityFilter(c.bases, 2, k, c.f)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, usererr.ErrUser) {
					t.Fatalf("error %v, want a user's error with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Values) != len(c.values) {
				t.Fatalf("values %v, want %v", d.Values, c.values)
			}
			for i, v := range c.values {
				if math.Abs(d.Values[i]-v) > 1e-12 {
					t.Errorf("density %d = %v, want %v", i, d.Values[i], v)
				}
			}
			kept := 0
			for _, ok := range c.kept {
				if ok {
					kept++
				}
			}
			if !slices.Equal(d.Kept, c.kept) || d.NumKept != kept {
				t.Errorf("kept %v (%d), want %v", d.Kept, d.NumKept, c.kept)
			}
		})
	}
}

// plantedWithOutliers is 10 runs of rank 6 of truth(m, 6) with 5% noise; in runs 2 and 7,
// column 3 is replaced by a bump no other run has (an outlier). It returns the bases and the
// indices (r*K+p) of the outliers.
func plantedWithOutliers(m int) ([][]float64, []int) {
	const k, runs = 6, 10
	rng := rand.New(rand.NewPCG(6, 10))
	bases := plantedBases(rng, m, k, k, runs, 0.05)
	var outliers []int
	for i, r := range []int{2, 7} {
		// Halfway between two true bumps: far (distance > 1) from every component.
		centre := (float64(2*i+1) + 1) * float64(m) / k
		copy(bases[r][3*m:4*m], bump(m, centre))
		outliers = append(outliers, r*k+3)
	}
	return bases, outliers
}

func TestFilteredConsensusPlanted(t *testing.T) {
	const m, k = 240, 6
	bases, outliers := plantedWithOutliers(m)
	tr := truth(m, k)
	for _, c := range []struct {
		name     string
		f        Filter
		filtered []int
	}{
		{"cNMF's defaults drop the outliers", DefaultFilter(), outliers},
		{"threshold 2 keeps every component", Filter{Threshold: 2, NeighborhoodSize: DefaultNeighborhoodSize}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			fc, err := FilteredConsensus(bases, m, k, ConsensusSeed, c.f)
			if err != nil {
				t.Fatal(err)
			}
			var dropped []int
			for i, ok := range fc.Density.Kept {
				if !ok {
					dropped = append(dropped, i)
					if fc.Labels[i] != -1 {
						t.Errorf("filtered component %d has label %d", i, fc.Labels[i])
					}
				}
			}
			if !slices.Equal(dropped, c.filtered) || fc.Density.Neighbors != 3 {
				t.Errorf("filtered %v (densities at the outliers %.3f, %.3f; %d neighbours), want %v",
					dropped, fc.Density.Values[outliers[0]], fc.Density.Values[outliers[1]], fc.Density.Neighbors, c.filtered)
			}
			total := 0
			for _, s := range fc.ClusterSizes {
				total += s
			}
			if total != fc.Density.NumKept || total != k*10-len(c.filtered) {
				t.Errorf("cluster sizes %v sum to %d, kept %d", fc.ClusterSizes, total, fc.Density.NumKept)
			}
			if len(c.filtered) > 0 && !(fc.Silhouette > 0.9) {
				t.Errorf("silhouette %v, want > 0.9", fc.Silhouette)
			}
			used := map[int]bool{}
			for p := 0; p < k; p++ {
				best, bc := -1.0, -1
				for q := 0; q < k; q++ {
					if cs := cosine(tr[p*m:(p+1)*m], fc.Basis[q*m:(q+1)*m]); cs > best {
						best, bc = cs, q
					}
				}
				if !(best > 0.99) || used[bc] {
					t.Errorf("true program %d: best cosine %.5f with column %d (used: %v)", p, best, bc, used[bc])
				}
				used[bc] = true
			}
			for q := 0; q < k; q++ {
				if s := sum(fc.Basis[q*m : (q+1)*m]); math.Abs(s-1) > 1e-12 {
					t.Errorf("column %d sums to %v, want 1", q, s)
				}
			}
		})
	}
}

func TestFilteredConsensusDeterministicAndErrors(t *testing.T) {
	const m, k = 240, 6
	bases, _ := plantedWithOutliers(m)
	a, err := FilteredConsensus(bases, m, k, 5, DefaultFilter())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := FilteredConsensus(bases, m, k, 5, DefaultFilter())
	// 300 components: the densities, as the distances, are computed on several threads.
	big := plantedBases(rand.New(rand.NewPCG(7, 8)), 100, 8, 10, 30, 0.05)
	many, err := FilteredConsensus(big, 100, 10, 5, DefaultFilter())
	if err != nil {
		t.Fatal(err)
	}
	prev := runtime.GOMAXPROCS(1)
	one, _ := FilteredConsensus(big, 100, 10, 5, DefaultFilter())
	runtime.GOMAXPROCS(prev)
	bits := func(v []float64) []uint64 {
		out := make([]uint64, len(v))
		for i, x := range v {
			out[i] = math.Float64bits(x)
		}
		return out
	}
	if !slices.Equal(bits(a.Basis), bits(b.Basis)) || !slices.Equal(a.Labels, b.Labels) || math.Float64bits(a.Silhouette) != math.Float64bits(b.Silhouette) {
		t.Error("two calls differ")
	}
	if !slices.Equal(bits(many.Basis), bits(one.Basis)) || !slices.Equal(bits(many.Density.Values), bits(one.Density.Values)) ||
		!slices.Equal(many.Labels, one.Labels) || math.Float64bits(many.Silhouette) != math.Float64bits(one.Silhouette) {
		t.Error("one thread and several differ")
	}
	// A threshold below every density keeps fewer than K components.
	if _, err := FilteredConsensus(bases, m, k, 1, Filter{Threshold: 1e-9, NeighborhoodSize: 0.3}); err == nil || !errors.Is(err, usererr.ErrUser) ||
		!strings.Contains(err.Error(), "fewer than K = 6") {
		t.Errorf("tiny threshold: %v", err)
	}
	if _, err := FilteredConsensus(nil, m, k, 1, DefaultFilter()); err == nil || !strings.Contains(err.Error(), "no bases") {
		t.Errorf("no bases: %v", err)
	}
}
