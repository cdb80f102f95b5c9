package actors

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/pki"
)

// The guard stands between the network and a node's actors. Every remote connection is a gRPC
// stream of protoactor message batches; the guard wraps the gRPC server so that
//
//   - nothing a remote party sends can take the process down: every handler and stream runs
//     under a recover, and protoactor's unimplemented RPCs answer Unimplemented;
//   - a party is authenticated before any of its messages is accepted: with credentials (TLS
//     certificates, or a cluster secret from which they are derived), the TLS handshake
//     refuses whoever has none, and the certificate's role (peer or client) is the party's;
//   - each message of a batch is checked before protoactor looks at it: indices into the
//     batch's tables in range, the protobuf serializer, a type the protocol knows, and a role
//     that may send that type (the table access below, the one place where roles are
//     authorized); what fails is dropped and counted by cause;
//   - a client's message that names a sender (the PID protoactor answers, dead letters
//     included), or a submission's client, is accepted only if that address is proven for
//     the client's session (see senders.go): a node answers a client only there;
//   - each accepted message is stamped with its sender's role and name (message headers that
//     the party cannot set itself), and a client's with its proven address, so that the
//     handlers that check ownership of a job know who asks: see callerOf;
//   - a client's node (NodeConfig.ClientOnly) takes from peers only what a client receives,
//     to its client actors and futures, and nothing from clients (checkClientBound).
//
// Messages between actors of one process never cross the guard and are trusted.

// Header keys the guard stamps on every message it lets through.
const (
	headerRole = "didnmf-role"
	headerName = "didnmf-name"
	// headerAddr is the sender's address as the client's session proved it (see senders).
	headerAddr = "didnmf-addr"
)

// roles is a set of pki roles.
type roles uint8

const (
	peers   roles = 1 << pki.RolePeer
	clients roles = 1 << pki.RoleClient
	anyone        = peers | clients
)

func (r roles) allow(role pki.Role) bool { return r&(1<<role) != 0 }

// access says, for every message type that may cross the network, which roles may send it.
// A type that is not listed (protoactor's system messages such as Stop, Watch or PoisonPill,
// remote spawning, anything unknown) is dropped whoever sends it: no didnmf node sends them.
var access = map[string]roles{
	// Clients submit jobs, ask for status and their jobs, stream their inputs, acknowledge
	// results, renew the lease on their jobs and cancel them. Ownership is checked by the
	// handlers (owner token and caller name).
	"didnmf.SubmitJob":  anyone,
	"didnmf.Ping":       anyone,
	"didnmf.HostStatus": anyone,
	"didnmf.ListJobs":   anyone,
	"didnmf.CancelJob":  anyone,
	"didnmf.LeaseRenew": anyone,
	"didnmf.ResultAck":  anyone,
	"didnmf.BlockChunk": anyone,

	// Everything else is node-internal, or goes from nodes to clients.
	"didnmf.Pong":                peers,
	"didnmf.JobList":             peers,
	"didnmf.JobAccepted":         peers,
	"didnmf.JobError":            peers,
	"didnmf.Progress":            peers,
	"didnmf.JobResult":           peers,
	"didnmf.ResultChunk":         peers,
	"didnmf.BlockRequest":        peers,
	"didnmf.BlockAck":            peers,
	"didnmf.ShardAssignment":     peers,
	"didnmf.ReducerAssignment":   peers,
	"didnmf.Placed":              peers,
	"didnmf.StartJob":            peers,
	"didnmf.Grant":               peers,
	"didnmf.Finish":              peers,
	"didnmf.StopJob":             peers,
	"didnmf.Partial":             peers,
	"didnmf.Reduced":             peers,
	"didnmf.IterationDone":       peers,
	"didnmf.ShardDone":           peers,
	"didnmf.ReducerDone":         peers,
	"didnmf.CheckpointDone":      peers,
	"didnmf.CheckpointCopy":      peers,
	"didnmf.Buddies":             peers,
	"didnmf.CheckpointStored":    peers,
	"didnmf.CheckpointFetch":     peers,
	"didnmf.CheckpointCommitted": peers,
	"didnmf.CheckpointAt":        peers,
	"didnmf.ActorFailed":         peers,
	"didnmf.JobState":            peers,
	"didnmf.JobRecord":           peers,
	"didnmf.LeaseAck":            peers,
	// protoactor answers a request to an actor that does not exist with this.
	"actor.DeadLetterResponse": peers,
}

