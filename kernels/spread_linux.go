package kernels

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// linuxPlacer places threads with getcpu and sched_setaffinity. Its calls are raw system
// calls: none of them blocks, and package syscall's bookkeeping would wake Go's monitor
// thread (see internal/rawio).
type linuxPlacer struct{}

func systemPlacer() cpuPlacer { return linuxPlacer{} }

func (linuxPlacer) currentCPU() int {
	var cpu uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0); e != 0 {
		return -1
	}
	return int(cpu)
}

func (linuxPlacer) moveTo(s *spreader, w int) int {
	var allowed unix.CPUSet
	if unix.SchedGetaffinity(0, &allowed) != nil {
		return -1
	}
	for cpu, left := 0, allowed.Count(); left > 0; cpu++ {
		if !allowed.IsSet(cpu) {
			continue
		}
		left--
		if s.busy(w, cpu) {
			continue
		}
		var one unix.CPUSet
		one.Set(cpu)
		// Setting the calling thread's affinity to one CPU moves it there before the call
		// returns; restoring the set leaves it there, free to move again.
		if unix.SchedSetaffinity(0, &one) != nil {
			return -1
		}
		// Should this fail, the thread stays on that one CPU: still within its allowed set.
		_ = unix.SchedSetaffinity(0, &allowed)
		return cpu
	}
	return -1
}
