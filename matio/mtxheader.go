package matio

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
)

// maxMTXLine bounds the length of one line of a MatrixMarket file.
const maxMTXLine = 1 << 20

// mtxParser reads a MatrixMarket file line by line.
type mtxParser struct {
	name      string
	sc        *bufio.Scanner
	line      int // number of the current line, 1-based
	array     bool
	field     string // "real", "integer" or "pattern"
	symmetric bool
	rows      int // samples
	cols      int // features
	sizeLine  int
	nnz       int64 // entries promised by a coordinate file's size line
	missing   bool  // a NaN value is a missing value (ReadOptions.Missing)
	sawNaN    bool  // a missing value was read
	// transpose reads the file's columns as the samples (a 10x matrix.mtx is genes x cells).
	transpose bool
	// maxBytes bounds what the declared entries take in memory (ReadOptions.MaxBytes).
	maxBytes int64
}

// parseMTX parses a whole MatrixMarket file.
func parseMTX(name string, r io.Reader, opts ReadOptions) (Source, error) {
	return parseMTXAs(name, r, opts, false)
}

// parseMTXAs parses a whole MatrixMarket file, its columns as the samples when transpose is
// set.
func parseMTXAs(name string, r io.Reader, opts ReadOptions, transpose bool) (Source, error) {
	p := &mtxParser{name: name, sc: bufio.NewScanner(r), missing: opts.Missing, transpose: transpose, maxBytes: opts.MaxBytes}
	p.sc.Buffer(make([]byte, 0, 64<<10), maxMTXLine)
	if err := p.banner(); err != nil {
		return nil, err
	}
	if err := p.size(); err != nil {
		return nil, err
	}
	var src *mtxSource
	var err error
	if p.array {
		src, err = p.arrayData()
	} else {
		src, err = p.coordinate()
	}
	if err != nil {
		return nil, err
	}
	src.storage = opts.Storage
	return src, nil
}

// samples returns the number of samples and features of the file's matrix.
func (p *mtxParser) shape() (n, m int) {
	if p.transpose {
		return p.cols, p.rows
	}
	return p.rows, p.cols
}

// at returns the message prefix for the current line: "name:line".
func (p *mtxParser) at() string { return fmt.Sprintf("%s:%d", p.name, p.line) }

// next returns the next line that is neither blank nor a comment, or nil at the end.
func (p *mtxParser) next() ([]byte, error) {
	for p.sc.Scan() {
		p.line++
		t := bytes.TrimSpace(p.sc.Bytes())
		if len(t) == 0 || t[0] == '%' {
			continue
		}
		return t, nil
	}
	if err := p.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, inputErrorf(fmt.Sprintf("%s:%d", p.name, p.line+1), "line longer than %d bytes", maxMTXLine)
		}
		return nil, ioError(p.name, "read error", err)
	}
	return nil, nil
}

func (p *mtxParser) banner() error {
	var first string
	if p.sc.Scan() {
		first = p.sc.Text()
	} else if err := p.sc.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
		return ioError(p.name, "read error", err)
	}
	p.line = 1
	words := strings.Fields(strings.ToLower(first))
	if len(words) == 0 || words[0] != "%%matrixmarket" {
		return inputErrorf(p.at(), "not a MatrixMarket file: the first line must be %%%%MatrixMarket matrix coordinate|array real|integer|pattern general|symmetric")
	}
	if len(words) != 5 {
		return inputErrorf(p.at(), "bad header: expected %%%%MatrixMarket matrix <format> <field> <symmetry>")
	}
	if words[1] != "matrix" {
		return inputErrorf(p.at(), "unsupported MatrixMarket object %q (supported: matrix)", words[1])
	}
	switch words[2] {
	case "coordinate":
	case "array":
		p.array = true
	default:
		return inputErrorf(p.at(), "unsupported MatrixMarket format %q (supported: coordinate, array)", words[2])
	}
	switch words[3] {
	case "real", "integer":
	case "pattern":
		if p.array {
			return inputErrorf(p.at(), "the pattern field needs the coordinate format, not array")
		}
	default:
		return inputErrorf(p.at(), "unsupported MatrixMarket field %q (supported: real, integer, pattern)", words[3])
	}
	p.field = words[3]
	switch words[4] {
	case "general":
	case "symmetric":
		p.symmetric = true
	default:
		return inputErrorf(p.at(), "unsupported MatrixMarket symmetry %q (supported: general, symmetric)", words[4])
	}
	return nil
}

// size reads the size line: "rows cols nnz" (coordinate) or "rows cols" (array).
func (p *mtxParser) size() error {
	want := "rows columns entries"
	if p.array {
		want = "rows columns"
	}
	t, err := p.next()
	if err != nil {
		return err
	}
	if t == nil {
		return inputErrorf(p.name, "truncated: no size line (%s)", want)
	}
	p.sizeLine = p.line
	var f [4][]byte
	nf := fields(t, f[:])
	var v [3]int64
	ok := nf == 3 || p.array && nf == 2
	for i := 0; ok && i < nf; i++ {
		v[i], ok = parseDec(f[i])
	}
	if !ok {
		return inputErrorf(p.at(), "bad size line %q: expected %s", short(t), want)
	}
	if v[0] == 0 || v[1] == 0 {
		return inputErrorf(p.at(), "empty matrix: %d x %d", v[0], v[1])
	}
	if v[0] > math.MaxInt32 || v[1] > maxFeatures {
		return inputErrorf(p.at(), "%d x %d is too large (at most %d rows and columns)", v[0], v[1], math.MaxInt32)
	}
	if p.symmetric && v[0] != v[1] {
		return inputErrorf(p.at(), "a symmetric matrix must be square, not %d x %d", v[0], v[1])
	}
	p.rows, p.cols = int(v[0]), int(v[1])
	if !p.array {
		limit := int64(p.rows) * int64(p.cols)
		if p.symmetric {
			limit = int64(p.rows) * (int64(p.rows) + 1) / 2
		}
		if v[2] > limit {
			return inputErrorf(p.at(), "%d entries do not fit in a %d x %d matrix", v[2], p.rows, p.cols)
		}
		p.nnz = v[2]
		stored := p.nnz
		if p.symmetric {
			stored *= 2
		}
		return checkBytes(p.at(), stored, wholeEntryBytes, p.maxBytes, "the size line declares the entries of a file read whole")
	}
	total := int64(p.rows) * int64(p.cols)
	return checkBytes(p.at(), total, wholeValueBytes, p.maxBytes, "the size line declares the values of a file read whole")
}

// fields splits t at spaces and tabs into out and returns the number of fields, which may
// exceed len(out) (the extra ones are not stored).
func fields(t []byte, out [][]byte) int {
	n := 0
	for i := 0; ; n++ {
		var tok []byte
		if tok, i = nextField(t, i); tok == nil {
			return n
		}
		if n < len(out) {
			out[n] = tok
		}
	}
}

// nextField returns the field of t that starts at or after i, and the index after it; the
// field is nil when there are no more.
func nextField(t []byte, i int) ([]byte, int) {
	for i < len(t) && isSpace(t[i]) {
		i++
	}
	if i == len(t) {
		return nil, i
	}
	j := i
	for j < len(t) && !isSpace(t[j]) {
		j++
	}
	return t[i:j], j
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' }

// parseDec parses a nonnegative decimal integer.
func parseDec(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// short cuts a piece of input for a message.
func short(b []byte) string {
	if len(b) > 60 {
		return string(b[:60]) + "..."
	}
	return string(b)
}
