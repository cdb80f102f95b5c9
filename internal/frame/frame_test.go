package frame

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// build returns the bytes of one frame.
func build(t testing.TB, kind byte, target string, body []byte) []byte {
	t.Helper()
	b, err := Begin(nil, kind, target)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, body...)
	if err := End(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	large := bytes.Repeat([]byte{7}, 3*minStep+5) // grows the reader's buffer in steps
	frames := []Frame{
		{Kind: 1, Target: "host/j0-s0", Body: []byte("partial")},
		{Kind: 2, Target: "", Body: nil},
		{Kind: 255, Target: strings.Repeat("t", MaxTarget), Body: []byte{0}},
		{Kind: 1, Target: "host/j0-e0-r0-0", Body: large},
		{Kind: 2, Target: "x", Body: []byte("after the large one")},
	}
	var stream []byte
	for _, f := range frames {
		stream = append(stream, build(t, f.Kind, f.Target, f.Body)...)
	}
	r := NewReader(bytes.NewReader(stream), len(large)+MaxTarget+2)
	for i, want := range frames {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got.Kind != want.Kind || got.Target != want.Target || !bytes.Equal(got.Body, want.Body) {
			t.Fatalf("frame %d: got kind %d target %q body of %d bytes, want kind %d target %q body of %d bytes",
				i, got.Kind, got.Target, len(got.Body), want.Kind, want.Target, len(want.Body))
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
	for i, want := range frames { // and each frame alone, in memory
		got, err := Parse(build(t, want.Kind, want.Target, want.Body))
		if err != nil || got.Kind != want.Kind || got.Target != want.Target || !bytes.Equal(got.Body, want.Body) {
			t.Fatalf("Parse of frame %d: %v, got kind %d target %q body of %d bytes", i, err, got.Kind, got.Target, len(got.Body))
		}
	}
}

func TestParseRefuses(t *testing.T) {
	one := build(t, 1, "host", []byte("body"))
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"shorter than a header", one[:HeaderLen-1]},
		{"cut short", one[:len(one)-1]},
		{"more than one frame", append(append([]byte{}, one...), one...)},
		{"target past its end", []byte{3, 0, 0, 0, 1, 200, 'h'}},
	} {
		if _, err := Parse(tc.b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Parse = %v, want ErrMalformed", tc.name, err)
		}
	}
}

func TestBeginRefusesLongTarget(t *testing.T) {
	if _, err := Begin(nil, 1, strings.Repeat("t", MaxTarget+1)); err == nil {
		t.Fatal("a target of MaxTarget+1 bytes was framed")
	}
}

func TestEndRefusesShortFrame(t *testing.T) {
	if err := End(make([]byte, HeaderLen-1)); err == nil {
		t.Fatal("a frame shorter than its header was ended")
	}
}

func TestReaderRefuses(t *testing.T) {
	valid := build(t, 1, "t", []byte("body"))
	cases := []struct {
		name   string
		stream []byte
		max    int
		want   error
	}{
		{"longer than the bound", valid, len(valid) - 5, ErrTooLarge},
		{"announces 4 GiB", []byte{0xff, 0xff, 0xff, 0xff, 1, 0}, 1 << 20, ErrTooLarge},
		{"shorter than its header", []byte{1, 0, 0, 0, 1}, 1 << 20, ErrMalformed},
		{"empty", []byte{0, 0, 0, 0}, 1 << 20, ErrMalformed},
		{"target past the end", []byte{4, 0, 0, 0, 1, 3, 'a', 'b'}, 1 << 20, ErrMalformed},
		{"cut in its length", valid[:2], 1 << 20, io.ErrUnexpectedEOF},
		{"cut in its body", valid[:len(valid)-1], 1 << 20, io.ErrUnexpectedEOF},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(c.stream), c.max).Next()
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

// A frame that announces much and sends little makes the reader allocate in proportion to
// what arrived, not to what was announced; a large frame's buffer is not kept for the next.
func TestReaderGrowsWithWhatArrives(t *testing.T) {
	for _, sent := range []int{2, 3 * minStep} {
		stream := append([]byte{0, 0, 0, 4, 1, 0}, make([]byte, sent)...) // announces 64 MiB
		r := NewReader(bytes.NewReader(stream), 1<<30)
		if _, err := r.Next(); err != io.ErrUnexpectedEOF {
			t.Fatalf("got %v, want io.ErrUnexpectedEOF", err)
		}
		if cap(r.buf) < sent || cap(r.buf) > 4*max(sent, minStep) {
			t.Fatalf("the reader holds a buffer of %d bytes for a frame of which %d bytes arrived", cap(r.buf), sent+2)
		}
	}
	large := build(t, 1, "t", make([]byte, 2*maxKept))
	r := NewReader(bytes.NewReader(append(large, build(t, 1, "t", []byte("small"))...)), 4*maxKept)
	for range 2 {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if cap(r.buf) > maxKept {
		t.Fatalf("the reader kept a buffer of %d bytes after a large frame", cap(r.buf))
	}
}

// A stream's error between frames reaches the caller as it is.
func TestReaderPassesStreamError(t *testing.T) {
	one := build(t, 1, "a", []byte("x"))
	r := NewReader(io.MultiReader(bytes.NewReader(one), errReader{}), 1<<20)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); !errors.Is(err, errStream) {
		t.Fatalf("got %v, want the stream's error", err)
	}
}

var errStream = errors.New("stream broke")

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errStream }
