package checkpoint

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The fuzz targets feed arbitrary bytes to the two readers of checkpoints: Unmarshal (what a
// buddy receives over the wire, and what every file read goes through) and the Store's read
// path (a file on disk, and WriteBytes). Their committed corpora, in testdata/fuzz, run as
// regression inputs in plain go test.

// decodeAllocBound is the most Unmarshal may allocate for n bytes of input: the record's
// arrays hold at most n bytes of values, the State slice headers at most 3n (each array takes
// at least its 8-byte length), their names ("State[i]") about 2n; the rest is constant. An
// announced length never counts, only the bytes that are there.
func decodeAllocBound(n int) uint64 { return 8*uint64(n) + 8<<10 }

// unmarshalMeasured runs Unmarshal and returns the bytes it allocated.
func unmarshalMeasured(data []byte) (*Record, error, uint64) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r, err := Unmarshal(data)
	runtime.ReadMemStats(&after)
	return r, err, after.TotalAlloc - before.TotalAlloc
}

// fuzzSeeds returns real marshaled records and hand-made edge cases: absurd announced
// lengths (sealed with a valid checksum, so that only the bounds checks stop them),
// truncations and trailing bytes.
func fuzzSeeds(f *testing.F) [][]byte {
	good := mustMarshal(f, testRecord("cut", 0, 1))
	empty := rawRecord("j", 0, 1, 0)
	clone := func(b []byte) []byte { return bytes.Clone(b) }
	return [][]byte{
		nil,
		[]byte(magic),
		mustMarshal(f, &Record{Job: "j", Shards: 1}),
		mustMarshal(f, testRecord("fuzz", 1, 42)),
		mustMarshal(f, &Record{Job: "s", Shards: 1, B: specialsFn(), State: [][]float64{{negZero}, nil, specialsFn()}}),
		mustMarshal(f, &Record{Job: strings.Repeat("x", maxJobLen), Shard: 6, Shards: 7, Epoch: 1 << 63, Iteration: 1<<63 - 1,
			State: make([][]float64, 9)}),
		seal(u64s(clone(empty), 1<<40, 0, 0, 0)),                       // B length 2^40
		seal(u64s(clone(empty), 1<<20, 0, 0, 0)),                       // B length 2^20: 8 MiB if trusted
		seal(u64s(clone(empty), 0, 0, 1<<20, 0)),                       // State count 2^20: 24 MiB if trusted
		seal(u64s(clone(empty), 0, 1<<62, 0, 0)),                       // C length 2^62
		seal(u64s(clone(empty), 0, 0, 1<<61, 0)),                       // State count 2^61
		seal(u64s(clone(empty), 0, 0, 1, 1<<60, 0)),                    // State[0] length 2^60
		seal(u64s(clone(empty), 0, 0, 0, 1<<63)),                       // Stopper length 2^63
		seal(u64s(clone(empty), 0, 0, 3, 0, 0, 0, 0)),                  // State arrays all empty
		seal(u64s(append([]byte(magic), 1, 0), 1<<62)),                 // job name length 2^62
		seal(u64s(append([]byte(magic), 1, 0), maxJobLen+1)),           // job name length 65
		seal(u64s(rawRecord("j", -1, 1<<62, 0), 0, 0, 0, 0)),           // bad shard
		seal(u64s(rawRecord("a/b", 0, 1, 0), 0, 0, 0, 0)),              // bad job name
		seal(u64s(rawRecord("j", 0, 1, -1), 0, 0, 0, 0)),               // bad iteration
		seal(u64s(clone(empty), 0, 0, 0, 0, 0)),                        // 8 bytes before the trailer
		u64s(clone(empty), 0, 0, 0, 0),                                 // no trailer
		good[:len(good)/2], good[:len(good)-1], append(clone(good), 0), // cut or extended
	}
}

// FuzzRecord feeds arbitrary bytes to the readers of checkpoints: Unmarshal (what a buddy
// receives over the wire, and what every file read goes through), the Store's read path (a
// file on disk) and WriteBytes (a buddy's receive path). It asserts:
//
//   - Unmarshal does not panic, allocates no more than decodeAllocBound, whatever lengths a
//     header announces, and its errors wrap ErrCorrupt and say "checkpoint: ";
//   - a record that decodes is valid, marshals back to the same bytes (the format is canonical)
//     and the same record, and every one-byte change and every truncation of it is rejected;
//   - Read and ReadBytes of a file holding the bytes agree, return a checkpoint only if
//     Unmarshal accepts the bytes and they hold the job, shard and iteration the file's name
//     says (then the record, and the file's bytes), and otherwise an error that wraps
//     ErrCorrupt and names the file;
//   - WriteBytes stores exactly what Read accepts, and leaves nothing when it refuses.
func FuzzRecord(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Add(mustMarshal(f, testRecord(fuzzJob, fuzzShard, fuzzIteration)))
	f.Add(mustMarshal(f, testRecord(fuzzJob, fuzzShard, fuzzIteration+1)))   // another iteration
	f.Add(mustMarshal(f, testRecord(fuzzJob, fuzzShard+1, fuzzIteration)))   // another shard
	f.Add(mustMarshal(f, testRecord(fuzzJob+"2", fuzzShard, fuzzIteration))) // another job
	f.Add(mustMarshal(f, &Record{Job: fuzzJob, Shard: fuzzShard, Shards: 2, Iteration: fuzzIteration}))
	s, err := Open(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	path, err := s.Path(Own, fuzzJob, fuzzShard, fuzzIteration)
	if err != nil {
		f.Fatal(err)
	}
	buddyPath, err := s.Path(Buddy, fuzzJob, fuzzShard, fuzzIteration)
	if err != nil {
		f.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
		checkStore(t, s, path, buddyPath, data)
	})
}

