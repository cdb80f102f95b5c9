package kernels

import (
	"syscall"
	"unsafe"
)

// madvHugepage is Linux's MADV_HUGEPAGE.
const madvHugepage = 14

// adviseHuge asks the kernel to back the 2 MB-aligned pages inside s with huge pages. It is
// advice: an error (no THP, an old kernel) leaves ordinary pages. Memory that make returned
// already touched (reused from the heap) is already backed and stays as it is.
func adviseHuge(s []float64) {
	const huge = 2 << 20
	if len(s) == 0 {
		return
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	hi := lo + uintptr(len(s))*8
	a, b := (lo+huge-1)&^(huge-1), hi&^(huge-1)
	if b <= a {
		return
	}
	in := s[(a-lo)/8 : (b-lo)/8] // float64s are 8-aligned, so a-lo and b-lo are multiples of 8
	_ = syscall.Madvise(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(in))), 8*len(in)), madvHugepage)
}
