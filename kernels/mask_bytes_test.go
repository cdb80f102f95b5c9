package kernels

import (
	"reflect"
	"testing"
)

// sparseCounts returns an m x n CSC block with about density of its entries stored, each a
// small positive count.
func sparseCounts(m, n int, density float64, seed uint64) *CSC {
	r := NewRNG(seed, 0, 0)
	x := &CSC{Rows: m, Cols: n, ColPtr: make([]int, n+1)}
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			if r.Float64() < density {
				x.RowIdx = append(x.RowIdx, int32(i))
				x.Val = append(x.Val, float64(1+int(4*r.Float64())))
			}
		}
		x.ColPtr[j+1] = len(x.RowIdx)
	}
	return x
}

// reachableBytes returns the bytes of the arrays, maps' entries and pointed-to values that v
// reaches (the struct's own header not counted), each array once. It measures what a value
// keeps alive exactly, whatever else the process allocates or frees meanwhile (the live heap
// read before and after is not: CI saw it fall by 47 MB around this test).
func reachableBytes(v any) uint64 {
	seen := map[uintptr]bool{}
	var walk func(reflect.Value) uint64
	walk = func(v reflect.Value) uint64 {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if v.IsNil() {
				return 0
			}
			if v.Kind() == reflect.Interface {
				return walk(v.Elem())
			}
			if seen[v.Pointer()] {
				return 0
			}
			seen[v.Pointer()] = true
			return uint64(v.Type().Elem().Size()) + walk(v.Elem())
		case reflect.Slice:
			if v.Cap() == 0 || seen[v.Pointer()] {
				return 0
			}
			seen[v.Pointer()] = true
			n := uint64(v.Cap()) * uint64(v.Type().Elem().Size())
			for i := 0; i < v.Len() && hasPointers(v.Type().Elem()); i++ {
				n += walk(v.Index(i))
			}
			return n
		case reflect.Struct:
			var n uint64
			for i := 0; i < v.NumField(); i++ {
				n += walk(v.Field(i))
			}
			return n
		case reflect.Array:
			var n uint64
			for i := 0; i < v.Len() && hasPointers(v.Type().Elem()); i++ {
				n += walk(v.Index(i))
			}
			return n
		case reflect.Map:
			var n uint64
			it := v.MapRange()
			for it.Next() {
				n += uint64(it.Key().Type().Size()+it.Value().Type().Size()) + walk(it.Key()) + walk(it.Value())
			}
			return n
		case reflect.String:
			return uint64(v.Len())
		}
		return 0
	}
	return walk(reflect.ValueOf(v))
}

// hasPointers reports whether values of t can reach other memory.
func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Slice, reflect.Map, reflect.String, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return hasPointers(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// TestShardMaskBytes measures the heap a shard mask keeps on a sparse count block at the
// density (2%) and test fraction (10%) of a large single-cell sweep, with and without the row
// lists, plus DID's per-entry column index, and checks that MaskEntryBytes per unobserved
// entry plus a copy of the block (X_o) bounds it, as jobspec's HeldOutFootprint assumes.
func TestShardMaskBytes(t *testing.T) {
	const m, n, density, frac = 20000, 200, 0.02, 0.1
	x := sparseCounts(m, n, density, 3)
	blockBytes := uint64(len(x.RowIdx)*12 + 8*len(x.ColPtr))
	o := Options{TestFraction: frac, TestSeed: 9}
	for _, c := range []struct {
		name string
		algo Algorithm
	}{{"did", DID}, {"bcd", BCD}} {
		sm := scanMask(x, 0, o, true, false, nil)
		if rowView(c.algo) {
			sm.byRow()
		}
		var ucol []int32
		if c.algo == DID {
			ucol = make([]int32, len(sm.urow)) // newDIDMasked's column of each entry
		}
		entries := uint64(len(sm.urow))
		if entries < uint64(0.09*m*n) || entries > uint64(0.11*m*n) {
			t.Fatalf("%s: %d unobserved entries of %d, want about %v of them", c.name, entries, m*n, frac)
		}
		// What the shard keeps: the mask (with X_o) and DID's column index; the block itself is
		// the shard's already, so it is not counted when X_o is the block.
		kept := reachableBytes(sm) + uint64(4*cap(ucol))
		if sm.x == Block(x) {
			kept -= reachableBytes(x)
		}
		bound := MaskEntryBytes*entries + blockBytes
		t.Logf("%s: %d entries, %d bytes kept (%.1f an entry, X_o a copy: %v), bound %d", c.name, entries, kept,
			float64(kept)/float64(entries), sm.x != Block(x), bound)
		if kept > bound {
			t.Errorf("%s: the shard mask keeps %d bytes, more than MaskEntryBytes (%d) x %d entries + the block (%d)",
				c.name, kept, MaskEntryBytes, entries, blockBytes)
		}
	}
}
