package kernels

import (
	"math"
	"time"

	"gonum.org/v1/gonum/mat"
)

// NNDSVD (Boutsidis & Gallopoulos 2008) from a randomized SVD of X (Halko, Martinsson & Tropp
// 2011) that runs over all shards: a sketch X Omega with K+10 columns, four power iterations,
// then the small SVD of Q^T X. Each product over the samples is one allreduce; Omega's column j
// comes from (seed, DomainSketch, j), so the result does not depend on the shard layout except
// through round-off.

const (
	svdOversample = 10
	svdPowerIters = 4
	nndsvdEps     = 1e-6 // entries below this are zeroed, as scikit-learn does
)

func (e *shardEnv) initNNDSVD(fillMean bool) (b, c []float64) {
	x, m, n, k := e.spec.X, e.rows, e.cols, e.k
	l := min(k+svdOversample, m, e.spec.TotalCols)
	ops := newBlockOps(x, l, e.spec.Pool, e.flag, e.gram())
	omega := make([]float64, l*n)
	span := e.flag.span(normWork*l, 1)
	for j0 := 0; j0 < n; j0 += span {
		e.flag.poll()
		for j, j1 := j0, min(j0+span, n); j < j1; j++ {
			r := NewRNG(e.spec.Seed, DomainSketch, uint64(e.spec.ColOffset+j))
			for p := 0; p < l; p++ {
				omega[j*l+p] = r.Norm()
			}
		}
	}
	y := make([]float64, m*l)
	ops.xct(omega, y)
	q := orthonormalize(e.allReduce("init.svd.sketch", 0, y), m, l, e.flag)
	t := omega // reuse: l x n
	for it := 0; it < svdPowerIters; it++ {
		ops.btx(q, t)
		ops.xct(t, y)
		q = orthonormalize(e.allReduce("init.svd.power", 0, y), m, l, e.flag)
	}
	ops.btx(q, t) // T = Q^T X, l x n
	s := make([]float64, l*l)
	ops.cct(t, s)
	packed := make([]float64, lowerLen(l))
	packLower(packed, s, l)
	unpackLower(s, e.allReduce("init.svd.small", 0, packed), l)

	vals, vecs := eigSym(s, l, e.flag) // ascending
	sigma := make([]float64, k)
	us := make([]float64, l*k) // column p: eigenvector of the p-th largest eigenvalue
	for p := 0; p < k; p++ {
		idx := l - 1 - p
		sigma[p] = math.Sqrt(math.Max(vals[idx], 0))
		for r := 0; r < l; r++ {
			us[p*l+r] = vecs.At(r, idx)
		}
	}
	// U = Q Us (M x K); V_i = T^T Us / sigma (n x K, stored K x n like C).
	u := make([]float64, m*k)
	for p := 0; p < k; p++ {
		e.flag.poll()
		for r := 0; r < l; r++ {
			if w := us[p*l+r]; w != 0 {
				axpy(u[p*m:(p+1)*m], w, q[r*m:(r+1)*m])
			}
		}
	}
	v := make([]float64, k*n)
	span = e.flag.span(k*l, 1)
	for j0 := 0; j0 < n; j0 += span {
		e.flag.poll()
		for j, j1 := j0, min(j0+span, n); j < j1; j++ {
			tj := t[j*l : (j+1)*l]
			for p := 0; p < k; p++ {
				if sigma[p] > 0 {
					v[j*k+p] = dot(tj, us[p*l:(p+1)*l]) / sigma[p]
				}
			}
		}
	}
	// Global norms of the positive and negative parts of each right vector, and the data sum.
	norms := make([]float64, 2*k+2)
	for j := 0; j < n; j++ {
		for p := 0; p < k; p++ {
			if w := v[j*k+p]; w > 0 {
				norms[2*p] += float64(w * w)
			} else {
				norms[2*p+1] += float64(w * w)
			}
		}
	}
	norms[2*k] = x.Sum()
	norms[2*k+1] = float64(m) * float64(n)
	norms = e.allReduce("init.svd.norms", 0, norms)

	b = make([]float64, m*k)
	c = makeFloats(k * n)
	for p := 0; p < k; p++ {
		e.flag.poll()
		up := u[p*m : (p+1)*m]
		bp := b[p*m : (p+1)*m]
		if p == 0 {
			f := math.Sqrt(sigma[0])
			for i, w := range up {
				bp[i] = f * math.Abs(w)
			}
			for j := 0; j < n; j++ {
				c[j*k] = f * math.Abs(v[j*k])
			}
			continue
		}
		var xp, xn float64
		for _, w := range up {
			if w > 0 {
				xp += float64(w * w)
			} else {
				xn += float64(w * w)
			}
		}
		xp, xn = math.Sqrt(xp), math.Sqrt(xn)
		yp, yn := math.Sqrt(norms[2*p]), math.Sqrt(norms[2*p+1])
		sign, xs, ys, mag := 1.0, xp, yp, xp*yp
		if xn*yn > mag {
			sign, xs, ys, mag = -1, xn, yn, xn*yn
		}
		if !(mag > 0) {
			continue
		}
		lbd := math.Sqrt(sigma[p] * mag)
		for i, w := range up {
			if w *= sign; w > 0 {
				bp[i] = lbd * w / xs
			}
		}
		for j := 0; j < n; j++ {
			if w := sign * v[j*k+p]; w > 0 {
				c[j*k+p] = lbd * w / ys
			}
		}
	}
	fill := 0.0
	if fillMean {
		fill = norms[2*k] / norms[2*k+1]
	}
	for _, f := range [][]float64{b, c} {
		for i, w := range f {
			if w < nndsvdEps {
				f[i] = fill
			}
		}
	}
	return b, c
}

