package kernels

import (
	"math"
	"math/big"
	"sync"
)

// The logarithms of the beta-divergences' loss terms (beta.go): KL's sum x log(x / Ys) and
// IS's sum log(x / Ys), a logarithm per entry of X and per iteration, the largest cost of a
// pass after the products and the divisions. sumLogs sums them with a table-driven log
// (logTable); logPinned is math.Log's amd64 code in Go, for the arguments the table does not
// take (0, subnormal, Inf, NaN, negative).

// logPinned returns math.Log(x) as the amd64 build computes it (src/math/log_amd64.s, FreeBSD's
// e_log.c in the order of that assembly, every operation rounded on its own), bit for bit: the
// same value in every build and on every architecture. TestLogPinned checks it against
// math.Log.
func logPinned(x float64) float64 {
	const (
		hSqrt2 = 7.07106781186547524401e-01 // sqrt(2)/2
		ln2Hi  = 6.93147180369123816490e-01 // 0x3fe62e42fee00000
		ln2Lo  = 1.90821492927058770002e-10 // 0x3dea39ef35793c76
		l1     = 6.666666666666735130e-01   // 0x3FE5555555555593
		l2     = 3.999999999940941908e-01   // 0x3FD999999997FA04
		l3     = 2.857142874366239149e-01   // 0x3FD2492494229359
		l4     = 2.222219843214978396e-01   // 0x3FCC71C51D8E78AF
		l5     = 1.818357216161805012e-01   // 0x3FC7466496CB03DE
		l6     = 1.531383769920937332e-01   // 0x3FC39A09D078C69F
		l7     = 1.479819860511658591e-01   // 0x3FC2F112DF3E5244
	)
	bx := math.Float64bits(x)
	switch {
	case bx&^(1<<63) == 0: // ±0
		return math.Inf(-1)
	case int64(bx) < 0:
		return math.NaN()
	case bx >= 0x7FF0000000000000: // +Inf, NaN
		return x
	}
	// f1, k: the mantissa in [0.5, 1) and the exponent, from the bits (as the assembly does,
	// also for a subnormal x); then, when f1 < sqrt(2)/2, f1 = 2 f1 and k = k - 1, without a
	// branch, as the assembly's mask does.
	const mant = 1<<52 - 1
	m := bx & mant
	lo := int64(m-(math.Float64bits(hSqrt2)&mant)) >> 63 // -1 when f1 < sqrt(2)/2, else 0
	f1 := math.Float64frombits(m | uint64(0x3FE-lo)<<52)
	k := float64(int64(bx>>52&0x7FF) - 0x3FE + lo)
	f := f1 - 1
	s := f / (2 + f)
	s2 := float64(s * s)
	s4 := float64(s2 * s2)
	t1 := float64(s2 * (l1 + float64(s4*(l3+float64(s4*(l5+float64(s4*l7)))))))
	t2 := float64(s4 * (l2 + float64(s4*(l4+float64(s4*l6)))))
	r := t1 + t2
	hfsq := float64(float64(0.5*f) * f)
	return float64(k*ln2Hi) - ((hfsq - (float64(s*(hfsq+r)) + float64(k*ln2Lo))) - f)
}

// logTable: log x = k ln 2 + log(1/v) + log1p(r), for x = 2^k z with z in [0.6875, 1.375)
// (about), split into logTableN intervals by the leading bits of z; v is the rounded
// reciprocal of its interval's centre (1 for the interval centred on 1), r = z v - 1 rounded
// once (math.FMA, the same in every build), |r| < 2^-9, and log1p(r) - r is its Taylor
// polynomial to r^6 (the first term left out, r^7/7, is below 2^-54 |r|). log(1/v) is held as
// a sum hi + lo of doubles (from math/big, to 2^-106), so the table adds no error of its
// own: the value is within about an ulp of log x, without a division (logPinned's s = f/(2+f)),
// and near 1 (the ratios x / Ys of a good fit) it is r + (log1p(r) - r) with r = z - 1 exact.
const (
	logTableBits = 8
	logTableN    = 1 << logTableBits
	// logTableOff is the bits of the lower end of the intervals: 0.6875 less half an interval,
	// so that 1 is the centre of one.
	logTableOff = 0x3FE6000000000000 - 1<<(51-logTableBits)
)

type logTableEntry struct{ inv, hi, lo float64 }

