package matio

import (
	"bufio"
	"compress/gzip"
	"errors"
	"github.com/didnmf/didnmf/usererr"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Open opens one input spec: a path to a .npy, .mtx or IDX file (.idx, or MNIST names such as
// train-images-idx3-ubyte), any of them optionally gzip-compressed (detected by content); a
// scipy sparse .npz; a directory, either a didnmf block store (it holds manifest.json) or a
// 10x Cell Ranger directory (it holds matrix.mtx or matrix.mtx.gz); or a synthetic spec
// "synthetic:m=5,n=100000,k=3,seed=1[,noise=0.01]" (see [SyntheticFactors]). A file whose name
// says nothing is recognised by its content. An HDF5 file (.h5ad, .h5, or the HDF5 magic) is
// an error that says how to convert it: python3 -m didnmf convert FILE.h5ad OUT.didnmf.
//
// In every format the rows of the file's matrix are the samples and its columns the features
// (for IDX, the first dimension is the samples and the others are flattened into features; a
// 10x matrix.mtx is genes x cells, so its columns, the cells, are the samples).
//
// An uncompressed .npy is read by ranges from the file, which stays open until Close. A CSR
// .npz (scipy.sparse.save_npz) too: Open reads its zip directory, its small members and its
// pointers (checking that they run from 0 to the number of entries without decreasing); Read
// reads the pointers of its samples, then only their indices and values, with ReadAt for
// stored members and by inflating deflated ones from their start (concurrent Reads of the
// same file in a process share one decompression). Read checks the indices and values, sorts
// unsorted indices and sums duplicates as scipy's sum_duplicates does (in the data's dtype;
// duplicates in file order), and drops zeros; its data may be float32, float64, any integer
// or bool, its indices int32 or int64. A CSC .npz is read whole by Open and transposed in
// memory (about 24 bytes an entry while sorting, 12 after), as a .mtx is. A block store reads
// only manifest.json at Open (a strict, bounded format: see the store's documentation in
// store.go); Read opens the blocks its range overlaps (through the Opener, as
// filepath.Join(dir, block)), checks their shape and reads their part. A 10x directory's
// matrix is read into memory by Open, which checks that features.tsv and barcodes.tsv have a
// line for every gene and cell. Every other file is read into memory by Open (a .mtx is
// parsed and validated there, so its entry errors come from Open rather than Read). Features
// are limited to 2^31-1, as are the rows of a .mtx file and the samples of an .npz or a store.
//
// Every entry must be finite and nonnegative; [OpenWithOptions] with [ReadOptions] Missing
// reads NaN entries as missing values instead.
//
// Open opens files with [OpenInput], which never blocks: it is [OpenWith] with [OpenInput].
// A FIFO, a socket or a device in place of a file is refused, naming it.
func Open(spec string) (Source, error) {
	return OpenWith(OpenInput, spec)
}

// Opener opens a file for reading, like [os.Open], but without blocking (with O_NONBLOCK on
// Unix), as [OpenInput] and fsroot's openers do: os.Open itself would hang on a FIFO with no
// writer before matio could refuse it. An opener confines what can be read: a node's opener
// opens paths only under its data roots, through an [os.Root] (see package fsroot), and the
// parsing code is the same whatever opened the file. What an opener returns is checked on the
// opened descriptor: anything but a regular file (or a directory, where an input may be one)
// is refused, naming the path and what it is.
//
// An error that is an [*fs.PathError] (as those of os.Open and os.Root are) is reported as
// "PATH: cannot open: REASON"; an error with a method UserError() *usererr.Error (fsroot's
// errors, which name the job spec's field and the path) as the *usererr.Error it returns, so
// that a front end names the field its way; any other error with its own text, which should
// name the path. Each wraps [usererr.ErrUser].
type Opener func(path string) (*os.File, error)

// OpenWith is [Open] with the file opened by open, which must not be nil. A synthetic spec
// opens no file. Every file a Source reads, now or in Read, is the one open returned.
func OpenWith(open Opener, spec string) (Source, error) {
	if open == nil {
		return nil, errors.New("matio: OpenWith: nil Opener")
	}
	return openSpec(open, spec, ReadOptions{})
}

// openSpec opens a spec with a non-nil opener.
func openSpec(open Opener, spec string, opts ReadOptions) (Source, error) {
	if strings.HasPrefix(spec, syntheticPrefix) {
		return openSynthetic(spec)
	}
	return openFileWith(open, spec, opts)
}

type fileFormat int

const (
	formatUnknown fileFormat = iota
	formatNPY
	formatMTX
	formatIDX
	formatNPZ
	formatHDF5
)

// hdf5Magic starts every HDF5 file (AnnData .h5ad, 10x .h5).
const hdf5Magic = "\x89HDF\r\n\x1a\n"

// idxName matches the names of the MNIST-style distributions, e.g. train-images-idx3-ubyte.
var idxName = regexp.MustCompile(`[-.]idx[0-9]+-ubyte$`)

// formatFromName guesses the format from the file name, ignoring a .gz suffix.
func formatFromName(path string) fileFormat {
	base := strings.TrimSuffix(strings.ToLower(filepath.Base(path)), ".gz")
	switch {
	case strings.HasSuffix(base, ".npy"):
		return formatNPY
	case strings.HasSuffix(base, ".npz"):
		return formatNPZ
	case strings.HasSuffix(base, ".h5ad") || strings.HasSuffix(base, ".h5") || strings.HasSuffix(base, ".hdf5"):
		return formatHDF5
	case strings.HasSuffix(base, ".mtx"):
		return formatMTX
	case strings.HasSuffix(base, ".idx") || idxName.MatchString(base):
		return formatIDX
	}
	return formatUnknown
}

// sniffFormat recognises a format by the first bytes of the (decompressed) data.
func sniffFormat(head []byte) fileFormat {
	switch {
	case strings.HasPrefix(string(head), npyMagic):
		return formatNPY
	case strings.HasPrefix(string(head), "PK\x03\x04"):
		return formatNPZ
	case strings.HasPrefix(string(head), hdf5Magic):
		return formatHDF5
	case len(head) >= 14 && strings.EqualFold(string(head[:14]), "%%MatrixMarket"):
		return formatMTX
	case len(head) >= 4 && head[0] == 0 && head[1] == 0 && idxTypes[head[2]].size > 0 && head[3] > 0:
		return formatIDX
	}
	return formatUnknown
}

func openFile(path string) (Source, error) {
	return openFileWith(OpenInput, path, ReadOptions{})
}

func openFileWith(open Opener, path string, opts ReadOptions) (Source, error) {
	return openPath(open, path, opts, true)
}

// openPath opens a file, or with dirs a directory (a 10x directory or a block store) too.
func openPath(open Opener, path string, opts ReadOptions, dirs bool) (Source, error) {
	f, err := openInput(open, path, dirs)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err == nil && st.IsDir() {
		f.Close()
		return openDir(open, path, opts)
	}
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > 0 && formatOf(path, f) == formatNPZ {
		return openNPZ(path, f, st.Size(), opts) // it owns f: closes it, or keeps it open
	}
	src, err := openOpenedFile(path, f, opts)
	if npy, ok := src.(*npySource); err != nil || !ok || npy.file != f {
		f.Close() // an uncompressed .npy keeps its file open
	}
	return src, err
}

// formatOf returns the format of an uncompressed file, by name or else by content, or
// formatUnknown (for a compressed file too).
func formatOf(path string, f *os.File) fileFormat {
	var head [16]byte
	n, _ := f.ReadAt(head[:], 0)
	if n >= 2 && head[0] == 0x1f && head[1] == 0x8b || strings.HasPrefix(string(head[:n]), hdf5Magic) {
		return formatUnknown
	}
	if format := formatFromName(path); format != formatUnknown {
		return format
	}
	return sniffFormat(head[:n])
}

// openOpenedFile opens f, a regular file opened as path (openInput checked it).
func openOpenedFile(path string, f *os.File, opts ReadOptions) (Source, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, ioError(path, "cannot open", err)
	}
	size := st.Size()
	if size == 0 {
		return nil, inputErrorf(path, "empty file")
	}
	var head [16]byte
	n, err := f.ReadAt(head[:], 0)
	if n < len(head) && err != io.EOF {
		return nil, ioError(path, "read error", err)
	}
	format := formatFromName(path)
	if strings.HasPrefix(string(head[:n]), hdf5Magic) {
		return nil, hdf5Error(path)
	}
	if n >= 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<16))
		if err != nil {
			return nil, ioError(path, "bad gzip data", err)
		}
		defer zr.Close()
		br := bufio.NewReaderSize(zr, 1<<16)
		if format == formatUnknown {
			h, _ := br.Peek(len(head))
			format = sniffFormat(h)
		}
		switch format {
		case formatNPY:
			return openNPYStream(path, br, size, opts)
		case formatMTX:
			return parseMTX(path, br, opts)
		case formatIDX:
			return openIDXStream(path, br, -1, size, opts)
		case formatNPZ:
			return nil, inputErrorf(path, "a gzip-compressed .npz is not read: give the .npz itself (scipy.sparse.save_npz compresses its members already)")
		case formatHDF5:
			return nil, hdf5Error(path)
		}
		return nil, unknownFormat(path)
	}
	if format == formatUnknown {
		format = sniffFormat(head[:n])
	}
	switch format {
	case formatNPY:
		return openNPYFile(path, f, size, opts)
	case formatMTX:
		return parseMTX(path, bufio.NewReaderSize(f, 1<<16), opts)
	case formatIDX:
		return openIDXStream(path, bufio.NewReaderSize(f, 1<<16), size, -1, opts)
	case formatNPZ:
		return nil, inputErrorf(path, "cannot read an .npz here") // openPath opens them
	case formatHDF5:
		return nil, hdf5Error(path)
	}
	return nil, unknownFormat(path)
}

