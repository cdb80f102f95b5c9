package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/pki"
)

// The front door. Clients take no part in the gossip (they would need its key, and every
// member would have to trust what they advertise): a client finds the cluster by asking a
// member, at the member's gossip address, for the cluster's view. The gossip port tells a
// client's connection from gossip by its first byte (cluster.Config.FrontDoor): a TLS
// ClientHello, or cluster.FrontDoorPlain for a cluster without credentials (--insecure).
//
// With credentials the member does a mutual-TLS server handshake with its peer certificate
// and requires a certificate of the cluster's authority (a peer's or a client's); the client
// checks that the member's certificate is a peer's for the address it dialled. The member
// then writes the view, a 4-byte big-endian length and a messages.ClusterView, and closes
// the connection. The view lists the workers the member has proven (cluster.Membership's
// Workers: not leaving), with what each advertises, and the member's own entry (self): its
// name, gossip address and cluster.Meta as it advertises them. A member proving another's
// claim reads that entry (fetchSelf): the claim must be what the member says of itself.
const (
	// frontDoorWait bounds a member's whole exchange with a client: handshake and answer.
	frontDoorWait = 5 * time.Second
	// fetchWait bounds a client's whole fetch of a view from one member.
	fetchWait = 3 * time.Second
	// maxViewBytes bounds the view a client reads.
	maxViewBytes = 1 << 20
	// maxViewMembers bounds the members of a view (a cluster's member table is bounded far
	// below it).
	maxViewMembers = 4096
	// maxNameBytes bounds a member's name in a view.
	maxNameBytes = 255
)

// frontDoor returns the member's cluster.Config.FrontDoor: it answers every client that
// proves a certificate of the cluster (tlsCfg; nil: a cluster without credentials, whose
// clients send cluster.FrontDoorPlain) with the view of workers and of self (the member's
// own entry, given the connection; false: not known, the view has none), then closes the
// connection.
func frontDoor(tlsCfg *pki.Config, workers func() []cluster.Member, self func(net.Conn) (cluster.Member, bool)) func(net.Conn) {
	return func(conn net.Conn) {
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(frontDoorWait))
		var w io.Writer = conn
		var b [1]byte
		if _, err := io.ReadFull(conn, b[:]); err != nil {
			return
		}
		if tlsCfg == nil {
			if b[0] != cluster.FrontDoorPlain {
				return
			}
		} else {
			if b[0] != tlsHandshake { // a plain client of a cluster with credentials
				return
			}
			tc := tls.Server(&prefixConn{Conn: conn, r: io.MultiReader(bytes.NewReader(b[:]), conn)}, tlsCfg.Server)
			defer tc.Close()
			if err := tc.Handshake(); err != nil {
				return
			}
			// Server's ClientAuth requires and verifies the client's certificate; this is
			// only the belt to those braces.
			if len(tc.ConnectionState().VerifiedChains) == 0 {
				return
			}
			w = tc
		}
		var me *cluster.Member
		if m, ok := self(conn); ok {
			me = &m
		}
		view, err := encodeView(workers(), me)
		if err != nil {
			return
		}
		_, _ = w.Write(view)
	}
}

// tlsHandshake is the first byte of a TLS ClientHello.
const tlsHandshake = 0x16

// prefixConn is a connection whose reads come from r (bytes already read, then the
// connection).
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// clusterView is a front door's answer, decoded and checked.
type clusterView struct {
	// Members are the workers the member lists (none leaving).
	Members []cluster.Member
	// Self is the member's own entry; nil from a build from before it (see decodeView).
	Self *cluster.Member
}

// encodeView returns the front door's answer for members and self (nil: none): the length
// of the encoded messages.ClusterView (4 bytes, big-endian), then the message.
func encodeView(members []cluster.Member, self *cluster.Member) ([]byte, error) {
	v := &messages.ClusterView{}
	for _, m := range members {
		v.Members = append(v.Members, toView(m))
	}
	if self != nil {
		v.Self = toView(*self)
	}
	body, err := proto.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(body) > maxViewBytes {
		return nil, fmt.Errorf("the view of %d members is %d bytes, more than %d", len(members), len(body), maxViewBytes)
	}
	return append(binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body))), body...), nil
}

