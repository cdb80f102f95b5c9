package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The column-lane dense kernels (AVX-512): steps 1 and 3 for dense blocks of many rows, with
// the vector lanes over columns (step 1) or over rows (step 3) instead of over components.
// Each lane still computes exactly one output value with the operations of the generic code in
// the same order (step 1 sums over rows in row order, step 3 over columns in column order); a
// lane of components would spend a vector on K = 10 values padded to 12, while a lane of
// columns or rows fills every slot and needs no broadcast of X. The values of X are read as
// stored, float64 or float32 (widened by VCVTPS2PD, which is exact), so a float32 block needs no
// widened copy.

// elemKind is how X's values are stored.
type elemKind struct {
	name  string // "F64" or "F32"
	bytes int
}

var (
	elemF64 = elemKind{"F64", 8}
	elemF32 = elemKind{"F32", 4}
)

// loadX loads eight consecutive values of X at m into z, widened to float64; with a mask
// register, lanes outside it are zero and not read.
func (e elemKind) loadX(m Mem, mask Op, z VecVirtual) {
	switch {
	case e.bytes == 8 && mask == nil:
		VMOVUPD(m, z)
	case e.bytes == 8:
		VMOVUPD_Z(m, mask, z)
	case mask == nil:
		VCVTPS2PD(m, z)
	default:
		VCVTPS2PD_Z(m, mask, z)
	}
}

// transpose8 transposes eight ZMM rows: out[e] lane l = r[l] lane e.
func transpose8(r []VecVirtual) []VecVirtual {
	a := make([]VecVirtual, 8)
	for u := 0; u < 4; u++ {
		a[2*u], a[2*u+1] = ZMM(), ZMM()
		VUNPCKLPD(r[2*u+1], r[2*u], a[2*u])   // r0[0] r1[0] r0[2] r1[2] r0[4] r1[4] r0[6] r1[6]
		VUNPCKHPD(r[2*u+1], r[2*u], a[2*u+1]) // r0[1] r1[1] r0[3] r1[3] ...
	}
	// c0 = [a0.L0 a0.L2 a2.L0 a2.L2] (elements 0 and 4 of rows 0-3), c1 = [a0.L1 a0.L3 a2.L1
	// a2.L3] (elements 2 and 6), c2, c3 from a1, a3 (1 and 5, 3 and 7); c4..c7 for rows 4-7.
	c := make([]VecVirtual, 8)
	for h := 0; h < 2; h++ {
		for u := 0; u < 2; u++ {
			lo, hi := a[4*h+u], a[4*h+u+2]
			c[4*h+2*u], c[4*h+2*u+1] = ZMM(), ZMM()
			VSHUFF64X2(Imm(0x88), hi, lo, c[4*h+2*u])
			VSHUFF64X2(Imm(0xDD), hi, lo, c[4*h+2*u+1])
		}
	}
	// element e of all eight rows: e=0: c0,c4 (0x88); 4: c0,c4 (0xDD); 2: c1,c5; 6; 1: c2,c6;
	// 5; 3: c3,c7; 7.
	out := make([]VecVirtual, 8)
	src := [4]int{0, 2, 1, 3} // c index holding elements (e, e+4) for e = 0..3
	for e := 0; e < 4; e++ {
		s := src[e]
		out[e], out[e+4] = ZMM(), ZMM()
		VSHUFF64X2(Imm(0x88), c[s+4], c[s], out[e])
		VSHUFF64X2(Imm(0xDD), c[s+4], c[s], out[e+4])
	}
	return out
}

// stride8 gives the addresses base + u·stride for u = 0..7 with two helper registers.
type stride8 struct {
	base, stride, r3, r5 GPVirtual
}

func newStride8(base, stride GPVirtual) stride8 {
	s := stride8{base: base, stride: stride, r3: GP64(), r5: GP64()}
	return s
}

