package kernels

// The held-out set of Options.TestFraction is built from row patterns: pattern l (0 <= l <
// HeldOutPatterns) holds out feature i when the i-th uniform draw of the random stream (seed,
// DomainHeldOut, l) is below the fraction, and sample j takes pattern HeldOutPattern(seed, j),
// the top byte of the first draw of (seed, DomainHeldOutPattern, j). Each sample holds out
// its pattern's features and each feature is held out of the samples of the patterns that
// hold it: about the fraction of every row and column, as an entry-by-entry hash would, but
// the samples of a pattern share their held-out rows, so that a fit can treat them together:
// masked DID without missing values (didheld.go) corrects the Gram matrix of B once per
// pattern instead of once per held-out entry and the row sums of its B step once per pattern
// instead of once per held-out column, and keeps no list of held-out zeros. The held-out
// blocks (a pattern's samples by its features) are Owen and Perry's bi-cross-validation
// blocks, scattered.

// HeldOutPatterns is the number of row patterns of a held-out set.
const HeldOutPatterns = 256

// HeldOutPattern returns the pattern of sample j under the test seed: a function of (seed, j)
// alone.
func HeldOutPattern(seed uint64, sample int) int {
	r := NewRNG(seed, DomainHeldOutPattern, uint64(sample))
	return int(r.Uint64() >> 56)
}

// heldOutSet is the row patterns of a held-out set over M features.
type heldOutSet struct {
	// rows[l] are pattern l's features, increasing.
	rows [HeldOutPatterns][]int32
	// of[i] are the patterns that hold feature i out, increasing.
	ofPtr []int
	of    []uint8
	// bits has feature i's patterns as a set: bit l of the heldOutWords words from
	// i*heldOutWords is set when pattern l holds feature i out.
	bits []uint64
}

// heldOutWords is the words of heldOutSet.bits per feature.
const heldOutWords = HeldOutPatterns / 64

// holds reports whether pattern l holds feature i out (false for a row outside 0..M-1).
func (h *heldOutSet) holds(l, i int) bool {
	w := i*heldOutWords + l>>6
	return uint(i) < uint(len(h.ofPtr)-1) && h.bits[w]>>(l&63)&1 != 0
}

// newHeldOutSet draws the patterns of fraction frac over m features (M HeldOutPatterns
// draws).
func newHeldOutSet(seed uint64, frac float64, m int) *heldOutSet {
	h := &heldOutSet{ofPtr: make([]int, m+1), bits: make([]uint64, m*heldOutWords)}
	for l := range h.rows {
		r := NewRNG(seed, DomainHeldOut, uint64(l))
		for i := 0; i < m; i++ {
			if r.Float64() < frac {
				h.rows[l] = append(h.rows[l], int32(i))
				h.ofPtr[i+1]++
				h.bits[i*heldOutWords+l>>6] |= 1 << (l & 63)
			}
		}
	}
	for i := 0; i < m; i++ {
		h.ofPtr[i+1] += h.ofPtr[i]
	}
	h.of = make([]uint8, h.ofPtr[m])
	next := append([]int(nil), h.ofPtr[:m]...)
	for l := range h.rows {
		for _, i := range h.rows[l] {
			h.of[next[i]] = uint8(l)
			next[i]++
		}
	}
	return h
}

// patternsOf returns the patterns that hold feature i out, increasing.
func (h *heldOutSet) patternsOf(i int) []uint8 { return h.of[h.ofPtr[i]:h.ofPtr[i+1]] }

// heldImplicit reports whether a shard keeps its held-out entries implicit (shardMask.held):
// DID with a test set and without missing values runs didheld.go's algorithm, which needs
// only the stored held-out entries; every other masked run keeps each unobserved entry.
func heldImplicit(s ShardSpec) bool {
	return s.Algo == DID && s.Options.TestFraction > 0 && !s.Options.Missing
}

// HeldEntryBytes bounds the bytes a shard of DID with a held-out set and without missing
// values keeps per stored held-out entry: a row index and a value in its column lists, 12
// bytes, plus up to a quarter more of slack from growing them while the block is scanned. Its
// held-out zeros take none.
const HeldEntryBytes = 15

// HeldOutBytes bounds the bytes such a shard (m features, cols samples, stored entries in its
// block, rank k, test fraction frac) keeps for its held-out set beyond X_o, the block without
// its held-out entries: the stored held-out entries (HeldEntryBytes each), the patterns (4
// bytes per held-out feature of a pattern, 1 per pattern of a feature, 8 per feature), 17
// bytes per sample (its pattern, column pointer and squared norm), and didheld.go's work
// space: per column lane A in two layouts, At, the patterns' C C^T and the residual form's
// scratch; the B update's V_i and its accelerated sweeps' rows; the patterns' update forms;
// and the payload and its sum. TestHeldOutBytes measures it, with and without the options
// that add to it.
func HeldOutBytes(m, cols, stored int64, k int, frac float64) int64 {
	kk, kp := int64(k), int64(paddedK(k))
	ll := kk * (kk + 1) / 2
	lanes := int64(heldLaneCount(int(m), int(cols), k))
	entries := int64(HeldEntryBytes*frac*float64(stored)) + int64(5*frac*float64(m)*HeldOutPatterns) + 8*(m+1) + 8*heldOutWords*m + 17*(cols+1)
	work := lanes*(m*kk+2*m*kp+HeldOutPatterns*ll+2*gramBatchCols*kp+gramBatchCols*kk+kk*kp+m) + m*ll + 4*m*kk + m +
		HeldOutPatterns*(kk*kk+kk+2*ll) + 2*(2*m*kk+HeldOutPatterns*ll+8) + 3*m*kk + 4*m
	return entries + 8*work
}
