package matio

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/didnmf/didnmf/kernels"
)

// Source is a matrix input: a file or a synthetic spec. Its matrix has Samples() rows and
// Features() columns as the user sees it; Read hands out column blocks of X, its transpose.
type Source interface {
	// Name returns the path or spec, as used in messages.
	Name() string
	// Samples returns N, the number of samples (rows of the user's matrix, columns of X).
	Samples() int
	// Features returns M, the number of features (columns of the user's matrix, rows of X).
	Features() int
	// Read returns samples [lo, hi) as a new M x (hi-lo) block of X in the requested layout;
	// the caller owns it. Entries are validated: a NaN, infinite or negative entry gives an
	// error naming the file, the sample, the feature and the value, except that a source
	// opened with ReadOptions.Missing returns a NaN entry as a missing value (see
	// [ReadOptions]). Read is safe for concurrent calls, but not concurrently with Close.
	Read(lo, hi int, layout Layout) (kernels.Block, error)
	// Close releases the file or memory the source holds.
	Close() error
}

// maxFeatures is the largest M a block can have: CSC row indices are int32.
const maxFeatures = math.MaxInt32

// checkRead validates the arguments of Read for a source with n samples.
func checkRead(name string, n, lo, hi int, layout Layout) error {
	if lo < 0 || hi > n || lo > hi {
		return fmt.Errorf("%s: Read(%d, %d): range outside [0, %d]", name, lo, hi, n)
	}
	if !layout.valid() {
		return fmt.Errorf("%s: Read: unknown layout %d", name, int(layout))
	}
	return nil
}

// newDense allocates an m x n dense block, or fails when m*n does not fit in memory's
// addressing (the caller asked for an absurd range).
func newDense(name string, m, n int) (*kernels.Dense, error) {
	if err := denseFits(name, m, n); err != nil {
		return nil, err
	}
	return kernels.NewDense(m, n), nil
}

// denseFits checks that an m x n dense block can be addressed.
func denseFits(name string, m, n int) error {
	if n > 0 && m > math.MaxInt/8/n {
		return fmt.Errorf("%s: a dense %d x %d block is too large", name, m, n)
	}
	return nil
}

// mulFits returns a*b and whether it fits in limit (a, b >= 0).
func mulFits(a, b, limit int64) (int64, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	if a != 0 && b > limit/a {
		return 0, false
	}
	return a * b, true
}

// maxShapeText bounds the text formatShape writes for the dimensions, so that a header with
// thousands of them gives a short message, made in constant time.
const maxShapeText = 120

// formatShape formats a shape the way Python prints a tuple: (100,) or (3, 4). A shape too
// long for a message is cut: "(1, 1, 1, ...) (30000 dimensions)".
func formatShape(dims []int64) string {
	switch len(dims) {
	case 0:
		return "()"
	case 1:
		return fmt.Sprintf("(%d,)", dims[0])
	}
	var b strings.Builder
	b.WriteByte('(')
	for i, d := range dims {
		if i > 0 {
			b.WriteString(", ")
		}
		if b.Len() > maxShapeText {
			fmt.Fprintf(&b, "...) (%d dimensions)", len(dims))
			return b.String()
		}
		b.WriteString(strconv.FormatInt(d, 10))
	}
	b.WriteByte(')')
	return b.String()
}
