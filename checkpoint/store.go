package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/didnmf/didnmf/internal/atomicfile"
)

const (
	// subdir is the directory of a Store's checkpoints under its data directory.
	subdir = "checkpoints"
	// filePrefix and fileSuffix surround the iteration number in a checkpoint's file name.
	filePrefix = "iter-"
	fileSuffix = ".ckpt"
)

// Kind tells whose copy a file is: the shard's own, or a buddy copy held for another node.
type Kind string

const (
	// Own is the kind of a shard's own checkpoints, kept on its node.
	Own Kind = "own"
	// Buddy is the kind of the copies a node keeps for a shard of another node.
	Buddy Kind = "buddy"
)

// Store keeps checkpoints under a directory (a node's data dir), in its subdirectory
// "checkpoints" (see the package documentation for the layout).
//
// A Store is safe for concurrent use. Writes of different checkpoints may run concurrently;
// RemoveJob must not run concurrently with other calls for the same job.
type Store struct {
	dir  string // the data directory
	root string // dir/checkpoints

	mu    sync.Mutex
	limit int64 // quota in bytes, 0: none
	used  int64 // bytes of files under root, counting writes in progress
}

// Open opens the store in the data directory dir, creating dir/checkpoints if needed.
// Leftover temporary files of interrupted writes are ignored (they do count against the
// quota, see [Store.SetLimit]).
func Open(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("checkpoint: open: empty directory name")
	}
	dir = filepath.Clean(dir)
	root := filepath.Join(dir, subdir)
	if err := ensureDir(root); err != nil {
		return nil, fmt.Errorf("checkpoint: open %s: %w", root, err)
	}
	used, err := treeSize(root)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: open %s: %w", root, err)
	}
	return &Store{dir: dir, root: root, used: used}, nil
}

// Dir returns the data directory the store was opened on (cleaned); the checkpoints are in
// its subdirectory "checkpoints".
func (s *Store) Dir() string { return s.dir }

// SetLimit sets a quota on the disk space of the store's checkpoints: a write fails with an
// error wrapping syscall.ENOSPC ("no space left on device"), as on a full disk, once the total
// size of the files under Dir()/checkpoints would exceed bytes. A node can use it to cap the
// disk space its checkpoints take; tests can use it to simulate a full disk. A failed write
// leaves nothing behind, as on a real full disk.
//
// The total counts the files present when the store was opened, plus the bytes written by
// this Store, minus those of the files it removed or replaced (Prune, RemoveJob, a rewrite
// of a checkpoint). Files written or removed by others are not seen. A bytes <= 0 removes the
// quota (the default). Lowering the quota below the current total removes nothing: later
// writes fail until pruning frees enough space.
func (s *Store) SetLimit(bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit = max(bytes, 0)
}

// usage returns the total size the quota counts.
func (s *Store) usage() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// reserve counts n more bytes against the quota. If they do not fit, it counts and returns
// only those that do, with an error wrapping syscall.ENOSPC.
func (s *Store) reserve(n int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limit > 0 && s.used+n > s.limit {
		free := max(s.limit-s.used, 0)
		err := fmt.Errorf("%w (checkpoint quota of %d bytes: %d in use, %d more needed)", syscall.ENOSPC, s.limit, s.used, n)
		s.used += free
		return free, err
	}
	s.used += n
	return n, nil
}

// release uncounts n bytes.
func (s *Store) release(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used = max(s.used-n, 0)
}

// checkKind returns an error unless kind is Own or Buddy.
func checkKind(kind Kind) error {
	if kind != Own && kind != Buddy {
		return fmt.Errorf("checkpoint: invalid kind %q: want %q or %q", kind, Own, Buddy)
	}
	return nil
}

// checkShard returns an error for an invalid kind, job or shard.
func checkShard(kind Kind, job string, shard int) error {
	if err := checkKind(kind); err != nil {
		return err
	}
	if err := checkJob(job); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if shard < 0 {
		return fmt.Errorf("checkpoint: invalid shard %d", shard)
	}
	return nil
}

// checkKey returns an error for an invalid kind, job, shard or iteration.
func checkKey(kind Kind, job string, shard int, iteration int64) error {
	if err := checkShard(kind, job, shard); err != nil {
		return err
	}
	if iteration < 0 {
		return fmt.Errorf("checkpoint: invalid iteration %d", iteration)
	}
	return nil
}

// shardDir returns the directory of the checkpoints of a shard (arguments checked).
func (s *Store) shardDir(kind Kind, job string, shard int) string {
	return filepath.Join(s.root, job, string(kind), "shard-"+strconv.Itoa(shard))
}

// Path returns the file a checkpoint is (or would be) kept in, for operators and tests.
func (s *Store) Path(kind Kind, job string, shard int, iteration int64) (string, error) {
	if err := checkKey(kind, job, shard, iteration); err != nil {
		return "", err
	}
	return filepath.Join(s.shardDir(kind, job, shard), fileName(iteration)), nil
}

