package didnmf

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/didnmf/didnmf/internal/atomicfile"
	"github.com/didnmf/didnmf/internal/buildinfo"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/usererr"
)

// A sweep's journal in files (FileSweepJournal) is a directory, DIR/runs of the sweep's output
// directory DIR, holding
//
//   - journal.json: the fingerprint of the job whose runs it holds (sweepFingerprint), and the
//     didnmf builds that recorded them;
//   - per run, k{K}-seed{S}-fold{F}.basis.npy, the run's basis (features x K, float64), and
//     then k{K}-seed{S}-fold{F}.json, its record (sweepRecord): the numbers the sweep and
//     its report read, and the SHA-256 of the basis file.
//
// Each file is written whole or not at all (internal/atomicfile), the record last: a run is
// in the journal when its record is, and a process killed at any point leaves the runs it
// recorded and at most a basis without a record (written again by the next sweep). Every file
// read back is hostile until checked.

// SweepJournalDir is the directory of a sweep's output directory that its FileSweepJournal
// keeps the runs in.
const SweepJournalDir = "runs"

// MaxSweepRecordBytes bounds the files of a FileSweepJournal that are not bases (a run's
// record, journal.json): a larger one is refused before it is read. A record is under 1 kB.
const MaxSweepRecordBytes = 1 << 20

// sweepJournalFormat is the format of journal.json and of the records; a journal of another
// format is refused.
const sweepJournalFormat = 1

// sweepJournalFile is the journal's fingerprint file.
const sweepJournalFile = "journal.json"

// FileSweepJournal is a SweepJournal in files (see OpenSweepJournal): the runs of one job,
// each recorded as it ends, read back and checked when a sweep of the same job goes on.
type FileSweepJournal struct {
	dir string // DIR/runs
	fp  sweepFingerprint
	// features and samples are the job's input's shape when this process read it (else 0);
	// testSeed the job's base test seed; maxIter its iteration cap, with the iterations an
	// extrapolating run may take past it to settle (kernels.StopRule.Settle).
	features, samples int
	testSeed          uint64
	maxIter           int

	mu sync.Mutex
	// current is set once journal.json on disk is this job's: when the journal held runs
	// (and so a fingerprint that matched), or after the first Record wrote it.
	current bool
	// m is the features of the records read, when the job's are not known here (a cluster).
	m int
	// kept are the builds journal.json names when the journal held runs (nil: none, or a
	// journal from before builds were recorded); build is this binary's (buildinfo ID).
	kept  []string
	build string
	// raisedFrom is the iteration cap of the journal's runs when this job's is higher (else
	// 0). cap is the job's iteration cap: Done leaves out a run that hit a lower one, to be
	// run again (a journal whose raised cap was written before all of those ran again holds
	// some still: the cap each hit is its iteration count).
	raisedFrom, cap int
	// folds are the held-out set's figures of the first record read of each fold, by test
	// seed, which every other run of that fold must have (sameFold).
	folds map[uint64]foldFigures
}

// foldFigures are what every run of one fold (one held-out set) has alike: the counts of its
// entries fit, missing and held out, and the squared norms of those fit and held out.
type foldFigures struct {
	observed, missing, testCount int64
	sqNormX, testSqNorm          float64
	path                         string // the record they were read from
}

// sameFold checks a record's figures of its held-out set: its counts of entries fit, missing
// and held out add up to m x n, and they and its squared norms are those of the other records
// of its fold read so far (the norms to 1e-9 of themselves: they are the same sums of the same
// data, but a build that sums in another order may round them otherwise). A record edited to
// other figures (a test error's norm of 1e308, a test count of 0) is refused, naming it and
// the record it disagrees with.
func (j *FileSweepJournal) sameFold(rec *sweepRecord, path, again string) error {
	bad := func(format string, args ...any) error {
		return usererr.At(path, "%s%s", fmt.Sprintf(format, args...), again)
	}
	if sum, entries := rec.Observed+rec.Missing+rec.TestCount, int64(rec.M)*int64(rec.N); sum != entries {
		return bad("observed %d + missing %d + test_count %d = %d entries; the job's m x n is %d", rec.Observed, rec.Missing, rec.TestCount, sum, entries)
	}
	f := foldFigures{observed: rec.Observed, missing: rec.Missing, testCount: rec.TestCount, sqNormX: float64(rec.SqNormX),
		testSqNorm: float64(rec.TestSqNorm), path: path}
	was, ok := j.folds[rec.TestSeed]
	if !ok {
		if j.folds == nil {
			j.folds = map[uint64]foldFigures{}
		}
		j.folds[rec.TestSeed] = f
		return nil
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(math.Abs(a), math.Abs(b)) }
	if f.observed != was.observed || f.missing != was.missing || f.testCount != was.testCount || !near(f.sqNormX, was.sqNormX) || !near(f.testSqNorm, was.testSqNorm) {
		return bad("observed %d, missing %d, test_count %d, sq_norm_x %v, test_sq_norm %v; %s, of the same held-out set (test seed %d), has %d, %d, %d, %v, %v",
			f.observed, f.missing, f.testCount, f.sqNormX, f.testSqNorm, was.path, rec.TestSeed, was.observed, was.missing, was.testCount, was.sqNormX, was.testSqNorm)
	}
	return nil
}

