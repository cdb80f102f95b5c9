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

// col4 addresses the same component of four columns stride bytes apart: base, base+stride,
// base+2·stride and r3 = base+3·stride (both pointers advanced together).
type col4 struct{ base, r3, stride GPVirtual }

func newCol4(base, stride GPVirtual) col4 {
	c := col4{base: base, r3: GP64(), stride: stride}
	LEAQ(Mem{Base: base, Index: stride, Scale: 2}, c.r3)
	ADDQ(stride, c.r3)
	return c
}

func (c col4) at(u int) Mem {
	switch u {
	case 0:
		return Mem{Base: c.base}
	case 1:
		return Mem{Base: c.base, Index: c.stride, Scale: 1}
	case 2:
		return Mem{Base: c.base, Index: c.stride, Scale: 2}
	}
	return Mem{Base: c.r3}
}

func (c col4) next() {
	ADDQ(Imm(8), c.base)
	ADDQ(Imm(8), c.r3)
}

// load gathers the four columns' values into a YMM (column u in lane u).
func (c col4) load() VecVirtual {
	lo, hi := XMM(), XMM()
	VMOVSD(c.at(0), lo)
	VMOVHPD(c.at(1), lo, lo)
	VMOVSD(c.at(2), hi)
	VMOVHPD(c.at(3), hi, hi)
	v := YMM()
	VINSERTF128(Imm(1), hi, lo.AsY(), v)
	return v
}

// store scatters lane u of v to column u.
func (c col4) store(v VecVirtual) {
	VMOVSD(v.AsX(), c.at(0))
	VMOVHPD(v.AsX(), c.at(1))
	hi := XMM()
	VEXTRACTF128(Imm(1), v, hi)
	VMOVSD(hi, c.at(2))
	VMOVHPD(hi, c.at(3))
}

