package httpapi

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/didnmf/didnmf/internal/slots"
	"github.com/didnmf/didnmf/pki"
)

// Defaults of Config's limits (a zero field takes its default).
const (
	DefaultMaxBody               = 1 << 20
	DefaultMaxStreams            = 256
	DefaultMaxStreamsPerIdentity = 32
	DefaultWriteTimeout          = 10 * time.Second
	DefaultMaxSessions           = 1024
	DefaultSessionTTL            = 12 * time.Hour
)

// Fixed bounds of the server (see doc.go).
const (
	maxHeaderBytes    = 16 << 10
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	idleTimeout       = 60 * time.Second
	maxConns          = 512
	// maxConnsPerIP is how many connections past MaxStreams one remote address may hold
	// (a client's streams each hold one under HTTP/1.1).
	maxConnsPerIP = 64
	// pingEvery is the period of a stream's heartbeat comment.
	pingEvery = 15 * time.Second
	// settleWait bounds the wait of a job not found for the backend's next snapshot (taken
	// about twice a second).
	settleWait = time.Second
	// backendTimeout bounds each call into the backend.
	backendTimeout = 10 * time.Second
	// minTokenLen is the shortest operator token a token file may hold.
	minTokenLen = 32
	// maxTokenFile bounds a token file's size.
	maxTokenFile = 4096
)

// Config configures a Server. Addr and Backend are required; the rest has defaults.
type Config struct {
	// Addr is the IP:PORT the server is reached at. An address that is not loopback needs
	// TLS (CertFile and KeyFile, or Certificate): New refuses it otherwise.
	Addr string
	// Backend is the node the service shows and controls.
	Backend Backend
	// Metrics serves GET /metrics (operator only); nil: 404.
	Metrics http.Handler

	// Secret is the cluster secret: the operator token and client tokens derive from it
	// (OperatorToken, ClientToken). Nil: no client tokens.
	Secret []byte
	// Token, when set, is the operator token instead of the one derived from Secret (the
	// content of a token file: see ReadTokenFile); at least 32 characters. With neither
	// Token nor Secret, the operator token is random, made at start (LoginURL prints it).
	Token string
	// Insecure is a cluster without credentials: the operator token is random, made at
	// start (LoginURL prints it), and no client token is valid.
	Insecure bool

	// CertFile and KeyFile are the server's certificate and key (PEM), or Certificate is it
	// (the node's own, from pki); either turns TLS on.
	CertFile, KeyFile string
	Certificate       *tls.Certificate
	// CA, when set with TLS, verifies client certificates: a peer's certificate is an
	// operator, a client's certificate is that client (its common name), as on the actor
	// port.
	CA *x509.CertPool

	// Logger receives refused requests (rate-limited), panics and stream cuts; nil: discard.
	Logger *slog.Logger

	// MaxBody bounds a request's body in bytes (DefaultMaxBody).
	MaxBody int64
	// MaxStreams bounds the event streams open at once, MaxStreamsPerIdentity those of one
	// identity (DefaultMaxStreams, DefaultMaxStreamsPerIdentity).
	MaxStreams, MaxStreamsPerIdentity int
	// WriteTimeout bounds each write of a stream or a download (DefaultWriteTimeout): a
	// reader that does not read within it is cut.
	WriteTimeout time.Duration
	// MaxSessions bounds the login sessions kept (the oldest goes first), SessionTTL their
	// life (DefaultMaxSessions, DefaultSessionTTL).
	MaxSessions int
	SessionTTL  time.Duration
}

