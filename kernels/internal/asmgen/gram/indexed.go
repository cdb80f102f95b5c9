package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// maxVIdxK is the largest rank of the indexed V accumulations (accVIdxGo).
const maxVIdxK = 16

// The indexed V accumulations (step 4 over gathered vectors, accVIdxGo): for each t in order,
// x = src[idx[t]·stride : +k] (components k..kp-1 read as 0, nothing beyond k read), and
// V[p, q] = fma(x_p, x_q, V[p, q]) for p < k and q in the chunks 0..p/4, V (k rows of kp) in
// registers across the list. Each entry's offset idx[t]·stride is checked against
// len(src) - k (unsigned, so a negative index fails too) before x is read: on a bad index the
// function returns false at once (V then holds part of the sums), else true.

// accVIdxPasses splits rows 0..k-1 into passes whose accumulators (row p: p/4+1 vectors),
// the vectors of x they read (chunks 0..p/4 of the pass's last row) and one broadcast fit the
// 16 YMM registers.
func accVIdxPasses(k int) [][2]int {
	var out [][2]int
	p0, acc := 0, 0
	for p := 0; p < k; p++ {
		a := p/4 + 1
		if p > p0 && acc+a+(p/4+1)+1 > 16 {
			out = append(out, [2]int{p0, p})
			p0, acc = p, 0
		}
		acc += a
	}
	return append(out, [2]int{p0, k})
}

// vIdxPrefetch is how many entries ahead the indexed kernels prefetch the vector they will
// read (the lists come in column or row order and reach their vectors at random).
const vIdxPrefetch = 8

// accVIdxEntry emits the loop head of the indexed kernels: a prefetch of the vector of entry
// ip + vIdxPrefetch while rem (the entries left, ip's included) exceeds vIdxPrefetch (a
// prefetch does not fault, so its index needs no check), then x = the address of entry ip's
// vector, or a jump to bad when it is out of range.
func accVIdxEntry(ip, rem Register, sp, sb, lim GPVirtual, k int, label string) GPVirtual {
	CMPQ(rem, Imm(vIdxPrefetch))
	JLE(LabelRef(label + "nopf"))
	pf := GP64()
	MOVLQSX(Mem{Base: ip, Disp: 4 * vIdxPrefetch}, pf)
	IMULQ(sb, pf)
	ADDQ(sp, pf)
	PREFETCHT0(Mem{Base: pf})
	PREFETCHT0(Mem{Base: pf, Disp: 8 * (k - 1)})
	Label(label + "nopf")
	x := GP64()
	MOVLQSX(Mem{Base: ip}, x)
	IMULQ(sb, x)
	CMPQ(x, lim)
	JA(LabelRef("bad"))
	ADDQ(sp, x)
	return x
}

// accVIdxArgs loads src's base, the byte stride and the largest byte offset of a vector,
// 8·(len(src) - k), which the caller guarantees is not negative.
func accVIdxArgs(k int) (sp, sb, lim GPVirtual) {
	sp, sb, lim = GP64(), GP64(), GP64()
	Load(Param("src").Base(), sp)
	Load(Param("stride"), sb)
	SHLQ(Imm(3), sb)
	Load(Param("src").Len(), lim)
	SUBQ(Imm(uint64(k)), lim)
	SHLQ(Imm(3), lim)
	return sp, sb, lim
}

