package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// Special float64 values whose bits must survive a round trip.
var (
	negZero    = math.Copysign(0, -1)
	quietNaN   = math.Float64frombits(0x7ff8000000000123)
	signalNaN  = math.Float64frombits(0x7ff0000000000001)
	negNaN     = math.Float64frombits(0xfff80000deadbeef)
	subnormal  = math.Float64frombits(1)
	specialsFn = func() []float64 {
		return []float64{0, negZero, math.Inf(1), math.Inf(-1), math.NaN(), quietNaN, signalNaN, negNaN,
			subnormal, -subnormal, math.MaxFloat64, -math.SmallestNonzeroFloat64, 1, -1.5}
	}
)

// seq returns n values derived from seed, spread over many magnitudes and signs.
func seq(n int, seed float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.Sin(seed+float64(i)) * math.Pow(10, float64(i%41-20))
	}
	return v
}

// testRecord returns a small valid record with a few State arrays.
func testRecord(job string, shard int, iteration int64) *Record {
	return &Record{
		Job: job, Shard: shard, Shards: shard + 2, Epoch: 3, Iteration: iteration,
		Initial: 1234.5, Objective: 17.25,
		B:       seq(6, 1),
		C:       seq(4, 2),
		State:   [][]float64{seq(3, 3), nil, {negZero}},
		Stopper: []float64{1e3, 5e2},
	}
}

// bitsEqual reports whether a and b hold the same float64 bits; nil equals empty.
func bitsEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// recordsEqual reports whether a and b are bitwise the same record; nil slices equal empty
// ones.
func recordsEqual(a, b *Record) bool {
	if a.Job != b.Job || a.Shard != b.Shard || a.Shards != b.Shards || a.Epoch != b.Epoch || a.Iteration != b.Iteration ||
		math.Float64bits(a.Initial) != math.Float64bits(b.Initial) ||
		math.Float64bits(a.Objective) != math.Float64bits(b.Objective) ||
		!bitsEqual(a.B, b.B) || !bitsEqual(a.C, b.C) || !bitsEqual(a.Stopper, b.Stopper) || len(a.State) != len(b.State) {
		return false
	}
	for i := range a.State {
		if !bitsEqual(a.State[i], b.State[i]) {
			return false
		}
	}
	return true
}

// mustMarshal marshals r or fails the test.
func mustMarshal(t testing.TB, r *Record) []byte {
	t.Helper()
	data, err := r.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary: %v", err)
	}
	return data
}

func TestRoundTrip(t *testing.T) {
	big := seq(1<<18, 7)
	tests := []struct {
		name string
		rec  Record
	}{
		{"minimal", Record{Job: "j", Shards: 1}},
		{"empty State", Record{Job: "job-1", Shard: 2, Shards: 3, Epoch: 1, Iteration: 10, Initial: 9, Objective: 3,
			B: seq(12, 1), C: seq(8, 2), State: [][]float64{}, Stopper: []float64{4, 3}}},
		{"several State arrays", Record{Job: "A_b-9", Shard: 0, Shards: 1, Iteration: 1,
			B: seq(2, 1), C: seq(2, 2), State: [][]float64{seq(5, 3), {}, seq(1, 4), nil, seq(64, 5)}}},
		{"one empty State array", Record{Job: "x", Shards: 2, Shard: 1, State: [][]float64{nil}}},
		{"special values", Record{Job: "specials", Shards: 1, Iteration: math.MaxInt64, Epoch: math.MaxUint64,
			Initial: quietNaN, Objective: negZero, B: specialsFn(), C: specialsFn(),
			State: [][]float64{specialsFn(), {negNaN}}, Stopper: specialsFn()}},
		{"infinite objectives", Record{Job: "inf", Shards: 1, Initial: math.Inf(1), Objective: math.Inf(-1)}},
		{"long job name", Record{Job: strings.Repeat("z", 64), Shard: 63, Shards: 64}},
		{"big arrays", Record{Job: "big", Shard: 5, Shards: 8, Iteration: 123456, B: big, C: big[:1<<17],
			State: [][]float64{big[:1000], big}, Stopper: big[:5000]}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := mustMarshal(t, &tc.rec)
			got, err := Unmarshal(data)
			if err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !recordsEqual(&tc.rec, got) {
				t.Fatalf("round trip changed the record:\n got %+v\nwant %+v", got, tc.rec)
			}
			again := mustMarshal(t, got)
			if !bytes.Equal(data, again) {
				t.Fatal("marshaling the decoded record gives other bytes")
			}
			// The record must not share memory with data.
			for i := range data {
				data[i] = 0
			}
			if !recordsEqual(&tc.rec, got) {
				t.Fatal("the decoded record changed with its input bytes")
			}
		})
	}
}