// sweepsAVX2: the further sweeps on AVX2+FMA, two groups of four columns (a column per YMM
// lane) at a time, as sweepsGroups but with the lane mask a vector (all ones for an active
// lane) and the masked update a blend: c_p = active ? max(0, fma(s, 1/G_pp, c_p)) : c_p, which
// gives an active lane the same bits as the generic code and leaves a stopped one as it was.
// The columns' values are moved in and out lane by lane (AVX2 has no scatter).
func sweepsAVX2() {
	const groups = 2
	name := "sweepsAVX2"
	TEXT(name, NOSPLIT, "func(h, cs, c, old, gneg, ginv, t []float64, k, kp, n, extra int, eps2 float64)")
	Pragma("noescape")
	Doc(name+" is sweepCoefsGo on 8·n columns, a column per YMM lane, two groups of four at a time (AVX2+FMA).",
		"t has room for 16·k+16 values. k, kp, n, extra >= 1.")
	ptrs := make([]Mem, 4)
	for i, nm := range []string{"h", "cs", "c", "old"} {
		ptrs[i] = AllocLocal(8)
		MOVQ(ldBase(nm), ptrs[i])
	}
	remSlot := AllocLocal(8)
	MOVQ(ld("n"), remSlot)
	const gw = 32 * groups
	// t: th[p] at gw·p, tc[p] at gw·(k+p), thr at gw·2k.
	Label("block")
	{
		kb := ld("kp")
		SHLQ(Imm(3), kb)
		ks := ld("k")
		SHLQ(Imm(3), ks)
		tp := ldBase("t")
		ct := ld("k")
		IMUL3Q(U32(gw), ct, ct)
		ADDQ(tp, ct)
		st := make([]VecVirtual, groups)
		for g := range st {
			st[g] = YMM()
			VXORPD(st[g], st[g], st[g])
		}
		for g := 0; g < groups; g++ {
			hb, cb, ob := GP64(), GP64(), GP64()
			MOVQ(ptrs[0], hb)
			MOVQ(ptrs[1], cb)
			MOVQ(ptrs[3], ob)
			for range 4 * g { // group g starts 4·g columns further
				ADDQ(kb, hb)
				ADDQ(kb, cb)
				ADDQ(ks, ob)
			}
			hc, cc, oc := newCol4(hb, kb), newCol4(cb, kb), newCol4(ob, ks)
			tpg, ctg := GP64(), GP64()
			MOVQ(tp, tpg)
			MOVQ(ct, ctg)
			p := ld("k")
			lbl := fmt.Sprintf("in%d", g)
			Label(lbl)
			hv := hc.load()
			VMOVUPD(hv, Mem{Base: tpg, Disp: 32 * g})
			cv := cc.load()
			VMOVUPD(cv, Mem{Base: ctg, Disp: 32 * g})
			ov := oc.load()
			d := YMM()
			VSUBPD(ov, cv, d) // c1[p] - c0[p]
			VFMADD231PD(d, d, st[g])
			hc.next()
			cc.next()
			oc.next()
			ADDQ(U32(gw), tpg)
			ADDQ(U32(gw), ctg)
			DECQ(p)
			JNZ(LabelRef(lbl))
		}
		// thr = first·eps2 (one rounding), kept in t; active = first > thr (all ones).
		eps := YMM()
		VBROADCASTSD(paramMem("eps2"), eps)
		thrp := ld("k")
		IMUL3Q(U32(2*gw), thrp, thrp)
		ADDQ(tp, thrp)
		for g := range st {
			thr, act := YMM(), YMM()
			VMULPD(eps, st[g], thr)
			VMOVUPD(thr, Mem{Base: thrp, Disp: 32 * g})
			VCMPPD(Imm(gtOQ), thr, st[g], act)
			VMOVUPD(act, Mem{Base: thrp, Disp: gw + 32*g})
		}
	}
	left := AllocLocal(8)
	MOVQ(ld("extra"), left)
	Label("sweep")
	{
		k := ld("k")
		tp := ldBase("t")
		ct := GP64()
		MOVQ(k, ct)
		IMUL3Q(U32(gw), ct, ct)
		ADDQ(tp, ct)
		thrp := GP64()
		MOVQ(k, thrp)
		IMUL3Q(U32(2*gw), thrp, thrp)
		ADDQ(tp, thrp)
		act := make([]VecVirtual, groups)
		for g := range act {
			act[g] = YMM()
			VMOVUPD(Mem{Base: thrp, Disp: gw + 32*g}, act[g])
		}
		any := YMM()
		VORPD(act[1], act[0], any)
		VTESTPD(any, any) // ZF: no sign bit set, no lane active
		JZ(LabelRef("scatter"))
		st := make([]VecVirtual, groups)
		for g := range st {
			st[g] = YMM()
			VXORPD(st[g], st[g], st[g])
		}
		zr := YMM()
		VXORPD(zr, zr, zr)
		grow := ldBase("gneg")
		gi := ldBase("ginv")
		p := GP64()
		XORQ(p, p)
		Label("comp2")
		s := make([]VecVirtual, groups)
		for g := range s {
			s[g] = YMM()
			VMOVUPD(Mem{Base: tp, Disp: 32 * g}, s[g])
		}
		term := func(gq, cq Register) {
			gb := YMM()
			VBROADCASTSD(Mem{Base: gq}, gb)
			for g := range s {
				VFMADD231PD(Mem{Base: cq, Disp: 32 * g}, gb, s[g])
			}
			ADDQ(Imm(8), gq)
			ADDQ(U32(gw), cq)
		}
		gq, cq, cnt := GP64(), GP64(), GP64()
		LEAQ(Mem{Base: grow, Index: p, Scale: 8}, gq)
		MOVQ(p, cq)
		IMUL3Q(U32(gw), cq, cq)
		ADDQ(ct, cq)
		MOVQ(k, cnt)
		SUBQ(p, cnt)
		Label("old2")
		term(gq, cq)
		DECQ(cnt)
		JNZ(LabelRef("old2"))
		MOVQ(grow, gq)
		MOVQ(ct, cq)
		MOVQ(p, cnt)
		Label("new2")
		TESTQ(cnt, cnt)
		JZ(LabelRef("apply2"))
		term(gq, cq)
		DECQ(cnt)
		JMP(LabelRef("new2"))
		Label("apply2")
		ib := YMM()
		VBROADCASTSD(Mem{Base: gi, Index: p, Scale: 8}, ib)
		cp := GP64()
		MOVQ(p, cp)
		IMUL3Q(U32(gw), cp, cp)
		ADDQ(ct, cp)
		for g := range s {
			prev, nv, d := YMM(), YMM(), YMM()
			VMOVUPD(Mem{Base: cp, Disp: 32 * g}, prev)
			VMOVAPD(prev, nv)
			VFMADD231PD(ib, s[g], nv)
			VMAXPD(nv, zr, nv)
			VBLENDVPD(act[g], nv, prev, nv) // active lanes take the new value
			VSUBPD(prev, nv, d)
			VFMADD231PD(d, d, st[g])
			VMOVUPD(nv, Mem{Base: cp, Disp: 32 * g})
		}
		LEAQ(Mem{Base: grow, Index: k, Scale: 8}, grow)
		ADDQ(U32(gw), tp)
		INCQ(p)
		CMPQ(p, k)
		JL(LabelRef("comp2"))
		for g := range st {
			on := YMM()
			VCMPPD(Imm(gtOQ), Mem{Base: thrp, Disp: 32 * g}, st[g], on) // st > thr
			VANDPD(act[g], on, on)
			VMOVUPD(on, Mem{Base: thrp, Disp: gw + 32*g})
		}
	}
	DECQ(left)
	JNZ(LabelRef("sweep"))

	Label("scatter")
	{
		kb := ld("kp")
		SHLQ(Imm(3), kb)
		ks := ld("k")
		SHLQ(Imm(3), ks)
		ct := ld("k")
		IMUL3Q(U32(gw), ct, ct)
		ADDQ(ldBase("t"), ct)
		for g := 0; g < groups; g++ {
			cb, ccb := GP64(), GP64()
			MOVQ(ptrs[1], cb)
			MOVQ(ptrs[2], ccb)
			for range 4 * g {
				ADDQ(kb, cb)
				ADDQ(ks, ccb)
			}
			csc, cc := newCol4(cb, kb), newCol4(ccb, ks)
			ctg := GP64()
			MOVQ(ct, ctg)
			p := ld("k")
			lbl := fmt.Sprintf("out%d", g)
			Label(lbl)
			v := YMM()
			VMOVUPD(Mem{Base: ctg, Disp: 32 * g}, v)
			csc.store(v)
			cc.store(v)
			csc.next()
			cc.next()
			ADDQ(U32(gw), ctg)
			DECQ(p)
			JNZ(LabelRef(lbl))
		}
		// The next block: eight columns further.
		for i, stride := range []GPVirtual{kb, kb, ks, ks} {
			r := GP64()
			MOVQ(ptrs[i], r)
			LEAQ(Mem{Base: r, Index: stride, Scale: 8}, r)
			MOVQ(r, ptrs[i])
		}
	}
	DECQ(remSlot)
	JNZ(LabelRef("block"))
	VZEROUPPER()
	RET()
}

// paramMem is the memory operand of a parameter.
func paramMem(name string) Mem {
	a, err := Param(name).Resolve()
	if err != nil {
		panic(err)
	}
	return a.Addr
}