// hdf5Error is the error for an HDF5 file, which the nodes do not read (no pure-Go HDF5
// reader is at hand): it says how to convert it into a block store.
func hdf5Error(path string) error {
	base := filepath.Base(path)
	stem := strings.TrimSuffix(base, filepath.Ext(base))
	out := filepath.Join(filepath.Dir(path), stem+".didnmf")
	return inputErrorf(path, "an HDF5 file (AnnData .h5ad or 10x .h5) is not read by didnmf's nodes: convert it first with the didnmf Python package (pip install ./python from didnmf's sources): python3 -m didnmf convert %s %s, then give %s as the input", path, out, out)
}

// openError wraps an Opener's error: see [Opener].
func openError(path string, err error) error {
	var fe interface{ UserError() *usererr.Error }
	if errors.As(err, &fe) {
		return fe.UserError()
	}
	if errors.As(err, new(*fs.PathError)) {
		return ioError(path, "cannot open", err)
	}
	return usererr.Wrap(err)
}

func unknownFormat(path string) error {
	return inputErrorf(path, "unrecognized format: expected a .npy, .mtx or IDX file, optionally gzip-compressed (by name or by content), a scipy sparse .npz, a 10x Cell Ranger directory, a didnmf block store directory, or a synthetic: spec")
}
