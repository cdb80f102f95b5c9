package sweep

import (
	"cmp"
	"math"
	"slices"
	"strconv"
)

// Limits of Consensus.
const (
	// MaxPoints is the most components Consensus clusters (k times the number of bases):
	// it keeps their k*S x k*S matrix of distances within 8*MaxPoints² bytes (800 MB).
	MaxPoints = 10000
	// KMeansRestarts is how many times Consensus runs k-means, each from its own k-means++
	// start, keeping the clustering of the lowest inertia (cNMF's, scikit-learn's n_init=10).
	KMeansRestarts = 10
	// KMeansMaxIterations bounds the iterations of each k-means run; one stops earlier when
	// no assignment changes.
	KMeansMaxIterations = 100
)

// Stability is how well the bases of one rank, from runs with different seeds, agree: the
// result of Consensus.
type Stability struct {
	// M is the number of features, K the rank (the number of clusters), Seeds the number of
	// bases clustered.
	M, K, Seeds int
	// Silhouette is the mean silhouette of the K*Seeds components in their clusters, between
	// -1 and 1: near 1 when every seed finds the same K components, near 0 when the
	// components are no closer to their own cluster than to the next. It is NaN when it is
	// not defined: for one seed (every cluster a single component) or K = 1 (one cluster).
	Silhouette float64
	// ClusterSilhouettes is the mean silhouette of each cluster's components, in the order
	// of Basis's columns (all NaN when Silhouette is): which consensus components are
	// reproducible and which are not.
	ClusterSilhouettes []float64
	// Basis is the consensus basis, M x K column-major (column p is Basis[p*M:(p+1)*M]):
	// column p is the elementwise median of the unit-norm components of cluster p, scaled
	// to unit L2 norm (left zero if the median is zero). Columns are ordered by cluster
	// size, largest first, then by the cluster's first component (the lowest seed index,
	// then the lowest column).
	Basis []float64
	// ClusterSizes is the number of components in each cluster, in the order of Basis's
	// columns. They sum to K*Seeds; each is Seeds in a perfect split.
	ClusterSizes []int
	// Labels gives the cluster (the column of Basis) of each component: Labels[s*K+p] is
	// that of column p of bases[s].
	Labels []int
	// Agreement is the fraction of clusters that hold exactly one component of each seed:
	// 1 when every seed found the same K components, each once. It is NaN for one seed,
	// where it would be 1 whatever the basis.
	Agreement float64
}

// Consensus clusters the components of bases, the bases of one rank k from runs with
// different seeds, as consensus NMF (cNMF: Kotliar et al., eLife 2019) does, and says how
// stable they are. Each base is m x k column-major: column p is bases[s][p*m:(p+1)*m].
//
// The k*S columns of the S bases are scaled to unit L2 norm (a zero column, a component the
// run switched off, stays zero: it is at distance 1 from every unit vector and 0 from the
// other zero columns, so the zero columns of several seeds tend to share a cluster, whose
// consensus column is zero). They are then split into k clusters by k-means (Euclidean), run
// KMeansRestarts times from k-means++ starts drawn from seed, keeping the lowest inertia;
// each run stops when no assignment changes or after KMeansMaxIterations iterations. An
// empty cluster takes the point farthest from its centroid. The silhouette, the agreement
// and the consensus basis (the median of each cluster) are described with Stability.
// Unlike cNMF's consensus, no component is dropped as an outlier before clustering (cNMF's
// density_threshold of 2, which keeps every component, as its K-selection plot does):
// FilteredConsensus is cNMF's consensus with its density filter.
//
// The result depends only on the arguments: the same inputs give the same bits, whatever
// the number of threads (on one architecture: a compiler may fuse multiply-adds on
// another). The order of the bases matters, as the k-means++ draws are of indices.
//
// It takes time O(S²k²m) for the distances between components (computed in parallel) and
// O(KMeansRestarts*iterations*S²k²) for k-means, which works on those distances; memory
// 8(Sk)² bytes for the distances and 8Skm for the scaled components. The inputs are not
// modified. Errors (no bases, m < 1, k < 1, a base of the wrong length, a NaN or infinite
// value, more than MaxPoints components) wrap usererr.ErrUser.
func Consensus(bases [][]float64, m, k int, seed uint64) (Stability, error) {
	if err := checkBases("consensus", bases, m, k); err != nil {
		return Stability{}, err
	}
	nSeeds := len(bases)
	n := nSeeds * k
	x := normalizeColumns(bases, m, k)
	d2 := pairwiseSquared(x, n, m)
	labels := bestKMeans(d2, n, k, seed)

	st := Stability{M: m, K: k, Seeds: nSeeds}
	st.Labels, st.ClusterSizes = orderClusters(labels, k)
	st.Silhouette, st.ClusterSilhouettes = silhouette(d2, st.Labels, n, k)
	st.Agreement = agreement(st.Labels, nSeeds, k)
	st.Basis = medians(x, st.Labels, n, m, k, UnitNorm)
	return st, nil
}

