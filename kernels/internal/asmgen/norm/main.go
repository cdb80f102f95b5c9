// Command norm generates the AVX-512 kernel of the random initial C (package kernels,
// normdraw_amd64.s and its Go declarations) with avo. Run it through go generate in package
// kernels:
//
//	go run ./internal/asmgen/norm -out normdraw_amd64.s -stubs normdraw_stub_amd64.go
//
// The kernel draws eight columns' streams at once, one column per 64-bit lane, and performs,
// lane by lane, exactly the operations of the scalar Go code: the last mix64 of NewRNG, the
// SplitMix64 steps of RNG.Uint64, the uniforms of RNG.Float64, the log of math.Log as Go's
// assembly computes it on amd64 (src/math/log_amd64.s: no FMA, no CPU-dependent branch), the
// package's cos (Cephes, every product rounded), the square root and the product of Norm, and
// then scale·|v| as initRandom does. Every operation is a single correctly rounded IEEE
// operation in the same order as the scalar code; there is no FMA anywhere.
package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

func main() {
	ConstraintExpr("!purego")
	normDraw()
	normBits()
	emitData()
	Generate()
}

// The constant table: one 64-bit word per constant, read by embedded broadcast.
var consts []uint64

// c64 returns the table entry holding v, adding it if it is new.
func c64(v uint64) Mem {
	for i, w := range consts {
		if w == v {
			return tbl.Offset(8 * i)
		}
	}
	consts = append(consts, v)
	return tbl.Offset(8 * (len(consts) - 1))
}

// cf returns the table entry holding the float64 v.
func cf(v float64) Mem { return c64(math.Float64bits(v)) }

// tbl is the constant table (normconst), emitted by emitData once every constant is known.
var tbl Mem

// mix64 applies SplitMix64's finalizer to each lane of z in place (VPMULLQ is the 64-bit
// wrapping multiply of Go's uint64 product).
func mix64(z VecVirtual) {
	t := ZMM()
	VPSRLQ(U8(30), z, t)
	VPXORQ(t, z, z)
	VPMULLQ_BCST(c64(0xbf58476d1ce4e5b9), z, z)
	VPSRLQ(U8(27), z, t)
	VPXORQ(t, z, z)
	VPMULLQ_BCST(c64(0x94d049bb133111eb), z, z)
	VPSRLQ(U8(31), z, t)
	VPXORQ(t, z, z)
}

// toUniform turns 64 random bits into Float64's value: float64(u>>11)·2^-53 (z is overwritten).
func toUniform(z VecVirtual) VecVirtual {
	VPSRLQ(U8(11), z, z)
	f := ZMM()
	VCVTUQQ2PD(z, f) // exact: below 2^53
	VMULPD_BCST(cf(1.0/(1<<53)), f, f)
	return f
}

// norm returns Norm's value from its two uniforms f1 and f2 (both overwritten):
// sqrt(-2·log(1-f1))·cos(2π·f2).
func norm(f1, f2 VecVirtual) VecVirtual {
	one := ZMM()
	VBROADCASTSD(cf(1.0), one)
	VSUBPD(f1, one, f1) // u1 = 1 - Float64(), exact
	l := logv(f1)
	VMULPD_BCST(cf(-2), l, l)
	VSQRTPD(l, l)
	VMULPD_BCST(cf(2*math.Pi), f2, f2)
	c := cosv(f2)
	VMULPD(c, l, l)
	return l
}

// normBits generates the tests' lane-level entry: Norm's value from given random words.
func normBits() {
	TEXT("normBitsAVX512", NOSPLIT, "func(a, b, out *[8]uint64)")
	Pragma("noescape")
	Doc("normBitsAVX512 sets out[l] to the bits of the normal value RNG.Norm computes when its",
		"two calls of Uint64 return a[l] and b[l]. It needs AVX-512 F, DQ and VL.")
	pa := Load(Param("a"), GP64())
	pb := Load(Param("b"), GP64())
	po := Load(Param("out"), GP64())
	za, zb := ZMM(), ZMM()
	VMOVDQU64(Mem{Base: pa}, za)
	VMOVDQU64(Mem{Base: pb}, zb)
	v := norm(toUniform(za), toUniform(zb))
	VMOVUPD(v, Mem{Base: po})
	VZEROUPPER()
	RET()
}

// uniform advances the state and returns Float64() of the step.
func uniform(st VecVirtual) VecVirtual {
	VPADDQ_BCST(c64(0x9e3779b97f4a7c15), st, st)
	z := ZMM()
	VMOVDQA64(st, z)
	mix64(z)
	return toUniform(z)
}

