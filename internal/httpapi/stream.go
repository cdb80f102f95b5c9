package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"
)

// streamSlots bounds the event streams open at once, in total and per identity.
type streamSlots struct {
	max, perIdentity int

	mu    sync.Mutex
	total int
	by    map[identity]int
}

func newStreamSlots(max, perIdentity int) *streamSlots {
	return &streamSlots{max: max, perIdentity: perIdentity, by: map[identity]int{}}
}

// take takes a slot for id; the error says which bound refused it.
func (sl *streamSlots) take(id identity) error {
	id.via = ""
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.total >= sl.max {
		return errorf(http.StatusTooManyRequests, "limit", "this node serves %d event streams already: close one, or use another member", sl.max)
	}
	if sl.by[id] >= sl.perIdentity {
		return errorf(http.StatusTooManyRequests, "limit", "%s has %d event streams open already: close one", id.name, sl.perIdentity)
	}
	sl.total++
	sl.by[id]++
	return nil
}

// give gives id's slot back.
func (sl *streamSlots) give(id identity) {
	id.via = ""
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.total--
	if sl.by[id]--; sl.by[id] <= 0 {
		delete(sl.by, id)
	}
}

// open returns the number of streams open.
func (sl *streamSlots) open() int {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.total
}

// sse writes server-sent events, each under a write deadline: a reader that does not read
// within it is cut (the write fails, the handler returns, its slot is given back).
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

// startSSE takes a stream slot for who and sends the stream's headers; the caller calls the
// returned release when the stream ends.
func (s *Server) startSSE(w http.ResponseWriter, who identity) (*sse, func(), error) {
	if err := s.streams.take(who); err != nil {
		return nil, nil, err
	}
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Time{}) // the server's ReadTimeout is for requests, not for streams
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	e := &sse{w: w, rc: rc, timeout: s.cfg.WriteTimeout}
	if err := e.write([]byte("retry: 3000\n\n")); err != nil {
		s.streams.give(who)
		return nil, nil, err
	}
	return e, func() {
		rc.SetWriteDeadline(time.Time{})
		s.streams.give(who)
	}, nil
}

// write writes p and flushes it under the write deadline.
func (e *sse) write(p []byte) error {
	if err := e.rc.SetWriteDeadline(time.Now().Add(e.timeout)); err != nil {
		return err
	}
	if _, err := e.w.Write(p); err != nil {
		return err
	}
	return e.rc.Flush()
}

// event writes one event named name with v as its JSON data.
func (e *sse) event(name string, data []byte) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "event: %s\ndata: ", name)
	b.Write(data) // JSON has no newline (marshalJSON escapes them in strings)
	b.WriteString("\n\n")
	return e.write(b.Bytes())
}

// ping writes the heartbeat comment.
func (e *sse) ping() error { return e.write([]byte(": ping\n\n")) }

// streamEnded logs why a stream ended early: a reader cut for not reading at Info, anything
// else at Debug (a closed tab is no news).
func (s *Server) streamEnded(path string, who identity, err error) {
	switch {
	case err == nil || errors.Is(err, context.Canceled) || errors.Is(err, http.ErrServerClosed):
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.log.Info("http: cut a stream whose reader did not read", slog.String("path", path), slog.String("who", who.name))
	default:
		s.log.Debug("http: stream ended", slog.String("path", path), slog.String("who", who.name), slog.String("error", err.Error()))
	}
}

// clusterEvents is GET /api/v1/events: the cluster and the jobs who sees, at connect and
// after each snapshot that changed them, with a heartbeat.
func (s *Server) clusterEvents(w http.ResponseWriter, r *http.Request, who identity) error {
	e, release, err := s.startSSE(w, who)
	if err != nil {
		return err
	}
	defer release()
	err = s.runClusterEvents(r.Context(), e, who)
	s.streamEnded(r.URL.Path, who, err)
	return nil
}

func (s *Server) runClusterEvents(ctx context.Context, e *sse, who identity) error {
	ping := time.NewTicker(s.ping)
	defer ping.Stop()
	var lastCluster, lastJobs []byte
	for {
		updated := s.cfg.Backend.Updated() // before the reads, so that no snapshot is missed
		c, jobs, err := s.snapshot(ctx, who)
		if err != nil {
			return err
		}
		if cb, err := marshalJSON(normCluster(c)); err == nil && !bytes.Equal(cb, lastCluster) {
			if err := e.event("cluster", cb); err != nil {
				return err
			}
			lastCluster = cb
		}
		if jb, err := marshalJSON(jobsView{Jobs: jobs}); err == nil && !bytes.Equal(jb, lastJobs) {
			if err := e.event("jobs", jb); err != nil {
				return err
			}
			lastJobs = jb
		}
		if err := s.wait(ctx, updated, ping.C, e); err != nil {
			return err
		}
	}
}

