package chunked

import (
	"errors"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/messages"
)

// encodeChunks writes chunks as FuzzReassembly reads them: each marshaled, length first.
func encodeChunks(tb testing.TB, chunks ...*messages.Chunk) []byte {
	var out []byte
	for _, c := range chunks {
		b, err := proto.Marshal(c)
		if err != nil {
			tb.Fatal(err)
		}
		out = protowire.AppendBytes(out, b)
	}
	return out
}

// fuzzDst is the length of the payload FuzzReassembly's Into assembly expects.
const fuzzDst = 6

// FuzzReassembly feeds a sequence of chunks, as a hostile peer may send them, to every receiver
// of the layer: an Assembly of values, one into a slice, one of bytes, and an Ordered stream.
// None may panic or return an error of another kind than the layer's; a payload an Assembly
// calls whole must be exactly the pieces it accepted, tiled; and an Ordered stream accepts
// chunks 0, 1, 2, ... only, its last one last.
func FuzzReassembly(f *testing.F) {
	vals := Split(floats(10), 4)
	f.Add(encodeChunks(f, vals...))
	f.Add(encodeChunks(f, vals[2], vals[0], vals[0], vals[1]))
	f.Add(encodeChunks(f, Split(floats(fuzzDst), 4)...))
	f.Add(encodeChunks(f, Split([]byte("a checkpoint copy in chunks"), 5)...))
	bad := proto.Clone(vals[1]).(*messages.Chunk)
	bad.Values[0]++
	f.Add(encodeChunks(f, vals[0], bad, vals[2]))
	f.Add(encodeChunks(f, &messages.Chunk{Seq: 0, Count: 1 << 40, Total: 1 << 40}))
	f.Fuzz(func(t *testing.T, data []byte) {
		var chunks []*messages.Chunk
		for len(data) > 0 && len(chunks) < 64 {
			b, n := protowire.ConsumeBytes(data)
			if n < 0 {
				break
			}
			data = data[n:]
			c := &messages.Chunk{}
			if proto.Unmarshal(b, c) != nil {
				continue
			}
			chunks = append(chunks, c)
		}
		checkAssembly(t, &Assembly[float64]{}, chunks, (*messages.Chunk).GetValues)
		checkAssembly(t, Into(make([]float64, fuzzDst)), chunks, (*messages.Chunk).GetValues)
		checkAssembly(t, &Assembly[byte]{}, chunks, (*messages.Chunk).GetData)
		var o Ordered
		for _, c := range chunks {
			last, err := o.Add(c)
			if err != nil {
				if !errors.Is(err, ErrDuplicate) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrChecksum) {
					t.Fatalf("ordered: error of no kind: %v", err)
				}
				continue
			}
			if c.Seq != o.Received()-1 || last != (c.Seq == c.Count-1) || Verify(c) != nil {
				t.Fatalf("ordered: took chunk %d of %d (last %v) as chunk %d", c.Seq, c.Count, last, o.Received()-1)
			}
		}
	})
}

// checkAssembly adds chunks to a and checks what it makes of them.
func checkAssembly[T Elem](t *testing.T, a *Assembly[T], chunks []*messages.Chunk, piece func(*messages.Chunk) []T) {
	var taken []*messages.Chunk
	for _, c := range chunks {
		wasDone := a.Complete()
		full, err := a.Add(c)
		switch {
		case wasDone && !errors.Is(err, ErrDuplicate):
			t.Fatalf("a chunk after the payload was whole: %v", err)
		case err != nil && !errors.Is(err, ErrDuplicate) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrChecksum):
			t.Fatalf("error of no kind: %v", err)
		case err != nil:
			continue
		}
		if Verify(c) != nil {
			t.Fatalf("took chunk %d with a bad CRC", c.Seq)
		}
		taken = append(taken, c)
		if full != a.Complete() {
			t.Fatalf("Add said whole %v, Complete %v", full, a.Complete())
		}
		if !full {
			continue
		}
		total := c.Total
		if int64(len(a.Data())) != total || int64(len(taken)) != c.Count {
			t.Fatalf("whole with %d elements from %d chunks; the chunks say %d from %d", len(a.Data()), len(taken), total, c.Count)
		}
		want := make([]T, total)
		covered := make([]bool, total)
		for _, p := range taken {
			for i, v := range piece(p) {
				at := p.Offset + int64(i)
				if covered[at] {
					t.Fatalf("whole from overlapping chunks")
				}
				covered[at], want[at] = true, v
			}
		}
		if slices.Contains(covered, false) {
			t.Fatal("whole with a gap")
		}
		if !sameElems(a.Data(), want) {
			t.Fatalf("whole as %v, the chunks make %v", a.Data(), want)
		}
	}
}

// sameElems compares bitwise (NaN payloads included).
func sameElems[T Elem](a, b []T) bool {
	switch x := any(a).(type) {
	case []float64:
		return sameBits(x, any(b).([]float64))
	}
	return slices.Equal(a, b)
}
