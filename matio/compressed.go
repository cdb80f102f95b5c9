package matio

import (
	"io"
	"math"
)

// maxInflate is an upper bound on how much deflate can expand its input (about 1032:1).
const maxInflate = 1032

// readCompressed reads exactly want bytes that remain in the decompressed stream r, failing
// when there are fewer or more. compressed, the size of the compressed file, bounds what it
// can hold, so a tiny file claiming a huge matrix fails at once; otherwise memory grows only as
// data actually arrives. what describes the claim for messages.
func readCompressed(name string, r io.Reader, want, compressed int64, what string) ([]byte, error) {
	if bound, ok := mulFits(compressed, maxInflate, math.MaxInt64/2); ok && want > bound+(1<<16) {
		return nil, inputErrorf(name, "truncated: %s but a compressed file of %d bytes cannot hold that much", what, compressed)
	}
	if want >= math.MaxInt-1 {
		return nil, inputErrorf(name, "%s, which is too large", what)
	}
	buf := make([]byte, 0, min(want+1, 1<<16))
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > want {
				break
			}
			next := make([]byte, len(buf), min(2*int64(cap(buf)), want+1))
			copy(next, buf)
			buf = next
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, ioError(name, "read error", err)
		}
	}
	if have := int64(len(buf)); have < want {
		return nil, inputErrorf(name, "truncated: %s but the decompressed file has %d", what, have)
	}
	if int64(len(buf)) > want {
		return nil, inputErrorf(name, "unexpected bytes after the data: %s but the decompressed file has more", what)
	}
	return buf, nil
}
