package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
)

// TestJobsAPI walks the job routes as the operator: submit, list, get, cancel, outputs.
func TestJobsAPI(t *testing.T) {
	ts := startServer(t, Config{})
	code, body, hdr := ts.do(t, "POST", "/api/v1/jobs", ts.op, `{"input": "synthetic:m=50,n=40,k=3", "rank": 3, "shards": 2, "max_iter": 20}`)
	var sub submittedView
	if code != 202 || json.Unmarshal([]byte(body), &sub) != nil || sub.ID == "" || sub.URL != "/api/v1/jobs/"+sub.ID || hdr.Get("Location") != sub.URL {
		t.Fatalf("submit: %d %s", code, body)
	}
	ts.b.mu.Lock()
	got := ts.b.submitted[0]
	ts.b.mu.Unlock()
	if got.owner != "operator" || got.spec.Rank != 3 || got.spec.Shards != 2 || got.spec.Stop.MaxIter != 20 || got.spec.Inputs[0] != "synthetic:m=50,n=40,k=3,seed=1" {
		t.Fatalf("submitted %s %+v", got.owner, got.spec)
	}

	code, body, _ = ts.do(t, "GET", "/api/v1/jobs", ts.op, "")
	var list jobsView
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Jobs) != 1 || list.Jobs[0].ID != sub.ID {
		t.Fatalf("list: %d %s", code, body)
	}
	ts.b.update(func(b *fakeBackend) {
		j := b.jobs[sub.ID]
		j.State, j.History = "done", []PointView{{Iteration: 1, RelErr2: 0.5}}
		j.Outputs = []string{"report.json", "coef.npy", "figures/convergence.png"}
		b.jobs[sub.ID] = j
		b.outputs[sub.ID+"/report.json"] = []byte(`{"ok":true}`)
		b.outputs[sub.ID+"/coef.npy"] = []byte("\x93NUMPY")
		b.outputs[sub.ID+"/figures/convergence.png"] = []byte("\x89PNG")
	})
	code, body, _ = ts.do(t, "GET", sub.URL, ts.op, "")
	var j JobView
	if code != 200 || json.Unmarshal([]byte(body), &j) != nil || j.State != "done" || len(j.History) != 1 {
		t.Fatalf("get: %d %s", code, body)
	}
	for _, tt := range []struct {
		name, ctype, disp string
		want              int
	}{
		{"report.json", "application/json", "", 200},
		{"coef.npy", "application/octet-stream", "attachment", 200},
		{"figures/convergence.png", "image/png", "", 200},
		{"basis.npy", "", "", 404},
		{"figures/..%2Fcoef.npy", "", "", 404},
		{"figures/a.b.png", "", "", 404},
		{"figures/x.txt", "", "", 404},
		{"etc/passwd", "", "", 404},
	} {
		code, body, hdr := ts.do(t, "GET", sub.URL+"/outputs/"+tt.name, ts.op, "")
		if code != tt.want {
			t.Errorf("output %s: %d %s, want %d", tt.name, code, body, tt.want)
			continue
		}
		if tt.want == 200 && (hdr.Get("Content-Type") != tt.ctype || !strings.HasPrefix(hdr.Get("Content-Disposition"), tt.disp)) {
			t.Errorf("output %s: type %q disposition %q", tt.name, hdr.Get("Content-Type"), hdr.Get("Content-Disposition"))
		}
	}
	ts.b.update(func(b *fakeBackend) { j := b.jobs[sub.ID]; j.State = "running"; b.jobs[sub.ID] = j }) // an ended one is 409 (TestCancelEnded)
	code, body, _ = ts.do(t, "DELETE", sub.URL, ts.op, "")
	if code != 202 || !strings.Contains(body, sub.ID) {
		t.Fatalf("cancel: %d %s", code, body)
	}
	if code, _, _ := ts.do(t, "DELETE", "/api/v1/jobs/nope", ts.op, ""); code != 404 {
		t.Errorf("cancel of an unknown job: %d, want 404", code)
	}
}

