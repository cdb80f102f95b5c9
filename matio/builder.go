package matio

import (
	"errors"
	"fmt"
	"sort"

	"github.com/didnmf/didnmf/kernels"
)

// SampleRange is the range [Lo, Hi) of samples (columns of X).
type SampleRange struct {
	Lo, Hi int
}

// DenseChunks splits samples [lo, hi) of a source with rows features into consecutive ranges
// of max(1, maxValues/rows) samples each, the last one possibly shorter, so that a range holds
// at most maxValues values unless a single sample has more. A chunk read in the sparse layout
// stores at most as many entries as its dense form, so the ranges bound sparse chunks too.
//
// A dense range longer than maxValues (one sample with rows > maxValues) can be cut further
// into flat pieces of its column-major data: [BlockBuilder.AddDense] takes any piece at any
// offset. A sparse chunk cannot: [BlockBuilder.AddSparse] takes whole columns.
//
// An empty or invalid range (lo < 0 or hi <= lo) gives nil; rows <= 0 gives one range.
func DenseChunks(rows, lo, hi, maxValues int) []SampleRange {
	if lo < 0 || hi <= lo {
		return nil
	}
	n := hi - lo
	per := n
	if rows > 0 {
		per = max(1, maxValues/rows)
	}
	out := make([]SampleRange, 0, (n-1)/per+1)
	for a := lo; a < hi; {
		b := a + min(per, hi-a)
		out = append(out, SampleRange{Lo: a, Hi: b})
		a = b
	}
	return out
}

// span is a range [lo, hi) of flat offsets received by a dense BlockBuilder.
type span struct{ lo, hi int }

// BlockBuilder puts together a rows x cols block of X from chunks sent in the source's natural
// layout (see [NaturalLayout]) and returns it in the requested layout: fed with the chunks of
// src.Read(lo, hi, NaturalLayout(src)), Block returns the same block, bit for bit, as
// src.Read(lo, hi, layout).
//
// A dense builder takes flat pieces of the column-major data with AddDense, in any order, into
// one buffer that grows as pieces arrive (geometrically, up to the block's size, as far as the
// furthest piece received): a builder whose data never comes holds nothing of the block's
// size. A sparse one takes runs of whole columns with AddSparse, in order, appended to growing
// slices. Entries are validated as Read validates them. Errors do
// not wrap [usererr.ErrUser]: data from a Source was validated when read, so a bad chunk means a bad
// sender or a corrupted stream. A call that fails records nothing: the builder goes on as if
// it had not been made.
//
// A BlockBuilder is not safe for concurrent use.
type BlockBuilder struct {
	rows, cols      int
	natural, layout Layout
	missing         bool // a NaN value is a missing value (ReadOptions.Missing)
	received        int  // values (dense) or columns (sparse) received
	taken           bool // Block has handed the data over

	// dense
	data []float64 // the block's values up to the furthest piece received (cap <= rows*cols)
	got  []span    // received offsets: sorted, disjoint, not adjacent

	// sparse: a CSC block of the columns received so far
	colPtr []int
	rowIdx []int32
	val    []float64
}

// NewBlockBuilder returns a builder for a rows x cols block (rows features, cols samples) that
// arrives in the natural layout (LayoutDense or LayoutSparse) and is wanted in layout. It fails
// on negative sizes, rows above 2^31-1, an unknown layout, and a dense block (natural or
// wanted) too large to address. It allocates nothing of the block's size: a dense builder's
// buffer grows as pieces arrive. Its chunks must hold no NaN: it is [NewBlockBuilderWithOptions] with ReadOptions{}.
func NewBlockBuilder(rows, cols int, natural, layout Layout) (*BlockBuilder, error) {
	return newBlockBuilder("matio: NewBlockBuilder", rows, cols, natural, layout, ReadOptions{})
}

// NewBlockBuilderWithOptions is [NewBlockBuilder] for chunks read with opts: with
// opts.Missing, a NaN value is a missing value, stored as a NaN (an entry of a sparse block),
// as the Source opened with the same options reads it, instead of an error.
func NewBlockBuilderWithOptions(rows, cols int, natural, layout Layout, opts ReadOptions) (*BlockBuilder, error) {
	return newBlockBuilder("matio: NewBlockBuilderWithOptions", rows, cols, natural, layout, opts)
}

func newBlockBuilder(name string, rows, cols int, natural, layout Layout, opts ReadOptions) (*BlockBuilder, error) {
	if rows < 0 || cols < 0 {
		return nil, fmt.Errorf("%s: negative size %d x %d", name, rows, cols)
	}
	if rows > maxFeatures {
		return nil, fmt.Errorf("%s: %d rows: more than %d features", name, rows, maxFeatures)
	}
	if natural != LayoutDense && natural != LayoutSparse {
		return nil, fmt.Errorf("%s: natural layout %v is neither dense nor sparse", name, natural)
	}
	if !layout.valid() {
		return nil, fmt.Errorf("%s: unknown layout %d", name, int(layout))
	}
	if natural == LayoutDense || layout == LayoutDense {
		if err := denseFits(name, rows, cols); err != nil {
			return nil, err
		}
	}
	b := &BlockBuilder{rows: rows, cols: cols, natural: natural, layout: layout, missing: opts.Missing}
	if natural == LayoutSparse {
		b.colPtr = make([]int, 1, min(cols, minGrowth)+1)
	}
	return b, nil
}

