package chunked

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/messages"
)

func floats(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(i) + 0.5
	}
	return out
}

// sameBits tells whether a and b hold the same float64 bits.
func sameBits(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) })
}

// TestSplit: a payload is cut into chunks of at most size elements that tile it, each sealed,
// sharing the payload's storage; an empty payload is one empty chunk.
func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		n, size, count int
	}{{0, 4, 1}, {1, 4, 1}, {4, 4, 1}, {5, 4, 2}, {10, 4, 3}, {12, 4, 3}, {3, 0, 3}} {
		data := floats(tc.n)
		chunks := Split(data, tc.size)
		if len(chunks) != tc.count {
			t.Fatalf("%d values by %d: %d chunks, want %d", tc.n, tc.size, len(chunks), tc.count)
		}
		var off int64
		for i, c := range chunks {
			if c.Seq != int64(i) || c.Count != int64(tc.count) || c.Offset != off || c.Total != int64(tc.n) || Verify(c) != nil {
				t.Fatalf("%d values by %d: chunk %d is %v", tc.n, tc.size, i, c)
			}
			if len(c.Values) > 0 && &c.Values[0] != &data[off] {
				t.Fatalf("chunk %d copied its values", i)
			}
			off += int64(len(c.Values))
		}
		if off != int64(tc.n) {
			t.Fatalf("%d values by %d: the chunks carry %d", tc.n, tc.size, off)
		}
	}
}

// TestAssembly reassembles payloads from chunks in every order the network may give them,
// and refuses what a sender would not send.
func TestAssembly(t *testing.T) {
	data := floats(10)
	chunks := func() []*messages.Chunk { return Split(data, 4) } // 3 chunks: 4, 4, 2 values
	clone := func(c *messages.Chunk) *messages.Chunk { return proto.Clone(c).(*messages.Chunk) }
	resealed := func(edit func(*messages.Chunk)) func([]*messages.Chunk) []*messages.Chunk {
		return func(cs []*messages.Chunk) []*messages.Chunk {
			c := clone(cs[1])
			edit(c)
			Seal(c)
			return []*messages.Chunk{cs[0], c, cs[2]}
		}
	}
	cases := []struct {
		name   string
		order  func([]*messages.Chunk) []*messages.Chunk
		err    error // of the first chunk refused (nil: the payload comes whole)
		dup    int   // duplicates dropped
		dstLen int   // with Into a slice of this length (0: the zero Assembly)
	}{
		{name: "in order", order: func(cs []*messages.Chunk) []*messages.Chunk { return cs }},
		{name: "reordered", order: func(cs []*messages.Chunk) []*messages.Chunk { return []*messages.Chunk{cs[2], cs[0], cs[1]} }},
		{name: "reordered into", order: func(cs []*messages.Chunk) []*messages.Chunk { return []*messages.Chunk{cs[1], cs[2], cs[0]} }, dstLen: 10},
		{name: "duplicated", dup: 2, order: func(cs []*messages.Chunk) []*messages.Chunk {
			return []*messages.Chunk{cs[1], cs[1], cs[0], clone(cs[1]), cs[2]}
		}},
		{name: "duplicate after the end", dup: 1, order: func(cs []*messages.Chunk) []*messages.Chunk { return append(cs, cs[0]) }},
		{name: "corrupted value", err: ErrChecksum, order: func(cs []*messages.Chunk) []*messages.Chunk {
			c := clone(cs[1])
			c.Values[2] = math.Float64frombits(math.Float64bits(c.Values[2]) ^ 1)
			return []*messages.Chunk{cs[0], c}
		}},
		{name: "corrupted CRC", err: ErrChecksum, order: func(cs []*messages.Chunk) []*messages.Chunk {
			c := clone(cs[0])
			c.Crc++
			return []*messages.Chunk{c}
		}},
		{name: "oversize total", err: ErrMalformed, order: resealed(func(c *messages.Chunk) { c.Total, c.Count = MaxPayload/8+1, 1<<20 })},
		{name: "total beyond the chunks' capacity", err: ErrMalformed, order: resealed(func(c *messages.Chunk) { c.Total = 3*MaxPiece/8 + 1 })},
		{name: "oversize piece", err: ErrMalformed, order: resealed(func(c *messages.Chunk) {
			c.Values, c.Offset, c.Total, c.Count = make([]float64, MaxPiece/8+1), 0, 3*MaxPiece/8, 3
		})},
		{name: "offset past the end", err: ErrMalformed, order: resealed(func(c *messages.Chunk) { c.Offset = 7 })},
		{name: "negative offset", err: ErrMalformed, order: resealed(func(c *messages.Chunk) { c.Offset = -1 })},
		{name: "seq out of range", err: ErrMalformed, order: resealed(func(c *messages.Chunk) { c.Seq = 3 })},
		{name: "more chunks than elements", err: ErrMalformed, order: resealed(func(c *messages.Chunk) { c.Count = 11 })},
		{name: "count disagrees", err: ErrMalformed, order: resealed(func(c *messages.Chunk) { c.Count = 4 })},
		{name: "total disagrees", err: ErrMalformed, order: resealed(func(c *messages.Chunk) { c.Total = 11 })},
		{name: "overlapping pieces", err: ErrMalformed, order: resealed(func(c *messages.Chunk) { c.Offset = 2 })},
		{name: "a gap", err: ErrMalformed, order: resealed(func(c *messages.Chunk) { c.Values = c.Values[:3] })},
		{name: "bytes in a chunk of values", err: ErrMalformed, order: resealed(func(c *messages.Chunk) { c.Data = []byte{1} })},
		{name: "no chunk", err: ErrMalformed, order: func([]*messages.Chunk) []*messages.Chunk { return []*messages.Chunk{nil} }},
		{name: "wrong length for the destination", err: ErrMalformed, dstLen: 9, order: func(cs []*messages.Chunk) []*messages.Chunk { return cs }},
		{name: "one chunk short of its payload", err: ErrMalformed, order: func([]*messages.Chunk) []*messages.Chunk {
			c := &messages.Chunk{Count: 1, Total: 3, Values: []float64{1, 2}}
			Seal(c)
			return []*messages.Chunk{c}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := &Assembly[float64]{}
			if tc.dstLen > 0 {
				a = Into(make([]float64, tc.dstLen))
			}
			var full bool
			var err error
			dups := 0
			for _, c := range tc.order(chunks()) {
				var f bool
				f, err = a.Add(c)
				if errors.Is(err, ErrDuplicate) {
					dups++
					err = nil
					continue
				}
				full = full || f
				if err != nil {
					break
				}
			}
			if tc.err != nil {
				if !errors.Is(err, tc.err) || full || a.Complete() || a.Data() != nil {
					t.Fatalf("got %v (whole %v), want %v", err, full, tc.err)
				}
				return
			}
			if err != nil || !full || !a.Complete() || !sameBits(a.Data(), data) || dups != tc.dup {
				t.Fatalf("whole %v, err %v, %d duplicates, data %v", full, err, dups, a.Data())
			}
		})
	}
}

