package matio

import (
	"os"
	"strings"
	"testing"
)

func TestOpenDetection(t *testing.T) {
	coo, err := os.ReadFile("testdata/coo.mtx")
	if err != nil {
		t.Fatal(err)
	}
	npy, err := os.ReadFile("testdata/c_f8.npy")
	if err != nil {
		t.Fatal(err)
	}
	// Unknown names are recognised by content, compressed or not.
	for name, data := range map[string][]byte{
		"matrix.txt": coo, "matrix.dat": gzipBytes(t, coo), "array.bin": npy, "array": gzipBytes(t, npy),
		"gz-but-raw.npy.gz": npy,
	} {
		src, err := Open(writeTemp(t, name, data))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if src.Samples() != fixN || src.Features() != fixM {
			t.Errorf("%s: %d x %d", name, src.Samples(), src.Features())
		}
		src.Close()
	}
}

func TestOpenBadFiles(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(dir)
	wantInputError(t, err, dir+": is a directory")
	_, err = Open(writeTemp(t, "x.bin", []byte("hello, world")))
	wantInputError(t, err, "x.bin: unrecognized format")
	_, err = Open(writeTemp(t, "x.gz", gzipBytes(t, []byte("hello, world"))))
	wantInputError(t, err, "x.gz: unrecognized format")
	_, err = Open(writeTemp(t, "bad.npy", []byte{0x1f, 0x8b, 1, 2, 3}))
	wantInputError(t, err, "bad.npy: bad gzip data")
	_, err = Open(writeTemp(t, "npy.mtx", []byte("\x93NUMPY")))
	wantInputError(t, err, "npy.mtx:1: not a MatrixMarket file")
	long := "%%MatrixMarket matrix coordinate real general\n" + strings.Repeat("9", 2<<20) + "\n"
	_, err = Open(writeTemp(t, "long.mtx", []byte(long)))
	wantInputError(t, err, "long.mtx:2: line longer than 1048576 bytes")
}
