// Package actors runs didnmf factorization jobs as protoactor-go actors, in one actor system or
// across several that talk over protoactor's gRPC remote.
//
// Every node runs one actor system with a host actor under the well-known name "host". The
// host spawns and supervises the job actors placed on its node, so that supervision is
// didnmf's and not the remote activator's:
//
//   - a coordinator per job (on the node the job was submitted to) validates the job, places
//     shards and reducers, grants iterations, applies the time limit and collects the result;
//   - shard actors hold X_i, C_i and a replica of B and run a kernels.Machine;
//   - reducer actors form a reduce tree over shard ids with a power-of-two fan-in, sum
//     partials in kernels.TreeSum order and send the results back down, so that every
//     collective is bitwise the in-process driver's;
//   - a client actor submits jobs and receives progress and the factors.
//
// The algorithm lives in the kernels package as a deterministic state machine; this package is
// transport around it, in the way etcd's raft package is used.
package actors

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/didnmf/didnmf/checkpoint"
	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/fsroot"
	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/pki"
)

// HostName is the well-known actor name of every node's host actor.
const HostName = jobctl.HostName

// maxGRPCMessage is the gRPC message limit of the remote: a batch of remoteBatch messages,
// the largest of which carry a chunk (chunked.Floats values, 1 MiB) and its header. The
// largest are a streamed sparse block's chunks (BlockChunk: up to 1 MiB of values, 384 KiB of
// row indices and column pointers as varints, about 1.4 MiB) and the chunks of a
// reduce-scatter's partials, which carry the segment lengths of every shard (3 bytes a shard
// or less: 300 KiB at 100,000 shards); a batch of 16 of them is under 24 MiB. The limit bounds
// what a stream can make the node hold before its message is whole (see limits_identity.go),
// so it is 32 MiB, not more; TestLargestRemoteMessage measures a job's largest.
//
// remoteQueue is the initial length of the queue of each of the remote's endpoint writers (one
// per node talked to). The queue doubles when full; protoactor's default, a million slots,
// is 16 MB allocated per endpoint up front (about 31 MB a job in a 2-node test cluster, still
// reachable after the job: TestIdleNodeKeepsNothingOfEndedJobs measured it).
const (
	maxGRPCMessage = 32 << 20
	remoteBatch    = 16
	remoteQueue    = 1024
)

// grpcWindow is the fixed HTTP/2 flow-control window of the remote's streams and connections:
// the largest that gRPC's bandwidth-delay estimator would grow a window to (16 MiB), so large
// transfers keep their pace. A fixed window turns the estimator off, and with it the PING that
// a receiver sends (and the sender answers) after nearly every message of a stream whose
// messages come one at a time, as an allreduce's do. Measured on 3 node processes (P=8, one
// allreduce an iteration): 4.5 write and 7.5 read syscalls per process and iteration with
// the estimator, 1.8 and 2.8 without.
const grpcWindow = 16 << 20

// transportOptions are the gRPC options of the remote's server and connections (see
// grpcWindow). gRPC's write buffer is kept: without it a message's frame goes out in three
// writes (frame header, message header, data), each a TLS record and a syscall.
func transportOptions() ([]grpc.ServerOption, []grpc.DialOption) {
	return []grpc.ServerOption{grpc.InitialWindowSize(grpcWindow), grpc.InitialConnWindowSize(grpcWindow)},
		[]grpc.DialOption{grpc.WithInitialWindowSize(grpcWindow), grpc.WithInitialConnWindowSize(grpcWindow)}
}