// minGrowth is the least a dense builder's buffer grows by, in values (512 KiB), and the
// first capacity of a sparse builder's column pointers.
const minGrowth = 1 << 16

// grow makes the dense buffer reach end values (end <= rows*cols): its capacity at least
// doubles, up to the block's size, so that a block that arrives piece by piece is copied
// O(log) times.
func (b *BlockBuilder) grow(end int) {
	if end <= len(b.data) {
		return
	}
	if end <= cap(b.data) {
		b.data = b.data[:end]
		return
	}
	capacity := min(max(end, 2*cap(b.data), minGrowth), b.rows*b.cols)
	data := make([]float64, end, capacity)
	copy(data, b.data)
	b.data = data
}

// chunkError formats an error about a chunk.
func chunkError(format string, args ...any) error {
	return fmt.Errorf("matio: block chunk: "+format, args...)
}

// usable checks that the builder takes chunks of the given natural layout.
func (b *BlockBuilder) usable(natural Layout) error {
	if b.taken {
		return errors.New("matio: block chunk: the block was already taken")
	}
	if b.natural != natural {
		return chunkError("%v data for a builder of %v data", natural, b.natural)
	}
	return nil
}

// AddDense stores values as the piece of the block's column-major data (column j, row i at
// flat offset j*rows + i) that starts at offset. Pieces may have any length (a piece may hold
// part of a column, or end in the middle of one) and may come in any order, but must not
// overlap: a piece that overlaps data already received, a duplicate included, is an error and
// changes nothing. Negative zeros are stored as zeros, as Read stores them. It fails when the
// builder is sparse, the piece is outside the block, or a value is NaN (unless the builder
// reads NaN as missing: see [NewBlockBuilderWithOptions]), infinite or negative (the error
// names the value's sample, counted from the block's first, and its feature).
func (b *BlockBuilder) AddDense(offset int, values []float64) error {
	if err := b.usable(LayoutDense); err != nil {
		return err
	}
	total := b.rows * b.cols
	if offset < 0 || offset > total || len(values) > total-offset {
		return chunkError("values [%d, %d) outside the %d x %d block's [0, %d)", offset, offset+len(values), b.rows, b.cols, total)
	}
	end := offset + len(values)
	if offset == end {
		return nil
	}
	i := sort.Search(len(b.got), func(k int) bool { return b.got[k].hi > offset })
	if i < len(b.got) && b.got[i].lo < end {
		return chunkError("values [%d, %d) overlap values [%d, %d) already received",
			offset, end, max(offset, b.got[i].lo), min(end, b.got[i].hi))
	}
	b.grow(end)
	dst := b.data[offset:end]
	for k, v := range values {
		if isMissing(v, b.missing) {
			dst[k] = missingNaN
			continue
		}
		if what := badValue(v); what != "" {
			p := offset + k
			return chunkError("sample %d of the block, feature %d (0-based): %s %s", p/b.rows, p%b.rows, what, entryRule)
		}
		if v == 0 {
			v = 0 // a negative zero becomes zero
		}
		dst[k] = v
	}
	// Record [offset, end), merging it with the spans it touches.
	joinPrev := i > 0 && b.got[i-1].hi == offset
	joinNext := i < len(b.got) && b.got[i].lo == end
	switch {
	case joinPrev && joinNext:
		b.got[i-1].hi = b.got[i].hi
		b.got = append(b.got[:i], b.got[i+1:]...)
	case joinPrev:
		b.got[i-1].hi = end
	case joinNext:
		b.got[i].lo = offset
	default:
		b.got = append(b.got, span{})
		copy(b.got[i+1:], b.got[i:])
		b.got[i] = span{offset, end}
	}
	b.received += len(values)
	return nil
}