// Server is a node's HTTP service: the dashboard, the JSON API, its event streams and
// /metrics. Make one with New and run it with Serve.
type Server struct {
	cfg      Config
	log      *slog.Logger
	tls      *tls.Config
	operator string // the operator token
	http     *http.Server
	handler  http.Handler
	// mux routes the route table; routeOf is each route by its pattern (for 405's Allow).
	mux      *http.ServeMux
	routeOf  map[string]route
	sessions *sessions
	fails    *failLimiter
	streams  *streamSlots
	// conns bounds the connections, in all and per remote address (slots evicts the oldest
	// of the address holding the most for a newcomer).
	conns *slots.Limiter
	csrf  *http.CrossOriginProtection
	// ping is the heartbeat period of streams (pingEvery), settle the longest a job not
	// found waits for the next snapshot (settleWait); tests shorten them.
	ping, settle time.Duration

	mu     sync.Mutex
	addr   string
	closed bool
	done   chan struct{}
}

// New checks cfg and returns a server ready to Serve. It refuses an address that is not
// loopback without TLS, and an operator token file shorter than 32 characters.
func New(cfg Config) (*Server, error) {
	if cfg.Backend == nil {
		return nil, errors.New("httpapi: no Backend")
	}
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("http address %q: want IP:PORT, e.g. 127.0.0.1:8265", cfg.Addr)
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		return nil, fmt.Errorf("http address %s is unspecified: the server advertises its address in links and to the cluster, so give the IP others reach this node at (or 127.0.0.1)", cfg.Addr)
	}
	cfg.MaxBody = orDefault(cfg.MaxBody, DefaultMaxBody)
	cfg.MaxStreams = orDefault(cfg.MaxStreams, DefaultMaxStreams)
	cfg.MaxStreamsPerIdentity = orDefault(cfg.MaxStreamsPerIdentity, DefaultMaxStreamsPerIdentity)
	cfg.WriteTimeout = orDefault(cfg.WriteTimeout, DefaultWriteTimeout)
	cfg.MaxSessions = orDefault(cfg.MaxSessions, DefaultMaxSessions)
	cfg.SessionTTL = orDefault(cfg.SessionTTL, DefaultSessionTTL)
	s := &Server{cfg: cfg, log: cfg.Logger, addr: cfg.Addr, done: make(chan struct{}), ping: pingEvery, settle: settleWait,
		conns: slots.New(maxConns, min(maxConns, cfg.MaxStreams+maxConnsPerIP))}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.tls, err = serverTLS(cfg); err != nil {
		return nil, err
	}
	if s.tls == nil && !isLoopback(host) {
		return nil, fmt.Errorf("http address %s is not loopback: serving the dashboard and API there needs HTTPS (the node's certificate, which a cluster with a secret or certificates has, or --http-cert and --http-key), or bind a loopback address such as 127.0.0.1", cfg.Addr)
	}
	switch {
	case cfg.Token != "":
		if len(cfg.Token) < minTokenLen {
			return nil, fmt.Errorf("the HTTP operator token is %d characters: give at least %d (e.g. openssl rand -hex 32 > FILE)", len(cfg.Token), minTokenLen)
		}
		s.operator = cfg.Token
	case len(cfg.Secret) > 0 && !cfg.Insecure:
		s.operator = OperatorToken(cfg.Secret)
	default:
		b := make([]byte, 32)
		rand.Read(b)
		s.operator = hex.EncodeToString(b)
	}
	if cfg.Insecure {
		s.cfg.Secret = nil // no client tokens without a secret
	}
	s.sessions = newSessions(cfg.MaxSessions, cfg.SessionTTL)
	s.fails = newFailLimiter(failsPerMinute, time.Minute)
	s.streams = newStreamSlots(cfg.MaxStreams, cfg.MaxStreamsPerIdentity)
	s.csrf = http.NewCrossOriginProtection()
	s.handler = s.routes()
	s.http = &http.Server{
		Handler:           s.handler,
		TLSConfig:         s.tls,
		MaxHeaderBytes:    maxHeaderBytes,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		// An answer's writes end within this; streams and downloads set their own deadline
		// before each write instead (http.ResponseController), and clear the read deadline.
		WriteTimeout: backendTimeout + cfg.WriteTimeout,
		IdleTimeout:  idleTimeout,
		ErrorLog:     slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	return s, nil
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// serverTLS returns the server's TLS configuration (nil: plain HTTP).
func serverTLS(cfg Config) (*tls.Config, error) {
	var cert tls.Certificate
	switch {
	case cfg.CertFile != "" || cfg.KeyFile != "":
		if cfg.CertFile == "" || cfg.KeyFile == "" {
			return nil, errors.New("HTTPS needs both a certificate and its key (--http-cert and --http-key)")
		}
		c, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("HTTPS certificate %s and key %s: %w", cfg.CertFile, cfg.KeyFile, err)
		}
		cert = c
	case cfg.Certificate != nil:
		cert = *cfg.Certificate
	default:
		return nil, nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
	if cfg.CA != nil {
		t.ClientCAs, t.ClientAuth = cfg.CA, tls.VerifyClientCertIfGiven
	}
	return t, nil
}

// isLoopback reports whether host (an IP or a name) is a loopback address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// Serve serves on ln (at most 512 connections at once) until Close; it returns
// http.ErrServerClosed then. A plain listener that is not loopback is refused as in New.
func (s *Server) Serve(ln net.Listener) error {
	host, _, _ := net.SplitHostPort(ln.Addr().String())
	if s.tls == nil && !isLoopback(host) {
		ln.Close()
		return fmt.Errorf("http listener %s is not loopback: it needs HTTPS", ln.Addr())
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return http.ErrServerClosed
	}
	if _, port, _ := net.SplitHostPort(s.addr); port == "0" {
		s.addr = ln.Addr().String()
	}
	s.mu.Unlock()
	ln = &slotListener{Listener: ln, slots: s.conns}
	if s.tls != nil {
		return s.http.ServeTLS(ln, "", "")
	}
	return s.http.Serve(ln)
}

// Close stops the server: the listener, every connection and every stream.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	s.mu.Unlock()
	return s.http.Close()
}

