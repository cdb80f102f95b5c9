package matio

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"github.com/didnmf/didnmf/kernels"
	"github.com/klauspost/compress/flate"
)

// An .npz file of scipy.sparse.save_npz is a zip archive (stored or deflated) of .npy members:
// indices.npy, indptr.npy, data.npy, format.npy (b'csr' or b'csc') and shape.npy. The rows of
// the user's matrix are the samples, so a CSR file's arrays are already the CSC form of X:
// indptr[i]..indptr[i+1] are the entries of sample i, indices their features.

// npzMaxMembers bounds the members of an .npz archive (save_npz writes five).
const npzMaxMembers = 64

// npzMaxSmall bounds the size of the small members, format.npy and shape.npy.
const npzMaxSmall = 4 << 10

// npzChunk is the size of the buffer members are read through.
const npzChunk = 256 << 10

// npzArray is one 1-D array member of an .npz archive.
type npzArray struct {
	member string // "indices.npy", for messages
	zf     *zip.File
	stored bool
	zoff   int64 // offset of the member's (stored or deflated) data in the archive file
	off    int64 // stored: offset of the array's data in the archive file
	hdr    int64 // bytes of the member's .npy header
	dtype  npyDtype
	n      int64 // elements
}

// npzSource reads a CSR .npz file by sample ranges: Read reads the pointers of its samples,
// then only their indices and values, straight from the file for stored members (ReadAt at the
// member's offset), streaming through the members' deflate data for compressed ones. A CSC
// file is transposed whole by Open and held in memory as a MatrixMarket coordinate file is.
type npzSource struct {
	name                  string
	file                  *os.File // nil once closed
	ref                   *fileRef // the file's users: this source and the streams inflating it
	info                  os.FileInfo
	n, m                  int
	nnz                   int64
	indptr, indices, data npzArray
	opts                  ReadOptions
	sawNaN                atomic.Bool
}

// openNPZ opens an .npz file: it reads the zip directory, the members' headers, format and
// shape, and checks that indptr runs from 0 to nnz without decreasing. A CSC file is read and
// transposed here, into an *mtxSource. It owns f: the source returned keeps it, and it is
// closed otherwise.
func openNPZ(name string, f *os.File, size int64, opts ReadOptions) (Source, error) {
	ref := newFileRef(f)
	src, err := openNPZRef(name, ref, size, opts)
	if npz, ok := src.(*npzSource); err != nil || !ok || npz.ref != ref {
		ref.release()
	}
	return src, err
}

func openNPZRef(name string, ref *fileRef, size int64, opts ReadOptions) (Source, error) {
	f := ref.f
	info, err := f.Stat()
	if err != nil {
		return nil, ioError(name, "cannot open", err)
	}
	zr, err := zip.NewReader(f, size)
	if err != nil {
		return nil, inputErrorf(name, "not a valid .npz (zip) archive: %v", err)
	}
	zr.RegisterDecompressor(zip.Deflate, newInflater)
	if len(zr.File) > npzMaxMembers {
		return nil, inputErrorf(name, "a zip archive of %d members is not a scipy.sparse.save_npz file (it writes 5)", len(zr.File))
	}
	members := map[string]*zip.File{}
	for _, zf := range zr.File {
		if members[zf.Name] != nil {
			return nil, inputErrorf(name, "member %q appears twice in the archive", shortString(zf.Name))
		}
		members[zf.Name] = zf
	}
	for _, want := range []string{"format.npy", "shape.npy", "indptr.npy", "indices.npy", "data.npy"} {
		if members[want] == nil {
			what := "a scipy.sparse.save_npz file holds indices, indptr, data, format and shape"
			if members["arr_0.npy"] != nil || members["row.npy"] != nil {
				what += " (this looks like numpy.savez of dense arrays, or a COO matrix: save a CSR matrix with scipy.sparse.save_npz(path, X.tocsr()))"
			}
			return nil, inputErrorf(name, "no %s in the archive: %s", want, what)
		}
	}
	format, err := npzFormat(name, members["format.npy"], size)
	if err != nil {
		return nil, err
	}
	rows, cols, err := npzShape(name, members["shape.npy"], size)
	if err != nil {
		return nil, err
	}
	s := &npzSource{name: name, file: f, ref: ref, info: info, n: rows, m: cols, opts: opts}
	for _, a := range []struct {
		dst    *npzArray
		member string
	}{{&s.indptr, "indptr.npy"}, {&s.indices, "indices.npy"}, {&s.data, "data.npy"}} {
		if err := npzMember(name, f, size, members[a.member], a.dst); err != nil {
			return nil, err
		}
	}
	for _, a := range []*npzArray{&s.indptr, &s.indices} {
		if a.dtype.kind != 'i' || a.dtype.size != 4 && a.dtype.size != 8 {
			return nil, inputErrorf(name+": "+a.member, "dtype %s: expected int32 or int64", a.dtype)
		}
	}
	major, axis := rows, "rows" // CSR: pointers over samples, indices are features
	if format == "csc" {
		major, axis = cols, "columns"
	}
	if s.indptr.n != int64(major)+1 {
		return nil, inputErrorf(name+": indptr.npy", "%d pointers, but a %s matrix of shape (%d, %d) has %d (one more than its %s)",
			s.indptr.n, format, rows, cols, int64(major)+1, axis)
	}
	if s.indices.n != s.data.n {
		return nil, inputErrorf(name, "indices.npy has %d entries but data.npy has %d: they must have the same length", s.indices.n, s.data.n)
	}
	s.nnz = s.indices.n
	if err := s.checkPointers(format); err != nil {
		return nil, err
	}
	if format == "csc" {
		return s.transpose()
	}
	return s, nil
}

