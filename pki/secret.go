package pki

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A cluster secret is the credential of a cluster run without certificate files, in the way
// Erlang's distribution uses a cookie: the first `node serve` makes one in a file only its
// user can read, and every node and client of that user finds it there without flags. From
// the secret each party derives the same certificate authority (an Ed25519 key made from the
// secret), issues itself a short-lived certificate for its role, and speaks mutual TLS with
// it; the gossip key is derived from the secret too. Whoever holds the secret is a peer.

// SecretFileEnv names the environment variable that may give the secret file's path.
const SecretFileEnv = "DIDNMF_SECRET_FILE"

// secretBytes is the size of a new secret; a secret file holds it base64-encoded.
const secretBytes = 32

// maxSecretFile bounds what LoadSecret reads.
const maxSecretFile = 4096

// DefaultSecretPath is where nodes and clients look for the cluster secret when no file is
// named: $DIDNMF_SECRET_FILE, else didnmf/cluster.secret under the user's configuration
// directory (~/.config on Linux).
func DefaultSecretPath() string {
	if p := os.Getenv(SecretFileEnv); p != "" {
		return p
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("didnmf-%d", os.Getuid()))
	}
	return filepath.Join(dir, "didnmf", "cluster.secret")
}

// NewSecret returns a fresh random cluster secret.
func NewSecret() []byte {
	s := make([]byte, secretBytes)
	_, _ = rand.Read(s)
	return s
}

// LoadSecret reads a cluster secret file. It refuses a file that other users may read or
// write, as ssh does with keys.
func LoadSecret(path string) ([]byte, error) {
	data, err := ReadPrivateFile(path, "cluster secret", maxSecretFile)
	if err != nil {
		return nil, err
	}
	secret, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("cluster secret %s: not base64: %v", path, err)
	}
	if len(secret) < 16 {
		return nil, fmt.Errorf("cluster secret %s: %d bytes, want at least 16", path, len(secret))
	}
	return secret, nil
}

// ReadPrivateFile reads a file that holds a secret (what names it in errors): a regular file
// of at most limit bytes, that belongs to this user and that no other user may read or write
// (as ssh does with keys). The errors say what to do. A FIFO, a socket, a device or a
// directory is refused by name without blocking (see readSmallFile).
func ReadPrivateFile(path, what string, limit int) ([]byte, error) {
	return readSmallFile(path, what, int64(limit), func(st fs.FileInfo) error {
		if st.Mode().Perm()&0o077 != 0 {
			return fmt.Errorf("%s %s is open to other users (mode %04o): run chmod 600 %s", what, path, st.Mode().Perm(), path)
		}
		if uid, ok := fileOwner(st); ok && uid != os.Geteuid() {
			return fmt.Errorf("%s %s belongs to user %d, not to this user (%d): another user made it", what, path, uid, os.Geteuid())
		}
		return nil
	})
}

// WriteSecret writes a new secret file (mode 0600, in a directory made 0700 if missing),
// refusing to replace an existing file.
func WriteSecret(path string, secret []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return Write(path, []byte(base64.StdEncoding.EncodeToString(secret)+"\n"), 0o600)
}

// LoadOrCreateSecret reads the secret file at path, or makes a new one there when none
// exists; created tells which.
func LoadOrCreateSecret(path string) (secret []byte, created bool, err error) {
	secret, err = LoadSecret(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return secret, false, err
	}
	secret = NewSecret()
	if err := WriteSecret(path, secret); err != nil {
		if errors.Is(err, fs.ErrExist) { // another node made it meanwhile
			secret, err = LoadSecret(path)
			return secret, false, err
		}
		return nil, false, fmt.Errorf("cluster secret %s: %w", path, err)
	}
	return secret, true, nil
}

// derive returns n bytes derived from the secret for one purpose.
func derive(secret []byte, purpose string, n int) []byte {
	out, err := hkdf.Key(sha256.New, secret, nil, "didnmf "+purpose, n)
	if err != nil {
		panic(err) // only for n beyond 255 hash lengths
	}
	return out
}

// GossipKeyFromSecret returns the 32-byte gossip encryption key of the cluster with this
// secret.
func GossipKeyFromSecret(secret []byte) []byte { return derive(secret, "gossip key v1", 32) }

// CAFromSecret returns the certificate authority of the cluster with this secret: the same
// key and certificate, byte for byte, wherever it is derived.
func CAFromSecret(secret []byte) (*CA, error) {
	key := ed25519.NewKeyFromSeed(derive(secret, "certificate authority v1", ed25519.SeedSize))
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "didnmf cluster secret CA", Organization: []string{"didnmf"}},
		NotBefore:             time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2120, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(nil, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}, nil
}

// Credentials issues, in memory, a certificate for a party named name with the given role,
// valid for hosts, and returns its mutual TLS configuration trusting only this authority.
func (ca *CA) Credentials(name string, hosts []string, role Role) (*Config, error) {
	key, der, err := ca.issue(name, hosts, role)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return configOf(tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool)
}
