package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"
)

// backendCtx bounds a call into the backend.
func backendCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), backendTimeout)
}

// The handlers of the route table (routes.go), one a route.

func (s *Server) healthz(w http.ResponseWriter, r *http.Request, _ identity) error {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ok\n")
	return nil
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request, _ identity) error {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := s.cfg.Backend.Ready(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: %v\n", err)
		return nil
	}
	io.WriteString(w, "ready\n")
	return nil
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request, _ identity) error {
	if s.cfg.Metrics == nil {
		return errorf(http.StatusNotFound, "not_found", "this node serves no metrics")
	}
	s.cfg.Metrics.ServeHTTP(w, r)
	return nil
}

func (s *Server) noRoute(w http.ResponseWriter, r *http.Request, _ identity) error {
	if allow, _ := s.allowed(r); len(allow) > 0 {
		s.methodNotAllowed(w, r, allow)
		return nil
	}
	return errorf(http.StatusNotFound, "not_found", "no route %s %s", r.Method, r.URL.Path)
}

// whoamiView is the answer of GET /api/v1/whoami.
type whoamiView struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// Via is how the request was authenticated: token, session or certificate.
	Via string `json:"via"`
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request, who identity) error {
	writeJSON(w, http.StatusOK, whoamiView{Name: who.name, Role: who.role.String(), Via: who.via})
	return nil
}

func (s *Server) cluster(w http.ResponseWriter, r *http.Request, _ identity) error {
	ctx, cancel := backendCtx(r)
	defer cancel()
	c, err := s.cfg.Backend.Cluster(ctx)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, normCluster(c))
	return nil
}

// jobsView is the answer of GET /api/v1/jobs and the jobs event.
type jobsView struct {
	Jobs []JobView `json:"jobs"`
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, who identity) error {
	ctx, cancel := backendCtx(r)
	defer cancel()
	jobs, err := s.jobsOf(ctx, who)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, jobsView{Jobs: jobs})
	return nil
}

// jobsOf returns the jobs who sees (never nil).
func (s *Server) jobsOf(ctx context.Context, who identity) ([]JobView, error) {
	jobs, err := s.cfg.Backend.Jobs(ctx, who.filter())
	if err != nil {
		return nil, err
	}
	if f := who.filter(); f != "" { // the backend filters; this keeps the rule whatever it does
		jobs = slices.DeleteFunc(slices.Clone(jobs), func(j JobView) bool { return j.Owner != f })
	}
	if jobs == nil {
		jobs = []JobView{}
	}
	return jobs, nil
}

// submittedView is the answer of POST /api/v1/jobs.
type submittedView struct {
	ID  string `json:"id"`
	URL string `json:"url"`
}

func (s *Server) submit(w http.ResponseWriter, r *http.Request, who identity) error {
	spec, err := DecodeSpec(r.Body)
	if err != nil {
		return err
	}
	ctx, cancel := backendCtx(r)
	defer cancel()
	id, err := s.cfg.Backend.Submit(ctx, who.name, spec)
	if err != nil {
		return err
	}
	u := "/api/v1/jobs/" + id
	w.Header().Set("Location", u)
	writeJSON(w, http.StatusAccepted, submittedView{ID: id, URL: u})
	return nil
}

// jobOf returns job id as who may see it: another's job is not found, as one that does not
// exist. A job not found waits for the backend's next snapshot (at most s.settle) and is
// looked up again, so that a job just submitted, which the snapshot may not hold yet, is found
// (another's job takes the same wait: the answer's time tells nothing).
func (s *Server) jobOf(ctx context.Context, who identity, id string) (JobView, error) {
	if !validJobID(id) {
		return JobView{}, errorf(http.StatusNotFound, "not_found", "no job %q", id)
	}
	updated := s.cfg.Backend.Updated()
	j, err := s.lookupJob(ctx, who, id)
	if !errors.Is(err, ErrNotFound) {
		return j, err
	}
	t := time.NewTimer(s.settle)
	defer t.Stop()
	select {
	case <-updated:
		j, err = s.lookupJob(ctx, who, id)
	case <-t.C:
	case <-ctx.Done():
	}
	if errors.Is(err, ErrNotFound) {
		return JobView{}, errorf(http.StatusNotFound, "not_found", "no job %s", id)
	}
	return j, err
}