func toView(m cluster.Member) *messages.ViewMember {
	return &messages.ViewMember{Name: m.Name, Gossip: m.Gossip, Actor: m.Meta.Actor, Cores: int64(m.Meta.Cores),
		Memory: m.Meta.Memory, Capacity: int64(m.Meta.Capacity), Started: m.Meta.Started, Leaving: m.Meta.Leaving,
		Version: m.Meta.Version, Http: m.Meta.HTTP}
}

// readView reads a front door's answer from r: the length, at most maxViewBytes, then the
// view, decoded by decodeView.
func readView(r io.Reader) (clusterView, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return clusterView{}, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if head[0] == 0x15 && head[1] == 3 { // a TLS alert record: the member speaks TLS
		return clusterView{}, errors.New("the member answers in TLS: the cluster runs with credentials, and this client has none (--insecure)")
	}
	if n > maxViewBytes {
		return clusterView{}, fmt.Errorf("the member announces a view of %d bytes, more than %d", n, maxViewBytes)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return clusterView{}, fmt.Errorf("the view was cut short: %w", err)
	}
	return decodeView(body)
}

// decodeView decodes and checks a messages.ClusterView: no unknown fields, at most
// maxViewMembers members, each with a name (printable, at most maxNameBytes), a gossip
// address IP:PORT and what a member may advertise (cluster.Meta's rules for a member: an
// actor address host:port, capacity >= 1, cores, memory and start time >= 0, a version and
// an HTTP URL as cluster.Meta allows them, "" from a build from before them), none leaving;
// no two members share a name, a gossip address or an actor address. Self, the answering
// member's own entry, is checked as a member is (it may be leaving). It may be absent: a
// build from before it sends none, and a client reading such a view only misses nothing it
// uses; a member proving a claim requires it (fetchSelf). It never panics; the members come
// back in the view's order.
func decodeView(b []byte) (clusterView, error) {
	var v messages.ClusterView
	if err := proto.Unmarshal(b, &v); err != nil {
		return clusterView{}, fmt.Errorf("the view is not a ClusterView: %v", err)
	}
	if len(v.ProtoReflect().GetUnknown()) > 0 {
		return clusterView{}, errors.New("the view has fields this build does not know (run the same build on every node and client)")
	}
	if len(v.Members) > maxViewMembers {
		return clusterView{}, fmt.Errorf("the view lists %d members, more than %d", len(v.Members), maxViewMembers)
	}
	out := clusterView{Members: make([]cluster.Member, 0, len(v.Members))}
	seen := map[string]bool{}
	for i, vm := range v.Members {
		m, err := viewMember(vm)
		if err != nil {
			return clusterView{}, fmt.Errorf("the view's member %d: %v", i, err)
		}
		if m.Meta.Leaving {
			return clusterView{}, fmt.Errorf("the view's member %d: %s is leaving: a view lists workers only", i, m.Name)
		}
		for _, k := range []string{"name " + m.Name, "gossip " + m.Gossip, "actor " + m.Meta.Actor} {
			if seen[k] {
				return clusterView{}, fmt.Errorf("the view lists %s twice", k)
			}
			seen[k] = true
		}
		out.Members = append(out.Members, m)
	}
	if v.Self != nil {
		m, err := viewMember(v.Self)
		if err != nil {
			return clusterView{}, fmt.Errorf("the view's self: %v", err)
		}
		out.Self = &m
	}
	return out, nil
}

// viewMember checks one member of a view (see decodeView).
func viewMember(vm *messages.ViewMember) (cluster.Member, error) {
	if len(vm.ProtoReflect().GetUnknown()) > 0 {
		return cluster.Member{}, errors.New("fields this build does not know")
	}
	if err := checkName(vm.Name); err != nil {
		return cluster.Member{}, err
	}
	if err := checkGossip(vm.Gossip); err != nil {
		return cluster.Member{}, fmt.Errorf("%s: %v", vm.Name, err)
	}
	if vm.Cores > math.MaxInt32 || vm.Capacity > math.MaxInt32 {
		return cluster.Member{}, fmt.Errorf("%s: cores %d or capacity %d out of range", vm.Name, vm.Cores, vm.Capacity)
	}
	meta := cluster.Meta{Role: cluster.RoleMember, Actor: vm.Actor, Cores: int(vm.Cores), Memory: vm.Memory,
		Capacity: int(vm.Capacity), Started: vm.Started, Leaving: vm.Leaving, Version: vm.Version, HTTP: vm.Http}
	if _, err := meta.Encode(); err != nil { // Encode checks Meta's rules
		return cluster.Member{}, fmt.Errorf("%s: %v", vm.Name, err)
	}
	return cluster.Member{Name: vm.Name, Gossip: vm.Gossip, Meta: meta}, nil
}