// TestClientSeesOwnJobs checks that a client sees and controls only its own jobs: another's
// is 404 on every route, and its submissions are its own.
func TestClientSeesOwnJobs(t *testing.T) {
	ts := startServer(t, Config{})
	ts.b.update(func(b *fakeBackend) {
		b.jobs["bobs"] = JobView{ID: "bobs", Owner: "bob", State: "running"}
		b.jobs["alices"] = JobView{ID: "alices", Owner: "alice", State: "running"}
		b.outputs["bobs/report.json"] = []byte("{}")
	})
	alice := bearer(ClientToken(testSecret, "alice"))
	for _, tt := range []struct{ method, path string }{
		{"GET", "/api/v1/jobs/bobs"},
		{"DELETE", "/api/v1/jobs/bobs"},
		{"GET", "/api/v1/jobs/bobs/outputs/report.json"},
		{"GET", "/api/v1/jobs/bobs/events"},
	} {
		code, body, _ := ts.do(t, tt.method, tt.path, alice, "")
		if code != 404 || strings.Contains(body, "bob\"") {
			t.Errorf("%s %s as alice: %d %s, want a 404 that says nothing of bob's job", tt.method, tt.path, code, body)
		}
	}
	ts.b.mu.Lock()
	canceled := len(ts.b.canceled)
	ts.b.mu.Unlock()
	if canceled != 0 {
		t.Errorf("alice canceled bob's job")
	}
	code, body, _ := ts.do(t, "GET", "/api/v1/jobs", alice, "")
	var list jobsView
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Jobs) != 1 || list.Jobs[0].ID != "alices" {
		t.Errorf("alice's list: %d %s", code, body)
	}
	if code, _, _ := ts.do(t, "GET", "/api/v1/jobs/alices", alice, ""); code != 200 {
		t.Errorf("alice's own job: %d", code)
	}
	code, body, _ = ts.do(t, "GET", "/api/v1/jobs", ts.op, "")
	if json.Unmarshal([]byte(body), &list) != nil || len(list.Jobs) != 2 {
		t.Errorf("the operator's list: %d %s", code, body)
	}
	if code, _, _ := ts.do(t, "POST", "/api/v1/jobs", alice, `{"input": "synthetic:m=5,n=4,k=2", "rank": 2}`); code != 202 {
		t.Fatalf("alice's submit: %d", code)
	}
	ts.b.mu.Lock()
	owner := ts.b.submitted[0].owner
	ts.b.mu.Unlock()
	if owner != "alice" {
		t.Errorf("alice's job is owned by %q", owner)
	}
	// The operator's jobs are owned by "operator", a name no client may have (CheckClientName).
	if code, _, _ := ts.do(t, "POST", "/api/v1/jobs", ts.op, `{"input": "synthetic:m=5,n=4,k=2", "rank": 2}`); code != 202 {
		t.Fatalf("the operator's submit: %d", code)
	}
	ts.b.mu.Lock()
	owner = ts.b.submitted[1].owner
	ts.b.mu.Unlock()
	if owner != "operator" || CheckClientName(owner) == nil {
		t.Errorf("the operator's job is owned by %q, a name a client may have", owner)
	}
}

// TestBodyBounds checks that a body over MaxBody is refused with 413 as JSON, whether its
// length is announced or not.
func TestBodyBounds(t *testing.T) {
	ts := startServer(t, Config{MaxBody: 1024})
	big := `{"input": "` + strings.Repeat("a", 4096) + `", "rank": 2}`
	code, body, _ := ts.do(t, "POST", "/api/v1/jobs", ts.op, big)
	if code != 413 || !strings.Contains(body, `"kind":"limit"`) {
		t.Errorf("oversized body: %d %s", code, body)
	}
	req, _ := http.NewRequest("POST", ts.base+"/api/v1/jobs", struct{ *strings.Reader }{strings.NewReader(big)}) // no length: chunked
	req.Header.Set("Authorization", ts.op)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Errorf("oversized chunked body: %d", resp.StatusCode)
	}
	// Headers are bounded too.
	code, _, _ = ts.do(t, "GET", "/healthz", "", "", "X-Big", strings.Repeat("h", 64<<10))
	if code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("oversized headers: %d", code)
	}
}

