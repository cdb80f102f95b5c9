//go:build unix

package fsroot

import (
	"syscall"
	"testing"
	"time"
)

// TestOpenFIFODoesNotBlock: a FIFO planted in a root does not hang the node that opens it
// (with no writer, a blocking open would wait forever).
func TestOpenFIFODoesNotBlock(t *testing.T) {
	base, r := tree(t)
	if err := syscall.Mkfifo(base+"/data/fifo.npy", 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := r.Open("input", base+"/data/fifo.npy")
		if err == nil {
			st, serr := f.Stat()
			if serr == nil && st.Mode().IsRegular() {
				t.Error("a FIFO is a regular file?")
			}
			f.Close()
		}
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("opening a FIFO blocks")
	}
}