// npzFormat reads format.npy: b'csr' or b'csc' (a bytes or str scalar).
func npzFormat(name string, zf *zip.File, size int64) (string, error) {
	mname := name + ": format.npy"
	body, a, err := npzSmall(mname, zf, size)
	if err != nil {
		return "", err
	}
	if len(a.dims) != 0 {
		return "", inputErrorf(mname, "expected a scalar, got shape %s", formatShape(a.dims))
	}
	var text string
	switch d := a.descr; {
	case len(d) >= 2 && (d[0] == '|' || d[0] == '<' || d[0] == '>' || d[0] == '=') && d[1] == 'S' || len(d) >= 1 && d[0] == 'S':
		text = string(body)
		for len(text) > 0 && text[len(text)-1] == 0 {
			text = text[:len(text)-1]
		}
	case len(d) >= 2 && (d[0] == '<' || d[0] == '>') && d[1] == 'U':
		var order binary.ByteOrder = binary.LittleEndian
		if d[0] == '>' {
			order = binary.BigEndian
		}
		var rs []rune
		for i := 0; i+4 <= len(body); i += 4 {
			if r := rune(order.Uint32(body[i:])); r != 0 {
				rs = append(rs, r)
			}
		}
		text = string(rs)
	default:
		return "", inputErrorf(mname, "dtype '%s': expected a string ('csr' or 'csc')", shortString(a.descr))
	}
	switch text {
	case "csr", "csc":
		return text, nil
	case "coo", "bsr", "dia", "dok", "lil":
		return "", inputErrorf(mname, "format %q is not read: save the matrix as CSR (scipy.sparse.save_npz(path, X.tocsr()))", text)
	}
	if !utf8.ValidString(text) {
		text = fmt.Sprintf("%q", text)
	}
	return "", inputErrorf(mname, "unknown sparse format %q (expected 'csr' or 'csc')", shortString(text))
}

// npzShape reads shape.npy: two integers, the rows (samples) and columns (features).
func npzShape(name string, zf *zip.File, size int64) (int, int, error) {
	mname := name + ": shape.npy"
	body, a, err := npzSmall(mname, zf, size)
	if err != nil {
		return 0, 0, err
	}
	dt, err := parseDescr(a.descr)
	if err != nil || dt.kind != 'i' && dt.kind != 'u' {
		return 0, 0, inputErrorf(mname, "dtype '%s': expected integers", shortString(a.descr))
	}
	if len(a.dims) != 1 || a.dims[0] != 2 || len(body) != 2*dt.size {
		return 0, 0, inputErrorf(mname, "expected 2 integers (rows, columns), got shape %s and %d bytes", formatShape(a.dims), len(body))
	}
	dims := []int64{decodeInt(dt, body), decodeInt(dt, body[dt.size:])}
	switch {
	case dims[0] <= 0 || dims[1] <= 0:
		return 0, 0, inputErrorf(name, "empty or bad matrix: shape %s", formatShape(dims))
	case dims[1] > maxFeatures:
		return 0, 0, inputErrorf(name, "shape %s: more than %d features", formatShape(dims), maxFeatures)
	case dims[0] > math.MaxInt32:
		return 0, 0, inputErrorf(name, "shape %s: more than %d samples", formatShape(dims), math.MaxInt32)
	}
	return int(dims[0]), int(dims[1]), nil
}

