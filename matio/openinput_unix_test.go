//go:build unix

package matio

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/didnmf/didnmf/fsroot"
)

// copyTree copies the files of directory src (no subdirectories) into a new directory dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// plant puts a FIFO ("fifo") or a directory ("dir") at path, in place of whatever is there.
func plant(t *testing.T, kind, path string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	switch kind {
	case "fifo":
		if err := syscall.Mkfifo(path, 0o644); err != nil {
			t.Skip("no FIFOs here:", err)
		}
	case "dir":
		if err := os.Mkdir(path, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// within runs f and fails the test when it has not returned after a generous while: a reader
// that opens a FIFO with a blocking open, or reads a device that never ends, hangs.
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no answer after 20 s: the reader blocks", what)
		return nil
	}
}

// TestReadersRefuseFIFOsAndDirectories: every reader of every format, given a FIFO (with no
// writer: a blocking open would hang) or a directory where it needs a file, answers at once
// with the user's error naming that file and what it is, through matio's own opener and
// through a node's (fsroot's), which open without blocking.
func TestReadersRefuseFIFOsAndDirectories(t *testing.T) {
	type setup struct {
		spec, victim string // the input given; the file replaced by a FIFO or a directory
	}
	// file gives an input file called name, itself the victim.
	file := func(name string) func(t *testing.T, dir string) setup {
		return func(t *testing.T, dir string) setup {
			p := filepath.Join(dir, name)
			return setup{p, p}
		}
	}
	// inTree copies a fixture directory and makes one of its files the victim.
	inTree := func(fixture, name string) func(t *testing.T, dir string) setup {
		return func(t *testing.T, dir string) setup {
			d := filepath.Join(dir, filepath.Base(fixture))
			copyTree(t, sparseFixture(fixture), d)
			return setup{d, filepath.Join(d, name)}
		}
	}
	// beside writes an .npz with its names files and makes one of those the victim.
	beside := func(name string) func(t *testing.T, dir string) setup {
		return func(t *testing.T, dir string) setup {
			for _, f := range []string{"csr_f4.npz", "csr_f4.features.tsv", "csr_f4.samples.tsv"} {
				data, err := os.ReadFile(sparseFixture(f))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			return setup{filepath.Join(dir, "csr_f4.npz"), filepath.Join(dir, name)}
		}
	}
	read := func(open Opener, spec string) error {
		src, err := OpenWith(open, spec)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = src.Read(0, src.Samples(), LayoutAuto)
		return err
	}
	names := func(open Opener, spec string) error {
		_, err := ReadNames(open, []string{spec})
		return err
	}
	matrix := func(open Opener, spec string) error {
		_, _, _, err := ReadNPYMatrixWith(open, spec)
		return err
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) setup
		do    func(open Opener, spec string) error
	}{
		{"npy", file("x.npy"), read},
		{"npy.gz", file("x.npy.gz"), read},
		{"npz", file("x.npz"), read},
		{"mtx", file("x.mtx"), read},
		{"mtx.gz", file("x.mtx.gz"), read},
		{"idx", file("x.idx"), read},
		{"mnist-name", file("train-images-idx3-ubyte"), read},
		{"h5ad", file("x.h5ad"), read},
		{"unknown-name", file("matrix.bin"), read},
		{"tenx-matrix", inTree("tenx_v2", "matrix.mtx"), read},
		{"tenx-genes", inTree("tenx_v2", "genes.tsv"), read},
		{"tenx-barcodes", inTree("tenx_v2", "barcodes.tsv"), read},
		{"store-manifest", inTree("store", "manifest.json"), read},
		{"store-block", inTree("store", "block-000001.npy"), read},
		{"store-features", inTree("store", "features.tsv"), names},
		{"names-features", beside("csr_f4.features.tsv"), names},
		{"names-samples", beside("csr_f4.samples.tsv"), names},
		{"names-input", file("x.npz"), names},
		{"npy-matrix", file("x.npy"), matrix},
	}
	openers := map[string]Opener{"matio": OpenInput, "fsroot": fsroot.Unconfined().Opener("input")}
	for _, kind := range []string{"fifo", "dir"} {
		for oname, open := range openers {
			for _, tc := range tests {
				t.Run(kind+"/"+oname+"/"+tc.name, func(t *testing.T) {
					s := tc.setup(t, t.TempDir())
					plant(t, kind, s.victim)
					err := within(t, tc.name, func() error { return tc.do(open, s.spec) })
					if kind == "fifo" {
						wantInputError(t, err, s.victim+": not a regular file: it is a FIFO (named pipe)")
					} else {
						wantInputError(t, err, s.victim+": is a directory")
						if s.spec != s.victim || tc.name == "npy-matrix" { // where a file, not an input, was wanted
							wantInputError(t, err, s.victim+": is a directory, not a file")
						}
					}
				})
			}
		}
	}
	// What the IDX peek cannot read, it does not claim, and it does not hang either.
	fifo := filepath.Join(t.TempDir(), "t10k-images-idx3-ubyte")
	plant(t, "fifo", fifo)
	within(t, "PeekImageShape", func() error {
		if _, _, ok := PeekImageShape([]string{fifo}); ok {
			t.Error("PeekImageShape read an image shape from a FIFO")
		}
		return nil
	})
}

// TestOpenInputRefusesDevicesAndSockets: a character device (which may never end, as
// /dev/zero) and a socket are refused by name, as a FIFO is; a regular file and a directory
// open, and the regular file reads as os.Open's would.
func TestOpenInputRefusesDevicesAndSockets(t *testing.T) {
	for _, dev := range []string{"/dev/zero", "/dev/null"} {
		if _, err := os.Stat(dev); err != nil {
			continue
		}
		err := within(t, dev, func() error { _, err := Open(dev); return err })
		wantInputError(t, err, dev+": not a regular file: it is a character device")
	}
	sock := filepath.Join(t.TempDir(), "x.npy")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Skip("no Unix sockets here:", err)
	}
	defer l.Close()
	_, err = Open(sock)
	wantInputError(t, err, sock+": not a regular file: it is a socket")

	f, err := OpenInput("testdata/c_f8.npy")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile("testdata/c_f8.npy")
	got := make([]byte, len(want)+1)
	n, _ := f.Read(got)
	f.Close()
	if string(got[:n]) != string(want) {
		t.Errorf("OpenInput's file read %d bytes, not the file's %d", n, len(want))
	}
	if d, err := OpenInput("testdata"); err != nil {
		t.Errorf("OpenInput of a directory: %v", err)
	} else {
		d.Close()
	}
	if _, err := OpenRegular("testdata"); err == nil || !strings.Contains(err.Error(), "testdata: is a directory, not a file") {
		t.Errorf("OpenRegular of a directory: %v", err)
	}
	if _, err := OpenInput("testdata/no-such-file"); !os.IsNotExist(err) {
		t.Errorf("OpenInput of a missing file: %v, want a not-exist error", err)
	}
}
