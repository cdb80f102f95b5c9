//go:build !purego

package kernels

// accVIdxRegs holds the register-resident indexed V accumulations by k-1 (AVX2), and
// accVIdxWide those of ranks minVIdxWideK..16 on AVX-512 (one pass over the list where AVX2
// needs two).
var (
	accVIdxRegs = []func(src []float64, stride int, idx []int32, v []float64) bool{
		accVIdxK1AVX2, accVIdxK2AVX2, accVIdxK3AVX2, accVIdxK4AVX2, accVIdxK5AVX2, accVIdxK6AVX2,
		accVIdxK7AVX2, accVIdxK8AVX2, accVIdxK9AVX2, accVIdxK10AVX2, accVIdxK11AVX2, accVIdxK12AVX2,
		accVIdxK13AVX2, accVIdxK14AVX2, accVIdxK15AVX2, accVIdxK16AVX2,
	}
	accVIdxWide = []func(src []float64, stride int, idx []int32, v []float64) bool{
		accVIdxK9AVX512, accVIdxK10AVX512, accVIdxK11AVX512, accVIdxK12AVX512,
		accVIdxK13AVX512, accVIdxK14AVX512, accVIdxK15AVX512, accVIdxK16AVX512,
	}
)

// minVIdxWideK is the smallest rank of accVIdxWide.
const minVIdxWideK = 9

// accVIdxAVX2Checked runs accVIdxGo on the AVX2 assembly for k <= 16 (in Go beyond). The
// assembly checks every index against src before it reads the vector.
func accVIdxAVX2Checked(src []float64, stride int, idx []int32, k, kp int, v []float64) {
	accVIdxAsm(src, stride, idx, k, kp, v, false)
}

// accVIdxAVX512Checked is accVIdxAVX2Checked with the AVX-512 kernels for ranks 9..16.
func accVIdxAVX512Checked(src []float64, stride int, idx []int32, k, kp int, v []float64) {
	accVIdxAsm(src, stride, idx, k, kp, v, true)
}

func accVIdxAsm(src []float64, stride int, idx []int32, k, kp int, v []float64, wide bool) {
	if len(idx) == 0 {
		return
	}
	mustGram(k >= 1 && kp == paddedK(k) && stride >= 0 && len(v) >= k*kp && len(src) >= k)
	var ok bool
	switch {
	case k > len(accVIdxRegs):
		accVIdxGo(src, stride, idx, k, kp, v)
		return
	case wide && k >= minVIdxWideK:
		ok = accVIdxWide[k-minVIdxWideK](src, stride, idx, v)
	default:
		ok = accVIdxRegs[k-1](src, stride, idx, v)
	}
	mustGram(ok)
}

// accAIdxRegs holds the register-resident indexed one-row accumulations by k-1.
var accAIdxRegs = []func(src []float64, stride int, idx []int32, w, a []float64) bool{
	accAIdxK1AVX2, accAIdxK2AVX2, accAIdxK3AVX2, accAIdxK4AVX2, accAIdxK5AVX2, accAIdxK6AVX2,
	accAIdxK7AVX2, accAIdxK8AVX2, accAIdxK9AVX2, accAIdxK10AVX2, accAIdxK11AVX2, accAIdxK12AVX2,
	accAIdxK13AVX2, accAIdxK14AVX2, accAIdxK15AVX2, accAIdxK16AVX2,
}

// accAIdxAVX2Checked runs accAIdxGo on the assembly for k <= 16 (in Go beyond), which checks
// every index against src before it reads the vector.
func accAIdxAVX2Checked(src []float64, stride int, idx []int32, w []float64, k, kp int, a []float64) {
	if len(idx) == 0 {
		return
	}
	mustGram(k >= 1 && kp == paddedK(k) && stride >= 0 && len(a) >= kp && len(w) >= len(idx) && len(src) >= k)
	if k > len(accAIdxRegs) {
		accAIdxGo(src, stride, idx, w, k, kp, a)
		return
	}
	mustGram(accAIdxRegs[k-1](src, stride, idx, w, a))
}
