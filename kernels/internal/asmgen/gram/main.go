// Command gram generates the AVX2+FMA assembly of DID's Gram-form lane kernel (package
// kernels, gramlane_amd64.s and its Go declarations) with avo. go generate in package kernels
// runs it; CI checks that the committed files are what it generates.
//
// Every function performs, lane by lane, exactly the operations of its generic Go counterpart
// in kernels/gramlane.go (the pinned arithmetic described there): one fused multiply-add
// (VFMADD231PD) per multiply-add, accumulators in the same order, no horizontal sums. The
// vector lanes are components (four of Kp per register); parallelism across columns comes from
// interleaving independent columns, never from reassociating a sum.
//
// Register names: B is the basis in rows of Kp values, A the accumulator X C^T in the same
// layout, cs the batch's updated coefficients (Kp per column), h the batch's B^T x (Kp per
// column). Byte strides: kb = 8·Kp (a row of B or A, a column of h or cs), mb = 8·M (a dense
// column of X).
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// maxRegRows bounds m·chunks of the register-resident dense accumulation (A kept in YMM
// registers across the batch), and maxVRegK the rank of the register-resident V accumulation.
const (
	maxRegRows = 10
	maxVRegK   = 8
	// maxUpdateRegK is the largest rank whose coordinate update keeps a column's coefficients
	// in registers.
	maxUpdateRegK = 7
)

func main() {
	ConstraintExpr("!purego")
	dotsDense()
	for _, t := range []isa{avx2, avx512} {
		dotsSparse(t)
		accSparse(t)
	}
	dotsDenseWide()
	accDenseBlocked(avx2, 3)
	widen()
	for nch := 1; nch <= 4; nch++ {
		for m := 1; m*nch <= maxRegRows; m++ {
			accDenseRegs(m, nch)
		}
	}
	for m := 1; m <= maxRegRows; m++ {
		for k := 1; k <= 4; k++ {
			accDenseVRegs(m, k)
		}
	}
	accVMem()
	for k := 1; k <= maxVRegK; k++ {
		accVRegs(k)
	}
	for k := 1; k <= maxVIdxK; k++ {
		accVIdx(k)
	}
	for k := minVIdxWideK; k <= maxVIdxK; k++ {
		accVIdxWide(k)
	}
	for k := 1; k <= maxVIdxK; k++ {
		accAIdx(k)
	}
	updateMem()
	for k := 1; k <= maxUpdateRegK; k++ {
		updateRegs(k)
	}
	for k := 1; k <= 4; k++ {
		updateT4(k)
	}
	updateGroupsAny("updateT4AnyAVX2", 1)
	updateGroupsAny("updateT16AnyAVX2", 4)
	for _, e := range []elemKind{elemF64, elemF32} {
		dotsDenseCols(e)
		accDenseCols(e)
	}
	for m := 1; m <= maxFusedM; m++ {
		for k := 1; k <= maxFusedK; k++ {
			for _, f := range fusedForms {
				fusedSmall(m, k, f)
			}
		}
	}
	sweepsGroups("sweepsG4AVX512", 4)
	sweepsGroups("sweepsG1AVX512", 1)
	sweepsAVX2()
	Generate()
}

// isa is an instruction set the group kernels are generated for: AVX2 works in 4-lane YMM
// pieces, groups of up to 16 components; AVX-512 in 8-lane ZMM pieces plus one 4-lane YMM
// piece when a group's width is 4 mod 8, groups of up to 32 (24 for the dense dots, whose
// eight columns each hold a group in registers).
type isa struct {
	suffix    string
	maxChunks int // chunks of 4 components per group
	wide      bool
}

var (
	avx2   = isa{"AVX2", 4, false}
	avx512 = isa{"AVX512", 6, true}
)

// piece is a vector's share of a group: its byte offset and lane count.
type piece struct{ off, lanes int }

// pieces splits a group of nch chunks into vectors.
func (t isa) pieces(nch int) []piece {
	var ps []piece
	off := 0
	for c := nch; c > 0; {
		if t.wide && c >= 2 {
			ps = append(ps, piece{off, 8})
			off += 64
			c -= 2
			continue
		}
		ps = append(ps, piece{off, 4})
		off += 32
		c--
	}
	return ps
}

// regs allocates one vector register per piece.
func regs(ps []piece) []VecVirtual {
	r := make([]VecVirtual, len(ps))
	for i, p := range ps {
		if p.lanes == 8 {
			r[i] = ZMM()
		} else {
			r[i] = YMM()
		}
	}
	return r
}

// bcast broadcasts the double at m into a register as wide as like.
func bcast(m Mem, like VecVirtual) VecVirtual {
	var r VecVirtual
	if like.Size() == 64 {
		r = ZMM()
	} else {
		r = YMM()
	}
	VBROADCASTSD(m, r)
	return r
}

// zeroAll clears registers of any width (a VEX 256-bit xor clears the upper lanes too).
func zeroAll(rs ...VecVirtual) {
	for _, r := range rs {
		y := r.AsY()
		VXORPD(y, y, y)
	}
}

func zero(regs ...VecVirtual) {
	for _, r := range regs {
		VXORPD(r, r, r)
	}
}

func ymms(n int) []VecVirtual {
	r := make([]VecVirtual, n)
	for i := range r {
		r[i] = YMM()
	}
	return r
}