func TestFormatLayout(t *testing.T) {
	r := &Record{Job: "ab", Shard: 1, Shards: 2, Epoch: 3, Iteration: 4, Initial: 5, Objective: negZero,
		B: []float64{6}, C: nil, State: [][]float64{{7, 8}, nil}, Stopper: []float64{quietNaN}}
	le := binary.LittleEndian
	var want []byte
	u64 := func(v uint64) { want = le.AppendUint64(want, v) }
	f64 := func(v float64) { u64(math.Float64bits(v)) }
	want = append(want, "DIDNMFCK"...)
	want = le.AppendUint16(want, 1)
	u64(2)
	want = append(want, "ab"...)
	u64(1)
	u64(2)
	u64(3)
	u64(4)
	f64(5)
	f64(negZero)
	u64(1)
	f64(6)
	u64(0)
	u64(2)
	u64(2)
	f64(7)
	f64(8)
	u64(0)
	u64(1)
	f64(quietNaN)
	want = le.AppendUint32(want, crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli)))
	if got := mustMarshal(t, r); !bytes.Equal(got, want) {
		t.Fatalf("layout:\n got %x\nwant %x", got, want)
	}
}

func TestMarshalInvalid(t *testing.T) {
	tests := []struct {
		name string
		rec  *Record
		want string
	}{
		{"nil", nil, "nil record"},
		{"empty job", &Record{Shards: 1}, "invalid job name"},
		{"job with slash", &Record{Job: "a/b", Shards: 1}, "invalid job name"},
		{"job too long", &Record{Job: strings.Repeat("a", 65), Shards: 1}, "invalid job name"},
		{"no shards", &Record{Job: "j"}, "invalid shard"},
		{"negative shard", &Record{Job: "j", Shard: -1, Shards: 1}, "invalid shard"},
		{"shard out of range", &Record{Job: "j", Shard: 1, Shards: 1}, "invalid shard"},
		{"negative iteration", &Record{Job: "j", Shards: 1, Iteration: -1}, "invalid iteration"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, err := tc.rec.MarshalBinary()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "checkpoint: ") {
				t.Fatalf("MarshalBinary = %d bytes, %v; want an error containing %q", len(data), err, tc.want)
			}
		})
	}
}

func TestByteFlipsDetected(t *testing.T) {
	tests := []struct {
		name string
		rec  *Record
	}{
		{"small", testRecord("flip", 1, 7)},
		{"no arrays", &Record{Job: "j", Shards: 1}},
		{"specials", &Record{Job: "s", Shards: 1, B: specialsFn(), State: [][]float64{{negZero, quietNaN}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := mustMarshal(t, tc.rec)
			for off := range data {
				for _, mask := range []byte{0x01, 0x10, 0x80, 0xff} {
					bad := bytes.Clone(data)
					bad[off] ^= mask
					r, err := Unmarshal(bad)
					if err == nil {
						t.Fatalf("flip 0x%02x at offset %d of %d not detected: %+v", mask, off, len(data), r)
					}
					if !errors.Is(err, ErrCorrupt) || !strings.HasPrefix(err.Error(), "checkpoint: ") {
						t.Fatalf("flip 0x%02x at offset %d: error %q does not wrap ErrCorrupt", mask, off, err)
					}
				}
			}
		})
	}
}

func TestTruncationDetected(t *testing.T) {
	tests := []struct {
		name string
		rec  *Record
	}{
		{"small", testRecord("trunc", 0, 3)},
		{"no arrays", &Record{Job: "j", Shards: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := mustMarshal(t, tc.rec)
			for n := range len(data) {
				_, err := Unmarshal(data[:n])
				if err == nil || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("truncation to %d of %d bytes: err = %v, want ErrCorrupt", n, len(data), err)
				}
				// Past the magic, a cut is reported as a truncation (or, in the trailer or in
				// the last array, possibly as a bad checksum or length).
				if n >= headerSize && n < len(data)-trailerSize-8 && !strings.HasPrefix(err.Error(), "checkpoint: truncated: ") {
					t.Fatalf("truncation to %d of %d bytes: error %q, want a truncation", n, len(data), err)
				}
			}
			for _, extra := range [][]byte{{0}, []byte("garbage!")} {
				if _, err := Unmarshal(append(bytes.Clone(data), extra...)); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%d extra bytes: err = %v, want ErrCorrupt", len(extra), err)
				}
			}
		})
	}
}

// rawRecord returns the marshaled fields of a record up to and including the objective, with
// a job name of any length and any shard values.
func rawRecord(job string, shard, shards, iteration int64) []byte {
	le := binary.LittleEndian
	b := append([]byte(magic), 1, 0)
	b = le.AppendUint64(b, uint64(len(job)))
	b = append(b, job...)
	for _, v := range []uint64{uint64(shard), uint64(shards), 9, uint64(iteration), 0, 0} {
		b = le.AppendUint64(b, v)
	}
	return b
}

