//go:build !purego

package kernels

import (
	"math"
	"testing"
)

// checkNormBits runs the kernel's normal value on the given random words, lane by lane, and
// compares with normOf (the scalar Norm) bitwise.
func checkNormBits(t *testing.T, what string, a, b []uint64) {
	t.Helper()
	for i := 0; i < len(a); i += 8 {
		var wa, wb, out [8]uint64
		for l := range 8 {
			wa[l], wb[l] = a[(i+l)%len(a)], b[(i+l)%len(b)]
		}
		normBitsAVX512(&wa, &wb, &out)
		for l := range 8 {
			if want := math.Float64bits(normOf(wa[l], wb[l])); out[l] != want {
				t.Fatalf("%s: words %#x %#x: kernel %v (%#x), scalar %v (%#x)", what, wa[l], wb[l],
					math.Float64frombits(out[l]), out[l], math.Float64frombits(want), want)
			}
		}
	}
}

// words returns the random words whose 53-bit uniform is m (Float64 = m·2^-53), with the low
// 11 bits (which Float64 drops) set to junk.
func words(ms ...uint64) []uint64 {
	w := make([]uint64, len(ms))
	for i, m := range ms {
		w[i] = m<<11 | (m*0x9e37)&0x7ff
	}
	return w
}

// TestNormKernelEdges: the kernel's log, cos and sqrt against the scalar Norm on the edges of
// their inputs: u1 = 1 (a zero uniform, log's x = 1), the smallest u1 = 2^-53, every power of
// two u1 and its neighbours, u1 whose mantissa is at log's sqrt(2)/2 switch, u2 = 0 and the
// largest u2, and u2 around every octant boundary of cos (2π·u2·4/π near an integer).
func TestNormKernelEdges(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512")
	}
	const top = 1 << 53
	var u1s []uint64 // Float64 values m, u1 = 1 - m·2^-53
	u1s = append(u1s, 0, 1, 2, top-1, top-2, top/2, top/2-1, top/2+1)
	for e := 1; e <= 53; e++ { // u1 = 2^-e and neighbours
		m := uint64(top - top>>e)
		for d := -2; d <= 2; d++ {
			if v := int64(m) + int64(d); v >= 0 && v < top {
				u1s = append(u1s, uint64(v))
			}
		}
	}
	// u1 = sqrt(2)/2·2^-e exactly and its neighbours: log's mantissa comparison at equality.
	for e := 0; e <= 40; e++ {
		u1 := math.Ldexp(7.07106781186547524401e-01, -e)
		for d := -3; d <= 3; d++ {
			v := math.Float64frombits(uint64(int64(math.Float64bits(u1)) + int64(d)))
			if m := (1 - v) * top; m == math.Trunc(m) && m >= 0 && m < top && 1-float64(uint64(m))/top == v {
				u1s = append(u1s, uint64(m))
			}
		}
	}
	var u2s []uint64
	u2s = append(u2s, 0, 1, 2, top-1, top-2, top/2, top/4, top/8)
	for o := 1; o <= 8; o++ { // x·4/π = o at u2 = o/8
		c := uint64(o) * top / 8
		for d := int64(-600); d <= 600; d++ {
			if v := int64(c) + d; v >= 0 && v < top {
				u2s = append(u2s, uint64(v))
			}
		}
	}
	// Every pairing of the u1 and u2 edges, and each against random partners.
	a, b := words(u1s...), words(u2s...)
	for _, x := range a {
		aa := make([]uint64, len(b))
		for i := range aa {
			aa[i] = x
		}
		checkNormBits(t, "u1 edge", aa, b)
	}
	r := NewRNG(3, 0, 0)
	rnd := make([]uint64, 4096)
	for i := range rnd {
		rnd[i] = r.Uint64()
	}
	checkNormBits(t, "u2 edge, random u1", rnd, b)
	checkNormBits(t, "u1 edge, random u2", a, rnd)
	// Random words, a few million normals.
	for i := 0; i < 1<<20/len(rnd); i++ {
		for j := range rnd {
			rnd[j] = r.Uint64()
		}
		c := make([]uint64, len(rnd))
		for j := range c {
			c[j] = r.Uint64()
		}
		checkNormBits(t, "random", rnd, c)
	}
}
