// Package pki makes and loads the certificates of a didnmf cluster's mutual TLS: a private
// certificate authority, and node certificates signed by it that name the node's IP
// addresses and host names (gRPC checks the address it dials against them).
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"

	"github.com/didnmf/didnmf/internal/atomicfile"
)

// Validity is how long generated certificates are valid.
const Validity = 5 * 365 * 24 * time.Hour

// CA is a certificate authority that signs node certificates.
type CA struct {
	cert *x509.Certificate
	key  crypto.Signer
	// CertPEM and KeyPEM are the authority's certificate and private key, PEM encoded.
	CertPEM, KeyPEM []byte
}

// NewCA makes a new self-signed certificate authority with the given common name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl, err := template(name)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM}, nil
}

// LoadCA reads a certificate authority's certificate and key (PEM; ECDSA or Ed25519). Each
// must be a regular file of at most 1 MiB: a FIFO, a device or a directory is refused by name
// without blocking.
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := readSmallFile(certFile, "certificate authority certificate", maxPEMFile, nil)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readSmallFile(keyFile, "certificate authority key", maxPEMFile, nil)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("certificate authority %s / %s: %w", certFile, keyFile, err)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("certificate authority key %s: want a signing key, got %T", keyFile, pair.PrivateKey)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("certificate authority %s: %w", certFile, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("certificate %s is not a certificate authority", certFile)
	}
	return &CA{cert: cert, key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// Issue makes a peer (node) certificate named name, valid for the given IP addresses and DNS
// names, usable both as a TLS server and as a TLS client.
func (ca *CA) Issue(name string, hosts []string) (certPEM, keyPEM []byte, err error) {
	return ca.IssueRole(name, hosts, RolePeer)
}

// IssueRole makes a certificate for a party named name with the given role (see [Role]),
// valid for the given IP addresses and DNS names, usable as a TLS server and client.
func (ca *CA) IssueRole(name string, hosts []string, role Role) (certPEM, keyPEM []byte, err error) {
	key, der, err := ca.issue(name, hosts, role)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// issue makes a key and a certificate (DER) signed by the authority.
func (ca *CA) issue(name string, hosts []string, role Role) (*ecdsa.PrivateKey, []byte, error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("a certificate needs at least one IP address or host name")
	}
	if role != RolePeer && role != RoleClient {
		return nil, nil, fmt.Errorf("unknown role %d", role)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl, err := template(name)
	if err != nil {
		return nil, nil, err
	}
	tmpl.Subject.OrganizationalUnit = []string{role.unit()}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	return key, der, nil
}

func template(name string) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name, Organization: []string{"didnmf"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(Validity)}, nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// Config is mutual TLS for a node: the server side asks for and checks a client certificate
// signed by the cluster's authority, the client side checks the server's the same way and
// presents its own.
type Config struct {
	Server, Client *tls.Config
	// Role and Name are those of the party's own certificate.
	Role Role
	Name string
}

// Load reads a node's certificate and key and the cluster's CA certificate (PEM files) and
// returns its mutual TLS configuration. Each must be a regular file of at most 1 MiB: a FIFO,
// a device or a directory is refused by name without blocking.
func Load(certFile, keyFile, caFile string) (*Config, error) {
	certPEM, err := readSmallFile(certFile, "--tls-cert", maxPEMFile, nil)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readSmallFile(keyFile, "--tls-key", maxPEMFile, nil)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s / --tls-key %s: %w", certFile, keyFile, err)
	}
	caPEM, err := readSmallFile(caFile, "--tls-ca", maxPEMFile, nil)
	if err != nil {
		return nil, err
	}
	return FromPEM(pair, caPEM, caFile)
}

// FromPEM builds the mutual TLS configuration from a loaded key pair and the CA's PEM bytes
// (named caName in errors).
func FromPEM(pair tls.Certificate, caPEM []byte, caName string) (*Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", caName)
	}
	return configOf(pair, pool)
}

// configOf builds the mutual TLS configuration of a key pair whose peers are checked against
// pool.
func configOf(pair tls.Certificate, pool *x509.CertPool) (*Config, error) {
	leaf := pair.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, err
		}
	}
	return &Config{
		Server: &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13},
		Client: &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS13},
		Role:   RoleOf(leaf),
		Name:   leaf.Subject.CommonName,
	}, nil
}

// Write writes data to path with the given permission, whole or not at all, refusing to
// overwrite a file (the error then wraps fs.ErrExist).
func Write(path string, data []byte, perm os.FileMode) error {
	return atomicfile.WriteNew(path, data, perm)
}