// The key FuzzRecord stores its inputs under.
const (
	fuzzJob       = "fuzz"
	fuzzShard     = 1
	fuzzIteration = 7
)

// checkDecode checks Unmarshal on data: what it allocates, its error, and for an accepted
// record, the round trip, and that every one-byte change and every truncation is rejected.
func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	r, err, alloc := unmarshalMeasured(data)
	if bound := decodeAllocBound(len(data)); alloc > bound {
		t.Fatalf("Unmarshal of %d bytes allocated %d bytes, more than %d (err = %v)", len(data), alloc, bound, err)
	}
	if err != nil {
		if !errors.Is(err, ErrCorrupt) || !strings.HasPrefix(err.Error(), "checkpoint: ") {
			t.Fatalf("error %q does not wrap ErrCorrupt", err)
		}
		return
	}
	if err := r.check(); err != nil {
		t.Fatalf("Unmarshal accepted an invalid record: %v", err)
	}
	again, err := r.MarshalBinary()
	if err != nil {
		t.Fatalf("accepted record does not marshal: %v", err)
	}
	if !bytes.Equal(again, data) {
		t.Fatalf("accepted record marshals to other bytes")
	}
	r2, err := Unmarshal(again)
	if err != nil || !recordsEqual(r, r2) {
		t.Fatalf("record does not survive a second round trip: %v", err)
	}
	// CRC-32C detects every error burst of up to 32 bits, so every one-byte change is
	// caught, wherever it lands (a length, the magic, a value, the trailer).
	bad := bytes.Clone(data)
	for off := range data {
		for _, mask := range []byte{1 << (off % 8), 0xff} {
			bad[off] ^= mask
			if _, err := Unmarshal(bad); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip 0x%02x at offset %d of %d: err = %v, want ErrCorrupt", mask, off, len(data), err)
			}
			bad[off] ^= mask
		}
	}
	for n := range len(data) {
		if _, err := Unmarshal(data[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncation to %d of %d bytes: err = %v, want ErrCorrupt", n, len(data), err)
		}
	}
}

// checkStore puts data where s keeps the own checkpoint of fuzzJob, fuzzShard at
// fuzzIteration (path), reads it back, and hands data to WriteBytes as a buddy copy (kept at
// buddyPath, removed after).
func checkStore(t *testing.T, s *Store, path, buddyPath string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	want, decodeErr := Unmarshal(data)
	matches := decodeErr == nil && want.Job == fuzzJob && want.Shard == fuzzShard && want.Iteration == fuzzIteration

	r, err := s.Read(Own, fuzzJob, fuzzShard, fuzzIteration)
	raw, rawErr := s.ReadBytes(Own, fuzzJob, fuzzShard, fuzzIteration)
	if (err == nil) != (rawErr == nil) {
		t.Fatalf("Read and ReadBytes disagree: %v, %v", err, rawErr)
	}
	if err != nil {
		if matches {
			t.Fatalf("Read refused a valid checkpoint of its key: %v", err)
		}
		if !errors.Is(err, ErrCorrupt) || !strings.HasPrefix(err.Error(), "checkpoint: ") || !strings.Contains(err.Error(), path) {
			t.Fatalf("Read error %q does not wrap ErrCorrupt or does not name %s", err, path)
		}
	} else {
		if !matches {
			t.Fatalf("Read returned a checkpoint Unmarshal refuses or of another key (decode error %v)", decodeErr)
		}
		if !recordsEqual(r, want) || !bytes.Equal(raw, data) {
			t.Fatalf("Read or ReadBytes returned something else than the file holds")
		}
	}

	// The receive path: WriteBytes stores exactly what Read accepts. (No buddy copy is
	// left from the previous input: it is removed below.)
	err = s.WriteBytes(Buddy, fuzzJob, fuzzShard, fuzzIteration, data)
	if (err == nil) != matches {
		t.Fatalf("WriteBytes = %v, but the bytes are a checkpoint of the key: %v", err, matches)
	}
	its, itErr := s.Iterations(Buddy, fuzzJob, fuzzShard)
	if itErr != nil {
		t.Fatal(itErr)
	}
	if err != nil {
		if decodeErr != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("WriteBytes error %q does not wrap ErrCorrupt", err)
		}
		if len(its) != 0 {
			t.Fatalf("a refused WriteBytes left checkpoints %v", its)
		}
		return
	}
	if len(its) != 1 || its[0] != fuzzIteration {
		t.Fatalf("after WriteBytes, iterations %v", its)
	}
	back, err := s.ReadBytes(Buddy, fuzzJob, fuzzShard, fuzzIteration)
	if err != nil || !bytes.Equal(back, data) {
		t.Fatalf("reading back what WriteBytes stored: %v", err)
	}
	if err := os.Remove(buddyPath); err != nil {
		t.Fatal(err)
	}
}