// NodeConfig configures a node.
type NodeConfig struct {
	// Host and Port to listen on for the actor remote; Port 0 picks a free port.
	// Empty Host means 127.0.0.1.
	Host string
	Port int
	// Pool runs the shards' kernels. Nodes in one process may share one pool (they share the
	// CPU); nil means a pool of Threads workers owned by the node.
	Pool    *kernels.Pool
	Threads int
	// Logger receives the node's warnings and errors (nil: discarded).
	Logger *slog.Logger
	// Faults injects faults for tests and chaos runs (nil: none; see Faults).
	Faults *Faults
	// TLS makes the remote speak mutual TLS: it accepts only parties with a certificate
	// signed by the cluster's authority (see pki: certificate files, or credentials derived
	// from a cluster secret) and presents its own. A node needs it unless Insecure.
	TLS *pki.Config
	// Insecure runs the remote without authentication: every party that reaches the port is
	// a peer. Only for networks where everyone who can connect is trusted.
	Insecure bool
	// Advertise is the host other nodes reach this one at, when it binds a wildcard address.
	Advertise string
	// DataPort is the port of the node's data plane, which carries the collectives'
	// messages between nodes (see dataplane.go), on Host: 0 picks a free port, negative
	// runs no data plane (the collectives take the remote like every other message).
	DataPort int
	// Members, when set, is the cluster's membership: a job submitted without a node list is
	// placed on its workers by capacity-weighted rendezvous hashing (see cluster.Place).
	// With credentials, it also makes the node dial only itself, the members, and the
	// clients proven or running jobs here (see senders.go); without Members a node dials any
	// address it sends to (in-process clusters, tests).
	Members Members
	// Memory is the number of bytes of job data the node accepts (0: no limit); Capacity is
	// its placement weight (0 means 1). Both are reported in Pong.
	Memory   int64
	Capacity int
	// Machine names the machine the node runs on (see server.MachineID), reported in Pong:
	// nodes on one machine share its memory when shards are placed. Empty: a machine of its
	// own.
	Machine string
	// DataDir is where the node keeps checkpoints (its own shards' and copies held for
	// others); empty means a temporary directory removed when the node closes.
	DataDir string
	// CheckpointQuota caps the bytes of checkpoints the node writes (0: no cap); a checkpoint
	// past it fails as on a full disk.
	CheckpointQuota int64
	// Partition, when set, drops every message the node's actors send to an address it
	// blocks (tests of network partitions; see cluster.Partition).
	Partition Partition
	// Lease is how long a job coordinated here goes on without word from its client (a
	// LeaseRenew) before it is canceled everywhere; detached jobs have none. 0 means
	// DefaultLease, negative no lease.
	Lease time.Duration
	// MaxJobTime caps the wall time of every job coordinated here (0: no cap).
	MaxJobTime time.Duration
	// Roots are the directories the node reads job inputs from and writes shared outputs
	// to (see fsroot); nil refuses every file (jobs can still stream their input and take
	// their factors back).
	Roots *fsroot.Roots
	// Timeouts are the node's waits (zero fields: DefaultTimeouts).
	Timeouts Timeouts
	// MaxShards caps the shards living on the node at once (0: DefaultMaxShards; negative:
	// no cap), MaxJobs the jobs with actors on it (0: DefaultMaxJobs; negative: no cap).
	MaxShards int
	MaxJobs   int
	// OwnerMaxJobs, OwnerMaxShards and OwnerMemory are each owner's quotas on the node (see
	// quota.go): the jobs with actors here, the shards held and the bytes they reserve, for
	// the jobs of one owner (the common name of the submitter's certificate). 0 takes the
	// default: a quarter of MaxJobs and of MaxShards, three quarters of Memory, at least 1 (none when
	// the node's own limit is none); negative: no quota. OwnerMaxStreams is how many streamed
	// blocks one owner's shards receive at once here (0: DefaultOwnerMaxStreams; negative:
	// no bound); a shard past it waits for one of them to end. StartLocalCluster turns the
	// zero quotas into none: its nodes serve one process.
	OwnerMaxJobs    int
	OwnerMaxShards  int
	OwnerMemory     int64
	OwnerMaxStreams int
	// MaxRestarts is how many panics of a job's shards and reducers the node restarts (the
	// supervisor starts the actor afresh and its coordinator rolls the job back to a
	// checkpoint) before the job fails: the next panic stops the actor and fails the job. 0
	// means DefaultMaxRestarts; a negative value is refused.
	MaxRestarts int
	// HistoryMax is how many records of ended jobs the node keeps (those it coordinated, and
	// those whose standby it was: see jobctl.HostRecord), for ListJobs with ended; 0 means
	// DefaultHistoryMax, negative none. HistoryTime is for how long (0: DefaultHistoryTime;
	// negative is refused).
	HistoryMax  int
	HistoryTime time.Duration
	// ClientOnly makes the node a client's: it runs no host actor and no data plane, takes
	// no job, and its guard accepts only what peers (member nodes) send to its own client
	// actors and request futures, of the types a client receives (replies, progress,
	// results: see clientBound); every other message, and everything a client sends, is
	// dropped and counted. With Members (the client's view of the cluster), it dials only
	// the members, checking each answers with a peer certificate named as the member.
	ClientOnly bool
	// Observer hears of the node's iterations, collectives, bytes on its actor and data
	// planes, checkpoints and the recoveries of the jobs it coordinates, for its metrics
	// (nil: none, at the cost of a nil check; see Observer for its concurrency rule).
	Observer Observer
}

