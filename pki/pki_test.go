package pki

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// handshake runs a TLS handshake between a server and a client configuration over a pipe and
// returns the client's error.
func handshake(server, client *tls.Config) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer lis.Close()
	done := make(chan error, 1)
	go func() {
		conn, err := lis.Accept()
		if err != nil {
			done <- err
			return
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		s := tls.Server(conn, server)
		err = s.Handshake()
		if err == nil {
			_, err = s.Write([]byte("ok"))
		}
		s.Close()
		done <- err
	}()
	conn, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		return err
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	c := tls.Client(conn, client)
	err = c.Handshake()
	if err == nil {
		// TLS 1.3: the server judges the client certificate after the client's side of the
		// handshake; reading shows its verdict.
		buf := make([]byte, 2)
		_, err = io.ReadFull(c, buf)
	}
	c.Close()
	serr := <-done
	if err == nil {
		err = serr
	}
	return err
}

func issue(t *testing.T, ca *CA, name string, hosts ...string) tls.Certificate {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(name, hosts)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

func TestMutualTLS(t *testing.T) {
	ca, err := NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("other CA")
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(pair tls.Certificate, ca *CA) *Config {
		c, err := FromPEM(pair, ca.CertPEM, "ca.pem")
		if err != nil {
			t.Fatal(err)
		}
		c.Client.ServerName = "127.0.0.1"
		return c
	}
	node := cfg(issue(t, ca, "node", "127.0.0.1"), ca)
	for _, c := range []struct {
		name   string
		client *tls.Config
		ok     bool
	}{
		{"same authority", cfg(issue(t, ca, "client", "127.0.0.1"), ca).Client, true},
		{"client certificate from another authority", cfg(issue(t, other, "client", "127.0.0.1"), ca).Client, false},
		{"client trusting another authority", cfg(issue(t, ca, "client", "127.0.0.1"), other).Client, false},
		{"no client certificate", &tls.Config{RootCAs: node.Client.RootCAs, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}, false},
		{"server name not in the certificate", func() *tls.Config {
			c := cfg(issue(t, ca, "client", "127.0.0.1"), ca).Client
			c.ServerName = "10.1.2.3"
			return c
		}(), false},
	} {
		err := handshake(node.Server, c.client)
		if (err == nil) != c.ok {
			t.Errorf("%s: handshake error %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

func TestLoadAndCAFiles(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	caCert, caKey := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if err := Write(caCert, ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(caKey, ca.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(caKey, ca.KeyPEM, 0o600); err == nil {
		t.Error("Write overwrote an existing file")
	}
	again, err := LoadCA(caCert, caKey)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := again.Issue("n", []string{"127.0.0.1", "node.example"})
	if err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(dir, "n.pem"), filepath.Join(dir, "n-key.pem")
	os.WriteFile(cert, certPEM, 0o644)
	os.WriteFile(key, keyPEM, 0o600)
	if _, err := Load(cert, key, caCert); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, cert, key, ca string }{
		{"missing cert", filepath.Join(dir, "none.pem"), key, caCert},
		{"key of another cert", cert, caKey, caCert},
		{"CA file without a certificate", cert, key, key},
		{"missing CA", cert, key, filepath.Join(dir, "none.pem")},
	} {
		if _, err := Load(c.cert, c.key, c.ca); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	if _, err := LoadCA(cert, key); err == nil {
		t.Error("LoadCA took a node certificate")
	}
	if _, _, err := ca.Issue("x", nil); err == nil {
		t.Error("Issue without hosts: no error")
	}
}
