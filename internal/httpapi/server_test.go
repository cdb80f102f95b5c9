package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuth checks who may call what: every route but /healthz, /readyz (and the login page's
// assets) needs credentials, on loopback too; the operator token, a client token of the
// secret, and nothing else.
func TestAuth(t *testing.T) {
	ts := startServer(t, Config{})
	ts.b.update(func(b *fakeBackend) { b.ready = errors.New("not joined yet") })
	alice := bearer(ClientToken(testSecret, "alice"))
	other := bearer(ClientToken([]byte("another secret, another cluster!"), "alice"))
	tests := []struct {
		name, method, path, auth string
		want                     int
		kind                     string
	}{
		{"healthz is open", "GET", "/healthz", "", 200, ""},
		{"readyz is open, 503 when not ready", "GET", "/readyz", "", 503, ""},
		{"no token", "GET", "/api/v1/cluster", "", 401, "auth"},
		{"wrong token", "GET", "/api/v1/cluster", bearer(strings.Repeat("0", 64)), 401, "auth"},
		{"not a bearer", "GET", "/api/v1/cluster", "Basic b3BlcmF0b3I6eA==", 401, "auth"},
		{"operator token", "GET", "/api/v1/cluster", ts.op, 200, ""},
		{"client token", "GET", "/api/v1/cluster", alice, 200, ""},
		{"client token of another secret", "GET", "/api/v1/cluster", other, 401, "auth"},
		{"client token with a changed name", "GET", "/api/v1/cluster", bearer(strings.Replace(ClientToken(testSecret, "alice"), "alice", "mallory", 1)), 401, "auth"},
		{"client token of a bad name", "GET", "/api/v1/cluster", bearer(ClientToken(testSecret, "a/b")), 401, "auth"},
		{"client token named local", "GET", "/api/v1/jobs", bearer(ClientToken(testSecret, "local")), 401, "auth"},
		{"client token named operator", "GET", "/api/v1/jobs", bearer(ClientToken(testSecret, "operator")), 401, "auth"},
		{"metrics needs the operator", "GET", "/metrics", alice, 403, "forbidden"},
		{"metrics without a handler", "GET", "/metrics", ts.op, 404, "not_found"},
		{"jobs need credentials", "GET", "/api/v1/jobs", "", 401, "auth"},
		{"submit needs credentials", "POST", "/api/v1/jobs", "", 401, "auth"},
		{"cancel needs credentials", "DELETE", "/api/v1/jobs/j1", "", 401, "auth"},
		{"events need credentials", "GET", "/api/v1/events", "", 401, "auth"},
		{"assets need credentials", "GET", "/static/app.js", "", 401, "auth"},
		{"unknown route without credentials", "GET", "/nothing", "", 401, "auth"},
		{"unknown route", "GET", "/nothing", ts.op, 404, "not_found"},
		{"the page without credentials is the login form", "GET", "/", "", 200, ""},
	}
	for _, asset := range []string{"style.css", "favicon.svg", "login.js"} {
		// The login page's assets are open (whether this build has them or not).
		if code, body, _ := ts.do(t, "GET", "/static/"+asset, "", ""); code == 401 {
			t.Errorf("the login page's %s: %d %s", asset, code, body)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, hdr := ts.do(t, tt.method, tt.path, tt.auth, "")
			if code != tt.want {
				t.Fatalf("status %d, want %d: %s", code, tt.want, body)
			}
			if tt.kind != "" {
				var ev ErrorView
				if err := json.Unmarshal([]byte(body), &ev); err != nil || ev.Kind != tt.kind {
					t.Fatalf("body %q: want an ErrorView of kind %s", body, tt.kind)
				}
			}
			for _, h := range []string{"Content-Security-Policy", "X-Content-Type-Options", "X-Frame-Options"} {
				if hdr.Get(h) == "" {
					t.Errorf("no %s header", h)
				}
			}
		})
	}
}