// Defaults of NodeConfig's limits.
const (
	DefaultLease     = 10 * time.Second
	DefaultMaxShards = 4096
	DefaultMaxJobs   = 64
	// DefaultMaxRestarts is NodeConfig.MaxRestarts when it is 0: enough for a job to ride out
	// a few faults of its actors on a node, few enough that a job whose actors panic on every
	// start fails within minutes.
	DefaultMaxRestarts = 20
	// DefaultHistoryMax and DefaultHistoryTime are NodeConfig.HistoryMax and HistoryTime
	// when 0: the records of 256 ended jobs, for a day.
	DefaultHistoryMax  = jobctl.DefaultHistoryMax
	DefaultHistoryTime = jobctl.DefaultHistoryTime
)

// Partition tells whether traffic between two addresses is cut.
type Partition interface {
	Blocked(from, to string) bool
}

// props builds the props of one of the node's actors: with a partition, its sends to the
// other side are dropped; with a data plane, the collectives' messages to other nodes take it
// (its middleware is the innermost, so partitions and faults apply to what it sends).
func (n *Node) props(producer actor.Producer, opts ...actor.PropsOption) *actor.Props {
	if p := n.cfg.Partition; p != nil {
		self := n.system.Address()
		opts = append(opts, actor.WithSenderMiddleware(func(next actor.SenderFunc) actor.SenderFunc {
			return func(ctx actor.SenderContext, target *actor.PID, env *actor.MessageEnvelope) {
				if target != nil && p.Blocked(self, target.Address) {
					return
				}
				next(ctx, target, env)
			}
		}))
	}
	if n.plane != nil {
		opts = append(opts, actor.WithSenderMiddleware(n.plane.middleware))
	}
	opts = append(opts, actor.WithDispatcher(n.runner))
	return actor.PropsFromProducer(producer, opts...)
}

// shardProps builds a shard actor's props: the node's (see props), with the middleware of
// the faults' message faults, if any, outermost (see Faults.partialMiddleware).
func (n *Node) shardProps(producer actor.Producer) *actor.Props {
	if mw := n.cfg.Faults.partialMiddleware(); mw != nil {
		return n.props(producer, actor.WithSenderMiddleware(mw))
	}
	return n.props(producer)
}

// Members is the part of a cluster membership a node needs to place jobs.
type Members interface {
	// Workers returns the live members that take work, sorted by name.
	Workers() []cluster.Member
}

// Node is one actor system with its remote and host actor.
type Node struct {
	cfg     NodeConfig
	system  *actor.ActorSystem
	remote  *remote.Remote
	host    *actor.PID
	pool    *kernels.Pool
	ownPool bool
	logger  *slog.Logger
	hooks   hooks // the faults' hooks, or noHooks
	once    sync.Once
	store   *checkpoint.Store
	tempDir string // a data dir the node made and removes

	blocksMu sync.Mutex
	blocks   map[string]keptBlock // shards' blocks of X by actor name, kept across restarts

	guard  *guard
	limits *nodeLimits // of its ports' connections and streams (limits_identity.go)
	// senders keeps the addresses clients proved and the clients of the node's jobs, and
	// decides what the node dials (see senders).
	senders *senders
	dialed  dialedConns // the remote's dialed connections, closed by Close
	plane   *dataPlane  // nil: none (NodeConfig.DataPort < 0)
	// runner runs the mailboxes of the node's actors (see mailboxRunner).
	runner *mailboxRunner
	board  jobBoard
	mem    memory
	// placing books the shards this node's coordinators planned, until the members count them.
	placing jobctl.Placing
	// streams bounds each owner's streamed blocks received at once (see streamSlots);
	// owned is each owner's memory held (see ownerMemory).
	streams streamSlots
	owned   ownerMemory

	committedMu sync.Mutex
	committed   map[string]int64     // each job's newest committed checkpoint, as its host heard
	ended       map[string]time.Time // jobs that ended here, and when
	// ckptWrites serialize the writes of a shard's checkpoints of one kind (striped by a hash
	// of kind, job and shard), each with the pruning after it, so that a slow disk queues the
	// writers instead of letting each leave its file before any prunes (see keepCheckpoint).
	ckptWrites [ckptWriteStripes]sync.Mutex

	machinesMu sync.Mutex
	machines   map[string]map[*kernels.Machine]bool // each job's live machines, to interrupt
}

