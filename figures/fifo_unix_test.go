//go:build unix

package figures

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadersRefuseFIFOs: a FIFO with no writer in place of report.json, a names file or
// basis.tsv (which a blocking open would wait on forever) is refused at once, naming it.
func TestReadersRefuseFIFOs(t *testing.T) {
	for name, read := range map[string]func(string) error{
		"report.json":  func(p string) error { _, err := ReadReport(p); return err },
		"features.txt": func(p string) error { _, err := ReadFeatureNames(p, 3); return err },
		"basis.tsv":    func(p string) error { _, err := ReadBasisTSVNames(p, 3, 2); return err },
	} {
		p := filepath.Join(t.TempDir(), name)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skip("no FIFOs here:", err)
		}
		done := make(chan error, 1)
		go func() { done <- read(p) }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), p+": not a regular file: it is a FIFO") {
				t.Errorf("%s: %v; want an input error naming the FIFO", name, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: a FIFO blocks the reader", name)
		}
	}
}
