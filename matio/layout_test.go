package matio

import (
	"testing"

	"github.com/didnmf/didnmf/kernels"
)

// TestLayoutAutoPath: an algorithm whose bits do not depend on the layout reads its blocks in
// the form fastest on the kernel path (a half-full block is dense with the AVX-512 column
// kernels, CSC on AVX2 and in pure Go); the others keep the data-only choice on every path.
func TestLayoutAutoPath(t *testing.T) {
	defer kernels.SetKernelPath(kernels.KernelAuto)
	// 10 x 20, every other entry nonzero: density 0.5.
	half := &kernels.Dense{Rows: 10, Cols: 20, Data: make([]float64, 200)}
	for i := range half.Data {
		if i%2 == 0 {
			half.Data[i] = float64(i + 1)
		}
	}
	if got := AutoFor(kernels.DID, LayoutAuto); got != LayoutAutoPath {
		t.Errorf("AutoFor(did, auto) = %v, want LayoutAutoPath", got)
	}
	for _, tt := range []struct {
		algo kernels.Algorithm
		in   Layout
		want Layout
	}{{kernels.HALS, LayoutAuto, LayoutAuto}, {kernels.DID, LayoutDense, LayoutDense}, {kernels.DID, LayoutSparse, LayoutSparse}, {"nosuch", LayoutAuto, LayoutAuto}} {
		if got := AutoFor(tt.algo, tt.in); got != tt.want {
			t.Errorf("AutoFor(%s, %v) = %v, want %v", tt.algo, tt.in, got, tt.want)
		}
	}
	for _, p := range kernels.AvailableKernelPaths() {
		if err := kernels.SetKernelPath(p); err != nil {
			t.Fatal(err)
		}
		_, pathCSC := Shape(half, LayoutAutoPath).(*kernels.CSC)
		if want := p != kernels.KernelAVX512; pathCSC != want {
			t.Errorf("%s: LayoutAutoPath gives CSC %v for density 0.5, want %v", p, pathCSC, want)
		}
		if _, dataCSC := Shape(half, LayoutAuto).(*kernels.CSC); dataCSC {
			t.Errorf("%s: LayoutAuto gives CSC for density 0.5 (SparseBelow %g): the data-only choice moved", p, SparseBelow)
		}
		if !sameData(denseData(Shape(half, LayoutAutoPath)), half.Data) {
			t.Errorf("%s: the values changed", p)
		}
	}
}
