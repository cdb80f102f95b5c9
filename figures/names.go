package figures

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"unicode/utf8"

	"github.com/didnmf/didnmf/matio"
)

// MaxNamesBytes is the largest features.txt read.
const MaxNamesBytes = 64 << 20

// ReadFeatureNames reads a file of feature names, one a line ("\n" or "\r\n"; a last line
// may lack its newline), and returns them if there are exactly m. It returns nil and no error
// when the file does not exist; an error (wrapping ErrInput) when it holds another number of
// lines, is larger than MaxNamesBytes or is not a regular file.
func ReadFeatureNames(path string, m int) ([]string, error) {
	f, err := openRegular(path)
	if f == nil || err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxNamesBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: read error: %w", path, err)
	}
	if len(data) > MaxNamesBytes {
		return nil, inputErrorf("%s: larger than %d MiB", path, MaxNamesBytes>>20)
	}
	data = bytes.TrimSuffix(data, []byte("\n"))
	lines := 1 + bytes.Count(data, []byte("\n"))
	if len(data) == 0 {
		lines = 0
	}
	if lines != m {
		return nil, inputErrorf("%s: %d lines, but the basis has %d features (want one name a line)", path, lines, m)
	}
	names := make([]string, 0, m)
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		names = append(names, string(bytes.TrimSuffix(line, []byte("\r"))))
	}
	return names, nil
}

// openRegular opens path if it is a regular file: nil and no error when it does not exist,
// an error (wrapping ErrInput, naming path and what it is) otherwise. A FIFO or a device is
// refused without blocking (matio.OpenRegular).
func openRegular(path string) (*os.File, error) {
	f, err := matio.OpenRegular(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return f, err
}

// Bounds of a basis.tsv read for its names.
const (
	// maxTSVNameBytes bounds a name in basis.tsv's first column.
	maxTSVNameBytes = 4096
	// maxTSVValueBytes bounds one printed value (with its tab): strconv's shortest float64
	// text is at most 24 bytes.
	maxTSVValueBytes = 32
)

// ReadBasisTSVNames returns the feature names in the first column of basis.tsv (written by
// `didnmf factorize` beside basis.npy: a header "feature", "component_1", ..., "component_k",
// then m rows of a name and k values). It returns nil and no error when the file does not
// exist or numbers its rows (0, 1, ..., m-1: the input had no names). A file whose header or
// rows do not fit m x k is an error wrapping ErrInput that names the file and the line. It
// reads one line at a time, each bounded by the longest a name and k values can take.
func ReadBasisTSVNames(path string, m, k int) ([]string, error) {
	if m < 1 || k < 1 {
		return nil, inputErrorf("%s: a basis of %d features x %d components", path, m, k)
	}
	f, err := openRegular(path)
	if f == nil || err != nil {
		return nil, err
	}
	defer f.Close()
	maxLine := maxTSVNameBytes + k*maxTSVValueBytes + len("feature") + len("\tcomponent_")*k + 20*k
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	line := 0
	var names []string
	numbered := true
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if line == 1 {
			want := "feature"
			for p := 1; p <= k; p++ {
				want += "\tcomponent_" + strconv.Itoa(p)
			}
			if string(b) != want {
				return nil, inputErrorf("%s:1: the header is not feature, component_1 ... component_%d, tab-separated", path, k)
			}
			continue
		}
		if line-1 > m {
			return nil, inputErrorf("%s:%d: more than the %d rows of the basis's features", path, line, m)
		}
		name, _, ok := bytes.Cut(b, []byte("\t"))
		if !ok || bytes.Count(b, []byte("\t")) != k {
			return nil, inputErrorf("%s:%d: not a name and %d values, tab-separated", path, line, k)
		}
		if !utf8.Valid(name) || len(name) > maxTSVNameBytes {
			return nil, inputErrorf("%s:%d: the name is not UTF-8 of at most %d bytes", path, line, maxTSVNameBytes)
		}
		s := string(name)
		numbered = numbered && s == strconv.Itoa(line-2)
		names = append(names, s)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, inputErrorf("%s:%d: a line longer than a name and %d values take", path, line+1, k)
		}
		return nil, fmt.Errorf("%s: read error: %w", path, err)
	}
	if line == 0 {
		return nil, inputErrorf("%s:1: empty", path)
	}
	if len(names) != m {
		return nil, inputErrorf("%s:%d: %d rows, but the basis has %d features", path, line+1, len(names), m)
	}
	if numbered {
		return nil, nil
	}
	return names, nil
}
