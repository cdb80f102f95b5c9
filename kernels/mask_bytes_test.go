package kernels

import (
	"runtime"
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

// heapInUse returns the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
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
		before := heapInUse()
		sm := scanMask(x, 0, o, true, nil)
		if rowView(c.algo) {
			sm.byRow()
		}
		var ucol []int32
		if c.algo == DID {
			ucol = make([]int32, len(sm.urow)) // newDIDMasked's column of each entry
		}
		after := heapInUse()
		entries := uint64(len(sm.urow))
		if entries < uint64(0.09*m*n) || entries > uint64(0.11*m*n) {
			t.Fatalf("%s: %d unobserved entries of %d, want about %v of them", c.name, entries, m*n, frac)
		}
		kept := after - before
		bound := MaskEntryBytes*entries + blockBytes
		t.Logf("%s: %d entries, %d bytes kept (%.1f an entry, X_o a copy: %v), bound %d", c.name, entries, kept,
			float64(kept)/float64(entries), sm.x != Block(x), bound)
		if kept > bound {
			t.Errorf("%s: the shard mask keeps %d bytes, more than MaskEntryBytes (%d) x %d entries + the block (%d)",
				c.name, kept, MaskEntryBytes, entries, blockBytes)
		}
		runtime.KeepAlive(sm)
		runtime.KeepAlive(ucol)
	}
}