// decodeInt decodes one integer of an integer dtype (uint64 above 2^63 reads as negative).
func decodeInt(dt npyDtype, b []byte) int64 {
	switch dt.size {
	case 1:
		if dt.kind == 'u' {
			return int64(b[0])
		}
		return int64(int8(b[0]))
	case 2:
		if dt.kind == 'u' {
			return int64(dt.order.Uint16(b))
		}
		return int64(int16(dt.order.Uint16(b)))
	case 4:
		if dt.kind == 'u' {
			return int64(dt.order.Uint32(b))
		}
		return int64(int32(dt.order.Uint32(b)))
	}
	return int64(dt.order.Uint64(b))
}

// npzSmall reads a small member whole: its header and its data.
func npzSmall(mname string, zf *zip.File, size int64) ([]byte, *npyArray, error) {
	if zf.UncompressedSize64 > npzMaxSmall {
		return nil, nil, inputErrorf(mname, "%d bytes: too large for this small member (at most %d)", zf.UncompressedSize64, npzMaxSmall)
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, nil, inputErrorf(mname, "cannot read the member: %v", err)
	}
	defer rc.Close()
	raw, err := io.ReadAll(io.LimitReader(rc, npzMaxSmall+1))
	if err != nil {
		return nil, nil, inputErrorf(mname, "cannot read the member: %v", err)
	}
	if len(raw) > npzMaxSmall {
		return nil, nil, inputErrorf(mname, "more than %d bytes: too large for this small member", npzMaxSmall)
	}
	a, err := readNPYArrayHeader(mname, bytes.NewReader(raw), int64(len(raw)), false)
	if err != nil {
		return nil, nil, err
	}
	return raw[a.dataOff:], a, nil
}

// npzMember reads a numeric 1-D member's header and locates its data.
func npzMember(name string, f *os.File, size int64, zf *zip.File, a *npzArray) error {
	a.member, a.zf = zf.Name, zf
	mname := name + ": " + zf.Name
	usize := zf.UncompressedSize64
	off, err := zf.DataOffset()
	if err != nil {
		return inputErrorf(mname, "bad zip entry: %v", err)
	}
	csize := zf.CompressedSize64
	if off < 0 || csize > uint64(size) || off > size-int64(csize) {
		return inputErrorf(mname, "bad zip entry: %d bytes at offset %d in a file of %d", csize, off, size)
	}
	a.zoff = off
	switch zf.Method {
	case zip.Store:
		a.stored = true
		if csize != usize {
			return inputErrorf(mname, "bad zip entry: stored, but %d bytes inflate to %d", csize, usize)
		}
		a.off = off
	case zip.Deflate:
		if bound, ok := mulFits(int64(min(zf.CompressedSize64, uint64(size))), maxInflate, math.MaxInt64/2); !ok || usize > uint64(bound)+(1<<16) {
			return inputErrorf(mname, "bad zip entry: %d bytes cannot come out of %d compressed", usize, zf.CompressedSize64)
		}
	default:
		return inputErrorf(mname, "zip compression method %d is not read (stored and deflate are: numpy.savez and savez_compressed)", zf.Method)
	}
	r, err := npzOpenMember(mname, f, a)
	if err != nil {
		return err
	}
	defer r.Close()
	h, err := readNPYArrayHeader(mname, r, int64(usize), true)
	if err != nil {
		return err
	}
	a.dtype, _ = parseDescr(h.descr)
	if len(h.dims) != 1 {
		return inputErrorf(mname, "expected a 1-D array, got shape %s", formatShape(h.dims))
	}
	a.n, a.hdr = h.dims[0], h.dataOff
	if want, ok := mulFits(a.n, int64(a.dtype.size), math.MaxInt64/2); !ok || uint64(a.hdr)+uint64(want) != usize {
		return inputErrorf(mname, "header says %d %s values after %d header bytes but the member has %d bytes", a.n, a.dtype, a.hdr, usize)
	}
	a.off += a.hdr
	return nil
}

// npzMemberReader reads a member's data.
type npzMemberReader struct {
	io.Reader
	close func() error
}

func (r *npzMemberReader) Close() error { return r.close() }

// npzOpenMember opens a reader of member a from its start, its .npy header included.
func npzOpenMember(mname string, f *os.File, a *npzArray) (*npzMemberReader, error) {
	if a.stored {
		return &npzMemberReader{Reader: io.NewSectionReader(f, a.zoff, int64(a.zf.UncompressedSize64)), close: func() error { return nil }}, nil
	}
	rc, err := a.zf.Open()
	if err != nil {
		return nil, inputErrorf(mname, "cannot read the member: %v", err)
	}
	return &npzMemberReader{Reader: rc, close: rc.Close}, nil
}

// newInflater is the zip decompressor of deflated members: klauspost/compress's flate, which
// inflates an .npz 15-25% faster than the standard library's (BENCHMARKS.md, "Reading .npz").
func newInflater(r io.Reader) io.ReadCloser { return flate.NewReader(r) }

