package matio

import (
	"runtime"
	"testing"

	"github.com/didnmf/didnmf/kernels"
)

// allocated returns the bytes the process allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestBlockBuilderAllocatesAsDataArrives: a builder whose data never comes allocates nothing
// of the block's announced size (a client that announces a large block and sends nothing
// takes no memory of the node); as pieces come, its buffer grows to what they reach, never
// beyond the block's size, and the block it builds is the same.
func TestBlockBuilderAllocatesAsDataArrives(t *testing.T) {
	const rows, cols = 2000, 4000 // 64 MB dense
	const size = 8 * rows * cols
	const growth = 1 << 16 // values: the least the buffer grows by (minGrowth)
	for _, c := range []struct {
		name            string
		natural, layout Layout
	}{
		{"dense", LayoutDense, LayoutDense},
		{"dense wanted auto", LayoutDense, LayoutAuto},
		{"sparse wanted dense", LayoutSparse, LayoutDense},
		{"sparse", LayoutSparse, LayoutSparse},
	} {
		var b *BlockBuilder
		got := allocated(func() {
			var err error
			if b, err = NewBlockBuilder(rows, cols, c.natural, c.layout); err != nil {
				t.Fatal(err)
			}
		})
		if got > 1<<20 {
			t.Errorf("%s: NewBlockBuilder of a %d x %d block (%d bytes dense) allocated %d bytes before any data", c.name, rows, cols, size, got)
		}
		if now, _ := b.Bytes(); now > 1<<20 {
			t.Errorf("%s: Bytes() = %d before any data, want < 1 MiB", c.name, now)
		}
	}

	// Dense pieces in order: the buffer follows them, at most twice what came (or growth).
	b, err := NewBlockBuilder(rows, cols, LayoutDense, LayoutDense)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float64, rows*cols)
	for i := range want {
		want[i] = float64(i % 7)
	}
	const piece = 100_000
	for off := 0; off < len(want); off += piece {
		end := min(off+piece, len(want))
		if err := b.AddDense(off, want[off:end]); err != nil {
			t.Fatal(err)
		}
		now, final := b.Bytes()
		if final != size {
			t.Fatalf("after %d values: final %d, want %d", end, final, size)
		}
		if limit := 8 * int64(max(2*end, growth)); now > min(limit, size) {
			t.Fatalf("after %d values: the buffer holds %d bytes, want at most %d", end, now, min(limit, size))
		}
	}
	blk, err := b.Block()
	if err != nil {
		t.Fatal(err)
	}
	d := blk.(*kernels.Dense)
	if len(d.Data) != len(want) || cap(d.Data) != len(want) {
		t.Fatalf("block of %d values (cap %d), want %d", len(d.Data), cap(d.Data), len(want))
	}
	for i := range want {
		if d.Data[i] != want[i] {
			t.Fatalf("value %d: %v, want %v", i, d.Data[i], want[i])
		}
	}

	// The last piece first: the buffer reaches the block's size at once, and no further.
	b, _ = NewBlockBuilder(rows, cols, LayoutDense, LayoutDense)
	if err := b.AddDense(len(want)-piece, want[len(want)-piece:]); err != nil {
		t.Fatal(err)
	}
	if now, _ := b.Bytes(); now != size {
		t.Fatalf("after the last piece: %d bytes, want the block's %d", now, size)
	}
	if err := b.AddDense(0, want[:len(want)-piece]); err != nil {
		t.Fatal(err)
	}
	if blk, err := b.Block(); err != nil || cap(blk.(*kernels.Dense).Data) != len(want) {
		t.Fatalf("block: %v", err)
	}
}
