package matio

// naturalLayouter is implemented by the sources of this package: naturalLayout returns the
// layout the source holds or reads cheaply, LayoutDense or LayoutSparse.
type naturalLayouter interface {
	naturalLayout() Layout
}

var (
	_ naturalLayouter = (*npySource)(nil)
	_ naturalLayouter = (*idxSource)(nil)
	_ naturalLayouter = (*mtxSource)(nil)
	_ naturalLayouter = (*syntheticSource)(nil)
	_ naturalLayouter = (*stackSource)(nil)
	_ naturalLayouter = (*npzSource)(nil)
	_ naturalLayouter = (*storeSource)(nil)
)

// NaturalLayout returns the layout src holds or reads cheaply: LayoutSparse for a
// MatrixMarket coordinate file, an .npz, a 10x directory, a block store with an .npz block,
// and a stack (see [OpenAll]) with at least one such part; LayoutDense for everything else
// (.npy, IDX, MatrixMarket array, synthetic; also a Source from outside this package).
//
// It is the layout to move a block in: for any range, Shape(src.Read(lo, hi,
// NaturalLayout(src)), layout) is bit for bit src.Read(lo, hi, layout), and reading [lo, hi)
// in pieces in the natural layout gives the same columns as reading it whole, so a block can
// be streamed in chunks and put together with a [BlockBuilder].
func NaturalLayout(src Source) Layout {
	if n, ok := src.(naturalLayouter); ok {
		return n.naturalLayout()
	}
	return LayoutDense
}

func (s *npySource) naturalLayout() Layout       { return LayoutDense }
func (s *idxSource) naturalLayout() Layout       { return LayoutDense }
func (s *syntheticSource) naturalLayout() Layout { return LayoutDense }

// naturalLayout is dense for an array file and sparse for a coordinate file. A closed source
// has neither; it says sparse, and Read fails anyway.
func (s *mtxSource) naturalLayout() Layout {
	if s.dense != nil {
		return LayoutDense
	}
	return LayoutSparse
}

// naturalLayout is sparse when any part is: a dense part converts cheaply to CSC, while a
// sparse part read dense costs rows*cols.
func (s *stackSource) naturalLayout() Layout {
	for _, src := range s.srcs {
		if NaturalLayout(src) == LayoutSparse {
			return LayoutSparse
		}
	}
	return LayoutDense
}

// StoredEntries returns the number of entries src stores, when it knows without reading
// (MatrixMarket coordinate files and 10x directories, CSR .npz files (as stored, before
// explicit zeros are dropped and duplicates summed), and stacks whose sparse parts do, dense
// parts counting rows*cols): it lets a scheduler estimate a sparse block's memory. ok is false
// otherwise (a block store, whose blocks are opened only when read).
func StoredEntries(src Source) (n int64, ok bool) {
	switch s := src.(type) {
	case *npzSource:
		return s.nnz, true
	case *mtxSource:
		if s.dense != nil {
			return int64(s.n) * int64(s.m), true
		}
		return int64(len(s.val)), true
	case sqrtSource:
		return StoredEntries(s.Source)
	case *stackSource:
		for _, part := range s.srcs {
			k, ok := StoredEntries(part)
			if !ok {
				if NaturalLayout(part) != LayoutDense {
					return 0, false
				}
				k = int64(part.Samples()) * int64(part.Features())
			}
			n += k
		}
		return n, true
	}
	return 0, false
}
