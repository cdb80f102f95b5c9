package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"
	"unicode/utf8"

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
	// Anything else: 405 for a path a route serves by another method, else 404 (to whoever
	// has credentials; a path only open routes serve answers its 405 to anyone).
	{pattern: catchAll, roles: anyRole, handle: (*Server).noRoute},
}

// catchAll is the pattern of the route that takes what no other route does.
const catchAll = "/"

// routes returns the service's handler: the route table behind the recover, the security
// headers and the body bound.
func (s *Server) routes() http.Handler {
	s.mux = http.NewServeMux()
	s.routeOf = map[string]route{}
	for _, rt := range routeTable {
		s.mux.Handle(rt.pattern, s.guard(rt))
		s.routeOf[rt.pattern] = rt
	}
	dispatch := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := s.mux.Handler(r); pattern == catchAll {
			if allow, open := s.allowed(r); len(allow) > 0 && open {
				s.methodNotAllowed(w, r, allow)
				return
			}
		}
		s.mux.ServeHTTP(w, r)
	})
	return s.recoverer(s.headers(dispatch))
}

// routeMethods are the methods the route table's patterns name, in the order an Allow header
// lists them.
var routeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete}

// allowed returns the methods by which a route other than the catch-all serves r's path
// (none: no route serves it), and whether every such route is open (needs no credentials).
func (s *Server) allowed(r *http.Request) (methods []string, open bool) {
	open = true
	for _, m := range routeMethods {
		if m == r.Method {
			continue
		}
		probe := *r
		probe.Method = m
		_, pattern := s.mux.Handler(&probe)
		rt, ok := s.routeOf[pattern]
		if !ok || pattern == catchAll {
			continue
		}
		methods = append(methods, m)
		open = open && rt.roles == 0
	}
	return methods, open
}

// methodNotAllowed answers 405 with the Allow header and a JSON body.
func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request, allow []string) {
	w.Header().Set("Allow", strings.Join(allow, ", "))
	s.writeError(w, r, errorf(http.StatusMethodNotAllowed, "method_not_allowed", "%s %s: method not allowed (allowed: %s)",
		r.Method, r.URL.Path, strings.Join(allow, ", ")))
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
			id, err := s.authenticate(r)
			if err != nil {
				if rt.page && errors.Is(err, errNoCredentials) {
					s.loginPage(w, http.StatusOK)
					return
				}
				if errors.Is(err, errBadCredentials) {
					if s.fails.limited(ip) {
						s.writeError(w, r, errorf(http.StatusTooManyRequests, "limit", "too many failed authentications from %s: wait a minute", ip))
						return
					}
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
		if r.TLS != nil {
			h.Set("Strict-Transport-Security", "max-age=31536000")
		}
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
	ae.view.Field = clip(ae.view.Field, maxErrorField)
	ae.view.Message = clip(ae.view.Message, maxErrorMessage)
	if ae.status >= 500 {
		s.log.Warn("http request failed", slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("error", ae.view.Message))
	}
	writeJSON(w, ae.status, ae.view)
}

// The bounds of an error answer's field and message: both may quote the request (an unknown
// JSON key, a bad value), which must not come back whole.
const (
	maxErrorField   = 64
	maxErrorMessage = 1024
)

// clip returns s cut to at most max bytes (on a UTF-8 boundary), ending in "..." when cut.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max - 3
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// marshalJSON is json.Marshal without the escaping of <, > and & for HTML ("rank must be
// >= 1" reads as written): the API's JSON is never put into HTML as markup (the dashboard
// sets it as text). Newlines, U+2028 and U+2029 in strings are still escaped, so the JSON is
// one line, as an SSE data line must be.
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// writeJSON writes v as the JSON answer with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshalJSON(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"kind":"failure","message":"cannot encode the answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
