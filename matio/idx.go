package matio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/didnmf/didnmf/kernels"
)

// idxTypes maps the IDX type byte to its element type (big-endian); size 0 marks a bad byte.
var idxTypes = [256]npyDtype{
	0x08: {kind: 'u', size: 1, order: binary.BigEndian},
	0x09: {kind: 'i', size: 1, order: binary.BigEndian},
	0x0B: {kind: 'i', size: 2, order: binary.BigEndian},
	0x0C: {kind: 'i', size: 4, order: binary.BigEndian},
	0x0D: {kind: 'f', size: 4, order: binary.BigEndian},
	0x0E: {kind: 'f', size: 8, order: binary.BigEndian},
}

// idxSource holds the raw bytes of an IDX file (the MNIST format) and converts them on Read.
// The first dimension is the samples, the product of the others the features.
type idxSource struct {
	name  string
	data  []byte // nil once closed
	dtype npyDtype
	n, m  int
}

// openIDXStream reads an IDX file from r. rawSize is the file size of an uncompressed file
// (else -1); compressed is the size of a compressed one (else -1).
func openIDXStream(name string, r io.Reader, rawSize, compressed int64) (Source, error) {
	truncated := func(err error) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return inputErrorf(name, "truncated IDX header")
		}
		return ioError(name, "read error", err)
	}
	var magic [4]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		return nil, truncated(err)
	}
	if magic[0] != 0 || magic[1] != 0 {
		return nil, inputErrorf(name, "not an IDX file (magic bytes % x, expected 00 00 <type> <ndims>)", magic)
	}
	dtype := idxTypes[magic[2]]
	if dtype.size == 0 {
		return nil, inputErrorf(name, "unsupported IDX data type 0x%02x (supported: 0x08 uint8, 0x09 int8, 0x0b int16, 0x0c int32, 0x0d float32, 0x0e float64)", magic[2])
	}
	ndims := int(magic[3])
	if ndims == 0 {
		return nil, inputErrorf(name, "IDX header has 0 dimensions")
	}
	raw := make([]byte, 4*ndims)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, truncated(err)
	}
	dims := make([]int64, ndims)
	for i := range dims {
		dims[i] = int64(binary.BigEndian.Uint32(raw[4*i:]))
	}
	shape := fmt.Sprint(dims[0])
	for _, d := range dims[1:] {
		shape += fmt.Sprintf(" x %d", d)
	}
	m := int64(1)
	for i, d := range dims {
		if d == 0 {
			return nil, inputErrorf(name, "empty matrix: shape %s", shape)
		}
		if i > 0 {
			m *= d // cannot overflow before the check below trips: each factor < 2^32
			if m > maxFeatures {
				return nil, inputErrorf(name, "shape %s: more than %d features", shape, maxFeatures)
			}
		}
	}
	entries, ok := mulFits(dims[0], m, math.MaxInt/8)
	if !ok {
		return nil, inputErrorf(name, "shape %s is too large", shape)
	}
	dataBytes := entries * int64(dtype.size)
	what := fmt.Sprintf("header says %s %s (%d bytes of data)", shape, dtype, dataBytes)
	var data []byte
	if rawSize >= 0 {
		have := rawSize - int64(4+len(raw))
		if have < dataBytes {
			return nil, inputErrorf(name, "truncated: %s but the file has %d", what, have)
		}
		if have > dataBytes {
			return nil, inputErrorf(name, "%d unexpected bytes after the data: %s but the file has %d", have-dataBytes, what, have)
		}
		data = make([]byte, dataBytes)
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, ioError(name, "read error", err)
		}
	} else {
		var err error
		if data, err = readCompressed(name, r, dataBytes, compressed, what); err != nil {
			return nil, err
		}
	}
	return &idxSource{name: name, data: data, dtype: dtype, n: int(dims[0]), m: int(m)}, nil
}

func (s *idxSource) Name() string  { return s.name }
func (s *idxSource) Samples() int  { return s.n }
func (s *idxSource) Features() int { return s.m }
func (s *idxSource) Close() error  { s.data = nil; return nil }

func (s *idxSource) Read(lo, hi int, layout Layout) (kernels.Block, error) {
	if err := checkRead(s.name, s.n, lo, hi, layout); err != nil {
		return nil, err
	}
	data := s.data
	if data == nil {
		return nil, ioError(s.name, "read error", os.ErrClosed)
	}
	d, err := newDense(s.name, s.m, hi-lo)
	if err != nil {
		return nil, err
	}
	row := s.m * s.dtype.size
	s.dtype.decode(d.Data, 1, data[lo*row:hi*row])
	if err := checkDense(s.name, d, lo, false); err != nil {
		return nil, err
	}
	return shapeDense(d, layout), nil
}