// Limits on a batch's tables (a batch holds at most remoteBatch messages from a didnmf node;
// these are generous bounds against a hostile one).
const (
	maxBatchEnvelopes = 4096
	maxBatchNames     = 4096
)

// Drop causes, as the guard's counters name them.
const (
	dropUnauthenticated = "unauthenticated stream"
	dropTypeIndex       = "type index out of range"
	dropTargetIndex     = "target index out of range"
	dropSenderIndex     = "sender index out of range"
	dropSerializer      = "not protobuf"
	dropUnknownType     = "type not in the protocol"
	dropBatchSize       = "batch too large"
	dropClientTarget    = "client message to an actor clients may not address"
	dropPanic           = "handler panic"
	dropUnimplemented   = "unimplemented rpc"
	dropRolePrefix      = "role may not send "
	dropClientOnly      = "client node: a message from a client"
	dropClientOnlyType  = "client node: a type no client receives"
	dropClientOnlyTo    = "client node: to an actor that is not a client's"
	dropOwnerPrefix     = "not the owner: "
	dropStalePrefix     = "stale or unknown job: "
)

// guard authenticates, checks and counts what reaches a node over the network.
type guard struct {
	// open is set when the node runs without credentials (--insecure): every party counts as
	// a peer.
	open bool
	// clientOnly is set on a client's node (NodeConfig.ClientOnly): it takes from peers only
	// what a client receives, to its client actors and futures, and nothing from clients.
	clientOnly bool
	// senders proves the senders clients name (nil: none is accepted); set before the
	// remote starts.
	senders *senders
	// provePeers has the senders of peers proven too, unless they are members' (a node of
	// a cluster, which dials only members and proven addresses: a peer that is no member,
	// such as a node starting or an operator's tool, is answered where it proved).
	provePeers bool
	logger     *slog.Logger

	mu      sync.Mutex
	dropped map[string]*atomic.Int64
	lastLog time.Time
	unseen  int64 // drops since the last line logged
}

func newGuard(open bool, logger *slog.Logger) *guard {
	return &guard{open: open, logger: logger, dropped: map[string]*atomic.Int64{}}
}

// drop counts a dropped message (or refused stream) under cause, and logs it at most once a
// second, with the number of drops since the last line.
func (g *guard) drop(cause string, n int64) {
	g.mu.Lock()
	c := g.dropped[cause]
	if c == nil {
		c = &atomic.Int64{}
		g.dropped[cause] = c
	}
	g.unseen += n
	logNow, unseen := time.Since(g.lastLog) > time.Second, g.unseen
	if logNow {
		g.lastLog, g.unseen = time.Now(), 0
	}
	g.mu.Unlock()
	c.Add(n)
	if logNow {
		g.logger.Warn("dropped a message from the network", slog.String("cause", cause), slog.Int64("dropped", unseen))
	}
}

// Drops returns the guard's counters: messages dropped (and streams refused) by cause.
func (g *guard) Drops() map[string]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]int64, len(g.dropped))
	for k, v := range g.dropped {
		out[k] = v.Load()
	}
	return out
}

// serverOptions are the gRPC server options that put the guard in front of the remote.
func (g *guard) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(g.unary), grpc.ChainStreamInterceptor(g.stream)}
}

// unary answers every unary RPC (protoactor's ListProcesses and GetProcessDiagnostics, whose
// handlers panic) with Unimplemented.
func (g *guard) unary(_ context.Context, _ any, info *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
	g.drop(dropUnimplemented, 1)
	return nil, status.Errorf(codes.Unimplemented, "%s is not served", info.FullMethod)
}

