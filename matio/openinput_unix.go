//go:build unix

package matio

import (
	"io/fs"
	"os"
	"syscall"
)

// openNonBlocking opens path read-only with O_NONBLOCK, so that a FIFO with no writer (or a
// device that would wait) does not block the open, and O_NOCTTY (a terminal does not become
// the process's), then clears O_NONBLOCK on the descriptor before handing it to os.NewFile: a
// regular file then reads as one os.Open opened. Nothing is read before [checkKind] looks at
// the descriptor.
func openNonBlocking(path string) (*os.File, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err == syscall.ENXIO {
		// What a socket (or a device with nothing behind it) answers: say what it is.
		if st, serr := os.Stat(path); serr == nil && !st.Mode().IsRegular() {
			return nil, notRegular(path, st.Mode())
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	if err := syscall.SetNonblock(fd, false); err != nil {
		syscall.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}