// normalizeColumns returns the k*S columns of bases, each scaled to unit L2 norm (zero
// columns stay zero), as a (k*S) x m row-major matrix: row s*k+p is column p of bases[s].
func normalizeColumns(bases [][]float64, m, k int) []float64 {
	x := make([]float64, len(bases)*k*m)
	for s, b := range bases {
		for p := 0; p < k; p++ {
			col := b[p*m : (p+1)*m]
			out := x[(s*k+p)*m : (s*k+p+1)*m]
			copy(out, col)
			UnitNorm(out)
		}
	}
	return x
}

// UnitNorm scales v to unit L2 norm in place, in two steps (by its largest magnitude, then
// by the norm of the result) so that no square overflows or underflows; a zero v stays
// zero. Consensus scales every component so before clustering it, and a sweep's
// spectra_K.npy holds the runs' bases scaled by it.
func UnitNorm(v []float64) {
	var big float64
	for _, e := range v {
		big = max(big, math.Abs(e))
	}
	if big == 0 {
		return
	}
	var ss float64
	for i, e := range v {
		v[i] = e / big
		ss += v[i] * v[i]
	}
	norm := math.Sqrt(ss)
	for i := range v {
		v[i] /= norm
	}
}

// silhouette returns the mean silhouette of the n points with their labels (0..k-1, every
// cluster non-empty), and the mean of each cluster's points, from the squared distances d2
// (n x n). A point's silhouette is (b-a)/max(a,b), a its mean distance to the other points
// of its cluster, b the least mean distance to the points of another cluster; it is 0 for a
// point alone in its cluster (and when a = b = 0), as in scikit-learn. The mean is NaN, as
// are the clusters', unless 2 <= k <= n-1 (scikit-learn refuses other k).
func silhouette(d2 []float64, labels []int, n, k int) (float64, []float64) {
	per := make([]float64, k)
	if k < 2 || k > n-1 {
		for c := range per {
			per[c] = math.NaN()
		}
		return math.NaN(), per
	}
	sizes := make([]int, k)
	for _, c := range labels {
		sizes[c]++
	}
	s := make([]float64, n)
	parallelFor(n, n*n, func(i int) {
		sums := make([]float64, k)
		row := d2[i*n : (i+1)*n]
		for j, v := range row {
			sums[labels[j]] += math.Sqrt(v)
		}
		own := labels[i]
		if sizes[own] == 1 {
			return // s[i] = 0
		}
		a := sums[own] / float64(sizes[own]-1)
		b := math.Inf(1)
		for c, sum := range sums {
			if c != own {
				b = min(b, sum/float64(sizes[c]))
			}
		}
		if d := max(a, b); d > 0 {
			s[i] = (b - a) / d
		}
	})
	var total float64
	for i, v := range s {
		total += v
		per[labels[i]] += v
	}
	for c := range per {
		per[c] /= float64(sizes[c])
	}
	return total / float64(n), per
}