// TestWhoami checks the identities the credentials give.
func TestWhoami(t *testing.T) {
	ts := startServer(t, Config{})
	for _, tt := range []struct{ auth, name, role string }{
		{ts.op, "operator", "operator"},
		{bearer(ClientToken(testSecret, "alice")), "alice", "client"},
		{bearer(ClientToken(testSecret, "bob@lab.example")), "bob@lab.example", "client"},
	} {
		code, body, _ := ts.do(t, "GET", "/api/v1/whoami", tt.auth, "")
		var w whoamiView
		if code != 200 || json.Unmarshal([]byte(body), &w) != nil || w.Name != tt.name || w.Role != tt.role {
			t.Errorf("whoami: %d %s, want %s %s", code, body, tt.name, tt.role)
		}
	}
}

// TestTokenFile checks that a token file's token is the operator's (and the secret's is not),
// and that a short one is refused.
func TestTokenFile(t *testing.T) {
	tok := strings.Repeat("x", 40)
	ts := startServer(t, Config{Token: tok})
	if code, body, _ := ts.do(t, "GET", "/api/v1/whoami", bearer(tok), ""); code != 200 {
		t.Errorf("token file's token: %d %s", code, body)
	}
	if code, _, _ := ts.do(t, "GET", "/api/v1/whoami", bearer(OperatorToken(testSecret)), ""); code != 401 {
		t.Errorf("the secret's operator token with a token file: %d, want 401", code)
	}
	if _, err := New(Config{Addr: "127.0.0.1:0", Backend: newFakeBackend(), Token: "short"}); err == nil {
		t.Error("a short token was taken")
	}
}

// TestInsecure checks that a cluster without credentials gets a random operator token and
// no client tokens.
func TestInsecure(t *testing.T) {
	ts := startServer(t, Config{Insecure: true, Secret: testSecret})
	if ts.operator == OperatorToken(testSecret) || len(ts.operator) != 64 {
		t.Fatalf("insecure operator token %q", ts.operator)
	}
	if !strings.Contains(ts.LoginURL(), "/login?token="+ts.operator) {
		t.Errorf("LoginURL %s", ts.LoginURL())
	}
	if code, _, _ := ts.do(t, "GET", "/api/v1/whoami", bearer(ClientToken(testSecret, "alice")), ""); code != 401 {
		t.Errorf("client token on an insecure node: %d, want 401", code)
	}
}

// TestTokens pins the derivations (didnmf dashboard prints them; they must not change).
func TestTokens(t *testing.T) {
	if got := OperatorToken(testSecret); len(got) != 64 || got == OperatorToken([]byte("other")) {
		t.Errorf("OperatorToken %q", got)
	}
	tok := ClientToken(testSecret, "alice")
	if !strings.HasPrefix(tok, "c1.alice.") || len(tok) != len("c1.alice.")+64 {
		t.Errorf("ClientToken %q", tok)
	}
	if ClientToken(testSecret, "alice") == ClientToken(testSecret, "alicf") {
		t.Error("two names, one token")
	}
	for _, tt := range []struct {
		name string
		ok   bool
	}{{"alice", true}, {"a.b-c_d@e", true}, {"", false}, {"a b", false}, {"a/b", false}, {strings.Repeat("a", 65), false}, {"é", false},
		// Owners that are no client's: the node's own process, the HTTP operator.
		{"local", false}, {"LOCAL", false}, {"operator", false}, {"Operator", false}, {"local2", true}, {"operators", true}} {
		if err := CheckClientName(tt.name); (err == nil) != tt.ok {
			t.Errorf("CheckClientName(%q) = %v", tt.name, err)
		}
	}
}

// TestFailedAuthRate checks that past 20 failed authentications a minute an address is
// refused with 429, the right token excepted.
func TestFailedAuthRate(t *testing.T) {
	ts := startServer(t, Config{})
	for i := 0; i < failsPerMinute; i++ {
		if code, _, _ := ts.do(t, "GET", "/api/v1/cluster", bearer("wrong"), ""); code != 401 {
			t.Fatalf("failure %d: %d, want 401", i, code)
		}
	}
	if code, _, _ := ts.do(t, "GET", "/api/v1/cluster", bearer("wrong"), ""); code != 429 {
		t.Fatalf("past the limit: %d, want 429", code)
	}
	if code, _, _ := ts.do(t, "GET", "/api/v1/cluster", ts.op, ""); code != 200 {
		t.Fatalf("the right token past the limit: %d, want 200 (only failures are limited)", code)
	}
	if code, _, _ := ts.do(t, "GET", "/login?token=wrong", "", ""); code != 429 {
		t.Fatalf("login past the limit: %d, want 429", code)
	}
	if code, _, _ := ts.do(t, "GET", "/healthz", "", ""); code != 200 {
		t.Fatalf("healthz past the limit: %d, want 200", code)
	}
}

