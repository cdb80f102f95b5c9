package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Accelerated DID's further C sweeps (sweepCoefsGo in kernels/accel.go): a column per ZMM lane.
// Each lane computes its column's values with the operations of the generic code in the same
// order; the per-column stop rule ("sweep again while the last step's squared norm exceeds
// eps2 times the first's, at most extra times") becomes a lane mask: a sweep's new
// coefficients are merged into the active lanes only (a stopped lane keeps its values), the
// mask drops the lanes whose step fell to the threshold (an ordered compare, so NaN stops),
// and the loop runs while some lane is active and fewer than extra sweeps ran.

// gtOQ is VCMPPD's predicate "greater than, ordered, quiet": false when either is NaN, as Go's
// st > thr.
const gtOQ = 0x1E

// sweepsGroups: the further sweeps on groups of eight columns, groups interleaved per block (so
// that their independent chains of FMAs hide the latency). Per block, h, the coefficients after
// update (from cs) and the old coefficients are gathered into component vectors (the first
// step's squared norm is summed on the way), h and the coefficients kept in the scratch t
// (component p of group g at 64·(groups·p + g), h's first, then the coefficients'), the sweeps
// run component by component with loops over p and q as the generic code's, and the final
// coefficients are scattered back into cs (kp a column, pads untouched) and c (k a column).
func sweepsGroups(name string, groups int) {
	TEXT(name, NOSPLIT, "func(h, cs, c, old, gneg, ginv, t []float64, idx []int64, k, kp, n, extra int, eps2 float64)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s is sweepCoefsGo on %d·n columns, a column per ZMM lane, %d group(s) of eight at a time", name, 8*groups, groups),
		fmt.Sprintf("(AVX-512). t has room for %d·k values; idx holds the column offsets u·kp for u < %d, then u·k.", 16*groups, 8*groups),
		"k, kp, n, extra >= 1.")
	eps, err := Param("eps2").Resolve()
	if err != nil {
		panic(err)
	}
	// The pointers to the block's columns live on the stack: the sweep loop needs the registers.
	ptrs := make([]Mem, 4)
	for i, nm := range []string{"h", "cs", "c", "old"} {
		ptrs[i] = AllocLocal(8)
		MOVQ(ldBase(nm), ptrs[i])
	}
	remSlot := AllocLocal(8)
	MOVQ(ld("n"), remSlot)
	ip := ldBase("idx")
	ixKp, ixK := make([]VecVirtual, groups), make([]VecVirtual, groups)
	for g := range ixKp {
		ixKp[g], ixK[g] = ZMM(), ZMM()
		VMOVDQU64(Mem{Base: ip, Disp: 64 * g}, ixKp[g])
		VMOVDQU64(Mem{Base: ip, Disp: 64 * (groups + g)}, ixK[g])
	}
	zr := ZMM()
	VXORPD(zr, zr, zr)
	st, thr := make([]VecVirtual, groups), make([]VecVirtual, groups)
	mk := make([]OpmaskVirtual, groups)
	for g := range st {
		st[g], thr[g], mk[g] = ZMM(), ZMM(), K()
	}
	gw := uint64(64 * groups) // bytes of a component's vectors in t

	Label("block")
	// Gather: th[p], tc[p] and the first step's squared norm, component by component.
	for g := range st {
		VXORPD(st[g], st[g], st[g])
	}
	{
		tp := ldBase("t")
		ct := ld("k")
		IMUL3Q(U32(gw), ct, ct)
		ADDQ(tp, ct)
		hp, csp, op := GP64(), GP64(), GP64()
		MOVQ(ptrs[0], hp)
		MOVQ(ptrs[1], csp)
		MOVQ(ptrs[3], op)
		p := ld("k")
		Label("gather")
		for g := 0; g < groups; g++ {
			hv, cv, ov := ZMM(), ZMM(), ZMM()
			zero(hv, cv, ov) // a gather merges into its destination: give it no input
			VGATHERQPD(Mem{Base: hp, Index: ixKp[g], Scale: 8}, allLanes(), hv)
			VMOVUPD(hv, Mem{Base: tp, Disp: 64 * g})
			VGATHERQPD(Mem{Base: csp, Index: ixKp[g], Scale: 8}, allLanes(), cv)
			VMOVUPD(cv, Mem{Base: ct, Disp: 64 * g})
			VGATHERQPD(Mem{Base: op, Index: ixK[g], Scale: 8}, allLanes(), ov)
			d := ZMM()
			VSUBPD(ov, cv, d) // c1[p] - c0[p]
			VFMADD231PD(d, d, st[g])
		}
		ADDQ(Imm(8), hp)
		ADDQ(Imm(8), csp)
		ADDQ(Imm(8), op)
		ADDQ(U32(gw), tp)
		ADDQ(U32(gw), ct)
		DECQ(p)
		JNZ(LabelRef("gather"))
	}
	for g := range st {
		VMULPD_BCST(eps.Addr, st[g], thr[g]) // thr = first·eps2, one rounding
		VCMPPD(Imm(gtOQ), thr[g], st[g], mk[g])
	}

	left := AllocLocal(8)
	MOVQ(ld("extra"), left)
	Label("sweep")
	{
		anyOn := K()
		KMOVB(mk[0], anyOn)
		for g := 1; g < groups; g++ {
			KORB(mk[g], anyOn, anyOn)
		}
		KORTESTB(anyOn, anyOn)
		JZ(LabelRef("scatter"))
	}
	for g := range st {
		VXORPD(st[g], st[g], st[g])
	}
	{
		k := ld("k")
		tp := ldBase("t")
		ct := GP64()
		MOVQ(k, ct)
		IMUL3Q(U32(gw), ct, ct)
		ADDQ(tp, ct)
		grow := ldBase("gneg") // row p of -G
		gi := ldBase("ginv")   // 1/G_pp
		p := GP64()
		XORQ(p, p)
		Label("comp")
		s := make([]VecVirtual, groups)
		for g := range s {
			s[g] = ZMM()
			VMOVUPD(Mem{Base: tp, Disp: 64 * g}, s[g])
		}
		term := func(gq, cq Register) {
			gb := ZMM()
			VBROADCASTSD(Mem{Base: gq}, gb)
			for g := range s {
				VFMADD231PD(Mem{Base: cq, Disp: 64 * g}, gb, s[g])
			}
			ADDQ(Imm(8), gq)
			ADDQ(U32(gw), cq)
		}
		// The terms on the old coefficients (q = p..k-1), then on the new ones (q < p).
		gq, cq, cnt := GP64(), GP64(), GP64()
		LEAQ(Mem{Base: grow, Index: p, Scale: 8}, gq)
		MOVQ(p, cq)
		IMUL3Q(U32(gw), cq, cq)
		ADDQ(ct, cq)
		MOVQ(k, cnt)
		SUBQ(p, cnt)
		Label("old")
		term(gq, cq)
		DECQ(cnt)
		JNZ(LabelRef("old"))
		MOVQ(grow, gq)
		MOVQ(ct, cq)
		MOVQ(p, cnt)
		Label("new")
		TESTQ(cnt, cnt)
		JZ(LabelRef("apply"))
		term(gq, cq)
		DECQ(cnt)
		JMP(LabelRef("new"))
		Label("apply")
		// c_p = max(0, fma(s, 1/G_pp, c_p)) in the active lanes (0 first in VMAXPD keeps -0 and
		// NaN, as the generic n < 0 test); the step d = c_p - (c_p before) adds to st.
		ib := ZMM()
		VBROADCASTSD(Mem{Base: gi, Index: p, Scale: 8}, ib)
		cp := GP64()
		MOVQ(p, cp)
		IMUL3Q(U32(gw), cp, cp)
		ADDQ(ct, cp)
		for g := range s {
			prev, nv, d := ZMM(), ZMM(), ZMM()
			VMOVUPD(Mem{Base: cp, Disp: 64 * g}, prev)
			VMOVAPD(prev, nv)
			VFMADD231PD(ib, s[g], mk[g], nv)
			VMAXPD(nv, zr, mk[g], nv)
			VSUBPD(prev, nv, d)
			VFMADD231PD(d, d, st[g])
			VMOVUPD(nv, Mem{Base: cp, Disp: 64 * g})
		}
		LEAQ(Mem{Base: grow, Index: k, Scale: 8}, grow)
		ADDQ(U32(gw), tp)
		INCQ(p)
		CMPQ(p, k)
		JL(LabelRef("comp"))
	}
	for g := range st {
		VCMPPD(Imm(gtOQ), thr[g], st[g], mk[g], mk[g]) // still active: st > thr
	}
	DECQ(left)
	JNZ(LabelRef("sweep"))

	Label("scatter")
	{
		k := ld("k")
		ct := GP64()
		MOVQ(k, ct)
		IMUL3Q(U32(gw), ct, ct)
		ADDQ(ldBase("t"), ct)
		csp, cp := GP64(), GP64()
		MOVQ(ptrs[1], csp)
		MOVQ(ptrs[2], cp)
		p := GP64()
		MOVQ(k, p)
		Label("out")
		for g := 0; g < groups; g++ {
			v := ZMM()
			VMOVUPD(Mem{Base: ct, Disp: 64 * g}, v)
			VSCATTERQPD(v, allLanes(), Mem{Base: csp, Index: ixKp[g], Scale: 8})
			VSCATTERQPD(v, allLanes(), Mem{Base: cp, Index: ixK[g], Scale: 8})
		}
		ADDQ(Imm(8), csp)
		ADDQ(Imm(8), cp)
		ADDQ(U32(gw), ct)
		DECQ(p)
		JNZ(LabelRef("out"))
	}
	// The next block: 8·groups columns further.
	{
		kb := ld("kp")
		SHLQ(Imm(uint64(6)), kb) // 8 columns of kp values, bytes
		kk := ld("k")
		SHLQ(Imm(uint64(6)), kk)
		for i, stride := range []GPVirtual{kb, kb, kk, kk} {
			r := GP64()
			MOVQ(ptrs[i], r)
			for range groups {
				ADDQ(stride, r)
			}
			MOVQ(r, ptrs[i])
		}
	}
	DECQ(remSlot)
	JNZ(LabelRef("block"))
	VZEROUPPER()
	RET()
}

// allLanes returns a new opmask with its eight low bits set (a gather or scatter clears its
// mask). It is set from a general register, not by KXNORB of itself, which the register
// allocator would take for a read of a value live since the function's entry.
func allLanes() OpmaskVirtual {
	r := GP32()
	MOVL(U32(0xff), r)
	k := K()
	KMOVB(r, k)
	return k
}
