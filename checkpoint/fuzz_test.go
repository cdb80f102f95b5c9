package checkpoint

import (
	"bytes"
	"errors"
	"testing"
)

func FuzzUnmarshal(f *testing.F) {
	seeds := [][]byte{
		nil,
		[]byte(magic),
		mustMarshal(f, &Record{Job: "j", Shards: 1}),
		mustMarshal(f, testRecord("fuzz", 1, 42)),
		mustMarshal(f, &Record{Job: "s", Shards: 1, B: specialsFn(), State: [][]float64{{negZero}, nil, specialsFn()}}),
		seal(u64s(rawRecord("j", 0, 1, 0), 1<<40, 0, 0, 0)),
		seal(u64s(rawRecord("j", 0, 1, 0), 0, 0, 1<<61, 0)),
	}
	good := mustMarshal(f, testRecord("cut", 0, 1))
	seeds = append(seeds, good[:len(good)/2], good[:len(good)-1])
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Unmarshal(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %q does not wrap ErrCorrupt", err)
			}
			return
		}
		// The format is canonical: whatever passes marshals back to the same bytes.
		again, err := r.MarshalBinary()
		if err != nil {
			t.Fatalf("accepted record does not marshal: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("accepted record marshals to other bytes")
		}
	})
}
