package matio

import (
	"encoding/binary"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Regression tests for what fuzzing found: headers whose claims were trusted before the data
// arrived, and shape messages that cost time quadratic in the header.

// allocOf returns the bytes allocated by Open(path), and its error.
func allocOf(t *testing.T, path string) (uint64, error) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	src, err := Open(path)
	runtime.ReadMemStats(&after)
	if err == nil {
		src.Close()
	}
	return after.TotalAlloc - before.TotalAlloc, err
}

func TestClaimsAllocateLittle(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		gzip bool
		want string
	}{
		// The header length was allocated in full before reading: a megabyte for 14 bytes.
		{"x.npy", []byte("\x93NUMPY\x03\x00\x00\x00\x10\x00{}"), true, "truncated .npy header"},
		{"x.npy", []byte("\x93NUMPY\x02\x00\xff\xff\x0f\x00{}"), true, "truncated .npy header"},
		// The size line's count reserved 65536 entries (1.5 MiB) or values (512 KiB) up front.
		{"x.mtx", []byte("%%MatrixMarket matrix coordinate real general\n2000000000 2000000000 2000000000\n1 2 5\n"), false, "promises 2000000000 entries"},
		{"x.mtx", []byte("%%MatrixMarket matrix array real general\n2000000000 2000000000\n1\n"), false, "promises 4000000000000000000 values"},
		// A compressed body was read into a buffer of up to 1 MiB, whatever had arrived.
		{"x.idx", idxBytes(0x08, []uint32{1 << 10, 1 << 10}, noise(1000)), true, "1048576 bytes of data) but the decompressed file has 1000"},
	}
	for _, tc := range tests {
		name, data := tc.name, tc.data
		if tc.gzip {
			name, data = name+".gz", gzipBytes(t, data)
		}
		path := writeTemp(t, name, data)
		n, err := allocOf(t, path)
		wantInputError(t, err, path+": ", tc.want)
		if n > 256<<10 {
			t.Errorf("%s: Open of a %d-byte file allocated %d bytes", tc.name, len(data), n)
		}
	}
}

func TestLongShapeMessage(t *testing.T) {
	// A shape of 300000 dimensions in a 600 KB header: formatting it took minutes and gave a
	// message as long.
	dims := strings.Repeat("1,", 300000)
	for _, tc := range []struct{ shape, want string }{
		{"(" + dims + ")", "expected a 2-D array (samples x features), got shape (1, 1, 1, "},
		{"(" + dims + "-1)", "bad shape (1, 1, 1, "},
		{"(" + dims + "'a')", "is not a tuple of integers"},
	} {
		header := "{'descr': '<f8', 'fortran_order': False, 'shape': " + tc.shape + "}"
		data := binary.LittleEndian.AppendUint32([]byte("\x93NUMPY\x03\x00"), uint32(len(header)))
		path := writeTemp(t, "x.npy", append(data, header...))
		start := time.Now()
		_, err := Open(path)
		wantInputError(t, err, path+": ", tc.want)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Open took %v", d)
		}
		if n := len(err.Error()); n > 600 {
			t.Errorf("error message of %d bytes", n)
		}
	}
}

func TestFormatShape(t *testing.T) {
	for _, tc := range []struct {
		dims []int64
		want string
	}{
		{nil, "()"},
		{[]int64{100}, "(100,)"},
		{[]int64{3, 4}, "(3, 4)"},
		{[]int64{1, 2, 3}, "(1, 2, 3)"},
	} {
		if got := formatShape(tc.dims); got != tc.want {
			t.Errorf("formatShape(%v) = %q, want %q", tc.dims, got, tc.want)
		}
	}
	long := make([]int64, 100000)
	got := formatShape(long)
	if !strings.HasPrefix(got, "(0, 0, 0, ") || !strings.HasSuffix(got, ", ...) (100000 dimensions)") || len(got) > maxShapeText+40 {
		t.Errorf("formatShape of 100000 dimensions = %q", got)
	}
}

func TestPyValueStringCut(t *testing.T) {
	v, err := parsePyLiteral([]byte("{'a': (1, [2, 'x'], True, None), 'b': -3}"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := v.String(), "{'a': (1, [2, 'x'], True, None), 'b': -3}"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	one, _ := parsePyLiteral([]byte("(7,)"))
	if got := one.String(); got != "(7,)" {
		t.Errorf("String = %q, want (7,)", got)
	}
	for _, tc := range []struct{ text, want string }{
		{"(" + strings.Repeat("12345,", 100000) + ")", "(12345, 12345, 12345, "},
		{"['" + strings.Repeat("s", 100000) + "']", "['sssss"},
		{"(" + strings.Repeat("9", 100000) + ",)", "(99999"},
		{"{" + strings.Repeat("'k': [1], ", 30000) + "}", "{'k': [1], 'k': [1], "},
	} {
		v, err := parsePyLiteral([]byte(tc.text))
		if err != nil {
			t.Fatal(err)
		}
		got := v.String()
		if len(got) > 2*maxPyText || !strings.HasSuffix(got, "...") || !strings.HasPrefix(got, tc.want) {
			t.Errorf("String of %d bytes of literal = %q", len(tc.text), got)
		}
	}
}
