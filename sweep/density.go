package sweep

import (
	"math"
	"slices"
)

// Defaults of Filter: cNMF's (Kotliar et al., eLife 2019; dylkot/cNMF's consensus).
const (
	// DefaultDensityThreshold is cNMF's density_threshold: a component whose local density
	// is 0.5 or more is an outlier.
	DefaultDensityThreshold = 0.5
	// DefaultNeighborhoodSize is cNMF's local_neighborhood_size: the local density is over
	// the nearest 30% of the runs' number of components.
	DefaultNeighborhoodSize = 0.30
)

// Filter is cNMF's local-density outlier filter, which drops the components that no other
// run found before they are clustered.
type Filter struct {
	// Threshold keeps a component when its local density is below it (cNMF's
	// density_threshold, default DefaultDensityThreshold). Two unit-norm nonnegative
	// vectors are at most √2 apart, so 2 keeps every component (cNMF's "no filter").
	Threshold float64
	// NeighborhoodSize sets how many nearest components make the local density: the
	// integer part of NeighborhoodSize times the number of runs (cNMF's
	// local_neighborhood_size, default DefaultNeighborhoodSize; cNMF truncates with
	// int(), and so does this). It must give at least one neighbour.
	NeighborhoodSize float64
}

// DefaultFilter is cNMF's filter: threshold 0.5 over the nearest 30% of the runs.
func DefaultFilter() Filter {
	return Filter{Threshold: DefaultDensityThreshold, NeighborhoodSize: DefaultNeighborhoodSize}
}

// Neighbors is the number of nearest components whose mean distance is a component's local
// density for runs runs: int(NeighborhoodSize × runs).
func (f Filter) Neighbors(runs int) int {
	return int(f.NeighborhoodSize * float64(runs))
}

// check tells what is wrong with f for runs runs of rank k.
func (f Filter) check(runs, k int) error {
	switch {
	case math.IsNaN(f.Threshold) || math.IsInf(f.Threshold, 0) || f.Threshold <= 0:
		return inputErrorf("density filter: the threshold must be > 0 and finite (2 keeps every component), got %v", f.Threshold)
	case math.IsNaN(f.NeighborhoodSize) || f.NeighborhoodSize <= 0 || f.NeighborhoodSize > 1:
		return inputErrorf("density filter: the local neighborhood size must be in (0, 1], got %v", f.NeighborhoodSize)
	}
	nn := f.Neighbors(runs)
	if nn < 1 {
		return inputErrorf("density filter: a local neighborhood size of %v over %d runs makes %d neighbours (int(%v x %d)); it needs at least 1: raise the local neighborhood size (--local-neighborhood-size) or sweep more seeds (--seeds)",
			f.NeighborhoodSize, runs, nn, f.NeighborhoodSize, runs)
	}
	if nn > runs*k-1 {
		return inputErrorf("density filter: %s, but %d runs of rank %d make only %d other components", neighbours(nn), runs, k, runs*k-1)
	}
	return nil
}

// Density is the outcome of the density filter over the components of several runs of one
// rank, in the order given (component r*K+p is column p of run r).
type Density struct {
	// Neighbors is the number of nearest components averaged, Threshold the filter's.
	Neighbors int
	Threshold float64
	// Values is each component's local density: the mean Euclidean distance of its unit-norm
	// vector to its Neighbors nearest other components (cNMF's local_density).
	Values []float64
	// Kept tells which components the filter keeps (Values < Threshold), and NumKept how
	// many.
	Kept    []bool
	NumKept int
}

// DensityFilter computes cNMF's local density of the components of bases (each m x k
// column-major, as for Consensus) and which of them f keeps: every column is scaled to unit
// L2 norm (a zero column stays zero), and a component's local density is the mean distance
// to its f.Neighbors(len(bases)) nearest other components. A component found by most runs
// has near neighbours (its copies) and a low density; one found by a single run does not.
//
// It is deterministic (the same bits whatever the number of threads) and costs, like
// Consensus, O(S²k²m) time and 8(Sk)² bytes. Errors (those of Consensus, and a filter that
// is out of range or gives no neighbour) wrap usererr.ErrUser.
func DensityFilter(bases [][]float64, m, k int, f Filter) (Density, error) {
	if err := checkBases("density filter", bases, m, k); err != nil {
		return Density{}, err
	}
	if err := f.check(len(bases), k); err != nil {
		return Density{}, err
	}
	n := len(bases) * k
	d2 := pairwiseSquared(normalizeColumns(bases, m, k), n, m)
	return densityOf(d2, n, len(bases), f), nil
}

// densityOf is the density filter of the n components of runs runs from their squared
// distances d2 (n x n); f has been checked.
func densityOf(d2 []float64, n, runs int, f Filter) Density {
	nn := f.Neighbors(runs)
	d := Density{Neighbors: nn, Threshold: f.Threshold, Values: make([]float64, n), Kept: make([]bool, n)}
	parallelFor(n, n*n, func(i int) {
		row := make([]float64, 0, n-1)
		for j, v := range d2[i*n : (i+1)*n] {
			if j != i {
				row = append(row, math.Sqrt(v))
			}
		}
		slices.Sort(row)
		var s float64
		for _, v := range row[:nn] {
			s += v
		}
		d.Values[i] = s / float64(nn)
	})
	for i, v := range d.Values {
		if v < f.Threshold {
			d.Kept[i] = true
			d.NumKept++
		}
	}
	return d
}