// TestNonLoopbackNeedsTLS checks that an address other than loopback is refused without
// TLS, with an error that says how, and taken with it.
func TestNonLoopbackNeedsTLS(t *testing.T) {
	cert := testCert(t)
	for _, tt := range []struct {
		addr string
		tls  bool
		ok   bool
	}{
		{"127.0.0.1:8265", false, true},
		{"[::1]:8265", false, true},
		{"localhost:8265", false, true},
		{"192.0.2.1:8265", false, false},
		{":8265", false, false},
		{"10.0.0.5:8265", false, false},
		{"10.0.0.5:8265", true, true},
		{"0.0.0.0:8265", true, false}, // unspecified: TestUnspecifiedAddr
		{"nonsense", false, false},
	} {
		cfg := Config{Addr: tt.addr, Backend: newFakeBackend(), Secret: testSecret}
		if tt.tls {
			cfg.Certificate = &cert.server
		}
		_, err := New(cfg)
		if (err == nil) != tt.ok {
			t.Errorf("New(%s, tls %v) = %v, want ok %v", tt.addr, tt.tls, err, tt.ok)
		}
		if err != nil && !tt.tls && strings.Contains(tt.addr, ":8265") && !strings.Contains(tt.addr, "nonsense") && !strings.Contains(err.Error(), "HTTPS") {
			t.Errorf("error %q does not say HTTPS is needed", err)
		}
	}
}

// TestPanicIs500 checks that a panic in the backend answers 500 and the server keeps
// serving.
func TestPanicIs500(t *testing.T) {
	ts := startServer(t, Config{})
	ts.b.update(func(b *fakeBackend) { b.panics = true })
	code, body, _ := ts.do(t, "GET", "/api/v1/cluster", ts.op, "")
	var ev ErrorView
	if code != 500 || json.Unmarshal([]byte(body), &ev) != nil || ev.Kind != "failure" {
		t.Fatalf("panic: %d %s, want a 500 ErrorView", code, body)
	}
	ts.b.update(func(b *fakeBackend) { b.panics = false })
	if code, body, _ := ts.do(t, "GET", "/api/v1/cluster", ts.op, ""); code != 200 {
		t.Fatalf("after the panic: %d %s", code, body)
	}
}

// TestMetrics checks that /metrics serves the handler given, to the operator.
func TestMetrics(t *testing.T) {
	ts := startServer(t, Config{Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("didnmf_up 1\n"))
	})})
	if code, body, _ := ts.do(t, "GET", "/metrics", ts.op, ""); code != 200 || body != "didnmf_up 1\n" {
		t.Errorf("metrics: %d %q", code, body)
	}
	if code, _, _ := ts.do(t, "GET", "/metrics", "", ""); code != 401 {
		t.Errorf("metrics without a token: %d, want 401", code)
	}
}

// TestReadTokenFile checks the token file's rules: private, at least 32 printable characters.
func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, perm os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), perm); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, perm)
		return p
	}
	tok := strings.Repeat("k", 40)
	if got, err := ReadTokenFile(write("ok", tok+"\n", 0o600)); err != nil || got != tok {
		t.Errorf("ReadTokenFile = %q, %v", got, err)
	}
	for _, tt := range []struct {
		name, content string
		perm          os.FileMode
	}{
		{"short", "tooshort\n", 0o600},
		{"spaces", strings.Repeat("a b ", 10), 0o600},
		{"readable", tok, 0o644},
	} {
		if _, err := ReadTokenFile(write(tt.name, tt.content, tt.perm)); err == nil {
			t.Errorf("token file %s was taken", tt.name)
		}
	}
}
