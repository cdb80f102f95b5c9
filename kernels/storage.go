package kernels

import (
	"fmt"
	"math"
	"strings"
)

// Storage selects how a block stores the values of X. The arithmetic is float64 whatever the
// storage: a float32 value widens to float64 exactly, so a block stored as float32 gives
// bitwise the factors of the same block stored as float64, with half the memory and half the
// bytes to stream per iteration.
type Storage uint8

const (
	// StorageAsIs keeps a block as it was given (the zero value: library callers that hold
	// the block themselves decide its storage).
	StorageAsIs Storage = iota
	// StorageAuto stores values as float32 when every one of them is exactly a float32
	// (counts, pixels, most real data), as float64 otherwise.
	StorageAuto
	// StorageFloat64 stores values as float64.
	StorageFloat64
	// StorageFloat32 stores values as float32 and refuses data that float32 cannot hold
	// exactly.
	StorageFloat32
)

var storageNames = [...]string{StorageAsIs: "as-is", StorageAuto: "auto", StorageFloat64: "float64", StorageFloat32: "float32"}

func (s Storage) String() string {
	if int(s) < len(storageNames) {
		return storageNames[s]
	}
	return fmt.Sprintf("Storage(%d)", uint8(s))
}

// ParseStorage reads a storage name: auto, float64 or float32.
func ParseStorage(s string) (Storage, error) {
	for i, name := range storageNames {
		if i != int(StorageAsIs) && strings.EqualFold(s, name) {
			return Storage(i), nil
		}
	}
	return 0, fmt.Errorf("unknown storage %q (known: auto, float64, float32)", s)
}

// InexactError reports the first value of a block that float32 cannot hold exactly.
type InexactError struct {
	// Col and Row locate the value in the block (a sample and a feature).
	Col, Row int
	Value    float64
}

func (e *InexactError) Error() string {
	return fmt.Sprintf("sample %d, feature %d: value %v is not exactly a float32 (float32 would store %v); use --storage float64 or auto",
		e.Col, e.Row, e.Value, float64(float32(e.Value)))
}

// IsNarrow reports whether b stores its values as float32.
func IsNarrow(b Block) bool {
	switch x := b.(type) {
	case *Dense:
		return x.Data == nil && x.Data32 != nil
	case *CSC:
		return x.Val == nil && x.Val32 != nil
	}
	return false
}

// exact32 reports whether v survives a round trip through float32.
func exact32(v float64) bool {
	return float64(float32(v)) == v || math.IsNaN(v)
}

// Narrow returns b with its values stored as float32 (b itself when it already is), or an
// *InexactError naming the first value that float32 cannot hold exactly.
func Narrow(b Block) (Block, error) {
	if IsNarrow(b) {
		return b, nil
	}
	switch x := b.(type) {
	case *Dense:
		d := &Dense{Rows: x.Rows, Cols: x.Cols, Data32: make([]float32, len(x.Data))}
		for i, v := range x.Data {
			if !exact32(v) {
				return nil, &InexactError{Col: i / max(x.Rows, 1), Row: i % max(x.Rows, 1), Value: v}
			}
			d.Data32[i] = float32(v)
		}
		return d, nil
	case *CSC:
		lo, hi := x.ColPtr[0], x.ColPtr[x.Cols]
		s := &CSC{Rows: x.Rows, Cols: x.Cols, ColPtr: x.ColPtr, RowIdx: x.RowIdx, Val32: make([]float32, hi)}
		for j := 0; j < x.Cols; j++ {
			for t := x.ColPtr[j]; t < x.ColPtr[j+1]; t++ {
				if v := x.Val[t]; !exact32(v) {
					return nil, &InexactError{Col: j, Row: int(x.RowIdx[t]), Value: v}
				}
			}
		}
		narrowInto(s.Val32[lo:hi], x.Val[lo:hi])
		return s, nil
	}
	return nil, fmt.Errorf("kernels: unknown block type %T", b)
}

// narrowInto stores src (exact float32 values) into dst.
func narrowInto(dst []float32, src []float64) {
	for i, v := range src[:len(dst)] {
		dst[i] = float32(v)
	}
}