// dotsDense: h[j*kp+p] = sum_i fma(bp[i*kp+p], x[j*m+i], .) for 8 columns at a time (eight
// independent accumulators hide the FMA latency), then one at a time.
func dotsDense() {
	TEXT("dotsDenseAVX2", NOSPLIT, "func(bp, x []float64, m, kp, ncols int, h []float64)")
	Pragma("noescape")
	Doc("dotsDenseAVX2 is dotsDenseGo (step 1 for dense columns) on AVX2+FMA. m, kp, ncols >= 1.")
	mb, kb := GP64(), GP64()
	Load(Param("m"), mb)
	SHLQ(Imm(3), mb)
	Load(Param("kp"), kb)
	SHLQ(Imm(3), kb)
	c0 := GP64() // byte offset of the chunk of 4 components
	XORQ(c0, c0)

	Label("chunk")
	rem := Load(Param("ncols"), GP64())
	x0 := Load(Param("x").Base(), GP64())
	hcol := Load(Param("h").Base(), GP64())
	ADDQ(c0, hcol)

	Label("block8")
	CMPQ(rem, Imm(8))
	JL(LabelRef("single"))
	acc := ymms(8)
	zero(acc...)
	x3, x5 := GP64(), GP64()
	LEAQ(Mem{Base: x0, Index: mb, Scale: 2}, x3)
	ADDQ(mb, x3)
	LEAQ(Mem{Base: x3, Index: mb, Scale: 2}, x5)
	brow := Load(Param("bp").Base(), GP64())
	ADDQ(c0, brow)
	i := Load(Param("m"), GP64())
	Label("rows8")
	b := YMM()
	VMOVUPD(Mem{Base: brow}, b)
	addrs := []Mem{
		{Base: x0}, {Base: x0, Index: mb, Scale: 1}, {Base: x0, Index: mb, Scale: 2}, {Base: x3},
		{Base: x0, Index: mb, Scale: 4}, {Base: x5}, {Base: x5, Index: mb, Scale: 1}, {Base: x3, Index: mb, Scale: 4},
	}
	for u, a := range addrs {
		t := YMM()
		VBROADCASTSD(a, t)
		VFMADD231PD(b, t, acc[u])
	}
	ADDQ(Imm(8), x0)
	ADDQ(Imm(8), x3)
	ADDQ(Imm(8), x5)
	ADDQ(kb, brow)
	DECQ(i)
	JNZ(LabelRef("rows8"))
	for u := range acc {
		VMOVUPD(acc[u], Mem{Base: hcol})
		ADDQ(kb, hcol)
	}
	// x0 has moved one column; the next block starts 8 columns after this one's start, at x5+2·mb
	// (x5 has moved one column too, from start+5·mb).
	LEAQ(Mem{Base: x5, Index: mb, Scale: 2}, x0)
	SUBQ(Imm(8), rem)
	JMP(LabelRef("block8"))

	Label("single")
	TESTQ(rem, rem)
	JZ(LabelRef("nextchunk"))
	a1 := YMM()
	zero(a1)
	brow1 := Load(Param("bp").Base(), GP64())
	ADDQ(c0, brow1)
	i1 := Load(Param("m"), GP64())
	Label("rows1")
	t1 := YMM()
	VBROADCASTSD(Mem{Base: x0}, t1)
	VFMADD231PD(Mem{Base: brow1}, t1, a1)
	ADDQ(Imm(8), x0)
	ADDQ(kb, brow1)
	DECQ(i1)
	JNZ(LabelRef("rows1"))
	VMOVUPD(a1, Mem{Base: hcol})
	ADDQ(kb, hcol)
	DECQ(rem)
	JMP(LabelRef("single"))

	Label("nextchunk")
	ADDQ(Imm(32), c0)
	CMPQ(c0, kb)
	JL(LabelRef("chunk"))
	VZEROUPPER()
	RET()
}

// groups emits, for each group of up to four chunks (16 components), the code body(nch, g0)
// where nch is the group's chunk count and g0 a register holding its byte offset. The group
// loop runs while g0 < kb.
func groups(name string, kb Op, body func(nch int, g0 GPVirtual)) {
	groupsUpTo(name, 4, kb, body)
}

// groupsUpTo is groups with groups of up to maxChunks chunks.
func groupsUpTo(name string, maxChunks int, kb Op, body func(nch int, g0 GPVirtual)) {
	pieces(name, maxChunks, 32, func() Op { return kb }, body)
}

// pieces runs body over [0, total) in pieces of up to maxn units of unit bytes (or values): n
// = min(maxn, left/unit), with the piece's start kept on the stack (the bodies need the
// registers). total is asked again wherever it is needed, so that it may be reloaded from a
// parameter instead of holding a register.
func pieces(name string, maxn int, unit uint64, total func() Op, body func(n int, start GPVirtual)) {
	off := AllocLocal(8)
	MOVQ(U32(0), off)
	Label(name + "_group")
	left := GP64()
	MOVQ(total(), left)
	SUBQ(off, left)
	for n := 1; n < maxn; n++ {
		CMPQ(left, Imm(unit*uint64(n)))
		JE(LabelRef(fmt.Sprintf("%s_n%d", name, n)))
	}
	JMP(LabelRef(fmt.Sprintf("%s_n%d", name, maxn)))
	for n := 1; n <= maxn; n++ {
		Label(fmt.Sprintf("%s_n%d", name, n))
		start := GP64()
		MOVQ(off, start)
		body(n, start)
		ADDQ(U32(unit*uint64(n)), off)
		next := GP64()
		MOVQ(off, next)
		CMPQ(next, total())
		JL(LabelRef(name + "_group"))
		JMP(LabelRef(name + "_done"))
	}
	Label(name + "_done")
}

