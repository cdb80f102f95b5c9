//go:build !linux

package rawio

import "net"

// Wrap returns c: raw system calls are used on Linux only.
func Wrap(c net.Conn) net.Conn { return c }
