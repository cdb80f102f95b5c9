package matio

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// npyDtype is a supported .npy element type.
type npyDtype struct {
	kind  byte // 'f', 'i', 'u' or 'b'
	size  int  // bytes per element
	order binary.ByteOrder
}

const supportedDtypes = "supported: float64, float32, integers, bool"

// parseDescr parses a 'descr' string such as '<f8' or '|u1'. The error message is relative
// (the caller prefixes the file name).
func parseDescr(descr string) (npyDtype, error) {
	s := descr
	var order binary.ByteOrder = binary.NativeEndian
	if s != "" {
		switch s[0] {
		case '<':
			order, s = binary.LittleEndian, s[1:]
		case '>':
			order, s = binary.BigEndian, s[1:]
		case '=', '|':
			s = s[1:]
		}
	}
	unsupported := func(what string) (npyDtype, error) {
		if what != "" {
			what = " (" + what + ")"
		}
		return npyDtype{}, fmt.Errorf("unsupported dtype '%s'%s; %s", descr, what, supportedDtypes)
	}
	if s == "?" {
		return npyDtype{kind: 'b', size: 1, order: order}, nil
	}
	if s == "" {
		return unsupported("")
	}
	kind := s[0]
	switch kind {
	case 'c':
		return unsupported("complex")
	case 'O':
		return unsupported("object")
	case 'S', 'a', 'U':
		return unsupported("string")
	case 'V':
		return unsupported("raw bytes or structured")
	case 'M', 'm':
		return unsupported("datetime")
	}
	size, err := strconv.Atoi(s[1:])
	if err != nil || size <= 0 {
		return unsupported("")
	}
	switch kind {
	case 'f':
		switch size {
		case 4, 8:
			return npyDtype{kind: 'f', size: size, order: order}, nil
		case 2:
			return unsupported("float16")
		}
		return unsupported("extended precision float")
	case 'i', 'u':
		switch size {
		case 1, 2, 4, 8:
			return npyDtype{kind: kind, size: size, order: order}, nil
		}
	case 'b':
		if size == 1 {
			return npyDtype{kind: 'b', size: 1, order: order}, nil
		}
	}
	return unsupported("")
}

// String returns the NumPy name of the type, e.g. float64.
func (t npyDtype) String() string {
	switch t.kind {
	case 'f':
		return fmt.Sprintf("float%d", 8*t.size)
	case 'i':
		return fmt.Sprintf("int%d", 8*t.size)
	case 'u':
		return fmt.Sprintf("uint%d", 8*t.size)
	}
	return "bool"
}

// decode converts the len(src)/t.size elements in src into dst[0], dst[stride], ...
func (t npyDtype) decode(dst []float64, stride int, src []byte) {
	n := len(src) / t.size
	o := t.order
	switch {
	case t.kind == 'f' && t.size == 8:
		for i := 0; i < n; i++ {
			dst[i*stride] = math.Float64frombits(o.Uint64(src[8*i:]))
		}
	case t.kind == 'f':
		for i := 0; i < n; i++ {
			dst[i*stride] = float64(math.Float32frombits(o.Uint32(src[4*i:])))
		}
	case t.kind == 'b':
		for i := 0; i < n; i++ {
			if src[i] != 0 {
				dst[i*stride] = 1
			} else {
				dst[i*stride] = 0
			}
		}
	case t.kind == 'u' && t.size == 1:
		for i := 0; i < n; i++ {
			dst[i*stride] = float64(src[i])
		}
	case t.kind == 'u' && t.size == 2:
		for i := 0; i < n; i++ {
			dst[i*stride] = float64(o.Uint16(src[2*i:]))
		}
	case t.kind == 'u' && t.size == 4:
		for i := 0; i < n; i++ {
			dst[i*stride] = float64(o.Uint32(src[4*i:]))
		}
	case t.kind == 'u':
		for i := 0; i < n; i++ {
			dst[i*stride] = float64(o.Uint64(src[8*i:]))
		}
	case t.size == 1:
		for i := 0; i < n; i++ {
			dst[i*stride] = float64(int8(src[i]))
		}
	case t.size == 2:
		for i := 0; i < n; i++ {
			dst[i*stride] = float64(int16(o.Uint16(src[2*i:])))
		}
	case t.size == 4:
		for i := 0; i < n; i++ {
			dst[i*stride] = float64(int32(o.Uint32(src[4*i:])))
		}
	default:
		for i := 0; i < n; i++ {
			dst[i*stride] = float64(int64(o.Uint64(src[8*i:])))
		}
	}
}
