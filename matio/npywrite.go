package matio

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// WriteNPY writes a rows x cols float64 matrix, given as row-major data, to w as a C-order
// '<f8' .npy file (format version 1.0, header padded so that the data starts at a multiple of
// 64 bytes). Given an *os.File (not a buffered writer around one), it writes large matrices
// several times faster: see writeFloatsFile.
func WriteNPY(w io.Writer, rows, cols int, data []float64) error {
	if rows < 0 || cols < 0 {
		return fmt.Errorf("matio: WriteNPY: negative shape %d x %d", rows, cols)
	}
	if n, ok := mulFits(int64(rows), int64(cols), math.MaxInt); !ok || n != int64(len(data)) {
		return fmt.Errorf("matio: WriteNPY: %d values for a %d x %d matrix", len(data), rows, cols)
	}
	if _, err := w.Write(NPYHeader(rows, cols)); err != nil {
		return err
	}
	return writeFloats(w, data)
}

// NPYHeader returns the header WriteNPY writes for a rows x cols float64 matrix: the data
// follows it, row after row.
func NPYHeader(rows, cols int) []byte {
	dict := fmt.Sprintf("{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }", rows, cols)
	// magic (6) + version (2) + header length (2) + dict + padding + '\n'
	pad := 63 - (10+len(dict)+1+63)%64
	header := make([]byte, 0, 10+len(dict)+pad+1)
	header = append(header, npyMagic...)
	header = append(header, 1, 0)
	header = binary.LittleEndian.AppendUint16(header, uint16(len(dict)+pad+1))
	header = append(header, dict...)
	header = append(header, strings.Repeat(" ", pad)...)
	header = append(header, '\n')
	return header
}

// WriteNPYRowsAt writes rows [lo, lo+len(data)/cols) of a rows x cols float64 .npy file at
// path, creating it if needed: several writers (one per shard, on several nodes of a shared
// file system) can each write their own rows of one file. Every writer writes the same header.
// It opens path with os.OpenFile, creating the file or writing into whatever is there: for a
// process acting for its own user. A node writes a job's shared file through its data roots:
// created with fsroot's CreateExclusive and [PrepareNPYRows], filled with [WriteNPYRowsWith].
func WriteNPYRowsAt(path string, rows, cols, lo int, data []float64) error {
	if cols <= 0 || len(data)%cols != 0 || lo < 0 || lo+len(data)/cols > rows {
		return fmt.Errorf("matio: WriteNPYRowsAt: %d values at row %d of a %d x %d matrix", len(data), lo, rows, cols)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	header := NPYHeader(rows, cols)
	if _, err := f.WriteAt(header, 0); err != nil {
		f.Close()
		return err
	}
	w := io.NewOffsetWriter(f, int64(len(header))+int64(lo)*int64(cols)*8)
	if err := writeFloats(w, data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// npyRowsSize returns the header and the full size of a rows x cols float64 .npy file.
func npyRowsSize(what string, rows, cols int) ([]byte, int64, error) {
	if rows < 0 || cols <= 0 {
		return nil, 0, fmt.Errorf("matio: %s: bad shape %d x %d", what, rows, cols)
	}
	header := NPYHeader(rows, cols)
	n, ok := mulFits(int64(rows), int64(cols), (math.MaxInt64-int64(len(header)))/8)
	if !ok {
		return nil, 0, fmt.Errorf("matio: %s: a %d x %d matrix is too large", what, rows, cols)
	}
	return header, int64(len(header)) + 8*n, nil
}

// PrepareNPYRows makes f, an empty file just created for the purpose (with O_EXCL, by
// fsroot's CreateExclusive, say), a rows x cols float64 .npy file for several writers to fill:
// it writes the header, extends the file to its full size (rows not yet written read as zeros;
// the file is sparse where the file system allows) and syncs. f stays open. Writers then fill
// their rows with [WriteNPYRowsTo] or [WriteNPYRowsWith], which never create a file.
func PrepareNPYRows(f *os.File, rows, cols int) error {
	header, size, err := npyRowsSize("PrepareNPYRows", rows, cols)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Size() != 0 {
		return fmt.Errorf("%s: PrepareNPYRows needs a new, empty regular file (it has %d bytes, mode %v)", f.Name(), st.Size(), st.Mode())
	}
	if _, err := f.WriteAt(header, 0); err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		return err
	}
	return f.Sync()
}

// CheckNPYRows checks that f is what [PrepareNPYRows] made for a rows x cols matrix: a regular
// file that starts with NPYHeader(rows, cols) and has the full size. It guards the writers of
// rows against writing into any other file, and the file's committer against a file that is
// not whole.
func CheckNPYRows(f *os.File, rows, cols int) error {
	header, size, err := npyRowsSize("CheckNPYRows", rows, cols)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", f.Name())
	}
	if st.Size() != size {
		return fmt.Errorf("%s: has %d bytes, want %d (a %d x %d float64 .npy file): not the file prepared for these rows", f.Name(), st.Size(), size, rows, cols)
	}
	got := make([]byte, len(header))
	if _, err := f.ReadAt(got, 0); err != nil {
		return fmt.Errorf("%s: reading the header: %w", f.Name(), err)
	}
	if !bytes.Equal(got, header) {
		return fmt.Errorf("%s: does not start with the header of a %d x %d float64 .npy file: not the file prepared for these rows", f.Name(), rows, cols)
	}
	return nil
}

// WriteNPYRowsTo writes rows [lo, lo+len(data)/cols) of the rows x cols float64 .npy file f,
// which [PrepareNPYRows] prepared (checked with [CheckNPYRows] first: nothing is written into
// any other file), and syncs. f stays open; it must be open for reading and writing.
func WriteNPYRowsTo(f *os.File, rows, cols, lo int, data []float64) error {
	if cols <= 0 || len(data)%cols != 0 || lo < 0 || lo > rows || len(data)/cols > rows-lo {
		return fmt.Errorf("matio: WriteNPYRowsTo: %d values at row %d of a %d x %d matrix", len(data), lo, rows, cols)
	}
	if err := CheckNPYRows(f, rows, cols); err != nil {
		return err
	}
	off := int64(len(NPYHeader(rows, cols))) + int64(lo)*int64(cols)*8
	if err := writeFloats(io.NewOffsetWriter(f, off), data); err != nil {
		return err
	}
	return f.Sync()
}

// WriteNPYRowsWith opens path with open, which must open an existing file for reading and
// writing without creating one (fsroot's WriteOpener), writes rows into it with
// [WriteNPYRowsTo], and closes it.
func WriteNPYRowsWith(open Opener, path string, rows, cols, lo int, data []float64) error {
	if open == nil {
		return fmt.Errorf("matio: WriteNPYRowsWith: nil Opener")
	}
	f, err := open(path)
	if err != nil {
		return err
	}
	if err := WriteNPYRowsTo(f, rows, cols, lo, data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeFloats writes data as little-endian float64 values: straight from memory to a file
// (writeFloatsFile), converted through a buffer otherwise.
func writeFloats(w io.Writer, data []float64) error {
	if f, isFile := w.(*os.File); isFile {
		if ok, err := writeFloatsFile(f, data); ok {
			return err
		}
	}
	buf := make([]byte, 0, min(8*len(data), npyChunk))
	for i, v := range data {
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
		if len(buf) == cap(buf) || i == len(data)-1 {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	return nil
}
