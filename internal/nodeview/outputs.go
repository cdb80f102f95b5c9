package nodeview

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/didnmf/didnmf/internal/evict"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/figures"
	"github.com/didnmf/didnmf/internal/httpapi"
	"github.com/didnmf/didnmf/internal/jobctl"
)

// outputNames are the outputs Output serves, in the order JobView.Outputs lists them: the
// names the API takes, each the path of the file in a job's directory. Nothing else of a
// request reaches the file system: a job's directory is found by its id among those this
// view wrote or found at start.
var outputNames = []string{"report.json", "coef.npy", "basis.npy", "figures/convergence.png", "figures/basis.png"}

// outputs are the directories of attached jobs' outputs, DataDir/http-jobs/ID, at most keep
// of them: past it the oldest of the owner holding the most goes (evictee), so that one
// client's many jobs push out only its own outputs, never another's while it holds more.
// Each directory names its owner in a file ownerFile, which Output never serves. Safe for
// concurrent use.
type outputs struct {
	base string
	keep int
	log  *slog.Logger
	mu   sync.Mutex
	jobs map[string]*jobFiles
}

// jobFiles is one job's output directory, the outputs it holds and its owner.
type jobFiles struct {
	dir   string
	names []string
	at    time.Time
	owner string
}

// ownerFile is the file in a job's output directory that names its owner ("" in a directory
// without it: an earlier version's).
const ownerFile = ".owner"

// openOutputs makes DataDir/http-jobs and lists the jobs' outputs it holds already (from
// before a restart).
func openOutputs(dataDir string, keep int, log *slog.Logger) (*outputs, error) {
	base := filepath.Join(dataDir, "http-jobs")
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, fmt.Errorf("nodeview: outputs directory: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	o := &outputs{base: base, keep: keep, log: log, jobs: map[string]*jobFiles{}}
	entries, err := os.ReadDir(base)
	if err != nil {
		return nil, fmt.Errorf("nodeview: outputs directory: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || !jobctl.IsJobID(e.Name()) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		dir := filepath.Join(base, e.Name())
		owner, _ := os.ReadFile(filepath.Join(dir, ownerFile))
		o.jobs[e.Name()] = &jobFiles{dir: dir, names: present(dir), at: info.ModTime(), owner: string(owner)}
	}
	o.prune()
	return o, nil
}

// present returns the outputs a job's directory holds.
func present(dir string) []string {
	var out []string
	for _, name := range outputNames {
		if st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(name))); err == nil && st.Mode().IsRegular() {
			out = append(out, name)
		}
	}
	return out
}

// write writes a job's result (report.json, the factors, the .tsv files) and its pictures
// into the job's directory, with its owner, then removes jobs' beyond keep (prune).
func (o *outputs) write(id, owner string, res *didnmf.Result) error {
	if !jobctl.IsJobID(id) {
		return fmt.Errorf("job id %q", id) // the client made it: cannot happen
	}
	dir := filepath.Join(o.base, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner), 0o600); err != nil {
		return err
	}
	if err := res.Save(dir, nil); err != nil {
		return err
	}
	// The pictures are a convenience: a result without them (no history to plot) is still
	// whole.
	if _, err := figures.WriteResult(dir, filepath.Join(dir, "figures"), figures.Options{}); err != nil {
		o.log.Warn("nodeview: cannot draw a job's pictures", "job", id, "err", err)
	}
	o.mu.Lock()
	o.jobs[id] = &jobFiles{dir: dir, names: present(dir), at: time.Now(), owner: owner}
	o.prune()
	o.mu.Unlock()
	return nil
}

// prune removes jobs' directories beyond keep, each the oldest of the owner holding the most
// (under mu, or before o is shared).
func (o *outputs) prune() {
	for len(o.jobs) > o.keep {
		id := evictee(o.jobs, func(f *jobFiles) (string, int64) { return f.owner, f.at.UnixNano() })
		_ = os.RemoveAll(o.jobs[id].dir)
		delete(o.jobs, id)
	}
}

// evictee returns the job of jobs to drop: the oldest (by at) of the owner holding the most,
// of jobs as old the lesser id (evict.Choose).
func evictee[T any](jobs map[string]T, of func(T) (owner string, at int64)) string {
	entries := func(yield func(evict.Entry[string, string]) bool) {
		for id, j := range jobs {
			owner, at := of(j)
			if !yield(evict.Entry[string, string]{Key: id, Owner: owner, At: at}) {
				return
			}
		}
	}
	id, _ := evict.Choose(entries, nil, func(a, b string) bool { return a < b })
	return id
}

// names returns the outputs kept for a job (nil: none).
func (o *outputs) names(id string) []string {
	if o == nil {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if f := o.jobs[id]; f != nil {
		return slices.Clone(f.names)
	}
	return nil
}

// outputNames returns the outputs Output serves for a job.
func (v *View) outputNames(id string) []string { return v.outputs.names(id) }

// Output implements httpapi.Backend: an attached job's output this view wrote; a job
// submitted elsewhere has none here.
func (v *View) Output(ctx context.Context, id, name string) (io.ReadCloser, error) {
	v.use()
	i := slices.Index(outputNames, name)
	if i < 0 || v.outputs == nil {
		return nil, httpapi.ErrNotFound
	}
	file := outputNames[i]
	v.outputs.mu.Lock()
	f := v.outputs.jobs[id]
	v.outputs.mu.Unlock()
	if f == nil || !slices.Contains(f.names, file) {
		return nil, httpapi.ErrNotFound
	}
	r, err := os.Open(filepath.Join(f.dir, filepath.FromSlash(file)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, httpapi.ErrNotFound // removed as one of the oldest meanwhile
	}
	return r, err
}
