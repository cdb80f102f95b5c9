//go:build unix

package pki

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLoadRefusesWhatIsNotASmallFile gives every file-reading entry point of pki a FIFO with
// no writer, a directory and an oversized file in place of one of its files: each must be
// refused promptly, by name, instead of hanging (os.ReadFile blocks on the FIFO forever) or
// reading without bound.
func TestLoadRefusesWhatIsNotASmallFile(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue("n", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	file := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caCert, caKey := file("ca.pem", ca.CertPEM), file("ca-key.pem", ca.KeyPEM)
	cert, key := file("n.pem", certPEM), file("n-key.pem", keyPEM)
	fifo := filepath.Join(dir, "fifo.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	subdir := filepath.Join(dir, "subdir.pem")
	if err := os.Mkdir(subdir, 0o700); err != nil {
		t.Fatal(err)
	}
	// A valid PEM certificate padded past the bound with PEM-legal trailing text.
	big := file("big.pem", append(append([]byte{}, certPEM...), []byte(strings.Repeat("#", maxPEMFile))...))

	bad := []struct {
		path, want string
	}{
		{fifo, "FIFO"},
		{subdir, "directory"},
		{big, "more than"},
	}
	for _, b := range bad {
		for _, c := range []struct {
			name string
			load func(p string) error
		}{
			{"Load cert", func(p string) error { _, err := Load(p, key, caCert); return err }},
			{"Load key", func(p string) error { _, err := Load(cert, p, caCert); return err }},
			{"Load CA", func(p string) error { _, err := Load(cert, key, p); return err }},
			{"LoadCA cert", func(p string) error { _, err := LoadCA(p, caKey); return err }},
			{"LoadCA key", func(p string) error { _, err := LoadCA(caCert, p); return err }},
			{"LoadSecret", func(p string) error { _, err := LoadSecret(p); return err }},
		} {
			name := c.name + " " + filepath.Base(b.path)
			if c.name == "LoadSecret" && b.path == big {
				continue // a secret's own bound is smaller; see TestSecret*
			}
			done := make(chan error, 1)
			go func() { done <- c.load(b.path) }()
			select {
			case err := <-done:
				if err == nil {
					t.Errorf("%s: no error", name)
					continue
				}
				if msg := err.Error(); !strings.Contains(msg, b.path) || !strings.Contains(msg, b.want) {
					t.Errorf("%s: error %q, want it to name %s and say %q", name, msg, b.path, b.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: still reading after 10s: a FIFO hangs the process", name)
			}
		}
	}
	if _, err := Load(cert, key, caCert); err != nil {
		t.Errorf("the good files: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "none.pem"), key, caCert); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing certificate: error %v, want one that is fs.ErrNotExist", err)
	}
}
