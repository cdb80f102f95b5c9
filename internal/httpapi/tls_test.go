package httpapi

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/pki"
)

// testCerts are a cluster's CA, a node's server certificate for 127.0.0.1, and the pool of
// the CA.
type testCerts struct {
	ca     *pki.CA
	server tls.Certificate
	pool   *x509.CertPool
}

func testCert(t *testing.T) testCerts {
	t.Helper()
	ca, err := pki.NewCA("test cluster")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueRole("node1", []string{"127.0.0.1"}, pki.RolePeer)
	if err != nil {
		t.Fatal(err)
	}
	server, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.CertPEM) {
		t.Fatal("CA PEM")
	}
	return testCerts{ca: ca, server: server, pool: pool}
}

// client returns an HTTPS client trusting the CA and presenting the certificate of name
// with role (role 0: none) issued by ca.
func (c testCerts) client(t *testing.T, ca *pki.CA, name string, role pki.Role) *http.Client {
	t.Helper()
	cfg := &tls.Config{RootCAs: c.pool, MinVersion: tls.VersionTLS12}
	if role != 0 {
		certPEM, keyPEM, err := ca.IssueRole(name, []string{"127.0.0.1"}, role)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		// Sent whatever CAs the server asks for (Go's client sends none that does not match).
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

// TestMTLS checks the identities of client certificates over HTTPS: a client's certificate
// of the cluster's CA is that client, a peer's is an operator, none is no credential, and a
// certificate of another CA is refused at the handshake.
func TestMTLS(t *testing.T) {
	certs := testCert(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Addr: ln.Addr().String(), Backend: newFakeBackend(), Secret: testSecret, Certificate: &certs.server, CA: certs.pool})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	defer func() {
		s.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	}()
	if s.URL()[:8] != "https://" {
		t.Fatalf("URL %s", s.URL())
	}
	stranger, err := pki.NewCA("another cluster")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		client     *http.Client
		auth       string
		want       int
		who, role  string
		handshakes bool
	}{
		{"client certificate", certs.client(t, certs.ca, "carol", pki.RoleClient), "", 200, "carol", "client", true},
		{"peer certificate", certs.client(t, certs.ca, "node2", pki.RolePeer), "", 200, "node2", "operator", true},
		// A client certificate named as an owner that is no client's would see its jobs.
		{"client certificate named local", certs.client(t, certs.ca, "local", pki.RoleClient), "", 401, "", "", true},
		{"client certificate named operator", certs.client(t, certs.ca, "operator", pki.RoleClient), "", 401, "", "", true},
		{"no certificate", certs.client(t, certs.ca, "", 0), "", 401, "", "", true},
		{"no certificate, a token", certs.client(t, certs.ca, "", 0), bearer(ClientToken(testSecret, "dave")), 200, "dave", "client", true},
		{"another CA's certificate", certs.client(t, stranger, "eve", pki.RolePeer), "", 0, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", s.URL()+"/api/v1/whoami", nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := tt.client.Do(req)
			if !tt.handshakes {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("a certificate of another CA was taken: %d", resp.StatusCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.want, body)
			}
			if tt.want != 200 {
				return
			}
			var w whoamiView
			if err := json.Unmarshal(body, &w); err != nil || w.Name != tt.who || w.Role != tt.role {
				t.Fatalf("whoami %s, want %s %s", body, tt.who, tt.role)
			}
		})
	}
	// A stream over HTTP/2 (its per-write deadlines work there too).
	h2 := certs.client(t, certs.ca, "carol", pki.RoleClient)
	h2.Transport.(*http.Transport).ForceAttemptHTTP2 = true
	h2.Timeout = 0
	resp, err := h2.Get(s.URL() + "/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 {
		t.Fatalf("stream over %s: %d", resp.Proto, resp.StatusCode)
	}
	if ev := readEvent(t, bufio.NewReader(resp.Body)); ev.name != "cluster" {
		t.Fatalf("first event over HTTP/2: %+v", ev)
	}
	resp.Body.Close()

	// The login cookie is Secure under TLS.
	resp, err = certs.client(t, certs.ca, "", 0).Get(s.LoginURL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if hsts := resp.Header.Get("Strict-Transport-Security"); !strings.HasPrefix(hsts, "max-age=31536000") {
		t.Errorf("HTTPS answer without HSTS: %q", hsts)
	}
	var secure bool
	for _, c := range resp.Request.Response.Cookies() {
		secure = secure || c.Name == s.cookieName() && c.Secure
	}
	if !secure {
		t.Error("no Secure session cookie under TLS")
	}
}