// OpenSweepJournal opens the journal of a sweep of job j0 with options o in dir/runs
// (SweepJournalDir), dir being the sweep's output directory. Nothing is written until the
// first Record. When the directory holds recorded runs, its journal.json must be the
// fingerprint of the same job: everything that makes a run's bits (j0's spec but for its
// rank and seed, with the sweep's transform and j0's base test seed; not where or how the
// job runs: nodes, ingest, checkpoints) and each input's path with, where this process can
// stat it, its size and modification time. Otherwise, or when journal.json cannot be read,
// the error (a *usererr.Error) says what differs and how to go on. Runs reports how many runs
// the directory holds; Done reads and checks one.
func OpenSweepJournal(dir string, j0 *Job, o SweepOptions) (*FileSweepJournal, error) {
	if j0 == nil || j0.Spec == nil {
		return nil, errors.New("sweep journal: no job")
	}
	fp, err := fingerprintOf(j0, sweepTransformOf(j0, o))
	if err != nil {
		return nil, err
	}
	j := &FileSweepJournal{dir: filepath.Join(dir, SweepJournalDir), fp: fp, features: j0.Features, samples: j0.Samples,
		testSeed: j0.Spec.TestSeed, maxIter: j0.Spec.Stop.MaxIter + j0.Spec.Stop.For(j0.Spec.Accel).Settle, cap: j0.Spec.Stop.MaxIter, build: buildinfo.ID()}
	j.fp.Builds = []string{j.build}
	n, err := j.Runs()
	if err != nil || n == 0 {
		// Without runs, journal.json (if any) binds nothing: the first Record writes this job's.
		return j, err
	}
	was, err := readFingerprint(filepath.Join(j.dir, sweepJournalFile), j.dir, n)
	if err != nil {
		return nil, err
	}
	// A job that differs only by a higher iteration cap is the same job for the runs that
	// stopped before the old cap (their bits do not depend on it); those that hit it run
	// again (Done, by their iteration count: also after journal.json took the new cap at the
	// first Record and the sweep was stopped before they all ran).
	if then, ok := raisedCap(was, fp); ok {
		same := was
		same.Spec = maps.Clone(was.Spec)
		same.Spec[maxIterKey] = fp.Spec[maxIterKey]
		if err := fp.compare(same, j.dir); err != nil {
			return nil, err // what differs besides the cap, which may be raised
		}
		j.raisedFrom, was = then, same
	}
	if err := fp.compare(was, j.dir); err != nil {
		return nil, err
	}
	j.kept = was.Builds
	// journal.json is this job's; it is written again at the first Record only to add this
	// build to the builds that recorded runs (or the raised cap).
	j.current = slices.Contains(was.Builds, j.build) && j.raisedFrom == 0
	if j.fp.Builds = slices.Clone(was.Builds); !slices.Contains(was.Builds, j.build) {
		j.fp.Builds = append(j.fp.Builds, j.build)
	}
	return j, nil
}

// Builds returns the didnmf builds (buildinfo's ID: version or commit, and Go version) that
// recorded the runs the journal held when it was opened, as its journal.json names them
// (nil when it held none, or was written before builds were recorded), and this binary's.
// Runs recorded by another build were made by other kernels, whose bits may differ: a sweep
// resumed across builds is not bitwise the sweep run in one sitting by either, and the caller
// should say so.
func (j *FileSweepJournal) Builds() (kept []string, this string) {
	return slices.Clone(j.kept), j.build
}

// Dir is the journal's directory (DIR/runs).
func (j *FileSweepJournal) Dir() string { return j.dir }

// Runs counts the runs the journal's directory holds (their records' files: names
// k{K}-seed{S}-fold{F}.json), 0 when it does not exist. It does not read them: Done does. It
// may be called at any time, also while Record runs.
func (j *FileSweepJournal) Runs() (int, error) {
	st, err := os.Lstat(j.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, usererr.At(j.dir, "%v", err)
	}
	if !st.IsDir() {
		return 0, usererr.At(j.dir, "is not a directory: a sweep keeps its runs there; remove it or use another {out} directory")
	}
	entries, err := os.ReadDir(j.dir)
	if err != nil {
		return 0, usererr.At(j.dir, "%v", err)
	}
	n := 0
	for _, e := range entries {
		if _, _, _, ok := parseRunFile(e.Name()); ok {
			n++
		}
	}
	return n, nil
}

