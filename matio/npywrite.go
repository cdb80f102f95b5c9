package matio

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
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
	if _, err := w.Write(header); err != nil {
		return err
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
