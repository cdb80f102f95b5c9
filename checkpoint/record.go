package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"strconv"
)

const (
	// magic starts every marshaled record.
	magic = "DIDNMFCK"
	// formatVersion is the version of the format written and read.
	formatVersion uint16 = 1
	// headerSize is the size of the magic and the version.
	headerSize = len(magic) + 2
	// trailerSize is the size of the checksum trailer.
	trailerSize = 4
	// maxJobLen is the longest job name.
	maxJobLen = 64
)

// castagnoli is the CRC-32C table of the checksum trailer.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by every error about a checkpoint that must not be used: one that
// fails its checksum, is truncated, has a bad magic, version or length, or is not the
// checkpoint its file name says. Every error from [Unmarshal] wraps it. Test for it with
// errors.Is.
var ErrCorrupt = errors.New("checkpoint: corrupt checkpoint")

// corruptError is an error about a corrupt checkpoint; its message is msg and it wraps
// ErrCorrupt.
type corruptError struct {
	msg string
}

func (e *corruptError) Error() string { return e.msg }

func (e *corruptError) Unwrap() error { return ErrCorrupt }

// corruptf returns a corruptError with message "checkpoint: " followed by the formatted text.
func corruptf(format string, args ...any) error {
	return &corruptError{msg: "checkpoint: " + fmt.Sprintf(format, args...)}
}

// Record is one shard's state at an iteration boundary.
//
// A valid record has a job name of 1 to 64 characters from [A-Za-z0-9_-], 0 <= Shard < Shards
// and Iteration >= 0; [Record.MarshalBinary] and [Unmarshal] reject others. Empty slices
// come back from [Unmarshal] as nil.
type Record struct {
	// Job is the job's name.
	Job string
	// Shard is the index of the shard, in [0, Shards).
	Shard int
	// Shards is the number of shards of the job.
	Shards int
	// Epoch is the job's epoch (incremented at each recovery) when the record was taken.
	Epoch uint64
	// Iteration is the iteration boundary the state is at.
	Iteration int64
	// Initial is the objective at the initialisation.
	Initial float64
	// Objective is the objective at Iteration.
	Objective float64
	// B is the M x K basis, column-major.
	B []float64
	// C is the K x n_i coefficient block of the shard, column-major.
	C []float64
	// State holds the algorithm-specific extra arrays: any count, any lengths, may be empty.
	State [][]float64
	// Stopper is the stop rule's history.
	Stopper []float64
}

// checkJob returns an error if job is not a valid job name: 1 to 64 characters from
// [A-Za-z0-9_-]. The message has no "checkpoint: " prefix.
func checkJob(job string) error {
	ok := len(job) >= 1 && len(job) <= maxJobLen
	for i := 0; ok && i < len(job); i++ {
		c := job[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
	}
	if !ok {
		return fmt.Errorf("invalid job name %q: want 1 to %d characters from [A-Za-z0-9_-]", job, maxJobLen)
	}
	return nil
}

// check returns an error if r is not a valid record. The message has no "checkpoint: " prefix.
func (r *Record) check() error {
	if err := checkJob(r.Job); err != nil {
		return err
	}
	if r.Shards < 1 || r.Shard < 0 || r.Shard >= r.Shards {
		return fmt.Errorf("invalid shard %d of %d shards", r.Shard, r.Shards)
	}
	if r.Iteration < 0 {
		return fmt.Errorf("invalid iteration %d", r.Iteration)
	}
	return nil
}

// MarshalBinary returns the record in the checkpoint format, checksum included (see the
// package documentation). It fails only for a nil or invalid record.
func (r *Record) MarshalBinary() ([]byte, error) {
	if r == nil {
		return nil, errors.New("checkpoint: cannot marshal a nil record")
	}
	if err := r.check(); err != nil {
		return nil, fmt.Errorf("checkpoint: cannot marshal record: %w", err)
	}
	size := headerSize + 8 + len(r.Job) + 6*8 + 8 + 8*len(r.B) + 8 + 8*len(r.C) + 8 + 8 + 8*len(r.Stopper) + trailerSize
	for _, s := range r.State {
		size += 8 + 8*len(s)
	}
	le := binary.LittleEndian
	buf := make([]byte, 0, size)
	buf = append(buf, magic...)
	buf = le.AppendUint16(buf, formatVersion)
	buf = le.AppendUint64(buf, uint64(len(r.Job)))
	buf = append(buf, r.Job...)
	buf = le.AppendUint64(buf, uint64(int64(r.Shard)))
	buf = le.AppendUint64(buf, uint64(int64(r.Shards)))
	buf = le.AppendUint64(buf, r.Epoch)
	buf = le.AppendUint64(buf, uint64(r.Iteration))
	buf = le.AppendUint64(buf, math.Float64bits(r.Initial))
	buf = le.AppendUint64(buf, math.Float64bits(r.Objective))
	buf = appendFloats(buf, r.B)
	buf = appendFloats(buf, r.C)
	buf = le.AppendUint64(buf, uint64(len(r.State)))
	for _, s := range r.State {
		buf = appendFloats(buf, s)
	}
	buf = appendFloats(buf, r.Stopper)
	buf = le.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
	return buf, nil
}

// appendFloats appends the length of v and its values to buf.
func appendFloats(buf []byte, v []float64) []byte {
	buf = binary.LittleEndian.AppendUint64(buf, uint64(len(v)))
	for _, x := range v {
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(x))
	}
	return buf
}

