package matio

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// mtxEntry is one stored entry of a coordinate file, as (sample, feature) of the user's
// matrix, 0-based, with the line it came from. mirror marks the transposed copy of an
// off-diagonal entry of a symmetric matrix.
type mtxEntry struct {
	s, f int32
	lm   int // line<<1 | mirror
	v    float64
}

func (e mtxEntry) line() int    { return e.lm >> 1 }
func (e mtxEntry) mirror() bool { return e.lm&1 != 0 }

// value parses a value of the file's field. A real value is what strconv.ParseFloat takes
// ("nan", in any case, is NaN), or "+nan" or "-nan" in any case (NaN too: C's printf writes
// "-nan" for a NaN with its sign bit set).
func (p *mtxParser) value(b []byte) (float64, error) {
	if p.field == "integer" {
		n, err := strconv.ParseInt(string(b), 10, 64)
		if err == nil {
			return float64(n), nil
		}
		if !errors.Is(err, strconv.ErrRange) {
			if p.missing && isNaNToken(b) {
				return 0, inputErrorf(p.at(), "bad integer value %q (an integer field cannot hold NaN: declare the field real to mark missing values with nan)", short(b))
			}
			return 0, inputErrorf(p.at(), "bad integer value %q", short(b))
		}
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		if isSignedNaN(b) {
			return math.NaN(), nil
		}
		return 0, inputErrorf(p.at(), "bad value %q", short(b))
	}
	return v, nil
}

// isNaNToken reports whether a value token is NaN to a real field.
func isNaNToken(b []byte) bool {
	v, err := strconv.ParseFloat(string(b), 64)
	return err == nil && math.IsNaN(v) || isSignedNaN(b)
}

// checkValue validates value v of the entry in 1-based row r, column c of the file, and
// returns it as stored: a NaN read as a missing value is stored as missingNaN.
func (p *mtxParser) checkValue(r, c int64, v float64) (float64, error) {
	if isMissing(v, p.missing) {
		p.sawNaN = true
		return missingNaN, nil
	}
	if what := badValue(v); what != "" {
		return 0, inputErrorf(p.at(), "row %d, column %d: %s "+ruleFor(what), r, c, what)
	}
	return v, nil
}

// coordinate reads the entries of a coordinate file.
func (p *mtxParser) coordinate() (*mtxSource, error) {
	want := 3
	form := "row column value"
	if p.field == "pattern" {
		want, form = 2, "row column"
	}
	// Grow as entries arrive: the size line's count is only a claim.
	entries := make([]mtxEntry, 0, min(p.nnz, 1<<10))
	var count int64
	for {
		t, err := p.next()
		if err != nil {
			return nil, err
		}
		if t == nil {
			break
		}
		if count == p.nnz {
			return nil, inputErrorf(p.at(), "more entries than the %d the size line (line %d) promises", p.nnz, p.sizeLine)
		}
		count++
		var f [4][]byte
		if nf := fields(t, f[:]); nf != want {
			return nil, inputErrorf(p.at(), "expected %q, got %q", form, short(t))
		}
		r, ok := parseDec(f[0])
		if !ok || r < 1 || r > int64(p.rows) {
			return nil, inputErrorf(p.at(), "row %q out of range 1..%d", short(f[0]), p.rows)
		}
		c, ok := parseDec(f[1])
		if !ok || c < 1 || c > int64(p.cols) {
			return nil, inputErrorf(p.at(), "column %q out of range 1..%d", short(f[1]), p.cols)
		}
		v := 1.0
		if want == 3 {
			if v, err = p.value(f[2]); err != nil {
				return nil, err
			}
			if v, err = p.checkValue(r, c, v); err != nil {
				return nil, err
			}
		}
		si, fi := int32(r-1), int32(c-1)
		if p.transpose {
			si, fi = fi, si
		}
		entries = append(entries, mtxEntry{s: si, f: fi, lm: p.line << 1, v: v})
		if p.symmetric && r != c {
			entries = append(entries, mtxEntry{s: fi, f: si, lm: p.line<<1 | 1, v: v})
		}
	}
	if count < p.nnz {
		return nil, inputErrorf(p.name, "truncated: the size line (line %d) promises %d entries but the file has only %d", p.sizeLine, p.nnz, count)
	}
	cmp := func(a, b mtxEntry) int {
		if a.s != b.s {
			return int(a.s) - int(b.s)
		}
		if a.f != b.f {
			return int(a.f) - int(b.f)
		}
		return a.lm - b.lm
	}
	if !slices.IsSortedFunc(entries, cmp) {
		slices.SortFunc(entries, cmp)
	}
	if err := p.duplicates(entries); err != nil {
		return nil, err
	}
	n, m := p.shape()
	src := newMTXSparse(p.name, n, m, entries)
	src.sawNaN = p.sawNaN
	return src, nil
}

