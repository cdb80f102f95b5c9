package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/didnmf/didnmf/internal/atomicfile"
)

// openStore opens a store in a fresh temporary directory.
func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// ckptPath returns the path of a checkpoint of s.
func ckptPath(s *Store, kind Kind, job string, shard int, iteration int64) string {
	return filepath.Join(s.Dir(), "checkpoints", job, string(kind), fmt.Sprintf("shard-%d", shard), fmt.Sprintf("iter-%012d.ckpt", iteration))
}

// dirNames returns the names in dir, sorted; a missing dir has none.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// mustIterations returns the iterations of a shard or fails the test.
func mustIterations(t *testing.T, s *Store, kind Kind, job string, shard int) []int64 {
	t.Helper()
	its, err := s.Iterations(kind, job, shard)
	if err != nil {
		t.Fatalf("Iterations(%s, %s, %d): %v", kind, job, shard, err)
	}
	return its
}

func TestOpen(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		dir     string
		wantErr bool
	}{
		{"new nested dir", filepath.Join(base, "a", "b", "c"), false},
		{"existing dir", base, false},
		{"unclean name", base + "/x/../y/", false},
		{"empty name", "", true},
		{"a file", file, true},
		{"under a file", filepath.Join(file, "sub"), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(tc.dir)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("Open(%q) succeeded", tc.dir)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open(%q): %v", tc.dir, err)
			}
			if s.Dir() != filepath.Clean(tc.dir) {
				t.Errorf("Dir() = %q, want %q", s.Dir(), filepath.Clean(tc.dir))
			}
			if fi, err := os.Stat(filepath.Join(tc.dir, "checkpoints")); err != nil || !fi.IsDir() {
				t.Errorf("no checkpoints directory: %v", err)
			}
			// Opening again is fine.
			if _, err := Open(tc.dir); err != nil {
				t.Errorf("second Open: %v", err)
			}
		})
	}
}

func TestWriteRead(t *testing.T) {
	s := openStore(t)
	tests := []struct {
		kind Kind
		rec  *Record
	}{
		{Own, testRecord("job1", 0, 0)},
		{Own, testRecord("job1", 0, 5)},
		{Own, testRecord("job1", 1, 5)},
		{Buddy, testRecord("job1", 3, 5)},
		{Buddy, &Record{Job: "job_2", Shard: 0, Shards: 1, Iteration: 999999999999, B: specialsFn(), State: [][]float64{}}},
		{Own, &Record{Job: "big", Shard: 1, Shards: 2, Iteration: 1e12, B: seq(1<<16, 1), C: seq(1<<15, 2)}},
	}
	for _, tc := range tests {
		name := fmt.Sprintf("%s/%s/%d/%d", tc.kind, tc.rec.Job, tc.rec.Shard, tc.rec.Iteration)
		t.Run(name, func(t *testing.T) {
			if err := s.Write(tc.kind, tc.rec); err != nil {
				t.Fatalf("Write: %v", err)
			}
			path := ckptPath(s, tc.kind, tc.rec.Job, tc.rec.Shard, tc.rec.Iteration)
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("no file at the documented path: %v", err)
			}
			got, err := s.Read(tc.kind, tc.rec.Job, tc.rec.Shard, tc.rec.Iteration)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if !recordsEqual(got, tc.rec) {
				t.Fatalf("Read = %+v, want %+v", got, tc.rec)
			}
			raw, err := s.ReadBytes(tc.kind, tc.rec.Job, tc.rec.Shard, tc.rec.Iteration)
			if err != nil {
				t.Fatalf("ReadBytes: %v", err)
			}
			if !bytes.Equal(raw, mustMarshal(t, tc.rec)) {
				t.Fatal("ReadBytes differs from MarshalBinary")
			}
			if names := dirNames(t, filepath.Dir(path)); slices.ContainsFunc(names, atomicfile.IsTemp) {
				t.Fatalf("temporary file left: %v", names)
			}
		})
	}
	// The other kind of the same shard is separate.
	if _, err := s.Read(Buddy, "job1", 0, 5); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read of a missing checkpoint: %v, want fs.ErrNotExist", err)
	}
	// Rewriting replaces.
	r := testRecord("job1", 0, 5)
	r.Objective = 1
	if err := s.Write(Own, r); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Read(Own, "job1", 0, 5); err != nil || got.Objective != 1 {
		t.Fatalf("after a rewrite: %+v, %v", got, err)
	}
}

