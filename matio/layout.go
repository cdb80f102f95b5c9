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
	// LayoutAutoPath is LayoutAuto at the crossing density of the kernel path this process
	// runs (SparseBelowOn): for the algorithms whose bits do not depend on the layout
	// (kernels.AlgorithmInfo.LayoutInvariant), which may take whichever form is faster here.
	// AutoFor gives it for them.
	LayoutAutoPath
)

// SparseBelow is the density (stored nonzeros / (rows*cols)) under which LayoutAuto returns a
// CSC block. The DID kernels' cost is flat in the density for dense blocks and proportional to
// it for sparse ones. With the AVX-512 column-lane kernels for dense blocks they cross near 0.2
// (784 x 70000, K = 10, float32 values, 2 cores: dense 15.4-19.2 ms an iteration at any
// density; CSC 16.1, 26.9, 35.8, 42.4 ms at densities 0.2, 0.3, 0.4, 0.5). On the AVX2 path
// dense costs about 2.5x more and the crossing moves near 0.6. 0.25 keeps CSC where it is about
// as fast on AVX-512 and needs half the memory (2 bytes a value against 4 for float32 dense).
// The layout is a property of the data, never of the machine: HALS, MU, ANLS and ADMM round
// differently on the two layouts, so a machine-dependent choice would change their bits.
var SparseBelow = 0.25

// SparseBelowNarrow is the crossing density of the AVX2 and pure-Go paths, whose dense kernels
// put the components, not the columns, in the vector lanes: on Fashion-MNIST (density 0.5, K =
// 10, 2 cores) their DID iteration takes 65-75 ms dense and 44-56 ms CSC on AVX2, 311 ms and
// 218-225 ms in pure Go (BENCHMARKS.md).
var SparseBelowNarrow = 0.6

// SparseBelowOn is the density under which CSC is the faster form of a block for DID-like
// kernels on a kernel path: SparseBelow with the AVX-512 column-lane kernels, SparseBelowNarrow
// otherwise.
func SparseBelowOn(p kernels.KernelPath) float64 {
	if p == kernels.KernelAVX512 {
		return SparseBelow
	}
	return SparseBelowNarrow
}

// AutoFor returns the layout to read a block in for algo when l was asked: LayoutAutoPath for
// LayoutAuto and an algorithm whose bits do not depend on the layout, else l.
func AutoFor(algo kernels.Algorithm, l Layout) Layout {
	if info, err := kernels.LookupAlgorithm(algo); err == nil && info.LayoutInvariant && l == LayoutAuto {
		return LayoutAutoPath
	}
	return l
}

// Crossing is the density under which l (LayoutAuto or LayoutAutoPath) picks CSC in this
// process: what Read would do with a block of that density.
func (l Layout) Crossing() float64 {
	if l == LayoutAutoPath {
		return SparseBelowOn(kernels.ActiveKernelPath())
	}
	return SparseBelow
}

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
	case LayoutAutoPath:
		return "auto"
	}
	return fmt.Sprintf("Layout(%d)", int(l))
}

func (l Layout) valid() bool { return l >= LayoutAuto && l <= LayoutAutoPath }

// auto reports whether l decides by density.
func (l Layout) auto() bool { return l == LayoutAuto || l == LayoutAutoPath }

// sparseEnough reports whether nnz stored entries in a rows x cols block are below l's
// crossing density.
func (l Layout) sparseEnough(nnz, rows, cols int) bool {
	total := float64(rows) * float64(cols)
	return total > 0 && float64(nnz) < l.Crossing()*total
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
	if layout.sparseEnough(nnz, d.Rows, d.Cols) {
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
	if layout.sparseEnough(s.NNZ(), s.Rows, s.Cols) {
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
	if !layout.valid() {
		layout = LayoutAuto
	}
	if s, ok := b.(*kernels.CSC); ok {
		return shapeSparse(s, layout)
	}
	return shapeDense(kernels.ToDense(b), layout)
}
