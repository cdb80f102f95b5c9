package pki

import (
	"fmt"
	"io"
	"io/fs"

	"github.com/didnmf/didnmf/matio"
)

// maxPEMFile bounds a certificate or key file: a PEM certificate chain or key is a few
// kilobytes, so anything over a mebibyte is not one and is refused before it is read.
const maxPEMFile = 1 << 20

// readSmallFile reads the regular file at path (what names it in errors: "certificate",
// "--tls-ca", ...) of at most limit bytes, after check (nil: none) accepted its FileInfo. It
// opens the file with [matio.OpenRegular], the repository's one non-blocking opener: a FIFO,
// a socket, a device or a directory given as path is refused by name, checked on the opened
// descriptor, instead of hanging the process (os.ReadFile blocks on a FIFO with no writer and
// never ends on /dev/zero). A file larger than limit is refused before a byte is read, and one
// that grows past it while read is refused too. A missing file's error satisfies
// errors.Is(err, fs.ErrNotExist).
func readSmallFile(path, what string, limit int64, check func(fs.FileInfo) error) ([]byte, error) {
	f, err := matio.OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if check != nil {
		if err := check(st); err != nil {
			return nil, err
		}
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s %s: %d bytes, more than the %d a %s may have", what, path, st.Size(), limit, what)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s %s: longer than %d bytes", what, path, limit)
	}
	return data, nil
}