// TestAssemblyBytesAndInPlace: a byte payload comes back whole, and a payload of one chunk is
// that chunk's piece, not a copy.
func TestAssemblyBytesAndInPlace(t *testing.T) {
	for _, n := range []int{0, 1, 5, 16, 17} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(3*i + 1)
		}
		var a Assembly[byte]
		cs := Split(data, 4)
		for i := len(cs) - 1; i >= 0; i-- {
			full, err := a.Add(cs[i])
			if err != nil || full != (i == 0) {
				t.Fatalf("%d bytes, chunk %d: whole %v, %v", n, i, full, err)
			}
		}
		if !bytes.Equal(a.Data(), data) {
			t.Fatalf("%d bytes: got %v", n, a.Data())
		}
		var b Assembly[float64]
		if _, err := b.Add(cs[0]); n > 0 && !errors.Is(err, ErrMalformed) {
			t.Fatalf("a chunk of bytes taken as values: %v", err)
		}
	}
	data := floats(3)
	var a Assembly[float64]
	if full, err := a.Add(Split(data, 4)[0]); !full || err != nil || &a.Data()[0] != &data[0] {
		t.Fatalf("one chunk: whole %v, %v, copied %v", full, err, &a.Data()[0] != &data[0])
	}
}

// TestOrdered takes a stream's chunks in order, drops those sent again or out of order, and
// checks the CRC over what the carrying message holds beside the chunk.
func TestOrdered(t *testing.T) {
	ptr := []int64{0, 2, 3}
	rows := []int32{4, 1, 0}
	chunk := func(seq, count int64) *messages.Chunk {
		c := &messages.Chunk{Seq: seq, Count: count, Values: []float64{float64(seq), 1}}
		Seal(c, LE(ptr), LE(rows))
		return c
	}
	type step struct {
		c    *messages.Chunk
		last bool
		err  error
	}
	corrupt := chunk(1, 3)
	corrupt.Values[1] = 2
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"in order", []step{{c: chunk(0, 3)}, {c: chunk(1, 3)}, {c: chunk(2, 3), last: true}}},
		{"one chunk", []step{{c: chunk(0, 1), last: true}}},
		{"sent again", []step{{c: chunk(0, 3)}, {c: chunk(0, 3), err: ErrDuplicate}, {c: chunk(1, 3)}}},
		{"out of order", []step{{c: chunk(1, 3), err: ErrDuplicate}, {c: chunk(0, 3)}, {c: chunk(2, 3), err: ErrDuplicate}}},
		{"count changes", []step{{c: chunk(0, 3)}, {c: chunk(1, 2), err: ErrMalformed}}},
		{"seq past the count", []step{{c: chunk(0, 0), err: ErrMalformed}}},
		{"corrupted", []step{{c: chunk(0, 3)}, {c: corrupt, err: ErrChecksum}, {c: chunk(1, 3)}}},
		{"no chunk", []step{{c: nil, err: ErrMalformed}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o Ordered
			taken := int64(0)
			for i, st := range tc.steps {
				last, err := o.Add(st.c, LE(ptr), LE(rows))
				if last != st.last || !errors.Is(err, st.err) || (st.err == nil) != (err == nil) {
					t.Fatalf("step %d: last %v, %v; want %v, %v", i, last, err, st.last, st.err)
				}
				if err == nil {
					taken++
				}
			}
			if o.Received() != taken {
				t.Fatalf("received %d, took %d", o.Received(), taken)
			}
		})
	}
}

