// Package server runs a didnmf node as a cluster member: an actor system (gRPC remote, host
// actor) that joins the others by gossip (cluster), advertises its actor address, cores, memory
// and capacity, and places the jobs submitted to it on the live members. It also gives the
// client side: a process that asks a member's front door (its gossip port, with its
// certificate) for the members, never gossips and is never given work, to submit jobs and
// read the cluster's status (see frontdoor.go).
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/fsroot"
	"github.com/didnmf/didnmf/internal/actors"
	"github.com/didnmf/didnmf/internal/atomicfile"
	"github.com/didnmf/didnmf/pki"
)

// Config configures a member node. It is layered: Node is what the node's actor system runs
// with (actors.NodeConfig: its data directory, threads, memory, limits, timeouts, faults),
// and the other fields are what a server adds around it (its name, gossip and credentials, the
// directories its jobs may use, its log).
type Config struct {
	// Name is the node's unique name in the cluster. With certificate files (TLS) it is the
	// certificate's common name: empty takes it, another is refused. With the cluster
	// secret the node's certificate is issued for it; empty: cluster.DefaultName of the
	// gossip port. Without credentials, empty is derived from the address as well.
	Name string
	// Bind is the gossip address ip:port (port 0 picks one). The actor remote listens on the
	// same IP, on Node.Port (0 picks one).
	Bind string
	// Join lists members to join (ip:port of their gossip); empty starts a new cluster.
	Join []string
	// Node configures the node's actor system, as for actors.StartNode, with a server's
	// defaults: Memory 0 accepts 80% of the memory available when the node starts (not "no
	// limit"), Capacity 0 means 1 (negative is refused), Threads 0 all cores. Node.DataDir
	// is created with mode 0700 and locked against a second node; Start writes node.txt in
	// it. Host, Advertise, Logger, TLS, Insecure, Members, Partition and Roots are the
	// server's to set (from Bind, Logger, the credentials, the gossip, Partition and
	// DataRoots): Start refuses a Node with any of them set.
	Node actors.NodeConfig
	// DataRoots are the directories under which the node reads job inputs and writes shared
	// outputs (serve --data-root); none: it reads and writes no file of a job.
	DataRoots []string
	// Partition, when set, cuts this node's gossip and actor traffic to nodes on the other
	// side of it (partition tests in one process).
	Partition *cluster.Partition
	// Credentials: TLS (certificate files) makes the actor remote mutual TLS; without it,
	// Secret (the cluster secret, see pki) derives the cluster's authority and this node's
	// certificate, and the gossip key unless GossipKey is given. GossipKey (16, 24 or 32
	// bytes) encrypts the gossip. A node needs TLS or Secret unless Insecure, which runs it
	// without authentication.
	GossipKey []byte
	TLS       *pki.Config
	Secret    []byte
	Insecure  bool
	// Logger receives joins, leaves and errors, the gossip's and the node's (nil: discarded).
	Logger *slog.Logger
	// Version is the node's build version (serve: the binary's, as --version prints it) and
	// HTTP the base URL of its HTTP service ("": none). Both go into the node's gossip meta
	// (cluster.Meta.Version and HTTP, whose rules they must meet), so every member and client
	// sees which build each member runs and where its dashboard is.
	Version string
	HTTP    string
}

// Server is a running member node.
type Server struct {
	// Node is the node's actor system; Members its view of the cluster.
	Node    *actors.Node
	Members *cluster.Membership
	name    string
	roots   *fsroot.Roots
	unlock  func()
	closed  atomic.Bool
	prof    *profiles
	tls     *pki.Config
}

// TLS returns the node's mutual TLS (its certificate and the cluster's authority, from the
// certificate files or derived from the secret); nil for a node run without credentials.
func (s *Server) TLS() *pki.Config { return s.tls }

// lateMembers lets the actor node see the membership that starts after it (the membership
// advertises the node's actor address, which is only known once the node listens).
type lateMembers struct {
	m atomic.Pointer[cluster.Membership]
	// name and meta are what the node will advertise, for Self until the membership is
	// stored (name "": left to cluster.Start, a node without credentials).
	name string
	meta cluster.Meta
}