// fileName returns the file name of the checkpoint at iteration.
func fileName(iteration int64) string {
	return fmt.Sprintf("%s%012d%s", filePrefix, iteration, fileSuffix)
}

// parseFileName returns the iteration of a checkpoint file name, and false if name is not
// one (a temporary file, say).
func parseFileName(name string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, filePrefix)
	if !ok {
		return 0, false
	}
	if digits, ok = strings.CutSuffix(digits, fileSuffix); !ok || len(digits) < 12 {
		return 0, false
	}
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	it, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || fileName(it) != name {
		return 0, false
	}
	return it, true
}

// Write stores r as the checkpoint of kind of shard r.Shard of job r.Job at r.Iteration,
// atomically and durably (see the package documentation), replacing any there. On any error
// (an invalid record, a full disk, a quota exceeded) nothing is left behind but an older
// checkpoint at the same place, and the error names the path and the cause; a full disk or
// quota gives an error wrapping syscall.ENOSPC.
func (s *Store) Write(kind Kind, r *Record) error {
	if err := checkKind(kind); err != nil {
		return err
	}
	data, err := r.MarshalBinary()
	if err != nil {
		return err
	}
	return s.write(kind, r.Job, r.Shard, r.Iteration, data)
}

// WriteBytes is Write for a record already marshaled (a buddy receives bytes over the wire).
// It first verifies data with [Unmarshal], returning an error wrapping [ErrCorrupt] if it
// does not pass, and checks that it is the checkpoint of shard of job at iteration; it
// writes nothing otherwise.
func (s *Store) WriteBytes(kind Kind, job string, shard int, iteration int64, data []byte) error {
	if err := checkKey(kind, job, shard, iteration); err != nil {
		return err
	}
	r, err := Unmarshal(data)
	if err != nil {
		return fmt.Errorf("%w; refusing to store it as job %s shard %d iteration %d", err, job, shard, iteration)
	}
	if r.Job != job || r.Shard != shard || r.Iteration != iteration {
		return fmt.Errorf("checkpoint: data holds job %s shard %d iteration %d, not job %s shard %d iteration %d",
			r.Job, r.Shard, r.Iteration, job, shard, iteration)
	}
	return s.write(kind, job, shard, iteration, data)
}

// write stores data (a verified checkpoint) atomically and durably (arguments checked).
func (s *Store) write(kind Kind, job string, shard int, iteration int64, data []byte) error {
	dir := s.shardDir(kind, job, shard)
	final := filepath.Join(dir, fileName(iteration))
	fail := func(err error) error { return fmt.Errorf("checkpoint: write %s: %w", final, err) }
	if err := ensureDir(dir); err != nil {
		return fail(err)
	}
	f, err := atomicfile.Create(final, 0o600)
	if err != nil {
		return fail(err)
	}
	granted, quotaErr := s.reserve(int64(len(data)))
	abort := func(err error) error {
		f.Close()
		s.release(granted)
		return fail(err)
	}
	if _, err := f.Write(data[:granted]); err != nil {
		return abort(err)
	}
	if quotaErr != nil {
		return abort(&os.PathError{Op: "write", Path: final, Err: quotaErr})
	}
	if err := f.Sync(); err != nil {
		return abort(err)
	}
	// Rename under the lock, so that the size of a replaced file is uncounted once.
	s.mu.Lock()
	old, statErr := os.Lstat(final)
	err = f.Rename()
	if err == nil && statErr == nil && old.Mode().IsRegular() {
		s.used = max(s.used-old.Size(), 0)
	}
	s.mu.Unlock()
	if err != nil {
		return abort(err)
	}
	// The checkpoint is complete and synced; only its name may not be durable yet.
	if err := atomicfile.SyncDir(dir); err != nil {
		return fail(err)
	}
	return nil
}

// Read reads and verifies the checkpoint of kind of shard of job at iteration. A missing
// checkpoint gives an error wrapping fs.ErrNotExist; one that does not pass its checks, or
// holds another job, shard or iteration than its name says, an error wrapping [ErrCorrupt].
func (s *Store) Read(kind Kind, job string, shard int, iteration int64) (*Record, error) {
	_, r, err := s.read(kind, job, shard, iteration)
	return r, err
}

// ReadBytes is Read returning the verified raw bytes of the checkpoint (to ship to another
// node).
func (s *Store) ReadBytes(kind Kind, job string, shard int, iteration int64) ([]byte, error) {
	data, _, err := s.read(kind, job, shard, iteration)
	return data, err
}