// npzReadEntryBytes is what an entry of a CSR .npz takes while a Read builds its block: its
// index and value as read, and the block's (float64 at most), before the read arrays are
// released.
const npzReadEntryBytes = 24

// npzReadError reports an error reading a member's data.
func npzReadError(mname string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return inputErrorf(mname, "truncated member data")
	}
	var ce flate.CorruptInputError
	if errors.Is(err, zip.ErrChecksum) || errors.Is(err, zip.ErrFormat) || errors.As(err, &ce) {
		return inputErrorf(mname, "corrupt member data: %v", err)
	}
	return ioError(mname, "read error", err)
}

// eachChunk reads elements [lo, lo+count) of member a in chunks of whole elements, calling fn
// with each chunk and the index of its first element.
func (s *npzSource) eachChunk(f *os.File, a *npzArray, lo, count int64, fn func(at int64, chunk []byte) error) error {
	if count == 0 {
		return nil
	}
	mname := s.name + ": " + a.member
	size := int64(a.dtype.size)
	var r io.ReadCloser
	if a.stored {
		r = &npzMemberReader{Reader: io.NewSectionReader(f, a.off+lo*size, count*size), close: func() error { return nil }}
	} else {
		key := memberKey{info: s.info, off: a.zoff, csize: int64(a.zf.CompressedSize64), usize: int64(a.zf.UncompressedSize64),
			sizeAndTime: [2]int64{s.info.Size(), s.info.ModTime().UnixNano()}}
		r = hub.subscribe(s.ref, key, a.hdr+lo*size, a.hdr+(lo+count)*size)
	}
	defer r.Close()
	buf := make([]byte, min(count*size, npzChunk/size*size))
	for at := lo; count > 0; {
		k := min(count, int64(len(buf))/size)
		chunk := buf[:k*size]
		if _, err := io.ReadFull(r, chunk); err != nil {
			return npzReadError(mname, err)
		}
		if err := fn(at, chunk); err != nil {
			return err
		}
		at += k
		count -= k
	}
	return nil
}

// nativeLittle reports whether this machine stores numbers little-endian, as .npz files of
// scipy on x86 and arm64 do: then stored int32 indices and float32 values are read in place.
var nativeLittle = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// readInPlace reads the stored member a's bytes from element lo into dst, in reads of at most
// 64 MiB.
func (s *npzSource) readInPlace(f *os.File, a *npzArray, lo int64, dst []byte) error {
	off := a.off + lo*int64(a.dtype.size)
	for len(dst) > 0 {
		k := min(len(dst), 64<<20)
		if n, err := f.ReadAt(dst[:k], off); n < k {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return npzReadError(s.name+": "+a.member, err)
		}
		dst, off = dst[k:], off+int64(k)
	}
	return nil
}

// readPointers reads indptr[lo..hi] (hi-lo+1 values) and checks that they do not decrease and
// lie in [0, nnz].
func (s *npzSource) readPointers(f *os.File, lo, hi int, what string) ([]int64, error) {
	ptr := make([]int64, 0, min(hi-lo+1, 1<<20)) // grows as pointers arrive
	dt := s.indptr.dtype
	err := s.eachChunk(f, &s.indptr, int64(lo), int64(hi-lo+1), func(at int64, chunk []byte) error {
		for i := 0; i < len(chunk); i += dt.size {
			p := decodeInt(dt, chunk[i:])
			k := at + int64(i/dt.size)
			if len(ptr) > 0 && p < ptr[len(ptr)-1] {
				return inputErrorf(s.name+": indptr.npy", "indptr[%d] = %d is less than indptr[%d] = %d: %s %d would hold a negative number of entries (pointers must not decrease)",
					k, p, k-1, ptr[len(ptr)-1], what, k-1)
			}
			if p < 0 || p > s.nnz {
				return inputErrorf(s.name+": indptr.npy", "indptr[%d] = %d is outside [0, %d] (%d entries in indices.npy and data.npy)", k, p, s.nnz, s.nnz)
			}
			ptr = append(ptr, p)
		}
		return nil
	})
	return ptr, err
}