// party is who is at the other end of a stream.
type party struct {
	role pki.Role
	name string
	// stamp is the header every message of the party carries once checked: made once a
	// stream, shared by its messages (nobody writes a received message's header).
	stamp *remote.MessageHeader
	// session is what a client's stream proved (nil for a peer, or outside a stream).
	session *session
}

func newParty(role pki.Role, name string) party {
	return party{role: role, name: name,
		stamp: &remote.MessageHeader{HeaderData: map[string]string{headerRole: role.String(), headerName: name}}}
}

// session is what one client's stream proved: the IP its connection comes from, its
// certificate's key, and the sender addresses proven for it, each with the header its
// messages are stamped with. It is used by the stream's reader only.
type session struct {
	ip     netip.Addr
	key    keyHash
	stamps map[string]*remote.MessageHeader // by the address as named
	failed int                              // proofs that failed
}

// maxSessionStamps bounds the addresses a stream keeps proven (more than a session proves
// in the senders' cache, maxProvenPerKey).
const maxSessionStamps = 2 * maxProvenPerKey

// partyOf authenticates the other end of a stream from its verified TLS certificate.
func (g *guard) partyOf(ctx context.Context) (party, bool) {
	if g.open {
		return newParty(pki.RolePeer, "insecure"), true
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return party{}, false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return party{}, false
	}
	role, name := roleOf(info.State)
	if role == 0 || role == pki.RoleClient && pki.ReservedClientName(name) {
		// A client named as an owner that is no client's (the node's own process, the HTTP
		// operator) would share its quotas and own its jobs: refused as no credential.
		return party{}, false
	}
	who := newParty(role, name)
	if role != pki.RolePeer || g.provePeers {
		who.session = &session{key: keyOf(info.State.VerifiedChains[0][0]), stamps: map[string]*remote.MessageHeader{}}
		if tcp, ok := p.Addr.(*net.TCPAddr); ok {
			if ip, ok := netip.AddrFromSlice(tcp.IP); ok {
				who.session.ip = ip.Unmap()
			}
		}
	}
	return who, true
}

// roleOf returns the role and name of the verified certificate of a TLS connection's other
// end (0 when it has none): the remote's streams and the data plane's connections alike.
func roleOf(st tls.ConnectionState) (pki.Role, string) {
	if len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return 0, ""
	}
	cert := st.VerifiedChains[0][0]
	return pki.RoleOf(cert), cert.Subject.CommonName
}

// stream runs a remote stream with its party authenticated, every batch checked and any
// panic recovered.
func (g *guard) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	who, ok := g.partyOf(ss.Context())
	if !ok {
		g.drop(dropUnauthenticated, 1)
		return status.Error(codes.Unauthenticated, "no verified certificate")
	}
	defer func() {
		if p := recover(); p != nil {
			g.drop(dropPanic, 1)
			g.logger.Error("recovered a panic in the remote's stream handler", slog.Any("panic", p))
			err = status.Error(codes.Internal, "internal error")
		}
	}()
	return handler(srv, &guardedStream{ServerStream: ss, g: g, who: who})
}

// guardedStream checks every message batch a stream receives before protoactor handles it.
type guardedStream struct {
	grpc.ServerStream
	g   *guard
	who party
}

// RecvMsg implements grpc.ServerStream.
func (s *guardedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if rm, ok := m.(*remote.RemoteMessage); ok {
		if b := rm.GetMessageBatch(); b != nil {
			s.g.filter(b, s.who)
		}
	}
	return nil
}

