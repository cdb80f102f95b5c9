package matio

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/usererr"
)

// TestMaxBytes: an input that declares more than ReadOptions.MaxBytes takes to read is
// refused before it is read, naming the file: a .mtx (read whole) whose size line declares
// ten million entries in a few bytes, a CSC .npz (read whole), a 10x directory, and a Read of
// a CSR .npz whose range holds more entries; under the bound they read as without one.
func TestMaxBytes(t *testing.T) {
	dir := t.TempDir()
	bomb := filepath.Join(dir, "bomb.mtx")
	if err := os.WriteFile(bomb, []byte("%%MatrixMarket matrix coordinate real general\n10000 10000 10000000\n1 1 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const data = "testdata/sparse/"
	for _, c := range []struct {
		name, spec string
		max        int64
		atRead     bool // refused by Read, not by Open
	}{
		{"mtx size line", bomb, 1 << 20, false},
		{"csc npz", data + "csc_f4.npz", 100, false},
		{"10x matrix", data + "tenx_v3", 100, false},
		{"csr npz read", data + "csr_f4.npz", 100, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, err := OpenWithOptions(os.Open, c.spec, ReadOptions{MaxBytes: c.max})
			if err == nil {
				defer src.Close()
				if !c.atRead {
					t.Fatalf("opened with MaxBytes %d", c.max)
				}
				_, err = src.Read(0, src.Samples(), LayoutSparse)
			}
			if err == nil || !errors.Is(err, usererr.ErrUser) || !strings.Contains(err.Error(), "MiB one input may take here") || !strings.Contains(err.Error(), filepath.Base(c.spec)) {
				t.Fatalf("error %v; want an input error naming the file and the bound", err)
			}
			if c.spec == bomb {
				return
			}
			// With room enough, the same input reads.
			src2, err := OpenWithOptions(os.Open, c.spec, ReadOptions{MaxBytes: 1 << 30})
			if err != nil {
				t.Fatal(err)
			}
			defer src2.Close()
			if _, err := src2.Read(0, src2.Samples(), LayoutSparse); err != nil {
				t.Fatal(err)
			}
		})
	}
}
