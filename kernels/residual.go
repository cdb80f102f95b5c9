package kernels

// ResidualSq returns ||X - B C||_F^2 for a block X (M x n), B (M x K column-major) and
// C (K x n column-major), computed directly from each column's residual x_j - B c_j, not from
// Gram identities: it is the accurate figure reported to users. Lanes run on pool (nil runs
// inline) and are added in lane order.
func ResidualSq(x Block, b, c []float64, k int, pool *Pool) float64 {
	return residualSq(x, b, c, k, pool, nil)
}

// residualSq is ResidualSq looking at a machine's interrupt flag between blocks of columns.
func residualSq(x Block, b, c []float64, k int, pool *Pool, flag *interruptFlag) float64 {
	m, _ := x.Dims()
	lanes := laneBounds(x, k)
	dense, _ := x.(*Dense)
	if dense != nil && dense.Data == nil {
		dense = nil // float32 storage: columnInto widens
	}
	sums := make([]float64, len(lanes)-1)
	span := flag.span(m*k+m, 1)
	run := func(l int) {
		e := make([]float64, m)
		var s float64
		for j0 := lanes[l]; j0 < lanes[l+1]; j0 += span {
			if flag.stopped() {
				return
			}
			for j, j1 := j0, min(j0+span, lanes[l+1]); j < j1; j++ {
				if dense != nil { // see residualCols for why the dense case avoids the call
					copy(e, dense.Data[j*m:(j+1)*m])
				} else {
					columnInto(x, j, e)
				}
				s += residualNorm(e, b, c[j*k:(j+1)*k], m)
			}
		}
		sums[l] = s
	}
	if pool == nil {
		for l := range sums {
			run(l)
		}
	} else {
		pool.Run(len(sums), run)
	}
	flag.poll()
	var total float64
	for _, s := range sums {
		total += s
	}
	return total
}

// residualNorm returns ||e - B c||^2 for e = x_j (overwritten with the residual).
func residualNorm(e, b, cj []float64, m int) float64 {
	for p, cp := range cj {
		if cp != 0 {
			axpy(e, -cp, b[p*m:(p+1)*m])
		}
	}
	return dot(e, e)
}