// Done returns the run of rank k, seed and fold the journal recorded, nil when it holds none
// (no record: a basis without its record does not count). The record and the basis are
// checked: the record's size (MaxSweepRecordBytes), its JSON (every field, no other, each of
// its type), its rank, seed and fold against its name, its test seed, features and samples
// against the job's, its numbers (finite where they must be, counts nonnegative), and the
// basis's shape (features x K), size and SHA-256 against the record's. An error is a
// *usererr.Error that names the file, says what is wrong and that removing the file runs the
// job again. The result has no C, History or Job. Calls come one at a time and never at the
// same time as Record's.
func (j *FileSweepJournal) Done(k, seed, fold int) (*Result, error) {
	base := runFileBase(k, seed, fold)
	path := filepath.Join(j.dir, base+".json")
	again := fmt.Sprintf("; remove %s to run that job again", path)
	data, err := readBounded(path, MaxSweepRecordBytes, "a run's record")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, withAdvice(err, again)
	}
	rec, err := decodeSweepRecord(path, k, seed, fold, data)
	if err != nil {
		return nil, withAdvice(err, again)
	}
	bad := func(format string, args ...any) error {
		return usererr.At(path, "%s%s", fmt.Sprintf(format, args...), again)
	}
	switch {
	case rec.TestSeed != j.testSeed+uint64(fold):
		return nil, bad("test_seed %d; the job's fold %d holds out test seed %d", rec.TestSeed, fold, j.testSeed+uint64(fold))
	case j.features > 0 && rec.M != j.features:
		return nil, bad("m %d: a basis of %d features; the job's input has %d", rec.M, rec.M, j.features)
	case j.features == 0 && j.m > 0 && rec.M != j.m:
		return nil, bad("m %d: a basis of %d features; the other runs' have %d", rec.M, rec.M, j.m)
	case j.samples > 0 && rec.N != j.samples:
		return nil, bad("n %d samples; the job's input has %d", rec.N, j.samples)
	case j.maxIter > 0 && rec.Iterations > j.maxIter:
		return nil, bad("%d iterations, more than the job's cap (%d)", rec.Iterations, j.maxIter)
	}
	if j.cap > 0 && rec.StopReason == string(kernels.StopMaxIter) && rec.Iterations < j.cap {
		return nil, nil // it hit a lower cap than the job's (one raised since): run again
	}
	if err := j.sameFold(rec, path, again); err != nil {
		return nil, err
	}
	b, err := readBasis(filepath.Join(j.dir, rec.Basis), rec, path, again)
	if err != nil {
		return nil, err
	}
	if j.features == 0 {
		j.m = rec.M
	}
	res := &Result{Result: kernels.Result{M: rec.M, N: rec.N, K: k, B: b, Iterations: rec.Iterations, Converged: rec.Converged,
		StopReason: kernels.StopReason(rec.StopReason), Initial: float64(rec.Initial), Objective: float64(rec.Objective),
		Residual: float64(rec.Residual), SqNormX: float64(rec.SqNormX), Observed: rec.Observed, Missing: rec.Missing,
		TestCount: rec.TestCount, TestSqNorm: float64(rec.TestSqNorm), TestSSE: float64(rec.TestSSE), Seconds: float64(rec.Seconds)}}
	return res, nil
}

// readBasis reads and checks the basis file a record names (at path, rec's of the record at
// recPath) and returns the basis column-major, M x K: its shape, its size (exactly a float64
// .npy of that shape, as Record writes it) and its SHA-256 against the record's, and its
// values (matio's checks).
func readBasis(path string, rec *sweepRecord, recPath, again string) ([]float64, error) {
	m, k := rec.M, rec.K
	want := int64(len(matio.NPYHeader(m, k))) + 8*int64(m)*int64(k)
	bad := func(format string, args ...any) error {
		return usererr.At(path, "%s (the basis %s names)%s", fmt.Sprintf(format, args...), recPath, again)
	}
	data, err := readBounded(path, want, "the basis")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, bad("is missing")
	}
	if err != nil || int64(len(data)) != want {
		// Say the shape when the header tells it.
		if src, oerr := matio.OpenWith(matio.OpenInput, path); oerr == nil {
			rows, cols := src.Samples(), src.Features()
			src.Close()
			if rows != m || cols != k {
				return nil, bad("shape %d x %d; want features x K = %d x %d", rows, cols, m, k)
			}
		}
		if err != nil {
			return nil, withAdvice(err, again)
		}
		return nil, bad("is %d bytes; a %d x %d float64 .npy is %d", len(data), m, k, want)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != rec.BasisSHA256 {
		return nil, bad("its SHA-256 is %x, not the %s its record says: the file, or the record, changed after the run", sum, rec.BasisSHA256)
	}
	rows, cols, vals, err := matio.ReadNPYMatrix(path)
	if err != nil {
		return nil, withAdvice(usererr.Wrap(err), again)
	}
	if rows != m || cols != k {
		return nil, bad("shape %d x %d; want features x K = %d x %d", rows, cols, m, k)
	}
	return kernels.Transpose(vals, k, m), nil
}

