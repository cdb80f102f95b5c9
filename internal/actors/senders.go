package actors

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/didnmf/didnmf/pki"
)

// A node answers a client, and dials it, only at an address the client's session proved.
//
// A message names its sender (a PID: an address and an actor id), and protoactor answers to
// that sender: the replies of the node's actors, and the dead letters it sends itself when a
// message's target does not exist. A client that named another party's actor as the sender
// (the node's own pending requests, another client's actors, any address at all) would have
// the node answer there, from a trusted sender, and dial whatever address it named.
//
// So a message from a client that names a sender is let through only if the sender's address
// is proven for the certificate of the client's session: the address's host is the IP the
// client's connection comes from (an address elsewhere is never dialed), and a TLS handshake
// to it (the node's client credentials, ALPN h2, proofTimeout) shows a certificate with the
// same public key as the session's (a client's actor listener serves with the client's own
// certificate, made from its files or from the cluster secret). Proofs are remembered
// (senders.proven, bounded: maxProven addresses, maxProvenPerKey of one key, each for
// provenFor since its last use); one that failed is not tried again for failedProofWait, and a
// stream that failed maxFailedProofs proofs has its unproven senders dropped without any more
// dialing. The proof runs in the client's own stream (its RecvMsg): it holds back no other
// party's messages.
//
// A node of a cluster (NodeConfig.Members set, with credentials) dials only: itself, the live
// members' actor addresses, the addresses proven by clients' sessions, and the clients of the
// jobs it runs (registered by its host: the client a submission named at its caller's proven
// address, or the one a peer's assignment names). A gRPC context dialer refuses anything else
// before a connection is made (counted as dropDialRefused), and the TLS handshake of a dial
// checks who answered (checkedCreds): a member's address a peer certificate named as the
// member, a proven address the proven key, a job's client a certificate named as the job's
// owner; otherwise the connection is closed (dropDialIdentity).
const (
	proofTimeout    = 2 * time.Second
	provenFor       = 60 * time.Second
	maxProven       = 4096
	maxProvenPerKey = 16
	failedProofWait = 10 * time.Second
	maxFailedProofs = 8
	maxFailedKept   = 4096
	// maxProofs bounds the proofs under way at once (each holds a connection).
	maxProofs = 64
)

// Drop causes of the sender proofs and of the dials.
const (
	dropSenderUnproven = "sender not proven"
	dropDialRefused    = "dial refused: not a member, a proven client or a job's client"
	dropDialIdentity   = "dial refused: the certificate is not the one expected at that address"
)

// errProofsBusy fails a proof that found maxProofs under way for proofTimeout.
var errProofsBusy = fmt.Errorf("%d sender proofs under way", maxProofs)

// keyHash is the SHA-256 of a certificate's SubjectPublicKeyInfo.
type keyHash [32]byte

// keyOf returns the hash of a certificate's public key.
func keyOf(cert *x509.Certificate) keyHash { return sha256.Sum256(cert.RawSubjectPublicKeyInfo) }

// canonical returns the canonical form of a literal ip:port address, and whether it is one.
func canonical(addr string) (netip.AddrPort, bool) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), true
}

// sameAddress tells whether two addresses are the same: as literal ip:port whatever their
// spelling, or as the same string.
func sameAddress(a, b string) bool {
	if a == b {
		return true
	}
	x, ok1 := canonical(a)
	y, ok2 := canonical(b)
	return ok1 && ok2 && x == y
}

// provenAddr is a proof: the key an address showed, and when it was last used.
type provenAddr struct {
	key keyHash
	at  time.Time
}

// jobClient is the client of a job the node runs: its address and the name its certificate
// must have (the job's owner).
type jobClient struct {
	addr, owner string
}

// senders keeps the proven addresses and the jobs' clients of a node, and decides what it
// dials. Its methods may be called from any goroutine.
type senders struct {
	n      *Node
	client *tls.Config   // the node's client credentials; nil without TLS
	proofs chan struct{} // a slot for each proof under way (maxProofs)

	mu     sync.Mutex
	proven map[netip.AddrPort]provenAddr
	failed map[failedKey]time.Time
	jobs   map[string]jobClient // by job id
	// dialed are the members' addresses this node dialed, and when: a connection to one that
	// died or left is redialed by gRPC's backoff for a while (a request sent as it died),
	// which the node refuses without counting a drop (it is its own, not the network's).
	dialed map[string]time.Time
}

// Bounds of senders.dialed: how long a former member's redials are not counted, and how
// many addresses are remembered (the oldest forgotten first).
const (
	formerMemberFor = 10 * time.Minute
	maxDialed       = 1024
)

type failedKey struct {
	addr netip.AddrPort
	key  keyHash
}

func newSenders(n *Node, client *tls.Config) *senders {
	return &senders{n: n, client: client, proofs: make(chan struct{}, maxProofs), proven: map[netip.AddrPort]provenAddr{}, failed: map[failedKey]time.Time{},
		jobs: map[string]jobClient{}, dialed: map[string]time.Time{}}
}

