// Package httpapi is a node's HTTP service: the dashboard, a JSON API to submit, watch,
// cancel and fetch jobs, server-sent event streams of the cluster and of one job's progress,
// and /metrics for Prometheus. It shows and controls the cluster through a Backend (see
// backend.go; internal/nodeview implements it over a running node) and holds no state of its
// own but login sessions and its bounds.
//
// # Starting it
//
//	srv, err := httpapi.New(httpapi.Config{
//		Addr:    "127.0.0.1:8265",
//		Backend: view,             // a Backend
//		Metrics: metrics.Handler(), // nil: /metrics is 404
//		Secret:  secret,           // the cluster secret: operator and client tokens derive from it
//	})
//	if err != nil { ... }           // e.g. an address that is not loopback, without TLS
//	ln, _ := net.Listen("tcp", "127.0.0.1:8265")
//	go srv.Serve(ln)
//	fmt.Println("dashboard:", srv.LoginURL()) // http://127.0.0.1:8265/login?token=...
//	defer srv.Close()
//
// An address that is not loopback needs TLS: Config.Certificate (the node's own certificate)
// or CertFile and KeyFile; with Config.CA, client certificates of the cluster's CA
// authenticate too. New refuses a plain address that is not loopback, saying so, and an
// unspecified one (0.0.0.0, [::]): URL and LoginURL advertise the address, so it must be the
// IP others reach the node at.
//
// # Who may do what
//
// Loopback is no trust boundary: every route but /healthz, /readyz (and the two assets of the
// login page) needs credentials, on every address. There are two roles, as on the actor port:
//
//   - operator: sees and controls every job, reads /metrics. Authenticated by the operator
//     token (OperatorToken: HMAC-SHA256 of the cluster secret, hex; or Config.Token, read
//     from a token file with ReadTokenFile; random with Config.Insecure) as
//     "Authorization: Bearer TOKEN", by the session cookie that GET /login?token=TOKEN sets,
//     or by a peer certificate of the cluster's CA over mutual TLS.
//   - client NAME: sees the cluster and only its own jobs (another's job is 404, as one that
//     does not exist), and submits as NAME. Authenticated by a client certificate of the
//     cluster's CA (NAME is its common name), or a client token c1.NAME.HEX (ClientToken;
//     only a node with the secret takes it), as a bearer or through /login.
//
// Tokens are compared in constant time. An address that fails to authenticate 20 times in a
// minute has its failing requests answered 429 (not 401) until the minute ends; credentials
// are checked first, so valid ones from that address are still served. The route table (routes.go) lists each route
// with the roles it allows, and guard is the one place that authorizes.
//
// The session cookie (didnmf_session_PORT: a name for each port, as browsers do not isolate a
// host's cookies by port, and the nodes of one machine must not log each other out) is
// HttpOnly, SameSite=Strict, Secure under TLS, kept server-side (at most MaxSessions, for
// SessionTTL; when full, the oldest session of the identity holding the most goes, so that
// one client logging in again and again logs out only itself). GET /login is refused (403)
// when the request's Sec-Fetch-Site is other than none (a typed or pasted link) or
// same-origin: another site cannot log a browser in with the other site's token. A mutating request authenticated by it
// must send Content-Type: application/json or X-Didnmf-CSRF: 1, and no Origin other than the
// server's own (nor Sec-Fetch-Site cross-site): another site cannot make a browser submit or
// cancel. A bearer token or a certificate needs neither (no browser sends them on its own).
//
// # Routes
//
//	GET    /healthz                         200 "ok" (open)
//	GET    /readyz                          200 "ready", or 503 and why not (open)
//	GET    /metrics                         Config.Metrics (operator)
//	GET    /                                the dashboard; without credentials, the login form
//	GET    /login?token=T                   sets the session cookie, 303 to /
//	POST   /logout                          ends the session
//	GET    /static/NAME                     the dashboard's assets (embedded)
//	GET    /api/v1/whoami                   {"name", "role", "via"}
//	GET    /api/v1/cluster                  ClusterView
//	GET    /api/v1/jobs                     {"jobs": [JobView...]}: running and ended (a client's own)
//	POST   /api/v1/jobs                     a JSON spec -> 202 {"id", "url"}
//	GET    /api/v1/jobs/{id}                JobView with its history and events
//	DELETE /api/v1/jobs/{id}                cancel -> 202 {"id"}
//	GET    /api/v1/jobs/{id}/outputs/NAME   report.json, coef.npy, basis.npy, figures/NAME.png
//	GET    /api/v1/events                   SSE: event cluster, event jobs
//	GET    /api/v1/jobs/{id}/events         SSE: event job, progress..., end
//
// For example, with the operator token in $TOKEN:
//
//	curl -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8265/api/v1/cluster
//	curl -H "Authorization: Bearer $TOKEN" -d '{"input": "synthetic:m=2000,n=1000,k=10", "rank": 10, "shards": 4}' \
//	     http://127.0.0.1:8265/api/v1/jobs
//	curl -N -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8265/api/v1/jobs/ID/events
//	curl -H "Authorization: Bearer $TOKEN" -o coef.npy http://127.0.0.1:8265/api/v1/jobs/ID/outputs/coef.npy
//
// A job id not found waits for the backend's next snapshot (at most a second) before the
// 404, so that a job just submitted can be watched at once.
//
// A job without out_shared is attached to the node that took it: its outputs are collected
// there, and it is canceled if that node dies. A job with out_shared runs detached and writes
// its outputs there.
//
// # The job spec
//
// POST /api/v1/jobs takes a JSON object (DecodeSpec) whose keys are the fields the checks
// name, so that an error names the key at fault: input (a path under the node's data roots,
// a list of them, or synthetic:m=,n=,k=[,seed=][,noise=]), rank (both required), algorithm,
// shards, seed, init, init_basis, init_coef, form, storage, layout, rho, alpha_coef,
// alpha_basis (a number or "same"), l1_ratio, loss (a name or a beta), missing (bool),
// test_fraction, test_seed, fan_in, checkpoint_every (a number or "auto"), max_iter, tol,
// time_limit ("90s", or seconds), stall_tol, out_shared, overwrite, nodes, transform ("none"
// or "sqrt", see matio.Transform). The rest is as
// the CLI's defaults (tol 0 turns the stall rule off unless stall_tol is given); inputs are
// always read by the nodes (shared ingest). An unknown key, a key given twice, a value of the
// wrong type are 400s naming the key.
//
// # Errors
//
// Every 4xx and 5xx answers an ErrorView {kind, field, message}: the user's fault 400 (kind
// user, field the JSON key), no or bad credentials 401 (auth), a role refused or a request
// that fails the CSRF rules 403 (forbidden), an unknown job or one of another client 404
// (not_found), cancelling a job that already ended 409 (conflict, naming its state), a method a path's routes do not take 405 (method_not_allowed, with an Allow
// header; after the credentials those routes need), limits 413 and 429 (limit), a panic 500,
// the backend's failures 502 and 503 (failure). The JSON escapes no <, > or & for HTML. The
// field is at most 64 bytes and the message 1 KiB (cut with "..."): both may quote the
// request.
//
// # Streams
//
// The cluster stream sends event cluster (ClusterView) and event jobs ({"jobs": [...]}) at
// connect and after each of the backend's snapshots that changed them (Backend.Updated), and
// a ": ping" comment every 15 s. A job's stream sends event job (the job whole), then event
// progress after each snapshot that changed it (history holding only the points after those
// sent, events only the new ones), then event end (the job whole) and closes; a job no
// member knows any more ends it with event error. Streams are bounded in total (MaxStreams)
// and per identity (MaxStreamsPerIdentity): past either, 429. Each write of a stream (and of
// a download) has WriteTimeout to complete: a reader that does not read is cut and its slot
// freed; a stream costs the cluster nothing, as it reads the backend's snapshot.
//
// # Bounds
//
// A request's body is at most MaxBody (413), its headers 16 KiB (431); headers must arrive in
// 5 s and a request in 30 s; an idle connection is closed after 60 s; at most 512
// connections are served at once, MaxStreams+64 (320) from one remote address (internal/slots): a newcomer
// past either bound closes the oldest connection of its own address, or of the address
// holding the most, so that connections held from a few addresses cannot keep the operator
// or a probe out. A panic in a handler or the
// backend answers 500 and is logged; the server keeps serving. Every answer carries
// Content-Security-Policy default-src 'self', X-Content-Type-Options nosniff,
// X-Frame-Options DENY and Referrer-Policy no-referrer, and an HTTPS one
// Strict-Transport-Security max-age=31536000; the dashboard loads nothing from
// the internet.
//
// # The dashboard
//
// The page is embedded from web/ (index.html, app.js, style.css; login.html and login.js for
// a browser without a session): plain HTML, CSS and JavaScript that put every string from the
// API in as text. It follows /api/v1/events for the members and jobs and
// /api/v1/jobs/{id}/events for the selected job: its convergence chart (rel_err2 on a log
// axis, the held-out error when there is one), its timeline of checkpoints, failures,
// recoveries and takeovers, its spec, and, once ended, its outputs and pictures. It cancels
// with DELETE and the X-Didnmf-CSRF header. When its node stops answering it says so, links
// the other members' dashboards (MemberView.HTTP) and retries; at phone width its tables
// become cards. TestDashboardInBrowser drives it in headless Chromium (internal/browsertest).
package httpapi