// filter removes from a batch, in place, every envelope that is malformed or that the party
// may not send, and stamps the others with the party's role and name.
func (g *guard) filter(b *remote.MessageBatch, who party) {
	if len(b.Envelopes) > maxBatchEnvelopes || len(b.TypeNames) > maxBatchNames || len(b.Targets) > maxBatchEnvelopes ||
		len(b.Senders) > maxBatchEnvelopes {
		g.drop(dropBatchSize, int64(len(b.Envelopes)))
		b.Envelopes = nil
		return
	}
	kept := b.Envelopes[:0]
	for _, e := range b.Envelopes {
		if cause := g.check(b, e, who); cause != "" {
			g.drop(cause, 1)
			continue
		}
		stamp := who.stamp
		if who.role != pki.RolePeer || who.session != nil {
			if stamp = g.proveSender(b, e, who); stamp == nil {
				g.drop(dropSenderUnproven, 1)
				continue
			}
		}
		e.MessageHeader = stamp
		kept = append(kept, e)
	}
	for i := len(kept); i < len(b.Envelopes); i++ {
		b.Envelopes[i] = nil
	}
	b.Envelopes = kept
}

// check returns why an envelope must be dropped, or "".
func (g *guard) check(b *remote.MessageBatch, e *remote.MessageEnvelope, who party) string {
	switch {
	case e == nil || e.TypeId < 0 || int(e.TypeId) >= len(b.TypeNames):
		return dropTypeIndex
	case e.Target < 0 || int(e.Target) >= len(b.Targets) || b.Targets[e.Target] == "":
		return dropTargetIndex
	case e.Sender < 0 || int(e.Sender) > len(b.Senders) || (e.Sender > 0 && b.Senders[e.Sender-1] == nil):
		return dropSenderIndex
	case e.SerializerId != 0:
		return dropSerializer
	}
	if g.clientOnly {
		return checkClientBound(b, e, who)
	}
	allowed, known := access[b.TypeNames[e.TypeId]]
	if !known {
		return dropUnknownType
	}
	if !allowed.allow(who.role) {
		return dropRolePrefix + b.TypeNames[e.TypeId]
	}
	if who.role != pki.RolePeer && !clientTarget.MatchString(b.Targets[e.Target]) {
		return dropClientTarget
	}
	return ""
}

// checkClientBound checks an envelope on a client's node (see clientBound and
// clientNodeTarget), after its indices: it returns why it must be dropped, or "".
func checkClientBound(b *remote.MessageBatch, e *remote.MessageEnvelope, who party) string {
	switch {
	case who.role != pki.RolePeer:
		return dropClientOnly
	case !clientBound[b.TypeNames[e.TypeId]]:
		return dropClientOnlyType
	case !clientNodeTarget.MatchString(b.Targets[e.Target]):
		return dropClientOnlyTo
	}
	return ""
}

// clientBound are the types a client's node takes from peers: what its client actor and the
// futures of its requests receive (see clientActor and Job).
var clientBound = map[string]bool{
	"didnmf.JobAccepted": true, "didnmf.JobError": true, "didnmf.Progress": true, "didnmf.JobResult": true,
	"didnmf.ResultChunk": true, "didnmf.BlockRequest": true, "didnmf.BlockAck": true, "didnmf.LeaseAck": true,
	"didnmf.Pong": true, "didnmf.JobList": true, "actor.DeadLetterResponse": true,
}

// clientNodeTarget is what a peer may send to on a client's node: its client actors
// (NewClient spawns them as "client$<id>") and the futures of its requests ("future$<id>").
var clientNodeTarget = regexp.MustCompile(`^(client|future)\$[0-9A-Za-z~+]{1,13}$`)

// proveSender returns the header of a client's envelope once its sender (the PID protoactor
// answers) and, for a submission, the client it names are proven for the session (see
// senders): with the role, the name and the proven address. It returns nil when they are
// not: the envelope is dropped.
func (g *guard) proveSender(b *remote.MessageBatch, e *remote.MessageEnvelope, who party) *remote.MessageHeader {
	addr := ""
	if e.Sender > 0 {
		addr = b.Senders[e.Sender-1].GetAddress()
	}
	if who.role == pki.RolePeer {
		return g.provenPeer(addr, who)
	}
	if b.TypeNames[e.TypeId] == "didnmf.SubmitJob" {
		var m messages.SubmitJob
		if proto.Unmarshal(e.MessageData, &m) != nil || m.Client == nil {
			return nil
		}
		if addr != "" && !sameAddress(addr, m.Client.Address) && g.proven(addr, who) == nil {
			return nil
		}
		addr = m.Client.Address
	}
	if addr == "" {
		return who.stamp // no sender: nobody is answered
	}
	return g.proven(addr, who)
}