// dotsSparse: step 1 for CSC columns, two columns at a time over their common length (two
// independent sets of accumulators), then each column's tail.
func dotsSparse(t isa) {
	TEXT("dotsSparse"+t.suffix, NOSPLIT, "func(bp []float64, kp int, colptr []int, rows []int32, vals []float64, h []float64)")
	Pragma("noescape")
	Doc("dotsSparse" + t.suffix + " is dotsSparseGo (step 1 for CSC columns) on " + t.suffix + "+FMA. len(colptr) >= 1.")
	// kp and 8·kp stay in memory: the four-column loop needs every general register.
	kb := AllocLocal(8)
	kbr := Load(Param("kp"), GP64())
	SHLQ(Imm(3), kbr)
	MOVQ(kbr, kb)
	kpb, err := Param("kp").Resolve()
	if err != nil {
		panic(err)
	}
	kpm := kpb.Addr
	groupsUpTo("ds", t.maxChunks, kb, func(nch int, g0 GPVirtual) {
		p := fmt.Sprintf("ds%d_", nch)
		ps := t.pieces(nch)
		cp := Load(Param("colptr").Base(), GP64())
		rem := Load(Param("colptr").Len(), GP64())
		DECQ(rem)
		hp := Load(Param("h").Base(), GP64())
		ADDQ(g0, hp)
		bpg := Load(Param("bp").Base(), GP64())
		ADDQ(g0, bpg)
		rows := Load(Param("rows").Base(), GP64())
		vals := Load(Param("vals").Base(), GP64())
		entry := func(acc []VecVirtual, e GPVirtual) {
			r := GP64()
			MOVLQSX(Mem{Base: rows, Index: e, Scale: 4}, r)
			IMULQ(kpm, r)
			var xv VecVirtual
			var xy Register
			for c, pc := range ps {
				if pc.lanes == 8 && xv == nil {
					xv = bcast(Mem{Base: vals, Index: e, Scale: 8}, acc[c])
				}
				if pc.lanes == 4 && xy == nil {
					if xv != nil {
						xy = xv.AsY()
					} else {
						xy = bcast(Mem{Base: vals, Index: e, Scale: 8}, acc[c])
					}
				}
				var x Register = xy
				if pc.lanes == 8 {
					x = xv
				}
				VFMADD231PD(Mem{Base: bpg, Index: r, Scale: 8, Disp: pc.off}, x, acc[c])
			}
		}
		store := func(acc []VecVirtual) {
			for c, pc := range ps {
				VMOVUPD(acc[c], Mem{Base: hp, Disp: pc.off})
			}
			ADDQ(kb, hp)
		}

		if 4*len(ps) <= 14 && !t.wide {
			// Four columns at a time over their common length: four independent sets of
			// accumulators hide the FMA latency; then each column's tail on its own set.
			Label(p + "quad")
			CMPQ(rem, Imm(4))
			JL(LabelRef(p + "pair"))
			ix := []GPVirtual{GP64(), GP64(), GP64(), GP64()}
			for u := range ix {
				MOVQ(Mem{Base: cp, Disp: 8 * u}, ix[u])
			}
			n, t := GP64(), GP64()
			MOVQ(ix[1], n)
			SUBQ(ix[0], n)
			for u := 1; u < 4; u++ {
				if u < 3 {
					MOVQ(ix[u+1], t)
				} else {
					MOVQ(Mem{Base: cp, Disp: 32}, t)
				}
				SUBQ(ix[u], t)
				CMPQ(t, n)
				CMOVQLT(t, n)
			}
			acc4 := make([][]VecVirtual, 4)
			for u := range acc4 {
				acc4[u] = regs(ps)
				zeroAll(acc4[u]...)
			}
			Label(p + "all4")
			TESTQ(n, n)
			JZ(LabelRef(p + "tail4_0"))
			for u := range acc4 {
				entry(acc4[u], ix[u])
			}
			for u := range ix {
				INCQ(ix[u])
			}
			DECQ(n)
			JMP(LabelRef(p + "all4"))
			for u := range acc4 {
				Label(fmt.Sprintf("%stail4_%d", p, u))
				CMPQ(ix[u], Mem{Base: cp, Disp: 8 * (u + 1)})
				if u < 3 {
					JGE(LabelRef(fmt.Sprintf("%stail4_%d", p, u+1)))
				} else {
					JGE(LabelRef(p + "store4"))
				}
				entry(acc4[u], ix[u])
				INCQ(ix[u])
				JMP(LabelRef(fmt.Sprintf("%stail4_%d", p, u)))
			}
			Label(p + "store4")
			for u := range acc4 {
				store(acc4[u])
			}
			ADDQ(Imm(32), cp)
			SUBQ(Imm(4), rem)
			JMP(LabelRef(p + "quad"))
		}

		Label(p + "pair")
		CMPQ(rem, Imm(2))
		JL(LabelRef(p + "single"))
		ca, aend, bend := GP64(), GP64(), GP64()
		MOVQ(Mem{Base: cp}, ca)
		MOVQ(Mem{Base: cp, Disp: 8}, aend)
		MOVQ(Mem{Base: cp, Disp: 16}, bend)
		cb := GP64()
		MOVQ(aend, cb)
		accA, accB := regs(ps), regs(ps)
		zeroAll(accA...)
		zeroAll(accB...)
		// common = ca + min(aend-ca, bend-cb)
		common, lb := GP64(), GP64()
		MOVQ(aend, common)
		SUBQ(ca, common)
		MOVQ(bend, lb)
		SUBQ(cb, lb)
		CMPQ(lb, common)
		CMOVQLT(lb, common)
		ADDQ(ca, common)
		Label(p + "both")
		CMPQ(ca, common)
		JGE(LabelRef(p + "tailA"))
		entry(accA, ca)
		entry(accB, cb)
		INCQ(ca)
		INCQ(cb)
		JMP(LabelRef(p + "both"))
		Label(p + "tailA")
		CMPQ(ca, aend)
		JGE(LabelRef(p + "tailB"))
		entry(accA, ca)
		INCQ(ca)
		JMP(LabelRef(p + "tailA"))
		Label(p + "tailB")
		CMPQ(cb, bend)
		JGE(LabelRef(p + "storepair"))
		entry(accB, cb)
		INCQ(cb)
		JMP(LabelRef(p + "tailB"))
		Label(p + "storepair")
		store(accA)
		store(accB)
		ADDQ(Imm(16), cp)
		SUBQ(Imm(2), rem)
		JMP(LabelRef(p + "pair"))

		Label(p + "single")
		TESTQ(rem, rem)
		JZ(LabelRef(p + "end"))
		e, eend := GP64(), GP64()
		MOVQ(Mem{Base: cp}, e)
		MOVQ(Mem{Base: cp, Disp: 8}, eend)
		acc := regs(ps)
		zeroAll(acc...)
		Label(p + "one")
		CMPQ(e, eend)
		JGE(LabelRef(p + "storeone"))
		entry(acc, e)
		INCQ(e)
		JMP(LabelRef(p + "one"))
		Label(p + "storeone")
		store(acc)
		Label(p + "end")
	})
	VZEROUPPER()
	RET()
}

// dotsDenseWide: step 1 for dense columns on AVX-512, eight columns at a time with a whole
// group of up to 24 components of each in registers (so x is read once per group).
func dotsDenseWide() {
	TEXT("dotsDenseAVX512", NOSPLIT, "func(bp, x []float64, m, kp, ncols int, h []float64)")
	Pragma("noescape")
	Doc("dotsDenseAVX512 is dotsDenseGo (step 1 for dense columns) on AVX-512+FMA. m, kp, ncols >= 1.")
	mb := GP64()
	Load(Param("m"), mb)
	SHLQ(Imm(3), mb)
	kb := Load(Param("kp"), GP64())
	SHLQ(Imm(3), kb)
	groupsUpTo("dd", 2, kb, func(nch int, g0 GPVirtual) {
		p := fmt.Sprintf("dd%d_", nch)
		ps := avx512.pieces(nch)
		rem := Load(Param("ncols"), GP64())
		x0 := Load(Param("x").Base(), GP64())
		hcol := Load(Param("h").Base(), GP64())
		ADDQ(g0, hcol)
		bg := Load(Param("bp").Base(), GP64())
		ADDQ(g0, bg)
		Label(p + "block8")
		CMPQ(rem, Imm(8))
		JL(LabelRef(p + "single"))
		acc := make([][]VecVirtual, 8)
		for u := range acc {
			acc[u] = regs(ps)
			zeroAll(acc[u]...)
		}
		x3, x5 := GP64(), GP64()
		LEAQ(Mem{Base: x0, Index: mb, Scale: 2}, x3)
		ADDQ(mb, x3)
		LEAQ(Mem{Base: x3, Index: mb, Scale: 2}, x5)
		brow := GP64()
		MOVQ(bg, brow)
		i := Load(Param("m"), GP64())
		Label(p + "rows8")
		bv := regs(ps)
		for c, pc := range ps {
			VMOVUPD(Mem{Base: brow, Disp: pc.off}, bv[c])
		}
		addrs := []Mem{
			{Base: x0}, {Base: x0, Index: mb, Scale: 1}, {Base: x0, Index: mb, Scale: 2}, {Base: x3},
			{Base: x0, Index: mb, Scale: 4}, {Base: x5}, {Base: x5, Index: mb, Scale: 1}, {Base: x3, Index: mb, Scale: 4},
		}
		for u, a := range addrs {
			xz := ZMM()
			VBROADCASTSD(a, xz)
			for c, pc := range ps {
				if pc.lanes == 8 {
					VFMADD231PD(bv[c], xz, acc[u][c])
				} else {
					VFMADD231PD(bv[c], xz.AsY(), acc[u][c])
				}
			}
		}
		ADDQ(Imm(8), x0)
		ADDQ(Imm(8), x3)
		ADDQ(Imm(8), x5)
		ADDQ(kb, brow)
		DECQ(i)
		JNZ(LabelRef(p + "rows8"))
		for u := range acc {
			for c, pc := range ps {
				VMOVUPD(acc[u][c], Mem{Base: hcol, Disp: pc.off})
			}
			ADDQ(kb, hcol)
		}
		LEAQ(Mem{Base: x5, Index: mb, Scale: 2}, x0)
		SUBQ(Imm(8), rem)
		JMP(LabelRef(p + "block8"))

		Label(p + "single")
		TESTQ(rem, rem)
		JZ(LabelRef(p + "end"))
		a1 := regs(ps)
		zeroAll(a1...)
		brow1 := GP64()
		MOVQ(bg, brow1)
		i1 := Load(Param("m"), GP64())
		Label(p + "rows1")
		xz := ZMM()
		VBROADCASTSD(Mem{Base: x0}, xz)
		for c, pc := range ps {
			if pc.lanes == 8 {
				VFMADD231PD(Mem{Base: brow1, Disp: pc.off}, xz, a1[c])
			} else {
				VFMADD231PD(Mem{Base: brow1, Disp: pc.off}, xz.AsY(), a1[c])
			}
		}
		ADDQ(Imm(8), x0)
		ADDQ(kb, brow1)
		DECQ(i1)
		JNZ(LabelRef(p + "rows1"))
		for c, pc := range ps {
			VMOVUPD(a1[c], Mem{Base: hcol, Disp: pc.off})
		}
		ADDQ(kb, hcol)
		DECQ(rem)
		JMP(LabelRef(p + "single"))
		Label(p + "end")
	})
	VZEROUPPER()
	RET()
}