// Record keeps a run that ended: its basis (features x K, from res.B, M x K column-major) in
// k{K}-seed{S}-fold{F}.basis.npy, then its record, each file whole or not at all, and
// journal.json first when the directory does not hold this job's yet (it creates the
// directory). A run Done would refuse (a non-finite error, say) is not written: the error
// says why. Calls come one at a time and never at the same time as Done's.
func (j *FileSweepJournal) Record(k, seed, fold int, res *Result) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if res == nil || res.K != k || res.M < 1 || len(res.B) != res.M*k {
		return fmt.Errorf("sweep journal: K=%d seed %d fold %d: not a result of rank %d with its basis", k, seed, fold, k)
	}
	base := runFileBase(k, seed, fold)
	path := filepath.Join(j.dir, base+".json")
	var npy bytes.Buffer
	if err := matio.WriteNPY(&npy, res.M, k, kernels.Transpose(res.B, res.M, k)); err != nil {
		return fmt.Errorf("sweep journal: K=%d seed %d fold %d: %w", k, seed, fold, err)
	}
	sum := sha256.Sum256(npy.Bytes())
	rec := sweepRecord{Format: sweepJournalFormat, K: k, Seed: seed, Fold: fold, TestSeed: j.testSeed + uint64(fold), M: res.M, N: res.N,
		Iterations: res.Iterations, Converged: res.Converged, StopReason: string(res.StopReason), Initial: jsonFloat(res.Initial),
		Objective: jsonFloat(res.Objective), Residual: jsonFloat(res.Residual), SqNormX: jsonFloat(res.SqNormX), Observed: res.Observed,
		Missing: res.Missing, TestCount: res.TestCount, TestSqNorm: jsonFloat(res.TestSqNorm), TestSSE: jsonFloat(res.TestSSE),
		Seconds: jsonFloat(res.Seconds), Basis: base + ".basis.npy", BasisSHA256: hex.EncodeToString(sum[:])}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("sweep journal: K=%d seed %d fold %d: %w", k, seed, fold, err)
	}
	data = append(data, '\n')
	// What is written is what Done reads back: a run it would refuse is not kept.
	if _, err := decodeSweepRecord(path, k, seed, fold, data); err != nil {
		return fmt.Errorf("sweep journal: not recording the run: %w", err)
	}
	if !j.current {
		fp, err := json.MarshalIndent(j.fp, "", "  ")
		if err != nil {
			return fmt.Errorf("sweep journal: %w", err)
		}
		if err := os.MkdirAll(j.dir, 0o755); err != nil {
			return fmt.Errorf("sweep journal: %w", err)
		}
		if err := atomicfile.WriteFile(filepath.Join(j.dir, sweepJournalFile), append(fp, '\n'), 0o644); err != nil {
			return fmt.Errorf("sweep journal: %w", err)
		}
		j.current = true
	}
	if err := atomicfile.WriteFile(filepath.Join(j.dir, rec.Basis), npy.Bytes(), 0o644); err != nil {
		return fmt.Errorf("sweep journal: %w", err)
	}
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("sweep journal: %w", err)
	}
	return nil
}

// runFileBase is the name of a run's files without their suffix: k{K}-seed{S}-fold{F}.
func runFileBase(k, seed, fold int) string { return fmt.Sprintf("k%d-seed%d-fold%d", k, seed, fold) }

