package frame

import (
	"bytes"
	"testing"
)

// FuzzReader feeds a Reader arbitrary streams: it must never panic nor return a frame larger
// than its bound, and every frame it returns must frame back to the bytes it read.
func FuzzReader(f *testing.F) {
	var seed []byte
	for _, fr := range []Frame{{1, "host/j0123456789abcdef-s0", []byte("a partial")}, {2, "", nil}, {9, "t", []byte{0, 1, 2}}} {
		b, _ := Begin(nil, fr.Kind, fr.Target)
		b = append(b, fr.Body...)
		_ = End(b)
		seed = append(seed, b...)
	}
	f.Add(seed)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 0})
	f.Add([]byte{4, 0, 0, 0, 1, 3, 'a', 'b'})
	const bound = 1 << 16
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := NewReader(bytes.NewReader(stream), bound)
		at := 0
		for {
			fr, err := r.Next()
			if err != nil {
				return
			}
			b, err := Begin(nil, fr.Kind, fr.Target)
			if err != nil {
				t.Fatalf("a frame read back with an unframable target: %v", err)
			}
			b = append(b, fr.Body...)
			if err := End(b); err != nil {
				t.Fatal(err)
			}
			if len(b)-4 > bound {
				t.Fatalf("a frame of %d bytes passed a bound of %d", len(b)-4, bound)
			}
			if at+len(b) > len(stream) || !bytes.Equal(b, stream[at:at+len(b)]) {
				t.Fatalf("frame at byte %d does not frame back to the bytes read", at)
			}
			at += len(b)
		}
	})
}
