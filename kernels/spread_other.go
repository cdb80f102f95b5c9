//go:build !linux

package kernels

// systemPlacer returns nil: off Linux the pool leaves its workers where the system puts them.
func systemPlacer() cpuPlacer { return nil }
