package kernels

import "slices"

// laneOrder is the order in which a pool hands out the lanes of x cut at bounds (lanes l =
// [bounds[l], bounds[l+1])) for a rank-k step: the heaviest lanes first, so that with lanes of
// unequal work the last one a worker starts is a short one (longest processing time first).
// A lane's work is its stored entries plus k per column (a column's coordinate update). Lanes
// are cut at equal columns whatever the layout (laneBounds: the same bits from a dense block
// and its CSC form), so a CSC block whose samples are sorted by size has lanes of very
// unequal work: handed out in index order to two workers, the heaviest came last and the step
// took 12% longer than balanced. The order is nil (index order, which reads memory in order)
// for a dense block and when every lane's work is within an eighth of the heaviest's. It never
// changes the bits: the lanes' sums are combined in index order.
func laneOrder(x Block, bounds []int, k int) []int {
	sp, ok := x.(*CSC)
	nl := len(bounds) - 1
	if !ok || nl < 2 || len(sp.ColPtr) != sp.Cols+1 || bounds[nl] > sp.Cols {
		return nil
	}
	work := make([]int, nl)
	lo, hi := -1, 0
	for l := range work {
		a, b := bounds[l], bounds[l+1]
		work[l] = sp.ColPtr[b] - sp.ColPtr[a] + (b-a)*k
		if lo < 0 || work[l] < lo {
			lo = work[l]
		}
		hi = max(hi, work[l])
	}
	if 8*(hi-lo) <= hi {
		return nil
	}
	order := make([]int, nl)
	for l := range order {
		order[l] = l
	}
	slices.SortStableFunc(order, func(a, b int) int { return work[b] - work[a] })
	return order
}
