// Command roofline generates the streaming and FMA-peak kernels behind the rooflines of package
// kernels (roofline_amd64.s and its Go declarations) with avo. Run it through go generate in
// package kernels:
//
//	go run ./internal/asmgen/roofline -out roofline_amd64.s -stubs roofline_stub_amd64.go
//
// The streaming kernels read 32-byte vectors into eight independent accumulators, so that the
// loop is limited by loads (memory bandwidth), not by the latency of one chain of adds. The FMA
// kernels run many independent chains of fused multiply-adds on registers only, so that they are
// limited by the FMA units.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// accumulators is the number of independent vector accumulators of the streaming loops: with
// two loads a cycle and an add latency of 3-4 cycles, 8 keep both load ports busy.
const accumulators = 8

// fmaChains is the number of independent FMA chains of the peak loops: two FMA pipes with a
// latency of 4 cycles need 8 in flight; 12 leave headroom for the loop's own instructions.
const fmaChains = 12

func main() {
	ConstraintExpr("!purego")
	streamF64()
	streamInt("streamSumI32", "int32", "uint32", 4, VPADDD)
	streamInt("streamSumI64", "int", "uint64", 8, VPADDQ)
	fmaPeak("fmaChainsYMM", false)
	fmaPeak("fmaChainsZMM", true)
	Generate()
}

// streamF64 generates streamSumF64, whose order of additions sumF64Generic reproduces exactly:
// lane l of accumulator i sums x[32b+4i+l] over the full blocks b of 32 values; the
// accumulators are added pairwise (0+1, 2+3, 4+5, 6+7, then 0+2, 4+6, then 0+4), the upper
// two lanes onto the lower two, those two together, and then the remaining values in order.
func streamF64() {
	TEXT("streamSumF64", NOSPLIT, "func(x []float64) float64")
	Doc("streamSumF64 returns the sum of x, read as 32-byte vectors into 8 independent",
		"accumulators, in the order of sumF64Generic. It needs AVX.")
	p := Load(Param("x").Base(), GP64())
	n := Load(Param("x").Len(), GP64())
	acc := make([]VecVirtual, accumulators)
	for i := range acc {
		acc[i] = YMM()
		VXORPD(acc[i], acc[i], acc[i])
	}
	per := 4 * accumulators // values per block
	Label("f64_block")
	CMPQ(n, U32(per))
	JL(LabelRef("f64_reduce"))
	for i := range acc {
		VADDPD(Mem{Base: p}.Offset(32*i), acc[i], acc[i])
	}
	ADDQ(U32(8*per), p)
	SUBQ(U32(per), n)
	JMP(LabelRef("f64_block"))

	Label("f64_reduce")
	for step := 1; step < accumulators; step *= 2 {
		for i := 0; i < accumulators; i += 2 * step {
			VADDPD(acc[i+step], acc[i], acc[i])
		}
	}
	top := XMM()
	VEXTRACTF128(U8(1), acc[0], top)
	s := acc[0].AsX()
	VADDPD(top, s, s)
	VHADDPD(s, s, s)

	Label("f64_tail")
	CMPQ(n, U32(0))
	JE(LabelRef("f64_done"))
	VADDSD(Mem{Base: p}, s, s)
	ADDQ(U32(8), p)
	DECQ(n)
	JMP(LabelRef("f64_tail"))

	Label("f64_done")
	VZEROUPPER()
	Store(s, ReturnIndex(0))
	RET()
}