func checkName(name string) error {
	if name == "" {
		return errors.New("no name")
	}
	if len(name) > maxNameBytes {
		return fmt.Errorf("a name of %d bytes, more than %d", len(name), maxNameBytes)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("name %q is not UTF-8", name)
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("name %q has a control character", name)
		}
	}
	return nil
}

// checkGossip checks a gossip address: an IP literal and a port in 1..65535.
func checkGossip(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("gossip address %q is not IP:PORT", addr)
	}
	if net.ParseIP(host) == nil {
		return fmt.Errorf("gossip address %q: %q is not an IP address", addr, host)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 || strconv.FormatUint(p, 10) != port {
		return fmt.Errorf("gossip address %q needs a port in 1..65535", addr)
	}
	return nil
}

// AuthError is the error of a fetch whose TLS handshake failed: the member refused this
// client's certificate (another cluster's, or none), or presented one this client does not
// trust (not signed by the cluster's authority, not a peer's, not for the address dialled).
type AuthError struct {
	Addr string
	Err  error
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("%s: authentication failed: %v (are this client's certificate and CA, or its cluster secret, the cluster's?)", e.Addr, e.Err)
}

func (e *AuthError) Unwrap() error { return e.Err }

// dialError is the error of a fetch that could not connect: nothing listens there, or the
// address is not reached from here. Connect keeps trying such addresses for ClientConfig.Reach.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// errEmptyView is a front door's answer that lists no worker: its member is starting.
var errEmptyView = errors.New("the member lists no worker yet")

// errNotPeer is a member whose certificate is not a peer's.
var errNotPeer = errors.New("the member presents a client certificate, not a peer's")

// doorClient fetches views from members' front doors.
type doorClient struct {
	tls  *pki.Config // the client's credentials; nil: a cluster without credentials
	self string      // the client's actor address (for part)
	part *cluster.Partition
}

// fetch asks the member at addr (a gossip address) for its view, within fetchWait or ctx,
// and returns its workers.
func (d *doorClient) fetch(ctx context.Context, addr string) ([]cluster.Member, error) {
	if d.part.Blocked(d.self, addr) {
		return nil, &dialError{errors.New("partitioned (test partition)")}
	}
	ctx, cancel := context.WithTimeout(ctx, fetchWait)
	defer cancel()
	v, _, err := fetchView(ctx, d.tls, addr)
	return v.Members, err
}

// fetchView asks the member at addr (a gossip address) for its view, within ctx. With creds
// (nil: a cluster without credentials, the plain front door) it makes a TLS handshake with
// them, the server name addr's host, and requires the member's certificate to be a peer's;
// it returns that certificate (nil without creds). Errors: *dialError when nothing could
// be connected to, *AuthError when the handshake failed on certificates.
func fetchView(ctx context.Context, creds *pki.Config, addr string) (clusterView, *x509.Certificate, error) {
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return clusterView{}, nil, &dialError{err}
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	timedOut := func(err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: no answer in time (%v)", addr, err)
		}
		return nil
	}
	if creds == nil {
		if _, err := conn.Write([]byte{cluster.FrontDoorPlain}); err != nil {
			return clusterView{}, nil, fmt.Errorf("%s: %v", addr, err)
		}
		v, err := readView(conn)
		if err != nil {
			if te := timedOut(err); te != nil {
				return clusterView{}, nil, te
			}
			return clusterView{}, nil, fmt.Errorf("%s: no view: %v", addr, closedWhy(err, false))
		}
		return v, nil, nil
	}
	host, _, _ := net.SplitHostPort(addr)
	cfg := creds.Client.Clone()
	cfg.ServerName = host
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 || pki.RoleOf(cs.PeerCertificates[0]) != pki.RolePeer {
			return errNotPeer
		}
		return nil
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		if authFailure(err) {
			return clusterView{}, nil, &AuthError{Addr: addr, Err: err}
		}
		if te := timedOut(err); te != nil {
			return clusterView{}, nil, te
		}
		return clusterView{}, nil, fmt.Errorf("%s: TLS handshake: %v", addr, closedWhy(err, true))
	}
	v, err := readView(tc)
	if err != nil {
		// TLS 1.3: the member checks this client's certificate after the client's side of
		// the handshake is done, and its refusal comes as an alert on the first read.
		if authFailure(err) {
			return clusterView{}, nil, &AuthError{Addr: addr, Err: err}
		}
		if te := timedOut(err); te != nil {
			return clusterView{}, nil, te
		}
		return clusterView{}, nil, fmt.Errorf("%s: no view: %v", addr, closedWhy(err, true))
	}
	return v, tc.ConnectionState().PeerCertificates[0], nil
}