var (
	logTab     [logTableN]logTableEntry
	logTabOnce sync.Once
)

// initLogTable fills logTab (once; a few ms).
func initLogTable() {
	logTabOnce.Do(func() {
		for i := range logTab {
			c := math.Float64frombits(uint64(logTableOff + int64(i)<<(52-logTableBits) + 1<<(51-logTableBits)))
			v := 1 / c
			hi, lo := negLogBig(v)
			logTab[i] = logTableEntry{v, hi, lo}
		}
	})
}

// negLogBig returns -log(v) for v in [0.7, 1.5] as hi + lo (hi the rounded value, lo the rounded
// rest), from the series log v = 2 atanh(u), u = (v-1)/(v+1), in 128-bit arithmetic.
func negLogBig(v float64) (hi, lo float64) {
	const prec = 128
	u := new(big.Float).SetPrec(prec).SetFloat64(v)
	den := new(big.Float).SetPrec(prec).Add(u, big.NewFloat(1))
	u.Sub(u, big.NewFloat(1))
	u.Quo(u, den)
	u2 := new(big.Float).SetPrec(prec).Mul(u, u)
	sum := new(big.Float).SetPrec(prec)
	t := new(big.Float).SetPrec(prec)
	d := new(big.Float).SetPrec(prec)
	for n := 0; n < 30; n++ { // |u| < 0.19: u^61 < 2^-146
		d.SetInt64(int64(2*n + 1))
		t.Quo(u, d)
		sum.Add(sum, t)
		u.Mul(u, u2)
	}
	sum.Mul(sum, big.NewFloat(-2))
	hi, _ = sum.Float64()
	sum.Sub(sum, new(big.Float).SetFloat64(hi))
	lo, _ = sum.Float64()
	return hi, lo
}

// sumLogs returns the loss sums of the entries x > EPS, in order, with q = x / Ys: for KL
// (!is) t0 + sum x log q and t1 + sum x, for IS t0 + sum q and t1 + sum log q. With ys (Y)
// it first sets qs = xs / Ys (Ys = Y with 0 -> EPS) at every entry, in the same loop (the
// divisions and the logarithms' multiply-adds then run side by side); without, qs holds them.
// The logarithms are logTable's (logPinned's for the arguments it does not take).
// initLogTable must have run.
func sumLogs(xs, qs, ys []float64, is bool, t0, t1 float64) (float64, float64) {
	const (
		ln2Hi = 6.93147180369123816490e-01 // 0x3fe62e42fee00000: k ln2Hi is exact
		ln2Lo = 1.90821492927058770002e-10
		// log1p(r) - r = r^2 (c2 + r (c3 + r (c4 + r (c5 + r c6)))), Taylor.
		c2, c3, c4, c5, c6 = -1.0 / 2, 1.0 / 3, -1.0 / 4, 1.0 / 5, -1.0 / 6
	)
	qs = qs[:len(xs)]
	if ys != nil {
		ys = ys[:len(xs)]
	}
	for t, x := range xs {
		if ys != nil {
			y := ys[t]
			if y == 0 {
				y = sklearnEps
			}
			qs[t] = x / y
		}
		if !(x > sklearnEps) {
			continue
		}
		q := qs[t]
		var lg float64
		if ix := math.Float64bits(q); ix-0x0010000000000000 < 0x7FF0000000000000-0x0010000000000000 { // positive normal
			tmp := int64(ix) - logTableOff
			e := &logTab[(tmp>>(52-logTableBits))&(logTableN-1)]
			k := tmp >> 52 // arithmetic: q = 2^k z
			z := math.Float64frombits(uint64(int64(ix) - k<<52))
			r := math.FMA(z, e.inv, -1) // z v - 1, one rounding
			kd := float64(k)
			w := float64(kd*ln2Hi) + e.hi // exact when k = 0
			hi := w + r
			lo := (w - hi) + r // hi's rounding error: |w| >= |r| or w = 0
			lo += e.lo + float64(kd*ln2Lo)
			p := math.FMA(c6, r, c5)
			p = math.FMA(p, r, c4)
			p = math.FMA(p, r, c3)
			p = math.FMA(p, r, c2)
			lg = hi + math.FMA(float64(r*r), p, lo)
		} else {
			lg = logPinned(q)
		}
		if is {
			t0 += q
			t1 += lg
		} else {
			t0 += float64(x * lg)
			t1 += x
		}
	}
	return t0, t1
}
