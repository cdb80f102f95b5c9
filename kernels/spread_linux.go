package kernels

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// linuxPlacer places threads with getcpu and sched_setaffinity, as raw system calls: package
// syscall's bookkeeping (handing the P to another thread) would wake Go's monitor thread (see
// internal/rawio), and none of the calls waits for long. A sched_setaffinity that moves the
// thread returns once it runs on its new CPU; the P stays held meanwhile, so a stop-the-world
// may wait that long.
//
// unix.CPUSet holds CPUs 0-1023: on a kernel built for more, sched_getaffinity refuses it and
// the placer never moves a thread.
type linuxPlacer struct{}

func systemPlacer() cpuPlacer { return linuxPlacer{} }

func (linuxPlacer) currentCPU() int {
	var cpu uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0); e != 0 {
		return -1
	}
	return int(cpu)
}

func (linuxPlacer) allowedCPUs() int {
	var allowed unix.CPUSet
	if unix.SchedGetaffinity(0, &allowed) != nil {
		return 0
	}
	return allowed.Count()
}

func (linuxPlacer) moveTo(s *spreader, w int) int {
	// The mask is the thread's, and Go may move a goroutine between threads at any call or
	// preemption: from reading the mask to restoring it, the goroutine must stay on its thread,
	// or another thread would get the restore and this one keep a single CPU for good.
	runtime.LockOSThread()
	var allowed unix.CPUSet
	if unix.SchedGetaffinity(0, &allowed) != nil {
		runtime.UnlockOSThread()
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
			runtime.UnlockOSThread()
			return -1
		}
		if unix.SchedSetaffinity(0, &allowed) != nil {
			// The thread stays on one CPU (of its allowed set). Keep this goroutine on it, so
			// that no other goroutine inherits the mask, and move no worker again.
			s.disabled.Store(true)
			return cpu
		}
		runtime.UnlockOSThread()
		return cpu
	}
	runtime.UnlockOSThread()
	return -1
}