// duplicates reports the duplicate entry given last in the file among sorted entries, at the
// earliest line where one appears.
func (p *mtxParser) duplicates(entries []mtxEntry) error {
	best := -1
	for i := 1; i < len(entries); i++ {
		a, b := entries[i-1], entries[i]
		if a.s == b.s && a.f == b.f && (best < 0 || b.lm < entries[best].lm) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	// entries[best-1] is not necessarily the first of its run, so find it.
	first := best - 1
	for first > 0 && entries[first-1].s == entries[best].s && entries[first-1].f == entries[best].f {
		first--
	}
	a, b := entries[first], entries[best]
	orig := func(e mtxEntry) (int, int) {
		if e.mirror() != p.transpose {
			return int(e.f) + 1, int(e.s) + 1
		}
		return int(e.s) + 1, int(e.f) + 1
	}
	br, bc := orig(b)
	at := fmt.Sprintf("%s:%d", p.name, b.line())
	if !a.mirror() && !b.mirror() {
		return inputErrorf(at, "duplicate entry (row %d, column %d), first given at line %d", br, bc, a.line())
	}
	ar, ac := orig(a)
	return inputErrorf(at, "entry (row %d, column %d) duplicates entry (row %d, column %d) given at line %d: a symmetric matrix stores each off-diagonal entry once", br, bc, ar, ac, a.line())
}

// arrayData reads the values of an array file: column-major over the user's matrix, or its
// lower triangle column by column when symmetric.
func (p *mtxParser) arrayData() (*mtxSource, error) {
	n, m := p.rows, p.cols
	total := int64(n) * int64(m)
	if p.symmetric {
		total = int64(n) * (int64(n) + 1) / 2
	}
	// Grow as values arrive: the size line's dimensions are only a claim.
	vals := make([]float64, 0, min(total, 1<<10))
	r, c := 0, 0 // position of the next value in the user's matrix
	for {
		t, err := p.next()
		if err != nil {
			return nil, err
		}
		if t == nil {
			break
		}
		for i := 0; ; {
			var tok []byte
			if tok, i = nextField(t, i); tok == nil {
				break
			}
			if int64(len(vals)) == total {
				return nil, inputErrorf(p.at(), "more values than the %d the size line (line %d) promises", total, p.sizeLine)
			}
			v, err := p.value(tok)
			if err != nil {
				return nil, err
			}
			if v, err = p.checkValue(int64(r)+1, int64(c)+1, v); err != nil {
				return nil, err
			}
			if v == 0 {
				v = 0 // a negative zero becomes zero, as in checkDense
			}
			vals = append(vals, v)
			if r++; r == n {
				c++
				r = 0
				if p.symmetric {
					r = c
				}
			}
		}
	}
	if int64(len(vals)) < total {
		return nil, inputErrorf(p.name, "truncated: the size line (line %d) promises %d values but the file has only %d", p.sizeLine, total, len(vals))
	}
	ns, ms := p.shape()
	x, err := newDense(p.name, ms, ns)
	if err != nil {
		return nil, inputErrorf(p.name, "%v", err)
	}
	at := func(r, c int) int { return r*m + c } // sample r, feature c
	if p.transpose {
		at = func(r, c int) int { return c*n + r } // sample c, feature r
	}
	r, c = 0, 0
	for _, v := range vals {
		x.Data[at(r, c)] = v
		if p.symmetric {
			x.Data[at(c, r)] = v
		}
		if r++; r == n {
			c++
			r = 0
			if p.symmetric {
				r = c
			}
		}
	}
	return &mtxSource{name: p.name, n: ns, m: ms, dense: x, sawNaN: p.sawNaN}, nil
}