// accDenseRegs: step 3 for dense columns of m rows and nch chunks (kp = 4·nch), A held in
// registers across the batch.
func accDenseRegs(m, nch int) {
	TEXT(fmt.Sprintf("accDenseM%dC%dAVX2", m, nch), NOSPLIT, "func(x []float64, ncols int, cs, a []float64)")
	Pragma("noescape")
	Doc(fmt.Sprintf("accDenseM%dC%dAVX2 is accDenseGo for m = %d, kp = %d on AVX2+FMA, A in registers. ncols >= 1.", m, nch, m, 4*nch))
	ap := Load(Param("a").Base(), GP64())
	acc := make([][]VecVirtual, m)
	for i := range acc {
		acc[i] = ymms(nch)
		for c := range acc[i] {
			VMOVUPD(Mem{Base: ap, Disp: 32 * (i*nch + c)}, acc[i][c])
		}
	}
	xp := Load(Param("x").Base(), GP64())
	csp := Load(Param("cs").Base(), GP64())
	rem := Load(Param("ncols"), GP64())
	Label("col")
	cv := ymms(nch)
	for c := range cv {
		VMOVUPD(Mem{Base: csp, Disp: 32 * c}, cv[c])
	}
	for i := 0; i < m; i++ {
		xv := YMM()
		VBROADCASTSD(Mem{Base: xp, Disp: 8 * i}, xv)
		for c := 0; c < nch; c++ {
			VFMADD231PD(cv[c], xv, acc[i][c])
		}
	}
	ADDQ(Imm(uint64(8*m)), xp)
	ADDQ(Imm(uint64(32*nch)), csp)
	DECQ(rem)
	JNZ(LabelRef("col"))
	for i := range acc {
		for c := range acc[i] {
			VMOVUPD(acc[i][c], Mem{Base: ap, Disp: 32 * (i*nch + c)})
		}
	}
	VZEROUPPER()
	RET()
}

// accSparse: step 3 for CSC columns, A in memory.
func accSparse(t isa) {
	TEXT("accSparse"+t.suffix, NOSPLIT, "func(kp int, colptr []int, rows []int32, vals []float64, cs, a []float64)")
	Pragma("noescape")
	Doc("accSparse" + t.suffix + " is accSparseGo (step 3 for CSC columns) on " + t.suffix + "+FMA. len(colptr) >= 1.")
	kb := Load(Param("kp"), GP64())
	SHLQ(Imm(3), kb)
	groupsUpTo("as", t.maxChunks, kb, func(nch int, g0 GPVirtual) {
		p := fmt.Sprintf("as%d_", nch)
		ps := t.pieces(nch)
		cp := Load(Param("colptr").Base(), GP64())
		rem := Load(Param("colptr").Len(), GP64())
		DECQ(rem)
		csp := Load(Param("cs").Base(), GP64())
		ADDQ(g0, csp)
		ag := Load(Param("a").Base(), GP64())
		ADDQ(g0, ag)
		rows := Load(Param("rows").Base(), GP64())
		vals := Load(Param("vals").Base(), GP64())
		Label(p + "col")
		TESTQ(rem, rem)
		JZ(LabelRef(p + "end"))
		e, eend := GP64(), GP64()
		MOVQ(Mem{Base: cp}, e)
		MOVQ(Mem{Base: cp, Disp: 8}, eend)
		cv := regs(ps)
		for c, pc := range ps {
			VMOVUPD(Mem{Base: csp, Disp: pc.off}, cv[c])
		}
		Label(p + "entry")
		CMPQ(e, eend)
		JGE(LabelRef(p + "next"))
		r := GP64()
		MOVLQSX(Mem{Base: rows, Index: e, Scale: 4}, r)
		IMULQ(kb, r)
		xz := ZMM()
		if t.wide {
			VBROADCASTSD(Mem{Base: vals, Index: e, Scale: 8}, xz)
		} else {
			VBROADCASTSD(Mem{Base: vals, Index: e, Scale: 8}, xz.AsY())
		}
		for c, pc := range ps {
			var tv VecVirtual = YMM()
			var xv Register = xz.AsY()
			if pc.lanes == 8 {
				tv, xv = ZMM(), xz
			}
			VMOVUPD(Mem{Base: ag, Index: r, Scale: 1, Disp: pc.off}, tv)
			VFMADD231PD(cv[c], xv, tv)
			VMOVUPD(tv, Mem{Base: ag, Index: r, Scale: 1, Disp: pc.off})
		}
		INCQ(e)
		JMP(LabelRef(p + "entry"))
		Label(p + "next")
		ADDQ(Imm(8), cp)
		ADDQ(kb, csp)
		DECQ(rem)
		JMP(LabelRef(p + "col"))
		Label(p + "end")
	})
	VZEROUPPER()
	RET()
}

// accVMem: step 4 with V in memory, for any k: row p takes chunks 0..p/4.
func accVMem() {
	TEXT("accVAVX2", NOSPLIT, "func(cs []float64, k, kp, ncols int, v []float64)")
	Pragma("noescape")
	Doc("accVAVX2 is accVGo (step 4) on AVX2+FMA, V in memory. k, kp, ncols >= 1.")
	kb := Load(Param("kp"), GP64())
	SHLQ(Imm(3), kb)
	csp := Load(Param("cs").Base(), GP64())
	rem := Load(Param("ncols"), GP64())
	k := Load(Param("k"), GP64())
	Label("col")
	vrow := Load(Param("v").Base(), GP64())
	p := GP64()
	XORQ(p, p)
	Label("row")
	xv := YMM()
	VBROADCASTSD(Mem{Base: csp, Index: p, Scale: 8}, xv)
	// chunks 0..p/4: byte offsets 0, 32, ... up to (p/4)*32 inclusive
	lim := GP64()
	MOVQ(p, lim)
	SHRQ(Imm(2), lim)
	SHLQ(Imm(5), lim)
	c := GP64()
	XORQ(c, c)
	Label("chunk")
	t := YMM()
	VMOVUPD(Mem{Base: vrow, Index: c, Scale: 1}, t)
	VFMADD231PD(Mem{Base: csp, Index: c, Scale: 1}, xv, t)
	VMOVUPD(t, Mem{Base: vrow, Index: c, Scale: 1})
	ADDQ(Imm(32), c)
	CMPQ(c, lim)
	JLE(LabelRef("chunk"))
	ADDQ(kb, vrow)
	INCQ(p)
	CMPQ(p, k)
	JL(LabelRef("row"))
	ADDQ(kb, csp)
	DECQ(rem)
	JNZ(LabelRef("col"))
	VZEROUPPER()
	RET()
}