// refresh recomputes the helper registers after base moved.
func (s stride8) refresh() {
	LEAQ(Mem{Base: s.base, Index: s.stride, Scale: 2}, s.r3)
	ADDQ(s.stride, s.r3)
	LEAQ(Mem{Base: s.r3, Index: s.stride, Scale: 2}, s.r5)
}

func (s stride8) at(u, disp int) Mem {
	switch u {
	case 0:
		return Mem{Base: s.base, Disp: disp}
	case 1:
		return Mem{Base: s.base, Index: s.stride, Scale: 1, Disp: disp}
	case 2:
		return Mem{Base: s.base, Index: s.stride, Scale: 2, Disp: disp}
	case 3:
		return Mem{Base: s.r3, Disp: disp}
	case 4:
		return Mem{Base: s.base, Index: s.stride, Scale: 4, Disp: disp}
	case 5:
		return Mem{Base: s.r5, Disp: disp}
	case 6:
		return Mem{Base: s.r5, Index: s.stride, Scale: 1, Disp: disp}
	}
	return Mem{Base: s.r3, Index: s.stride, Scale: 4, Disp: disp}
}

// chunks runs body for chunks of up to maxc components of k: cp = min(maxc, k - p0), k
// reloaded from its parameter each time.
func chunks(name string, maxc int, body func(cp int, p0 GPVirtual)) {
	pieces(name, maxc, 1, func() Op { return ld("k") }, body)
}

// maxDotsChunk is the most components the column-lane dots keep in registers (16
// accumulators, eight rows of X and the transposition's temporaries fit the 32 ZMM registers).
const maxDotsChunk = 16

