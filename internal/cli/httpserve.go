package cli

import (
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/didnmf/didnmf/internal/httpapi"
	"github.com/didnmf/didnmf/internal/metrics"
	"github.com/didnmf/didnmf/internal/nodeview"
	"github.com/didnmf/didnmf/internal/server"
)

// httpFlags are serve's flags of the node's HTTP service: the dashboard, the JSON API and
// /metrics (internal/httpapi over internal/nodeview).
type httpFlags struct {
	addr, tokenFile, cert, key string
}

func (h *httpFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&h.addr, "http", "", "serve the dashboard, the HTTP API and /metrics on `IP:PORT` (default: off; port 0 picks one); every route but /healthz and /readyz needs a token or a certificate, and any address but loopback needs HTTPS (the node's certificate, or --http-cert and --http-key)")
	fs.StringVar(&h.tokenFile, "http-token-file", "", "the operator token of --http in this `FILE` (only this user may read it; at least 32 characters); default: derived from the cluster secret (didnmf dashboard prints it)")
	fs.StringVar(&h.cert, "http-cert", "", "the certificate `FILE` (PEM) --http serves HTTPS with, e.g. one browsers trust (default: plain HTTP on loopback, the node's own certificate elsewhere)")
	fs.StringVar(&h.key, "http-key", "", "the private key `FILE` (PEM) of --http-cert")
}

// nodeHTTP is a member's HTTP service. It is opened before the node starts, so that the URL
// it serves goes into the node's gossip metadata (other members' pages link to it), and
// started once the node runs.
type nodeHTTP struct {
	flags   httpFlags
	cr      creds
	ln      net.Listener
	url     string
	tls     bool
	token   string
	metrics *metrics.Metrics
	srv     atomic.Pointer[server.Server]
	view    *nodeview.View
	api     *httpapi.Server
}

// open checks the flags and listens; nil when --http is not given. version is the node's
// build, for /metrics' build info.
func (h httpFlags) open(cr creds, version string, logger *slog.Logger) (*nodeHTTP, error) {
	if h.addr == "" {
		if h.tokenFile != "" || h.cert != "" || h.key != "" {
			return nil, badInput("--http-token-file, --http-cert and --http-key configure --http, which is not given")
		}
		return nil, nil
	}
	host, _, err := net.SplitHostPort(h.addr)
	ip := net.ParseIP(host)
	if err != nil || ip == nil {
		return nil, badInput("--http %q: want IP:PORT, e.g. 127.0.0.1:8265", h.addr)
	}
	if ip.IsUnspecified() {
		return nil, badInput("--http %s: give the IP others reach this node at (or 127.0.0.1), not an unspecified address: the node advertises it in links and to the cluster", h.addr)
	}
	if (h.cert == "") != (h.key == "") {
		return nil, badInput("--http-cert and --http-key go together: give both or neither")
	}
	n := &nodeHTTP{flags: h, cr: cr, tls: h.cert != "" || !ip.IsLoopback()}
	if n.tls && h.cert == "" && cr.tls == nil && cr.secret == nil {
		return nil, badInput("--http %s is not loopback, so it needs HTTPS, and this node runs --insecure without a certificate of its own: give --http-cert and --http-key", h.addr)
	}
	if h.tokenFile != "" {
		if n.token, err = httpapi.ReadTokenFile(h.tokenFile); err != nil {
			return nil, badInput("--http-token-file: %v", err)
		}
	}
	if n.ln, err = net.Listen("tcp", h.addr); err != nil {
		return nil, badInput("--http %s: %v", h.addr, err)
	}
	scheme := "http"
	if n.tls {
		scheme = "https"
	}
	n.url = scheme + "://" + n.ln.Addr().String()
	n.metrics = metrics.New(n.metricsConfig(version, logger))
	return n, nil
}

// metricsConfig reads the node at scrape time, once it runs (before: nothing).
func (n *nodeHTTP) metricsConfig(version string, logger *slog.Logger) metrics.Config {
	return metrics.Config{Version: version, Logger: logger,
		Members: func() map[string]int {
			out := map[string]int{}
			if s := n.srv.Load(); s != nil {
				for _, k := range s.Members.Known() {
					out[string(k.State)]++
				}
			}
			return out
		},
		Jobs: func() map[string]int {
			if s := n.srv.Load(); s != nil {
				return s.Node.JobsByState()
			}
			return nil
		},
		Memory: func() (int64, int64) {
			if s := n.srv.Load(); s != nil {
				return s.Node.Memory()
			}
			return 0, 0
		},
		Drops: func() map[string]int64 {
			if s := n.srv.Load(); s != nil {
				return s.Node.Drops()
			}
			return nil
		},
		GossipBytes: func() (int64, int64) {
			if s := n.srv.Load(); s != nil {
				return s.Members.GossipBytes()
			}
			return 0, 0
		},
		GossipHealth: func() int {
			if s := n.srv.Load(); s != nil {
				return s.Members.HealthScore()
			}
			return 0
		},
	}
}

// start serves the node srv: its view of the cluster, then the HTTP server on the listener.
// dataDir keeps the outputs of the jobs submitted over HTTP without out_shared.
func (n *nodeHTTP) start(srv *server.Server, dataDir, version string, logger *slog.Logger) error {
	n.srv.Store(srv)
	view, err := nodeview.New(nodeview.Config{Server: srv, Logger: logger, DataDir: dataDir, Version: version})
	if err != nil {
		n.ln.Close()
		return err
	}
	cfg := httpapi.Config{Addr: n.ln.Addr().String(), Backend: view, Metrics: n.metrics.Handler(), Secret: n.cr.secret,
		Token: n.token, Insecure: n.cr.insecure, CertFile: n.flags.cert, KeyFile: n.flags.key, Logger: logger}
	if t := srv.TLS(); t != nil {
		cfg.CA = t.Server.ClientCAs
		if n.tls && n.flags.cert == "" && len(t.Server.Certificates) > 0 {
			cfg.Certificate = &t.Server.Certificates[0]
		}
	}
	api, err := httpapi.New(cfg)
	if err != nil {
		view.Close()
		n.ln.Close()
		return badInput("--http: %v", err)
	}
	n.view, n.api = view, api
	go func() {
		if err := api.Serve(n.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("the HTTP service stopped", slog.Any("error", err))
		}
	}()
	return nil
}

// loginURL is the URL that logs a browser in as the operator (the token in it: print it only
// to the secret's holder, as serve's stdout and didnmf dashboard are).
func (n *nodeHTTP) loginURL() string { return n.api.LoginURL() }

// close stops the HTTP server, then the view.
func (n *nodeHTTP) close() {
	if n == nil || n.api == nil {
		return
	}
	n.api.Close()
	n.view.Close()
}