// accVRegs: step 4 for a fixed k <= 8, V's lower chunks held in registers across the batch.
func accVRegs(k int) {
	kp := (k + 3) / 4 * 4
	TEXT(fmt.Sprintf("accVK%dAVX2", k), NOSPLIT, "func(cs []float64, ncols int, v []float64)")
	Pragma("noescape")
	Doc(fmt.Sprintf("accVK%dAVX2 is accVGo for k = %d (kp = %d) on AVX2+FMA, V in registers. ncols >= 1.", k, k, kp))
	vp := Load(Param("v").Base(), GP64())
	acc := make([][]VecVirtual, k)
	for p := range acc {
		acc[p] = ymms(p/4 + 1)
		for c := range acc[p] {
			VMOVUPD(Mem{Base: vp, Disp: 8 * (p*kp + 4*c)}, acc[p][c])
		}
	}
	csp := Load(Param("cs").Base(), GP64())
	rem := Load(Param("ncols"), GP64())
	Label("col")
	cv := ymms(kp / 4)
	for c := range cv {
		VMOVUPD(Mem{Base: csp, Disp: 32 * c}, cv[c])
	}
	for p := 0; p < k; p++ {
		xv := YMM()
		VBROADCASTSD(Mem{Base: csp, Disp: 8 * p}, xv)
		for c := range acc[p] {
			VFMADD231PD(cv[c], xv, acc[p][c])
		}
	}
	ADDQ(Imm(uint64(8*kp)), csp)
	DECQ(rem)
	JNZ(LabelRef("col"))
	for p := range acc {
		for c := range acc[p] {
			VMOVUPD(acc[p][c], Mem{Base: vp, Disp: 8 * (p*kp + 4*c)})
		}
	}
	VZEROUPPER()
	RET()
}

