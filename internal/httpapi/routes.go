package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"path"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/didnmf/didnmf/usererr"
)

// route is one route of the service: its pattern (net/http's ServeMux syntax), the roles it
// allows (0: open to anyone, no credential needed) and its handler.
type route struct {
	pattern string
	roles   role
	handle  func(s *Server, w http.ResponseWriter, r *http.Request, who identity) error
	// page marks the dashboard's page: without credentials it answers the login form.
	page bool
}

// routeTable is every route of the service, and the roles each allows: the one place where
// requests are authorized (see guard).
var routeTable = []route{
	{pattern: "GET /healthz", handle: (*Server).healthz},
	{pattern: "GET /readyz", handle: (*Server).readyz},
	{pattern: "GET /login", handle: (*Server).login},
	{pattern: "POST /logout", handle: (*Server).logout},
	{pattern: "GET /metrics", roles: roleOperator, handle: (*Server).metrics},
	{pattern: "GET /{$}", roles: anyRole, handle: (*Server).index, page: true},
	{pattern: "GET /static/", roles: anyRole, handle: (*Server).static},
	// The login page's assets, open: nothing in them is secret, and that page has no session.
	{pattern: "GET /static/style.css", handle: (*Server).static},
	{pattern: "GET /static/favicon.svg", handle: (*Server).static},
	{pattern: "GET /static/login.js", handle: (*Server).static},
	{pattern: "GET /api/v1/whoami", roles: anyRole, handle: (*Server).whoami},
	{pattern: "GET /api/v1/cluster", roles: anyRole, handle: (*Server).cluster},
	{pattern: "GET /api/v1/jobs", roles: anyRole, handle: (*Server).listJobs},
	{pattern: "POST /api/v1/jobs", roles: anyRole, handle: (*Server).submit},
	{pattern: "GET /api/v1/jobs/{id}", roles: anyRole, handle: (*Server).getJob},
	{pattern: "DELETE /api/v1/jobs/{id}", roles: anyRole, handle: (*Server).cancel},
	{pattern: "GET /api/v1/jobs/{id}/outputs/{name...}", roles: anyRole, handle: (*Server).output},
	{pattern: "GET /api/v1/events", roles: anyRole, handle: (*Server).clusterEvents},
	{pattern: "GET /api/v1/jobs/{id}/events", roles: anyRole, handle: (*Server).jobEvents},
	// Anything else: 404 (to whoever has credentials).
	{pattern: "/", roles: anyRole, handle: (*Server).noRoute},
}

// routes returns the service's handler: the route table behind the recover, the security
// headers and the body bound.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range routeTable {
		mux.Handle(rt.pattern, s.guard(rt))
	}
	return s.recoverer(s.headers(mux))
}

// apiError is an error with its HTTP status and its JSON body.
type apiError struct {
	status int
	view   ErrorView
}

func (e *apiError) Error() string { return e.view.Message }

func errorf(status int, kind, format string, args ...any) *apiError {
	return &apiError{status: status, view: ErrorView{Kind: kind, Message: fmt.Sprintf(format, args...)}}
}

// guard authenticates r, authorizes it by its route's roles, checks a session-authenticated
// mutating request for CSRF, and runs the handler, rendering its error.
func (s *Server) guard(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var who identity
		if rt.roles != 0 {
			ip := remoteIP(r)
			if s.fails.limited(ip) {
				s.writeError(w, r, errorf(http.StatusTooManyRequests, "limit", "too many failed authentications from %s: wait a minute", ip))
				return
			}
			id, err := s.authenticate(r)
			if err != nil {
				if rt.page && errors.Is(err, errNoCredentials) {
					s.loginPage(w, http.StatusOK)
					return
				}
				if errors.Is(err, errBadCredentials) {
					s.failedAuth(ip)
				}
				w.Header().Set("WWW-Authenticate", `Bearer realm="didnmf"`)
				s.writeError(w, r, errorf(http.StatusUnauthorized, "auth", "%v", err))
				return
			}
			if id.role&rt.roles == 0 {
				s.writeError(w, r, errorf(http.StatusForbidden, "forbidden", "%s %s is for the operator", r.Method, r.URL.Path))
				return
			}
			if err := s.checkCSRF(r, id); err != nil {
				s.writeError(w, r, errorf(http.StatusForbidden, "forbidden", "%v", err))
				return
			}
			who = id
		}
		if err := rt.handle(s, w, r, who); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// failedAuth counts a failed authentication from ip, and logs the address once it reaches
// the limit (a line a minute at most per address).
func (s *Server) failedAuth(ip netip.Addr) {
	if s.fails.fail(ip) {
		s.log.Warn("http: too many failed authentications; refusing the address for a minute", slog.String("address", ip.String()), slog.Int("failures", failsPerMinute))
	}
}

// headers sets the security headers of every answer and bounds the request body.
func (s *Server) headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if r.ContentLength > s.cfg.MaxBody {
			s.writeError(w, r, errorf(http.StatusRequestEntityTooLarge, "limit", "request body of %d bytes: at most %d", r.ContentLength, s.cfg.MaxBody))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
		next.ServeHTTP(w, r)
	})
}

// recoverer turns a panic of a handler into a 500 and a log line: the server keeps serving.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			p := recover()
			if p == nil || p == http.ErrAbortHandler {
				if p != nil {
					panic(p)
				}
				return
			}
			s.log.Error("http handler panic", slog.String("method", r.Method), slog.String("path", r.URL.Path),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			s.writeError(w, r, errorf(http.StatusInternalServerError, "failure", "internal error (logged on the node)"))
		}()
		next.ServeHTTP(w, r)
	})
}

// writeError writes err as an ErrorView with its status: an *apiError as it is, the user's
// error as 400 (fields named by their JSON keys), ErrNotFound as 404, a body too large as
// 413, anything else as a backend failure (502).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	var tooBig *http.MaxBytesError
	var ue *usererr.Error
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &tooBig):
		ae = errorf(http.StatusRequestEntityTooLarge, "limit", "request body over %d bytes", tooBig.Limit)
	case errors.Is(err, ErrNotFound):
		ae = errorf(http.StatusNotFound, "not_found", "%v", err)
	case errors.As(err, &ue):
		msg := strings.Replace(err.Error(), ue.Error(), ue.Text(jsonName), 1)
		ae = &apiError{status: http.StatusBadRequest, view: ErrorView{Kind: "user", Field: jsonField(ue.Field), Message: msg}}
	case errors.Is(err, usererr.ErrUser):
		ae = errorf(http.StatusBadRequest, "user", "%v", err)
	case errors.Is(err, context.DeadlineExceeded):
		ae = errorf(http.StatusServiceUnavailable, "failure", "the node did not answer in time: %v", err)
	default:
		ae = errorf(http.StatusBadGateway, "failure", "%v", err)
	}
	if ae.status >= 500 {
		s.log.Warn("http request failed", slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("error", ae.view.Message))
	}
	writeJSON(w, ae.status, ae.view)
}

// writeJSON writes v as the JSON answer with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"kind":"failure","message":"cannot encode the answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// backendCtx bounds a call into the backend.
func backendCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), backendTimeout)
}

// Handlers.

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