// checkPointers checks the whole of indptr in one pass, keeping nothing: it starts at 0, ends
// at nnz and never decreases.
func (s *npzSource) checkPointers(format string) error {
	what := "sample"
	if format == "csc" {
		what = "feature"
	}
	dt := s.indptr.dtype
	prev := int64(-1)
	err := s.eachChunk(s.file, &s.indptr, 0, s.indptr.n, func(at int64, chunk []byte) error {
		for i := 0; i < len(chunk); i += dt.size {
			p := decodeInt(dt, chunk[i:])
			k := at + int64(i/dt.size)
			if k == 0 && p != 0 {
				return inputErrorf(s.name+": indptr.npy", "indptr[0] = %d: the pointers must start at 0", p)
			}
			if p < prev {
				return inputErrorf(s.name+": indptr.npy", "indptr[%d] = %d is less than indptr[%d] = %d: %s %d would hold a negative number of entries (pointers must not decrease)",
					k, p, k-1, prev, what, k-1)
			}
			prev = p
		}
		return nil
	})
	if err != nil {
		return err
	}
	if prev != s.nnz {
		return inputErrorf(s.name+": indptr.npy", "the last pointer, indptr[%d], is %d but indices.npy and data.npy hold %d entries", s.indptr.n-1, prev, s.nnz)
	}
	return nil
}

// eachIndex calls fn with every index of indices[p0:p0+ptr[len(ptr)-1]-ptr[0]] and its
// position, checking that it is below m; ptr locates the major element (what, from 0) of a bad
// one.
func (s *npzSource) eachIndex(f *os.File, p0 int64, ptr []int64, what string, m int, fn func(t int64, i int32)) error {
	dt := s.indices.dtype
	return s.eachChunk(f, &s.indices, p0, ptr[len(ptr)-1]-ptr[0], func(at int64, chunk []byte) error {
		for k := 0; k < len(chunk); k += dt.size {
			x := decodeInt(dt, chunk[k:])
			pos := at + int64(k/dt.size)
			if x < 0 || x >= int64(m) {
				j := sort.Search(len(ptr), func(j int) bool { return ptr[j] > pos }) - 1
				return inputErrorf(s.name+": indices.npy", "%s %d (0-based), entry %d: index %d out of range [0, %d)", what, j, pos, x, m)
			}
			fn(pos, int32(x))
		}
		return nil
	})
}

// readIndices reads indices[p0:p0+len(dst)] into dst, checking that they are below m; ptr
// (relative to p0 after subtracting ptr[0]) locates the sample of a bad one, lo the first.
func (s *npzSource) readIndices(f *os.File, dst []int32, p0 int64, ptr []int64, lo int, what string, m int) error {
	dt := s.indices.dtype
	if s.indices.stored && dt.size == 4 && dt.order == binary.LittleEndian && nativeLittle && len(dst) > 0 {
		// The file holds dst's bytes as they are in memory: read them in place, then check.
		if err := s.readInPlace(f, &s.indices, p0, unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 4*len(dst))); err != nil {
			return err
		}
		for k, x := range dst {
			if x < 0 || int(x) >= m {
				pos := p0 + int64(k)
				j := sort.Search(len(ptr), func(j int) bool { return ptr[j] > pos-p0 }) - 1
				return inputErrorf(s.name+": indices.npy", "%s %d (0-based), entry %d: index %d out of range [0, %d)", what, lo+j, pos, x, m)
			}
		}
		return nil
	}
	w := 0
	return s.eachChunk(f, &s.indices, p0, int64(len(dst)), func(at int64, chunk []byte) error {
		bad := -1
		var v int64
		if dt.size == 4 && dt.order == binary.LittleEndian {
			for i := 0; i < len(chunk); i += 4 {
				x := int32(binary.LittleEndian.Uint32(chunk[i:]))
				if x < 0 || int(x) >= m {
					bad, v = i/4, int64(x)
					break
				}
				dst[w] = x
				w++
			}
		} else {
			for i := 0; i < len(chunk); i += dt.size {
				x := decodeInt(dt, chunk[i:])
				if x < 0 || x >= int64(m) {
					bad, v = i/dt.size, x
					break
				}
				dst[w] = int32(x)
				w++
			}
		}
		if bad < 0 {
			return nil
		}
		pos := at + int64(bad)
		// The sample holding entry pos: the last j with ptr[j] <= pos-p0.
		j := sort.Search(len(ptr), func(j int) bool { return ptr[j] > pos-p0 }) - 1
		return inputErrorf(s.name+": indices.npy", "%s %d (0-based), entry %d: index %d out of range [0, %d)", what, lo+j, pos, v, m)
	})
}

// exact32Dtype reports whether every value of dt is exactly a float32.
func exact32Dtype(dt npyDtype) bool {
	return dt.kind == 'f' && dt.size == 4 || dt.kind == 'b' || (dt.kind == 'i' || dt.kind == 'u') && dt.size <= 2
}

