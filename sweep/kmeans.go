package sweep

import (
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
)

// k-means on a matrix of squared distances.
//
// The points are the n unit-norm components, in m dimensions (m up to tens of thousands).
// Lloyd's k-means needs, for each point, its squared distance to the centroid (mean) of each
// cluster. With D² the squared distances between points, that distance is exactly
//
//	||x_i - mean(C)||² = (1/|C|) Σ_{j∈C} D²_ij - (1/(2|C|²)) Σ_{j,l∈C} D²_jl,
//
// so once D² is known (n²m/2 operations, which the silhouette needs anyway) every iteration
// of every restart costs O(n²) instead of O(nkm): restarts are cheap, and the result is the
// result of Lloyd's algorithm on the points themselves (up to rounding).

// Tiles of pairwiseSquared: blocks of points, and of features within them, small enough for
// a tile's two blocks of features to stay in the cache.
const (
	tilePoints   = 32
	tileFeatures = 512
)

// pairwiseSquared returns the n x n matrix of squared Euclidean distances between the rows of
// x (n x m, row-major). Each distance is summed over the features in the same order whatever
// the thread that computes it, so the result does not depend on the number of threads.
func pairwiseSquared(x []float64, n, m int) []float64 {
	d := make([]float64, n*n)
	nb := (n + tilePoints - 1) / tilePoints
	type tile struct{ bi, bj int }
	tiles := make([]tile, 0, nb*(nb+1)/2)
	for bi := 0; bi < nb; bi++ {
		for bj := bi; bj < nb; bj++ {
			tiles = append(tiles, tile{bi, bj})
		}
	}
	parallelFor(len(tiles), n*n*m/2, func(t int) {
		var acc [tilePoints * tilePoints]float64
		i0, j0 := tiles[t].bi*tilePoints, tiles[t].bj*tilePoints
		i1, j1 := min(i0+tilePoints, n), min(j0+tilePoints, n)
		for f0 := 0; f0 < m; f0 += tileFeatures {
			f1 := min(f0+tileFeatures, m)
			for i := i0; i < i1; i++ {
				xi := x[i*m+f0 : i*m+f1]
				for j := max(j0, i+1); j < j1; j++ {
					acc[(i-i0)*tilePoints+j-j0] += squaredDistance(xi, x[j*m+f0:j*m+f1])
				}
			}
		}
		for i := i0; i < i1; i++ {
			for j := max(j0, i+1); j < j1; j++ {
				v := acc[(i-i0)*tilePoints+j-j0]
				d[i*n+j], d[j*n+i] = v, v
			}
		}
	})
	return d
}