// noteDialed remembers that the node dialed a member at addr.
func (s *senders) noteDialed(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.dialed[addr]; !ok && len(s.dialed) >= maxDialed {
		oldest := ""
		for a, at := range s.dialed {
			if oldest == "" || at.Before(s.dialed[oldest]) {
				oldest = a
			}
		}
		delete(s.dialed, oldest)
	}
	s.dialed[addr] = time.Now()
}

// formerMember tells whether addr is a member's the node dialed within formerMemberFor.
func (s *senders) formerMember(addr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.dialed[addr]
	return ok && time.Since(at) < formerMemberFor
}

// isNodeAddress tells whether an address is this node's or a live member's actor address.
func (s *senders) isNodeAddress(addr string) bool {
	if sameAddress(addr, s.n.Address()) {
		return true
	}
	_, ok := s.memberAt(addr)
	return ok
}

// memberAt returns the name of the live member at an actor address.
func (s *senders) memberAt(addr string) (string, bool) {
	if s.n.cfg.Members == nil {
		return "", false
	}
	for _, w := range s.n.cfg.Members.Workers() {
		if sameAddress(w.Meta.Actor, addr) {
			return w.Name, true
		}
	}
	return "", false
}

// prove proves addr for a session whose connection comes from ip and whose certificate has
// key, and returns its canonical form; "" when it is not proven.
func (s *senders) prove(addr string, ip netip.Addr, key keyHash) (string, error) {
	ap, ok := canonical(addr)
	if !ok {
		return "", fmt.Errorf("%q is not a literal ip:port", addr)
	}
	if ap.Addr() != ip.Unmap() {
		return "", fmt.Errorf("%s is not at the connection's address %s", addr, ip)
	}
	if s.isNodeAddress(addr) {
		return "", fmt.Errorf("%s is a node's", addr)
	}
	now := time.Now()
	s.mu.Lock()
	if p, ok := s.proven[ap]; ok && p.key == key && now.Sub(p.at) < provenFor {
		p.at = now
		s.proven[ap] = p
		s.mu.Unlock()
		return ap.String(), nil
	}
	if at, ok := s.failed[failedKey{ap, key}]; ok && now.Sub(at) < failedProofWait {
		s.mu.Unlock()
		return "", fmt.Errorf("%s failed a proof lately", addr)
	}
	s.mu.Unlock()
	err := s.handshake(ap, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if errors.Is(err, errProofsBusy) {
		return "", err // not the address's failure: tried again at its next message
	}
	if err != nil {
		if len(s.failed) >= maxFailedKept {
			for k, at := range s.failed {
				if now.Sub(at) >= failedProofWait || len(s.failed) >= maxFailedKept {
					delete(s.failed, k)
				}
			}
		}
		s.failed[failedKey{ap, key}] = now
		return "", err
	}
	s.remember(ap, key, now)
	return ap.String(), nil
}

// remember keeps a proof, within the bounds (under mu): the oldest proof of the key, or of
// all, makes room.
func (s *senders) remember(ap netip.AddrPort, key keyHash, now time.Time) {
	delete(s.proven, ap)
	var ofKey int
	var oldestOfKey, oldest netip.AddrPort
	var oldestOfKeyAt, oldestAt time.Time
	for a, p := range s.proven {
		if now.Sub(p.at) >= provenFor {
			delete(s.proven, a)
			continue
		}
		if p.key == key {
			if ofKey++; oldestOfKeyAt.IsZero() || p.at.Before(oldestOfKeyAt) {
				oldestOfKey, oldestOfKeyAt = a, p.at
			}
		}
		if oldestAt.IsZero() || p.at.Before(oldestAt) {
			oldest, oldestAt = a, p.at
		}
	}
	switch {
	case ofKey >= maxProvenPerKey:
		delete(s.proven, oldestOfKey)
	case len(s.proven) >= maxProven:
		delete(s.proven, oldest)
	}
	s.proven[ap] = provenAddr{key: key, at: now}
}

// handshake connects to ap and checks, with a TLS handshake, that it holds a certificate with
// the given key.
func (s *senders) handshake(ap netip.AddrPort, key keyHash) error {
	if s.client == nil {
		return errors.New("no credentials to prove a sender with")
	}
	ctx, cancel := context.WithTimeout(context.Background(), proofTimeout)
	defer cancel()
	select {
	case s.proofs <- struct{}{}:
		defer func() { <-s.proofs }()
	case <-ctx.Done():
		return errProofsBusy
	}
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", ap.String())
	if err != nil {
		return err
	}
	defer raw.Close()
	cfg := s.client.Clone()
	cfg.ServerName = ap.Addr().String()
	cfg.NextProtos = []string{"h2"}
	c := tls.Client(raw, cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		return err
	}
	defer c.Close()
	certs := c.ConnectionState().PeerCertificates
	if len(certs) == 0 || keyOf(certs[0]) != key {
		return fmt.Errorf("%s holds another certificate than the session's", ap)
	}
	return nil
}

// refresh marks the proof of addr (canonical) for key as used now, and tells whether it is
// still kept: a session's stream that keeps sending keeps its address proven.
func (s *senders) refresh(addr string, key keyHash) bool {
	ap, ok := canonical(addr)
	if !ok {
		return false
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.proven[ap]
	if !ok || p.key != key || now.Sub(p.at) >= provenFor {
		return false
	}
	p.at = now
	s.proven[ap] = p
	return true
}

// provenKey returns the key proven at an address, if the proof is recent.
func (s *senders) provenKey(addr string) (keyHash, bool) {
	ap, ok := canonical(addr)
	if !ok {
		return keyHash{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.proven[ap]
	return p.key, ok && time.Since(p.at) < provenFor
}

// addJob registers the client of a job the node runs (at addr, with a certificate named
// owner), which it may dial as long as the job has actors here.
func (s *senders) addJob(job, addr, owner string) {
	if addr == "" {
		return
	}
	s.mu.Lock()
	s.jobs[job] = jobClient{addr: addr, owner: owner}
	s.mu.Unlock()
}

// removeJob forgets a job's client.
func (s *senders) removeJob(job string) {
	s.mu.Lock()
	delete(s.jobs, job)
	s.mu.Unlock()
}

// jobOwners returns the owners of the jobs whose client is at addr.
func (s *senders) jobOwners(addr string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.jobs {
		if sameAddress(c.addr, addr) {
			out = append(out, c.owner)
		}
	}
	return out
}

// mayDial tells whether the node may connect to addr (see the comment at the top).
func (s *senders) mayDial(addr string) bool {
	if s.isNodeAddress(addr) {
		return true
	}
	if _, ok := s.provenKey(addr); ok {
		return true
	}
	return len(s.jobOwners(addr)) > 0
}

// checkLeaf tells whether the certificate a dial to addr met is one expected there.
func (s *senders) checkLeaf(addr string, leaf *x509.Certificate) bool {
	role, name := pki.RoleOf(leaf), leaf.Subject.CommonName
	if sameAddress(addr, s.n.Address()) && role == pki.RolePeer && name == s.n.cfg.TLS.Name {
		return true
	}
	if member, ok := s.memberAt(addr); ok && role == pki.RolePeer && name == member {
		return true
	}
	if key, ok := s.provenKey(addr); ok && keyOf(leaf) == key {
		return true
	}
	for _, owner := range s.jobOwners(addr) {
		if name == owner {
			return true
		}
	}
	return false
}

// resolvesToMember tells whether addr (the ip:port gRPC resolved a target to) is that of a
// member whose actor address names its host by a DNS name.
func (s *senders) resolvesToMember(ctx context.Context, addr string) bool {
	ap, ok := canonical(addr)
	if !ok || s.n.cfg.Members == nil {
		return false
	}
	for _, w := range s.n.cfg.Members.Workers() {
		host, port, err := net.SplitHostPort(w.Meta.Actor)
		if err != nil || port != strconv.Itoa(int(ap.Port())) {
			continue
		}
		if _, err := netip.ParseAddr(host); err == nil {
			continue // a literal address: mayDial compared it
		}
		lctx, cancel := context.WithTimeout(ctx, proofTimeout)
		ips, err := net.DefaultResolver.LookupNetIP(lctx, "ip", host)
		cancel()
		if err == nil && slices.ContainsFunc(ips, func(ip netip.Addr) bool { return ip.Unmap() == ap.Addr() }) {
			return true
		}
	}
	return false
}

// dial is the remote's gRPC context dialer on a node of a cluster: it connects only to an
// address the node may dial (gRPC gives it the target resolved: a member's DNS name is
// resolved again to compare).
func (s *senders) dial(ctx context.Context, addr string) (net.Conn, error) {
	if !s.mayDial(addr) && !s.resolvesToMember(ctx, addr) {
		if !s.formerMember(addr) {
			s.n.guard.drop(dropDialRefused, 1)
		}
		return nil, fmt.Errorf("node %s does not dial %s: not a member, a proven client or a job's client", s.n.Address(), addr)
	}
	if s.isNodeAddress(addr) {
		s.noteDialed(addr)
	}
	return s.n.dialer().DialContext(ctx, "tcp", addr)
}

// checkedCreds are a node's client credentials that check, after the TLS handshake of a dial,
// that the certificate met is one expected at the address dialed (senders.checkLeaf). Their
// methods may be called from any goroutine.
type checkedCreds struct {
	credentials.TransportCredentials
	s *senders
}

// ClientHandshake runs the wrapped handshake and checks the certificate met.
func (c checkedCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	tc, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, conn)
	if err != nil {
		return nil, nil, err
	}
	ti, ok := info.(credentials.TLSInfo)
	if !ok || len(ti.State.PeerCertificates) == 0 || !c.s.checkLeaf(authority, ti.State.PeerCertificates[0]) {
		tc.Close()
		c.s.n.guard.drop(dropDialIdentity, 1)
		return nil, nil, fmt.Errorf("node %s: %s answered with a certificate not expected there", c.s.n.Address(), authority)
	}
	return tc, info, nil
}

// Clone returns a copy.
func (c checkedCreds) Clone() credentials.TransportCredentials {
	return checkedCreds{c.TransportCredentials.Clone(), c.s}
}
