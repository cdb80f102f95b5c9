package jobctl

import (
	"slices"
	"strings"
	"time"

	"github.com/didnmf/didnmf/internal/evict"

	"github.com/didnmf/didnmf/messages"
)

// Job history. A job that ends (a result, an error, a cancel) leaves a record: its JobInfo in
// state done, failed or canceled, with its outcome, its history thinned and its events (Job's
// Ready.Record). Its coordinator sends it to its own node's host and to its standby's, so that
// the record outlives the coordinator's node; each keeps one record per job (a later epoch's
// replaces an earlier one's) for HostConfig.HistoryTime, at most HostConfig.HistoryMax of them.
// Past the count the oldest record of the owner holding the most goes (the newcomer counted
// among its owner's), as internal/slots evicts: a client that floods the host with jobs (even
// refused ones) pushes out only its own records, never another owner's while it holds more.
// ListJobs with ended lists them. Times come with the events.

// The defaults of HostConfig.HistoryMax and HistoryTime.
const (
	DefaultHistoryMax  = 256
	DefaultHistoryTime = 24 * time.Hour
)

// HostRecord is an ended job's record (a JobRecord) reaching the host at At: from this node's
// coordinator of the job, or from the coordinator of a job whose standby this node was.
type HostRecord struct {
	Record *messages.JobRecord
	At     time.Time
}

// keptRecord is an ended job's record and when the host got it.
type keptRecord struct {
	info *messages.JobInfo
	at   time.Time
}

// historyLimits are the host's bounds on its records: how many (0: none kept) and how long.
func (c HostConfig) historyLimits() (int, time.Duration) {
	n, d := c.HistoryMax, c.HistoryTime
	if n == 0 {
		n = DefaultHistoryMax
	}
	if d == 0 {
		d = DefaultHistoryTime
	}
	return max(n, 0), d
}

// keepRecord keeps an ended job's record, unless the host keeps one of a later epoch of the
// job: the expired records go, then while the count would pass its bound the oldest of the
// owner holding the most (evictable). The job
// ended: a standby state of it from that coordinator's epoch or before is dropped, as its
// StopJob drops it (which may come late, or be lost in a cut), so that this node does not
// take over a job that ended should the coordinator's node go now.
func (h *Host) keepRecord(e HostRecord) {
	info := e.Record.Info
	if j := h.jobs[info.JobId]; j != nil && j.standby != nil && j.standby.Epoch <= info.Epoch {
		j.standby = nil
		h.tidy(info.JobId)
	}
	limit, _ := h.cfg.historyLimits()
	if old, ok := h.records[info.JobId]; ok && old.info.Epoch > info.Epoch {
		return
	}
	for job, r := range h.records {
		if h.recordExpired(r, e.At) {
			delete(h.records, job)
		}
	}
	delete(h.records, info.JobId)
	for len(h.records) > 0 && len(h.records) >= limit {
		delete(h.records, h.evictable(info.Owner))
	}
	if limit > 0 {
		h.records[info.JobId] = keptRecord{info: info, at: e.At}
	}
}

// evictable returns the record to drop for a newcomer of owner: the oldest of the owner
// holding the most records, the newcomer counted (of two holding as many, the one whose
// oldest record is older; of records as old, the lesser job id).
func (h *Host) evictable(owner string) string {
	records := func(yield func(evict.Entry[string, string]) bool) {
		for job, r := range h.records {
			if !yield(evict.Entry[string, string]{Key: job, Owner: r.info.Owner, At: r.at.UnixNano()}) {
				return
			}
		}
	}
	job, _ := evict.Choose(records, &owner, func(a, b string) bool { return a < b })
	return job
}

// recordExpired tells whether a record was kept longer than HostConfig.HistoryTime at now.
func (h *Host) recordExpired(r keptRecord, now time.Time) bool {
	_, keep := h.cfg.historyLimits()
	return now.Sub(r.at) > keep
}

// Records returns the records of ended jobs the host keeps and keep accepts, not expired at
// now, by job id. They are shared: the caller changes none.
func (h *Host) Records(now time.Time, keep func(*messages.JobInfo) bool) []*messages.JobInfo {
	var out []*messages.JobInfo
	for _, r := range h.records {
		if !h.recordExpired(r, now) && keep(r.info) {
			out = append(out, r.info)
		}
	}
	slices.SortFunc(out, func(a, b *messages.JobInfo) int { return strings.Compare(a.JobId, b.JobId) })
	return out
}

// ValidRecord tells whether a JobRecord is one a host may keep: a well-formed job id, an
// ended state, and no more history points and events than a JobInfo carries.
func ValidRecord(m *messages.JobRecord) bool {
	info := m.GetInfo()
	if info == nil || !IsJobID(info.JobId) || len(info.History) > MaxInfoHistory || len(info.Events) > MaxInfoEvents {
		return false
	}
	switch info.State {
	case messages.JobPhase_JOB_PHASE_DONE, messages.JobPhase_JOB_PHASE_FAILED, messages.JobPhase_JOB_PHASE_CANCELED:
		return true
	}
	return false
}