// ckptWriteStripes is the number of locks that serialize checkpoint writes (Node.ckptWrites).
const ckptWriteStripes = 64

// addMachine registers a shard's machine, so that stopping its job interrupts its kernels.
func (n *Node) addMachine(job string, m *kernels.Machine) {
	n.machinesMu.Lock()
	defer n.machinesMu.Unlock()
	if n.machines[job] == nil {
		n.machines[job] = map[*kernels.Machine]bool{}
	}
	n.machines[job][m] = true
}

// removeMachine forgets a machine that was closed.
func (n *Node) removeMachine(job string, m *kernels.Machine) {
	n.machinesMu.Lock()
	defer n.machinesMu.Unlock()
	delete(n.machines[job], m)
	if len(n.machines[job]) == 0 {
		delete(n.machines, job)
	}
}

// interruptJob interrupts the kernels of every machine of a job on this node, from outside
// their actors' mailboxes: a shard in the middle of a long step (rank in the thousands) gives
// up within a block of columns, and the stop that follows takes effect at once.
func (n *Node) interruptJob(job string) {
	n.machinesMu.Lock()
	defer n.machinesMu.Unlock()
	for m := range n.machines[job] {
		m.Interrupt()
	}
}

// Drops returns how many messages from the network the node dropped, by cause: malformed,
// unauthenticated, sent by a role that may not send them, about a job the sender does not
// own; and the connections to its ports closed at once for being too many (the gossip
// port's too, when its Members count them: see RefusedStreamer), and the nodes its Members
// refused as members (see MemberRefuser).
func (n *Node) Drops() map[string]int64 {
	d := n.guard.Drops()
	if r, ok := n.cfg.Members.(RefusedStreamer); ok {
		if refused := r.RefusedStreams(); refused > 0 {
			d[dropGossipStreams] = refused
		}
	}
	if r, ok := n.cfg.Members.(MemberRefuser); ok {
		for cause, refused := range r.Refused() {
			if refused > 0 {
				d[dropGossipMember+cause] = refused
			}
		}
	}
	return d
}

// MemberRefuser is implemented by Members that count the claims of other nodes they refused
// to take in as members, by cause (cluster.Membership.Refused). Its method may be called from
// any goroutine.
type MemberRefuser interface {
	Refused() map[string]int64
}

// dropGossipMember prefixes the causes of MemberRefuser's counts.
const dropGossipMember = "gossip: member refused: "

// RefusedStreamer is implemented by Members that count the connections to the gossip port
// they closed at once for being too many (cluster.Membership.RefusedStreams). Its method may
// be called from any goroutine.
type RefusedStreamer interface {
	RefusedStreams() int64
}

// dropGossipStreams is the drop cause of RefusedStreamer's count.
const dropGossipStreams = "gossip: too many connections"

// keepBlock keeps a shard's block of X on the node, with the custom initialisation streamed
// with it (nil: none), so that a restarted or rolled-back shard does not read (or have
// streamed) them again.
func (n *Node) keepBlock(name string, x kernels.Block, init *initParts) {
	n.blocksMu.Lock()
	n.blocks[name] = keptBlock{x, init}
	n.blocksMu.Unlock()
}

// keptBlock returns the block kept under name and its streamed initialisation, or nil.
func (n *Node) keptBlock(name string) (kernels.Block, *initParts) {
	n.blocksMu.Lock()
	defer n.blocksMu.Unlock()
	k := n.blocks[name]
	return k.x, k.init
}

// keptBlock is a shard's block of X and its streamed initialisation, kept by its node.
type keptBlock struct {
	x    kernels.Block
	init *initParts
}

// dropBlocks forgets the blocks kept for a job.
func (n *Node) dropBlocks(job string) {
	n.blocksMu.Lock()
	defer n.blocksMu.Unlock()
	for name := range n.blocks {
		// Blocks are kept under their shard's PID id, "host/<job>-s<shard>".
		if strings.HasPrefix(strings.TrimPrefix(name, HostName+"/"), job+"-") {
			delete(n.blocks, name)
		}
	}
}