// dotsDenseCols: step 1 for groups of eight dense columns, one column per ZMM lane: eight rows
// of the eight columns are loaded and transposed, then each row's vector meets B's row by
// broadcast FMAs into one accumulator per component, rows in order. The last m mod 8 rows are
// loaded under a mask (zeros beyond), against rows of B that the caller pads with zeros, which
// adds fma(0, 0, h) = h. The accumulators are transposed back into h (kp per column).
func dotsDenseCols(e elemKind) {
	name := "dotsDenseCols" + e.name + "AVX512"
	TEXT(name, NOSPLIT, fmt.Sprintf("func(bp []float64, x []%s, m, k, kp, ngroups, tailmask int, h []float64)", map[int]string{8: "float64", 4: "float32"}[e.bytes]))
	Pragma("noescape")
	Doc(name+" is dotsDenseGo (step 1) for 8·ngroups dense columns, a column per ZMM lane, with X stored as", map[int]string{8: "float64", 4: "float32"}[e.bytes]+".",
		"bp has (m rounded up to 8) rows of kp, zero beyond row m; tailmask = 2^(m mod 8) - 1. h's pads",
		"are written with zeros. m, k, kp >= 1, k <= kp, kp mod 4 = 0.")
	mask := K1
	tm := ld("tailmask")
	KMOVW(tm.As32(), mask)
	g := AllocLocal(8)
	MOVQ(U32(0), g)
	Label("dc_colgroup")
	chunks("dc", maxDotsChunk, func(cp int, p0 GPVirtual) {
		pre := fmt.Sprintf("dc%d_", cp)
		kb := ld("kp")
		SHLQ(Imm(3), kb)
		xs := ld("m")
		SHLQ(Imm(uint64(map[int]uint64{8: 3, 4: 2}[e.bytes])), xs)
		// xg = x + g·8·xs
		xg := GP64()
		MOVQ(g, xg)
		IMULQ(xs, xg)
		SHLQ(Imm(3), xg)
		ADDQ(ldBase("x"), xg)
		br := ldBase("bp")
		LEAQ(Mem{Base: br, Index: p0, Scale: 8}, br)
		acc := make([]VecVirtual, cp)
		for q := range acc {
			acc[q] = ZMM()
			VXORPD(acc[q], acc[q], acc[q])
		}
		xr := newStride8(xg, xs)
		bs := newStride8(br, kb)
		// pf walks the next group of columns (contiguous, 8·xs bytes) at the pace of this
		// group's row blocks, so that it arrives from memory while this group computes.
		pf := GP64()
		LEAQ(Mem{Base: xg, Index: xs, Scale: 8}, pf)
		n := ld("m")
		SHRQ(Imm(3), n)
		block := func(masked bool) {
			xr.refresh()
			bs.refresh()
			if !masked {
				for d := 0; d < 64*e.bytes; d += 64 {
					PREFETCHT0(Mem{Base: pf, Disp: d})
				}
				ADDQ(U32(uint64(64*e.bytes)), pf)
			}
			v := make([]VecVirtual, 8)
			for l := range v {
				v[l] = ZMM()
				if masked {
					e.loadX(xr.at(l, 0), mask, v[l])
				} else {
					e.loadX(xr.at(l, 0), nil, v[l])
				}
			}
			t := transpose8(v)
			for rr := 0; rr < 8; rr++ {
				for q := 0; q < cp; q++ {
					VFMADD231PD_BCST(bs.at(rr, 8*q), t[rr], acc[q])
				}
			}
		}
		Label(pre + "rows")
		TESTQ(n, n)
		JZ(LabelRef(pre + "tail"))
		block(false)
		ADDQ(Imm(uint64(8*e.bytes)), xg)
		LEAQ(Mem{Base: br, Index: kb, Scale: 8}, br)
		DECQ(n)
		JMP(LabelRef(pre + "rows"))
		Label(pre + "tail")
		tm2 := ld("tailmask")
		TESTQ(tm2, tm2)
		JZ(LabelRef(pre + "store"))
		block(true)
		Label(pre + "store")
		// h for the group's columns: hg = h + g·8·kb + p0·8.
		hg := GP64()
		MOVQ(g, hg)
		IMULQ(kb, hg)
		SHLQ(Imm(3), hg)
		ADDQ(ldBase("h"), hg)
		LEAQ(Mem{Base: hg, Index: p0, Scale: 8}, hg)
		hs := newStride8(hg, kb)
		hs.refresh()
		zeroV := ZMM()
		VXORPD(zeroV, zeroV, zeroV)
		for s := 0; s < cp; s += 8 {
			in := make([]VecVirtual, 8)
			for u := range in {
				if s+u < cp {
					in[u] = acc[s+u]
				} else {
					in[u] = zeroV
				}
			}
			out := transpose8(in)
			// kp - (p0+s) is a multiple of 4 that is at least 4: store 8 lanes when it is at
			// least 8, else 4 (which ends the column's row of kp).
			room := GP64()
			MOVQ(kb, room)
			SHRQ(Imm(3), room)
			SUBQ(p0, room)
			SUBQ(Imm(uint64(s)), room)
			lbl := fmt.Sprintf("%ss%d_", pre, s)
			CMPQ(room, Imm(8))
			JL(LabelRef(lbl + "four"))
			for l := 0; l < 8; l++ {
				VMOVUPD(out[l], hs.at(l, 8*s))
			}
			JMP(LabelRef(lbl + "done"))
			Label(lbl + "four")
			for l := 0; l < 8; l++ {
				VMOVUPD(out[l].AsY(), hs.at(l, 8*s))
			}
			Label(lbl + "done")
		}
	})
	INCQ(g)
	ng := GP64()
	MOVQ(g, ng)
	CMPQ(ng, ld("ngroups"))
	JL(LabelRef("dc_colgroup"))
	VZEROUPPER()
	RET()
}

// maxAccChunk is the most components the column-lane accumulation keeps in registers: two
// ZMM (16 rows) per component.
const maxAccChunk = 12