// Self is the front door's own entry of the node (see frontDoor). Once the membership is
// stored it is its Local (Meta.Leaving included). Before, while cluster.Start runs (the
// members it joins prove this node's claim at once, and Start returns only once it has
// proven theirs), it is the name and Meta given to cluster.Start with the address conn
// came in on as the gossip address: the node's bind address (never a wildcard, see
// Start), which is what memberlist advertises.
func (l *lateMembers) Self(conn net.Conn) (cluster.Member, bool) {
	if m := l.m.Load(); m != nil {
		return m.Local(), true
	}
	if l.name == "" {
		return cluster.Member{}, false
	}
	return cluster.Member{Name: l.name, Gossip: conn.LocalAddr().String(), Meta: l.meta}, true
}

func (l *lateMembers) Workers() []cluster.Member {
	if m := l.m.Load(); m != nil {
		return m.Workers()
	}
	return nil
}

// RefusedStreams implements actors.RefusedStreamer.
func (l *lateMembers) RefusedStreams() int64 {
	if m := l.m.Load(); m != nil {
		return m.RefusedStreams()
	}
	return 0
}

// Refused implements actors.MemberRefuser.
func (l *lateMembers) Refused() map[string]int64 {
	if m := l.m.Load(); m != nil {
		return m.Refused()
	}
	return nil
}

// credentials fills in a party's TLS configuration and gossip key from the cluster secret
// when no certificates are given, and refuses a party without any credentials unless
// insecure.
func credentials(tls **pki.Config, gossipKey *[]byte, secret []byte, insecure bool, name, host string, role pki.Role) error {
	if *tls != nil || insecure {
		return nil
	}
	if secret == nil {
		return errors.New("no credentials: give the cluster secret (--secret-file; the first node makes one) or --tls-cert, --tls-key and --tls-ca, or --insecure to run without authentication")
	}
	ca, err := pki.CAFromSecret(secret)
	if err != nil {
		return err
	}
	if name == "" {
		name = role.String()
	}
	if *tls, err = ca.Credentials(name, []string{host}, role); err != nil {
		return err
	}
	if *gossipKey == nil {
		*gossipKey = pki.GossipKeyFromSecret(secret)
	}
	return nil
}

// CheckSecurity refuses a node or client that would talk over a non-loopback address in
// the clear, and says what to do.
func CheckSecurity(host string, gossipKey []byte, tls *pki.Config, insecure bool) error {
	if insecure || (gossipKey != nil && tls != nil) {
		return nil
	}
	if tls != nil { // certificate files, loopback included: the gossip needs its key too
		return errors.New("certificates (--tls-*) need --gossip-key-file (or DIDNMF_GOSSIP_KEY) too: without it anyone who reaches the gossip port could join the membership and list the nodes")
	}
	if isLoopback(host) {
		return nil
	}
	var missing []string
	if gossipKey == nil {
		missing = append(missing, "--gossip-key-file (or DIDNMF_GOSSIP_KEY) to encrypt the gossip")
	}
	if tls == nil {
		missing = append(missing, "--tls-cert, --tls-key and --tls-ca for mutual TLS between nodes")
	}
	return fmt.Errorf("refusing to listen on %s without %s: anyone who can reach that address could join the cluster and run or read jobs; give them (see `didnmf certs`), or --insecure on a network you trust",
		host, joinAnd(missing))
}