// StartNode starts an actor system listening on cfg.Host:cfg.Port, with its host actor.
func StartNode(cfg NodeConfig) (*Node, error) {
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.MaxRestarts < 0 {
		return nil, fmt.Errorf("node %s: MaxRestarts %d: want 0 or more (0 takes DefaultMaxRestarts, %d)", cfg.Host, cfg.MaxRestarts, DefaultMaxRestarts)
	}
	if cfg.MaxRestarts == 0 {
		cfg.MaxRestarts = DefaultMaxRestarts
	}
	if cfg.HistoryTime < 0 {
		return nil, fmt.Errorf("node %s: HistoryTime %v: want 0 or more (0 takes DefaultHistoryTime, %v)", cfg.Host, cfg.HistoryTime, DefaultHistoryTime)
	}
	cfg.MaxShards = quotaOr(cfg.MaxShards, DefaultMaxShards) // 0: the default; negative: no limit (0)
	cfg.MaxJobs = quotaOr(cfg.MaxJobs, DefaultMaxJobs)
	resolveQuotas(&cfg)
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	cfg.Timeouts = cfg.Timeouts.orDefault()
	if cfg.TLS == nil && !cfg.Insecure {
		return nil, fmt.Errorf("node %s: no credentials: give TLS (certificates, or derived from a cluster secret) or set Insecure", cfg.Host)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	logger = rateLimit(logger, logEvery) // repeated warnings and errors: see lograte.go
	// Remote.Start panics when it cannot listen: find out first, with a clear error.
	lis, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	if err != nil {
		return nil, fmt.Errorf("node cannot listen on %s:%d: %w", cfg.Host, cfg.Port, err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close()

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	g := newGuard(cfg.TLS == nil, logger)
	lim := newNodeLimits(cfg.TLS == nil, func(cause string) { g.drop(cause, 1) })
	g.clientOnly = cfg.ClientOnly
	// The node, as far as the guard's proofs and the dialer need it before the remote starts.
	n := &Node{cfg: cfg, system: system, guard: g, limits: lim}
	var clientTLS *tls.Config
	if cfg.TLS != nil {
		clientTLS = cfg.TLS.Client
	}
	n.senders = newSenders(n, clientTLS)
	if !cfg.ClientOnly {
		g.senders = n.senders
		g.provePeers = cfg.TLS != nil && cfg.Members != nil
	}
	serverOpts := append([]grpc.ServerOption{grpc.MaxRecvMsgSize(maxGRPCMessage), grpc.MaxSendMsgSize(maxGRPCMessage),
		grpc.ConnectionTimeout(remoteHandshakeTimeout)}, lim.serverOptions()...)
	serverOpts = append(serverOpts, g.serverOptions()...)
	// Connections read and write with raw system calls (rawIOCredentials), as the data
	// plane's do.
	obs := cfg.Observer
	var server, creds credentials.TransportCredentials = rawIOCredentials{insecure.NewCredentials(), obs}, rawIOCredentials{insecure.NewCredentials(), obs}
	if cfg.TLS != nil {
		server = limitHandshakes(rawIOCredentials{credentials.NewTLS(cfg.TLS.Server), obs}, maxRemoteHandshakes, maxRemoteHandshakesPerIP, lim.actor, lim.drop)
		creds = rawIOCredentials{credentials.NewTLS(cfg.TLS.Client), obs}
		if cfg.Members != nil {
			creds = checkedCreds{creds, n.senders}
		}
	}
	serverOpts = append(serverOpts, grpc.Creds(server))
	tServer, tDial := transportOptions()
	serverOpts = append(serverOpts, tServer...)
	dialOpts := append([]grpc.DialOption{grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxGRPCMessage), grpc.MaxCallSendMsgSize(maxGRPCMessage))}, tDial...)
	// Every connection the remote dials is kept, so that Close closes it; a node of a
	// cluster dials only members, proven clients and its jobs' clients.
	next := func(ctx context.Context, addr string) (net.Conn, error) {
		return n.dialer().DialContext(ctx, "tcp", addr)
	}
	if cfg.TLS != nil && cfg.Members != nil {
		next = n.senders.dial
	}
	dialOpts = append(dialOpts, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return n.dialed.dial(ctx, addr, next)
	}))
	opts := []remote.ConfigOption{
		remote.WithEndpointWriterBatchSize(remoteBatch),
		remote.WithEndpointWriterQueueSize(remoteQueue),
		remote.WithServerOptions(serverOpts...),
		remote.WithDialOptions(dialOpts...),
		remote.WithCallOptions(grpc.MaxCallRecvMsgSize(maxGRPCMessage), grpc.MaxCallSendMsgSize(maxGRPCMessage)),
	}
	if cfg.Advertise != "" {
		opts = append(opts, remote.WithAdvertisedHost(net.JoinHostPort(cfg.Advertise, strconv.Itoa(port))))
	}
	rcfg := remote.Configure(cfg.Host, port, opts...)
	r := remote.NewRemote(system, rcfg)
	if err := startRemote(r); err != nil {
		return nil, err
	}
	n.remote, n.pool, n.logger, n.hooks, n.blocks, n.runner = r, cfg.Pool, logger, cfg.Faults.hooks(), map[string]keptBlock{}, newMailboxRunner()
	n.committed, n.ended, n.machines = map[string]int64{}, map[string]time.Time{}, map[string]map[*kernels.Machine]bool{}
	n.mem.limit = cfg.Memory
	dir := cfg.DataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "didnmf-node-"); err != nil {
			r.Shutdown(false)
			return nil, fmt.Errorf("node: a temporary data directory: %w", err)
		}
		n.tempDir = dir
	}
	if n.store, err = checkpoint.Open(dir); err != nil {
		r.Shutdown(false)
		n.removeTemp()
		return nil, fmt.Errorf("node: %w", err)
	}
	n.store.SetLimit(cfg.CheckpointQuota)
	if n.pool == nil {
		n.pool = kernels.NewPool(cfg.Threads)
		n.ownPool = true
	}
	if cfg.ClientOnly {
		return n, nil // no host, no data plane: the node takes no job and no collective
	}
	if cfg.DataPort >= 0 {
		if n.plane, err = startDataPlane(n, cfg.Host, cfg.DataPort, cfg.Advertise, cfg.TLS); err != nil {
			n.Close()
			return nil, err
		}
	}
	if err := hostConfig(n).Validate(); err != nil {
		n.Close()
		return nil, fmt.Errorf("node %s: %w", system.Address(), err)
	}
	props := n.props(func() actor.Actor { return newHost(n) },
		actor.WithSupervisor(hostStrategy{}))
	host, err := system.Root.SpawnNamed(props, HostName)
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("node %s: starting the host actor: %w", system.Address(), err)
	}
	n.host = host
	return n, nil
}

