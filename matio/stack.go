package matio

import (
	"errors"
	"math"
	"strings"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/usererr"
)

// OpenAll opens several specs and stacks their matrices as rows (samples), in order. All must
// have the same number of features. One spec gives that source itself. It opens files with
// [OpenInput], which never blocks: it is [OpenAllWith] with [OpenInput]. [OpenAllWithOptions]
// opens every spec with [ReadOptions] (to read NaN entries as missing values).
func OpenAll(specs []string) (Source, error) {
	return OpenAllWith(OpenInput, specs)
}

// OpenAllWith is [OpenAll] with every file opened by open (see [OpenWith]).
func OpenAllWith(open Opener, specs []string) (Source, error) {
	if open == nil {
		return nil, errors.New("matio: OpenAllWith: nil Opener")
	}
	return openAll(open, specs, ReadOptions{})
}

// openAll opens and stacks specs with a non-nil opener, every one with opts.
func openAll(open Opener, specs []string, opts ReadOptions) (Source, error) {
	if len(specs) == 0 {
		return nil, usererr.New("matio: no input given", nil)
	}
	srcs := make([]Source, 0, len(specs))
	fail := func(err error) (Source, error) {
		for _, s := range srcs {
			s.Close()
		}
		return nil, err
	}
	offs := []int{0}
	for _, spec := range specs {
		s, err := openSpec(open, spec, opts)
		if err != nil {
			return fail(err)
		}
		srcs = append(srcs, s)
		if s.Features() != srcs[0].Features() {
			return fail(inputErrorf(s.Name(), "has %d features (columns) but %s has %d; stacked inputs need the same number",
				s.Features(), srcs[0].Name(), srcs[0].Features()))
		}
		last := offs[len(offs)-1]
		if s.Samples() > math.MaxInt-last {
			return fail(inputErrorf(s.Name(), "too many samples in total"))
		}
		offs = append(offs, last+s.Samples())
	}
	if len(srcs) == 1 {
		return opts.Transform.Apply(srcs[0]), nil
	}
	names := make([]string, len(srcs))
	for i, s := range srcs {
		names[i] = s.Name()
	}
	return opts.Transform.Apply(&stackSource{name: strings.Join(names, " + "), srcs: srcs, offs: offs}), nil
}

// stackSource stacks sources as rows: source i holds samples [offs[i], offs[i+1]).
type stackSource struct {
	name string
	srcs []Source
	offs []int
}

func (s *stackSource) Name() string  { return s.name }
func (s *stackSource) Samples() int  { return s.offs[len(s.offs)-1] }
func (s *stackSource) Features() int { return s.srcs[0].Features() }

func (s *stackSource) Close() error {
	var errs []error
	for _, src := range s.srcs {
		errs = append(errs, src.Close())
	}
	return errors.Join(errs...)
}

func (s *stackSource) Read(lo, hi int, layout Layout) (kernels.Block, error) {
	if err := checkRead(s.name, s.Samples(), lo, hi, layout); err != nil {
		return nil, err
	}
	var parts []kernels.Block
	sparse := false
	for i, src := range s.srcs {
		a, b := max(lo, s.offs[i]), min(hi, s.offs[i+1])
		if a >= b {
			continue
		}
		blk, err := src.Read(a-s.offs[i], b-s.offs[i], layout)
		if err != nil {
			return nil, err
		}
		_, isCSC := blk.(*kernels.CSC)
		sparse = sparse || isCSC
		parts = append(parts, blk)
	}
	return joinBlocks(s.name, s.Features(), hi-lo, parts, layout)
}

// joinBlocks puts side by side parts, blocks of m rows holding n columns in all, each as a
// Source's Read returns it, and returns the result in layout: a CSC block when any part is
// one, else a dense one, decided again by density for the auto layouts. Parts all stored as
// float32 give a block stored as float32; otherwise every part is taken as float64.
func joinBlocks(name string, m, n int, parts []kernels.Block, layout Layout) (kernels.Block, error) {
	if len(parts) == 1 {
		return parts[0], nil
	}
	narrow, sparse := true, false
	for _, p := range parts {
		narrow = narrow && kernels.IsNarrow(p)
		_, isCSC := p.(*kernels.CSC)
		sparse = sparse || isCSC
	}
	if !narrow {
		for i, p := range parts {
			parts[i] = kernels.Widen(p)
		}
	}
	if !sparse {
		if err := denseFits(name, m, n); err != nil {
			return nil, err
		}
		d := &kernels.Dense{Rows: m, Cols: n}
		if narrow {
			d.Data32 = make([]float32, 0, m*n)
			for _, p := range parts {
				d.Data32 = append(d.Data32, p.(*kernels.Dense).Data32...)
			}
		} else {
			d.Data = make([]float64, 0, m*n)
			for _, p := range parts {
				d.Data = append(d.Data, p.(*kernels.Dense).Data...)
			}
		}
		return shapeAny(name, d, layout)
	}
	c := &kernels.CSC{Rows: m, Cols: n, ColPtr: make([]int, 1, n+1)}
	for _, p := range parts {
		pc := kernels.ToCSC(p)
		a, b := pc.ColPtr[0], pc.ColPtr[pc.Cols]
		base := len(c.RowIdx) - a
		c.RowIdx = append(c.RowIdx, pc.RowIdx[a:b]...)
		if narrow {
			c.Val32 = append(c.Val32, pc.Val32[a:b]...)
		} else {
			c.Val = append(c.Val, pc.Val[a:b]...)
		}
		for _, q := range pc.ColPtr[1:] {
			c.ColPtr = append(c.ColPtr, base+q)
		}
	}
	if narrow && c.Val32 == nil {
		c.Val32 = []float32{}
	}
	return shapeAny(name, c, layout)
}

// shapeAny is [Shape] for blocks stored as float32 as well as float64, keeping the storage,
// and checking that a dense result can be addressed.
func shapeAny(name string, b kernels.Block, layout Layout) (kernels.Block, error) {
	if c, ok := b.(*kernels.CSC); ok {
		return shapeStored(name, c, layout)
	}
	d := b.(*kernels.Dense)
	if !kernels.IsNarrow(d) {
		return shapeDense(d, layout), nil
	}
	switch layout {
	case LayoutDense:
		return d, nil
	case LayoutSparse:
		return kernels.ToCSC(d), nil
	}
	nnz := 0
	for _, v := range d.Data32 {
		if v != 0 {
			nnz++
		}
	}
	if layout.sparseEnough(nnz, d.Rows, d.Cols) {
		return kernels.ToCSC(d), nil
	}
	return d, nil
}