func joinAnd(s []string) string {
	if len(s) == 2 {
		return s[0] + " and " + s[1]
	}
	return s[0]
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Start starts a member node: its actor system, then its gossip, joining cfg.Join. With
// credentials the node admits another member only once a TLS handshake with the member's
// actor address has shown a peer certificate for its name (see proveMember); it refuses to
// start with a client certificate, or under a name that is not its certificate's.
func Start(cfg Config) (*Server, error) {
	host, portStr, err := net.SplitHostPort(cfg.Bind)
	if err != nil {
		return nil, fmt.Errorf("--bind %q: want IP:PORT (%v)", cfg.Bind, err)
	}
	if net.ParseIP(host) == nil {
		return nil, fmt.Errorf("--bind %q: %q is not an IP address", cfg.Bind, host)
	}
	if _, err := strconv.ParseUint(portStr, 10, 16); err != nil {
		return nil, fmt.Errorf("--bind %q: bad port %q", cfg.Bind, portStr)
	}
	if net.ParseIP(host).IsUnspecified() {
		return nil, fmt.Errorf("--bind %q: give the IP address the other nodes reach this one at, not a wildcard", cfg.Bind)
	}
	ncfg := cfg.Node
	if set := serverOwned(ncfg); len(set) > 0 {
		return nil, fmt.Errorf("server: leave Config.Node.%s unset: Start sets them from Bind, Logger, the credentials, the gossip, Partition and DataRoots", strings.Join(set, ", "))
	}
	if ncfg.Capacity < 0 {
		return nil, fmt.Errorf("--capacity must be >= 1, got %d", ncfg.Capacity)
	}
	if ncfg.Memory < 0 {
		return nil, fmt.Errorf("--memory must be >= 0, got %d", ncfg.Memory)
	}
	// The meta's rules for the version and URL, checked before anything starts.
	if _, err := (cluster.Meta{Role: cluster.RoleClient, Version: cfg.Version, HTTP: cfg.HTTP}).Encode(); err != nil {
		return nil, fmt.Errorf("server: Config.Version %q or Config.HTTP %q: %v", cfg.Version, cfg.HTTP, err)
	}
	s := &Server{}
	if ncfg.DataDir != "" {
		// The node's own: other users must not list its jobs' checkpoints (their names are the
		// jobs' ids) nor read them.
		if err := os.MkdirAll(ncfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("--data-dir: %w", err)
		}
		if err := os.Chmod(ncfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("--data-dir: %w", err)
		}
		if s.unlock, err = lockDir(ncfg.DataDir); err != nil {
			return nil, err
		}
	}
	var listener *cluster.Listener // the gossip port bound early, until cluster.Start owns it
	fail := func(err error) (*Server, error) {
		if listener != nil {
			_ = listener.Close()
		}
		s.Close()
		return nil, err
	}
	if cfg.Name, listener, err = nodeName(cfg); err != nil {
		return fail(err)
	}
	profName := cfg.Name
	if profName == "" {
		profName = cfg.Bind
	}
	var profErrs []error
	s.prof, profErrs = startProfiles(profName)
	for _, err := range profErrs {
		if cfg.Logger != nil {
			cfg.Logger.Warn("not profiling", slog.Any("error", err))
		}
	}
	if err := credentials(&cfg.TLS, &cfg.GossipKey, cfg.Secret, cfg.Insecure, cfg.Name, host, pki.RolePeer); err != nil {
		return fail(err)
	}
	if err := CheckSecurity(host, cfg.GossipKey, cfg.TLS, cfg.Insecure); err != nil {
		return fail(err)
	}
	s.tls = cfg.TLS
	if s.roots, err = fsroot.Open(cfg.DataRoots...); err != nil {
		return fail(fmt.Errorf("--data-root: %w", err))
	}
	if ncfg.Memory == 0 {
		ncfg.Memory = AvailableMemory() * 8 / 10
	}
	ncfg.Capacity = max(ncfg.Capacity, 1)
	members := &lateMembers{}
	threads := ncfg.Threads
	if ncfg.Pool == nil {
		if threads <= 0 {
			threads = defaultWorkers
		}
	}
	ncfg.Threads = threads
	ncfg.Host, ncfg.Logger, ncfg.TLS, ncfg.Insecure, ncfg.Members, ncfg.Roots = host, cfg.Logger, cfg.TLS, cfg.TLS == nil, members, s.roots
	if cfg.Partition != nil { // not a nil *cluster.Partition in the interface
		ncfg.Partition = cfg.Partition
	}
	s.Node, err = actors.StartNode(ncfg)
	if err != nil {
		return fail(err)
	}
	cores := cfg.Node.Threads
	if ncfg.Pool != nil {
		cores = ncfg.Pool.Workers()
	}
	if cores <= 0 {
		cores = runtime.NumCPU()
	}
	logger := cfg.Logger
	// With credentials, members prove each other's claims, and a member reported gone is
	// asked whether it still runs before anything is done about it (issue 30).
	var prove func(context.Context, cluster.Member) error
	var confirm func(context.Context, cluster.Member) bool
	if cfg.TLS != nil {
		prove = proveMember(cfg.TLS, cfg.Partition, s.Node.Address())
		confirm = confirmMember(cfg.TLS, cfg.Partition, s.Node.Address())
	}
	members.name = cfg.Name
	members.meta = cluster.Meta{Role: cluster.RoleMember, Actor: s.Node.Address(), Cores: cores, Memory: ncfg.Memory,
		Capacity: ncfg.Capacity, Started: time.Now().UnixNano(), Version: cfg.Version, HTTP: cfg.HTTP}
	l := listener
	listener = nil // cluster.Start owns it
	s.Members, err = cluster.Start(cluster.Config{Name: cfg.Name, Bind: cfg.Bind, Listener: l, Prove: prove, Confirm: confirm, Join: cfg.Join, SecretKey: cfg.GossipKey, Logger: logger,
		Meta: members.meta,
		OnEvent: func(e cluster.Event) {
			logEvent(logger, e)
			// The node's actors (coordinators watching their jobs' nodes) learn of it too.
			s.Node.System().EventStream.Publish(e)
		}, Partition: cfg.Partition, FrontDoor: frontDoor(cfg.TLS, members.Workers, members.Self)})
	if err != nil {
		return fail(err)
	}
	members.m.Store(s.Members)
	s.name = s.Members.Local().Name
	// Checkpoints of jobs that ended while this node was down are of no use to anyone.
	var others []string
	for _, w := range s.Members.Workers() {
		if w.Meta.Actor != s.Node.Address() {
			others = append(others, w.Meta.Actor)
		}
	}
	if removed, err := s.Node.RemoveStaleCheckpoints(others, 3*time.Second); logger != nil && err != nil {
		logger.Warn("old checkpoints kept", slog.Any("error", err))
	} else if logger != nil && len(removed) > 0 {
		logger.Info("removed the checkpoints of jobs no member knows", slog.Any("jobs", removed))
	}
	if ncfg.DataDir != "" {
		_ = atomicfile.WriteFile(filepath.Join(ncfg.DataDir, "node.txt"),
			[]byte(fmt.Sprintf("name %s\ngossip %s\nactor %s\npid %d\n", s.name, s.Members.Local().Gossip, s.Node.Address(), os.Getpid())), 0o600)
	}
	return s, nil
}

// nodeName returns the node's name in the cluster and checks its credentials fit it. With
// certificate files the name is the certificate's common name (a different --name is
// refused), which must be a peer's certificate. With the cluster secret the certificate is
// issued for the name, so the default name (cluster.DefaultName of the gossip port) is
// chosen here: for port 0 the gossip port is bound first, and returned, for cluster.Start.
// Without credentials the name is left to cluster.Start.
func nodeName(cfg Config) (string, *cluster.Listener, error) {
	if t := cfg.TLS; t != nil {
		if t.Role != pki.RolePeer {
			return "", nil, fmt.Errorf("a node needs a peer certificate: the certificate of %q is a %s certificate (didnmf certs --client); make the node's with didnmf certs --name NAME, without --client", t.Name, t.Role)
		}
		if cfg.Name == "" {
			return t.Name, nil, nil
		}
		if cfg.Name != t.Name {
			return "", nil, fmt.Errorf("--name %q is not the name of the node's certificate, %q: a node is named as its certificate (give --name %s, or no --name)", cfg.Name, t.Name, t.Name)
		}
		return cfg.Name, nil, nil
	}
	if cfg.Name != "" || cfg.Insecure || cfg.Secret == nil {
		return cfg.Name, nil, nil
	}
	_, portStr, _ := net.SplitHostPort(cfg.Bind)
	if port, _ := strconv.Atoi(portStr); port != 0 {
		return cluster.DefaultName(port), nil, nil
	}
	l, err := cluster.Listen(cfg.Bind)
	if err != nil {
		return "", nil, err
	}
	return cluster.DefaultName(l.Port()), l, nil
}

// proveTime bounds how long a proof may wait for the actor port (cluster.Config.Prove also
// gives it a deadline).
const proveTime = 3 * time.Second

// proveMember returns the node's cluster.Config.Prove: a member's claim holds if its gossip
// and actor addresses are on one host (a server advertises its --bind IP for both); a TLS
// handshake with its actor address, made with this node's own certificate as client (ALPN
// h2, as the gRPC server requires; the server name is the address's host), shows a peer
// certificate of the cluster's authority whose common name is the member's name; and the
// node at its gossip address (its front door, fetchSelf) presents that certificate too and
// says of itself what the claim says: the same name, gossip address, actor address, start
// time and leaving flag. The last binds the claim to the running instance: a process holding
// only the gossip key can gossip a real member's name and addresses, but not make the member
// say another start time (a claim taken for a restart would have the others declare the
// running instance dead and take its jobs over: issue 30) or that it is leaving. self is
// this node's actor address (for the partition of tests).
func proveMember(creds *pki.Config, part *cluster.Partition, self string) func(context.Context, cluster.Member) error {
	return func(ctx context.Context, m cluster.Member) error {
		host, _, err := net.SplitHostPort(m.Meta.Actor)
		if err != nil {
			return fmt.Errorf("actor address %q: %v", m.Meta.Actor, err)
		}
		if gossipHost, _, err := net.SplitHostPort(m.Gossip); err != nil || gossipHost != host {
			return fmt.Errorf("gossip address %s is not on the actor address's host %s", m.Gossip, host)
		}
		if part != nil && part.Blocked(self, m.Meta.Actor) {
			return fmt.Errorf("actor address %s: partitioned (test partition)", m.Meta.Actor)
		}
		// The actor address (its gRPC server) must hold the member's peer certificate, and
		// so must the gossip address (its front door), which also says which instance runs
		// there: neither can be borrowed from a real member by a process that holds only the
		// gossip key, nor the member's start time changed (issue 30).
		if err := provePeerAt(ctx, creds, host, "actor", m.Meta.Actor, m.Name); err != nil {
			return err
		}
		got, leaf, err := fetchSelf(ctx, creds, m.Gossip)
		var ae *AuthError
		var de *dialError
		switch {
		case errors.As(err, &ae): // its message is a client's
			return fmt.Errorf("TLS handshake with the gossip address %s: %v", m.Gossip, ae.Err)
		case errors.As(err, &de):
			return fmt.Errorf("TLS handshake with the gossip address %s: %v", m.Gossip, de.err)
		case err != nil:
			return fmt.Errorf("asking the node at gossip address %s who it is: %v", m.Gossip, err)
		}
		if leaf.Subject.CommonName != m.Name {
			return fmt.Errorf("the gossip address %s presents the certificate of %q, not of %q", m.Gossip, leaf.Subject.CommonName, m.Name)
		}
		return claimDiffers(got, m)
	}
}

// claimDiffers returns nil if the node's own entry (got, from its front door at m.Gossip)
// says what the claim m says: name, gossip address, actor address, start time and leaving
// flag; else an error saying what differs.
func claimDiffers(got, m cluster.Member) error {
	at := "the node at gossip address " + m.Gossip
	switch {
	case got.Name != m.Name:
		return fmt.Errorf("%s says it is %q, the claim says %q", at, got.Name, m.Name)
	case got.Gossip != m.Gossip:
		return fmt.Errorf("%s says its gossip address is %s", at, got.Gossip)
	case got.Meta.Actor != m.Meta.Actor:
		return fmt.Errorf("%s says its actor address is %s, the claim says %s", at, got.Meta.Actor, m.Meta.Actor)
	case got.Meta.Started != m.Meta.Started:
		return fmt.Errorf("%s says it started at %s, the claim says %s (another instance of %q)", at,
			startTime(got.Meta.Started), startTime(m.Meta.Started), m.Name)
	case got.Meta.Leaving != m.Meta.Leaving:
		return fmt.Errorf("%s says leaving %v, the claim says leaving %v", at, got.Meta.Leaving, m.Meta.Leaving)
	}
	return nil
}

// startTime formats a Meta.Started: unix nanoseconds, and the time they stand for.
func startTime(ns int64) string {
	return fmt.Sprintf("%d (%s)", ns, time.Unix(0, ns).UTC().Format(time.RFC3339Nano))
}

// confirmMember returns the membership's death confirmation (cluster.Config.Confirm) for a
// node with credentials creds: asked about a member the gossip's failure detector suspects
// (m, as it was proven), it returns true when that very instance still answers at its
// gossip address within ctx: its front door (fetchSelf) presents the peer certificate of
// m.Name and says it is m.Name with m's start time and actor address (a leaving member
// that still answers is alive too); false when nothing answers, another instance of the
// name (another start time) or another node answers, the certificate is another's, or the
// member is on the other side of the test partition part (self: this node's actor
// address, as for proveMember). So true means alive: its death is not confirmed.
func confirmMember(creds *pki.Config, part *cluster.Partition, self string) func(context.Context, cluster.Member) bool {
	return func(ctx context.Context, m cluster.Member) bool {
		if part != nil && part.Blocked(self, m.Meta.Actor) {
			return false
		}
		got, leaf, err := fetchSelf(ctx, creds, m.Gossip)
		if err != nil {
			return false
		}
		return leaf.Subject.CommonName == m.Name && got.Name == m.Name &&
			got.Meta.Started == m.Meta.Started && got.Meta.Actor == m.Meta.Actor
	}
}

// provePeerAt makes a TLS handshake with addr (the what address of member name, on host)
// with the node's client credentials, and checks that the certificate there is the peer
// certificate of name.
func provePeerAt(ctx context.Context, creds *pki.Config, host, what, addr, name string) error {
	cfg := creds.Client.Clone()
	cfg.NextProtos = []string{"h2"}
	cfg.ServerName = host
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: proveTime}, Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("TLS handshake with the %s address %s: %v", what, addr, err)
	}
	defer conn.Close()
	certs := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return fmt.Errorf("the %s address %s presented no certificate", what, addr)
	}
	leaf := certs[0]
	if role := pki.RoleOf(leaf); role != pki.RolePeer {
		return fmt.Errorf("the %s address %s presents a %s certificate (%q), not a peer's", what, addr, role, leaf.Subject.CommonName)
	}
	if leaf.Subject.CommonName != name {
		return fmt.Errorf("the %s address %s presents the certificate of %q, not of %q", what, addr, leaf.Subject.CommonName, name)
	}
	return nil
}

