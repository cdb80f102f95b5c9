package matio

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"sync/atomic"

	"github.com/didnmf/didnmf/kernels"
)

// npyChunk is the size of the buffer Read decodes through.
const npyChunk = 1 << 20

// npySource reads a .npy file by ranges with ReadAt. A compressed file is held in memory.
type npySource struct {
	name string
	r    io.ReaderAt // nil once closed
	file *os.File    // the open file, or nil when the data is in memory
	h    *npyHeader
	// missing reads NaN as a missing value (ReadOptions.Missing); sawNaN records that a Read
	// returned one.
	missing bool
	sawNaN  atomic.Bool
	opts    ReadOptions
}

// openNPYFile opens an uncompressed .npy file: it reads only the header and checks the file
// size against it.
func openNPYFile(name string, f *os.File, size int64, opts ReadOptions) (Source, error) {
	h, err := readNPYHeader(name, bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 4096), size)
	if err != nil {
		return nil, err
	}
	if have := size - h.dataOff; have != h.dataBytes {
		if have < h.dataBytes {
			return nil, inputErrorf(name, "truncated: %s but the file has %d", h.what(), have)
		}
		return nil, inputErrorf(name, "%d unexpected bytes after the data: %s but the file has %d", have-h.dataBytes, h.what(), have)
	}
	return &npySource{name: name, r: f, file: f, h: h, missing: opts.Missing, opts: opts}, nil
}

// openNPYStream reads a whole (decompressed) .npy stream into memory. compressed is the size
// of the compressed file, which bounds how much data it can hold.
func openNPYStream(name string, r io.Reader, compressed int64, opts ReadOptions) (Source, error) {
	h, err := readNPYHeader(name, r, -1)
	if err != nil {
		return nil, err
	}
	data, err := readCompressed(name, r, h.dataBytes, compressed, h.what())
	if err != nil {
		return nil, err
	}
	h.dataOff = 0
	return &npySource{name: name, r: bytes.NewReader(data), h: h, missing: opts.Missing, opts: opts}, nil
}

func (s *npySource) Name() string  { return s.name }
func (s *npySource) Samples() int  { return s.h.rows }
func (s *npySource) Features() int { return s.h.cols }

func (s *npySource) Close() error {
	s.r = nil
	if s.file != nil {
		f := s.file
		s.file = nil
		return f.Close()
	}
	return nil
}

func (s *npySource) Read(lo, hi int, layout Layout) (kernels.Block, error) {
	d, err := s.readDense(lo, hi, layout, false)
	if err != nil {
		return nil, err
	}
	b := shapeDense(d, layout)
	if wantNarrow(s.opts) {
		if n, err := kernels.Narrow(b); err == nil {
			b = n
		}
	}
	return b, nil
}

// readDense reads samples [lo, hi) as a dense block of X and validates it; matrix selects the
// row/column wording of entry errors.
func (s *npySource) readDense(lo, hi int, layout Layout, matrix bool) (*kernels.Dense, error) {
	if err := checkRead(s.name, s.h.rows, lo, hi, layout); err != nil {
		return nil, err
	}
	r := s.r
	if r == nil {
		return nil, ioError(s.name, "read error", os.ErrClosed)
	}
	m, n, size := s.h.cols, hi-lo, int64(s.h.dtype.size)
	d, err := newDense(s.name, m, n)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return d, nil
	}
	if !s.h.fortran {
		// Rows lo..hi of the user's C-order array are contiguous and are X's columns in order.
		off := s.h.dataOff + int64(lo)*int64(m)*size
		buf := make([]byte, chunkBytes(int64(len(d.Data))*size, size))
		if err := s.decodeAt(r, d.Data, 1, off, buf); err != nil {
			return nil, err
		}
	} else {
		// Column f of the user's Fortran-order array holds feature f of every sample.
		buf := make([]byte, chunkBytes(int64(n)*size, size))
		for f := 0; f < m; f++ {
			off := s.h.dataOff + (int64(f)*int64(s.h.rows)+int64(lo))*size
			if err := s.decodeAt(r, d.Data[f:], m, off, buf); err != nil {
				return nil, err
			}
		}
	}
	sawNaN, err := checkDense(s.name, d, lo, matrix, s.missing)
	if err != nil {
		return nil, err
	}
	if sawNaN {
		s.sawNaN.Store(true)
	}
	return d, nil
}

// chunkBytes returns the buffer size for reading total bytes of elements of size bytes.
func chunkBytes(total, size int64) int64 {
	return min(total, npyChunk/size*size)
}

// decodeAt decodes elements from offset off into dst[0], dst[stride], ... until dst is
// exhausted, reading through buf.
func (s *npySource) decodeAt(r io.ReaderAt, dst []float64, stride int, off int64, buf []byte) error {
	size := s.h.dtype.size
	count := (len(dst) + stride - 1) / stride
	for count > 0 {
		k := min(count, len(buf)/size)
		chunk := buf[:k*size]
		if n, err := r.ReadAt(chunk, off); n < len(chunk) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return ioError(s.name, "read error", err)
		}
		s.h.dtype.decode(dst, stride, chunk)
		if k*stride >= len(dst) {
			break
		}
		dst = dst[k*stride:]
		off += int64(len(chunk))
		count -= k
	}
	return nil
}
