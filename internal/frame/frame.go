// Package frame is the wire format of didnmf's data plane: the connections between nodes that
// carry the collectives' messages (a shard's partial up the reduce tree, a result down it)
// without gRPC or protoactor in the way.
//
// A connection is a stream of frames, each
//
//	length  uint32, little-endian: the bytes that follow (2 + len(target) + len(body))
//	kind    byte: what the body is (its meaning is the caller's)
//	tlen    byte: len(target)
//	target  tlen bytes: the actor the body goes to, on the receiving node
//	body    the rest: the message (a protobuf, for didnmf)
//
// A Reader trusts nothing it reads: a frame longer than its bound is refused before anything is
// allocated for it, and a frame whose target runs past its end is malformed. Either error
// leaves the stream out of step, so the connection must be closed.
package frame

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// HeaderLen is the bytes of a frame before its target: length, kind and target length.
const HeaderLen = 6

// MaxTarget is the longest target a frame can name.
const MaxTarget = 255

// minStep is the least a Reader's buffer grows by while a frame arrives; maxKept is the
// largest buffer a Reader keeps from one frame to the next.
const (
	minStep = 64 << 10
	maxKept = 1 << 20
)

// Errors of a frame stream. Both are fatal to the stream.
var (
	// ErrTooLarge: a frame announces more bytes than the reader accepts.
	ErrTooLarge = errors.New("frame too large")
	// ErrMalformed: a frame's fields do not fit its length.
	ErrMalformed = errors.New("malformed frame")
)

// Frame is one frame read from a stream.
type Frame struct {
	Kind   byte
	Target string
	// Body is valid until the next call of the Reader's Next.
	Body []byte
}

// Begin appends to dst the header of a frame of kind to target, with a zero length, and
// returns it: append the body, then call End. target must not be longer than MaxTarget.
func Begin(dst []byte, kind byte, target string) ([]byte, error) {
	if len(target) > MaxTarget {
		return dst, fmt.Errorf("frame: target of %d bytes (at most %d)", len(target), MaxTarget)
	}
	dst = append(dst, 0, 0, 0, 0, kind, byte(len(target)))
	return append(dst, target...), nil
}

// End writes the length of the frame that starts at frame[0] (as Begin made it, with its body
// appended). It fails if the frame is longer than a uint32 can say.
func End(frame []byte) error {
	if len(frame) < HeaderLen || uint64(len(frame)-4) > uint64(^uint32(0)) {
		return fmt.Errorf("frame: %d bytes cannot be framed", len(frame))
	}
	binary.LittleEndian.PutUint32(frame, uint32(len(frame)-4))
	return nil
}

// Reader reads frames from a stream. It is not safe for concurrent use.
type Reader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

// NewReader returns a Reader of r that refuses frames whose length (the bytes after the length
// field) passes max.
func NewReader(r io.Reader, max int) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Next reads the next frame. It returns io.EOF at the end of the stream between frames,
// io.ErrUnexpectedEOF inside one, ErrTooLarge or ErrMalformed for a frame it refuses, or the
// stream's error.
func (r *Reader) Next() (Frame, error) {
	var lenBuf [4]byte
	if _, err := io.ReadFull(r.r, lenBuf[:]); err != nil {
		return Frame{}, err
	}
	n := binary.LittleEndian.Uint32(lenBuf[:])
	switch {
	case uint64(n) > uint64(r.max):
		return Frame{}, fmt.Errorf("%w: %d bytes (at most %d)", ErrTooLarge, n, r.max)
	case n < HeaderLen-4:
		return Frame{}, fmt.Errorf("%w: %d bytes, shorter than its header", ErrMalformed, n)
	}
	// The buffer grows with the bytes that arrive, never more than doubling, so a frame that
	// announces much and sends little costs little. A buffer a large frame needed is not
	// kept for the next one.
	if cap(r.buf) > maxKept {
		r.buf = nil
	}
	b := r.buf[:0]
	for len(b) < int(n) {
		step := min(int(n)-len(b), max(len(b), minStep))
		b = slices.Grow(b, step)
		r.buf = b
		if _, err := io.ReadFull(r.r, b[len(b):len(b)+step]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Frame{}, err
		}
		b = b[:len(b)+step]
	}
	r.buf = b
	return fields(b)
}

// Parse reads the frame that is all of b (as Begin and End made it). The frame's Body is
// part of b.
func Parse(b []byte) (Frame, error) {
	if len(b) < HeaderLen || uint64(binary.LittleEndian.Uint32(b)) != uint64(len(b)-4) {
		return Frame{}, fmt.Errorf("%w: %d bytes, not one whole frame", ErrMalformed, len(b))
	}
	return fields(b[4:])
}

// fields splits a frame after its length field into kind, target and body.
func fields(b []byte) (Frame, error) {
	tlen := int(b[1])
	if 2+tlen > len(b) {
		return Frame{}, fmt.Errorf("%w: a target of %d bytes in a frame of %d", ErrMalformed, tlen, len(b))
	}
	return Frame{Kind: b[0], Target: string(b[2 : 2+tlen]), Body: b[2+tlen:]}, nil
}