// Widen returns b with its values stored as float64 (b itself when it already is).
func Widen(b Block) Block {
	if !IsNarrow(b) {
		return b
	}
	switch x := b.(type) {
	case *Dense:
		d := NewDense(x.Rows, x.Cols)
		widen(d.Data, x.Data32)
		return d
	case *CSC:
		lo, hi := x.ColPtr[0], x.ColPtr[x.Cols]
		s := &CSC{Rows: x.Rows, Cols: x.Cols, ColPtr: x.ColPtr, RowIdx: x.RowIdx, Val: make([]float64, hi)}
		widen(s.Val[lo:hi], x.Val32[lo:hi])
		return s
	}
	return b
}

// ApplyStorage returns b stored as s asks: StorageFloat32 narrows it or fails with an
// *InexactError, StorageAuto narrows it when every value allows, StorageFloat64 widens it,
// StorageAsIs returns it.
func ApplyStorage(b Block, s Storage) (Block, error) {
	switch s {
	case StorageAsIs:
		return b, nil
	case StorageFloat64:
		return Widen(b), nil
	case StorageFloat32:
		return Narrow(b)
	case StorageAuto:
		if n, err := Narrow(b); err == nil {
			return n, nil
		}
		return b, nil
	}
	return nil, fmt.Errorf("unknown storage %v", s)
}

// ValueBytes returns the bytes one stored value of b takes: 4 or 8.
func ValueBytes(b Block) int {
	if IsNarrow(b) {
		return 4
	}
	return 8
}

// denseBatch returns the values of columns [j0, j1) of x as float64: a view of x's storage, or
// for float32 storage their widened copy in scratch (grown when too short; the caller keeps it).
func denseBatch(x *Dense, j0, j1 int, scratch *[]float64) []float64 {
	m := x.Rows
	if x.Data != nil {
		return x.Data[j0*m : j1*m]
	}
	n := (j1 - j0) * m
	if len(*scratch) < n {
		*scratch = make([]float64, n)
	}
	widen((*scratch)[:n], x.Data32[j0*m:j1*m])
	return (*scratch)[:n]
}

// sparseBatch returns columns [j0, j1) of x as column pointers into rows and vals (float64):
// views of x's storage, or for float32 storage pointers rebased into cp and the values widened
// into scratch (both grown when too short).
func sparseBatch(x *CSC, j0, j1 int, cp *[]int, scratch *[]float64) (colptr []int, rows []int32, vals []float64) {
	if x.Val != nil {
		return x.ColPtr[j0 : j1+1], x.RowIdx, x.Val
	}
	base, end := x.ColPtr[j0], x.ColPtr[j1]
	if len(*cp) < j1-j0+1 {
		*cp = make([]int, j1-j0+1)
	}
	colptr = (*cp)[:j1-j0+1]
	for i := range colptr {
		colptr[i] = x.ColPtr[j0+i] - base
	}
	if len(*scratch) < end-base {
		*scratch = make([]float64, end-base)
	}
	vals = (*scratch)[:end-base]
	widen(vals, x.Val32[base:end])
	return colptr, x.RowIdx[base:end], vals
}

// widenGo converts float32 values to float64 (exactly).
func widenGo(dst []float64, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = float64(v)
	}
}

// StoredAs describes how blocks store X: float32, float64 or mixed (auto storage narrows each
// block on its own), and the bytes their values and indices take.
func StoredAs(blocks []Block) (string, int64) {
	narrow, bytes := 0, int64(0)
	for _, b := range blocks {
		if IsNarrow(b) {
			narrow++
		}
		bytes += int64(ValueBytes(b)) * int64(b.NNZ())
		if _, sparse := b.(*CSC); sparse {
			_, cols := b.Dims()
			bytes += 4*int64(b.NNZ()) + 8*int64(cols+1)
		}
	}
	switch narrow {
	case 0:
		return "float64", bytes
	case len(blocks):
		return "float32", bytes
	}
	return "mixed", bytes
}
