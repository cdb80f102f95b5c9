package matio

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// WriteNPY writes a rows x cols float64 matrix, given as row-major data, to w as a C-order
// '<f8' .npy file (format version 1.0, header padded so that the data starts at a multiple of
// 64 bytes).
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

// writeFloats writes data as little-endian float64 values.
func writeFloats(w io.Writer, data []float64) error {
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