// TestWindowIsNeverExceeded drives windows with every kind of acknowledgement (in order,
// skipping ahead, repeated, stale, for chunks not sent yet) and checks at every step that no
// more than the window's size are in flight, and that the stream ends with every chunk sent.
func TestWindowIsNeverExceeded(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		size, chunks int64
	}{{1, 7}, {4, 1}, {4, 34}, {3, 100}} {
		out := NewOut(Split(floats(int(tc.chunks)), 1), tc.size)
		var sent []int64
		for steps := 0; !out.Done(); steps++ {
			out.Pump(func(c *messages.Chunk) { sent = append(sent, c.Seq) })
			if inFlight := out.w.Sent() - out.w.Acked(); inFlight > tc.size || inFlight < 0 {
				t.Fatalf("window %d: %d chunks in flight", tc.size, inFlight)
			}
			if steps > 10000 {
				t.Fatalf("window %d: stuck at %d sent, %d acknowledged", tc.size, out.w.Sent(), out.w.Acked())
			}
			switch r.IntN(5) {
			case 0:
				out.Ack(out.w.Sent() + r.Int64N(5)) // not sent yet: ignored
			case 1:
				out.Ack(out.w.Acked() - 1 - r.Int64N(3)) // stale
			default:
				if n := out.w.Sent() - out.w.Acked(); n > 0 {
					out.Ack(out.w.Acked() + r.Int64N(n)) // some of those in flight
				}
			}
		}
		if int64(len(sent)) != tc.chunks || !slices.IsSorted(sent) || sent[len(sent)-1] != tc.chunks-1 {
			t.Fatalf("window %d: sent %v", tc.size, sent)
		}
	}
	// A window that is full stays shut until an acknowledgement.
	w := NewWindow(2)
	w.Next()
	w.Next()
	w.Ack(5)
	if w.Open() {
		t.Fatal("an acknowledgement of a chunk not sent opened the window")
	}
	w.Ack(0)
	if !w.Open() || w.Acked() != 1 {
		t.Fatalf("acknowledged %d, open %v", w.Acked(), w.Open())
	}
}

// TestChecksumPortable: the CRC over the values' memory is the CRC-32C of their little-endian
// bytes, whatever the length (empty, shorter and longer than the portable path's buffer) and
// the values (negative zero, NaN payloads, infinities, negative indices).
func TestChecksumPortable(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 63, 64, 65, 1000, 1 << 17} {
		data := make([]float64, n)
		ints := make([]int64, n)
		rows := make([]int32, n)
		raw := make([]byte, n)
		for i := range data {
			data[i] = math.Float64frombits(r.Uint64())
			ints[i], rows[i], raw[i] = int64(r.Uint64()), int32(r.Uint32()), byte(r.Uint32())
		}
		if n > 3 {
			data[0], data[1], data[2] = math.Copysign(0, -1), math.Inf(1), math.NaN()
		}
		for _, c := range []struct{ fast, portable uint32 }{
			{update(7, data), updatePortable(7, data)},
			{update(7, ints), updatePortable(7, ints)},
			{update(7, rows), updatePortable(7, rows)},
			{update(7, raw), updatePortable(7, raw)},
		} {
			if c.fast != c.portable {
				t.Fatalf("%d values: CRC %08x, portable %08x", n, c.fast, c.portable)
			}
		}
		if !bytes.Equal(LE(ints), appendLE(nil, ints)) {
			t.Fatalf("%d values: LE is not their little-endian bytes", n)
		}
	}
	if update(0, []float64(nil)) != 0 {
		t.Fatal("CRC of nothing is not 0")
	}
}