func TestIterations(t *testing.T) {
	s := openStore(t)
	for _, it := range []int64{5, 1, 1_000_000_000_000, 0, 42} {
		if err := s.Write(Own, testRecord("j", 2, it)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Write(Buddy, testRecord("j", 2, 7)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(ckptPath(s, Own, "j", 2, 0))
	for _, junk := range []string{".tmp-12345", ".tmp-iter-000000000003.ckpt", "iter-5.ckpt", "iter-000000000007.ckpt.bak",
		"iter-00000000000x.ckpt", "iter-+00000000009.ckpt", "iter-0000000000011.ckpt", "ITER-000000000012.ckpt", "notes"} {
		if err := os.WriteFile(filepath.Join(dir, junk), []byte("junk"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "iter-000000000009.ckpt"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		kind  Kind
		job   string
		shard int
		want  []int64
	}{
		{Own, "j", 2, []int64{0, 1, 5, 42, 1_000_000_000_000}},
		{Buddy, "j", 2, []int64{7}},
		{Own, "j", 3, nil},
		{Buddy, "j", 0, nil},
		{Own, "other", 2, nil},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%s/%d", tc.kind, tc.job, tc.shard), func(t *testing.T) {
			if got := mustIterations(t, s, tc.kind, tc.job, tc.shard); !slices.Equal(got, tc.want) {
				t.Fatalf("Iterations = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPrune(t *testing.T) {
	all := []int64{1, 2, 3, 5, 8}
	tests := []struct {
		name     string
		keepFrom int64
		want     []int64
	}{
		{"nothing", 1, all},
		{"negative", -10, all},
		{"below the first", 0, all},
		{"some", 3, []int64{3, 5, 8}},
		{"between", 4, []int64{5, 8}},
		{"all but the last", 8, []int64{8}},
		{"everything", 100, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t)
			for _, it := range all {
				for _, kind := range []Kind{Own, Buddy} {
					if err := s.Write(kind, testRecord("p", 0, it)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := s.Prune(Own, "p", 0, tc.keepFrom); err != nil {
				t.Fatalf("Prune: %v", err)
			}
			if got := mustIterations(t, s, Own, "p", 0); !slices.Equal(got, tc.want) {
				t.Fatalf("after Prune(%d): %v, want %v", tc.keepFrom, got, tc.want)
			}
			for _, it := range tc.want {
				if _, err := s.Read(Own, "p", 0, it); err != nil {
					t.Fatalf("kept checkpoint %d: %v", it, err)
				}
			}
			if got := mustIterations(t, s, Buddy, "p", 0); !slices.Equal(got, all) {
				t.Fatalf("Prune of own touched buddy copies: %v", got)
			}
			size := int64(len(mustMarshal(t, testRecord("p", 0, 1))))
			if got, want := s.usage(), size*int64(len(all)+len(tc.want)); got != want {
				t.Fatalf("usage %d after Prune, want %d", got, want)
			}
		})
	}
	// Pruning a shard with nothing stored is fine.
	if err := openStore(t).Prune(Own, "none", 0, 10); err != nil {
		t.Fatalf("Prune of nothing: %v", err)
	}
}

func TestRemoveJob(t *testing.T) {
	s := openStore(t)
	for _, job := range []string{"a", "b"} {
		for shard := range 2 {
			for _, kind := range []Kind{Own, Buddy} {
				for it := range int64(3) {
					if err := s.Write(kind, testRecord(job, shard, it)); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	before := s.usage()
	if err := s.RemoveJob("a"); err != nil {
		t.Fatalf("RemoveJob: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), "checkpoints", "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("job directory still there: %v", err)
	}
	if got := s.usage(); got*2 != before {
		t.Fatalf("usage %d after removing half of %d", got, before)
	}
	tests := []struct {
		job  string
		want []int64
	}{
		{"a", nil},
		{"b", []int64{0, 1, 2}},
	}
	for _, tc := range tests {
		for shard := range 2 {
			for _, kind := range []Kind{Own, Buddy} {
				if got := mustIterations(t, s, kind, tc.job, shard); !slices.Equal(got, tc.want) {
					t.Fatalf("%s %s shard %d: %v, want %v", tc.job, kind, shard, got, tc.want)
				}
			}
		}
	}
	if _, err := s.Read(Own, "b", 1, 2); err != nil {
		t.Fatalf("other job damaged: %v", err)
	}
	for _, job := range []string{"a", "never"} {
		if err := s.RemoveJob(job); err != nil {
			t.Fatalf("RemoveJob(%q) of nothing: %v", job, err)
		}
	}
	// The job can be written again.
	if err := s.Write(Own, testRecord("a", 0, 9)); err != nil {
		t.Fatal(err)
	}
}

func TestReadCorrupt(t *testing.T) {
	other := mustMarshal(t, testRecord("c", 0, 2))
	otherShard := mustMarshal(t, testRecord("c", 1, 1))
	otherJob := mustMarshal(t, testRecord("d", 0, 1))
	tests := []struct {
		name   string
		damage func([]byte) []byte
	}{
		{"flipped byte", func(b []byte) []byte { b[len(b)/2] ^= 0x20; return b }},
		{"flipped checksum", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-7] }},
		{"empty", func([]byte) []byte { return nil }},
		{"garbage appended", func(b []byte) []byte { return append(b, "xyz"...) }},
		{"other iteration", func([]byte) []byte { return other }},
		{"other shard", func([]byte) []byte { return otherShard }},
		{"other job", func([]byte) []byte { return otherJob }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t)
			if err := s.Write(Own, testRecord("c", 0, 1)); err != nil {
				t.Fatal(err)
			}
			path := ckptPath(s, Own, "c", 0, 1)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tc.damage(data), 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := s.Read(Own, "c", 0, 1)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Read = %+v, %v; want ErrCorrupt", r, err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			if b, err := s.ReadBytes(Own, "c", 0, 1); !errors.Is(err, ErrCorrupt) || b != nil {
				t.Fatalf("ReadBytes = %d bytes, %v; want ErrCorrupt", len(b), err)
			}
			// Still listed (from its name): the caller falls back to another checkpoint.
			if got := mustIterations(t, s, Own, "c", 0); !slices.Equal(got, []int64{1}) {
				t.Fatalf("Iterations = %v", got)
			}
		})
	}
}

func TestWriteBytes(t *testing.T) {
	good := mustMarshal(t, testRecord("w", 1, 4))
	flipped := bytes.Clone(good)
	flipped[20] ^= 8
	tests := []struct {
		name        string
		job         string
		shard       int
		iteration   int64
		data        []byte
		wantErr     string // "" for success
		wantCorrupt bool
	}{
		{"matching", "w", 1, 4, good, "", false},
		{"other job", "x", 1, 4, good, "holds job w shard 1 iteration 4, not job x shard 1 iteration 4", false},
		{"other shard", "w", 0, 4, good, "not job w shard 0", false},
		{"other iteration", "w", 1, 5, good, "iteration 4, not job w shard 1 iteration 5", false},
		{"flipped byte", "w", 1, 4, flipped, "checksum mismatch", true},
		{"truncated", "w", 1, 4, good[:len(good)-1], "truncated", true},
		{"empty", "w", 1, 4, nil, "truncated", true},
		{"not a checkpoint", "w", 1, 4, []byte("hello, world, this is not a checkpoint"), "bad magic", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t)
			err := s.WriteBytes(Buddy, tc.job, tc.shard, tc.iteration, tc.data)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("WriteBytes: %v", err)
				}
				got, err := s.ReadBytes(Buddy, tc.job, tc.shard, tc.iteration)
				if err != nil || !bytes.Equal(got, tc.data) {
					t.Fatalf("ReadBytes after WriteBytes: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("WriteBytes: %v, want an error containing %q", err, tc.wantErr)
			}
			if errors.Is(err, ErrCorrupt) != tc.wantCorrupt {
				t.Errorf("errors.Is(%q, ErrCorrupt) = %v, want %v", err, !tc.wantCorrupt, tc.wantCorrupt)
			}
			if names := dirNames(t, filepath.Join(s.Dir(), "checkpoints", tc.job, "buddy", fmt.Sprintf("shard-%d", tc.shard))); len(names) > 0 {
				t.Fatalf("rejected data left files: %v", names)
			}
			if s.usage() != 0 {
				t.Fatalf("usage %d after a rejected write", s.usage())
			}
		})
	}
}

func TestInvalidArguments(t *testing.T) {
	s := openStore(t)
	data := mustMarshal(t, testRecord("ok", 0, 1))
	// Each call uses the given kind, job, shard and iteration.
	calls := map[string]func(Kind, string, int, int64) error{
		"Write": func(k Kind, j string, sh int, it int64) error {
			r := testRecord("ok", 0, 1)
			r.Job, r.Shard, r.Iteration = j, sh, it
			if sh >= 0 {
				r.Shards = sh + 1
			}
			return s.Write(k, r)
		},
		"WriteBytes": func(k Kind, j string, sh int, it int64) error { return s.WriteBytes(k, j, sh, it, data) },
		"Read":       func(k Kind, j string, sh int, it int64) error { _, err := s.Read(k, j, sh, it); return err },
		"ReadBytes":  func(k Kind, j string, sh int, it int64) error { _, err := s.ReadBytes(k, j, sh, it); return err },
		"Iterations": func(k Kind, j string, sh int, it int64) error {
			if it < 0 {
				return errors.New("invalid iteration (not an argument)")
			}
			_, err := s.Iterations(k, j, sh)
			return err
		},
		"Prune": func(k Kind, j string, sh int, it int64) error {
			if it < 0 {
				return errors.New("invalid iteration (not an argument)")
			}
			return s.Prune(k, j, sh, 10)
		},
	}
	tests := []struct {
		name      string
		kind      Kind
		job       string
		shard     int
		iteration int64
		want      string
	}{
		{"empty job", Own, "", 0, 1, "invalid job name"},
		{"dot dot", Own, "..", 0, 1, "invalid job name"},
		{"dot", Own, ".", 0, 1, "invalid job name"},
		{"traversal", Own, "../../etc", 0, 1, "invalid job name"},
		{"slash", Buddy, "a/b", 0, 1, "invalid job name"},
		{"backslash", Own, `a\b`, 0, 1, "invalid job name"},
		{"space", Own, "a b", 0, 1, "invalid job name"},
		{"NUL", Own, "a\x00", 0, 1, "invalid job name"},
		{"non-ASCII", Own, "jöb", 0, 1, "invalid job name"},
		{"65 characters", Own, strings.Repeat("a", 65), 0, 1, "invalid job name"},
		{"empty kind", "", "ok", 0, 1, "invalid kind"},
		{"unknown kind", "theirs", "ok", 0, 1, "invalid kind"},
		{"kind with slash", "own/../buddy", "ok", 0, 1, "invalid kind"},
		{"negative shard", Own, "ok", -1, 1, "invalid shard"},
		{"negative iteration", Own, "ok", 0, -1, "invalid iteration"},
	}
	for _, tc := range tests {
		for name, call := range calls {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				err := call(tc.kind, tc.job, tc.shard, tc.iteration)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%s: %v, want an error containing %q", name, err, tc.want)
				}
			})
		}
		if tc.kind == Own && tc.shard >= 0 && tc.iteration >= 0 {
			if err := s.RemoveJob(tc.job); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("RemoveJob(%q): %v, want an error containing %q", tc.job, err, tc.want)
			}
		}
	}
	// Nothing was created outside the store, or in it.
	if names := dirNames(t, filepath.Join(s.Dir(), "checkpoints")); len(names) > 0 {
		t.Fatalf("invalid arguments created %v", names)
	}
	if names := dirNames(t, s.Dir()); !slices.Equal(names, []string{"checkpoints"}) {
		t.Fatalf("invalid arguments created %v in the data directory", names)
	}
	// The longest valid name and every allowed character work.
	for _, job := range []string{strings.Repeat("Z", 64), "azAZ09_-", "-", "_"} {
		if err := s.Write(Own, testRecord(job, 0, 1)); err != nil {
			t.Fatalf("valid job %q: %v", job, err)
		}
	}
}

func TestQuota(t *testing.T) {
	size := int64(len(mustMarshal(t, testRecord("q", 0, 1))))
	const writes = 5
	tests := []struct {
		name  string
		limit int64
		fit   int // how many of the writes succeed
	}{
		{"no limit", 0, writes},
		{"negative is no limit", -1, writes},
		{"room for all exactly", writes * size, writes},
		{"room for three", 3*size + size/2, 3},
		{"one byte short of three", 3*size - 1, 2},
		{"room for one", size, 1},
		{"room for none", 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t)
			s.SetLimit(tc.limit)
			dir := filepath.Dir(ckptPath(s, Own, "q", 0, 0))
			for it := range int64(writes) {
				err := s.Write(Own, testRecord("q", 0, it))
				if int(it) < tc.fit {
					if err != nil {
						t.Fatalf("write %d under the quota: %v", it, err)
					}
					continue
				}
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("write %d over the quota: %v, want ENOSPC", it, err)
				}
				path := ckptPath(s, Own, "q", 0, it)
				if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "no space left on device") {
					t.Fatalf("error %q does not name the path and the cause", msg)
				}
				if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("failed write left its final file: %v", err)
				}
			}
			var want []string
			var wantIts []int64
			for it := range int64(tc.fit) {
				want = append(want, fmt.Sprintf("iter-%012d.ckpt", it))
				wantIts = append(wantIts, it)
			}
			if got := dirNames(t, dir); !slices.Equal(got, want) {
				t.Fatalf("files %v, want %v (no temporary files)", got, want)
			}
			if got := mustIterations(t, s, Own, "q", 0); !slices.Equal(got, wantIts) {
				t.Fatalf("Iterations = %v, want %v", got, wantIts)
			}
			for _, it := range wantIts {
				if r, err := s.Read(Own, "q", 0, it); err != nil || !recordsEqual(r, testRecord("q", 0, it)) {
					t.Fatalf("previous checkpoint %d damaged: %v", it, err)
				}
			}
			if got := s.usage(); got != int64(tc.fit)*size {
				t.Fatalf("usage %d, want %d", got, int64(tc.fit)*size)
			}
			// WriteBytes (a buddy copy) obeys the quota too.
			err := s.WriteBytes(Buddy, "q", 3, 0, mustMarshal(t, testRecord("q", 3, 0)))
			if tc.fit < writes && !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("WriteBytes over the quota: %v", err)
			}
			if tc.fit == writes && tc.limit > 0 == (err == nil) {
				t.Fatalf("WriteBytes with limit %d: %v", tc.limit, err)
			}
		})
	}
}