// parseRunFile reads the rank, seed and fold of a run's record's name, runFileBase + ".json",
// as runFileBase writes it (a name it would not write is no run's: ok false).
func parseRunFile(name string) (k, seed, fold int, ok bool) {
	base, found := strings.CutSuffix(name, ".json")
	if !found || !strings.HasPrefix(base, "k") {
		return 0, 0, 0, false
	}
	ks, rest, found := strings.Cut(base[1:], "-seed")
	if !found {
		return 0, 0, 0, false
	}
	i := strings.LastIndex(rest, "-fold")
	if i < 0 {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	k, err1 = strconv.Atoi(ks)
	seed, err2 = strconv.Atoi(rest[:i])
	fold, err3 = strconv.Atoi(rest[i+len("-fold"):])
	if err1 != nil || err2 != nil || err3 != nil || k < 1 || fold < 0 || runFileBase(k, seed, fold) != base {
		return 0, 0, 0, false
	}
	return k, seed, fold, true
}

// readBounded reads the regular file at path, refusing it (naming it and what, e.g. "a run's
// record") when it is larger than limit bytes, before reading. A missing file's error wraps
// fs.ErrNotExist; the others are *usererr.Error.
func readBounded(path string, limit int64, what string) ([]byte, error) {
	f, err := matio.OpenInput(path) // never blocks on a FIFO
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, usererr.At(path, "cannot open: %v", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, usererr.At(path, "%v", err)
	}
	if st.IsDir() {
		return nil, usererr.At(path, "is a directory, not %s", what)
	}
	if !st.Mode().IsRegular() {
		return nil, usererr.At(path, "is not a regular file (%v)", st.Mode().Type())
	}
	if st.Size() > limit {
		return nil, usererr.At(path, "is %d bytes, more than %s may be (%d)", st.Size(), what, limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, usererr.At(path, "%v", err)
	}
	if int64(len(data)) > limit {
		return nil, usererr.At(path, "grew past %d bytes while read, more than %s may be", limit, what)
	}
	return data, nil
}

// withAdvice returns err (a *usererr.Error) with advice appended to its message.
func withAdvice(err error, advice string) error {
	return usererr.New(err.Error()+advice, err)
}

// sweepRecord is a run's record, k{K}-seed{S}-fold{F}.json: the fields of kernels.Result the
// sweep and its report read, the run's test seed, and its basis file's name and SHA-256.
type sweepRecord struct {
	Format      int       `json:"format"`
	K           int       `json:"k"`
	Seed        int       `json:"seed"`
	Fold        int       `json:"fold"`
	TestSeed    uint64    `json:"test_seed"`
	M           int       `json:"m"`
	N           int       `json:"n"`
	Iterations  int       `json:"iterations"`
	Converged   bool      `json:"converged"`
	StopReason  string    `json:"stop_reason"`
	Initial     jsonFloat `json:"initial"`
	Objective   jsonFloat `json:"objective"`
	Residual    jsonFloat `json:"residual"`
	SqNormX     jsonFloat `json:"sq_norm_x"`
	Observed    int64     `json:"observed"`
	Missing     int64     `json:"missing"`
	TestCount   int64     `json:"test_count"`
	TestSqNorm  jsonFloat `json:"test_sq_norm"`
	TestSSE     jsonFloat `json:"test_sse"`
	Seconds     jsonFloat `json:"seconds"`
	Basis       string    `json:"basis"`
	BasisSHA256 string    `json:"basis_sha256"`
}

// sweepRecordFields are the JSON names of sweepRecord's fields: a record holds each once
// and no other.
var sweepRecordFields = func() []string {
	t := reflect.TypeFor[sweepRecord]()
	names := make([]string, t.NumField())
	for i := range names {
		names[i], _, _ = strings.Cut(t.Field(i).Tag.Get("json"), ",")
	}
	slices.Sort(names)
	return names
}()

// maxRecordDim bounds a record's m and n (matio limits features to 2^31-1): their product
// and M*K fit an int64.
const maxRecordDim = math.MaxInt32

// decodeSweepRecord decodes and checks the record at path, of the run of rank k, seed and fold
// its name says, from data, as hostile: at most MaxSweepRecordBytes, one JSON object with
// every field of sweepRecord once and no other (case counts), each of its type; the format,
// rank, seed and fold the name's; m and n in [1, 2^31-1]; iterations >= 0; a stop reason of
// a run that ended (not cancelled); residual, ||X||², the held-out error and norm and seconds
// finite and >= 0; the counts in [0, m n]; the basis file the name's and a SHA-256 in hex.
// Initial and objective may be anything, NaN and infinities included (written as the strings
// "NaN", "+Inf", "-Inf"): nothing reads them but a report. Errors are *usererr.Error naming
// path.
func decodeSweepRecord(path string, k, seed, fold int, data []byte) (*sweepRecord, error) {
	if len(data) > MaxSweepRecordBytes {
		return nil, usererr.At(path, "is %d bytes, more than a run's record may be (%d)", len(data), MaxSweepRecordBytes)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		if err == nil {
			err = errors.New("null")
		}
		return nil, usererr.At(path, "not a run's record (a JSON object): %v", err)
	}
	for _, name := range sweepRecordFields {
		if _, ok := raw[name]; !ok {
			return nil, usererr.At(path, "has no field %q", name)
		}
	}
	if len(raw) != len(sweepRecordFields) {
		for name := range raw {
			if _, found := slices.BinarySearch(sweepRecordFields, name); !found {
				return nil, usererr.At(path, "has an unknown field %q", name)
			}
		}
	}
	var rec sweepRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return nil, usererr.At(path, "not a run's record: %v", err)
	}
	bad := func(format string, args ...any) (*sweepRecord, error) {
		return nil, usererr.At(path, format, args...)
	}
	switch {
	case rec.Format != sweepJournalFormat:
		return bad("format %d; this didnmf reads format %d", rec.Format, sweepJournalFormat)
	case rec.K != k || rec.Seed != seed || rec.Fold != fold:
		return bad("holds the run of K=%d seed %d fold %d, not the K=%d seed %d fold %d its name says", rec.K, rec.Seed, rec.Fold, k, seed, fold)
	case rec.M < 1 || rec.M > maxRecordDim || rec.N < 1 || rec.N > maxRecordDim:
		return bad("m %d and n %d: want features and samples in [1, %d]", rec.M, rec.N, maxRecordDim)
	case rec.Iterations < 0:
		return bad("iterations %d < 0", rec.Iterations)
	}
	switch kernels.StopReason(rec.StopReason) {
	case kernels.StopConverged, kernels.StopMaxIter, kernels.StopTimeLimit, kernels.StopStalled:
	default:
		return bad("stop_reason %q: want converged, max-iter, time-limit or stalled (a run that ended)", rec.StopReason)
	}
	for _, f := range []struct {
		name string
		v    jsonFloat
	}{{"residual", rec.Residual}, {"sq_norm_x", rec.SqNormX}, {"test_sq_norm", rec.TestSqNorm}, {"test_sse", rec.TestSSE}, {"seconds", rec.Seconds}} {
		if v := float64(f.v); !(v >= 0) || math.IsInf(v, 0) {
			return bad("%s %v: want a finite number >= 0", f.name, v)
		}
	}
	entries := int64(rec.M) * int64(rec.N)
	for _, c := range []struct {
		name string
		v    int64
	}{{"observed", rec.Observed}, {"missing", rec.Missing}, {"test_count", rec.TestCount}} {
		if c.v < 0 || c.v > entries {
			return bad("%s %d: want a count in [0, m x n = %d]", c.name, c.v, entries)
		}
	}
	if want := runFileBase(k, seed, fold) + ".basis.npy"; rec.Basis != want {
		return bad("basis %q: want %q", rec.Basis, want)
	}
	if len(rec.BasisSHA256) != 2*sha256.Size || strings.ToLower(rec.BasisSHA256) != rec.BasisSHA256 {
		return bad("basis_sha256 %q: want 64 lowercase hexadecimal digits", rec.BasisSHA256)
	}
	if _, err := hex.DecodeString(rec.BasisSHA256); err != nil {
		return bad("basis_sha256 %q: want 64 lowercase hexadecimal digits", rec.BasisSHA256)
	}
	return &rec, nil
}

// jsonFloat is a float64 in a record: a JSON number, or for NaN and the infinities the
// strings "NaN", "+Inf" and "-Inf" (JSON has no number for them). A number reads back to the
// same bits (Go writes the shortest form that does).
type jsonFloat float64

// MarshalJSON writes the number, or its string when it is not finite.
func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	case math.IsInf(v, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Inf"`), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

// UnmarshalJSON reads what MarshalJSON writes, and no other string.
func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case `"NaN"`:
		*f = jsonFloat(math.NaN())
		return nil
	case `"+Inf"`:
		*f = jsonFloat(math.Inf(1))
		return nil
	case `"-Inf"`:
		*f = jsonFloat(math.Inf(-1))
		return nil
	}
	if len(b) == 0 || b[0] != '-' && (b[0] < '0' || b[0] > '9') {
		return fmt.Errorf("%.40s is not a number (nor \"NaN\", \"+Inf\" or \"-Inf\")", b)
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("%.40s is not a float64", b)
	}
	*f = jsonFloat(v)
	return nil
}

