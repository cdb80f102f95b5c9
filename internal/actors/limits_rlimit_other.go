//go:build !linux

package actors

// raiseDescriptorLimit returns the descriptor limit assumed where it is not read (see the
// Linux version).
func raiseDescriptorLimit() uint64 { return defaultDescriptors }

// defaultDescriptors is the descriptor limit assumed when it cannot be read.
const defaultDescriptors = 1024