// accDenseCols: step 3 for dense columns with the lanes over rows of A, which it keeps
// transposed (at: k rows of m, component-major): for each block of 16 (then 8) rows and chunk
// of components, at's values stay in registers while the batch's columns pass in order, each
// adding fma(x, c_j[p], .) to its rows. The last m mod 8 rows go under a mask.
func accDenseCols(e elemKind) {
	name := "accDenseCols" + e.name + "AVX512"
	typ := map[int]string{8: "float64", 4: "float32"}[e.bytes]
	TEXT(name, NOSPLIT, fmt.Sprintf("func(x []%s, m, k, kp, ncols, tailmask int, cs, at []float64)", typ))
	Pragma("noescape")
	Doc(name+" is accDenseGo (step 3) for ncols dense columns stored as "+typ+", with A transposed:",
		"at[p*m+i] is A[i, p]. tailmask = 2^(m mod 8) - 1. m, k, ncols >= 1, k <= kp.")
	mask := K1
	tm := ld("tailmask")
	KMOVW(tm.As32(), mask)
	chunks("ac", maxAccChunk, func(cp int, p0 GPVirtual) {
		pre := fmt.Sprintf("ac%d_", cp)
		i0 := AllocLocal(8)
		MOVQ(U32(0), i0)
		variant := func(rows int, masked bool, label string) {
			mb := ld("m")
			SHLQ(Imm(3), mb)
			// a = at + p0·mb + i0·8
			a := GP64()
			MOVQ(p0, a)
			IMULQ(mb, a)
			ADDQ(ldBase("at"), a)
			iv := GP64()
			MOVQ(i0, iv)
			LEAQ(Mem{Base: a, Index: iv, Scale: 8}, a)
			nh := rows / 8
			acc := make([][]VecVirtual, cp)
			ap := GP64()
			MOVQ(a, ap)
			for q := range acc {
				acc[q] = make([]VecVirtual, nh)
				for h := range acc[q] {
					acc[q][h] = ZMM()
					if masked {
						VMOVUPD_Z(Mem{Base: ap, Disp: 64 * h}, mask, acc[q][h])
					} else {
						VMOVUPD(Mem{Base: ap, Disp: 64 * h}, acc[q][h])
					}
				}
				if q+1 < cp {
					ADDQ(mb, ap)
				}
			}
			xs := ld("m")
			SHLQ(Imm(uint64(map[int]uint64{8: 3, 4: 2}[e.bytes])), xs)
			xj := ldBase("x")
			MOVQ(i0, iv)
			LEAQ(Mem{Base: xj, Index: iv, Scale: uint8(e.bytes)}, xj)
			csj := ldBase("cs")
			LEAQ(Mem{Base: csj, Index: p0, Scale: 8}, csj)
			kb := ld("kp")
			SHLQ(Imm(3), kb)
			n := ld("ncols")
			Label(pre + label + "_col")
			xv := make([]VecVirtual, nh)
			for h := range xv {
				xv[h] = ZMM()
				if masked {
					e.loadX(Mem{Base: xj, Disp: 8 * e.bytes * h}, mask, xv[h])
				} else {
					e.loadX(Mem{Base: xj, Disp: 8 * e.bytes * h}, nil, xv[h])
				}
			}
			for q := 0; q < cp; q++ {
				bc := ZMM()
				VBROADCASTSD(Mem{Base: csj, Disp: 8 * q}, bc)
				for h := 0; h < nh; h++ {
					VFMADD231PD(bc, xv[h], acc[q][h])
				}
			}
			ADDQ(xs, xj)
			ADDQ(kb, csj)
			DECQ(n)
			JNZ(LabelRef(pre + label + "_col"))
			MOVQ(a, ap)
			for q := range acc {
				for h := range acc[q] {
					if masked {
						VMOVUPD(acc[q][h], mask, Mem{Base: ap, Disp: 64 * h})
					} else {
						VMOVUPD(acc[q][h], Mem{Base: ap, Disp: 64 * h})
					}
				}
				if q+1 < cp {
					ADDQ(mb, ap)
				}
			}
			ADDQ(U32(uint64(rows)), i0)
		}
		left := func() GPVirtual {
			r := ld("m")
			SUBQ(i0, r)
			return r
		}
		Label(pre + "r16")
		CMPQ(left(), Imm(16))
		JL(LabelRef(pre + "r8"))
		variant(16, false, "b16")
		JMP(LabelRef(pre + "r16"))
		Label(pre + "r8")
		CMPQ(left(), Imm(8))
		JL(LabelRef(pre + "rt"))
		variant(8, false, "b8")
		Label(pre + "rt")
		tm2 := ld("tailmask")
		TESTQ(tm2, tm2)
		JZ(LabelRef(pre + "end"))
		variant(8, true, "bt")
		Label(pre + "end")
	})
	VZEROUPPER()
	RET()
}