// decode32 converts the elements of src (a dtype exact32Dtype accepts) into dst.
func decode32(dt npyDtype, dst []float32, src []byte) {
	n := len(src) / dt.size
	o := dt.order
	switch {
	case dt.kind == 'f':
		if o == binary.LittleEndian {
			for i := range n {
				dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
			}
			return
		}
		for i := range n {
			dst[i] = math.Float32frombits(o.Uint32(src[4*i:]))
		}
	case dt.kind == 'b':
		for i := range n {
			dst[i] = 0
			if src[i] != 0 {
				dst[i] = 1
			}
		}
	case dt.kind == 'u' && dt.size == 1:
		for i := range n {
			dst[i] = float32(src[i])
		}
	case dt.kind == 'i' && dt.size == 1:
		for i := range n {
			dst[i] = float32(int8(src[i]))
		}
	case dt.kind == 'u':
		for i := range n {
			dst[i] = float32(o.Uint16(src[2*i:]))
		}
	default:
		for i := range n {
			dst[i] = float32(int16(o.Uint16(src[2*i:])))
		}
	}
}

// wantNarrow reports whether blocks should come stored as float32 when their values allow.
func wantNarrow(opts ReadOptions) bool {
	return opts.Storage == kernels.StorageFloat32 || opts.Storage == kernels.StorageAuto
}

func (s *npzSource) Name() string  { return s.name }
func (s *npzSource) Samples() int  { return s.n }
func (s *npzSource) Features() int { return s.m }

func (s *npzSource) Close() error {
	r := s.ref
	s.file, s.ref = nil, nil
	if r == nil {
		return nil
	}
	return r.release()
}

func (s *npzSource) naturalLayout() Layout { return LayoutSparse }
func (s *npzSource) missingSeen() bool     { return s.sawNaN.Load() }

// Read reads samples [lo, hi): their pointers, then their indices and values only.
func (s *npzSource) Read(lo, hi int, layout Layout) (kernels.Block, error) {
	if err := checkRead(s.name, s.n, lo, hi, layout); err != nil {
		return nil, err
	}
	f := s.file
	if f == nil {
		return nil, ioError(s.name, "read error", os.ErrClosed)
	}
	ptr, err := s.readPointers(f, lo, hi, "sample")
	if err != nil {
		return nil, err
	}
	p0, p1 := ptr[0], ptr[len(ptr)-1]
	cnt := p1 - p0
	if cnt > math.MaxInt/16 {
		return nil, inputErrorf(s.name, "samples [%d, %d) hold %d entries: too many", lo, hi, cnt)
	}
	if err := checkBytes(s.name, int64(cnt), npzReadEntryBytes, s.opts.MaxBytes, fmt.Sprintf("samples [%d, %d) hold %d entries, and", lo, hi, cnt)); err != nil {
		return nil, err
	}
	for i := range ptr {
		ptr[i] -= p0
	}
	idx := make([]int32, cnt)
	if err := s.readIndices(f, idx, p0, ptr, lo, "sample", s.m); err != nil {
		return nil, err
	}
	dt := s.data.dtype
	c := &kernels.CSC{Rows: s.m, Cols: hi - lo}
	var sawNaN bool
	var val32 []float32
	if wantNarrow(s.opts) {
		if val32, err = s.readValues32(f, p0, cnt); err != nil {
			return nil, err
		}
	}
	if val32 != nil {
		c.ColPtr, c.RowIdx, c.Val32, sawNaN, err = finishRows(s.name, lo, ptr, idx, val32, s.opts.Missing, dt)
		if err == errInexactSum {
			// Rare: finishRows worked on the indices in place; read them again.
			val32 = nil
			if err = s.readIndices(f, idx, p0, ptr, lo, "sample", s.m); err != nil {
				return nil, err
			}
		}
	}
	if val32 == nil {
		val := make([]float64, cnt)
		if err := s.eachChunk(f, &s.data, p0, cnt, func(at int64, chunk []byte) error {
			dt.decode(val[at-p0:], 1, chunk)
			return nil
		}); err != nil {
			return nil, err
		}
		c.ColPtr, c.RowIdx, c.Val, sawNaN, err = finishRows(s.name, lo, ptr, idx, val, s.opts.Missing, dt)
	}
	if err != nil {
		return nil, err
	}
	if sawNaN {
		s.sawNaN.Store(true)
	}
	return shapeStored(s.name, c, layout)
}

