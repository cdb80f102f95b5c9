// Package cpuusage reads how much CPU time this process has used, so that a caller can tell
// how busy a machine's cores were over an interval: the CPU seconds used in it over the
// interval times the cores.
package cpuusage

import "runtime"

// Sample is one reading: the process's CPU seconds so far and the cores it could use.
type Sample struct {
	// Seconds is the user and system CPU time of the whole process since it started, all
	// threads summed; OK is false where the system does not say (Seconds is then 0).
	Seconds float64
	OK      bool
	// Cores is the number of logical CPUs of the machine (runtime.NumCPU).
	Cores int
}

// Now reads the process's CPU time.
func Now() Sample {
	s, ok := processSeconds()
	return Sample{Seconds: s, OK: ok, Cores: runtime.NumCPU()}
}

// Busy is the share of cores busy between two readings taken wall seconds apart: the CPU
// seconds used in between over wall times cores, in [0, 1] but for rounding of the system's
// accounting. It is 0 when the interval, the cores or a reading is missing.
func Busy(cpuSeconds, wall float64, cores int) float64 {
	if wall <= 0 || cores <= 0 || cpuSeconds <= 0 {
		return 0
	}
	return cpuSeconds / (wall * float64(cores))
}