// accVIdxReturn emits the two exits.
func accVIdxReturn() {
	ok := GP8()
	MOVB(U8(1), ok)
	Store(ok, ReturnIndex(0))
	VZEROUPPER()
	RET()
	Label("bad")
	bad := GP8()
	XORB(bad, bad)
	Store(bad, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// accVIdx: the AVX2 kernel, rows that do not fit the registers at once in further passes
// over the list (each V entry still sees the entries in order).
func accVIdx(k int) {
	kp := (k + 3) / 4 * 4
	name := fmt.Sprintf("accVIdxK%dAVX2", k)
	TEXT(name, NOSPLIT, "func(src []float64, stride int, idx []int32, v []float64) bool")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s is accVIdxGo for k = %d (kp = %d) on AVX2+FMA, V in registers; false on an", name, k, kp),
		"index out of range. len(idx) >= 1, len(src) >= k.")
	// Physical registers: accumulators from Y0, then the pass's vectors of x, then the
	// broadcast (which also takes the high part of a partial chunk).
	ys := []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15}
	for pass, pr := range accVIdxPasses(k) {
		l := fmt.Sprintf("p%d_", pass)
		next := 0
		take := func(n int) []VecPhysical {
			r := ys[next : next+n]
			next += n
			return r
		}
		vp := Load(Param("v").Base(), GP64())
		acc := make([][]VecPhysical, pr[1]-pr[0])
		for r := range acc {
			p := pr[0] + r
			acc[r] = take(p/4 + 1)
			for c := range acc[r] {
				VMOVUPD(Mem{Base: vp, Disp: 8 * (p*kp + 4*c)}, acc[r][c])
			}
		}
		nch := (pr[1]-1)/4 + 1
		cv := take(nch)
		xv := take(1)[0]
		sp, sb, lim := accVIdxArgs(k)
		ip := Load(Param("idx").Base(), GP64())
		rem := Load(Param("idx").Len(), GP64())
		Label(l + "entry")
		x := accVIdxEntry(ip, rem, sp, sb, lim, k, l)
		for c := range cv {
			if n := k - 4*c; n >= 4 {
				VMOVUPD(Mem{Base: x, Disp: 32 * c}, cv[c])
			} else {
				loadPartial(Mem{Base: x, Disp: 32 * c}, n, cv[c], xv)
			}
		}
		for r := range acc {
			p := pr[0] + r
			VBROADCASTSD(Mem{Base: x, Disp: 8 * p}, xv)
			for c := range acc[r] {
				VFMADD231PD(cv[c], xv, acc[r][c])
			}
		}
		ADDQ(Imm(4), ip)
		DECQ(rem)
		JNZ(LabelRef(l + "entry"))
		for r := range acc {
			p := pr[0] + r
			for c := range acc[r] {
				VMOVUPD(acc[r][c], Mem{Base: vp, Disp: 8 * (p*kp + 4*c)})
			}
		}
	}
	accVIdxReturn()
}

// loadPartial loads the n < 4 doubles at m into the low lanes of y and zeroes the others
// (VEX loads into an XMM register clear the upper lanes), reading nothing beyond them; tmp is
// scratch.
func loadPartial(m Mem, n int, y, tmp VecPhysical) {
	switch n {
	case 1:
		VMOVSD(m, y.AsX())
	case 2:
		VMOVUPD(m, y.AsX())
	case 3:
		VMOVSD(m.Offset(16), tmp.AsX())
		VMOVUPD(m, y.AsX())
		VINSERTF128(Imm(1), tmp.AsX(), y, y)
	}
}

// minVIdxWideK is the smallest rank of the AVX-512 indexed kernels (below it the AVX2 kernel
// makes one pass too).
const minVIdxWideK = 9