// ld loads an integer parameter into a new register.
func ld(name string) GPVirtual {
	r := GP64()
	Load(Param(name), r)
	return r
}

// ldBase loads a slice parameter's base pointer into a new register.
func ldBase(name string) GPVirtual {
	r := GP64()
	Load(Param(name).Base(), r)
	return r
}

// transpose4E is transpose4 with EVEX-encodable instructions only (VSHUFF64X2 for
// VPERM2F128), so that its registers may be any of the 32 AVX-512 vector registers.
func transpose4E(r []VecVirtual) []VecVirtual {
	t := ymms(4)
	VUNPCKLPD(r[1], r[0], t[0]) // r0[0] r1[0] r0[2] r1[2]
	VUNPCKHPD(r[1], r[0], t[1]) // r0[1] r1[1] r0[3] r1[3]
	VUNPCKLPD(r[3], r[2], t[2])
	VUNPCKHPD(r[3], r[2], t[3])
	out := ymms(4)
	VSHUFF64X2(Imm(0), t[2], t[0], out[0]) // low halves of t0, t2
	VSHUFF64X2(Imm(0), t[3], t[1], out[1])
	VSHUFF64X2(Imm(3), t[2], t[0], out[2]) // high halves
	VSHUFF64X2(Imm(3), t[3], t[1], out[3])
	return out
}

// Bounds of the fused small-shape lane.
const (
	maxFusedM = 8
	maxFusedK = 4
)