// readValues32 reads data[p0:p0+cnt] as float32 values, or returns nil when one of them is not
// exactly a float32 (then the caller reads them as float64).
func (s *npzSource) readValues32(f *os.File, p0, cnt int64) ([]float32, error) {
	dt := s.data.dtype
	val := make([]float32, cnt)
	if s.data.stored && dt.kind == 'f' && dt.size == 4 && dt.order == binary.LittleEndian && nativeLittle && cnt > 0 {
		// The file holds val's bytes as they are in memory (finishRows checks the values).
		return val, s.readInPlace(f, &s.data, p0, unsafe.Slice((*byte)(unsafe.Pointer(&val[0])), 4*cnt))
	}
	if exact32Dtype(dt) {
		err := s.eachChunk(f, &s.data, p0, cnt, func(at int64, chunk []byte) error {
			decode32(dt, val[at-p0:], chunk)
			return nil
		})
		return val, err
	}
	var wide []float64
	errInexact := errors.New("inexact")
	err := s.eachChunk(f, &s.data, p0, cnt, func(at int64, chunk []byte) error {
		k := len(chunk) / dt.size
		dst := val[at-p0 : at-p0+int64(k)]
		if dt.kind == 'f' && dt.size == 8 && dt.order == binary.LittleEndian {
			for i := range dst {
				v := math.Float64frombits(binary.LittleEndian.Uint64(chunk[8*i:]))
				x := float32(v)
				if float64(x) != v && v == v {
					return errInexact
				}
				dst[i] = x
			}
			return nil
		}
		if cap(wide) < k {
			wide = make([]float64, k)
		}
		wide = wide[:k]
		dt.decode(wide, 1, chunk)
		for i, v := range wide {
			x := float32(v)
			if float64(x) != v && v == v {
				return errInexact
			}
			dst[i] = x
		}
		return nil
	})
	if err == errInexact {
		return nil, nil
	}
	return val, err
}

// narrowCSC stores c's values as float32 when every one is exactly a float32.
func narrowCSC(c *kernels.CSC) {
	if n, err := kernels.Narrow(c); err == nil {
		*c = *n.(*kernels.CSC)
	}
}

// shapeStored returns c in layout like shapeSparse, keeping float32 storage: a dense block of
// a float32 CSC block is stored as float32.
func shapeStored(name string, c *kernels.CSC, layout Layout) (kernels.Block, error) {
	dense := layout == LayoutDense || layout.auto() && !layout.sparseEnough(c.NNZ(), c.Rows, c.Cols)
	if !dense {
		return c, nil
	}
	if err := denseFits(name, c.Rows, c.Cols); err != nil {
		return nil, err
	}
	if !kernels.IsNarrow(c) {
		return kernels.ToDense(c), nil
	}
	d := &kernels.Dense{Rows: c.Rows, Cols: c.Cols, Data32: make([]float32, c.Rows*c.Cols)}
	for j := 0; j < c.Cols; j++ {
		col := d.Data32[j*c.Rows : (j+1)*c.Rows]
		for p := c.ColPtr[j]; p < c.ColPtr[j+1]; p++ {
			col[c.RowIdx[p]] = c.Val32[p]
		}
	}
	return d, nil
}

// finishRows turns the entries of consecutive samples lo, lo+1, ... (sample lo+j's are
// idx[ptr[j]:ptr[j+1]], val[...], indices already in range) into a CSC block's storage, in
// place: it validates the values (a NaN is a missing value with missing), sorts unsorted
// indices and sums duplicates as scipy's sum_duplicates does (in the file's dtype: float32
// sums for float32 data, logical or for bool; duplicates in file order), and drops zeros.
func finishRows[T float32 | float64](name string, lo int, ptr []int64, idx []int32, val []T, missing bool, dt npyDtype) (colPtr []int, rowIdx []int32, vals []T, sawNaN bool, err error) {
	n := len(ptr) - 1
	colPtr = make([]int, n+1)
	inf := T(math.Inf(1))
	w := 0
	var tmp []npzPair[T]
	bad := func(j int, i int32, v T) error {
		return inputErrorf(name, "sample %d, feature %d (0-based): %s "+ruleFor(badValue(float64(v))), lo+j, i, badValue(float64(v)))
	}
	for j := range n {
		a, b := int(ptr[j]), int(ptr[j+1])
		// One pass: check, drop zeros and compact, as long as the indices increase. Entries
		// move left only, over entries already read.
		start, prev, t := w, int32(-1), a
		for ; t < b; t++ {
			i, v := idx[t], val[t]
			if !(v >= 0 && v < inf) {
				if v == v || !missing {
					return nil, nil, nil, false, bad(j, i, v)
				}
				v, sawNaN = T(missingNaN), true
			}
			if i <= prev {
				break
			}
			prev = i
			if v != 0 {
				idx[w], val[w] = i, v
				w++
			}
		}
		if t < b {
			// Unsorted: sort what was kept and the rest stably by index, sum duplicates. The
			// buffer is sized to the row, not grown by doubling (a row of many entries would
			// otherwise take up to twice its pairs again).
			if need := (w - start) + (b - t); cap(tmp) < need {
				tmp = make([]npzPair[T], 0, need)
			}
			tmp = tmp[:0]
			for k := start; k < w; k++ {
				tmp = append(tmp, npzPair[T]{idx[k], val[k]})
			}
			for ; t < b; t++ {
				i, v := idx[t], val[t]
				if !(v >= 0 && v < inf) {
					if v == v || !missing {
						return nil, nil, nil, false, bad(j, i, v)
					}
					v, sawNaN = T(missingNaN), true
				}
				tmp = append(tmp, npzPair[T]{i, v})
			}
			slices.SortStableFunc(tmp, func(x, y npzPair[T]) int { return int(x.i) - int(y.i) })
			w = start
			for q := 0; q < len(tmp); {
				i, v := tmp[q].i, tmp[q].v
				for q++; q < len(tmp) && tmp[q].i == i; q++ {
					var exact bool
					if v, exact = sumAs(dt, v, tmp[q].v); !exact {
						return nil, nil, nil, false, errInexactSum
					}
				}
				if v != 0 {
					idx[w], val[w] = i, v
					w++
				}
			}
		}
		colPtr[j+1] = w
	}
	return colPtr, idx[:w], val[:w], sawNaN, nil
}