// sweepFingerprint is journal.json: what makes the bits of the runs a journal holds, beside
// each run's rank, seed and fold (its name).
type sweepFingerprint struct {
	Format int `json:"format"`
	// Spec is the job's wire spec (messages.JobSpec, as jobs are shipped to nodes) field by
	// field, a message's fields as "stop.max_iter", values as text (enums by their word,
	// numbers in their shortest exact form, lists as JSON arrays): the job's spec with the
	// sweep's transform, its base test seed, and neither its rank and seed nor the fields of
	// where and how it runs (notInFingerprint). encoding/json writes the keys sorted.
	Spec map[string]string `json:"spec"`
	// Inputs are the job's inputs, in order.
	Inputs []sweepInputPrint `json:"inputs"`
	// Builds are the didnmf builds that recorded the journal's runs, in the order they first
	// did (buildinfo's ID). They are not compared: a journal goes on under another build, and
	// its caller says so (FileSweepJournal.Builds). Absent from journals written before it.
	Builds []string `json:"builds,omitempty"`
}

// sweepInputPrint is an input of a sweep's job in its fingerprint: its path as given, and
// when this process can stat it, its absolute path, size and modification time (of a
// directory, the sum of its files' sizes and the latest of its and their times).
type sweepInputPrint struct {
	Path    string `json:"path"`
	Stat    bool   `json:"stat"`
	Abs     string `json:"abs,omitempty"`
	Size    int64  `json:"size,omitempty"`
	ModTime string `json:"mod_time,omitempty"`
}

// notInFingerprint are the wire spec's fields a journal's runs do not depend on: each run's
// own (rank, seed; the inputs are compared apart), where and how the job runs (the same bits
// in one process, on nodes or on a cluster, through checkpoints and failures), and what a
// client fills in for a streamed input.
var notInFingerprint = map[string]bool{"inputs": true, "rank": true, "seed": true, "nodes": true, "ingest": true,
	"checkpoint_every": true, "detached": true, "out_shared": true, "overwrite": true, "samples": true, "features": true,
	"stored_entries": true, "natural_layout": true}

