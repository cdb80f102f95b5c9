package kernels

import "fmt"

// Block is a column block of the data matrix X: a *Dense or a *CSC.
type Block interface {
	// Dims returns the number of rows (features, M) and columns (samples) of the block.
	Dims() (rows, cols int)
	// NNZ returns the number of stored entries (rows*cols for a dense block).
	NNZ() int
	// SqNorm returns the squared Frobenius norm of the block.
	SqNorm() float64
	// Sum returns the sum of all entries.
	Sum() float64
	// ColSlice returns columns [lo, hi) as a block that shares storage with this one.
	ColSlice(lo, hi int) Block
}

// Dense is a dense M x N block stored column-major: column j is Data[j*Rows : (j+1)*Rows].
// A block stored as float32 (see Storage) has Data nil and its values in Data32 instead.
type Dense struct {
	Rows, Cols int
	Data       []float64
	Data32     []float32
}

// NewDense allocates a zero M x N dense block.
func NewDense(rows, cols int) *Dense {
	return &Dense{Rows: rows, Cols: cols, Data: makeFloats(rows * cols)}
}

// Dims implements Block.
func (d *Dense) Dims() (int, int) { return d.Rows, d.Cols }

// NNZ implements Block.
func (d *Dense) NNZ() int { return d.Rows * d.Cols }

// Col returns column j, sharing storage. It panics on a block stored as float32; columnInto
// reads either.
func (d *Dense) Col(j int) []float64 { return d.Data[j*d.Rows : (j+1)*d.Rows] }

// At returns the entry in row i, column j.
func (d *Dense) At(i, j int) float64 {
	if d.Data == nil {
		return float64(d.Data32[j*d.Rows+i])
	}
	return d.Data[j*d.Rows+i]
}

// SqNorm implements Block.
func (d *Dense) SqNorm() float64 {
	if d.Data == nil {
		return sqNorm32(d.Data32)
	}
	return sqNorm(d.Data)
}

// Sum implements Block.
func (d *Dense) Sum() float64 {
	if d.Data == nil {
		return sum32(d.Data32)
	}
	return sum(d.Data)
}

// ColSlice implements Block.
func (d *Dense) ColSlice(lo, hi int) Block {
	if d.Data == nil && d.Data32 != nil {
		return &Dense{Rows: d.Rows, Cols: hi - lo, Data32: d.Data32[lo*d.Rows : hi*d.Rows]}
	}
	return &Dense{Rows: d.Rows, Cols: hi - lo, Data: d.Data[lo*d.Rows : hi*d.Rows]}
}

// CSC is a sparse M x N block in compressed sparse column form: the entries of column j are
// Val[ColPtr[j]:ColPtr[j+1]] in rows RowIdx[ColPtr[j]:ColPtr[j+1]], rows strictly increasing.
// ColPtr[0] need not be zero, so that column slices share storage. A block stored as float32
// (see Storage) has Val nil and its values in Val32 instead, at the same indices.
type CSC struct {
	Rows, Cols int
	ColPtr     []int
	RowIdx     []int32
	Val        []float64
	Val32      []float32
}

// Dims implements Block.
func (s *CSC) Dims() (int, int) { return s.Rows, s.Cols }

// NNZ implements Block.
func (s *CSC) NNZ() int { return s.ColPtr[s.Cols] - s.ColPtr[0] }

// SqNorm implements Block.
func (s *CSC) SqNorm() float64 {
	if s.Val == nil {
		return sqNorm32(s.Val32[s.ColPtr[0]:s.ColPtr[s.Cols]])
	}
	return sqNorm(s.Val[s.ColPtr[0]:s.ColPtr[s.Cols]])
}

// Sum implements Block.
func (s *CSC) Sum() float64 {
	if s.Val == nil {
		return sum32(s.Val32[s.ColPtr[0]:s.ColPtr[s.Cols]])
	}
	return sum(s.Val[s.ColPtr[0]:s.ColPtr[s.Cols]])
}

// ColSlice implements Block.
func (s *CSC) ColSlice(lo, hi int) Block {
	return &CSC{Rows: s.Rows, Cols: hi - lo, ColPtr: s.ColPtr[lo : hi+1], RowIdx: s.RowIdx, Val: s.Val, Val32: s.Val32}
}

// value returns stored entry t as float64.
func (s *CSC) value(t int) float64 {
	if s.Val == nil {
		return float64(s.Val32[t])
	}
	return s.Val[t]
}

// values returns the number of stored values (the length of Val or Val32).
func (s *CSC) values() int {
	if s.Val == nil {
		return len(s.Val32)
	}
	return len(s.Val)
}