// agreement returns the fraction of the k clusters that hold exactly one point of each of
// the nSeeds seeds (point i is of seed i/k); NaN for one seed.
func agreement(labels []int, nSeeds, k int) float64 {
	if nSeeds < 2 {
		return math.NaN()
	}
	count := make([]int, k*nSeeds) // count[c*nSeeds+s]
	for i, c := range labels {
		count[c*nSeeds+i/k]++
	}
	perfect := 0
	for c := 0; c < k; c++ {
		ok := true
		for s := 0; s < nSeeds && ok; s++ {
			ok = count[c*nSeeds+s] == 1
		}
		if ok {
			perfect++
		}
	}
	return float64(perfect) / float64(k)
}

// medians returns the m x k column-major consensus: column c is the elementwise median of
// the rows of x (n x m) labelled c, scaled by scale (UnitNorm, or sumToOne). The median of an
// even number of values is the mean of the middle two.
func medians(x []float64, labels []int, n, m, k int, scale func([]float64)) []float64 {
	members := make([][]int, k)
	for i, c := range labels {
		members[c] = append(members[c], i)
	}
	out := make([]float64, m*k)
	parallelFor(k, n*m, func(c int) {
		col := out[c*m : (c+1)*m]
		vals := make([]float64, len(members[c]))
		for f := range col {
			for t, i := range members[c] {
				vals[t] = x[i*m+f]
			}
			slices.Sort(vals)
			col[f] = sortedMedian(vals)
		}
		scale(col)
	})
	return out
}

// checkBases tells what is wrong with bases for Consensus (and the functions like it, whose
// name starts the message): m, k >= 1, at least one base, at most MaxPoints components, each
// base of m*k finite values.
func checkBases(what string, bases [][]float64, m, k int) error {
	switch {
	case m < 1:
		return inputErrorf("%s: m must be >= 1, got %d", what, m)
	case k < 1:
		return inputErrorf("%s: k must be >= 1, got %d", what, k)
	case len(bases) == 0:
		return inputErrorf("%s: no bases", what)
	case k > MaxPoints || len(bases) > MaxPoints/k:
		return inputErrorf("%s: %d bases of rank %d make more than %d components", what, len(bases), k, MaxPoints)
	case m > math.MaxInt/(k*len(bases)):
		return inputErrorf("%s: %d bases of %d x %d are too large", what, len(bases), m, k)
	}
	for s, b := range bases {
		if len(b) != m*k {
			return inputErrorf("%s: base %d has %d values, want m*k = %d*%d = %d", what, s, len(b), m, k, m*k)
		}
		for i, v := range b {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return inputErrorf("%s: base %d: value %v at feature %d of column %d", what, s, v, i%m, i/m)
			}
		}
	}
	return nil
}

// orderClusters renumbers the clusters of labels (0..k-1) by size, largest first, then by
// first member, and returns the new labels and the clusters' sizes in the new order.
func orderClusters(labels []int, k int) ([]int, []int) {
	n := len(labels)
	sizes := make([]int, k)
	first := make([]int, k)
	for c := range first {
		first[c] = n
	}
	for i, c := range labels {
		sizes[c]++
		first[c] = min(first[c], i)
	}
	order := make([]int, k) // order[new] = old
	for c := range order {
		order[c] = c
	}
	slices.SortFunc(order, func(a, b int) int {
		if sizes[a] != sizes[b] {
			return cmp.Compare(sizes[b], sizes[a])
		}
		return cmp.Compare(first[a], first[b])
	})
	rename := make([]int, k) // rename[old] = new
	for c, old := range order {
		rename[old] = c
	}
	out := make([]int, n)
	for i, c := range labels {
		out[i] = rename[c]
	}
	newSizes := make([]int, k)
	for c, old := range order {
		newSizes[c] = sizes[old]
	}
	return out, newSizes
}

// sumToOne scales v (nonnegative) to sum 1; a v of sum 0 stays as it is.
func sumToOne(v []float64) {
	var s float64
	for _, e := range v {
		s += e
	}
	if s <= 0 {
		return
	}
	for i := range v {
		v[i] /= s
	}
}