// decoder reads the fields of a marshaled record; the first error sticks.
type decoder struct {
	data []byte
	off  int
	err  error
}

// remaining returns the number of bytes left to read.
func (d *decoder) remaining() int { return len(d.data) - d.off }

// take returns the next n bytes, or nil and sets a truncation error naming what if there
// are fewer.
func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n > d.remaining() {
		d.err = corruptf("truncated: %s needs %d bytes at offset %d, only %d remain", what, n, d.off, d.remaining())
		return nil
	}
	b := d.data[d.off : d.off+n]
	d.off += n
	return b
}

// u64 reads a uint64.
func (d *decoder) u64(what string) uint64 {
	b := d.take(8, what)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

// int reads an int64 that must fit an int.
func (d *decoder) int(what string) int {
	v := int64(d.u64(what))
	if d.err == nil && int64(int(v)) != v {
		d.err = corruptf("%s %d out of range at offset %d", what, v, d.off-8)
	}
	return int(v)
}

// count reads a length or count of items of size bytes each, and checks that the remaining
// bytes could hold that many, so that nothing absurd gets allocated.
func (d *decoder) count(size int, what string) int {
	at := d.off
	n := d.u64(what + " length")
	if d.err != nil {
		return 0
	}
	if n > uint64(d.remaining()/size) {
		d.err = corruptf("truncated: %s length %d at offset %d needs %s bytes, only %d remain",
			what, n, at, strconv.FormatUint(n, 10)+" x "+strconv.Itoa(size), d.remaining())
		return 0
	}
	return int(n)
}

// floats reads a length-prefixed float64 array; an empty one is nil.
func (d *decoder) floats(what string) []float64 {
	n := d.count(8, what)
	if d.err != nil || n == 0 {
		return nil
	}
	b := d.take(8*n, what)
	v := make([]float64, n)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v
}

// Unmarshal decodes and verifies a record marshaled by [Record.MarshalBinary]: its magic,
// version, lengths, checksum (CRC-32C of everything before the trailer) and fields. Every
// error wraps [ErrCorrupt], with a message such as "checkpoint: checksum mismatch (stored
// 0x..., computed 0x...)" or "checkpoint: truncated: ...". It never panics, and it checks
// every length against the bytes remaining before allocating. The record does not share
// memory with data.
func Unmarshal(data []byte) (*Record, error) {
	if len(data) < headerSize {
		return nil, corruptf("truncated: %d bytes, a checkpoint has at least %d", len(data), headerSize+trailerSize)
	}
	if string(data[:len(magic)]) != magic {
		return nil, corruptf("bad magic %q, want %q", data[:len(magic)], magic)
	}
	if v := binary.LittleEndian.Uint16(data[len(magic):]); v != formatVersion {
		return nil, corruptf("unsupported format version %d (want %d)", v, formatVersion)
	}
	d := &decoder{data: data, off: headerSize}
	r := &Record{}
	n := d.count(1, "job name")
	if d.err == nil && n > maxJobLen {
		return nil, corruptf("job name length %d at offset %d exceeds %d", n, headerSize, maxJobLen)
	}
	r.Job = string(d.take(n, "job name"))
	r.Shard = d.int("shard")
	r.Shards = d.int("shards")
	r.Epoch = d.u64("epoch")
	r.Iteration = int64(d.u64("iteration"))
	r.Initial = math.Float64frombits(d.u64("initial objective"))
	r.Objective = math.Float64frombits(d.u64("objective"))
	r.B = d.floats("B")
	r.C = d.floats("C")
	// Each state array takes at least its 8-byte length.
	if n := d.count(8, "State"); n > 0 {
		r.State = make([][]float64, n)
		for i := range r.State {
			r.State[i] = d.floats("State[" + strconv.Itoa(i) + "]")
		}
	}
	r.Stopper = d.floats("Stopper")
	if d.err != nil {
		return nil, d.err
	}
	switch rem := d.remaining(); {
	case rem < trailerSize:
		return nil, corruptf("truncated: checksum trailer needs %d bytes at offset %d, only %d remain", trailerSize, d.off, rem)
	case rem > trailerSize:
		return nil, corruptf("%d unexpected bytes at offset %d before the checksum trailer", rem-trailerSize, d.off)
	}
	stored := binary.LittleEndian.Uint32(data[d.off:])
	if computed := crc32.Checksum(data[:d.off], castagnoli); stored != computed {
		return nil, corruptf("checksum mismatch (stored 0x%08x, computed 0x%08x)", stored, computed)
	}
	if err := r.check(); err != nil {
		return nil, corruptf("invalid record: %v", err)
	}
	return r, nil
}