// eigBackground is the size from which eigSym runs the decomposition on its own goroutine
// (gonum takes about 20 ms at 256, 1 s at 1000, half a minute at 3000).
const eigBackground = 256

// eigSym returns the eigenvalues (ascending) and eigenvectors of the symmetric l x l matrix s.
// gonum's decomposition cannot be interrupted, so for a large l it runs on its own goroutine
// while this one polls the interrupt flag every 10 ms: an interrupted machine stops at once,
// and the decomposition finishes in the background (at most that half minute, on one core) and
// is dropped.
func eigSym(s []float64, l int, flag *interruptFlag) ([]float64, *mat.Dense) {
	type result struct {
		vals  []float64
		vecs  *mat.Dense
		panic any // a panic of the decomposition, passed on to the machine's goroutine
	}
	run := func() result {
		var eig mat.EigenSym
		if !eig.Factorize(mat.NewSymDense(l, s), true) {
			return result{}
		}
		r := result{vals: eig.Values(nil), vecs: new(mat.Dense)}
		eig.VectorsTo(r.vecs)
		return r
	}
	var r result
	if flag == nil || l < eigBackground {
		r = run()
	} else {
		done := make(chan result, 1) // the goroutine never blocks, even if nobody waits
		go func() {
			defer func() {
				if p := recover(); p != nil {
					done <- result{panic: p}
				}
			}()
			done <- run()
		}()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
	wait:
		for {
			select {
			case r = <-done:
				break wait
			case <-tick.C:
				flag.poll()
			}
		}
	}
	if r.panic != nil {
		panic(r.panic)
	}
	if r.vecs == nil {
		panic("nndsvd: eigendecomposition of the sketch failed")
	}
	return r.vals, r.vecs
}

// orthonormalize returns an orthonormal basis of the columns of the column-major m x l matrix
// a (modified Gram-Schmidt, twice). Columns that are numerically dependent become zero. It
// polls flag before each column.
func orthonormalize(a []float64, m, l int, flag *interruptFlag) []float64 {
	q := append([]float64(nil), a...)
	for p := 0; p < l; p++ {
		flag.poll()
		qp := q[p*m : (p+1)*m]
		before := math.Sqrt(dot(qp, qp))
		for pass := 0; pass < 2; pass++ {
			for r := 0; r < p; r++ {
				qr := q[r*m : (r+1)*m]
				if d := dot(qr, qp); d != 0 {
					axpy(qp, -d, qr)
				}
			}
		}
		nrm := math.Sqrt(dot(qp, qp))
		if !(nrm > 1e-12*before) || nrm == 0 {
			clear64(qp)
			continue
		}
		for i := range qp {
			qp[i] /= nrm
		}
	}
	return q
}
