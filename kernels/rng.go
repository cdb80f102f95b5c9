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
)

// RNG is a small deterministic generator (SplitMix64). The zero value is a valid generator.
type RNG struct{ state uint64 }

// NewRNG returns the generator for (seed, domain, index).
func NewRNG(seed uint64, d Domain, index uint64) RNG {
	s := mix64(seed + 0x9e3779b97f4a7c15)
	s = mix64(s ^ (uint64(d) * 0xbf58476d1ce4e5b9))
	s = mix64(s ^ (index * 0x94d049bb133111eb))
	return RNG{state: s}
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
	return float64(r.Uint64()>>11) * (1.0 / (1 << 53))
}

// Norm returns a standard normal value (Box-Muller, one value per call).
func (r *RNG) Norm() float64 {
	u1 := 1 - r.Float64() // (0, 1]
	u2 := r.Float64()
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}
