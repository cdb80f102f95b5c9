//go:build !linux

package rawio

import "net"

// Wrap returns c: raw system calls are used on Linux only.
func Wrap(c net.Conn) net.Conn { return c }

// Raw reports whether c reads and writes with raw system calls: never off Linux.
func Raw(c net.Conn) bool { return false }