// fusedSmall: steps 1-4 in one pass over groups of four dense float64 columns of m <= 8 rows,
// k <= 4 (kp = 4), for the paper's synthetic shapes, where a pass is a stream of X and C and
// any round trip through scratch costs as much as the arithmetic. Per group: h for each column
// (lanes over components, rows in order, B's rows from memory), h and C transposed to a column
// per lane, the coordinate update of updateT4, C written back, and the new coefficients added
// to A and V (held in registers across the call) column by column. The caller runs the last
// columns (ncols mod 4) with the separate steps, after these.
//
// With f.sweeps (fusedAccel*), accelerated DID's further C sweeps run in registers between
// step 2 and steps 3-4, with sweepCoefsGo's operations lane by lane (see sweeps.go): step 2 sums
// each column's first step on the way, h is kept in the frame, and a lane mask carries the stop
// rule; at most extra further sweeps (extra >= 1, or >= 0 with f.extrap). With f.extrap
// (fused*Extrap*), the columns are then extrapolated as extrapolateCoefs does, lane by lane:
// with p the previous plain coefficients (cprev, k a column), n = max(0, fma(beta, c - p, c)),
// cprev takes c and steps 3-4 and C take n.
func fusedSmall(m, k int, f fusedForm) {
	name := fmt.Sprintf("fused%sM%dK%dAVX512", f, m, k)
	sig := "func(x, bp, gneg4, ginv4, c []float64, ngroups int, a, v []float64)"
	what := "steps 1-4 (dotsDenseGo, updateCoefsGo, accDenseGo, accVGo)"
	switch {
	case f.sweeps && f.extrap:
		sig = "func(x, bp, gneg4, ginv4, c []float64, ngroups, extra int, eps2 float64, cprev []float64, beta float64, a, v []float64)"
		what = "steps 1-4 with at most extra >= 0 further sweeps (sweepCoefsGo) and the extrapolation (extrapolateCoefs: cprev takes the plain coefficients, C, A and V the moved ones) after step 2"
	case f.sweeps:
		sig = "func(x, bp, gneg4, ginv4, c []float64, ngroups, extra int, eps2 float64, a, v []float64)"
		what = "steps 1-4 with at most extra >= 1 further sweeps (sweepCoefsGo) after step 2"
	case f.extrap:
		sig = "func(x, bp, gneg4, ginv4, c []float64, ngroups int, cprev []float64, beta float64, a, v []float64)"
		what = "steps 1-4 with the extrapolation (extrapolateCoefs: cprev takes the plain coefficients, C, A and V the moved ones) after step 2"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(fmt.Sprintf("%s runs %s for m = %d, k = %d (kp = 4)", name, what, m, k),
		"on 4·ngroups dense float64 columns, A and V in registers (AVX-512VL: 32 vector registers). ngroups >= 1.",
		"ginv4 holds 1/G_pp four times for each p < k, then l1 four times: the L1 penalty subtracted from h",
		"between steps 1 and 2 (subtractL1; 0 without a penalty, which changes no bit).")
	accel := f.sweeps
	var hsave Mem // h after the L1 shift, by group and component: the sweeps start from it
	if accel {
		hsave = AllocLocal(2 * 4 * 32)
	}
	ap := ldBase("a")
	vp := ldBase("v")
	acc := loadYMMs(ap, m)
	vacc := loadYMMs(vp, k)
	xp := ldBase("x")
	bpp := ldBase("bp")
	gn := ldBase("gneg4")
	gi := ldBase("ginv4")
	cp := ldBase("c")
	var pp GPVirtual // cprev, in step with cp
	if f.extrap {
		pp = ldBase("cprev")
	}
	rem := ld("ngroups")
	zr := YMM()
	VXORPD(zr, zr, zr)
	// Two groups at a time, their instructions interleaved stage by stage: one group's steps 1
	// and 2 are a chain of some 70 cycles of dependent operations (FMA chains, transposes, the
	// coordinate update), and the out-of-order window holds about one group, so a single group
	// at a time leaves the FMA units idle most of the time.
	steps12 := func(ng int) [][]VecVirtual {
		hv := make([][]VecVirtual, ng)
		cv := make([][]VecVirtual, ng)
		rows := make([][]VecVirtual, ng)
		hr := make([][]VecVirtual, ng)
		for g := 0; g < ng; g++ {
			hr[g] = ymms(4)
			for u := range hr[g] {
				VXORPD(hr[g][u], hr[g][u], hr[g][u])
			}
		}
		// Step 1: four columns a group, each a chain over the rows.
		for r := 0; r < m; r++ {
			for u := 0; u < 4; u++ {
				for g := 0; g < ng; g++ {
					xb := YMM()
					VBROADCASTSD(Mem{Base: xp, Disp: 32*m*g + 8*(u*m+r)}, xb)
					VFMADD231PD(Mem{Base: bpp, Disp: 32 * r}, xb, hr[g][u])
				}
			}
		}
		for g := 0; g < ng; g++ {
			hv[g] = transpose4E(hr[g])
			for p := 0; p < k; p++ {
				VSUBPD(Mem{Base: gi, Disp: 32 * k}, hv[g][p], hv[g][p]) // h_j[p] - l1, as subtractL1
				if accel {
					VMOVUPD(hv[g][p], hsave.Offset(32*(4*g+p)))
				}
			}
		}
		// Step 2, as updateT4.
		for g := 0; g < ng; g++ {
			cv[g] = transpose4E(loadCoefs4(cp, 32*k*g, k))
		}
		for p := 0; p < k; p++ {
			for q := p; q < k; q++ {
				for g := 0; g < ng; g++ {
					VFMADD231PD(Mem{Base: gn, Disp: 32 * (p*k + q)}, cv[g][q], hv[g][p])
				}
			}
		}
		first := make([]VecVirtual, ng) // the first step's squared norm, as sweepCoefsGo's
		if accel {
			for g := range first {
				first[g] = YMM()
				VXORPD(first[g], first[g], first[g])
			}
		}
		for p := 0; p < k; p++ {
			for q := 0; q < p; q++ {
				for g := 0; g < ng; g++ {
					VFMADD231PD(Mem{Base: gn, Disp: 32 * (p*k + q)}, cv[g][q], hv[g][p])
				}
			}
			for g := 0; g < ng; g++ {
				var c0 VecVirtual
				if accel {
					c0 = YMM()
					VMOVAPD(cv[g][p], c0)
				}
				VFMADD231PD(Mem{Base: gi, Disp: 32 * p}, hv[g][p], cv[g][p])
				VMAXPD(cv[g][p], zr, cv[g][p])
				if accel {
					d := YMM()
					VSUBPD(c0, cv[g][p], d) // c1[p] - c0[p]
					VFMADD231PD(d, d, first[g])
				}
			}
		}
		if accel {
			fusedSweeps(ng, k, cv, first, hsave, gn, gi, zr, f.extrap)
		}
		if f.extrap {
			fusedExtrapolate(ng, k, cv, pp, zr)
		}
		for g := 0; g < ng; g++ {
			for p := k; p < 4; p++ {
				VXORPD(cv[g][p], cv[g][p], cv[g][p])
			}
			rows[g] = transpose4E(cv[g]) // rows[g][u] = column u's coefficients, pads 0
			storeCoefs4(rows[g], cp, 32*k*g, k, true)
		}
		return rows
	}
	// Steps 3 and 4, columns in order.
	steps34 := func(rows [][]VecVirtual) {
		for g := range rows {
			for u := 0; u < 4; u++ {
				for r := 0; r < m; r++ {
					xb := YMM()
					VBROADCASTSD(Mem{Base: xp, Disp: 32*m*g + 8*(u*m+r)}, xb)
					VFMADD231PD(rows[g][u], xb, acc[r])
				}
				for p := 0; p < k; p++ {
					cb := YMM()
					VPERMPD(Imm(uint64(p*0x55)), rows[g][u], cb)
					VFMADD231PD(rows[g][u], cb, vacc[p])
				}
			}
		}
	}
	Label("pair")
	CMPQ(rem, Imm(2))
	JL(LabelRef("single"))
	steps34(steps12(2))
	ADDQ(U32(uint64(64*m)), xp)
	ADDQ(U32(uint64(64*k)), cp)
	if f.extrap {
		ADDQ(U32(uint64(64*k)), pp)
	}
	SUBQ(Imm(2), rem)
	JMP(LabelRef("pair"))
	Label("single")
	TESTQ(rem, rem)
	JZ(LabelRef("end"))
	steps34(steps12(1))
	Label("end")
	storeYMMs(acc, ap)
	storeYMMs(vacc, vp)
	VZEROUPPER()
	RET()
}

// fusedSweeps emits the further sweeps of the fused kernel on ng groups of four columns a YMM
// (cv[g][p]: component p of group g's columns), from their first steps' squared norms first
// and their h in hsave, at most the parameter extra times: sweepCoefsGo's operations lane by
// lane, a stopped lane keeping its values (masked FMA and max).
//
// With mayBeZero, extra may be 0 (no sweep).
func fusedSweeps(ng, k int, cv [][]VecVirtual, first []VecVirtual, hsave Mem, gn, gi, zr Register, mayBeZero bool) {
	eps, err := Param("eps2").Resolve()
	if err != nil {
		panic(err)
	}
	thr := make([]VecVirtual, ng)
	mk := make([]OpmaskVirtual, ng)
	for g := range thr {
		thr[g], mk[g] = YMM(), K()
		VMULPD_BCST(eps.Addr, first[g], thr[g]) // thr = first·eps2, one rounding
		VCMPPD(Imm(gtOQ), thr[g], first[g], mk[g])
	}
	left := ld("extra")
	loop, done := fmt.Sprintf("sweep%d", ng), fmt.Sprintf("swept%d", ng)
	if mayBeZero {
		TESTQ(left, left)
		JZ(LabelRef(done))
	}
	Label(loop)
	if ng == 1 {
		KORTESTB(mk[0], mk[0])
	} else {
		KORTESTB(mk[0], mk[1])
	}
	JZ(LabelRef(done))
	st := make([]VecVirtual, ng)
	for g := range st {
		st[g] = YMM()
		VXORPD(st[g], st[g], st[g])
	}
	for p := 0; p < k; p++ {
		s := make([]VecVirtual, ng)
		for g := range s {
			s[g] = YMM()
			VMOVUPD(hsave.Offset(32*(4*g+p)), s[g])
		}
		for _, q := range append(seq(p, k), seq(0, p)...) {
			for g := range s {
				VFMADD231PD(Mem{Base: gn, Disp: 32 * (p*k + q)}, cv[g][q], s[g])
			}
		}
		for g := range s {
			prev, d := YMM(), YMM()
			VMOVAPD(cv[g][p], prev)
			VFMADD231PD(Mem{Base: gi, Disp: 32 * p}, s[g], mk[g], cv[g][p])
			VMAXPD(cv[g][p], zr, mk[g], cv[g][p])
			VSUBPD(prev, cv[g][p], d)
			VFMADD231PD(d, d, st[g])
		}
	}
	for g := range st {
		VCMPPD(Imm(gtOQ), thr[g], st[g], mk[g], mk[g]) // still active: st > thr
	}
	DECQ(left)
	JNZ(LabelRef(loop))
	Label(done)
}

// fusedForm is what a fused small-shape kernel adds to plain DID's steps 1-4: further C sweeps,
// extrapolation, both or neither. String gives the part of the kernel's name that says so.
type fusedForm struct{ sweeps, extrap bool }

func (f fusedForm) String() string {
	s := ""
	if f.sweeps {
		s += "Accel"
	}
	if f.extrap {
		s += "Extrap"
	}
	return s
}

// fusedForms are the fused kernels generated for each shape.
var fusedForms = []fusedForm{{false, false}, {true, false}, {false, true}, {true, true}}

// fusedExtrapolate emits extrapolateCoefs on ng groups of four columns a YMM (cv[g][p]: the new
// plain component p of group g's columns), the previous plain coefficients at pp (k a column,
// group g at 32·k·g): lane by lane d = c - p, n = fma(beta, d, c) (d·beta + c, the same exact
// product), n = max(0, n) with n kept when it is NaN or -0 (VMAXPD returns its second operand
// then), cprev <- c and cv <- n. Every component of cprev's group is rewritten, so the 4-wide
// stores' pads that spill into the next column are overwritten as in storeCoefs4.
func fusedExtrapolate(ng, k int, cv [][]VecVirtual, pp, zr Register) {
	beta, err := Param("beta").Resolve()
	if err != nil {
		panic(err)
	}
	for g := 0; g < ng; g++ {
		pv := transpose4E(loadCoefs4(pp, 32*k*g, k))
		for p := k; p < 4; p++ {
			VXORPD(cv[g][p], cv[g][p], cv[g][p])
		}
		storeCoefs4(transpose4E(cv[g]), pp, 32*k*g, k, true)
		for p := 0; p < k; p++ {
			d, n := YMM(), YMM()
			VSUBPD(pv[p], cv[g][p], d) // c - p
			VMOVAPD(cv[g][p], n)
			VFMADD231PD_BCST(beta.Addr, d, n) // d·beta + c
			VMAXPD(n, zr, n)
			cv[g][p] = n
		}
	}
}

// seq returns lo, lo+1, ..., hi-1.
func seq(lo, hi int) []int {
	var r []int
	for i := lo; i < hi; i++ {
		r = append(r, i)
	}
	return r
}