// Validate checks the structural invariants of a CSC block: monotone column pointers, row
// indices in range and strictly increasing within a column.
func (s *CSC) Validate() error {
	if len(s.ColPtr) != s.Cols+1 {
		return fmt.Errorf("csc: %d column pointers for %d columns", len(s.ColPtr), s.Cols)
	}
	for j := 0; j < s.Cols; j++ {
		lo, hi := s.ColPtr[j], s.ColPtr[j+1]
		if lo > hi || lo < 0 || hi > len(s.RowIdx) || hi > s.values() {
			return fmt.Errorf("csc: column %d has bad pointers [%d, %d)", j, lo, hi)
		}
		prev := int32(-1)
		for p := lo; p < hi; p++ {
			r := s.RowIdx[p]
			if r <= prev || int(r) >= s.Rows {
				return fmt.Errorf("csc: column %d: row index %d out of order or range", j, r)
			}
			prev = r
		}
	}
	return nil
}

// ToDense returns the block as a dense block stored as float64 (a copy for CSC or float32
// storage, the block itself for a float64 Dense).
func ToDense(b Block) *Dense {
	switch x := b.(type) {
	case *Dense:
		return Widen(x).(*Dense)
	case *CSC:
		d := NewDense(x.Rows, x.Cols)
		for j := 0; j < x.Cols; j++ {
			col := d.Col(j)
			for p := x.ColPtr[j]; p < x.ColPtr[j+1]; p++ {
				col[x.RowIdx[p]] = x.value(p)
			}
		}
		return d
	}
	panic(fmt.Sprintf("kernels: unknown block type %T", b))
}

// ToCSC returns the block in CSC form, dropping explicit zeros of a dense block. A dense
// block stored as float32 gives a CSC block stored as float32.
func ToCSC(b Block) *CSC {
	switch x := b.(type) {
	case *CSC:
		return x
	case *Dense:
		if IsNarrow(x) {
			n, _ := Narrow(ToCSC(Widen(x)))
			return n.(*CSC)
		}
		nnz := 0
		for _, v := range x.Data {
			if v != 0 {
				nnz++
			}
		}
		s := &CSC{Rows: x.Rows, Cols: x.Cols, ColPtr: make([]int, x.Cols+1),
			RowIdx: make([]int32, 0, nnz), Val: make([]float64, 0, nnz)}
		for j := 0; j < x.Cols; j++ {
			for i, v := range x.Col(j) {
				if v != 0 {
					s.RowIdx = append(s.RowIdx, int32(i))
					s.Val = append(s.Val, v)
				}
			}
			s.ColPtr[j+1] = len(s.Val)
		}
		return s
	}
	panic(fmt.Sprintf("kernels: unknown block type %T", b))
}

// columnInto writes column j of x into dst (length rows) as a dense vector.
func columnInto(x Block, j int, dst []float64) {
	switch xb := x.(type) {
	case *Dense:
		if xb.Data == nil {
			widen(dst[:xb.Rows], xb.Data32[j*xb.Rows:(j+1)*xb.Rows])
			return
		}
		copy(dst, xb.Col(j))
	case *CSC:
		clear64(dst)
		for t := xb.ColPtr[j]; t < xb.ColPtr[j+1]; t++ {
			dst[xb.RowIdx[t]] = xb.value(t)
		}
	default:
		panic(fmt.Sprintf("kernels: unknown block type %T", x))
	}
}

// sqNorm is the sum of squares, in dot's order (bitwise dot(x, x)).
func sqNorm(x []float64) float64 { return dot(x, x) }

// sqNorm32 is sqNorm of the widened values, in the same order (so the same bits).
func sqNorm32(x []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v0, v1, v2, v3 := float64(x[i]), float64(x[i+1]), float64(x[i+2]), float64(x[i+3])
		s0 += float64(v0 * v0)
		s1 += float64(v1 * v1)
		s2 += float64(v2 * v2)
		s3 += float64(v3 * v3)
	}
	for ; i < len(x); i++ {
		v := float64(x[i])
		s0 += float64(v * v)
	}
	return (s0 + s1) + (s2 + s3)
}

// sum32 is sum of the widened values, in the same order.
func sum32(x []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += float64(x[i])
		s1 += float64(x[i+1])
		s2 += float64(x[i+2])
		s3 += float64(x[i+3])
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i])
	}
	return (s0 + s1) + (s2 + s3)
}

func sum(x []float64) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i]
		s1 += x[i+1]
		s2 += x[i+2]
		s3 += x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// Transpose returns the transpose of a column-major rows x cols matrix, column-major
// (cols x rows). Read the other way, it turns a row-major rows x cols matrix (a .npy file)
// into column-major: Transpose(a, cols, rows).
func Transpose(a []float64, rows, cols int) []float64 {
	out := make([]float64, len(a))
	for p := 0; p < cols; p++ {
		for i := 0; i < rows; i++ {
			out[i*cols+p] = a[p*rows+i]
		}
	}
	return out
}

// ColumnRanges splits n columns into p contiguous ranges of near-equal size; the first n%p
// ranges get one column more. Range s is [r[s], r[s+1]).
func ColumnRanges(n, p int) []int {
	r := make([]int, p+1)
	q, rem := n/p, n%p
	for s := 0; s < p; s++ {
		w := q
		if s < rem {
			w++
		}
		r[s+1] = r[s] + w
	}
	return r
}
