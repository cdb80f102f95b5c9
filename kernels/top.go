package kernels

// TopIndices returns the indices of the min(top, n) largest of the n values value(0) ...
// value(n-1), largest first, ties broken by the lower index; NaN ranks below every number.
// It keeps a sorted list of at most top indices, so it suits a small top (a basis
// component's top features).
func TopIndices(n, top int, value func(i int) float64) []int {
	top = max(0, min(top, n))
	better := func(a, b int) bool { // a ranks above b
		va, vb := value(a), value(b)
		return va > vb || (va == vb && a < b) || (vb != vb && (va == va || a < b))
	}
	idx := make([]int, 0, top+1)
	for f := 0; f < n && top > 0; f++ {
		if len(idx) == top && !better(f, idx[top-1]) {
			continue
		}
		pos := len(idx)
		for pos > 0 && better(f, idx[pos-1]) {
			pos--
		}
		idx = append(idx, 0)
		copy(idx[pos+1:], idx[pos:])
		idx[pos] = f
		if len(idx) > top {
			idx = idx[:top]
		}
	}
	return idx
}
