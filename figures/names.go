package figures

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxNamesBytes is the largest features.txt read.
const MaxNamesBytes = 64 << 20

// ReadFeatureNames reads a file of feature names, one a line ("\n" or "\r\n"; a last line
// may lack its newline), and returns them if there are exactly m. It returns nil and no error
// when the file does not exist; an error (wrapping ErrInput) when it holds another number of
// lines, is larger than MaxNamesBytes or is not a regular file.
func ReadFeatureNames(path string, m int) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, inputErrorf("%s: not a regular file", path)
	}
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