// squaredDistance returns Σ (a_f - b_f)², len(b) >= len(a), in four interleaved sums.
func squaredDistance(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	f := 0
	for ; f+4 <= len(a); f += 4 {
		d0, d1, d2, d3 := a[f]-b[f], a[f+1]-b[f+1], a[f+2]-b[f+2], a[f+3]-b[f+3]
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for ; f < len(a); f++ {
		d := a[f] - b[f]
		s0 += d * d
	}
	return (s0 + s1) + (s2 + s3)
}

// bestKMeans clusters the n points of the squared distances d2 into k clusters: the labels
// (0..k-1, none empty, k <= n) of the run of lowest inertia of KMeansRestarts runs of
// k-means, each from its own k-means++ start drawn from one stream of seed (the first run on
// a tie).
func bestKMeans(d2 []float64, n, k int, seed uint64) []int {
	labels := make([]int, n)
	switch k {
	case 1:
		return labels
	case n:
		for i := range labels {
			labels[i] = i
		}
		return labels
	}
	rng := splitMix{state: seed}
	best, bestInertia := []int(nil), math.Inf(1)
	for r := 0; r < KMeansRestarts; r++ {
		centers := kmeansPlusPlus(d2, n, k, &rng)
		labels := lloyd(d2, n, k, centers)
		if in := inertia(d2, n, k, labels); in < bestInertia || best == nil {
			best, bestInertia = labels, in
		}
	}
	return best
}

// kmeansPlusPlus picks k of the n points as initial centres by greedy k-means++ (Arthur and
// Vassilvitskii 2007, with scikit-learn's 2+ln(k) trials per centre): the first uniformly,
// each next one, among trials drawn with probability proportional to the squared distance
// to the nearest centre so far, the one that lowers the sum of those distances most. When
// every point sits on a centre it takes the lowest point that is not one.
func kmeansPlusPlus(d2 []float64, n, k int, rng *splitMix) []int {
	trials := 2 + int(math.Log(float64(k)))
	centers := make([]int, 0, k)
	isCenter := make([]bool, n)
	closest := make([]float64, n)
	c0 := rng.intn(n)
	centers, isCenter[c0] = append(centers, c0), true
	copy(closest, d2[c0*n:(c0+1)*n])
	pot := sum(closest)
	cand := make([]float64, n)
	for len(centers) < k {
		best, bestPot := -1, math.Inf(1)
		if pot > 0 {
			for t := 0; t < trials; t++ {
				r := rng.float64() * pot
				c, cum := -1, 0.0
				for i, v := range closest {
					if v > 0 {
						c, cum = i, cum+v
						if cum > r {
							break
						}
					}
				}
				row := d2[c*n : (c+1)*n]
				for i, v := range closest {
					cand[i] = min(v, row[i])
				}
				if p := sum(cand); p < bestPot {
					best, bestPot = c, p
				}
			}
		} else {
			for i := range isCenter {
				if !isCenter[i] {
					best = i
					break
				}
			}
		}
		centers, isCenter[best] = append(centers, best), true
		row := d2[best*n : (best+1)*n]
		for i, v := range closest {
			closest[i] = min(v, row[i])
		}
		pot = sum(closest)
	}
	return centers
}

// lloyd runs Lloyd's k-means from the given centre points: it assigns each point to the
// nearest centre, then repeatedly to the nearest centroid of the last assignment, until no
// assignment changes or KMeansMaxIterations iterations; a tie goes to the lower cluster. It
// returns the labels.
func lloyd(d2 []float64, n, k int, centers []int) []int {
	labels := make([]int, n)
	for i := range labels {
		best := math.Inf(1)
		for c, p := range centers {
			if v := d2[i*n+p]; v < best {
				best, labels[i] = v, c
			}
		}
	}
	next := make([]int, n)
	dist := make([]float64, n)
	sizes := make([]int, k)
	sums := make([]float64, n*k) // sums[i*k+c] = Σ_{j∈c} D²_ij
	scatter := make([]float64, k)
	for it := 0; it < KMeansMaxIterations; it++ {
		clusterSums(d2, n, k, labels, sizes, sums, scatter)
		parallelFor(n, n*k, func(i int) {
			best, bc := math.Inf(1), -1
			for c := 0; c < k; c++ {
				if sizes[c] == 0 {
					continue
				}
				nc := float64(sizes[c])
				if v := sums[i*k+c]/nc - scatter[c]/(2*nc*nc); v < best || bc < 0 {
					best, bc = v, c
				}
			}
			next[i], dist[i] = bc, best
		})
		relocateEmpty(next, dist, sizes, k)
		changed := false
		for i := range labels {
			if labels[i] != next[i] {
				changed = true
				break
			}
		}
		if !changed {
			break
		}
		labels, next = next, labels
	}
	return labels
}

// clusterSums sets sizes to the clusters' sizes, sums[i*k+c] to Σ_{j∈c} D²_ij and scatter[c]
// to Σ_{j,l∈c} D²_jl.
func clusterSums(d2 []float64, n, k int, labels, sizes []int, sums, scatter []float64) {
	clear(sizes)
	for _, c := range labels {
		sizes[c]++
	}
	parallelFor(n, n*n, func(i int) {
		s := sums[i*k : (i+1)*k]
		clear(s)
		for j, v := range d2[i*n : (i+1)*n] {
			s[labels[j]] += v
		}
	})
	clear(scatter)
	for i, c := range labels {
		scatter[c] += sums[i*k+c]
	}
}

// relocateEmpty gives each empty cluster of labels (in order) the point farthest from its
// centroid (dist) among the clusters of two points or more (the lowest on a tie), as
// scikit-learn does, so that no cluster is empty (k <= n).
func relocateEmpty(labels []int, dist []float64, sizes []int, k int) {
	clear(sizes)
	for _, c := range labels {
		sizes[c]++
	}
	for c := 0; c < k; c++ {
		if sizes[c] > 0 {
			continue
		}
		far := -1
		for i, l := range labels {
			if sizes[l] >= 2 && (far < 0 || dist[i] > dist[far]) {
				far = i
			}
		}
		sizes[labels[far]]--
		labels[far], sizes[c], dist[far] = c, 1, math.Inf(-1)
	}
}

// inertia returns the sum of the squared distances of the points to their clusters'
// centroids: Σ_c (1/(2|c|)) Σ_{j,l∈c} D²_jl.
func inertia(d2 []float64, n, k int, labels []int) float64 {
	sizes := make([]int, k)
	sums := make([]float64, n*k)
	scatter := make([]float64, k)
	clusterSums(d2, n, k, labels, sizes, sums, scatter)
	var in float64
	for c, s := range scatter {
		if sizes[c] > 0 {
			in += s / (2 * float64(sizes[c]))
		}
	}
	return in
}

func sum(v []float64) float64 {
	var s float64
	for _, e := range v {
		s += e
	}
	return s
}

// splitMix is the SplitMix64 generator (Steele, Lea and Flood 2014): small, fast and the same
// on every platform and Go version.
type splitMix struct{ state uint64 }

func (r *splitMix) next() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float64 returns a number in [0, 1).
func (r *splitMix) float64() float64 { return float64(r.next()>>11) / (1 << 53) }

// intn returns a number in [0, n) (Lemire's multiply-shift, without the rejection step: the
// bias is below n/2^64).
func (r *splitMix) intn(n int) int {
	hi, _ := bits.Mul64(r.next(), uint64(n))
	return int(hi)
}

// parallelFor calls fn(i) for i in [0, n), on up to GOMAXPROCS goroutines when the work (in
// rough operations) is worth it, else on this one. fn must write only what belongs to i.
func parallelFor(n, work int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if work < 1<<16 || workers < 2 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}