// TestSubmitErrors checks that the user's errors are 400 with the field at fault named by
// its JSON key, the backend's own as well as the decoder's.
func TestSubmitErrors(t *testing.T) {
	ts := startServer(t, Config{})
	for _, tt := range []struct{ body, field, msg string }{
		{`{"rank": 2}`, "input", "input is required"},
		{`{"input": "x", "rank": 2, "bogus": 1}`, "bogus", `unknown key "bogus"`},
		{`{"input": "synthetic:m=5,n=4,k=2", "rank": 2, "fan_in": 3}`, "fan_in", "fan_in must be a power of two"},
		{`{"input": "/missing.npy", "rank": 2}`, "fan_in", "input /missing.npy: no such file (and fan_in 8)"},
		{`not json`, "", "not valid JSON"},
		{`{"input": "x", "rank": 0}`, "rank", "rank must be >= 1, got 0"},
	} {
		code, body, _ := ts.do(t, "POST", "/api/v1/jobs", ts.op, tt.body)
		var ev ErrorView
		if code != 400 || json.Unmarshal([]byte(body), &ev) != nil || ev.Kind != "user" || ev.Field != tt.field || !strings.Contains(ev.Message, tt.msg) {
			t.Errorf("submit %s: %d %s, want 400 field %q message with %q", tt.body, code, body, tt.field, tt.msg)
		}
		if strings.ContainsAny(tt.msg, "<>&") && !strings.Contains(body, tt.msg) {
			t.Errorf("submit %s: the answer escapes the message for HTML: %s", tt.body, body)
		}
	}
}

// TestJSONNotEscapedForHTML: the API's JSON (answers and SSE data) keeps <, > and & as they
// are, and stays one line (newlines and the JavaScript line separators escaped).
func TestJSONNotEscapedForHTML(t *testing.T) {
	for _, tt := range []struct {
		v    any
		want string
	}{
		{ErrorView{Kind: "user", Field: "rank", Message: "rank must be >= 1, got 0"}, `{"kind":"user","field":"rank","message":"rank must be >= 1, got 0"}`},
		{ErrorView{Message: "a<b & c>d"}, `{"kind":"","message":"a<b & c>d"}`},
		{ErrorView{Message: "two\nlines\r\u2028\u2029"}, `{"kind":"","message":"two\nlines\r\u2028\u2029"}`},
	} {
		b, err := marshalJSON(tt.v)
		if err != nil || string(b) != tt.want {
			t.Errorf("marshalJSON(%+v) = %s, %v; want %s", tt.v, b, err, tt.want)
		}
	}
}