// startRemote starts the remote, turning its panic on a listen failure into an error.
func startRemote(r *remote.Remote) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("node cannot start its remote: %v", p)
		}
	}()
	r.Start()
	return nil
}

// Address returns the node's actor address (host:port).
func (n *Node) Address() string { return n.system.Address() }

// DataPlaneAddress returns the host:port of the node's data plane ("" when it has none).
func (n *Node) DataPlaneAddress() string {
	if n.plane == nil {
		return ""
	}
	return n.plane.Address()
}

// System returns the node's actor system.
func (n *Node) System() *actor.ActorSystem { return n.system }

// dialer returns the dialer of the remote's connections. A client's node (ClientOnly) on a
// specific IP dials from that IP: a member proves a client's sender address on the IP its
// connection comes from (senders.go), so a client whose actor address is on 127.0.0.7 but
// whose connections left from 127.0.0.1 would have every reply dropped. A member's node
// dials from where the system routes it: a member's messages are taken as members' without
// that proof (guard.provePeers); a peer that is not yet a member of the receiver's view is
// proven as a client is, which a node bound to a specific IP other than its route's source
// would fail until it is a member.
func (n *Node) dialer() *net.Dialer {
	d := &net.Dialer{}
	if n.cfg.ClientOnly {
		if ip := net.ParseIP(n.cfg.Host); ip != nil && !ip.IsUnspecified() {
			d.LocalAddr = &net.TCPAddr{IP: ip}
		}
	}
	return d
}

// Host returns the PID of the node's host actor (nil on a client's node: see
// NodeConfig.ClientOnly).
func (n *Node) Host() *actor.PID { return n.host }

// HostPID returns the PID of the host actor of the node at address.
func HostPID(address string) *actor.PID { return actor.NewPID(address, HostName) }

