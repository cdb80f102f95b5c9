package matio

import (
	"fmt"

	"github.com/didnmf/didnmf/kernels"
)

// Layout chooses the in-memory form of a block returned by [Source.Read].
type Layout int

// The layouts.
const (
	// LayoutAuto picks CSC when the block's density is below SparseBelow, dense otherwise.
	LayoutAuto Layout = iota
	// LayoutDense always returns a *kernels.Dense.
	LayoutDense
	// LayoutSparse always returns a *kernels.CSC, with explicit zeros dropped.
	LayoutSparse
)

// SparseBelow is the density (stored nonzeros / (rows*cols)) under which LayoutAuto returns a
// CSC block. The DID kernels' cost is flat in the density for dense blocks and proportional to
// it for sparse ones; on a 784 x 30000 block with K = 10 they cross near 0.7 (dense 68 ms;
// sparse 23, 41, 57, 75 ms at densities 0.2, 0.4, 0.6, 0.8), and CSC's 12 bytes per stored
// entry match dense storage there too.
var SparseBelow = 0.7

// ParseLayout parses "auto", "dense" or "sparse".
func ParseLayout(s string) (Layout, error) {
	switch s {
	case "auto":
		return LayoutAuto, nil
	case "dense":
		return LayoutDense, nil
	case "sparse":
		return LayoutSparse, nil
	}
	return 0, fmt.Errorf("unknown layout %q (want auto, dense or sparse)", s)
}

// String returns the name ParseLayout accepts.
func (l Layout) String() string {
	switch l {
	case LayoutAuto:
		return "auto"
	case LayoutDense:
		return "dense"
	case LayoutSparse:
		return "sparse"
	}
	return fmt.Sprintf("Layout(%d)", int(l))
}

func (l Layout) valid() bool { return l >= LayoutAuto && l <= LayoutSparse }

// sparseEnough reports whether nnz stored entries in a rows x cols block are below SparseBelow.
func sparseEnough(nnz, rows, cols int) bool {
	total := float64(rows) * float64(cols)
	return total > 0 && float64(nnz) < SparseBelow*total
}

// shapeDense returns d in the requested layout.
func shapeDense(d *kernels.Dense, layout Layout) kernels.Block {
	switch layout {
	case LayoutDense:
		return d
	case LayoutSparse:
		return kernels.ToCSC(d)
	}
	nnz := 0
	for _, v := range d.Data {
		if v != 0 {
			nnz++
		}
	}
	if sparseEnough(nnz, d.Rows, d.Cols) {
		return kernels.ToCSC(d)
	}
	return d
}

// shapeSparse returns s in the requested layout.
func shapeSparse(s *kernels.CSC, layout Layout) kernels.Block {
	switch layout {
	case LayoutSparse:
		return s
	case LayoutDense:
		return kernels.ToDense(s)
	}
	if sparseEnough(s.NNZ(), s.Rows, s.Cols) {
		return s
	}
	return kernels.ToDense(s)
}

// Shape returns b, a *kernels.Dense or a *kernels.CSC, in the requested layout, deciding
// LayoutAuto by density (nonzeros / (rows*cols) below [SparseBelow] gives CSC) exactly as
// [Source.Read] does; an unknown layout is taken as LayoutAuto. It returns b itself when b is
// already in that form, else a new block. A CSC block is expected as Read returns it, without
// explicit zeros (they would count as nonzeros). Converting to dense allocates rows*cols
// values, and a nil b gives nil.
//
// For every source src, Shape(src.Read(lo, hi, NaturalLayout(src)), layout) is the same block,
// bit for bit, as src.Read(lo, hi, layout).
func Shape(b kernels.Block, layout Layout) kernels.Block {
	if b == nil {
		return nil
	}
	if s, ok := b.(*kernels.CSC); ok {
		return shapeSparse(s, layout)
	}
	return shapeDense(kernels.ToDense(b), layout)
}