// Filtered is the outcome of FilteredConsensus: cNMF's consensus of the components of
// several runs of one rank, after its density filter.
type Filtered struct {
	// M is the number of features, K the rank, Runs the number of runs (bases).
	M, K, Runs int
	// Density is the filter's outcome for every component (component r*K+p is column p of
	// run r).
	Density Density
	// Labels gives the cluster (the column of Basis) of every component, -1 for one the
	// filter dropped.
	Labels []int
	// ClusterSizes is the number of kept components in each cluster, in the order of
	// Basis's columns (largest first, then by the cluster's first component); they sum to
	// Density.NumKept.
	ClusterSizes []int
	// Silhouette is the mean silhouette of the kept components in their clusters (cNMF's
	// stability), and ClusterSilhouettes each cluster's; NaN when not defined (K = 1, or
	// fewer than K+1 components kept).
	Silhouette         float64
	ClusterSilhouettes []float64
	// Basis is the consensus basis, M x K column-major: column p is the elementwise median
	// of the unit-norm components of cluster p, scaled to sum 1 as cNMF scales its median
	// spectra (each column a distribution over the features, so that a sample's usage of a
	// program is the part of the sample's total it explains). A zero median stays zero.
	Basis []float64
}

// FilteredConsensus is cNMF's consensus in full over the components of bases, the bases of
// runs of one rank k (each m x k column-major, as for Consensus): the components are scaled
// to unit L2 norm, the density filter f drops the outliers (DensityFilter), the kept ones are
// clustered into k clusters by the k-means of Consensus (KMeansRestarts k-means++ starts from
// seed, the lowest inertia kept), and each cluster's elementwise median, scaled to sum 1, is
// a consensus component. Consensus is this with no filter and unit-norm medians.
//
// It is deterministic (the same bits whatever the number of threads) and costs what
// Consensus costs. Errors (those of DensityFilter, and a filter that keeps fewer than k
// components) wrap usererr.ErrUser.
func FilteredConsensus(bases [][]float64, m, k int, seed uint64, f Filter) (Filtered, error) {
	if err := checkBases("consensus", bases, m, k); err != nil {
		return Filtered{}, err
	}
	if err := f.check(len(bases), k); err != nil {
		return Filtered{}, err
	}
	runs := len(bases)
	n := runs * k
	x := normalizeColumns(bases, m, k)
	d2 := pairwiseSquared(x, n, m)
	dens := densityOf(d2, n, runs, f)
	out := Filtered{M: m, K: k, Runs: runs, Density: dens, Labels: make([]int, n)}
	if dens.NumKept < k {
		return Filtered{}, inputErrorf("consensus: the density filter (threshold %v, %s) kept %d of %d components, fewer than K = %d: raise the threshold (2 keeps every one)",
			f.Threshold, neighbours(dens.Neighbors), dens.NumKept, n, k)
	}
	kept := make([]int, 0, dens.NumKept) // kept[i] = the component
	for i, ok := range dens.Kept {
		if ok {
			kept = append(kept, i)
		}
	}
	nk := len(kept)
	xk := make([]float64, nk*m)
	d2k := make([]float64, nk*nk)
	for a, i := range kept {
		copy(xk[a*m:(a+1)*m], x[i*m:(i+1)*m])
		for b, j := range kept {
			d2k[a*nk+b] = d2[i*n+j]
		}
	}
	labels, sizes := orderClusters(bestKMeans(d2k, nk, k, seed), k)
	out.ClusterSizes = sizes
	for i := range out.Labels {
		out.Labels[i] = -1
	}
	for a, i := range kept {
		out.Labels[i] = labels[a]
	}
	out.Silhouette, out.ClusterSilhouettes = silhouette(d2k, labels, nk, k)
	out.Basis = medians(xk, labels, nk, m, k, sumToOne)
	return out, nil
}

// neighbours is "1 neighbour" or "N neighbours".
func neighbours(n int) string {
	if n == 1 {
		return "1 neighbour"
	}
	return strconv.Itoa(n) + " neighbours"
}
