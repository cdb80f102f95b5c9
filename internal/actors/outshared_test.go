package actors

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/didnmf/didnmf/fsroot"
	"github.com/didnmf/didnmf/messages"
)

// TestOutSharedMakesItsDirectory: a job's --out-shared directory is made under the node's data
// root, as --out makes its own, with the same confinement (nothing made outside the roots, nor
// through a symbolic link that leads out) and overwrite rules (an existing coef.npy refused
// unless the job may overwrite it).
func TestOutSharedMakesItsDirectory(t *testing.T) {
	base := t.TempDir()
	data, outside := filepath.Join(base, "data"), filepath.Join(base, "outside")
	for _, d := range []string{data, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../outside", filepath.Join(data, "out-link")); err != nil {
		t.Fatal(err)
	}
	roots, err := fsroot.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer roots.Close()
	spec := func(dir string, overwrite bool) *messages.JobSpec {
		return &messages.JobSpec{OutShared: dir, Rank: 2, Overwrite: overwrite}
	}

	dir := filepath.Join(data, "runs", "det1")
	if err := prepareSharedCoef(roots, spec(dir, false), "job-1", 3, 5); err != nil {
		t.Fatalf("a new --out-shared directory: %v", err)
	}
	if _, err := os.Stat(sharedCoefPartial(dir, "job-1")); err != nil {
		t.Errorf("the partial coef.npy was not made: %v", err)
	}

	// Outside the roots, or through a link out of them: refused, nothing made.
	for _, d := range []string{filepath.Join(outside, "det2"), filepath.Join(data, "out-link", "det3")} {
		if err := prepareSharedCoef(roots, spec(d, false), "job-2", 3, 5); err == nil {
			t.Errorf("--out-shared %s: accepted", d)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("made outside the data root: %v", ents)
	}

	// An existing coef.npy: refused without overwrite, accepted with it.
	if err := os.WriteFile(filepath.Join(dir, "coef.npy"), []byte("earlier"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := prepareSharedCoef(roots, spec(dir, false), "job-3", 3, 5); !errors.Is(err, fsroot.ErrExists) {
		t.Errorf("an existing coef.npy without overwrite: %v, want ErrExists", err)
	}
	if err := prepareSharedCoef(roots, spec(dir, true), "job-4", 3, 5); err != nil {
		t.Errorf("an existing coef.npy with overwrite: %v", err)
	}

	// A file where the directory should be: refused.
	file := filepath.Join(data, "afile")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := prepareSharedCoef(roots, spec(file, false), "job-5", 3, 5); err == nil {
		t.Errorf("--out-shared naming a file: accepted")
	}
}
