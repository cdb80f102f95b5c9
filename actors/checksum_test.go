package actors

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestChecksumPortable: the checksum over the values' memory is the CRC-32C of their
// little-endian bytes, whatever the length (empty, shorter and longer than the portable
// path's buffer) and whatever the values (negative zero, NaN payloads, infinities).
func TestChecksumPortable(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 63, 64, 65, 1000, 1 << 17} {
		data := make([]float64, n)
		for i := range data {
			data[i] = math.Float64frombits(r.Uint64())
		}
		if n > 3 {
			data[0], data[1], data[2] = math.Copysign(0, -1), math.Inf(1), math.NaN()
		}
		if got, want := Checksum(data), checksumPortable(data); got != want {
			t.Fatalf("%d values: checksum %08x, portable %08x", n, got, want)
		}
	}
	if Checksum(nil) != 0 {
		t.Fatal("checksum of nothing is not 0")
	}
}