// logv computes math.Log(x) for x in (0, 1] exactly as log_amd64.s does on its main path (x
// is never zero, negative, infinite or NaN here; x = 1 goes through the main path there too).
func logv(x VecVirtual) VecVirtual {
	f1, k, t := ZMM(), ZMM(), ZMM()
	VPANDQ_BCST(c64(0x000FFFFFFFFFFFFF), x, f1)
	VPORQ_BCST(cf(0.5), f1, f1) // f1
	VPSRLQ(U8(52), x, k)
	VPANDQ_BCST(c64(0x7FF), k, k)
	VPSUBQ_BCST(c64(0x3FE), k, k)
	VCVTQQ2PD(k, k) // k, exact
	// The assembly's CMPSD (encoded cmpsd xmm0=HSqrt2, xmm2=f1, NLT) is !(HSqrt2 < f1), that
	// is f1 <= HSqrt2: predicate LE_OS (2).
	m := K()
	VCMPPD_BCST(U8(2), cf(7.07106781186547524401e-01), f1, m)
	one := ZMM()
	VBROADCASTSD(cf(1.0), one)
	VXORPD(t, t, t)
	VBLENDMPD(one, t, m, t) // 0 or 1
	VSUBPD(t, k, k)         // k -= 0 or 1
	VADDPD(one, t, t)       // 1 or 2
	VMULPD(t, f1, f1)       // f1 *= 1 or 2
	f := f1
	VSUBPD(one, f, f) // f = f1 - 1
	s, d := ZMM(), ZMM()
	VADDPD_BCST(cf(2.0), f, d)
	VDIVPD(d, f, s) // s = f/(2+f)
	s2, s4 := ZMM(), ZMM()
	VMULPD(s, s, s2)
	VMULPD(s2, s2, s4)
	p := ZMM()
	VBROADCASTSD(cf(1.479819860511658591e-01), p) // L7
	VMULPD(s4, p, p)
	VADDPD_BCST(cf(1.818357216161805012e-01), p, p) // L5
	VMULPD(s4, p, p)
	VADDPD_BCST(cf(2.857142874366239149e-01), p, p) // L3
	VMULPD(s4, p, p)
	VADDPD_BCST(cf(6.666666666666735130e-01), p, p) // L1
	VMULPD(p, s2, s2)                               // t1
	VBROADCASTSD(cf(1.531383769920937332e-01), p)   // L6
	VMULPD(s4, p, p)
	VADDPD_BCST(cf(2.222219843214978396e-01), p, p) // L4
	VMULPD(s4, p, p)
	VADDPD_BCST(cf(3.999999999940941908e-01), p, p) // L2
	VMULPD(p, s4, s4)                               // t2
	VADDPD(s4, s2, s2)                              // R = t1 + t2
	h := ZMM()
	VMULPD_BCST(cf(0.5), f, h)
	VMULPD(f, h, h)                                   // hfsq = 0.5*f*f
	VADDPD(h, s2, s2)                                 // hfsq + R
	VMULPD(s2, s, s)                                  // s*(hfsq+R)
	VMULPD_BCST(cf(1.90821492927058770002e-10), k, t) // k*Ln2Lo
	VADDPD(t, s, s)                                   // s*(hfsq+R) + k*Ln2Lo
	VSUBPD(s, h, h)                                   // hfsq - (...)
	VSUBPD(f, h, h)                                   // (...) - f
	VMULPD_BCST(cf(6.93147180369123816490e-01), k, k) // k*Ln2Hi
	VSUBPD(h, k, k)
	return k
}

// horner evaluates ((c0 z + c1) z + ...) + c5 with every product rounded.
func horner(c [6]float64, z VecVirtual) VecVirtual {
	p := ZMM()
	VBROADCASTSD(cf(c[0]), p)
	for _, ci := range c[1:] {
		VMULPD(z, p, p)
		VADDPD_BCST(cf(ci), p, p)
	}
	return p
}

var (
	sinCoef = [6]float64{
		1.58962301576546568060e-10, -2.50507477628578072866e-8, 2.75573136213857245213e-6,
		-1.98412698295895385996e-4, 8.33333333332211858878e-3, -1.66666666666666307295e-1,
	}
	cosCoef = [6]float64{
		-1.13585365213876817300e-11, 2.08757008419747316778e-9, -2.75573141792967388112e-7,
		2.48015872888517045348e-5, -1.38888888888730564116e-3, 4.16666666666665929218e-2,
	}
)

