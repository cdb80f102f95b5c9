package actors

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/didnmf/didnmf/messages"
)

// ChunkFloats is the largest number of float64 values one message carries (1 MiB of data).
// Larger payloads are split into chunks and reassembled; protoactor's gRPC transport tears a
// connection down when a message or a batch of messages passes its size limit.
const ChunkFloats = 1 << 17

// maxPayloadFloats caps the total length a chunk header may announce (2^31 values, 16 GiB):
// a header claiming more is malformed. Nothing is allocated for what a header announces: a
// payload's memory is that of the chunks that actually arrived until it is whole.
const maxPayloadFloats = 1 << 31

// maxChunkValues caps the values one chunk may carry (8 times ChunkFloats).
const maxChunkValues = 1 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrChecksum marks a payload whose reassembled values do not match their checksum: the data
// was corrupted on its way, and the job fails rather than compute with it.
var ErrChecksum = errors.New("checksum mismatch")

// isCorruption tells whether err comes from a checksum mismatch.
func isCorruption(err error) bool { return errors.Is(err, ErrChecksum) }

// Checksum returns the CRC-32C of the little-endian bytes of data's float64 values.
func Checksum(data []float64) uint32 {
	if littleEndian {
		// The values' memory is their little-endian bytes: one pass of the hardware CRC over
		// it (checksumPortable's copy through a buffer cost 6% of a node's CPU in a small
		// allreduce).
		return crc32.Update(0, castagnoli, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(data))), 8*len(data)))
	}
	return checksumPortable(data)
}

// littleEndian tells whether this machine stores a float64 as its little-endian bytes.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// checksumPortable is Checksum on any byte order.
func checksumPortable(data []float64) uint32 {
	var buf [512]byte
	var crc uint32
	for len(data) > 0 {
		n := min(len(data), len(buf)/8)
		for i, v := range data[:n] {
			binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(v))
		}
		crc = crc32.Update(crc, castagnoli, buf[:8*n])
		data = data[n:]
	}
	return crc
}

// chunk is one piece of a chunked payload.
type chunk struct {
	index, count int32
	offset       int64
	data         []float64
}

// splitChunks cuts data into chunks of at most ChunkFloats values (one empty chunk for an empty
// payload). The chunks share data's storage.
func splitChunks(data []float64) []chunk { return splitChunksOf(data, ChunkFloats) }

// splitChunksOf is splitChunks with chunks of at most size values.
func splitChunksOf(data []float64, size int) []chunk {
	count := max(1, (len(data)+size-1)/size)
	out := make([]chunk, count)
	for i := range out {
		lo := min(i*size, len(data))
		hi := min(lo+size, len(data))
		out[i] = chunk{index: int32(i), count: int32(count), offset: int64(lo), data: data[lo:hi]}
	}
	return out
}

// assembly reassembles one chunked payload and checks its checksum. With dst set, the payload
// is written into dst (whose length must be the payload's); otherwise into a new slice, or for
// an unchunked payload the message's own slice.
type assembly struct {
	dst      []float64
	total    int64
	count    int32
	checksum uint32
	got      map[int32]bool
	received int32
	data     []float64
	// parts holds the chunks received so far when there is no dst, by index, with their
	// offsets: the payload is allocated once every chunk is in.
	parts map[int32]chunkHeader
	sum   int64 // values received
}

// chunkHeader is what every chunked message carries.
type chunkHeader struct {
	chunk, chunks int32
	offset, total int64
	checksum      uint32
	data          []float64
}

// chunked is a message that carries one chunk of a payload: Partial, Reduced, ResultChunk.
type chunked interface {
	GetChunk() int32
	GetChunks() int32
	GetOffset() int64
	GetTotalLen() int64
	GetChecksum() uint32
	GetData() []float64
}

// headerOf returns a chunked message's chunk header.
func headerOf(m chunked) chunkHeader {
	return chunkHeader{chunk: m.GetChunk(), chunks: m.GetChunks(), offset: m.GetOffset(), total: m.GetTotalLen(),
		checksum: m.GetChecksum(), data: m.GetData()}
}

// errDuplicateChunk marks a chunk that was already received: it is dropped, not an error.
var errDuplicateChunk = fmt.Errorf("duplicate chunk")

// add takes one chunk. It returns true when the payload is complete and its checksum matches.
// A chunk that does not fit the payload's header, or a checksum mismatch, is an error.
// An unchunked payload (chunks == 1) is used in place, without a copy.
func (a *assembly) add(h chunkHeader) (bool, error) {
	if h.chunks < 1 || h.chunk < 0 || h.chunk >= h.chunks || h.total < 0 || h.total > maxPayloadFloats ||
		h.offset < 0 || h.offset+int64(len(h.data)) > h.total || len(h.data) > maxChunkValues ||
		h.total > int64(h.chunks)*maxChunkValues {
		return false, fmt.Errorf("malformed chunk %d of %d (offset %d, %d values, total %d)",
			h.chunk, h.chunks, h.offset, len(h.data), h.total)
	}
	if a.got == nil {
		if a.dst != nil && int64(len(a.dst)) != h.total {
			return false, fmt.Errorf("malformed message: payload of %d values, want %d", h.total, len(a.dst))
		}
		if h.chunks == 1 && a.dst == nil {
			if int64(len(h.data)) != h.total {
				return false, fmt.Errorf("malformed message: %d values, header says %d", len(h.data), h.total)
			}
			if Checksum(h.data) != h.checksum {
				return false, fmt.Errorf("%w in a payload of %d values", ErrChecksum, h.total)
			}
			a.data, a.total, a.count, a.received = h.data, h.total, 1, 1
			a.got = map[int32]bool{0: true}
			return true, nil
		}
		a.total, a.count, a.checksum = h.total, h.chunks, h.checksum
		a.got = map[int32]bool{}
		a.data = a.dst
	} else if h.total != a.total || h.chunks != a.count || h.checksum != a.checksum {
		return false, fmt.Errorf("chunk %d of %d disagrees with the payload's first chunk", h.chunk, h.chunks)
	}
	if a.got[h.chunk] {
		return false, errDuplicateChunk
	}
	a.got[h.chunk] = true
	a.received++
	a.sum += int64(len(h.data))
	if a.data != nil {
		copy(a.data[h.offset:], h.data)
	} else {
		if a.parts == nil {
			a.parts = map[int32]chunkHeader{}
		}
		a.parts[h.chunk] = h
	}
	if a.received < a.count {
		return false, nil
	}
	if a.sum != a.total {
		return false, fmt.Errorf("malformed payload: %d chunks carry %d values, the header says %d", a.count, a.sum, a.total)
	}
	if a.data == nil {
		a.data = make([]float64, a.total)
		for _, p := range a.parts {
			copy(a.data[p.offset:], p.data)
		}
		a.parts = nil
	}
	if Checksum(a.data) != a.checksum {
		return false, fmt.Errorf("%w in a payload of %d values reassembled from %d chunks", ErrChecksum, a.total, a.count)
	}
	return true, nil
}

// pidOf converts a wire Pid to protoactor's.
func pidOf(p *messages.Pid) *actor.PID {
	if p == nil {
		return nil
	}
	return actor.NewPID(p.Address, p.Id)
}

// wirePid converts a protoactor PID to the wire form.
func wirePid(p *actor.PID) *messages.Pid {
	if p == nil {
		return nil
	}
	return &messages.Pid{Address: p.Address, Id: p.Id}
}
