package matio

import (
	"os"
	"sort"

	"github.com/didnmf/didnmf/kernels"
)

// mtxSource holds a parsed MatrixMarket file: an array file as a dense X, a coordinate file as
// X in CSC form with pointers for its nonempty columns only (so that a header claiming
// billions of empty samples costs nothing).
type mtxSource struct {
	name   string
	n, m   int
	closed bool
	dense  *kernels.Dense // array files
	// coordinate files: the entries of sample cols[t] are val[ptr[t]:ptr[t+1]] at features
	// row[ptr[t]:ptr[t+1]], increasing.
	cols []int32
	ptr  []int
	row  []int32
	val  []float64
	// sawNaN records that the file holds a missing value (read with ReadOptions.Missing).
	sawNaN bool
	// storage is ReadOptions.Storage: Read narrows blocks to float32 when asked and exact.
	storage kernels.Storage
}

// newMTXSparse builds the source from entries sorted by (sample, feature) without duplicates;
// explicit zeros are dropped, and NaN entries (missing values) kept.
func newMTXSparse(name string, n, m int, entries []mtxEntry) *mtxSource {
	nz := 0
	for _, e := range entries {
		if e.v != 0 {
			nz++
		}
	}
	s := &mtxSource{name: name, n: n, m: m, ptr: []int{0},
		row: make([]int32, 0, nz), val: make([]float64, 0, nz)}
	for _, e := range entries {
		if e.v == 0 {
			continue
		}
		if len(s.cols) == 0 || s.cols[len(s.cols)-1] != e.s {
			if len(s.cols) > 0 {
				s.ptr = append(s.ptr, len(s.row))
			}
			s.cols = append(s.cols, e.s)
		}
		s.row = append(s.row, e.f)
		s.val = append(s.val, e.v)
	}
	if len(s.cols) > 0 {
		s.ptr = append(s.ptr, len(s.row))
	}
	return s
}

func (s *mtxSource) Name() string  { return s.name }
func (s *mtxSource) Samples() int  { return s.n }
func (s *mtxSource) Features() int { return s.m }

func (s *mtxSource) Close() error {
	s.closed = true
	s.dense, s.cols, s.ptr, s.row, s.val = nil, nil, nil, nil, nil
	return nil
}

func (s *mtxSource) Read(lo, hi int, layout Layout) (kernels.Block, error) {
	if err := checkRead(s.name, s.n, lo, hi, layout); err != nil {
		return nil, err
	}
	if s.closed {
		return nil, ioError(s.name, "read error", os.ErrClosed)
	}
	if s.dense != nil {
		d, err := newDense(s.name, s.m, hi-lo)
		if err != nil {
			return nil, err
		}
		copy(d.Data, s.dense.Data[lo*s.m:hi*s.m])
		return s.narrow(shapeDense(d, layout)), nil
	}
	a := sort.Search(len(s.cols), func(t int) bool { return int(s.cols[t]) >= lo })
	b := sort.Search(len(s.cols), func(t int) bool { return int(s.cols[t]) >= hi })
	p0, p1 := s.ptr[a], s.ptr[a]
	if b > a {
		p1 = s.ptr[b]
	}
	c := &kernels.CSC{Rows: s.m, Cols: hi - lo, ColPtr: make([]int, hi-lo+1),
		RowIdx: append([]int32(nil), s.row[p0:p1]...), Val: append([]float64(nil), s.val[p0:p1]...)}
	for t := a; t < b; t++ {
		c.ColPtr[int(s.cols[t])-lo+1] = s.ptr[t+1] - p0
	}
	for j := 1; j <= c.Cols; j++ {
		c.ColPtr[j] = max(c.ColPtr[j], c.ColPtr[j-1])
	}
	if layout == LayoutDense || layout.auto() && !layout.sparseEnough(c.NNZ(), c.Rows, c.Cols) {
		if err := denseFits(s.name, s.m, hi-lo); err != nil {
			return nil, err
		}
	}
	if wantNarrow(ReadOptions{Storage: s.storage}) {
		narrowCSC(c)
		return shapeStored(s.name, c, layout)
	}
	return shapeSparse(c, layout), nil
}

// narrow returns b stored as float32 when ReadOptions.Storage asked for it and every value
// allows.
func (s *mtxSource) narrow(b kernels.Block) kernels.Block {
	if wantNarrow(ReadOptions{Storage: s.storage}) {
		if n, err := kernels.Narrow(b); err == nil {
			return n
		}
	}
	return b
}