// cosv computes the package's cos(x) for 0 <= x < 2^29 lane by lane (x is overwritten).
func cosv(x VecVirtual) VecVirtual {
	j, y := ZMM(), ZMM()
	VMULPD_BCST(cf(4/math.Pi), x, y)
	VCVTTPD2QQ(y, j) // truncation, as uint64(x*(4/Pi)) for these x
	t := ZMM()
	VPANDQ_BCST(c64(1), j, t)
	VPADDQ(t, j, j) // j++ when odd
	VCVTQQ2PD(j, y) // y = float64(j) (+1 when odd), exact
	VPANDQ_BCST(c64(7), j, j)
	VMULPD_BCST(cf(7.85398125648498535156e-1), y, t)
	VSUBPD(t, x, x)
	VMULPD_BCST(cf(3.77489470793079817668e-8), y, t)
	VSUBPD(t, x, x)
	VMULPD_BCST(cf(2.69515142907905952645e-15), y, t)
	VSUBPD(t, x, x) // z
	z := x
	zz := ZMM()
	VMULPD(z, z, zz)
	// sin branch: z + (z*zz)*h
	hs := horner(sinCoef, zz)
	sn := ZMM()
	VMULPD(zz, z, sn)
	VMULPD(hs, sn, sn)
	VADDPD(sn, z, sn)
	// cos branch: (1 - 0.5*zz) + (zz*zz)*h
	hc := horner(cosCoef, zz)
	cs, u := ZMM(), ZMM()
	VMULPD_BCST(cf(0.5), zz, u)
	VBROADCASTSD(cf(1.0), cs)
	VSUBPD(u, cs, cs)
	VMULPD(zz, zz, u)
	VMULPD(hc, u, u)
	VADDPD(u, cs, cs)
	// j in {0, 2, 4, 6}: the sine polynomial where j&2, the sign flipped where j is 2 or 4.
	m := K()
	VPTESTMQ_BCST(c64(2), j, m)
	VBLENDMPD(sn, cs, m, cs)
	sg := ZMM()
	VPSRLQ(U8(1), j, sg)
	VPSRLQ(U8(2), j, t)
	VPXORQ(t, sg, sg)
	VPSLLQ(U8(63), sg, sg) // bit 0 to the sign bit
	VPXORQ(sg, cs, cs)
	return cs
}

func normDraw() {
	tbl = Mem{Symbol: NewStaticSymbol("normconst"), Base: StaticBase}
	iota = Mem{Symbol: NewStaticSymbol("normiota"), Base: StaticBase}
	TEXT("normDrawAVX512", NOSPLIT, "func(s2 uint64, index uint64, scale float64, out []float64)")
	Pragma("noescape")
	Doc("normDrawAVX512 writes out[8p+l] = scale·|Norm()| of the p-th draw of the stream",
		"mix64(s2 ^ ((index+l)·0x94d049bb133111eb)), for l < 8 and p < len(out)/8, bitwise as",
		"the scalar Go code. len(out) is a multiple of 8. It needs AVX-512 F, DQ and VL.")
	st := ZMM()
	sv := Load(Param("s2"), GP64())
	VPBROADCASTQ(sv, st)
	iv := Load(Param("index"), GP64())
	idx := ZMM()
	VPBROADCASTQ(iv, idx)
	VPADDQ(iota.Offset(0), idx, idx)
	VPMULLQ_BCST(c64(0x94d049bb133111eb), idx, idx)
	VPXORQ(idx, st, st)
	mix64(st)
	scv := Load(Param("scale"), XMM())
	scale := ZMM()
	VBROADCASTSD(scv, scale)
	out := Load(Param("out").Base(), GP64())
	n := Load(Param("out").Len(), GP64())
	SHRQ(U8(3), n)
	Label("draw_loop")
	TESTQ(n, n)
	JZ(LabelRef("draw_done"))
	u1 := uniform(st)
	u2 := uniform(st)
	l := norm(u1, u2)
	VPANDQ_BCST(c64(^uint64(1<<63)), l, l) // |v|
	VMULPD(l, scale, l)                    // scale·|v|
	VMOVUPD(l, Mem{Base: out})
	ADDQ(U32(64), out)
	DECQ(n)
	JMP(LabelRef("draw_loop"))
	Label("draw_done")
	VZEROUPPER()
	RET()

}

// emitData writes the constant tables used by the functions above.
func emitData() {
	GLOBL("normconst", RODATA|NOPTR)
	for i, w := range consts {
		DATA(8*i, U64(w))
	}
	GLOBL("normiota", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		DATA(8*i, U64(uint64(i)))
	}
}

// iota is the table of lane numbers 0..7.
var iota Mem
