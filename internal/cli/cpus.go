package cli

import (
	"fmt"
	"strconv"
	"strings"
)

// maxCPU bounds a CPU number in --cpus (Linux's CPU sets hold 1024).
const maxCPU = 1023

// parseCPUList parses a CPU list as taskset and /proc show them: CPU numbers and ranges,
// comma-separated ("0", "0-3", "0,2,4-7"), into sorted distinct CPU numbers.
func parseCPUList(s string) ([]int, error) {
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := cpuNumber(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = cpuNumber(hi); err != nil {
				return nil, err
			}
			if b < a {
				return nil, fmt.Errorf("range %q ends before it starts", part)
			}
		}
		for c := a; c <= b; c++ {
			seen[c] = true
		}
	}
	cpus := make([]int, 0, len(seen))
	for c := 0; c <= maxCPU; c++ {
		if seen[c] {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// cpuNumber parses one CPU number.
func cpuNumber(s string) (int, error) {
	c, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || c < 0 || c > maxCPU {
		return 0, fmt.Errorf("%q is not a CPU number (0-%d)", s, maxCPU)
	}
	return c, nil
}

// cpuListString writes CPU numbers back as a list ("0,2").
func cpuListString(cpus []int) string {
	parts := make([]string, len(cpus))
	for i, c := range cpus {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ",")
}

// shareCPUs shares the CPUs this process may run on out to n processes, in order: each gets
// len/n of them (at least one), the i-th from CPU i*len/n on, wrapping when there are more
// processes than CPUs.
func shareCPUs(n int) ([][]int, error) {
	all, err := allowedCPUs()
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("no CPU to share")
	}
	return shareOut(all, n), nil
}

// shareOut shares cpus out to n processes as shareCPUs does.
func shareOut(cpus []int, n int) [][]int {
	each := max(1, len(cpus)/n)
	out := make([][]int, n)
	for i := range out {
		for j := range each {
			out[i] = append(out[i], cpus[(i*each+j)%len(cpus)])
		}
	}
	return out
}
