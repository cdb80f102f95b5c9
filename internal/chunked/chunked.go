// Package chunked sends payloads too large for one message as streams of chunks and puts them
// back together. It is the one layer under every large transfer of didnmf: the partials and
// results of collectives, checkpoint copies, the factors a shard streams to its client, and
// the blocks a client streams to the shards.
//
// A payload, float64 values or bytes, is cut into chunks of at most Floats values or Bytes
// bytes (Split). Each chunk travels in the message of its stream as a messages.Chunk: its seq
// (0 to count-1), the payload's chunk count and total length, where its piece goes, and the
// CRC-32C of the piece (values as their little-endian bytes). The CRC covers the piece; the
// header is checked against the payload instead. Receivers trust no chunk:
//
//   - Assembly reassembles a payload whose chunks come in any order. It drops a duplicate
//     (ErrDuplicate) and refuses a chunk whose CRC fails (ErrChecksum), whose header does not
//     fit its payload or disagrees with the chunks before it, whose piece is larger than
//     MaxPiece, or whose payload would pass MaxPayload (ErrMalformed). It allocates nothing
//     for what a header announces, and a payload is whole only when its pieces tile it.
//   - Ordered takes the chunks of a stream its receiver consumes as they come (a streamed
//     block), in seq order: a chunk that is not the next one is dropped as a duplicate.
//
// Flow control is the sender's Window: at most its size chunks sent and not acknowledged.
// Acknowledgements are cumulative (every chunk up to and including a seq), and one for a chunk
// not sent yet is ignored. Out is a payload's chunks going out through a Window. Streams
// without acknowledgements (the collectives', which the reduce tree paces, and checkpoint
// copies) send their chunks at once.
package chunked

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/didnmf/didnmf/messages"
)

// Chunk sizes and limits. protoactor's gRPC transport tears a connection down when a message or
// a batch of messages passes its size limit, so senders keep chunks at about 1 MiB; receivers
// accept up to 8 times that, and a payload of up to 16 GiB.
const (
	// Floats is the most float64 values a sender puts in a chunk (1 MiB).
	Floats = 1 << 17
	// Bytes is the most bytes a sender puts in a chunk of a byte payload (1 MiB).
	Bytes = 8 * Floats
	// MaxPiece caps the bytes of one chunk's piece that an Assembly accepts.
	MaxPiece = 8 * Bytes
	// MaxPayload caps the bytes a chunk may announce for its payload (2^31 values).
	MaxPayload = 1 << 34
)

// Errors of a chunk. ErrDuplicate is not a failure: the chunk is dropped.
var (
	ErrChecksum  = errors.New("checksum mismatch")
	ErrDuplicate = errors.New("duplicate chunk")
	ErrMalformed = errors.New("malformed chunk")
)

// Elem is the type of a payload's elements: float64 (the chunks' values) or byte (their data).
type Elem interface{ float64 | byte }

// Split cuts payload into chunks of at most size elements (one empty chunk for an empty
// payload), each with its CRC. The chunks share payload's storage.
func Split[T Elem](payload []T, size int) []*messages.Chunk {
	size = max(size, 1)
	count := max(1, (len(payload)+size-1)/size)
	out := make([]*messages.Chunk, count)
	for i := range out {
		lo := min(i*size, len(payload))
		hi := min(lo+size, len(payload))
		c := &messages.Chunk{Seq: int64(i), Count: int64(count), Offset: int64(lo), Total: int64(len(payload))}
		switch p := any(payload[lo:hi]).(type) {
		case []float64:
			c.Values = p
		case []byte:
			c.Data = p
		}
		Seal(c)
		out[i] = c
	}
	return out
}

// Seal sets c's CRC from its piece: its values, its data, then extra, the parts of the piece
// that the message carrying c holds itself (see LE).
func Seal(c *messages.Chunk, extra ...[]byte) { c.Crc = crcOf(c, extra) }

// Verify checks c's CRC against its piece (values, data and extra, as Seal took them).
func Verify(c *messages.Chunk, extra ...[]byte) error {
	if got := crcOf(c, extra); got != c.GetCrc() {
		return fmt.Errorf("%w in chunk %d of %d (CRC %08x, the chunk says %08x)", ErrChecksum, c.GetSeq(), c.GetCount(), got, c.GetCrc())
	}
	return nil
}

func crcOf(c *messages.Chunk, extra [][]byte) uint32 {
	crc := update(0, c.GetValues())
	crc = update(crc, c.GetData())
	for _, e := range extra {
		crc = update(crc, e)
	}
	return crc
}

