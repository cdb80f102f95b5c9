package kernels

import (
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"unsafe"
)

// Linux's madvise advice values.
const (
	madvHugepage   = 14 // MADV_HUGEPAGE
	madvNoHugepage = 15 // MADV_NOHUGEPAGE
)

// thpOnRequest reports whether the kernel gives transparent huge pages to the memory a process
// asks them for, and only to it ("madvise" mode): in "always" mode every large range gets them
// without advice, and in "never" mode advice does nothing.
var thpOnRequest = sync.OnceValue(func() bool {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return err == nil && strings.Contains(string(mode), "[madvise]")
})

// hugeRange is the 2 MB-aligned part [addr, addr+size) of a slice that was advised.
type hugeRange struct{ addr, size uintptr }

// adviseHuge asks the kernel to back the 2 MB-aligned pages inside s, a fresh allocation from
// make, with huge pages, and to stop when s's array dies: a cleanup then advises the range
// MADV_NOHUGEPAGE, which in "madvise" mode is the default behaviour and keeps the kernel's
// collapser off the memory the heap reuses. It is advice: an error (an old kernel) leaves
// ordinary pages. Memory that make returned already touched (reused from the heap) is already
// backed and stays as it is.
func adviseHuge(s []float64) {
	const huge = 2 << 20
	if len(s) == 0 || !thpOnRequest() {
		return
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	hi := lo + uintptr(len(s))*8
	a, b := (lo+huge-1)&^(huge-1), hi&^(huge-1)
	if b <= a {
		return
	}
	if madvise(a, b-a, madvHugepage) != nil {
		return
	}
	runtime.AddCleanup(unsafe.SliceData(s), func(r hugeRange) { _ = madvise(r.addr, r.size, madvNoHugepage) }, hugeRange{a, b - a})
}

// madvise calls madvise(2) on [addr, addr+size).
func madvise(addr, size uintptr, advice int) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, addr, size, uintptr(advice)); errno != 0 {
		return errno
	}
	return nil
}