// provenPeer returns the header of a peer's message whose sender is at addr: a member's (or
// this node's) address, or one the peer's session proved; nil if it is neither.
func (g *guard) provenPeer(addr string, who party) *remote.MessageHeader {
	ss := who.session
	if addr == "" {
		return who.stamp
	}
	if h := ss.stamps[addr]; h == who.stamp {
		return h // a node's address
	}
	if g.senders != nil && g.senders.isNodeAddress(addr) {
		if len(ss.stamps) >= maxSessionStamps {
			clear(ss.stamps)
		}
		ss.stamps[addr] = who.stamp
		return who.stamp
	}
	return g.proven(addr, who)
}

// proven returns the header of the messages of a session whose sender is at addr, proving
// the address first if the stream has not; nil if it is not proven.
func (g *guard) proven(addr string, who party) *remote.MessageHeader {
	ss := who.session
	if ss == nil || g.senders == nil {
		return nil
	}
	if h := ss.stamps[addr]; h != nil {
		if g.senders.refresh(h.HeaderData[headerAddr], ss.key) {
			return h
		}
		delete(ss.stamps, addr) // evicted or expired: proved again
	}
	if ss.failed >= maxFailedProofs {
		return nil
	}
	canon, err := g.senders.prove(addr, ss.ip, ss.key)
	if err != nil {
		ss.failed++
		return nil
	}
	if len(ss.stamps) >= maxSessionStamps {
		clear(ss.stamps)
	}
	h := &remote.MessageHeader{HeaderData: map[string]string{headerRole: who.role.String(), headerName: who.name, headerAddr: canon}}
	ss.stamps[addr] = h
	return h
}

// clientTarget is what a client may send to: a node's host, and a job's coordinator and
// shards (whose handlers check the job's owner). Nothing else of a node: not the futures
// that wait for answers (their ids are sequential), not reducers, not protoactor's own actors.
var clientTarget = regexp.MustCompile(`^host(/j[0-9a-f]{16}-(coord|s[0-9]{1,9}))?$`)

// Caller is who sent the message an actor is handling.
type Caller struct {
	// Role is the sender's role; 0 for a message from this process, which is trusted.
	Role pki.Role
	// Name is the common name of the sender's certificate.
	Name string
	// Addr is, for a client, the address its session proved for the message's sender (or
	// for the client a submission names), canonical ip:port; "" when it named none.
	Addr string
}

// Local tells whether the message came from this process.
func (c Caller) Local() bool { return c.Role == 0 }

// Peer tells whether the message came from this process or from a peer node.
func (c Caller) Peer() bool { return c.Role == 0 || c.Role == pki.RolePeer }

// callerOf returns who sent the message ctx is handling, as the guard stamped it.
func callerOf(ctx actor.Context) Caller {
	h := ctx.MessageHeader()
	if h == nil {
		return Caller{}
	}
	switch h.Get(headerRole) {
	case "peer":
		return Caller{Role: pki.RolePeer, Name: h.Get(headerName)}
	case "client":
		return Caller{Role: pki.RoleClient, Name: h.Get(headerName), Addr: h.Get(headerAddr)}
	case "":
		return Caller{}
	}
	return Caller{Role: pki.RoleClient, Name: h.Get(headerName), Addr: h.Get(headerAddr)} // unknown: the least trusted
}

// dropsSorted lists counters as "cause=count" sorted by cause (for logs and status).
func dropsSorted(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(out)
	return out
}