// fingerprintOf is the fingerprint of the runs of a sweep of j0 fitting tr.
func fingerprintOf(j0 *Job, tr SweepTransform) (sweepFingerprint, error) {
	spec := *j0.Spec
	spec.Transform = tr
	fp := sweepFingerprint{Format: sweepJournalFormat, Spec: map[string]string{}}
	if err := specFields("", spec.Wire().ProtoReflect(), fp.Spec); err != nil {
		return fp, err
	}
	for _, in := range j0.Spec.Inputs {
		fp.Inputs = append(fp.Inputs, inputPrint(in))
	}
	return fp, nil
}

// specFields puts m's fields into out, by name under prefix, but notInFingerprint's.
func specFields(prefix string, m protoreflect.Message, out map[string]string) error {
	fds := m.Descriptor().Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		name := prefix + string(fd.Name())
		if notInFingerprint[name] {
			continue
		}
		v := m.Get(fd)
		switch {
		case fd.IsMap():
			return fmt.Errorf("sweep journal: the job spec's field %s is a map, which its fingerprint does not write", name)
		case fd.IsList():
			l := v.List()
			vals := make([]string, l.Len())
			for i := range vals {
				vals[i] = scalarText(fd, l.Get(i))
			}
			b, err := json.Marshal(vals)
			if err != nil {
				return err
			}
			out[name] = string(b)
		case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
			if err := specFields(name+".", v.Message(), out); err != nil {
				return err
			}
		default:
			out[name] = scalarText(fd, v)
		}
	}
	return nil
}

// scalarText is a field's value as text: an enum's word (messages.Name), a number's shortest
// exact form.
func scalarText(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		if et, err := protoregistry.GlobalTypes.FindEnumByName(fd.Enum().FullName()); err == nil {
			return messages.Name(et.New(v.Enum()))
		}
		return strconv.Itoa(int(v.Enum()))
	case protoreflect.BoolKind:
		return strconv.FormatBool(v.Bool())
	case protoreflect.StringKind:
		return v.String()
	case protoreflect.BytesKind:
		return hex.EncodeToString(v.Bytes())
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind, protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return strconv.FormatInt(v.Int(), 10)
	default:
		return strconv.FormatUint(v.Uint(), 10)
	}
}

// inputPrint is an input's fingerprint: its path, and what stat says of it.
func inputPrint(path string) sweepInputPrint {
	p := sweepInputPrint{Path: path}
	st, err := os.Stat(path)
	if err != nil {
		return p // a synthetic: spec, or a path only the nodes see
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return p
	}
	p.Stat, p.Abs, p.Size = true, abs, st.Size()
	mod := st.ModTime()
	if st.IsDir() {
		// A 10x directory or a block store: its files (a file rewritten in place does not
		// change the directory's time).
		p.Size = 0
		entries, _ := os.ReadDir(path)
		for _, e := range entries {
			if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
				p.Size += fi.Size()
				if fi.ModTime().After(mod) {
					mod = fi.ModTime()
				}
			}
		}
	}
	p.ModTime = mod.UTC().Format(time.RFC3339Nano)
	return p
}

// removeJournal is the advice of an error about a journal dir holding n runs, a format
// suffix whose arguments are dir and n.
const removeJournal = "; remove %s (its %d run(s) are then lost) or use another {out} directory"

// readFingerprint reads journal.json at path, of the journal dir holding n runs, as hostile.
func readFingerprint(path, dir string, n int) (sweepFingerprint, error) {
	var fp sweepFingerprint
	data, err := readBounded(path, MaxSweepRecordBytes, "a journal's fingerprint")
	if errors.Is(err, fs.ErrNotExist) {
		return fp, usererr.Errorf("%s holds %d run(s) but no %s, which says which job they are of"+removeJournal, dir, n, sweepJournalFile, dir, n)
	}
	if err != nil {
		return fp, usererr.Errorf("%v"+removeJournal, err, dir, n)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fp); err != nil {
		return fp, usererr.At(path, "not a sweep journal's fingerprint: %v"+removeJournal, err, dir, n)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fp, usererr.At(path, "not a sweep journal's fingerprint: data after its JSON object"+removeJournal, dir, n)
	}
	if fp.Format != sweepJournalFormat {
		return fp, usererr.At(path, "format %d; this didnmf reads format %d"+removeJournal, fp.Format, sweepJournalFormat, dir, n)
	}
	return fp, nil
}

// fingerprintField is the job spec's field (usererr's name, which the CLI shows as its flag)
// of a fingerprint's key, "" when none sets it alone.
func fingerprintField(key string) string {
	switch {
	case strings.HasPrefix(key, "accel_"):
		return "accel"
	case key == "beta":
		return "loss"
	case key == "fan_in":
		return "fan-in"
	case key == "stop.time_limit_seconds":
		return "time_limit"
	case key == "stop.stall_window":
		return ""
	}
	return strings.TrimPrefix(key, "stop.")
}