// serverOwned names the fields of n that Start sets itself and that are set in n.
func serverOwned(n actors.NodeConfig) []string {
	var set []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"Host", n.Host != ""}, {"Advertise", n.Advertise != ""}, {"Logger", n.Logger != nil}, {"TLS", n.TLS != nil},
		{"Insecure", n.Insecure}, {"Members", n.Members != nil}, {"Partition", n.Partition != nil}, {"Roots", n.Roots != nil},
	} {
		if f.set {
			set = append(set, f.name)
		}
	}
	return set
}

// defaultWorkers is the kernel workers of a node without --threads: the processors Go runs
// on when the process starts. The transport needs no processor of its own: the kernels'
// workers yield theirs between lanes (see kernels.Pool).
var defaultWorkers = runtime.GOMAXPROCS(0)

// logEvent logs a member's join, leave or update. Only proven members raise events (clients
// do not gossip), so each is news.
func logEvent(logger *slog.Logger, e cluster.Event) {
	if logger == nil {
		return
	}
	attrs := []any{slog.String("member", e.Member.Name), slog.String("gossip", e.Member.Gossip),
		slog.String("role", e.Member.Meta.Role.String()), slog.String("actor", e.Member.Meta.Actor)}
	switch e.Kind {
	case cluster.EventJoin:
		logger.Info("member joined", attrs...)
	case cluster.EventLeave:
		if e.Dead {
			logger.Warn("member failed (declared dead)", attrs...)
		} else {
			logger.Info("member left", attrs...)
		}
	case cluster.EventUpdate:
		logger.Info("member updated", attrs...)
	}
}

