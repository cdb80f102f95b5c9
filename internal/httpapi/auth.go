package httpapi

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/didnmf/didnmf/internal/evict"

	"github.com/didnmf/didnmf/pki"
)

// Labels of the token derivations (HMAC-SHA256 keyed by the cluster secret).
const (
	operatorLabel = "didnmf http operator token v1"
	clientLabel   = "didnmf http client token v1\x00"
	// clientPrefix starts a client token: c1.NAME.HEX.
	clientPrefix = "c1."
	// maxClientName bounds a client's name.
	maxClientName = 64
)

// OperatorToken returns the operator token of the cluster with this secret: the hex of
// HMAC-SHA256(secret, "didnmf http operator token v1"). It sees and controls everything.
func OperatorToken(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(operatorLabel))
	return hex.EncodeToString(m.Sum(nil))
}

// ClientToken returns the token of client name in the cluster with this secret,
// c1.NAME.HEX, HEX = HMAC-SHA256(secret, "didnmf http client token v1\x00"+NAME): its holder
// sees the cluster and only its own jobs, and submits as name. Check the name first with
// CheckClientName (a token of a bad name is never accepted).
func ClientToken(secret []byte, name string) string {
	return clientPrefix + name + "." + hex.EncodeToString(clientMAC(secret, name))
}

func clientMAC(secret []byte, name string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(clientLabel + name))
	return m.Sum(nil)
}

// CheckClientName returns an error when name cannot be a client's: 1 to 64 characters of
// letters, digits, '-', '_', '.' and '@', and none of the owners no client is (local, the
// jobs of the node's own process; operator, the HTTP operator's: pki.ReservedClientName).
func CheckClientName(name string) error {
	if name == "" || len(name) > maxClientName {
		return fmt.Errorf("client name %q: want 1 to %d characters", name, maxClientName)
	}
	if pki.ReservedClientName(name) {
		return fmt.Errorf("client name %q is reserved: %q owns the jobs of a node's own process and %q the HTTP operator's; choose another name",
			name, pki.LocalOwner, pki.OperatorOwner)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.@", c)) {
			return fmt.Errorf("client name %q: only letters, digits, '-', '_', '.' and '@'", name)
		}
	}
	return nil
}

// role is what an identity may do over HTTP.
type role uint8

const (
	// roleOperator sees and controls everything (the operator token, a peer certificate).
	roleOperator role = 1 << iota
	// roleClient sees the cluster and its own jobs, and submits as itself.
	roleClient
)

// anyRole is every identity; open routes have no role (none needed).
const anyRole = roleOperator | roleClient

func (r role) String() string {
	if r == roleClient {
		return "client"
	}
	return "operator"
}

// identity is who makes a request.
type identity struct {
	name string
	role role
	// via says how it was authenticated: token, session or certificate.
	via string
}

// owner returns the owner a job of this identity's has, and the filter of the jobs it
// sees ("": all).
func (id identity) filter() string {
	if id.role == roleOperator {
		return ""
	}
	return id.name
}

// operatorName is the name of the operator authenticated by token or session, and the owner
// of the jobs it submits: a name no client may have (CheckClientName), so that no client
// sees those jobs as its own.
const operatorName = pki.OperatorOwner

// errNoCredentials and errBadCredentials are the 401s of authenticate.
var (
	errNoCredentials  = errors.New("no credentials: give a bearer token (Authorization: Bearer TOKEN), log in with the URL didnmf serve or didnmf dashboard prints, or present a certificate of the cluster")
	errBadCredentials = errors.New("the token is not valid here")
)

// authenticate returns who makes r: a bearer token (operator or client), else a verified
// certificate of the cluster's CA, else a session cookie. A bearer that is no valid token is
// errBadCredentials (counted against the address); no credential is errNoCredentials.
func (s *Server) authenticate(r *http.Request) (identity, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return identity{}, errBadCredentials
		}
		id, ok := s.tokenIdentity(strings.TrimSpace(tok))
		if !ok {
			return identity{}, errBadCredentials
		}
		return id, nil
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		cert := r.TLS.VerifiedChains[0][0]
		name := cert.Subject.CommonName
		if pki.RoleOf(cert) == pki.RoleClient {
			if CheckClientName(name) != nil {
				return identity{}, errBadCredentials
			}
			return identity{name: name, role: roleClient, via: "certificate"}, nil
		}
		return identity{name: name, role: roleOperator, via: "certificate"}, nil
	}
	if c, err := r.Cookie(s.cookieName()); err == nil {
		if id, ok := s.sessions.get(c.Value); ok {
			id.via = "session"
			return id, nil
		}
	}
	return identity{}, errNoCredentials
}

// tokenIdentity returns the identity of a token: the operator token, or a client token when
// the server has the secret. Comparisons take constant time.
func (s *Server) tokenIdentity(tok string) (identity, bool) {
	if len(tok) > 512 {
		return identity{}, false
	}
	if subtle.ConstantTimeCompare([]byte(tok), []byte(s.operator)) == 1 {
		return identity{name: operatorName, role: roleOperator, via: "token"}, true
	}
	rest, ok := strings.CutPrefix(tok, clientPrefix)
	if !ok || len(s.cfg.Secret) == 0 {
		return identity{}, false
	}
	dot := strings.LastIndexByte(rest, '.')
	if dot < 0 {
		return identity{}, false
	}
	name, mac := rest[:dot], rest[dot+1:]
	if CheckClientName(name) != nil {
		return identity{}, false
	}
	got, err := hex.DecodeString(mac)
	if err != nil || !hmac.Equal(got, clientMAC(s.cfg.Secret, name)) {
		return identity{}, false
	}
	return identity{name: name, role: roleClient, via: "token"}, true
}