// lookupJob returns job id if who may see it, else ErrNotFound.
func (s *Server) lookupJob(ctx context.Context, who identity, id string) (JobView, error) {
	j, err := s.cfg.Backend.Job(ctx, id)
	if err == nil && who.filter() != "" && j.Owner != who.filter() {
		return JobView{}, ErrNotFound
	}
	return j, err
}

// validJobID reports whether id may be a job's id (bounded, printable, no separators).
func validJobID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request, who identity) error {
	ctx, cancel := backendCtx(r)
	defer cancel()
	j, err := s.jobOf(ctx, who, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, j)
	return nil
}

// canceledView is the answer of DELETE /api/v1/jobs/{id}.
type canceledView struct {
	ID string `json:"id"`
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request, who identity) error {
	ctx, cancel := backendCtx(r)
	defer cancel()
	j, err := s.jobOf(ctx, who, r.PathValue("id"))
	if err != nil {
		return err
	}
	switch j.State {
	case "done", "failed", "canceled":
		return errorf(http.StatusConflict, "conflict", "job %s already ended (%s): nothing to cancel", j.ID, j.State)
	}
	if err := s.cfg.Backend.Cancel(ctx, j.ID); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, canceledView{ID: j.ID})
	return nil
}

// validOutput reports whether name is an output's name: report.json, coef.npy, basis.npy or
// figures/NAME.png.
func validOutput(name string) bool {
	switch name {
	case "report.json", "coef.npy", "basis.npy":
		return true
	}
	fig, ok := strings.CutPrefix(name, "figures/")
	base, png := strings.CutSuffix(fig, ".png")
	return ok && png && validJobID(base) && !strings.Contains(base, ".")
}

func (s *Server) output(w http.ResponseWriter, r *http.Request, who identity) error {
	ctx, cancel := backendCtx(r)
	defer cancel()
	j, err := s.jobOf(ctx, who, r.PathValue("id"))
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	if !validOutput(name) {
		return errorf(http.StatusNotFound, "not_found", "no output %q: report.json, coef.npy, basis.npy or figures/NAME.png", name)
	}
	rc, err := s.cfg.Backend.Output(ctx, j.ID, name)
	if errors.Is(err, ErrNotFound) {
		return errorf(http.StatusNotFound, "not_found", "job %s has no output %s here", j.ID, name)
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	h := w.Header()
	switch path.Ext(name) {
	case ".json":
		h.Set("Content-Type", "application/json")
	case ".png":
		h.Set("Content-Type", "image/png")
	default:
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", j.ID+"-"+path.Base(name)))
	}
	dw := &deadlineWriter{w: w, rc: http.NewResponseController(w), timeout: s.cfg.WriteTimeout}
	if _, err := io.Copy(dw, rc); err != nil {
		s.log.Info("http download cut", slog.String("job", j.ID), slog.String("output", name), slog.String("error", err.Error()))
	}
	return nil
}

// deadlineWriter writes under a fresh write deadline each time, so that a reader that stops
// reading is cut without bounding a long download's total time.
type deadlineWriter struct {
	w       io.Writer
	rc      *http.ResponseController
	timeout time.Duration
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
	return d.w.Write(p)
}

// normCluster gives a view's lists as [] rather than null.
func normCluster(c ClusterView) ClusterView {
	if c.Members == nil {
		c.Members = []MemberView{}
	}
	if c.Warnings == nil {
		c.Warnings = []string{}
	}
	return c
}