// streamInt generates a wrapping sum of integers of size bytes (4 or 8) with the vector add
// add (VPADDD or VPADDQ). Integer addition wraps and is associative, so any order gives the
// same result.
func streamInt(name, elem, ret string, size int, add func(ops ...Op)) {
	TEXT(name, NOSPLIT, fmt.Sprintf("func(x []%s) %s", elem, ret))
	Doc(fmt.Sprintf("%s returns the sum of x modulo 2^%d, read as 32-byte vectors into 8", name, 8*size),
		"independent accumulators. It needs AVX2.")
	p := Load(Param("x").Base(), GP64())
	n := Load(Param("x").Len(), GP64())
	acc := make([]VecVirtual, accumulators)
	for i := range acc {
		acc[i] = YMM()
		VPXOR(acc[i], acc[i], acc[i])
	}
	per := 32 / size * accumulators
	l := func(s string) string { return name + "_" + s }
	Label(l("block"))
	CMPQ(n, U32(per))
	JL(LabelRef(l("reduce")))
	for i := range acc {
		add(Mem{Base: p}.Offset(32*i), acc[i], acc[i])
	}
	ADDQ(U32(size*per), p)
	SUBQ(U32(per), n)
	JMP(LabelRef(l("block")))

	Label(l("reduce"))
	for step := 1; step < accumulators; step *= 2 {
		for i := 0; i < accumulators; i += 2 * step {
			add(acc[i+step], acc[i], acc[i])
		}
	}
	top, t := XMM(), XMM()
	VEXTRACTI128(U8(1), acc[0], top)
	s := acc[0].AsX()
	add(top, s, s)
	VPSHUFD(U8(0x4e), s, t) // swap the 64-bit halves
	add(t, s, s)
	var r Register
	if size == 4 {
		VPSHUFD(U8(0xb1), s, t) // swap the 32-bit words of each half
		add(t, s, s)
		r = GP32()
		VMOVD(s, r)
	} else {
		r = GP64()
		VMOVQ(s, r)
	}

	Label(l("tail"))
	CMPQ(n, U32(0))
	JE(LabelRef(l("done")))
	if size == 4 {
		ADDL(Mem{Base: p}, r)
	} else {
		ADDQ(Mem{Base: p}, r)
	}
	ADDQ(U32(size), p)
	DECQ(n)
	JMP(LabelRef(l("tail")))

	Label(l("done"))
	VZEROUPPER()
	Store(r, ReturnIndex(0))
	RET()
}

// fmaPeak generates a loop of n rounds of fmaChains independent fused multiply-adds
// acc += a*a on ymm (4 doubles) or zmm (8 doubles) registers, returning the sum of every lane
// of every accumulator: fmaChains * lanes * n * a*a, exactly when a*a and the sums are
// representable.
func fmaPeak(name string, zmm bool) {
	TEXT(name, NOSPLIT, "func(n int, a float64) float64")
	lanes, need := 4, "AVX and FMA3"
	if zmm {
		lanes, need = 8, "AVX-512F"
	}
	Doc(fmt.Sprintf("%s runs n rounds of %d independent fused multiply-adds acc += a*a on", name, fmaChains),
		fmt.Sprintf("%d-double registers and returns the sum of all accumulators. It needs %s.", lanes, need))
	n := Load(Param("n"), GP64())
	vec := YMM
	if zmm {
		vec = ZMM
	}
	a := vec()
	pa, err := Param("a").Resolve()
	if err != nil {
		panic(err)
	}
	VBROADCASTSD(pa.Addr, a)
	acc := make([]VecVirtual, fmaChains)
	for i := range acc {
		acc[i] = vec()
		if zmm {
			VPXORQ(acc[i], acc[i], acc[i])
		} else {
			VXORPD(acc[i], acc[i], acc[i])
		}
	}
	l := func(s string) string { return name + "_" + s }
	TESTQ(n, n)
	JLE(LabelRef(l("reduce")))
	Label(l("loop"))
	for i := range acc {
		VFMADD231PD(a, a, acc[i])
	}
	DECQ(n)
	JNZ(LabelRef(l("loop")))

	Label(l("reduce"))
	for i := 1; i < len(acc); i++ {
		VADDPD(acc[i], acc[0], acc[0])
	}
	y := acc[0]
	if zmm {
		y = YMM()
		VEXTRACTF64X4(U8(1), acc[0], y)
		VADDPD(acc[0].AsY(), y, y)
	}
	top := XMM()
	VEXTRACTF128(U8(1), y, top)
	s := y.AsX()
	VADDPD(top, s, s)
	VHADDPD(s, s, s)
	VZEROUPPER()
	Store(s, ReturnIndex(0))
	RET()
}
