package matio

import (
	"bytes"
	"errors"
	"math"

	"github.com/didnmf/didnmf/kernels"
)

// ReadOptions are the options of reading an input's entries. The zero value is the default of
// [Open], [OpenAll] and [NewBlockBuilder]: every entry must be finite and nonnegative.
type ReadOptions struct {
	// Missing reads a NaN entry as a missing value (not observed) instead of an error: the
	// block holds NaN there, as kernels.Options.Missing expects (a dense block stores NaN,
	// a CSC block stores an entry whose value is NaN; unstored entries and stored zeros are
	// observed zeros). Infinite and negative entries are errors all the same.
	//
	// Every reader where a NaN can occur takes it: .npy and IDX files of floats (NaN, of any
	// sign and payload, is stored as the one NaN math.NaN returns, as a negative zero is
	// stored as zero), MatrixMarket real fields (a value "nan", in any case, optionally
	// signed: "NaN", "-nan"; a coordinate entry whose value is NaN is a stored NaN; integer
	// and pattern fields cannot hold NaN), and the chunks of a [BlockBuilder]. Integer, bool
	// and synthetic data never hold NaN.
	Missing bool

	// Storage lets a source hand out blocks already stored as the caller will store them
	// (kernels.ApplyStorage with the same value still follows, and then has nothing to do):
	// with kernels.StorageFloat32 or StorageAuto, the file sources other than IDX (.npy,
	// .mtx, .npz, 10x directories, block stores) return a block whose values are all exactly
	// float32 with Val32 / Data32 instead of float64 values. A CSR .npz of float32, bool or
	// 8- and 16-bit integer data is decoded straight into float32, so that a counts matrix
	// never has a float64 copy; the others narrow the block they read. A block with a value
	// float32 cannot hold is returned as float64, for ApplyStorage to keep (auto) or refuse
	// (float32, naming the value). IDX and synthetic sources, and the zero value
	// (StorageAsIs) or StorageFloat64, give float64 values.
	Storage kernels.Storage

	// Transform is applied to the values as they are read (see [Transform]), after they
	// were checked: a source opened with TransformSqrt hands out the square roots of its
	// values, and is named sqrt(name).
	Transform Transform

	// MaxBytes bounds the memory a source may take to read its file (0: no bound), checked
	// against what the file declares before anything is allocated: the inputs read whole
	// when opened (a .mtx, a 10x directory's matrix.mtx, a CSC .npz: wholeEntryBytes an
	// entry, wholeValueBytes a value of a dense .mtx), and the entries of one Read of a CSR
	// .npz. A node sets it to what one owner's job may hold there (serve --owner-memory), so
	// that a small compressed file declaring billions of entries is refused, naming the
	// file, rather than read.
	MaxBytes int64
}

// wholeEntryBytes is what a sparse entry takes while an input read whole is sorted (a
// mtxEntry), and wholeValueBytes a dense value (float64).
const (
	wholeEntryBytes = 24
	wholeValueBytes = 8
)

// checkBytes returns an error naming name when count items of size bytes each exceed max
// (max 0: no bound).
func checkBytes(name string, count, size, max int64, what string) error {
	if max <= 0 || count <= max/size {
		return nil
	}
	return inputErrorf(name, "%s: %d of them take %d MiB or more to read, more than the %d MiB one input may take here (serve --owner-memory)",
		what, count, count/(1<<20)*size, max>>20)
}

// missingNaN is the value a missing entry is stored as.
var missingNaN = math.NaN()

// isMissing reports whether v is read as a missing value under missing.
func isMissing(v float64, missing bool) bool { return missing && v != v }

// OpenWithOptions is [OpenWith] reading entries as opts says: with opts.Missing, a NaN entry
// is a missing value rather than an error. OpenWith(open, spec) is OpenWithOptions(open, spec,
// ReadOptions{}).
func OpenWithOptions(open Opener, spec string, opts ReadOptions) (Source, error) {
	if open == nil {
		return nil, errors.New("matio: OpenWithOptions: nil Opener")
	}
	src, err := openSpec(open, spec, opts)
	if err != nil {
		return nil, err
	}
	return opts.Transform.Apply(src), nil
}

// OpenAllWithOptions is [OpenAllWith] reading the entries of every input as opts says (see
// [OpenWithOptions]). OpenAllWith(open, specs) is OpenAllWithOptions(open, specs,
// ReadOptions{}).
func OpenAllWithOptions(open Opener, specs []string, opts ReadOptions) (Source, error) {
	if open == nil {
		return nil, errors.New("matio: OpenAllWithOptions: nil Opener")
	}
	return openAll(open, specs, opts)
}

// missingSeer is implemented by the sources of this package that can hold NaN.
type missingSeer interface {
	missingSeen() bool
}

var (
	_ missingSeer = (*npySource)(nil)
	_ missingSeer = (*idxSource)(nil)
	_ missingSeer = (*mtxSource)(nil)
	_ missingSeer = (*stackSource)(nil)
	_ missingSeer = (*npzSource)(nil)
	_ missingSeer = (*storeSource)(nil)
	_ missingSeer = sqrtSource{}
)

// MissingSeen reports whether src, opened with [ReadOptions] Missing, has met a missing (NaN)
// entry so far: a MatrixMarket file, a 10x directory and a CSC .npz are read whole by Open, so
// they know at once; a .npy, IDX or CSR .npz file and a block store know once a Read (of any
// range, in any layout) has returned a block with a NaN; a stack, when any of its parts does. It is false for a source opened without Missing (a NaN
// there is an error), for synthetic data, and for a Source from outside this package.
// MissingSeen is safe for concurrent use with Read.
func MissingSeen(src Source) bool {
	if s, ok := src.(missingSeer); ok {
		return s.missingSeen()
	}
	return false
}

func (s *npySource) missingSeen() bool { return s.sawNaN.Load() }
func (s *idxSource) missingSeen() bool { return s.sawNaN.Load() }
func (s *mtxSource) missingSeen() bool { return s.sawNaN }

func (s *stackSource) missingSeen() bool {
	for _, src := range s.srcs {
		if MissingSeen(src) {
			return true
		}
	}
	return false
}

// isSignedNaN reports whether a value token is "+nan" or "-nan" in any case, which C's printf
// writes for NaN with the sign bit set (glibc) and strconv.ParseFloat does not take.
func isSignedNaN(b []byte) bool {
	return len(b) == 4 && (b[0] == '+' || b[0] == '-') && bytes.EqualFold(b[1:], []byte("nan"))
}