// checkCSRF refuses a mutating request authenticated by the session cookie (which a browser
// sends on its own) unless it shows it comes from this server's page: a JSON body or the
// X-Didnmf-CSRF header, and no cross-origin marks (Origin other than the server's own,
// Sec-Fetch-Site cross-site).
func (s *Server) checkCSRF(r *http.Request, id identity) error {
	if id.via != "session" {
		return nil
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	if err := s.csrf.Check(r); err != nil {
		return errors.New("cross-origin request refused")
	}
	if o := r.Header.Get("Origin"); o != "" && o != s.originOf(r) {
		return fmt.Errorf("origin %q is not this server's", o)
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "application/json" || r.Header.Get("X-Didnmf-CSRF") == "1" {
		return nil
	}
	return errors.New("a request authenticated by the session cookie must send Content-Type: application/json (POST) or X-Didnmf-CSRF: 1 (DELETE)")
}

// originOf returns the origin a browser names for this server when it fetched r.
func (s *Server) originOf(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// remoteIP returns the request's remote address without its port.
func remoteIP(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		ip, _ := netip.ParseAddr(host)
		return ip.Unmap()
	}
	return ap.Addr().Unmap()
}

// Sessions.

// sessionCookie is the login cookie's name, before the server's port (see cookieName).
const sessionCookie = "didnmf_session"

// cookieName is the name of this server's login cookie: didnmf_session_PORT. Browsers keep
// one cookie of a name per host whatever the port (RFC 6265, 8.5: cookies do not isolate by
// port), so with one name the nodes of one machine (the demo's three, say) would share it, and
// logging in to one node's page would log the others' pages out.
func (s *Server) cookieName() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, port, _ := net.SplitHostPort(s.addr)
	return sessionCookie + "_" + port
}

// sessions are the login sessions: by the SHA-256 of their cookie (so that a lookup's time
// says nothing of the secret value), bounded in count (the oldest of the identity holding the most goes first) and life.
type sessions struct {
	max int
	ttl time.Duration

	mu sync.Mutex
	m  map[[32]byte]session
}

type session struct {
	id      identity
	created time.Time
}

func newSessions(max int, ttl time.Duration) *sessions {
	return &sessions{max: max, ttl: ttl, m: map[[32]byte]session{}}
}

// add makes a session for id and returns its cookie value.
func (ss *sessions) add(id identity) string {
	b := make([]byte, 32)
	rand.Read(b)
	v := hex.EncodeToString(b)
	now := time.Now()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	id.via = ""
	if len(ss.m) >= ss.max {
		// Full: the expired go; if still full, the oldest session of the identity holding
		// the most (so that one client logging in again and again evicts only its own).
		maps.DeleteFunc(ss.m, func(_ [32]byte, s session) bool { return now.Sub(s.created) > ss.ttl })
		if len(ss.m) >= ss.max {
			all := func(yield func(evict.Entry[[32]byte, identity]) bool) {
				for k, s := range ss.m {
					if !yield(evict.Entry[[32]byte, identity]{Key: k, Owner: s.id, At: s.created.UnixNano()}) {
						return
					}
				}
			}
			k, _ := evict.Choose(all, nil, func(a, b [32]byte) bool { return bytes.Compare(a[:], b[:]) < 0 })
			delete(ss.m, k)
		}
	}
	ss.m[sha256.Sum256([]byte(v))] = session{id: id, created: now}
	return v
}

// get returns the identity of a cookie value, if its session lives.
func (ss *sessions) get(v string) (identity, bool) {
	if len(v) != 64 {
		return identity{}, false
	}
	k := sha256.Sum256([]byte(v))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[k]
	if !ok {
		return identity{}, false
	}
	if time.Since(s.created) > ss.ttl {
		delete(ss.m, k)
		return identity{}, false
	}
	return s.id, true
}

// remove ends a session.
func (ss *sessions) remove(v string) {
	ss.mu.Lock()
	delete(ss.m, sha256.Sum256([]byte(v)))
	ss.mu.Unlock()
}

func (ss *sessions) len() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.m)
}

// Failed authentications.

// failsPerMinute is how many failed authentications an address may make in a minute before
// its requests are refused with 429 until the minute ends.
const failsPerMinute = 20

// maxFailAddrs bounds the addresses tracked; past it, new addresses are not tracked (the
// tokens are 256-bit: the limit is against noise, not guessing).
const maxFailAddrs = 16384

// failLimiter counts failed authentications per remote address in fixed windows.
type failLimiter struct {
	max    int
	window time.Duration

	mu sync.Mutex
	m  map[netip.Addr]*failWindow
}

type failWindow struct {
	start time.Time
	n     int
}

func newFailLimiter(max int, window time.Duration) *failLimiter {
	return &failLimiter{max: max, window: window, m: map[netip.Addr]*failWindow{}}
}

// limited reports whether ip made too many failed authentications in its window.
func (f *failLimiter) limited(ip netip.Addr) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.m[ip]
	if w == nil {
		return false
	}
	if time.Since(w.start) > f.window {
		delete(f.m, ip)
		return false
	}
	return w.n >= f.max
}

// fail counts a failed authentication of ip, and reports whether ip has just reached the
// limit (once a window: the caller logs it).
func (f *failLimiter) fail(ip netip.Addr) bool {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.m[ip]
	if w == nil || now.Sub(w.start) > f.window {
		if w == nil && len(f.m) >= maxFailAddrs {
			for k, v := range f.m {
				if now.Sub(v.start) > f.window {
					delete(f.m, k)
				}
			}
			if len(f.m) >= maxFailAddrs {
				return false
			}
		}
		w = &failWindow{start: now}
		f.m[ip] = w
	}
	w.n++
	return w.n == f.max
}