// pieceOf returns c's piece as a payload of T's, or an error when c has none of that kind.
func pieceOf[T Elem](c *messages.Chunk) ([]T, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: none in the message", ErrMalformed)
	}
	var p any
	switch any(*new(T)).(type) {
	case float64:
		if len(c.Data) > 0 {
			return nil, fmt.Errorf("%w: bytes in a chunk of values", ErrMalformed)
		}
		p = c.Values
	case byte:
		if len(c.Values) > 0 {
			return nil, fmt.Errorf("%w: values in a chunk of bytes", ErrMalformed)
		}
		p = c.Data
	}
	return p.([]T), nil
}

// sizeOf is the bytes of one element of T.
func sizeOf[T Elem]() int64 {
	if _, ok := any(*new(T)).(float64); ok {
		return 8
	}
	return 1
}

// Assembly reassembles one payload from its chunks, which may come in any order. The zero
// value collects the payload into a new slice, allocated once every chunk is in (a payload of
// one chunk is that chunk's piece, used in place); Into writes it into a given slice.
type Assembly[T Elem] struct {
	dst   []T
	into  bool
	count int64 // the payload's chunks (0: none received yet)
	total int64
	got   map[int64]bool
	spans []span[T] // the pieces received, and where they go
	data  []T
	done  bool
	err   error // every chunk came, but they do not make up the payload
}

// span is a piece of a payload received: elements [off, off+n), with the piece itself when
// the payload is not written in place.
type span[T Elem] struct {
	off, n int64
	data   []T
}

// Into returns an Assembly that writes its payload into dst, whose length the payload must
// have.
func Into[T Elem](dst []T) *Assembly[T] { return &Assembly[T]{dst: dst, into: true} }

// Add takes one chunk. It returns true when the payload is whole. A chunk received already,
// or one that comes after the payload is whole, is ErrDuplicate; a chunk that does not fit the
// payload is an ErrMalformed error, and one whose piece does not match its CRC an ErrChecksum
// error; either leaves the assembly as it was.
func (a *Assembly[T]) Add(c *messages.Chunk) (bool, error) {
	if a.done {
		return false, ErrDuplicate
	}
	if a.err != nil {
		return false, a.err
	}
	piece, err := pieceOf[T](c)
	if err != nil {
		return false, err
	}
	size := sizeOf[T]()
	seq, count, off, total, n := c.Seq, c.Count, c.Offset, c.Total, int64(len(piece))
	if total < 0 || total > MaxPayload/size || n > MaxPiece/size || count < 1 || count > max(1, total) ||
		total > count*(MaxPiece/size) || seq < 0 || seq >= count || off < 0 || off > total-n {
		return false, fmt.Errorf("%w: chunk %d of %d (offset %d, %d elements, payload %d)", ErrMalformed, seq, count, off, n, total)
	}
	switch {
	case a.count == 0 && a.into && total != int64(len(a.dst)):
		return false, fmt.Errorf("%w: payload of %d elements, want %d", ErrMalformed, total, len(a.dst))
	case a.count != 0 && (count != a.count || total != a.total):
		return false, fmt.Errorf("%w: chunk %d of %d (payload %d) disagrees with the payload's first chunk (%d chunks, payload %d)",
			ErrMalformed, seq, count, total, a.count, a.total)
	case a.got[seq]:
		return false, ErrDuplicate
	}
	if err := Verify(c); err != nil {
		return false, err
	}
	if count == 1 {
		// The only chunk: the payload in one piece, with no bookkeeping.
		if n != total {
			return false, fmt.Errorf("%w: %d elements in a payload of %d sent whole", ErrMalformed, n, total)
		}
		a.count, a.total, a.done = 1, total, true
		a.data = piece
		if a.into {
			copy(a.dst, piece)
			a.data = a.dst
		}
		return true, nil
	}
	if a.got == nil {
		a.got = map[int64]bool{}
		a.count, a.total = count, total
	}
	a.got[seq] = true
	s := span[T]{off: off, n: n}
	if a.into {
		copy(a.dst[off:], piece)
	} else {
		s.data = piece
	}
	a.spans = append(a.spans, s)
	if int64(len(a.got)) < a.count {
		return false, nil
	}
	return a.complete()
}

