package cli

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// allowedCPUs returns the CPUs this process may run on.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, err
	}
	var cpus []int
	for c := 0; c <= maxCPU; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// pinToCPUs restricts every thread of the process to cpus, each of which it must be allowed
// to run on. Threads started later inherit the restriction from the thread that starts them.
func pinToCPUs(cpus []int) error {
	allowed, err := allowedCPUs()
	if err != nil {
		return err
	}
	ok := map[int]bool{}
	for _, c := range allowed {
		ok[c] = true
	}
	var set unix.CPUSet
	for _, c := range cpus {
		if !ok[c] {
			return fmt.Errorf("CPU %d is not one this process may run on (it may use CPUs %s)", c, cpuListString(allowed))
		}
		set.Set(c)
	}
	// A thread may start while the others are being pinned, from one not pinned yet: go over
	// the threads until a pass finds none new.
	pinned := map[int]bool{}
	for {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		fresh := 0
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || pinned[tid] {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
				return err
			}
			pinned[tid] = true
			fresh++
		}
		if fresh == 0 {
			return nil
		}
	}
}
