package chunked

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"unsafe"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Number is what a piece is made of: its values, its data, and the index arrays a sparse
// block's chunk carries beside them.
type Number interface {
	float64 | byte | int32 | int64
}

// update returns crc updated with the little-endian bytes of s.
func update[T Number](crc uint32, s []T) uint32 {
	if littleEndian {
		// The values' memory is their little-endian bytes: one pass of the hardware CRC over
		// it (a copy through a buffer cost 6% of a node's CPU in a small allreduce).
		return crc32.Update(crc, castagnoli, view(s))
	}
	return updatePortable(crc, s)
}

// view returns the memory of s as bytes.
func view[T Number](s []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(*new(T))))
}

// LE returns the little-endian bytes of s's values, for Seal, Verify and Ordered.Add: s's own
// memory where the machine is little-endian, a copy otherwise.
func LE[T Number](s []T) []byte {
	if littleEndian {
		return view(s)
	}
	return appendLE(nil, s)
}

// littleEndian tells whether this machine stores numbers as their little-endian bytes.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// updatePortable is update on any byte order.
func updatePortable[T Number](crc uint32, s []T) uint32 {
	var buf [512]byte
	step := len(buf) / int(unsafe.Sizeof(*new(T)))
	for len(s) > 0 {
		n := min(len(s), step)
		crc = crc32.Update(crc, castagnoli, appendLE(buf[:0], s[:n]))
		s = s[n:]
	}
	return crc
}

// appendLE appends the little-endian bytes of s's values to b.
func appendLE[T Number](b []byte, s []T) []byte {
	switch v := any(s).(type) {
	case []byte:
		return append(b, v...)
	case []float64:
		for _, x := range v {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
		}
	case []int64:
		for _, x := range v {
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		}
	case []int32:
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		}
	}
	return b
}