// complete checks that the pieces received tile the payload and puts it together.
func (a *Assembly[T]) complete() (bool, error) {
	slices.SortFunc(a.spans, func(x, y span[T]) int { return cmp.Compare(x.off, y.off) })
	var end int64
	for _, s := range a.spans {
		if s.off != end {
			a.err = fmt.Errorf("%w: the %d chunks of a payload of %d elements overlap or leave a gap at %d", ErrMalformed, a.count, a.total, end)
			return false, a.err
		}
		end += s.n
	}
	if end != a.total {
		a.err = fmt.Errorf("%w: the %d chunks of a payload of %d elements carry %d", ErrMalformed, a.count, a.total, end)
		return false, a.err
	}
	if a.into {
		a.data = a.dst
	} else {
		a.data = make([]T, a.total)
		for _, s := range a.spans {
			copy(a.data[s.off:], s.data)
		}
	}
	a.spans, a.got, a.done = nil, nil, true
	return true, nil
}

// Complete tells whether the payload is whole.
func (a *Assembly[T]) Complete() bool { return a.done }

// Data returns the payload once whole (nil before).
func (a *Assembly[T]) Data() []T {
	if !a.done {
		return nil
	}
	return a.data
}

// Ordered takes the chunks of a stream that its receiver consumes as they come, in seq order:
// a Window's chunks come in the order they were sent, so one that is not the next was sent
// again (or is a peer's mistake) and is dropped. The stream's length is the chunks' count;
// their offsets and totals are the receiver's to check.
type Ordered struct {
	next, count int64
}

// Add checks the stream's next chunk: its place, and its CRC over its values, data and extra
// (as Seal took them). It returns true for the stream's last chunk. A chunk that is not the
// next one is ErrDuplicate; one whose count does not fit is an ErrMalformed error, and one
// whose piece does not match its CRC an ErrChecksum error.
func (o *Ordered) Add(c *messages.Chunk, extra ...[]byte) (bool, error) {
	if c == nil {
		return false, fmt.Errorf("%w: none in the message", ErrMalformed)
	}
	if c.Seq != o.next {
		return false, ErrDuplicate
	}
	if c.Count < 1 || c.Seq >= c.Count || (o.count != 0 && c.Count != o.count) {
		return false, fmt.Errorf("%w: chunk %d of %d of a stream of %d", ErrMalformed, c.Seq, c.Count, o.count)
	}
	if err := Verify(c, extra...); err != nil {
		return false, err
	}
	o.count = c.Count
	o.next++
	return o.next == o.count, nil
}

// Received returns the number of chunks taken.
func (o *Ordered) Received() int64 { return o.next }

// Window is a sender's flow control: at most size chunks sent and not acknowledged.
type Window struct {
	size, sent, acked int64
}

// NewWindow returns a window of size chunks (at least 1).
func NewWindow(size int64) Window { return Window{size: max(size, 1)} }

// Open tells whether the next chunk may be sent.
func (w *Window) Open() bool { return w.sent-w.acked < w.size }

// Next returns the seq of the next chunk and counts it as sent; call it only when Open.
func (w *Window) Next() int64 {
	w.sent++
	return w.sent - 1
}

// Ack takes an acknowledgement of every chunk up to and including seq. One for chunks
// acknowledged already, or for a chunk not sent yet, changes nothing.
func (w *Window) Ack(seq int64) {
	if seq >= w.acked && seq < w.sent {
		w.acked = seq + 1
	}
}

// Sent returns the number of chunks sent.
func (w *Window) Sent() int64 { return w.sent }

// Acked returns the number of chunks acknowledged.
func (w *Window) Acked() int64 { return w.acked }

// Out is a payload's chunks going out through a Window.
type Out struct {
	chunks []*messages.Chunk
	w      Window
}

// NewOut returns chunks, as Split made them, ready to go out window at a time.
func NewOut(chunks []*messages.Chunk, window int64) *Out {
	return &Out{chunks: chunks, w: NewWindow(window)}
}

// Pump sends, through send, every chunk the window lets go now.
func (o *Out) Pump(send func(*messages.Chunk)) {
	for o.w.Sent() < int64(len(o.chunks)) && o.w.Open() {
		send(o.chunks[o.w.Next()])
	}
}

// Ack takes the receiver's acknowledgement of the chunks up to and including seq.
func (o *Out) Ack(seq int64) { o.w.Ack(seq) }

// Done tells whether every chunk was sent and acknowledged.
func (o *Out) Done() bool { return o.w.Acked() == int64(len(o.chunks)) }
