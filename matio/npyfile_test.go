package matio

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteNPYToFileSameBytes: WriteNPY to a file (straight from memory, writeFloatsFile)
// writes the bytes it writes to a buffer (converted), for empty, small, odd and multi-chunk
// matrices, and from the file's current offset.
func TestWriteNPYToFileSameBytes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rows, cols int
		prefix     string
	}{
		{"empty", 0, 3, ""}, {"one", 1, 1, ""}, {"odd", 7, 3, ""}, {"after a prefix", 5, 2, "abc"},
		{"more than a chunk", npyFileChunk/8/3 + 11, 3, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := make([]float64, tc.rows*tc.cols)
			for i := range data {
				data[i] = float64(i)*1.25 - 3
			}
			if len(data) > 3 {
				data[0], data[1], data[2] = math.Inf(-1), math.NaN(), math.Copysign(0, -1)
			}
			var want bytes.Buffer
			want.WriteString(tc.prefix)
			if err := WriteNPY(&want, tc.rows, tc.cols, data); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "x.npy")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString(tc.prefix); err != nil {
				t.Fatal(err)
			}
			if err := WriteNPY(f, tc.rows, tc.cols, data); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("%d bytes differ from WriteNPY's %d", len(got), want.Len())
			}
		})
	}
}

// TestWriteNPYToFileShape: to a file too, a shape that does not match the data is refused
// before anything is written.
func TestWriteNPYToFileShape(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "x.npy"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tc := range []struct{ rows, cols, n int }{{2, 3, 5}, {-1, 3, 0}, {math.MaxInt, 2, 4}} {
		if err := WriteNPY(f, tc.rows, tc.cols, make([]float64, tc.n)); err == nil {
			t.Errorf("%d x %d with %d values: no error", tc.rows, tc.cols, tc.n)
		}
	}
	if fi, _ := f.Stat(); fi.Size() != 0 {
		t.Errorf("%d bytes written by refused calls", fi.Size())
	}
}

// TestWriteNPYToPipe: to a pipe, which has no offsets, WriteNPY converts as it does for a
// buffer, and writes the same bytes.
func TestWriteNPYToPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	data := []float64{1, 2.5, -3, 4, 5, 6}
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	if err := WriteNPY(w, 3, 2, data); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var want bytes.Buffer
	if err := WriteNPY(&want, 3, 2, data); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, want.Bytes()) {
		t.Errorf("through a pipe: %d bytes, not WriteNPY's %d", len(b), want.Len())
	}
}
