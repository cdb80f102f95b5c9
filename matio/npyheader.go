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

// npyArray is what a .npy header says about an array of any shape: the members of an .npz
// archive are 1-D or 0-D.
type npyArray struct {
	descr   string
	fortran bool
	dims    []int64
	dataOff int64 // offset of the data from the start of the file
}

// readNPYHeader reads and checks the header of a .npy file from r. limit is the file size when
// known (or -1): the header may not claim more bytes than that.
func readNPYHeader(name string, r io.Reader, limit int64) (*npyHeader, error) {
	text, off, err := readNPYHeaderText(name, r, limit)
	if err != nil {
		return nil, err
	}
	h, err := parseNPYDict(text)
	if err != nil {
		return nil, inputErrorf(name, "%v", err)
	}
	h.dataOff = off
	return h, nil
}

// readNPYArrayHeader reads the header of a .npy file holding an array of any shape; numeric
// asks for a supported numeric dtype (see parseDescr), otherwise descr is left to the caller.
func readNPYArrayHeader(name string, r io.Reader, limit int64, numeric bool) (*npyArray, error) {
	text, off, err := readNPYHeaderText(name, r, limit)
	if err != nil {
		return nil, err
	}
	a, _, err := parseNPYArrayDict(text, numeric)
	if err != nil {
		return nil, inputErrorf(name, "%v", err)
	}
	a.dataOff = off
	return a, nil
}

// readNPYHeaderText reads the magic, the version and the header dict's text, and returns the
// text and the offset of the data.
func readNPYHeaderText(name string, r io.Reader, limit int64) ([]byte, int64, error) {
	truncated := func(err error) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return inputErrorf(name, "truncated .npy header")
		}
		return ioError(name, "read error", err)
	}
	var pre [10]byte
	n, err := io.ReadFull(r, pre[:8])
	if k := min(n, len(npyMagic)); string(pre[:k]) != npyMagic[:k] {
		return nil, 0, inputErrorf(name, "not a .npy file (it does not start with the \\x93NUMPY magic)")
	}
	if err != nil {
		return nil, 0, truncated(err)
	}
	major, minor := pre[6], pre[7]
	var hlen, prefix int64
	switch major {
	case 1:
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return nil, 0, truncated(err)
		}
		hlen, prefix = int64(binary.LittleEndian.Uint16(pre[8:10])), 10
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, 0, truncated(err)
		}
		hlen, prefix = int64(binary.LittleEndian.Uint32(b[:])), 12
	default:
		return nil, 0, inputErrorf(name, "unsupported .npy format version %d.%d (supported: 1.0, 2.0, 3.0)", major, minor)
	}
	if limit >= 0 && prefix+hlen > limit {
		return nil, 0, inputErrorf(name, "truncated: the header is %d bytes but the file has %d", prefix+hlen, limit)
	}
	if hlen > maxNPYHeader {
		return nil, 0, inputErrorf(name, "header of %d bytes is too large (at most %d)", hlen, maxNPYHeader)
	}
	// Read the header as it arrives rather than allocating what hlen announces: a compressed
	// file of a few bytes may announce a megabyte.
	text, err := io.ReadAll(io.LimitReader(r, hlen))
	if err != nil {
		return nil, 0, truncated(err)
	}
	if int64(len(text)) < hlen {
		return nil, 0, truncated(io.ErrUnexpectedEOF)
	}
	return text, prefix + hlen, nil
}

// parseNPYDict interprets the header dict of a 2-D matrix. Errors are relative to the file.
func parseNPYDict(text []byte) (*npyHeader, error) {
	a, dtype, err := parseNPYArrayDict(text, true)
	if err != nil {
		return nil, err
	}
	h := &npyHeader{dtype: dtype, descr: a.descr, fortran: a.fortran}
	dims := a.dims
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

// parseNPYArrayDict interprets a header dict of any shape. With numeric, the descr must be a
// supported numeric dtype, returned parsed.
func parseNPYArrayDict(text []byte, numeric bool) (*npyArray, npyDtype, error) {
	var dtype npyDtype
	v, err := parsePyLiteral(text)
	if err != nil {
		return nil, dtype, fmt.Errorf("bad header %s: %v", quoteShort(text), err)
	}
	if v.kind != pyDict {
		return nil, dtype, fmt.Errorf("bad header %s: not a dict", quoteShort(text))
	}
	a := &npyArray{}
	descr, ok := v.lookup("descr")
	if !ok {
		return nil, dtype, fmt.Errorf("bad header %s: no 'descr'", quoteShort(text))
	}
	switch descr.kind {
	case pyStr:
		a.descr = descr.str
		if numeric {
			if dtype, err = parseDescr(descr.str); err != nil {
				return nil, dtype, err
			}
		}
	case pyList:
		return nil, dtype, fmt.Errorf("unsupported dtype %s (structured); %s", shortString(descr.String()), supportedDtypes)
	default:
		return nil, dtype, fmt.Errorf("bad header %s: 'descr' is not a string", quoteShort(text))
	}
	fo, ok := v.lookup("fortran_order")
	if !ok || fo.kind != pyBool {
		return nil, dtype, fmt.Errorf("bad header %s: 'fortran_order' missing or not True/False", quoteShort(text))
	}
	a.fortran = fo.truth
	sh, ok := v.lookup("shape")
	if !ok || sh.kind != pyTuple {
		return nil, dtype, fmt.Errorf("bad header %s: 'shape' missing or not a tuple", quoteShort(text))
	}
	a.dims = make([]int64, len(sh.items))
	for i, d := range sh.items {
		if d.kind != pyInt {
			return nil, dtype, fmt.Errorf("bad header %s: shape %s is not a tuple of integers", quoteShort(text), shortString(sh.String()))
		}
		if d.big || d.num < 0 {
			return nil, dtype, fmt.Errorf("bad shape %s", shortString(sh.String()))
		}
		a.dims[i] = d.num
	}
	return a, dtype, nil
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