// Close stops the node's actors and its remote.
func (n *Node) Close() {
	n.once.Do(func() {
		if n.host != nil {
			_ = n.system.Root.StopFuture(n.host).Wait()
		}
		if n.plane != nil {
			n.plane.close()
		}
		n.remote.Shutdown(false)
		n.dialed.closeAll()
		n.system.Shutdown()
		if n.ownPool {
			n.pool.Close()
		}
		n.removeTemp()
	})
}

func (n *Node) removeTemp() {
	if n.tempDir != "" {
		_ = os.RemoveAll(n.tempDir)
	}
}

// Checkpoints returns the node's checkpoint store.
func (n *Node) Checkpoints() *checkpoint.Store { return n.store }

// LocalCluster is several nodes on loopback in one process.
type LocalCluster struct {
	Nodes []*Node
	// TLS is the credentials its nodes share (made for it unless the config gave some).
	TLS     *pki.Config
	pool    *kernels.Pool
	ownPool bool
}

// StartLocalCluster starts n nodes on loopback in this process, sharing one kernels pool (they
// share the CPU); they talk to each other over real gRPC, never through local PIDs.
func StartLocalCluster(n int, cfg NodeConfig) (*LocalCluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("--nodes must be >= 1, got %d", n)
	}
	c := &LocalCluster{pool: cfg.Pool}
	if cfg.TLS == nil && !cfg.Insecure {
		// Credentials of their own: a fresh secret that nothing outside this process knows.
		ca, err := pki.CAFromSecret(pki.NewSecret())
		if err == nil {
			host := cfg.Host
			if host == "" {
				host = "127.0.0.1"
			}
			cfg.TLS, err = ca.Credentials("local", []string{host}, pki.RolePeer)
		}
		if err != nil {
			return nil, fmt.Errorf("local cluster credentials: %w", err)
		}
	}
	c.TLS = cfg.TLS
	if cfg.Roots == nil {
		// Nodes of one process read and write what the process may: they serve its user only.
		cfg.Roots = fsroot.Unconfined()
	}
	// For the same reason no owner quota unless the config sets one: one owner, the process.
	cfg.OwnerMaxJobs, cfg.OwnerMaxShards = noQuotaOr(cfg.OwnerMaxJobs), noQuotaOr(cfg.OwnerMaxShards)
	cfg.OwnerMemory, cfg.OwnerMaxStreams = noQuotaOr(cfg.OwnerMemory), noQuotaOr(cfg.OwnerMaxStreams)
	if c.pool == nil {
		c.pool = kernels.NewPool(cfg.Threads)
		c.ownPool = true
	}
	cfg.Pool = c.pool
	for i := 0; i < n; i++ {
		node, err := StartNode(cfg)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, node)
	}
	return c, nil
}

// Addresses returns the nodes' actor addresses.
func (c *LocalCluster) Addresses() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Address()
	}
	return out
}

// Close stops every node.
func (c *LocalCluster) Close() {
	for _, n := range c.Nodes {
		n.Close()
	}
	if c.ownPool {
		c.pool.Close()
	}
}

// RemoveStaleCheckpoints removes the checkpoints the node keeps of jobs that neither it nor
// any other live member knows (jobs that ended while the node was down): the node asks the
// hosts at the given actor addresses for their jobs, and removes nothing unless every one
// answers. It returns the jobs it removed.
func (n *Node) RemoveStaleCheckpoints(members []string, timeout time.Duration) ([]string, error) {
	stored, err := n.store.Jobs()
	if err != nil || len(stored) == 0 {
		return nil, err
	}
	known := map[string]bool{}
	futures := make([]actor.Future, 0, len(members)+1)
	for _, addr := range append([]string{n.Address()}, members...) {
		f := n.system.Root.RequestFuture(HostPID(addr), &messages.HostStatus{}, timeout)
		futures = append(futures, f)
	}
	addrs := append([]string{n.Address()}, members...)
	for i, f := range futures {
		res, err := f.Result()
		pong, ok := res.(*messages.Pong)
		if err != nil || !ok || pong.Address != addrs[i] {
			return nil, fmt.Errorf("not removing old checkpoints: member %s gave no list of its jobs: %v", addrs[i], err)
		}
		for _, id := range pong.JobIds {
			known[id] = true
		}
	}
	var removed []string
	for _, job := range stored {
		if known[job] {
			continue
		}
		if err := n.store.RemoveJob(job); err != nil {
			return removed, err
		}
		removed = append(removed, job)
	}
	return removed, nil
}