// Name returns the node's name in the cluster.
func (s *Server) Name() string { return s.name }

// Gossip returns the node's gossip address, which others give to --join.
func (s *Server) Gossip() string { return s.Members.Local().Gossip }

// Leave leaves the cluster gracefully (the others see a leave, not a failure) and stops the
// node.
func (s *Server) Leave(timeout time.Duration) error {
	var err error
	if s.Members != nil && !s.closed.Load() {
		err = s.Members.Leave(timeout)
	}
	s.Close()
	return err
}

// Close stops the node without telling the others (they detect its failure).
func (s *Server) Close() {
	if s.closed.Swap(true) {
		return
	}
	if s.Members != nil {
		_ = s.Members.Shutdown()
	}
	if s.Node != nil {
		s.Node.Close()
	}
	if s.roots != nil {
		_ = s.roots.Close()
	}
	if s.unlock != nil {
		s.unlock()
	}
	s.prof.stop()
}

// MachineID names this machine for placement (see Config.Machine): systemd's machine id,
// else this boot's id, else the host name, else "" (a machine of its own).
func MachineID() string {
	for _, f := range []string{"/etc/machine-id", "/proc/sys/kernel/random/boot_id"} {
		if b, err := os.ReadFile(f); err == nil {
			if id := strings.TrimSpace(string(b)); id != "" && len(id) <= 128 {
				return id
			}
		}
	}
	if h, err := os.Hostname(); err == nil {
		return h
	}
	return ""
}

// AvailableMemory is the memory available to new work (MemAvailable), or 1 GiB when it
// cannot be read.
func AvailableMemory() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err == nil {
		var kb int64
		for _, line := range strings.Split(string(data), "\n") {
			if n, _ := fmt.Sscanf(line, "MemAvailable: %d kB", &kb); n == 1 {
				return kb << 10
			}
		}
	}
	return 1 << 30
}

// errLocked is returned when another node holds the data directory.
var errLocked = errors.New("is in use by another running node")
