package kernels

import "math"

// Random streams are keyed, not sequential: the values for a column depend only on (seed,
// domain, column index), never on which shard or thread draws them or in what order. That is
// what lets a shard, or a restarted shard, regenerate its own block of synthetic data or of the
// initial C without talking to anyone.

// Domain separates the random streams of different uses of the same seed.
type Domain uint64

// The random domains used by didnmf. Values are part of the reproducibility contract: changing
// one changes every result drawn from it.
const (
	DomainSyntheticB     Domain = 0x5b // the synthetic basis B*
	DomainSyntheticC     Domain = 0x5c // the synthetic coefficients C*, one stream per column
	DomainSyntheticNoise Domain = 0x5e // the synthetic noise, one stream per column
	DomainInitB          Domain = 0x1b // random initial B
	DomainInitC          Domain = 0x1c // random initial C, one stream per column
	DomainSketch         Domain = 0x5d // the random test matrix of the randomized SVD (NNDSVD)
	DomainKMeans         Domain = 0x4d // k-means++ seeding
	DomainHeldOut        Domain = 0x7e // the held-out features of Options.TestFraction, one stream per row pattern
	DomainHeldOutPattern Domain = 0x7f // the row pattern of each sample of a held-out set, one stream per sample
)

// RNG is a small deterministic generator (SplitMix64). The zero value is a valid generator.
type RNG struct{ state uint64 }

// NewRNG returns the generator for (seed, domain, index).
func NewRNG(seed uint64, d Domain, index uint64) RNG {
	return RNG{state: mix64(streamBase(seed, d) ^ (index * 0x94d049bb133111eb))}
}

// streamBase is the part of NewRNG's state that does not depend on the index: the streams of
// one (seed, domain) differ only in the last mix64, which the AVX-512 draw of the initial C
// (normDrawAVX512) computes for eight indices at once.
func streamBase(seed uint64, d Domain) uint64 {
	s := mix64(seed + 0x9e3779b97f4a7c15)
	return mix64(s ^ (uint64(d) * 0xbf58476d1ce4e5b9))
}

func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Uint64 returns the next 64 random bits.
func (r *RNG) Uint64() uint64 {
	r.state += 0x9e3779b97f4a7c15
	return mix64(r.state)
}

// Float64 returns a uniform value in [0, 1) with 53 random bits.
func (r *RNG) Float64() float64 {
	return uniform53(r.Uint64())
}

// uniform53 is Float64's value for the random word u.
func uniform53(u uint64) float64 {
	return float64(u>>11) * (1.0 / (1 << 53))
}

// Norm returns a standard normal value (Box-Muller, one value per call).
//
// The cosine is cos below, not math.Cos: the standard library is compiled with the same
// GOAMD64 as the program, and under v3 math.Cos's polynomial is fused, so it would give other
// bits. math.Log is assembly on amd64 and math.Sqrt is exact, so they are the same everywhere.
func (r *RNG) Norm() float64 {
	a := r.Uint64()
	return normOf(a, r.Uint64())
}

// normOf is Norm's value when its two random words are a and b.
func normOf(a, b uint64) float64 {
	u1 := 1 - uniform53(a) // (0, 1]
	u2 := uniform53(b)
	return math.Sqrt(-2*math.Log(u1)) * cos(2*math.Pi*u2)
}

// cos returns math.Cos(x) bitwise as a GOAMD64=v1 build computes it, for 0 <= x < 2^29 (Norm
// passes [0, 2π]), under every GOAMD64: it is Go's math.cos (src/math/sin.go, from the Cephes
// library; BSD-style license) with every product that feeds an addition rounded explicitly.
func cos(x float64) float64 {
	const (
		pi4A = 7.85398125648498535156e-1  // 0x3fe921fb40000000, Pi/4 split into three parts
		pi4B = 3.77489470793079817668e-8  // 0x3e64442d00000000,
		pi4C = 2.69515142907905952645e-15 // 0x3ce8469898cc5170,
	)
	j := uint64(x * (4 / math.Pi)) // integer part of x/(Pi/4)
	y := float64(j)
	if j&1 == 1 { // map zeros to origin
		j++
		y++
	}
	j &= 7 // octant modulo 2Pi
	z := ((x - float64(y*pi4A)) - float64(y*pi4B)) - float64(y*pi4C)
	sign := false
	if j > 3 {
		j -= 4
		sign = !sign
	}
	if j > 1 {
		sign = !sign
	}
	zz := z * z
	if j == 1 || j == 2 {
		y = z + float64(z*zz*horner(&sinCoef, zz))
	} else {
		y = 1.0 - float64(0.5*zz) + float64(zz*zz*horner(&cosCoef, zz))
	}
	if sign {
		y = -y
	}
	return y
}

// horner returns ((c0 z + c1) z + c2) z ... + c5, unfused.
func horner(c *[6]float64, z float64) float64 {
	p := c[0]
	for _, ci := range c[1:] {
		p = float64(p*z) + ci
	}
	return p
}

// The coefficients of math.cos (src/math/sin.go).
var (
	sinCoef = [6]float64{
		1.58962301576546568060e-10, // 0x3de5d8fd1fd19ccd
		-2.50507477628578072866e-8, // 0xbe5ae5e5a9291f5d
		2.75573136213857245213e-6,  // 0x3ec71de3567d48a1
		-1.98412698295895385996e-4, // 0xbf2a01a019bfdf03
		8.33333333332211858878e-3,  // 0x3f8111111110f7d0
		-1.66666666666666307295e-1, // 0xbfc5555555555548
	}
	cosCoef = [6]float64{
		-1.13585365213876817300e-11, // 0xbda8fa49a0861a9b
		2.08757008419747316778e-9,   // 0x3e21ee9d7b4e3f05
		-2.75573141792967388112e-7,  // 0xbe927e4f7eac4bc6
		2.48015872888517045348e-5,   // 0x3efa01a019c844f5
		-1.38888888888730564116e-3,  // 0xbf56c16c16c14f91
		4.16666666666665929218e-2,   // 0x3fa555555555554b
	}
)