// npzPair is an entry of a row being sorted.
type npzPair[T float32 | float64] struct {
	i int32
	v T
}

// errInexactSum: duplicates of float64 (or wide integer) data read as float32 sum to a value
// float32 cannot hold; the block is read again as float64.
var errInexactSum = errors.New("matio: a sum of duplicates is not exactly a float32")

// sumAs adds duplicate values as numpy does in dtype dt (float64 sums for other than float32
// and bool data); exact is false when T is float32 and the sum is not exactly a float32.
func sumAs[T float32 | float64](dt npyDtype, a, b T) (sum T, exact bool) {
	switch {
	case dt.kind == 'b':
		if a != 0 || b != 0 {
			return 1, true
		}
		return 0, true
	case dt.kind == 'f' && dt.size == 4:
		return T(float32(a) + float32(b)), true
	}
	w := float64(a) + float64(b)
	return T(w), float64(T(w)) == w || w != w
}

// transpose reads a CSC file whole and returns its matrix held as a MatrixMarket coordinate
// file is, by samples: memory grows with the entries read (24 bytes each while sorting), never
// with the number of samples the shape claims.
func (s *npzSource) transpose() (Source, error) {
	if err := checkBytes(s.name, s.nnz, wholeEntryBytes, s.opts.MaxBytes, "a CSC file is read whole, and its entries"); err != nil {
		return nil, err
	}
	// Features (columns of the file's CSC) are the file's major axis here.
	ptr, err := s.readPointers(s.file, 0, s.m, "feature")
	if err != nil {
		return nil, err
	}
	var entries []mtxEntry
	f := 0 // the feature of the next entry
	if err := s.eachIndex(s.file, 0, ptr, "feature", s.n, func(t int64, i int32) {
		for int64(ptr[f+1]) <= t {
			f++
		}
		entries = append(entries, mtxEntry{s: i, f: int32(f), lm: int(t)})
	}); err != nil {
		return nil, err
	}
	dt := s.data.dtype
	var one [1]float64
	if err := s.eachChunk(s.file, &s.data, 0, s.nnz, func(at int64, chunk []byte) error {
		for k := 0; k < len(chunk); k += dt.size {
			dt.decode(one[:], 1, chunk[k:k+dt.size])
			entries[at+int64(k/dt.size)].v = one[0]
		}
		return nil
	}); err != nil {
		return nil, err
	}
	slices.SortFunc(entries, func(a, b mtxEntry) int {
		if a.s != b.s {
			return int(a.s) - int(b.s)
		}
		if a.f != b.f {
			return int(a.f) - int(b.f)
		}
		return a.lm - b.lm
	})
	// Validate, then sum duplicates (adjacent, in file order) as scipy does.
	w, sawNaN := 0, false
	for k, e := range entries {
		v := e.v
		if !(v >= 0 && v <= math.MaxFloat64) {
			if !isMissing(v, s.opts.Missing) {
				return nil, inputErrorf(s.name, "sample %d, feature %d (0-based): %s "+ruleFor(badValue(v)), e.s, e.f, badValue(v))
			}
			e.v, sawNaN = missingNaN, true
		}
		if k > 0 && w > 0 && entries[w-1].s == e.s && entries[w-1].f == e.f {
			entries[w-1].v, _ = sumAs(dt, entries[w-1].v, e.v)
			continue
		}
		entries[w] = e
		w++
	}
	src := newMTXSparse(s.name, s.n, s.m, entries[:w])
	src.sawNaN, src.storage = sawNaN, s.opts.Storage
	return src, nil
}
