//go:build !unix

package cpuusage

// processSeconds is not known here.
func processSeconds() (float64, bool) { return 0, false }
