package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/flood"
	"github.com/didnmf/didnmf/internal/slots"
)

// TestFailLimitAfterAuth: bad tokens past the limit do not lock the operator's valid token
// out of that address; only failing requests get 429.
func TestFailLimitAfterAuth(t *testing.T) {
	ts := startServer(t, Config{})
	for i := 0; i <= failsPerMinute; i++ {
		ts.do(t, "GET", "/api/v1/whoami", bearer("bad-token"), "")
	}
	for _, tt := range []struct {
		name, auth string
		want       int
	}{
		{"operator's token", ts.op, 200},
		{"client token", bearer(ClientToken(testSecret, "alice")), 200},
		{"bad token over the limit", bearer("bad-token"), 429},
	} {
		if code, body, _ := ts.do(t, "GET", "/api/v1/whoami", tt.auth, ""); code != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.name, code, body, tt.want)
		}
	}
	// Plain HTTP answers carry no HSTS (only HTTPS ones, TestMTLS).
	if _, _, h := ts.do(t, "GET", "/healthz", "", ""); h.Get("Strict-Transport-Security") != "" {
		t.Error("HSTS over plain HTTP")
	}
	// The login page too: a good token logs in, a bad one is refused with 429.
	if code, _, _ := ts.do(t, "GET", "/login?token="+ClientToken(testSecret, "alice"), "", ""); code != http.StatusSeeOther {
		t.Errorf("login with a good token over the limit: %d, want 303", code)
	}
	if code, _, _ := ts.do(t, "GET", "/login?token=bad", "", ""); code != 429 {
		t.Errorf("login with a bad token over the limit: %d, want 429", code)
	}
}

// TestSessionEviction: one client logging in past the cap evicts its own sessions, not the
// operator's.
func TestSessionEviction(t *testing.T) {
	ss := newSessions(8, time.Hour)
	op := ss.add(identity{name: "operator", role: roleOperator})
	bob := ss.add(identity{name: "bob", role: roleClient})
	var alice []string
	for i := 0; i < 30; i++ {
		alice = append(alice, ss.add(identity{name: "alice", role: roleClient}))
	}
	if ss.len() != 8 {
		t.Fatalf("%d sessions, want 8", ss.len())
	}
	for _, tt := range []struct {
		name, v string
		live    bool
	}{
		{"operator", op, true},
		{"bob", bob, true},
		{"alice's newest", alice[29], true},
		{"alice's oldest", alice[0], false},
	} {
		if _, ok := ss.get(tt.v); ok != tt.live {
			t.Errorf("%s: live %v, want %v", tt.name, ok, tt.live)
		}
	}
}

// TestErrorBounded: a huge unknown key is not echoed back whole.
func TestErrorBounded(t *testing.T) {
	ts := startServer(t, Config{})
	key := strings.Repeat("k", 100_000)
	code, body, _ := ts.do(t, "POST", "/api/v1/jobs", ts.op, `{"input": "synthetic:m=5,n=4,k=2", "rank": 2, "`+key+`": 1}`)
	var ev ErrorView
	if code != 400 || json.Unmarshal([]byte(body), &ev) != nil {
		t.Fatalf("%d %.200s", code, body)
	}
	if len(ev.Field) > maxErrorField || !strings.HasSuffix(ev.Field, "...") || len(ev.Message) > maxErrorMessage || len(body) > 2048 {
		t.Errorf("answer of %d bytes, field of %d, message of %d", len(body), len(ev.Field), len(ev.Message))
	}
	if got := clip("ééééé", 8); got != "éé..." {
		t.Errorf("clip cuts a rune: %q", got)
	}
}

