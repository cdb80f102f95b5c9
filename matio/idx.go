package matio

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync/atomic"

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
	// h, w are the image height and width of a 3-D file (samples x rows x columns), else 0.
	h, w int
	// missing reads NaN (of a float type) as a missing value; sawNaN records that a Read
	// returned one.
	missing bool
	sawNaN  atomic.Bool
}

// ImageShape returns the height and width of src's images: the last two dimensions of a 3-D
// IDX file (the MNIST format), or of stacked ones that agree. ok is false for other sources.
func ImageShape(src Source) (h, w int, ok bool) {
	switch s := src.(type) {
	case *idxSource:
		return s.h, s.w, s.h > 0
	case sqrtSource:
		return ImageShape(s.Source)
	case *stackSource:
		for i, part := range s.srcs {
			ph, pw, pok := ImageShape(part)
			if !pok || i > 0 && (ph != h || pw != w) {
				return 0, 0, false
			}
			h, w = ph, pw
		}
		return h, w, len(s.srcs) > 0
	}
	return 0, 0, false
}

// labelsHint suggests the images file next to a labels file of the MNIST distributions.
func labelsHint(name string) string {
	if i := strings.LastIndex(name, "labels-idx1"); i >= 0 {
		return fmt.Sprintf(" (the images are in %s)", name[:i]+"images-idx3"+name[i+len("labels-idx1"):])
	}
	return ""
}

// openIDXStream reads an IDX file from r. rawSize is the file size of an uncompressed file
// (else -1); compressed is the size of a compressed one (else -1).
func openIDXStream(name string, r io.Reader, rawSize, compressed int64, opts ReadOptions) (Source, error) {
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
	if ndims == 1 {
		// A vector (MNIST's labels): read as N x 1 it would factorize into nothing useful.
		return nil, inputErrorf(name, "is a 1-D IDX file of %d values (labels?), not a matrix of samples x features: give an images file%s", dims[0], labelsHint(name))
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
	src := &idxSource{name: name, data: data, dtype: dtype, n: int(dims[0]), m: int(m), missing: opts.Missing}
	if ndims == 3 {
		src.h, src.w = int(dims[1]), int(dims[2])
	}
	return src, nil
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
	sawNaN, err := checkDense(s.name, d, lo, false, s.missing)
	if err != nil {
		return nil, err
	}
	if sawNaN {
		s.sawNaN.Store(true)
	}
	return shapeDense(d, layout), nil
}

// PeekImageShape reads only the headers of the given inputs and returns the height and width
// of their images when every one is a 3-D IDX file (the MNIST format), readable here, and all
// agree: what ImageShape would say of the opened, stacked inputs, without reading their data
// (a client of a cluster whose nodes read the files).
func PeekImageShape(specs []string) (h, w int, ok bool) {
	return PeekImageShapeWith(OpenInput, specs)
}

// PeekImageShapeWith is PeekImageShape opening the files with open (a node's confined
// opener, say).
func PeekImageShapeWith(open Opener, specs []string) (h, w int, ok bool) {
	for i, spec := range specs {
		ph, pw, pok := peekIDXImage(open, spec)
		if !pok || i > 0 && (ph != h || pw != w) {
			return 0, 0, false
		}
		h, w = ph, pw
	}
	return h, w, len(specs) > 0
}

// peekIDXImage reads the IDX header of one file (through gzip) for its image shape.
func peekIDXImage(open Opener, path string) (h, w int, ok bool) {
	f, err := openInput(open, path, false)
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return 0, 0, false
		}
		defer zr.Close()
		r = zr
	}
	var head [16]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, 0, false
	}
	if head[0] != 0 || head[1] != 0 || idxTypes[head[2]].size == 0 || head[3] != 3 {
		return 0, 0, false
	}
	h, w = int(binary.BigEndian.Uint32(head[8:])), int(binary.BigEndian.Uint32(head[12:]))
	return h, w, h > 0 && w > 0
}