// snapshot reads the cluster and who's jobs.
func (s *Server) snapshot(ctx context.Context, who identity) (ClusterView, []JobView, error) {
	ctx, cancel := context.WithTimeout(ctx, backendTimeout)
	defer cancel()
	c, err := s.cfg.Backend.Cluster(ctx)
	if err != nil {
		return c, nil, err
	}
	jobs, err := s.jobsOf(ctx, who)
	return c, jobs, err
}

// wait waits for the backend's next snapshot, pinging the stream meanwhile; it returns an
// error when the stream ends (the request's end, the server's Close, a ping that fails).
func (s *Server) wait(ctx context.Context, updated <-chan struct{}, ping <-chan time.Time, e *sse) error {
	for {
		select {
		case <-updated:
			return nil
		case <-ping:
			if err := e.ping(); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return http.ErrServerClosed
		}
	}
}

// jobEnded reports whether a job's state is final.
func jobEnded(state string) bool {
	switch state {
	case "done", "failed", "canceled":
		return true
	}
	return false
}

// jobEvents is GET /api/v1/jobs/{id}/events: event job (the job whole), then event progress
// after each snapshot that changed it (its history only the points after those sent, its
// events only the new ones), and event end (the job whole) when it ended, which closes the
// stream. A job that is no longer known ends the stream with event error.
func (s *Server) jobEvents(w http.ResponseWriter, r *http.Request, who identity) error {
	ctx, cancel := backendCtx(r)
	j, err := s.jobOf(ctx, who, r.PathValue("id"))
	cancel()
	if err != nil {
		return err // 404 before any event
	}
	e, release, err := s.startSSE(w, who)
	if err != nil {
		return err
	}
	defer release()
	err = s.runJobEvents(r.Context(), e, who, j)
	s.streamEnded(r.URL.Path, who, err)
	return nil
}

func (s *Server) runJobEvents(ctx context.Context, e *sse, who identity, j JobView) error {
	ping := time.NewTicker(s.ping)
	defer ping.Stop()
	updated := s.cfg.Backend.Updated()
	if err := s.jobEvent(e, "job", j); err != nil {
		return err
	}
	last := j
	for !jobEnded(last.State) {
		if err := s.wait(ctx, updated, ping.C, e); err != nil {
			return err
		}
		updated = s.cfg.Backend.Updated()
		bctx, cancel := context.WithTimeout(ctx, backendTimeout)
		j, err := s.jobOf(bctx, who, last.ID)
		cancel()
		var ae *apiError
		if errors.As(err, &ae) && ae.status == http.StatusNotFound {
			b, _ := marshalJSON(ErrorView{Kind: "not_found", Message: "job " + last.ID + " is no longer known to the cluster"})
			return e.event("error", b)
		}
		if err != nil {
			return err
		}
		if jobEnded(j.State) {
			break
		}
		if p, changed := progressOf(last, j); changed {
			if err := s.jobEvent(e, "progress", p); err != nil {
				return err
			}
		}
		last = j
	}
	bctx, cancel := context.WithTimeout(ctx, backendTimeout)
	final, err := s.jobOf(bctx, who, last.ID)
	cancel()
	if err != nil {
		final = last
	}
	return s.jobEvent(e, "end", final)
}

// jobEvent writes a job as event name.
func (s *Server) jobEvent(e *sse, name string, j JobView) error {
	b, err := marshalJSON(j)
	if err != nil {
		return err
	}
	return e.event(name, b)
}

// progressOf returns cur with only the history points after prev's last and the events after
// prev's last, and whether anything changed since prev.
func progressOf(prev, cur JobView) (JobView, bool) {
	p := cur
	var lastIter int64 = -1
	if n := len(prev.History); n > 0 {
		lastIter = prev.History[n-1].Iteration
	}
	p.History = nil
	for _, pt := range cur.History {
		if pt.Iteration > lastIter {
			p.History = append(p.History, pt)
		}
	}
	p.Events = newEvents(prev.Events, cur.Events)
	p.Spec = nil // the job event and the end carry it
	a, b := prev, cur
	a.History, a.Events, b.History, b.Events = nil, nil, nil, nil
	ja, _ := marshalJSON(a)
	jb, _ := marshalJSON(b)
	return p, len(p.History) > 0 || len(p.Events) > 0 || !bytes.Equal(ja, jb)
}

// newEvents returns the events of cur after the last of prev (cur keeps the latest events:
// the oldest may have gone).
func newEvents(prev, cur []EventView) []EventView {
	if len(prev) == 0 {
		return cur
	}
	last := prev[len(prev)-1]
	for i := len(cur) - 1; i >= 0; i-- {
		if cur[i] == last {
			return cur[i+1:]
		}
	}
	var out []EventView
	for _, ev := range cur {
		if ev.UnixMs > last.UnixMs {
			out = append(out, ev)
		}
	}
	return out
}