// TestLoginCSRF: another site cannot log a browser in with its own token.
func TestLoginCSRF(t *testing.T) {
	ts := startServer(t, Config{})
	tok := ClientToken(testSecret, "mallory")
	for _, tt := range []struct {
		site string
		want int
	}{
		{"", http.StatusSeeOther},
		{"none", http.StatusSeeOther},
		{"same-origin", http.StatusSeeOther},
		{"same-site", http.StatusForbidden},
		{"cross-site", http.StatusForbidden},
	} {
		var hdr []string
		if tt.site != "" {
			hdr = []string{"Sec-Fetch-Site", tt.site}
		}
		code, _, h := ts.do(t, "GET", "/login?token="+tok, "", "", hdr...)
		if code != tt.want {
			t.Errorf("Sec-Fetch-Site %q: %d, want %d", tt.site, code, tt.want)
		}
		if code != http.StatusSeeOther && h.Get("Set-Cookie") != "" {
			t.Errorf("Sec-Fetch-Site %q: a cookie was set", tt.site)
		}
	}
}

// TestCancelEnded: DELETE on an ended job is a conflict naming its state.
func TestCancelEnded(t *testing.T) {
	ts := startServer(t, Config{})
	for _, tt := range []struct {
		state string
		want  int
	}{
		{"running", 202},
		{"done", 409},
		{"failed", 409},
		{"canceled", 409},
	} {
		code, body, _ := ts.do(t, "POST", "/api/v1/jobs", ts.op, `{"input": "synthetic:m=5,n=4,k=2", "rank": 2}`)
		var sub submittedView
		if code != 202 || json.Unmarshal([]byte(body), &sub) != nil {
			t.Fatalf("submit: %d %s", code, body)
		}
		ts.b.update(func(b *fakeBackend) {
			j := b.jobs[sub.ID]
			j.State = tt.state
			b.jobs[sub.ID] = j
		})
		code, body, _ = ts.do(t, "DELETE", sub.URL, ts.op, "")
		var ev ErrorView
		if code != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.state, code, body, tt.want)
		} else if code == 409 && (json.Unmarshal([]byte(body), &ev) != nil || ev.Kind != "conflict" || !strings.Contains(ev.Message, "already ended ("+tt.state+")")) {
			t.Errorf("%s: %s", tt.state, body)
		}
	}
}

// TestUnspecifiedAddr: New refuses a wildcard address, which URL and LoginURL would advertise.
func TestUnspecifiedAddr(t *testing.T) {
	for _, tt := range []struct {
		addr string
		ok   bool
	}{
		{"0.0.0.0:28270", false},
		{"[::]:28270", false},
		{"127.0.0.1:28270", true},
	} {
		_, err := New(Config{Addr: tt.addr, Backend: newFakeBackend(), Secret: testSecret})
		if (err == nil) != tt.ok || err != nil && !strings.Contains(err.Error(), "give the IP others reach this node at") {
			t.Errorf("%s: %v", tt.addr, err)
		}
	}
}

// TestConnFlood: connections held from 127.0.0.2-.5 past every bound do not keep the
// operator (127.0.0.1) or the readiness probe out.
func TestConnFlood(t *testing.T) {
	ts := startServer(t, Config{}, func(s *Server) { s.conns = slots.New(40, 10) })
	host := strings.TrimPrefix(ts.base, "http://")
	f := flood.Hold(host, []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}, 20, 50*time.Millisecond)
	defer f.Stop()
	if !f.WaitOpen(80, 10*time.Second) {
		t.Fatalf("flood opened %d connections", f.Opened())
	}
	if n := ts.conns.InUse(); n > 40 {
		t.Fatalf("%d connections held, bound 40", n)
	}
	for i := 0; i < 5; i++ {
		if code, body, _ := ts.do(t, "GET", "/api/v1/whoami", ts.op, ""); code != 200 {
			t.Fatalf("operator under the flood: %d %s", code, body)
		}
		if code, body, _ := ts.do(t, "GET", "/readyz", "", ""); code != 200 {
			t.Fatalf("/readyz under the flood: %d %s", code, body)
		}
	}
	if ts.conns.Evicted() == 0 {
		t.Error("no connection evicted: the flood did not fill the bounds")
	}
}