// AddSparse appends columns [colLo, colLo+len(colPtr)-1) in CSC form: the entries of column
// colLo+j are values[colPtr[j]:colPtr[j+1]] in rows rowIdx[colPtr[j]:colPtr[j+1]], with
// colPtr[0] == 0 and colPtr[len(colPtr)-1] == len(rowIdx) == len(values). Columns come in
// order, each exactly once: colLo must be the number of columns received so far. Rows must be
// in range and strictly increasing within a column, and values finite and nonnegative or, when
// the builder reads NaN as missing, NaN (errors name the sample, counted from the block's
// first, and the feature); explicit zeros are dropped, as Read drops them, and NaN entries
// kept. It fails when the builder is dense. A colPtr of length 1 adds nothing.
func (b *BlockBuilder) AddSparse(colLo int, colPtr []int64, rowIdx []int32, values []float64) error {
	if err := b.usable(LayoutSparse); err != nil {
		return err
	}
	if colLo != b.received {
		return chunkError("columns from %d, want column %d next (columns come in order)", colLo, b.received)
	}
	if len(colPtr) == 0 {
		return chunkError("no column pointers (want one more than the columns)")
	}
	n := len(colPtr) - 1
	if n > b.cols-colLo {
		return chunkError("columns [%d, %d) outside the block's %d columns", colLo, colLo+n, b.cols)
	}
	if len(rowIdx) != len(values) {
		return chunkError("%d row indices but %d values", len(rowIdx), len(values))
	}
	if colPtr[0] != 0 || colPtr[n] != int64(len(values)) {
		return chunkError("column pointers run from %d to %d, want 0 to %d", colPtr[0], colPtr[n], len(values))
	}
	for j := 0; j < n; j++ {
		if colPtr[j] > colPtr[j+1] {
			return chunkError("column %d of the block: pointers decrease (%d then %d)", colLo+j, colPtr[j], colPtr[j+1])
		}
	}
	// All pointers now lie in [0, len(values)]. Append, undoing it all on a bad entry.
	nptr, nval := len(b.colPtr), len(b.val)
	undo := func(err error) error {
		b.colPtr, b.rowIdx, b.val = b.colPtr[:nptr], b.rowIdx[:nval], b.val[:nval]
		return err
	}
	for j := 0; j < n; j++ {
		col := colLo + j
		prev := int32(-1)
		for p := colPtr[j]; p < colPtr[j+1]; p++ {
			r, v := rowIdx[p], values[p]
			if r < 0 || int(r) >= b.rows {
				return undo(chunkError("column %d of the block: row index %d out of range [0, %d)", col, r, b.rows))
			}
			if r <= prev {
				return undo(chunkError("column %d of the block: row index %d after %d (rows must increase)", col, r, prev))
			}
			prev = r
			if isMissing(v, b.missing) {
				v = missingNaN
			} else if what := badValue(v); what != "" {
				return undo(chunkError("sample %d of the block, feature %d (0-based): %s %s", col, r, what, entryRule))
			}
			if v == 0 {
				continue
			}
			b.rowIdx = append(b.rowIdx, r)
			b.val = append(b.val, v)
		}
		b.colPtr = append(b.colPtr, len(b.val))
	}
	b.received += n
	return nil
}

// Bytes returns the memory the block holds so far (dense: its buffer as allocated, as far as
// the pieces received reach; sparse: the storage of the entries and column pointers
// received), and the memory of the block Block would return once complete (a sparse block
// wanted dense is converted).
func (b *BlockBuilder) Bytes() (now, final int64) {
	if b.natural == LayoutDense {
		return 8 * int64(cap(b.data)), 8 * int64(b.rows) * int64(b.cols)
	}
	now = 8*int64(cap(b.val)) + 4*int64(cap(b.rowIdx)) + 8*int64(cap(b.colPtr)) // as allocated
	final = now
	if b.layout == LayoutDense || b.layout.auto() && !b.layout.sparseEnough(len(b.val), b.rows, b.cols) {
		final = 8 * int64(b.rows) * int64(b.cols)
	}
	return now, final
}

// Received returns how much has arrived: the number of values of a dense builder (out of
// rows*cols), the number of columns of a sparse one (out of cols).
func (b *BlockBuilder) Received() int { return b.received }

// Complete reports whether the whole block has arrived.
func (b *BlockBuilder) Complete() bool {
	if b.natural == LayoutDense {
		return b.received == b.rows*b.cols
	}
	return b.received == b.cols
}

// Block returns the assembled block in the builder's layout, as Shape(assembled, layout). It
// fails when the block is incomplete, when it was already taken, and when a sparse block
// wanted dense is too large to address. The block takes over the builder's storage: after a
// successful Block the builder accepts nothing more.
func (b *BlockBuilder) Block() (kernels.Block, error) {
	if b.taken {
		return nil, errors.New("matio: BlockBuilder.Block: the block was already taken")
	}
	if !b.Complete() {
		what, want := "values", b.rows*b.cols
		if b.natural == LayoutSparse {
			what, want = "columns", b.cols
		}
		return nil, fmt.Errorf("matio: BlockBuilder.Block: incomplete: %d of %d %s received", b.received, want, what)
	}
	var blk kernels.Block
	if b.natural == LayoutDense {
		blk = &kernels.Dense{Rows: b.rows, Cols: b.cols, Data: b.data}
	} else {
		c := &kernels.CSC{Rows: b.rows, Cols: b.cols, ColPtr: b.colPtr, RowIdx: b.rowIdx, Val: b.val}
		if b.layout.auto() && !b.layout.sparseEnough(c.NNZ(), c.Rows, c.Cols) {
			if err := denseFits("matio: BlockBuilder.Block", b.rows, b.cols); err != nil {
				return nil, err
			}
		}
		blk = c
	}
	b.taken = true
	b.data, b.got, b.colPtr, b.rowIdx, b.val = nil, nil, nil, nil, nil
	return Shape(blk, b.layout), nil
}
