package actors

import (
	"slices"
	"strings"
	"sync"

	"github.com/didnmf/didnmf/messages"
)

// jobBoard is what a node's coordinators publish about their jobs, for ListJobs. Coordinators
// write it from their own goroutines and the host reads it: every method takes the lock, and
// entries are replaced, never changed in place.
type jobBoard struct {
	mu   sync.Mutex
	jobs map[string]*messages.JobInfo
}

// set publishes a job's state.
func (b *jobBoard) set(info *messages.JobInfo) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.jobs == nil {
		b.jobs = map[string]*messages.JobInfo{}
	}
	b.jobs[info.JobId] = info
}

// remove forgets a job that ended.
func (b *jobBoard) remove(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.jobs, id)
}

// list returns the jobs keep accepts, by id.
func (b *jobBoard) list(keep func(*messages.JobInfo) bool) []*messages.JobInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*messages.JobInfo
	for _, j := range b.jobs {
		if keep(j) {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b *messages.JobInfo) int { return strings.Compare(a.JobId, b.JobId) })
	return out
}