// read reads, verifies and decodes a checkpoint.
func (s *Store) read(kind Kind, job string, shard int, iteration int64) ([]byte, *Record, error) {
	if err := checkKey(kind, job, shard, iteration); err != nil {
		return nil, nil, err
	}
	path := filepath.Join(s.shardDir(kind, job, shard), fileName(iteration))
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: read: %w", err)
	}
	r, err := Unmarshal(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%w, in %s", err, path)
	}
	if r.Job != job || r.Shard != shard || r.Iteration != iteration {
		return nil, nil, corruptf("%s holds job %s shard %d iteration %d", path, r.Job, r.Shard, r.Iteration)
	}
	return data, r, nil
}

// Iterations returns the iterations of the checkpoints of kind of shard of job, in ascending
// order, from the file names (the files are not read); none gives an empty list. Temporary
// files and other names are ignored.
func (s *Store) Iterations(kind Kind, job string, shard int) ([]int64, error) {
	if err := checkShard(kind, job, shard); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(s.shardDir(kind, job, shard))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list: %w", err)
	}
	var its []int64
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if it, ok := parseFileName(e.Name()); ok {
			its = append(its, it)
		}
	}
	slices.Sort(its)
	return its, nil
}

// Prune removes the checkpoints of kind of shard of job at iterations < keepFrom.
func (s *Store) Prune(kind Kind, job string, shard int, keepFrom int64) error {
	its, err := s.Iterations(kind, job, shard)
	if err != nil {
		return err
	}
	n := 0
	for n < len(its) && its[n] < keepFrom {
		n++
	}
	return s.remove(kind, job, shard, its[:n])
}

// KeepNewest removes the checkpoints of kind of shard of job at iterations above after,
// except the newest keep of them: checkpoints that were never committed (a stalled commit)
// and never will be, now that newer ones exist.
func (s *Store) KeepNewest(kind Kind, job string, shard int, after int64, keep int) error {
	its, err := s.Iterations(kind, job, shard)
	if err != nil {
		return err
	}
	var above []int64
	for _, it := range its {
		if it > after {
			above = append(above, it)
		}
	}
	if len(above) <= keep {
		return nil
	}
	return s.remove(kind, job, shard, above[:len(above)-keep])
}

// remove removes the checkpoints of kind of shard of job at the given iterations.
func (s *Store) remove(kind Kind, job string, shard int, its []int64) error {
	dir := s.shardDir(kind, job, shard)
	var errs []error
	removed := false
	for _, it := range its {
		path := filepath.Join(dir, fileName(it))
		s.mu.Lock()
		fi, statErr := os.Lstat(path)
		err := os.Remove(path)
		if err == nil && statErr == nil {
			s.used = max(s.used-fi.Size(), 0)
		}
		s.mu.Unlock()
		switch {
		case err == nil:
			removed = true
		case !errors.Is(err, fs.ErrNotExist):
			errs = append(errs, err)
		}
	}
	if removed {
		if err := atomicfile.SyncDir(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("checkpoint: prune: %w", errors.Join(errs...))
	}
	return nil
}

// Jobs returns the jobs that have checkpoints in the store, sorted.
func (s *Store) Jobs() ([]string, error) {
	entries, err := os.ReadDir(s.root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list jobs: %w", err)
	}
	var jobs []string
	for _, e := range entries {
		if e.IsDir() && checkJob(e.Name()) == nil {
			jobs = append(jobs, e.Name())
		}
	}
	slices.Sort(jobs)
	return jobs, nil
}

// RemoveJob removes everything of job: the checkpoints of all its shards, of both kinds.
// A job with nothing stored is not an error.
func (s *Store) RemoveJob(job string) error {
	if err := checkJob(job); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	path := filepath.Join(s.root, job)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	before, err := treeSize(path)
	if err != nil {
		return fmt.Errorf("checkpoint: remove job: %w", err)
	}
	err = os.RemoveAll(path)
	after, _ := treeSize(path)
	s.release(before - after)
	if err != nil {
		return fmt.Errorf("checkpoint: remove job: %w", err)
	}
	if err := atomicfile.SyncDir(s.root); err != nil {
		return fmt.Errorf("checkpoint: remove job: %w", err)
	}
	return nil
}

// treeSize returns the total size of the regular files under path; a missing path has
// size 0.
func treeSize(path string) (int64, error) {
	var total int64
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		total += fi.Size()
		return nil
	})
	return total, err
}

// ensureDir creates the directory path and its missing parents, syncing the parent of each
// directory it creates so that the new entries are durable.
func ensureDir(path string) error {
	fi, err := os.Stat(path)
	if err == nil {
		if fi.IsDir() {
			return nil
		}
		return &os.PathError{Op: "mkdir", Path: path, Err: syscall.ENOTDIR}
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(path)
	if parent != path {
		if err := ensureDir(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		// Lost a race with another creator.
		if fi, e := os.Stat(path); e == nil && fi.IsDir() {
			return nil
		}
		return err
	}
	return atomicfile.SyncDir(parent)
}
