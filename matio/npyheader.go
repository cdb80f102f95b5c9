package matio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// npyMagic starts every .npy file.
const npyMagic = "\x93NUMPY"

// maxNPYHeader bounds the header dict we are willing to read (NumPy itself refuses headers over
// 10000 bytes by default).
const maxNPYHeader = 1 << 20

// npyHeader is what a .npy header says about the array that follows it.
type npyHeader struct {
	dtype      npyDtype
	descr      string
	fortran    bool
	rows, cols int   // N samples, M features
	dataOff    int64 // offset of the data from the start of the file
	dataBytes  int64 // rows*cols*itemsize
}

// what describes the header's claim, for size messages: "header says 1000 x 5 float64 (40000
// bytes of data)".
func (h *npyHeader) what() string {
	return fmt.Sprintf("header says %d x %d %s (%d bytes of data)", h.rows, h.cols, h.dtype, h.dataBytes)
}

// readNPYHeader reads and checks the header of a .npy file from r. limit is the file size when
// known (or -1): the header may not claim more bytes than that.
func readNPYHeader(name string, r io.Reader, limit int64) (*npyHeader, error) {
	truncated := func(err error) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return inputErrorf(name, "truncated .npy header")
		}
		return ioError(name, "read error", err)
	}
	var pre [10]byte
	n, err := io.ReadFull(r, pre[:8])
	if k := min(n, len(npyMagic)); string(pre[:k]) != npyMagic[:k] {
		return nil, inputErrorf(name, "not a .npy file (it does not start with the \\x93NUMPY magic)")
	}
	if err != nil {
		return nil, truncated(err)
	}
	major, minor := pre[6], pre[7]
	var hlen, prefix int64
	switch major {
	case 1:
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return nil, truncated(err)
		}
		hlen, prefix = int64(binary.LittleEndian.Uint16(pre[8:10])), 10
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, truncated(err)
		}
		hlen, prefix = int64(binary.LittleEndian.Uint32(b[:])), 12
	default:
		return nil, inputErrorf(name, "unsupported .npy format version %d.%d (supported: 1.0, 2.0, 3.0)", major, minor)
	}
	if limit >= 0 && prefix+hlen > limit {
		return nil, inputErrorf(name, "truncated: the header is %d bytes but the file has %d", prefix+hlen, limit)
	}
	if hlen > maxNPYHeader {
		return nil, inputErrorf(name, "header of %d bytes is too large (at most %d)", hlen, maxNPYHeader)
	}
	// Read the header as it arrives rather than allocating what hlen announces: a compressed
	// file of a few bytes may announce a megabyte.
	text, err := io.ReadAll(io.LimitReader(r, hlen))
	if err != nil {
		return nil, truncated(err)
	}
	if int64(len(text)) < hlen {
		return nil, truncated(io.ErrUnexpectedEOF)
	}
	h, err := parseNPYDict(text)
	if err != nil {
		return nil, inputErrorf(name, "%v", err)
	}
	h.dataOff = prefix + hlen
	return h, nil
}

// parseNPYDict interprets the header dict. Errors are relative to the file.
func parseNPYDict(text []byte) (*npyHeader, error) {
	v, err := parsePyLiteral(text)
	if err != nil {
		return nil, fmt.Errorf("bad header %s: %v", quoteShort(text), err)
	}
	if v.kind != pyDict {
		return nil, fmt.Errorf("bad header %s: not a dict", quoteShort(text))
	}
	h := &npyHeader{}
	descr, ok := v.lookup("descr")
	if !ok {
		return nil, fmt.Errorf("bad header %s: no 'descr'", quoteShort(text))
	}
	switch descr.kind {
	case pyStr:
		h.descr = descr.str
		if h.dtype, err = parseDescr(descr.str); err != nil {
			return nil, err
		}
	case pyList:
		return nil, fmt.Errorf("unsupported dtype %s (structured); %s", shortString(descr.String()), supportedDtypes)
	default:
		return nil, fmt.Errorf("bad header %s: 'descr' is not a string", quoteShort(text))
	}
	fo, ok := v.lookup("fortran_order")
	if !ok || fo.kind != pyBool {
		return nil, fmt.Errorf("bad header %s: 'fortran_order' missing or not True/False", quoteShort(text))
	}
	h.fortran = fo.truth
	sh, ok := v.lookup("shape")
	if !ok || sh.kind != pyTuple {
		return nil, fmt.Errorf("bad header %s: 'shape' missing or not a tuple", quoteShort(text))
	}
	dims := make([]int64, len(sh.items))
	for i, d := range sh.items {
		if d.kind != pyInt {
			return nil, fmt.Errorf("bad header %s: shape %s is not a tuple of integers", quoteShort(text), shortString(sh.String()))
		}
		if d.big || d.num < 0 {
			return nil, fmt.Errorf("bad shape %s", shortString(sh.String()))
		}
		dims[i] = d.num
	}
	if len(dims) != 2 {
		return nil, fmt.Errorf("expected a 2-D array (samples x features), got shape %s", formatShape(dims))
	}
	if dims[0] == 0 || dims[1] == 0 {
		return nil, fmt.Errorf("empty matrix: shape %s", formatShape(dims))
	}
	if dims[1] > maxFeatures {
		return nil, fmt.Errorf("shape %s: more than %d features", formatShape(dims), maxFeatures)
	}
	entries, ok := mulFits(dims[0], dims[1], math.MaxInt/8)
	if !ok {
		return nil, fmt.Errorf("shape %s is too large", formatShape(dims))
	}
	h.rows, h.cols = int(dims[0]), int(dims[1])
	h.dataBytes = entries * int64(h.dtype.size)
	return h, nil
}

// quoteShort quotes a header for a message, cut to a readable length.
func quoteShort(b []byte) string {
	const max = 120
	if len(b) > max {
		return fmt.Sprintf("%q...", b[:max])
	}
	return fmt.Sprintf("%q", b)
}

func shortString(s string) string {
	const max = 120
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