// TestLoginAndCSRF walks the browser's way in: the login URL sets the session cookie and
// sends the token out of the address bar; the cookie then authenticates, mutating requests
// by cookie need the JSON type or the CSRF header and no foreign origin; logout ends it.
func TestLoginAndCSRF(t *testing.T) {
	ts := startServer(t, Config{})
	code, body, hdr := ts.do(t, "GET", "/login?token="+url.QueryEscape(ts.operator), "", "")
	if code != 303 || hdr.Get("Location") != "/" {
		t.Fatalf("login: %d %s", code, hdr.Get("Location"))
	}
	resp := http.Response{Header: hdr}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == ts.cookieName() {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" || cookie.Secure {
		t.Fatalf("session cookie %+v", cookie)
	}
	cookieHdr := ts.cookieName() + "=" + cookie.Value
	code, body, _ = ts.do(t, "GET", "/", "", "", "Cookie", cookieHdr)
	if code != 200 || strings.Contains(body, `action="/login"`) {
		t.Errorf("the page with a session: %d, the login form", code)
	}
	code, body, _ = ts.do(t, "GET", "/api/v1/whoami", "", "", "Cookie", cookieHdr)
	if code != 200 || !strings.Contains(body, `"via":"session"`) {
		t.Errorf("whoami by session: %d %s", code, body)
	}
	spec := `{"input": "synthetic:m=5,n=4,k=2", "rank": 2}`
	ts.b.update(func(b *fakeBackend) { b.jobs["j1"] = JobView{ID: "j1", Owner: "x", State: "running"} })
	self := ts.base
	for _, tt := range []struct {
		name, method, path, body string
		hdr                      []string
		want                     int
	}{
		{"POST without the JSON type", "POST", "/api/v1/jobs", spec, []string{"Content-Type", "text/plain"}, 403},
		{"POST as a form", "POST", "/api/v1/jobs", spec, []string{"Content-Type", "application/x-www-form-urlencoded"}, 403},
		{"POST with JSON from another origin", "POST", "/api/v1/jobs", spec, []string{"Content-Type", "application/json", "Origin", "https://evil.example"}, 403},
		{"POST cross-site", "POST", "/api/v1/jobs", spec, []string{"Content-Type", "application/json", "Sec-Fetch-Site", "cross-site"}, 403},
		{"POST with JSON", "POST", "/api/v1/jobs", spec, []string{"Content-Type", "application/json"}, 202},
		{"POST with JSON from this origin", "POST", "/api/v1/jobs", spec, []string{"Content-Type", "application/json; charset=utf-8", "Origin", self}, 202},
		{"DELETE without the header", "DELETE", "/api/v1/jobs/j1", "", nil, 403},
		{"DELETE with the header", "DELETE", "/api/v1/jobs/j1", "", []string{"X-Didnmf-CSRF", "1"}, 202},
	} {
		h := append([]string{"Cookie", cookieHdr}, tt.hdr...)
		if code, body, _ := ts.do(t, tt.method, tt.path, "", tt.body, h...); code != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.name, code, body, tt.want)
		}
	}
	// A bearer token needs no CSRF header: no browser sends it on its own.
	if code, _, _ := ts.do(t, "DELETE", "/api/v1/jobs/j1", ts.op, ""); code != 202 {
		t.Errorf("DELETE by token: %d", code)
	}
	if code, _, _ := ts.do(t, "POST", "/logout", "", "{}", "Cookie", cookieHdr, "Content-Type", "application/json", "Origin", "https://evil.example"); code != 403 {
		t.Errorf("cross-origin logout: %d, want 403", code)
	}
	if code, _, _ := ts.do(t, "POST", "/logout", "", "{}", "Cookie", cookieHdr, "Content-Type", "application/json"); code != 204 {
		t.Errorf("logout: %d", code)
	}
	if code, _, _ := ts.do(t, "GET", "/api/v1/whoami", "", "", "Cookie", cookieHdr); code != 401 {
		t.Errorf("whoami after logout: %d, want 401", code)
	}
	if code, body, _ := ts.do(t, "GET", "/login?token=wrong", "", ""); code != 401 || !strings.Contains(body, "<form") {
		t.Errorf("login with a wrong token: %d, want 401 and the form", code)
	}
	// A client token logs in as that client.
	_, _, hdr = ts.do(t, "GET", "/login?token="+url.QueryEscape(ClientToken(testSecret, "alice")), "", "")
	resp = http.Response{Header: hdr}
	for _, c := range resp.Cookies() {
		if c.Name == ts.cookieName() {
			cookieHdr = ts.cookieName() + "=" + c.Value
		}
	}
	if code, body, _ := ts.do(t, "GET", "/api/v1/whoami", "", "", "Cookie", cookieHdr); code != 200 || !strings.Contains(body, `"name":"alice"`) {
		t.Errorf("whoami after a client's login: %d %s", code, body)
	}
}