// fetchSelf asks the node at gossip (its front door) who it is, with the node's own client
// credentials (creds, required), within ctx: it returns the node's own entry of its view
// (its name, gossip address and Meta as it advertises them) and the peer certificate its
// front door presented. A front door that sends no entry of its own (a build from before
// it) is an error: such a node cannot be proven.
func fetchSelf(ctx context.Context, creds *pki.Config, gossip string) (cluster.Member, *x509.Certificate, error) {
	if creds == nil {
		return cluster.Member{}, nil, errors.New("no credentials to ask a node who it is")
	}
	v, leaf, err := fetchView(ctx, creds, gossip)
	if err != nil {
		return cluster.Member{}, nil, err
	}
	if v.Self == nil {
		return cluster.Member{}, nil, fmt.Errorf("%s: the node does not say who it is (an older build: run the same build on every node)", gossip)
	}
	return *v.Self, leaf, nil
}

// authFailure tells whether a TLS error is about the certificates: one not trusted here, or
// an alert from the member (it refused this client's).
func authFailure(err error) bool {
	var cve *tls.CertificateVerificationError
	var oe *net.OpError
	return errors.Is(err, errNotPeer) || errors.As(err, &cve) ||
		(errors.As(err, &oe) && oe.Op == "remote error")
}

// closedWhy explains a connection the member closed without an answer.
func closedWhy(err error, withTLS bool) error {
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !strings.Contains(err.Error(), "connection reset") {
		return err
	}
	if withTLS {
		return fmt.Errorf("the member closed the connection (%v): does the cluster run without credentials (--insecure)?", err)
	}
	return fmt.Errorf("the member closed the connection (%v): does the cluster run with credentials? then this client needs them too", err)
}

// fetchAny asks the addresses in turn and returns the first view one answers with, and the
// address; errs and failed are the errors of the addresses asked before it, and those
// addresses. When none answers, unreached tells whether no address could be connected to
// at all.
func (d *doorClient) fetchAny(ctx context.Context, addrs []string) (members []cluster.Member, from string, errs []error, failed []string, unreached bool) {
	unreached = true
	for _, a := range addrs {
		m, err := d.fetch(ctx, a)
		if err == nil && len(m) == 0 {
			err = fmt.Errorf("%s: %w", a, errEmptyView)
		}
		if err == nil {
			return m, a, errs, failed, false
		}
		errs, failed = append(errs, err), append(failed, a)
		var de *dialError
		if !errors.As(err, &de) {
			unreached = false
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, "", errs, failed, unreached && len(errs) > 0
}

// sameMember tells whether two views list one instance of a member.
func sameMember(a, b cluster.Member) bool {
	return a.Name == b.Name && a.Meta.Started == b.Meta.Started && a.Meta.Actor == b.Meta.Actor
}

// gone returns the members of old that next no longer lists (by name, start time and actor
// address: a member restarted is gone too).
func gone(old, next []cluster.Member) []cluster.Member {
	var out []cluster.Member
	for _, o := range old {
		if !slices.ContainsFunc(next, func(n cluster.Member) bool { return sameMember(o, n) }) {
			out = append(out, o)
		}
	}
	return out
}