// accVIdxWide: the AVX-512 kernel, one pass for k <= 16: a row's chunks in 8-lane ZMM pieces
// (chunks 0-1, 2-3) and a 4-lane YMM piece for an odd last chunk, 32 vector registers, x_p
// broadcast from memory by each FMA; x in
// two ZMM vectors (the second, and the first when k < 8, loaded under a lane mask that zeroes
// the components from k on).
func accVIdxWide(k int) {
	kp := (k + 3) / 4 * 4
	name := fmt.Sprintf("accVIdxK%dAVX512", k)
	TEXT(name, NOSPLIT, "func(src []float64, stride int, idx []int32, v []float64) bool")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s is accVIdxGo for k = %d (kp = %d) on AVX-512, V in registers; false on an", name, k, kp),
		"index out of range. len(idx) >= 1, len(src) >= k.")
	vp := Load(Param("v").Base(), GP64())
	type piece struct {
		c   int // first chunk
		reg VecVirtual
	}
	acc := make([][]piece, k)
	for p := range acc {
		nch := p/4 + 1
		for c := 0; c < nch; {
			if nch-c >= 2 {
				acc[p] = append(acc[p], piece{c, ZMM()})
				c += 2
			} else {
				acc[p] = append(acc[p], piece{c, YMM()})
				c++
			}
		}
		for _, pc := range acc[p] {
			VMOVUPD(Mem{Base: vp, Disp: 8 * (p*kp + 4*pc.c)}, pc.reg)
		}
	}
	nz := (kp + 7) / 8 // x's ZMM vectors
	mask := K1
	if k%8 != 0 {
		t := GP32()
		MOVL(U32(uint32(1)<<(k%8)-1), t)
		KMOVB(t, mask)
	}
	sp, sb, lim := accVIdxArgs(k)
	ip := Load(Param("idx").Base(), GP64())
	rem := Load(Param("idx").Len(), GP64())
	Label("entry")
	x := accVIdxEntry(ip, rem, sp, sb, lim, k, "")
	xz := make([]VecVirtual, nz)
	for z := range xz {
		xz[z] = ZMM()
		m := Mem{Base: x, Disp: 64 * z}
		if k-8*z >= 8 {
			VMOVUPD(m, xz[z])
		} else {
			VMOVUPD_Z(m, mask, xz[z])
		}
	}
	for p := range acc {
		for _, pc := range acc[p] { // x_p broadcast from memory by each FMA
			src := xz[pc.c/2]
			if pc.reg.Size() == 32 {
				VFMADD231PD_BCST(Mem{Base: x, Disp: 8 * p}, src.AsY(), pc.reg)
			} else {
				VFMADD231PD_BCST(Mem{Base: x, Disp: 8 * p}, src, pc.reg)
			}
		}
	}
	ADDQ(Imm(4), ip)
	DECQ(rem)
	JNZ(LabelRef("entry"))
	for p := range acc {
		for _, pc := range acc[p] {
			VMOVUPD(pc.reg, Mem{Base: vp, Disp: 8 * (p*kp + 4*pc.c)})
		}
	}
	accVIdxReturn()
}

// accAIdx: step 3 on a one-row block over gathered vectors (accAIdxGo), AVX2: for each t in
// order, x = src[idx[t]·stride : +k] (components k..kp-1 read as 0) and
// a_q = fma(w_t, x_q, a_q) for q < kp, a (kp values) in registers across the list.
func accAIdx(k int) {
	kp := (k + 3) / 4 * 4
	name := fmt.Sprintf("accAIdxK%dAVX2", k)
	TEXT(name, NOSPLIT, "func(src []float64, stride int, idx []int32, w, a []float64) bool")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s is accAIdxGo for k = %d (kp = %d) on AVX2+FMA, a in registers; false on an", name, k, kp),
		"index out of range. len(idx) >= 1, len(w) >= len(idx), len(src) >= k.")
	nch := kp / 4
	ys := []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8}
	acc, cv, wv := ys[:nch], ys[nch:2*nch], ys[2*nch]
	ap := Load(Param("a").Base(), GP64())
	for c := range acc {
		VMOVUPD(Mem{Base: ap, Disp: 32 * c}, acc[c])
	}
	sp, sb, lim := accVIdxArgs(k)
	ip := Load(Param("idx").Base(), GP64())
	wp := Load(Param("w").Base(), GP64())
	rem := Load(Param("idx").Len(), GP64())
	Label("entry")
	x := accVIdxEntry(ip, rem, sp, sb, lim, k, "")
	for c := range cv {
		if n := k - 4*c; n >= 4 {
			VMOVUPD(Mem{Base: x, Disp: 32 * c}, cv[c])
		} else {
			loadPartial(Mem{Base: x, Disp: 32 * c}, n, cv[c], wv)
		}
	}
	VBROADCASTSD(Mem{Base: wp}, wv)
	for c := range acc {
		VFMADD231PD(cv[c], wv, acc[c])
	}
	ADDQ(Imm(4), ip)
	ADDQ(Imm(8), wp)
	DECQ(rem)
	JNZ(LabelRef("entry"))
	for c := range acc {
		VMOVUPD(acc[c], Mem{Base: ap, Disp: 32 * c})
	}
	accVIdxReturn()
}