// accelOfFingerprint reads the accel setting of a fingerprint's spec keys (false when they do
// not make one: a hostile or older journal.json, whose keys compare one by one instead).
func accelOfFingerprint(spec map[string]string) (kernels.Accel, bool) {
	c, err1 := strconv.Atoi(spec["accel_c_sweeps"])
	b, err2 := strconv.Atoi(spec["accel_b_sweeps"])
	eps, err3 := strconv.ParseFloat(spec["accel_eps"], 64)
	x, err4 := strconv.ParseBool(spec["accel_extrapolate"])
	if err := errors.Join(err1, err2, err3, err4); err != nil || c < 0 || c > kernels.MaxAccelSweeps || b < 0 || b > kernels.MaxAccelSweeps {
		return kernels.Accel{}, false
	}
	return kernels.Accel{CSweeps: c, BSweeps: b, Eps: eps, Extrapolate: x}, true
}

// compare returns nil when was, the fingerprint journal dir holds, is fp, and otherwise an
// error that names the first thing that differs, its value then and now.
func (fp sweepFingerprint) compare(was sweepFingerprint, dir string) error {
	other := func(format string, args ...any) error {
		// format names fields as {field}; the values, which come from a file, are arguments
		// (through shownValue or %q: an escape sequence in a hostile journal.json does not
		// reach the terminal).
		return usererr.Errorf("%s holds runs of another job: "+format+"; use another {out} directory or remove %s",
			append(append([]any{dir}, args...), dir)...)
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range fp.Spec {
			if !yield(k) {
				return
			}
		}
		for k := range was.Spec {
			if _, ok := fp.Spec[k]; !ok && !yield(k) {
				return
			}
		}
	})
	for _, key := range keys {
		then, hadThen := was.Spec[key]
		now, hasNow := fp.Spec[key]
		if hadThen && hasNow && then == now {
			continue
		}
		if !hasNow { // a key of the file's, not a field name of ours
			return other("its %q was %q, which this didnmf's jobs do not have", key, then)
		}
		if !hadThen {
			then = "not set"
		}
		if strings.HasPrefix(key, "accel_") {
			// The setting whole (3,20,0.1,x), not the one of its four keys that differs.
			if a, ok := accelOfFingerprint(was.Spec); ok {
				if b, ok := accelOfFingerprint(fp.Spec); ok {
					return other("its {accel} was %s, this one's is %s", a, b)
				}
			}
		}
		if f := fingerprintField(key); f != "" {
			return other("its {"+f+"} was %s, this one's is %s", shownValue(then), shownValue(now))
		}
		return other("its %s was %s, this one's is %s", shownValue(strings.ReplaceAll(key, "_", " ")), shownValue(then), shownValue(now))
	}
	if len(was.Inputs) != len(fp.Inputs) {
		return other("it had %d {input}(s), this one has %d", len(was.Inputs), len(fp.Inputs))
	}
	for i, now := range fp.Inputs {
		then := was.Inputs[i]
		samePath := then.Path == now.Path
		if then.Stat && now.Stat {
			samePath = then.Abs == now.Abs
		}
		switch {
		case !samePath:
			return other("its {input} was %s, this one's is %s", inputName(then), inputName(now))
		case then.Stat != now.Stat:
			return other("its {input} %s could be read here then (%t) and now (%t)", shownValue(now.Path), then.Stat, now.Stat)
		case then.Size != now.Size || then.ModTime != now.ModTime:
			return other("its {input} %s was %d bytes modified %s, it is now %d bytes modified %s", shownValue(now.Path), then.Size, shownValue(then.ModTime), now.Size, now.ModTime)
		}
	}
	return nil
}

// shownValue is s as a message shows a value read from a file: as it is when every rune of it
// is printable (spaces included), else Go-quoted, escapes and all.
func shownValue(s string) string {
	if q := strconv.Quote(s); q[1:len(q)-1] == s {
		return s
	}
	return strconv.Quote(s)
}

// inputName names an input of a fingerprint: its path, and its absolute path when that says
// more.
func inputName(p sweepInputPrint) string {
	if p.Stat && p.Abs != p.Path {
		return fmt.Sprintf("%s (%s)", shownValue(p.Path), shownValue(p.Abs))
	}
	return shownValue(p.Path)
}

// maxIterKey is the fingerprint's key of the iteration cap.
const maxIterKey = "stop.max_iter"

// raisedCap tells whether fp's iteration cap is higher than was's, both positive (0 is no
// cap: not a higher one), and gives was's.
func raisedCap(was, fp sweepFingerprint) (then int, ok bool) {
	t, err1 := strconv.Atoi(was.Spec[maxIterKey])
	n, err2 := strconv.Atoi(fp.Spec[maxIterKey])
	return t, err1 == nil && err2 == nil && t > 0 && n > t
}

// RaisedFrom is the iteration cap of the runs the journal held when it was opened, when the
// job's is higher (else 0): the runs that hit it run again (Done leaves them out).
func (j *FileSweepJournal) RaisedFrom() int { return j.raisedFrom }
