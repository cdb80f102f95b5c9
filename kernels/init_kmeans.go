package kernels

import "math"

// k-means initialisation, the DID paper's choice for real data: k-means++ seeding and Lloyd's
// iterations over the samples of all shards, then B0 = centroids and C0 = each sample's
// least-squares weight on its own centroid, max(0, b_a·x_j / ||b_a||^2).
//
// Seeding picks centre r by D^2 sampling with u = (seed, DomainKMeans, r): every shard sends its
// local sum of D^2 (allgather), all of them find the owner of the draw, and the owner sends the
// sample (allreduce with zeros elsewhere). Lloyd's steps allreduce per-cluster sums and counts
// and stop when no assignment changes or after Init.KMeansIters steps (default 20).

const defaultKMeansIters = 20

func (e *shardEnv) initKMeans() (b, c []float64) {
	// k-means reads X entry by entry: a block stored as float32 is widened for the init only.
	x, m, n, k := Widen(e.spec.X), e.rows, e.cols, e.k
	total := e.spec.TotalCols
	off := e.spec.ColOffset
	maxIters := e.spec.Init.KMeansIters
	if maxIters <= 0 {
		maxIters = defaultKMeansIters
	}
	dense, _ := x.(*Dense)
	sparse, _ := x.(*CSC)
	dotCol := func(j int, v []float64) float64 {
		if dense != nil {
			return dot(dense.Col(j), v)
		}
		var s float64
		for t := sparse.ColPtr[j]; t < sparse.ColPtr[j+1]; t++ {
			s += float64(sparse.Val[t] * v[sparse.RowIdx[t]])
		}
		return s
	}
	// Columns between two looks at the interrupt flag, for passes over the samples against
	// one vector and against the K centres.
	span1 := e.flag.span(colWork(x, 1), 1)
	spanK := e.flag.span(colWork(x, k)+m, 1)
	xx := make([]float64, n)
	for j0 := 0; j0 < n; j0 += span1 {
		e.flag.poll()
		for j, j1 := j0, min(j0+span1, n); j < j1; j++ {
			if dense != nil {
				xx[j] = dot(dense.Col(j), dense.Col(j))
			} else {
				v := sparse.Val[sparse.ColPtr[j]:sparse.ColPtr[j+1]]
				xx[j] = dot(v, v)
			}
		}
	}
	centers := make([]float64, m*k)
	vec := make([]float64, m)
	// pick makes sample g (global index) centre r.
	pick := func(r, g int) {
		clear64(vec)
		if g >= off && g < off+n {
			columnInto(x, g-off, vec)
		}
		copy(centers[r*m:(r+1)*m], e.allReduce("init.kmeans.pick", 0, vec))
	}
	rng := NewRNG(e.spec.Seed, DomainKMeans, 0)
	pick(0, int(rng.Uint64()%uint64(total)))

	dist := make([]float64, n)
	for j := range dist {
		dist[j] = math.Inf(1)
	}
	for r := 1; r < k; r++ {
		prevC := centers[(r-1)*m : r*m]
		cc := dot(prevC, prevC)
		var local float64
		for j0 := 0; j0 < n; j0 += span1 {
			e.flag.poll()
			for j, j1 := j0, min(j0+span1, n); j < j1; j++ {
				d := xx[j] - float64(2*dotCol(j, prevC)) + cc
				if d < 0 {
					d = 0
				}
				if d < dist[j] {
					dist[j] = d
				}
				local += dist[j]
			}
		}
		sums := e.allGather("init.kmeans.d2", 0, []float64{local})
		var all float64
		for _, s := range sums {
			all += s
		}
		rr := NewRNG(e.spec.Seed, DomainKMeans, uint64(r))
		u := rr.Float64() * all
		g := int(rr.Uint64() % uint64(total)) // used when every sample sits on a centre
		if all > 0 {
			g = -1
			owner, before := -1, 0.0
			for s, v := range sums {
				if v > 0 {
					owner = s // the last shard with mass, should u round past the end
				}
				if v > 0 && u < before+v {
					owner = s
					break
				}
				before += v
			}
			if owner == e.spec.Shard {
				g = off + n - 1
				cum := before
				for j := 0; j < n; j++ {
					if dist[j] > 0 {
						g = off + j
					}
					cum += dist[j]
					if dist[j] > 0 && u < cum {
						break
					}
				}
			}
		}
		pick(r, g)
	}

	// Lloyd's iterations.
	assign := make([]int, n)
	for j := range assign {
		assign[j] = -1
	}
	cnorm := make([]float64, k)
	nearest := func(j int) int {
		best, bestD := 0, math.Inf(1)
		for p := 0; p < k; p++ {
			d := cnorm[p] - float64(2*dotCol(j, centers[p*m:(p+1)*m]))
			if d < bestD {
				best, bestD = p, d
			}
		}
		return best
	}
	stats := make([]float64, m*k+k+1)
	for it := 0; it < maxIters; it++ {
		for p := 0; p < k; p++ {
			cp := centers[p*m : (p+1)*m]
			cnorm[p] = dot(cp, cp)
		}
		clear64(stats)
		for j0 := 0; j0 < n; j0 += spanK {
			e.flag.poll()
			for j, j1 := j0, min(j0+spanK, n); j < j1; j++ {
				a := nearest(j)
				if a != assign[j] {
					stats[m*k+k]++
					assign[j] = a
				}
				stats[m*k+a]++
				if dense != nil {
					axpy(stats[a*m:(a+1)*m], 1, dense.Col(j))
				} else {
					for t := sparse.ColPtr[j]; t < sparse.ColPtr[j+1]; t++ {
						stats[a*m+int(sparse.RowIdx[t])] += sparse.Val[t]
					}
				}
			}
		}
		red := e.allReduce("init.kmeans.lloyd", 0, stats)
		if red[m*k+k] == 0 {
			break
		}
		for p := 0; p < k; p++ {
			if cnt := red[m*k+p]; cnt > 0 {
				for i := 0; i < m; i++ {
					centers[p*m+i] = red[p*m+i] / cnt
				}
			}
		}
	}
	for p := 0; p < k; p++ {
		cp := centers[p*m : (p+1)*m]
		cnorm[p] = dot(cp, cp)
	}
	c = makeFloats(k * n)
	for j0 := 0; j0 < n; j0 += spanK {
		e.flag.poll()
		for j, j1 := j0, min(j0+spanK, n); j < j1; j++ {
			a := nearest(j)
			if cnorm[a] > 0 {
				if w := dotCol(j, centers[a*m:(a+1)*m]) / cnorm[a]; w > 0 {
					c[j*k+a] = w
				}
			}
		}
	}
	return centers, c
}