// u64s appends uint64 values to b.
func u64s(b []byte, v ...uint64) []byte {
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	return b
}

// seal appends the checksum trailer to b.
func seal(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func TestUnmarshalErrors(t *testing.T) {
	good := mustMarshal(t, testRecord("good", 0, 1))
	flipped := bytes.Clone(good)
	flipped[len(flipped)-10] ^= 4 // in the last Stopper value
	badMagic := bytes.Clone(good)
	badMagic[0] = 'X'
	badVersion := bytes.Clone(good)
	badVersion[8] = 2
	empty := rawRecord("j", 0, 1, 0)
	tests := []struct {
		name string
		data []byte
		want string // regular expression
	}{
		{"nil", nil, `^checkpoint: truncated: 0 bytes`},
		{"magic only", []byte(magic), `^checkpoint: truncated: `},
		{"bad magic", badMagic, `^checkpoint: bad magic "XIDNMFCK"`},
		{"bad version", badVersion, `^checkpoint: unsupported format version 2`},
		{"checksum", flipped, `^checkpoint: checksum mismatch \(stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}\)$`},
		{"absurd job length", seal(u64s(append([]byte(magic), 1, 0), 1<<62)), `^checkpoint: truncated: job name length 4611686018427387904`},
		{"job length over 64", seal(rawRecord(strings.Repeat("a", 65), 0, 1, 0)), `job name length 65 .*exceeds 64`},
		{"absurd B length", seal(u64s(bytes.Clone(empty), math.MaxUint64, 0, 0, 0)), `^checkpoint: truncated: B length 18446744073709551615 `},
		{"B length past the end", seal(u64s(bytes.Clone(empty), 4, 1, 2, 3)), `^checkpoint: truncated: B length 4 `},
		{"absurd State count", seal(u64s(bytes.Clone(empty), 0, 0, 1<<61, 0)), `^checkpoint: truncated: State length 2305843009213693952 `},
		{"absurd State array", seal(u64s(bytes.Clone(empty), 0, 0, 1, 1<<60, 0)), `^checkpoint: truncated: State\[0\] length 1152921504606846976 `},
		{"no Stopper", seal(u64s(bytes.Clone(empty), 0, 0, 0)), `^checkpoint: truncated: Stopper length needs 8 bytes`},
		{"no trailer", u64s(bytes.Clone(empty), 0, 0, 0, 0), `^checkpoint: truncated: checksum trailer needs 4 bytes`},
		{"trailing bytes", seal(u64s(bytes.Clone(empty), 0, 0, 0, 0, 0)), `^checkpoint: 8 unexpected bytes`},
		{"valid checksum, bad job", seal(u64s(rawRecord("../x", 0, 1, 0), 0, 0, 0, 0)), `^checkpoint: invalid record: invalid job name`},
		{"valid checksum, bad shard", seal(u64s(rawRecord("j", 2, 2, 0), 0, 0, 0, 0)), `^checkpoint: invalid record: invalid shard 2 of 2`},
		{"valid checksum, bad iteration", seal(u64s(rawRecord("j", 0, 1, -5), 0, 0, 0, 0)), `^checkpoint: invalid record: invalid iteration -5`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Unmarshal(tc.data)
			if err == nil {
				t.Fatalf("Unmarshal = %+v, want an error", r)
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("error %q does not wrap ErrCorrupt", err)
			}
			if !regexp.MustCompile(tc.want).MatchString(err.Error()) {
				t.Errorf("error %q does not match %q", err, tc.want)
			}
		})
	}
	// The sealed empty record the cases above derive from is valid.
	if _, err := Unmarshal(seal(u64s(bytes.Clone(empty), 0, 0, 0, 0))); err != nil {
		t.Fatalf("valid hand-made record: %v", err)
	}
}

func TestUnmarshalAbsurdLengthAllocatesLittle(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"B", seal(u64s(rawRecord("j", 0, 1, 0), 1<<40, 0, 0, 0))},
		{"State count", seal(u64s(rawRecord("j", 0, 1, 0), 0, 0, 1<<40, 0))},
		{"State array", seal(u64s(rawRecord("j", 0, 1, 0), 0, 0, 1, 1<<40, 0))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range 10 {
				if _, err := Unmarshal(tc.data); err == nil {
					t.Fatal("absurd length accepted")
				}
			}
			runtime.ReadMemStats(&after)
			if n := after.TotalAlloc - before.TotalAlloc; n > 1<<16 {
				t.Fatalf("%d bytes allocated by 10 decodings of an absurd length", n)
			}
		})
	}
}