// updateRegs: step 2 for a fixed k, one column at a time with its coefficients in registers and
// the clamp at 0 done without a branch (VMAXSD with 0 first: 0 > n ? 0 : n keeps -0 and NaN, as
// the Go code's "if n < 0 { n = 0 }" does). Columns are independent, so the CPU overlaps them.
func updateRegs(k int) {
	TEXT(fmt.Sprintf("updateK%dAVX2", k), NOSPLIT, "func(h, cs, c, gneg, ginv []float64, kp, ncols int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("updateK%dAVX2 is updateCoefsGo for k = %d on FMA. ncols >= 1.", k, k))
	hp := Load(Param("h").Base(), GP64())
	csp := Load(Param("cs").Base(), GP64())
	cp := Load(Param("c").Base(), GP64())
	gn := Load(Param("gneg").Base(), GP64())
	gi := Load(Param("ginv").Base(), GP64())
	kb := Load(Param("kp"), GP64())
	SHLQ(Imm(3), kb)
	rem := Load(Param("ncols"), GP64())
	zr := XMM()
	VXORPD(zr, zr, zr)
	Label("col")
	cv := make([]VecVirtual, k)
	for q := range cv {
		cv[q] = XMM()
		VMOVSD(Mem{Base: cp, Disp: 8 * q}, cv[q])
	}
	// The terms on coefficients not yet updated (q >= p) first, for every component: they do
	// not wait for the components before.
	sv := make([]VecVirtual, k)
	for p := 0; p < k; p++ {
		sv[p] = XMM()
		VMOVSD(Mem{Base: hp, Disp: 8 * p}, sv[p])
		for q := p; q < k; q++ {
			VFMADD231SD(Mem{Base: gn, Disp: 8 * (p*k + q)}, cv[q], sv[p])
		}
	}
	for p := 0; p < k; p++ {
		for q := 0; q < p; q++ {
			VFMADD231SD(Mem{Base: gn, Disp: 8 * (p*k + q)}, cv[q], sv[p])
		}
		VFMADD231SD(Mem{Base: gi, Disp: 8 * p}, sv[p], cv[p])
		VMAXSD(cv[p], zr, cv[p])
	}
	for q := range cv {
		VMOVSD(cv[q], Mem{Base: cp, Disp: 8 * q})
		VMOVSD(cv[q], Mem{Base: csp, Disp: 8 * q})
	}
	ADDQ(kb, hp)
	ADDQ(kb, csp)
	ADDQ(Imm(uint64(8*k)), cp)
	DECQ(rem)
	JNZ(LabelRef("col"))
	RET()
}

// updateMem: step 2 for any k, the column's coefficients in its cs row.
func updateMem() {
	TEXT("updateAVX2", NOSPLIT, "func(h, cs, c, gneg, ginv []float64, k, kp, ncols int)")
	Pragma("noescape")
	Doc("updateAVX2 is updateCoefsGo on FMA, coefficients in memory. k, ncols >= 1.")
	hp := Load(Param("h").Base(), GP64())
	csp := Load(Param("cs").Base(), GP64())
	cp := Load(Param("c").Base(), GP64())
	k := Load(Param("k"), GP64())
	kb := Load(Param("kp"), GP64())
	SHLQ(Imm(3), kb)
	rem := Load(Param("ncols"), GP64())
	zr := XMM()
	VXORPD(zr, zr, zr)
	Label("col")
	q := GP64()
	XORQ(q, q)
	Label("copyin")
	t := XMM()
	VMOVSD(Mem{Base: cp, Index: q, Scale: 8}, t)
	VMOVSD(t, Mem{Base: csp, Index: q, Scale: 8})
	INCQ(q)
	CMPQ(q, k)
	JL(LabelRef("copyin"))
	gn := Load(Param("gneg").Base(), GP64())
	p := GP64()
	XORQ(p, p)
	Label("comp")
	sv := XMM()
	VMOVSD(Mem{Base: hp, Index: p, Scale: 8}, sv)
	MOVQ(p, q) // q = p..k-1 (old coefficients), then 0..p-1
	Label("old")
	g := XMM()
	VMOVSD(Mem{Base: gn, Index: q, Scale: 8}, g)
	VFMADD231SD(Mem{Base: csp, Index: q, Scale: 8}, g, sv)
	INCQ(q)
	CMPQ(q, k)
	JL(LabelRef("old"))
	XORQ(q, q)
	Label("new")
	CMPQ(q, p)
	JGE(LabelRef("apply"))
	g2 := XMM()
	VMOVSD(Mem{Base: gn, Index: q, Scale: 8}, g2)
	VFMADD231SD(Mem{Base: csp, Index: q, Scale: 8}, g2, sv)
	INCQ(q)
	JMP(LabelRef("new"))
	Label("apply")
	cn := XMM()
	VMOVSD(Mem{Base: csp, Index: p, Scale: 8}, cn)
	gi := Load(Param("ginv").Base(), GP64())
	VFMADD231SD(Mem{Base: gi, Index: p, Scale: 8}, sv, cn)
	VMAXSD(cn, zr, cn)
	VMOVSD(cn, Mem{Base: csp, Index: p, Scale: 8})
	VMOVSD(cn, Mem{Base: cp, Index: p, Scale: 8})
	LEAQ(Mem{Base: gn, Index: k, Scale: 8}, gn)
	INCQ(p)
	CMPQ(p, k)
	JL(LabelRef("comp"))
	ADDQ(kb, hp)
	ADDQ(kb, csp)
	LEAQ(Mem{Base: cp, Index: k, Scale: 8}, cp)
	DECQ(rem)
	JNZ(LabelRef("col"))
	RET()
}

// accDenseVRegs: steps 3 and 4 together for dense columns of m rows and k <= 4 (kp = 4), A and
// V held in registers across the batch: m + k independent FMAs per column.
func accDenseVRegs(m, k int) {
	TEXT(fmt.Sprintf("accDenseVM%dK%dAVX2", m, k), NOSPLIT, "func(x []float64, ncols int, cs, a, v []float64)")
	Pragma("noescape")
	Doc(fmt.Sprintf("accDenseVM%dK%dAVX2 is accDenseGo then accVGo for m = %d, k = %d (kp = 4) on AVX2+FMA, A and V in registers. ncols >= 1.", m, k, m, k))
	ap := Load(Param("a").Base(), GP64())
	vp := Load(Param("v").Base(), GP64())
	acc := loadYMMs(ap, m)
	vacc := loadYMMs(vp, k)
	xp := Load(Param("x").Base(), GP64())
	csp := Load(Param("cs").Base(), GP64())
	rem := Load(Param("ncols"), GP64())
	Label("col")
	cv := YMM()
	VMOVUPD(Mem{Base: csp}, cv)
	for i := 0; i < m; i++ {
		xv := YMM()
		VBROADCASTSD(Mem{Base: xp, Disp: 8 * i}, xv)
		VFMADD231PD(cv, xv, acc[i])
	}
	for p := 0; p < k; p++ {
		cb := YMM()
		VBROADCASTSD(Mem{Base: csp, Disp: 8 * p}, cb)
		VFMADD231PD(cv, cb, vacc[p])
	}
	ADDQ(Imm(uint64(8*m)), xp)
	ADDQ(Imm(32), csp)
	DECQ(rem)
	JNZ(LabelRef("col"))
	storeYMMs(acc, ap)
	storeYMMs(vacc, vp)
	VZEROUPPER()
	RET()
}

// transpose4 transposes the 4 x 4 block of doubles in r (rows) into the returned registers
// (columns): out[p][u] = r[u][p].
func transpose4(r []VecVirtual) []VecVirtual {
	t := ymms(4)
	VUNPCKLPD(r[1], r[0], t[0]) // r0[0] r1[0] r0[2] r1[2]
	VUNPCKHPD(r[1], r[0], t[1]) // r0[1] r1[1] r0[3] r1[3]
	VUNPCKLPD(r[3], r[2], t[2])
	VUNPCKHPD(r[3], r[2], t[3])
	out := ymms(4)
	VPERM2F128(Imm(0x20), t[2], t[0], out[0])
	VPERM2F128(Imm(0x20), t[3], t[1], out[1])
	VPERM2F128(Imm(0x31), t[2], t[0], out[2])
	VPERM2F128(Imm(0x31), t[3], t[1], out[3])
	return out
}

// updateT4: step 2 for k <= 4 (kp = 4) on four columns at a time, one column per vector lane:
// h and c are transposed into component vectors, updated with the same operations in the same
// order as updateRegs (so lane u computes exactly column u's scalar result), and transposed
// back. gneg4 and ginv4 hold each value of -G and 1/diag(G) four times. No load or store
// reaches past the group's columns. The caller runs the last ncols mod 4 columns with
// updateRegs.
func updateT4(k int) {
	TEXT(fmt.Sprintf("updateT4K%dAVX2", k), NOSPLIT, "func(h, cs, c, gneg4, ginv4 []float64, ngroups int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("updateT4K%dAVX2 is updateCoefsGo for k = %d on 4·ngroups columns, a column per lane (AVX2+FMA). ngroups >= 1.", k, k))
	hp := Load(Param("h").Base(), GP64())
	csp := Load(Param("cs").Base(), GP64())
	cp := Load(Param("c").Base(), GP64())
	gn := Load(Param("gneg4").Base(), GP64())
	gi := Load(Param("ginv4").Base(), GP64())
	rem := Load(Param("ngroups"), GP64())
	zr := YMM()
	VXORPD(zr, zr, zr)
	Label("group")
	hr := ymms(4)
	for u := range hr {
		VMOVUPD(Mem{Base: hp, Disp: 32 * u}, hr[u])
	}
	hv := transpose4(hr)
	cv := transpose4(loadCoefs4(cp, 0, k))
	for p := 0; p < k; p++ {
		for q := p; q < k; q++ {
			VFMADD231PD(Mem{Base: gn, Disp: 32 * (p*k + q)}, cv[q], hv[p])
		}
	}
	for p := 0; p < k; p++ {
		for q := 0; q < p; q++ {
			VFMADD231PD(Mem{Base: gn, Disp: 32 * (p*k + q)}, cv[q], hv[p])
		}
		VFMADD231PD(Mem{Base: gi, Disp: 32 * p}, hv[p], cv[p])
		VMAXPD(cv[p], zr, cv[p])
	}
	for p := k; p < 4; p++ {
		VXORPD(cv[p], cv[p], cv[p])
	}
	rows := transpose4(cv)
	for u := range rows {
		VMOVUPD(rows[u], Mem{Base: csp, Disp: 32 * u})
	}
	storeCoefs4(rows, cp, 0, k, false)
	ADDQ(Imm(128), hp)
	ADDQ(Imm(128), csp)
	ADDQ(Imm(uint64(32*k)), cp)
	DECQ(rem)
	JNZ(LabelRef("group"))
	VZEROUPPER()
	RET()
}

// accDenseBlocked: step 3 for dense columns with A in memory, four rows at a time: the rows'
// sums for a group of chunks stay in registers over the whole batch of columns (each column
// adds x_ij·c_j to them in column order) and are stored once, instead of a load and a store
// per entry. maxChunks bounds a group so that 4·pieces accumulators fit the registers.
func accDenseBlocked(t isa, maxChunks int) {
	name := "accDenseRows" + t.suffix
	TEXT(name, NOSPLIT, "func(x []float64, m, kp, ncols int, cs, a []float64)")
	Pragma("noescape")
	Doc(name + " is accDenseGo (step 3 for dense columns) on " + t.suffix + "+FMA, four rows of A in registers across the batch. m, kp, ncols >= 1.")
	kb := Load(Param("kp"), GP64())
	SHLQ(Imm(3), kb)
	mb := Load(Param("m"), GP64())
	SHLQ(Imm(3), mb)
	groupsUpTo("ab", maxChunks, kb, func(nch int, g0 GPVirtual) {
		p := fmt.Sprintf("ab%d_", nch)
		ps := t.pieces(nch)
		ar := Load(Param("a").Base(), GP64())
		ADDQ(g0, ar)
		csg := Load(Param("cs").Base(), GP64())
		ADDQ(g0, csg)
		xi := Load(Param("x").Base(), GP64())
		left := Load(Param("m"), GP64())
		rowLoop := func(rows int, label string) {
			Label(p + label)
			CMPQ(left, Imm(uint64(rows)))
			if rows == 4 {
				JL(LabelRef(p + "rows1"))
			} else {
				JL(LabelRef(p + "end"))
			}
			a3 := GP64()
			LEAQ(Mem{Base: ar, Index: kb, Scale: 2}, a3)
			ADDQ(kb, a3)
			rowAddr := func(u int, off int) Mem {
				switch u {
				case 0:
					return Mem{Base: ar, Disp: off}
				case 1:
					return Mem{Base: ar, Index: kb, Scale: 1, Disp: off}
				case 2:
					return Mem{Base: ar, Index: kb, Scale: 2, Disp: off}
				}
				return Mem{Base: a3, Disp: off}
			}
			acc := make([][]VecVirtual, rows)
			for u := range acc {
				acc[u] = regs(ps)
				for c, pc := range ps {
					VMOVUPD(rowAddr(u, pc.off), acc[u][c])
				}
			}
			xc, csj := GP64(), GP64()
			MOVQ(xi, xc)
			MOVQ(csg, csj)
			n := Load(Param("ncols"), GP64())
			Label(p + label + "_col")
			for u := 0; u < rows; u++ {
				z := ZMM()
				if t.wide {
					VBROADCASTSD(Mem{Base: xc, Disp: 8 * u}, z)
				} else {
					VBROADCASTSD(Mem{Base: xc, Disp: 8 * u}, z.AsY())
				}
				for c, pc := range ps {
					if pc.lanes == 8 {
						VFMADD231PD(Mem{Base: csj, Disp: pc.off}, z, acc[u][c])
					} else {
						VFMADD231PD(Mem{Base: csj, Disp: pc.off}, z.AsY(), acc[u][c])
					}
				}
			}
			ADDQ(mb, xc)
			ADDQ(kb, csj)
			DECQ(n)
			JNZ(LabelRef(p + label + "_col"))
			for u := range acc {
				for c, pc := range ps {
					VMOVUPD(acc[u][c], rowAddr(u, pc.off))
				}
			}
			if rows == 4 {
				LEAQ(Mem{Base: ar, Index: kb, Scale: 4}, ar)
			} else {
				ADDQ(kb, ar)
			}
			ADDQ(Imm(uint64(8*rows)), xi)
			SUBQ(Imm(uint64(rows)), left)
			JMP(LabelRef(p + label))
		}
		rowLoop(4, "rows4")
		rowLoop(1, "rows1")
		Label(p + "end")
	})
	VZEROUPPER()
	RET()
}

// widen: float32 values to float64 (exact), 16 a loop, for blocks stored as float32.
func widen() {
	TEXT("widenAVX2", NOSPLIT, "func(dst []float64, src []float32)")
	Pragma("noescape")
	Doc("widenAVX2 sets dst[i] = float64(src[i]) for i < len(src) on AVX2. len(dst) >= len(src).")
	d := Load(Param("dst").Base(), GP64())
	sp := Load(Param("src").Base(), GP64())
	n := Load(Param("src").Len(), GP64())
	Label("block")
	CMPQ(n, Imm(16))
	JL(LabelRef("tail"))
	v := ymms(4)
	for u := range v {
		VCVTPS2PD(Mem{Base: sp, Disp: 16 * u}, v[u])
	}
	for u := range v {
		VMOVUPD(v[u], Mem{Base: d, Disp: 32 * u})
	}
	ADDQ(Imm(64), sp)
	ADDQ(Imm(128), d)
	SUBQ(Imm(16), n)
	JMP(LabelRef("block"))
	Label("tail")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	x := XMM()
	VCVTSS2SD(Mem{Base: sp}, x, x)
	VMOVSD(x, Mem{Base: d})
	ADDQ(Imm(4), sp)
	ADDQ(Imm(8), d)
	DECQ(n)
	JMP(LabelRef("tail"))
	Label("done")
	VZEROUPPER()
	RET()
}

// updateGroupsAny: step 2 for any k on groups of four columns, a column per lane, like
// updateT4 but with the coefficients in a transposed scratch t and loops over p and q: for
// ranks above 4, where one column's update is hundreds of dependent scalar FMAs. Each
// component's sum is one chain of dependent FMAs per column, in the specification's order, so
// a single group waits on the FMA latency (about 4 cycles a term); groups interleaved keep
// that many chains in flight. t holds, for component p, the groups' vectors side by side
// (32·groups bytes a component): h's for all components, then c's. -G[p][q] is loaded once for
// all groups, and each group's coefficient is the FMA's memory operand: the product commutes,
// so each lane's bits are those of one group alone. cs holds the columns' old coefficients on
// entry (padded rows of kp, pads 0) and the new ones on return; the caller copies them
// between c and cs.
func updateGroupsAny(name string, groups int) {
	shift := map[int]uint64{1: 0, 2: 1, 4: 2, 8: 3}[groups] // log2(groups)
	TEXT(name, NOSPLIT, "func(h, cs, gneg4, ginv4, t []float64, k, kp, n int)")
	Pragma("noescape")
	at := map[int]string{1: "one group of four columns at a time", 4: "four groups of four columns at once"}[groups]
	Doc(fmt.Sprintf("%s is updateCoefsGo on %d·n columns held in cs, a column per lane, %s", name, 4*groups, at),
		fmt.Sprintf("(AVX2+FMA). t has room for %d·kp values. k, kp, n >= 1.", 8*groups))
	hp := Load(Param("h").Base(), GP64())
	csp := Load(Param("cs").Base(), GP64())
	tp := Load(Param("t").Base(), GP64())
	kb := Load(Param("kp"), GP64())
	SHLQ(Imm(3), kb) // row stride of h and cs, bytes
	ct := GP64()     // the transposed coefficients: t + 4·groups·kp values
	MOVQ(kb, ct)
	SHLQ(Imm(2+shift), ct)
	ADDQ(tp, ct)
	zr := YMM()
	VXORPD(zr, zr, zr)
	rem := Load(Param("n"), GP64())
	Label("block")
	// Transpose each group's h and cs rows into t: component p of group g at 32·(groups·p + g).
	for g := 0; g < groups; g++ {
		ch := GP64() // byte offset of the chunk in a row
		XORQ(ch, ch)
		Label(fmt.Sprintf("tin%d", g))
		cht := GP64() // the chunk's offset in t: 4·groups·ch
		MOVQ(ch, cht)
		SHLQ(Imm(2+shift), cht)
		for _, src := range []struct {
			base, dst Register
		}{{hp, tp}, {csp, ct}} {
			r := ymms(4)
			row := groupRow(src.base, kb, g)
			for u := range r {
				VMOVUPD(Mem{Base: row, Index: ch, Scale: 1}, r[u])
				ADDQ(kb, row)
			}
			cols := transpose4(r)
			for c := range cols {
				VMOVUPD(cols[c], Mem{Base: src.dst, Index: cht, Scale: 1, Disp: 32 * (groups*c + g)})
			}
		}
		ADDQ(Imm(32), ch)
		CMPQ(ch, kb)
		JL(LabelRef(fmt.Sprintf("tin%d", g)))
	}

	// The update, component by component: s = h_p, the terms on old coefficients (q >= p), then
	// on the new ones (q < p); c_p = max(0, fma(s, 1/G_pp, c_p)) (0 first in VMAXPD keeps -0
	// and NaN).
	k := Load(Param("k"), GP64())
	gn := Load(Param("gneg4").Base(), GP64())
	gi := Load(Param("ginv4").Base(), GP64())
	tScale := uint8(groups) // component stride in t over 32 bytes
	p := GP64()
	XORQ(p, p)
	Label("comp")
	pb := GP64() // p·32: the offset of component p in ginv4; in t, groups·pb
	MOVQ(p, pb)
	SHLQ(Imm(5), pb)
	sv := ymms(groups)
	for g := range sv {
		VMOVUPD(Mem{Base: tp, Index: pb, Scale: tScale, Disp: 32 * g}, sv[g])
	}
	term := func(qb Register) {
		gq := YMM()
		VMOVUPD(Mem{Base: gn, Index: qb, Scale: 1}, gq)
		for g := range sv {
			VFMADD231PD(Mem{Base: ct, Index: qb, Scale: tScale, Disp: 32 * g}, gq, sv[g])
		}
	}
	q := GP64()
	MOVQ(p, q)
	Label("old")
	qb := GP64()
	MOVQ(q, qb)
	SHLQ(Imm(5), qb)
	term(qb)
	INCQ(q)
	CMPQ(q, k)
	JL(LabelRef("old"))
	XORQ(q, q)
	Label("new")
	CMPQ(q, p)
	JGE(LabelRef("apply"))
	qb2 := GP64()
	MOVQ(q, qb2)
	SHLQ(Imm(5), qb2)
	term(qb2)
	INCQ(q)
	JMP(LabelRef("new"))
	Label("apply")
	for g := range sv {
		cp := YMM()
		VMOVUPD(Mem{Base: ct, Index: pb, Scale: tScale, Disp: 32 * g}, cp)
		VFMADD231PD(Mem{Base: gi, Index: pb, Scale: 1}, sv[g], cp)
		VMAXPD(cp, zr, cp)
		VMOVUPD(cp, Mem{Base: ct, Index: pb, Scale: tScale, Disp: 32 * g})
	}
	// gneg4 advances a row of k vectors per component
	kv := GP64()
	MOVQ(k, kv)
	SHLQ(Imm(5), kv)
	ADDQ(kv, gn)
	INCQ(p)
	CMPQ(p, k)
	JL(LabelRef("comp"))

	// Transpose the coefficients back into cs, group by group (pads stay 0: their vectors
	// were never written).
	for g := 0; g < groups; g++ {
		ch := GP64()
		XORQ(ch, ch)
		Label(fmt.Sprintf("tout%d", g))
		cht := GP64()
		MOVQ(ch, cht)
		SHLQ(Imm(2+shift), cht)
		r := ymms(4)
		for c := range r {
			VMOVUPD(Mem{Base: ct, Index: cht, Scale: 1, Disp: 32 * (groups*c + g)}, r[c])
		}
		rowsOut := transpose4(r)
		row := groupRow(csp, kb, g)
		for u := range rowsOut {
			VMOVUPD(rowsOut[u], Mem{Base: row, Index: ch, Scale: 1})
			ADDQ(kb, row)
		}
		ADDQ(Imm(32), ch)
		CMPQ(ch, kb)
		JL(LabelRef(fmt.Sprintf("tout%d", g)))
	}

	for range groups { // 4·groups rows further
		LEAQ(Mem{Base: hp, Index: kb, Scale: 4}, hp)
		LEAQ(Mem{Base: csp, Index: kb, Scale: 4}, csp)
	}
	DECQ(rem)
	JNZ(LabelRef("block"))
	VZEROUPPER()
	RET()
}

// groupRow returns a register holding the address of group g's first row: base + 4·g rows of
// stride kb.
func groupRow(base, kb Register, g int) Register {
	row := GP64()
	MOVQ(base, row)
	for range 4 * g {
		ADDQ(kb, row)
	}
	return row
}

// loadCoefs4 loads the k coefficients of each of the four columns of a group at base+disp (k
// values a column, contiguous) into four vectors, column u's values in lanes 0..k-1. Lanes
// past k hold the next columns' values (pads to the caller); no load reads past the group.
func loadCoefs4(base Register, disp, k int) []VecVirtual {
	cr := ymms(4)
	for u := range cr {
		if k*u+4 <= 4*k {
			VMOVUPD(Mem{Base: base, Disp: disp + 8*k*u}, cr[u])
			continue
		}
		// Near the group's end, load the group's last four values and rotate column u's k
		// values down to lanes 0..k-1.
		shift := k*u - (4*k - 4)
		VMOVUPD(Mem{Base: base, Disp: disp + 8*(4*k-4)}, cr[u])
		var imm uint64
		for l := 0; l < 4; l++ {
			imm |= uint64(min(l+shift, 3)) << (2 * l)
		}
		VPERMPD(Imm(imm), cr[u], cr[u])
	}
	return cr
}

// storeCoefs4 stores lanes 0..k-1 of rows[u] as column u's k coefficients at base+disp. A full
// 4-wide store spills its pads into the next columns, which is harmless while a later store of
// the group rewrites them; near the group's end the k values are stored one by one. With evex
// every instruction is EVEX-encodable (AVX-512 code, whose rows may be any of the 32 vector
// registers); without, VEX only (AVX2 code).
func storeCoefs4(rows []VecVirtual, base Register, disp, k int, evex bool) {
	for u := range rows {
		if k*u+4 <= 4*k {
			VMOVUPD(rows[u], Mem{Base: base, Disp: disp + 8*k*u})
			continue
		}
		lo := rows[u].AsX()
		VMOVSD(lo, Mem{Base: base, Disp: disp + 8*k*u})
		if k > 1 {
			VMOVHPD(lo, Mem{Base: base, Disp: disp + 8*(k*u+1)})
		}
		if k > 2 {
			hi := XMM()
			if evex {
				VEXTRACTF64X2(Imm(1), rows[u], hi)
			} else {
				VEXTRACTF128(Imm(1), rows[u], hi)
			}
			VMOVSD(hi, Mem{Base: base, Disp: disp + 8*(k*u+2)})
			if k > 3 {
				VMOVHPD(hi, Mem{Base: base, Disp: disp + 8*(k*u+3)})
			}
		}
	}
}

// loadYMMs loads n consecutive 4-double vectors from base into new registers.
func loadYMMs(base Register, n int) []VecVirtual {
	r := ymms(n)
	for i := range r {
		VMOVUPD(Mem{Base: base, Disp: 32 * i}, r[i])
	}
	return r
}

// storeYMMs stores rs as consecutive 4-double vectors at base.
func storeYMMs(rs []VecVirtual, base Register) {
	for i, r := range rs {
		VMOVUPD(r, Mem{Base: base, Disp: 32 * i})
	}
}
