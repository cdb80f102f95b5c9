//go:build !linux

package cli

import "errors"

var errNoAffinity = errors.New("pinning to CPUs is supported on Linux only")

// allowedCPUs is not known on this system.
func allowedCPUs() ([]int, error) { return nil, errNoAffinity }

// pinToCPUs is not supported on this system.
func pinToCPUs([]int) error { return errNoAffinity }