// TestSessionsBounded checks that sessions are bounded: past MaxSessions the oldest goes.
func TestSessionsBounded(t *testing.T) {
	ss := newSessions(3, DefaultSessionTTL)
	first := ss.add(identity{name: "b", role: roleOperator}) // one identity: its oldest goes (TestSessionEviction)
	for i := 0; i < 10; i++ {
		ss.add(identity{name: "b", role: roleOperator})
	}
	if ss.len() != 3 {
		t.Errorf("%d sessions, want 3", ss.len())
	}
	if _, ok := ss.get(first); ok {
		t.Error("the oldest session outlived the bound")
	}
	expired := newSessions(3, -1)
	v := expired.add(identity{name: "a"})
	if _, ok := expired.get(v); ok {
		t.Error("an expired session was taken")
	}
}

// TestSessionsOfOneHostsPorts: a browser keeps one cookie of a name per host whatever the
// port, so two nodes of one machine (the demo's) name their cookies apart: logging in to the
// second does not log the first out.
func TestSessionsOfOneHostsPorts(t *testing.T) {
	a, b := startServer(t, Config{}), startServer(t, Config{})
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	cl := &http.Client{Jar: jar}
	whoami := func(ts *testServer) int {
		t.Helper()
		resp, err := cl.Get(ts.base + "/api/v1/whoami")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, ts := range []*testServer{a, b} {
		resp, err := cl.Get(ts.LoginURL())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if code := whoami(ts); code != 200 {
			t.Fatalf("whoami after the login to %s: %d", ts.base, code)
		}
	}
	if code := whoami(a); code != 200 {
		t.Errorf("logging in to %s logged %s out: whoami %d", b.base, a.base, code)
	}
	if a.cookieName() == b.cookieName() {
		t.Errorf("both servers name their cookie %s", a.cookieName())
	}
}

// TestMethodNotAllowed: a path a route serves by other methods answers 405 with the Allow
// header and a JSON body (after the credentials its routes need), an unknown path 404.
func TestMethodNotAllowed(t *testing.T) {
	ts := startServer(t, Config{})
	ts.b.update(func(b *fakeBackend) { b.jobs["j1"] = JobView{ID: "j1", Owner: "x", State: "running"} })
	for _, tt := range []struct {
		method, path, auth string
		code               int
		allow              string
	}{
		{"POST", "/healthz", "", 405, "GET, HEAD"},
		{"DELETE", "/readyz", "", 405, "GET, HEAD"},
		{"GET", "/logout", "", 405, "POST"},
		{"PUT", "/api/v1/jobs", ts.op, 405, "GET, HEAD, POST"},
		{"PATCH", "/api/v1/jobs/j1", ts.op, 405, "GET, HEAD, DELETE"},
		{"POST", "/api/v1/jobs/j1/events", ts.op, 405, "GET, HEAD"},
		{"DELETE", "/metrics", ts.op, 405, "GET, HEAD"},
		{"POST", "/api/v1/jobs/j1", "", 401, ""}, // the API's routes need credentials first
		{"POST", "/api/v1/nothing", ts.op, 404, ""},
		{"GET", "/api/v1/jobs", ts.op, 200, ""},
	} {
		code, body, hdr := ts.do(t, tt.method, tt.path, tt.auth, "")
		if code != tt.code || hdr.Get("Allow") != tt.allow {
			t.Errorf("%s %s: %d Allow %q, want %d Allow %q: %s", tt.method, tt.path, code, hdr.Get("Allow"), tt.code, tt.allow, body)
			continue
		}
		var ev ErrorView
		if code == 405 && (json.Unmarshal([]byte(body), &ev) != nil || ev.Kind != "method_not_allowed" ||
			!strings.Contains(ev.Message, tt.method+" "+tt.path+": method not allowed (allowed: "+tt.allow+")") ||
			!strings.HasPrefix(hdr.Get("Content-Type"), "application/json")) {
			t.Errorf("%s %s: body %s, type %s", tt.method, tt.path, body, hdr.Get("Content-Type"))
		}
	}
}