func TestQuotaFreedByPruneAndRemoveJob(t *testing.T) {
	s := openStore(t)
	size := int64(len(mustMarshal(t, testRecord("q", 0, 1))))
	s.SetLimit(2 * size)
	for it := range int64(2) {
		if err := s.Write(Own, testRecord("q", 0, it)); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name    string
		free    func() error
		wantErr bool
	}{
		{"full", func() error { return nil }, true},
		{"after pruning one", func() error { return s.Prune(Own, "q", 0, 1) }, false},
		{"full again", func() error { return nil }, true},
		{"after removing the job", func() error { return s.RemoveJob("q") }, false},
		{"room for one more", func() error { return nil }, false},
		{"full at last", func() error { return nil }, true},
	}
	for i, st := range steps {
		if err := st.free(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		err := s.Write(Own, testRecord("q", 0, int64(10+i)))
		if st.wantErr && !errors.Is(err, syscall.ENOSPC) || !st.wantErr && err != nil {
			t.Fatalf("%s: write: %v", st.name, err)
		}
	}
	// Reopening counts the files present; lifting the limit lets writes through.
	s2, err := Open(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if s2.usage() != 2*size {
		t.Fatalf("reopened usage %d, want %d", s2.usage(), 2*size)
	}
	s2.SetLimit(2 * size)
	if err := s2.Write(Own, testRecord("q", 1, 0)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("reopened store over its quota: %v", err)
	}
	s2.SetLimit(0)
	if err := s2.Write(Own, testRecord("q", 1, 0)); err != nil {
		t.Fatalf("without a limit: %v", err)
	}
}

func TestConcurrentWrites(t *testing.T) {
	s := openStore(t)
	const shards, iterations = 8, 6
	var wg sync.WaitGroup
	errs := make(chan error, 3*shards*iterations)
	for shard := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range int64(iterations) {
				r := testRecord("conc", shard, it)
				r.Shards = shards
				errs <- s.Write(Own, r)
				data := mustMarshal(t, r)
				errs <- s.WriteBytes(Buddy, "conc", shard, it, data)
				errs <- s.Prune(Own, "conc", shard, it-1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for shard := range shards {
		if got := mustIterations(t, s, Own, "conc", shard); !slices.Equal(got, []int64{iterations - 2, iterations - 1}) {
			t.Fatalf("shard %d own: %v", shard, got)
		}
		if got := mustIterations(t, s, Buddy, "conc", shard); len(got) != iterations {
			t.Fatalf("shard %d buddy: %v", shard, got)
		}
	}
	total, err := treeSize(filepath.Join(s.Dir(), "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	if s.usage() != total {
		t.Fatalf("usage %d, files %d", s.usage(), total)
	}
}

func TestKeepNewestAndJobs(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range []int64{5, 10, 15, 20, 25} {
		if err := s.Write(Own, testRecord("j1", 0, it)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Write(Buddy, testRecord("j2", 1, 3)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		after int64
		keep  int
		want  []int64
	}{
		{25, 2, []int64{5, 10, 15, 20, 25}}, // nothing above 25
		{10, 5, []int64{5, 10, 15, 20, 25}}, // 3 above 10, keep 5
		{10, 2, []int64{5, 10, 20, 25}},     // 15 goes: never committed, two newer exist
		{0, 1, []int64{25}},
	} {
		if err := s.KeepNewest(Own, "j1", 0, c.after, c.keep); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Iterations(Own, "j1", 0); !slices.Equal(got, c.want) {
			t.Fatalf("KeepNewest(after %d, keep %d): %v, want %v", c.after, c.keep, got, c.want)
		}
	}
	jobs, err := s.Jobs()
	if err != nil || !slices.Equal(jobs, []string{"j1", "j2"}) {
		t.Fatalf("Jobs: %v %v", jobs, err)
	}
}