// Handler returns the server's handler (every route, with its authentication and bounds but
// the connection cap and timeouts of Serve), for tests and embedding.
func (s *Server) Handler() http.Handler { return s.handler }

// URL returns the server's base URL, e.g. https://10.0.0.5:8265.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	scheme := "http"
	if s.tls != nil {
		scheme = "https"
	}
	return scheme + "://" + s.addr
}

// LoginURL returns the URL that logs a browser in as the operator (URL/login?token=...), as
// Jupyter prints it: the page then works with a session cookie. It carries the operator
// token: print it only where the operator alone reads it.
func (s *Server) LoginURL() string {
	return s.URL() + "/login?token=" + url.QueryEscape(s.operator)
}

// ReadTokenFile reads an operator token file (--http-token-file): a file only its owner may
// read (pki.ReadPrivateFile), whose content, trimmed of white space, is at least 32
// characters.
func ReadTokenFile(path string) (string, error) {
	b, err := pki.ReadPrivateFile(path, "HTTP token file", maxTokenFile)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < minTokenLen {
		return "", fmt.Errorf("HTTP token file %s holds %d characters: give at least %d (e.g. openssl rand -hex 32 > %s)", path, len(tok), minTokenLen, path)
	}
	for _, c := range tok {
		if c <= ' ' || c > '~' {
			return "", fmt.Errorf("HTTP token file %s: the token must be printable ASCII without spaces", path)
		}
	}
	return tok, nil
}

// slotListener gives each accepted connection a slot of its remote address: a full Limiter
// closes the oldest connection of the address holding the most (or the newcomer's own
// address's oldest), so that a flood of held connections from a few addresses cannot keep
// the operator, a probe or a client out (netutil.LimitListener made them wait).
type slotListener struct {
	net.Listener
	slots *slots.Limiter
}

func (l *slotListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &slotConn{Conn: c}
	sc.slot = l.slots.Take(slots.RemoteIP(c), func() { c.Close() })
	return sc, nil
}

// slotConn gives its slot back when closed.
type slotConn struct {
	net.Conn
	slot *slots.Slot
}

func (c *slotConn) Close() error {
	c.slot.Release()
	return c.Conn.Close()
}
