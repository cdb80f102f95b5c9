package kernels

// Roofline is the memory-bound floor of one shard step: it streams every stored entry of X
// once and reads and writes C once (copying src to dst), on the same lanes and pool the
// kernels use. The time it takes is what "roofline_sec" means in didnmf's benchmarks.
func Roofline(x Block, k int, src, dst []float64, pool *Pool) float64 {
	lanes := laneBounds(x, k)
	sums := make([]float64, len(lanes)-1)
	pool.Run(len(sums), func(l int) {
		lo, hi := lanes[l], lanes[l+1]
		var s float64
		switch xb := x.(type) {
		case *Dense:
			s = sum(xb.Data[lo*xb.Rows : hi*xb.Rows])
		case *CSC:
			s = sum(xb.Val[xb.ColPtr[lo]:xb.ColPtr[hi]])
			for t := xb.ColPtr[lo]; t < xb.ColPtr[hi]; t++ {
				s += float64(xb.RowIdx[t])
			}
		}
		copy(dst[lo*k:hi*k], src[lo*k:hi*k])
		sums[l] = s
	})
	var total float64
	for _, s := range sums {
		total += s
	}
	return total
}
