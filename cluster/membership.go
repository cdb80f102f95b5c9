// Package cluster tracks the membership of didnmf nodes by gossip (hashicorp/memberlist),
// carries each node's metadata (role, actor address, cores, memory, capacity, start time) and
// places job shards on members by capacity-weighted rendezvous hashing.
//
// Start joins a node to the cluster; the Membership keeps its own table of live nodes, fed by
// memberlist's event callbacks, and reports every change to Config.OnEvent from a single
// goroutine. With Config.Prove a node is taken in only once it has proven its claim (see
// Admission): a process that holds only the gossip key is never a member. Place is a pure
// function: every node that sees the same workers computes the same placement.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Member is a live node as this node knows it.
type Member struct {
	// Name is the node's unique name.
	Name string
	// Gossip is the ip:port of the node's memberlist.
	Gossip string
	// Meta is what the node advertises.
	Meta Meta
}

// EventKind says what happened to a member.
type EventKind int

const (
	// EventJoin: a node joined (or came back after it left or was declared dead).
	EventJoin EventKind = iota + 1
	// EventLeave: a node left gracefully (Event.Dead false) or was declared dead (Dead true).
	EventLeave
	// EventUpdate: a live node changed its Meta (same Meta.Started).
	EventUpdate
)

// String returns "join", "leave", "update" or "event(N)".
func (k EventKind) String() string {
	switch k {
	case EventJoin:
		return "join"
	case EventLeave:
		return "leave"
	case EventUpdate:
		return "update"
	}
	return "event(" + strconv.Itoa(int(k)) + ")"
}

// Event is a change of membership reported to Config.OnEvent.
//
// A node that restarts under the same name advertises a new Meta.Started; when this node
// learns of it while it still lists the old instance, it reports EventLeave with Dead true for
// the old instance followed by EventJoin for the new one, never an EventUpdate.
type Event struct {
	// Kind is what happened.
	Kind EventKind
	// Member is the node concerned; for EventLeave, as it was last known.
	Member Member
	// Dead is true for an EventLeave when the node was declared dead (it failed or was
	// replaced by a restarted instance) rather than left gracefully with Leave. (A node that
	// failed after Leave had advertised Meta.Leaving counts as having left.)
	Dead bool
	// At is when this node learned of the change.
	At time.Time
}

// Config configures Start.
type Config struct {
	// Name is this node's name, unique in the cluster. Empty: "<hostname>-<gossip port>".
	Name string
	// Bind is the ip:port memberlist listens on (TCP and UDP). Port 0 picks a free port (see
	// Local().Gossip); an empty host means 0.0.0.0; empty Bind means 0.0.0.0:7946.
	Bind string
	// Advertise is the ip:port (or ip) other nodes should use to reach this one, when it is not
	// the bind address (NAT, 0.0.0.0). It must be an IP, not a host name; a missing or zero port
	// means the bound port. Empty: the bind IP, or a private IP of this host if bound to 0.0.0.0.
	Advertise string
	// Join lists seed nodes (ip:port) to join at start. Empty: start a new cluster. Before
	// it joins, the node looks its name up through a seed and refuses to start with a
	// *NameTakenError if a live member already has it (see Start).
	Join []string
	// SecretKey is nil, or a 16, 24 or 32-byte key that encrypts and authenticates all gossip
	// with AES-GCM; a node with another key (or none) cannot join. See ParseKey.
	SecretKey []byte
	// Meta is what this node advertises; it must be valid (see Meta).
	Meta Meta
	// Logger receives this package's and memberlist's log lines (memberlist's DEBUG lines are
	// dropped). Nil discards them.
	Logger *slog.Logger
	// OnEvent, if not nil, is called for every join, leave and update (including this node's
	// own join and leave), in order, from one goroutine of this package and never while
	// memberlist holds its locks, so it may call Members. It must not call Leave or Shutdown
	// directly (they wait for that goroutine): start a goroutine for that.
	OnEvent func(Event)
	// Partition, when set, drops the gossip this node sends to nodes on another side of it
	// (tests of network partitions).
	Partition *Partition
	// Timing is how the gossip detects failures (zero fields: DefaultTiming).
	Timing Timing
	// Prove, when set, is asked to prove every other node's claim (its name, gossip address
	// and Meta) before the node counts: until Prove has returned nil for it, a node is not
	// in memberlist's table (never probed, gossiped or rejoined), not among Members or
	// Workers, and its comings and goings raise no Event. Nil admits every node that has
	// the gossip key (clusters without credentials, tests). Concurrency: Prove is called
	// from the membership's own proof goroutines (a bounded number at once), never while
	// memberlist holds its locks; it must return by ctx's deadline.
	//
	// With Prove, only RoleMember claims are taken; a claim of an actor address that this
	// node or another listed member has is refused without a proof; a failed claim is not
	// proven again for 30 s; at most 64 claims wait for a proof and 1024 members are listed
	// (see Admission, and Refused for the counts). Once a claim is proven the membership
	// joins the node's gossip address, which brings its state in. Start waits (up to 10 s)
	// for the proofs of the members it met while joining, so that it returns seeing them.
	Prove func(ctx context.Context, m Member) error
	// Confirm, when set, is asked whether a listed member that the gossip reports gone (dead
	// or left) is really gone: it returns true while that very instance (same Meta.Started)
	// still answers at its own addresses, with its certificate. Anyone who holds the gossip
	// key can gossip a member's death; so the membership acts on a reported death (removes
	// the member, raises its EventLeave) only once Confirm has returned false, and while it
	// returns true it keeps the member, asks again every confirmEvery, and has the member
	// rejoined (it refutes the report). Nil acts on every report at once. Concurrency:
	// called from one goroutine per doubted member, never while memberlist holds its locks;
	// it must return by ctx's deadline.
	Confirm func(ctx context.Context, m Member) bool
	// FrontDoor, when set, is handed every connection to the gossip port (TCP) whose first
	// byte is not gossip: a TLS ClientHello (0x16), or FrontDoorPlain for clusters without
	// credentials. The byte is still to be read. It runs in the connection's own goroutine,
	// holds one of the gossip port's connection slots until it closes the connection, and
	// must close it. Nil closes such connections at once.
	FrontDoor func(conn net.Conn)

	// Listener, when set, is the gossip port already bound by Listen (to know the port, and
	// so the default name, before Start): Start uses it instead of binding Bind, whose IP
	// and port must then be the listener's (empty Bind: the listener's). Start owns it from
	// then on, and closes it if it fails.
	Listener *Listener

	// afterProbe, if not nil, is called between the name's lookup and the join (tests of a
	// holder that joins in between).
	afterProbe func()
}

// ErrShutdown is returned by Leave and UpdateMeta once the membership is shut down.
var ErrShutdown = errors.New("cluster: membership is shut down")

// Constants of the gossip (its timing is Timing's).
const (
	updateTimeout = 5 * time.Second
	gossipLabel   = "didnmf"
	defaultPort   = 7946
)

// Membership is this node's view of the cluster. Its methods are safe for concurrent use.
type Membership struct {
	ml      *memberlist.Memberlist
	streams *limitedStreams // the transport's incoming streams, bounded
	log     *slog.Logger
	name    string
	timing  Timing // Config.Timing with its defaults
	onEvent func(Event)
	started atomic.Bool // set once Start has joined: a conflict about this node's name is then logged

	rivalMu sync.Mutex
	rival   *NameTakenError // the first node met that claims this node's name

	metaMu  sync.Mutex
	metaEnc []byte // served to memberlist by NodeMeta

	updateMu sync.Mutex // serializes UpdateMeta

	mu    sync.Mutex // guards local, table, since and gone
	local Member
	table map[string]Member
	since map[string]time.Time  // when each listed member was listed (for Known)
	gone  map[string]goneMember // members gone from the table, for Known (at most maxGone)

	qmu    sync.Mutex // guards queue and closed
	queue  []Event
	closed bool
	wake   chan struct{}
	done   chan struct{} // closed when the event goroutine has exited

	stateMu sync.Mutex  // serializes Leave and Shutdown
	shut    atomic.Bool // set under stateMu

	lostMu sync.Mutex
	lost   map[string]lostPeer // members declared dead, by name, that this node tries to rejoin (at most maxLost)
	stop   chan struct{}       // closed at shutdown: ends the rejoin loop and the proof goroutines

	// Proofs (Config.Prove; nil: every node with the gossip key is admitted). adm is
	// guarded by admMu, taken after mu when both are.
	prove   func(ctx context.Context, m Member) error
	confirm func(ctx context.Context, m Member) bool
	// keyed is set when the gossip is encrypted (Config.SecretKey): see pushLeaving.
	keyed       bool
	doubted     map[string]Member // listed members reported gone, being confirmed (under mu)
	undoubted   atomic.Int64      // reported deaths that the member itself answered
	admMu       sync.Mutex
	adm         *Admission
	proofWake   chan struct{} // a claim was queued
	refusedMeta atomic.Int64  // nodes refused for unreadable meta (name probes aside), with or without Prove
	logLim      *limiter      // this package's repeated warnings
}

// lostPeer is a member declared dead: its gossip address and when.
type lostPeer struct {
	gossip string
	at     time.Time
}

// Rejoining. Memberlist forgets a member it declared dead: after a network partition heals,
// each side keeps the other for dead and the cluster stays split. So every rejoinInterval a
// node tries to join the members it saw die in the last rejoinFor; a partitioned member
// answers once the network heals and the cluster is one again, while a crashed one is simply
// not reached.
const (
	rejoinInterval = 2 * time.Second
	rejoinFor      = 10 * time.Minute
)

// rejoinLoop is the goroutine that tries to rejoin lost members.
func (m *Membership) rejoinLoop() {
	tick := time.NewTicker(rejoinInterval)
	defer tick.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-tick.C:
		}
		var addrs []string
		m.lostMu.Lock()
		for name, p := range m.lost {
			if time.Since(p.at) > rejoinFor {
				delete(m.lost, name)
				continue
			}
			addrs = append(addrs, p.gossip)
		}
		m.lostMu.Unlock()
		if len(addrs) == 0 || m.shut.Load() {
			continue
		}
		if n, _ := m.ml.Join(addrs); n > 0 {
			m.log.Info("cluster: reached members declared dead before (a partition healed?)", "reached", n)
		}
	}
}

// Start creates this node's memberlist, binds its gossip port and, if cfg.Join is not empty,
// joins the cluster through the seeds; it fails, naming the seeds, if none could be reached.
//
// Before joining, Start looks the node's name up in a seed's view (the first seed that
// answers) without speaking under it. If a live member (alive or suspect) has the name at
// another gossip address, Start fails with a *NameTakenError naming it and has disturbed
// nothing: no member hears of this node, the holder is neither suspected nor replaced. The
// same error comes back if the holder shows up only while joining (it joined in between);
// this node then stops without announcing a leave. A member that holds the name at this
// node's own address is this node's previous instance, killed and restarted (it cannot still
// run: two processes cannot bind one address), and a dead or left member's name is free:
// both are taken over as before. The comment "Names" in name.go has the details.
// Gossip carries the memberlist label "didnmf", so packets of other memberlist clusters
// sharing the network are rejected. Call Leave or Shutdown to stop.
func Start(cfg Config) (*Membership, error) {
	fail := func(err error) (*Membership, error) {
		if cfg.Listener != nil {
			_ = cfg.Listener.t.Shutdown()
		}
		return nil, err
	}
	if strings.HasPrefix(cfg.Name, probePrefix) {
		return fail(fmt.Errorf("cluster: node name %q: names starting with %q are reserved", cfg.Name, probePrefix))
	}
	metaEnc, err := cfg.Meta.Encode()
	if err != nil {
		return fail(err)
	}
	if cfg.SecretKey != nil {
		if err := checkKeyLen(len(cfg.SecretKey)); err != nil {
			return fail(err)
		}
	}
	bind := cfg.Bind
	if cfg.Listener != nil {
		if bind == "" {
			bind = cfg.Listener.Addr()
		}
		if bind != cfg.Listener.Addr() && bind != cfg.Listener.ip+":0" {
			return fail(fmt.Errorf("cluster: bind address %q is not the listener's %s", bind, cfg.Listener.Addr()))
		}
	}
	bindIP, bindPort, err := parseBind(bind)
	if err != nil {
		return fail(err)
	}
	advIP, advPort, err := parseAdvertise(cfg.Advertise)
	if err != nil {
		return fail(err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}

	m := &Membership{
		onEvent: cfg.OnEvent,
		metaEnc: metaEnc,
		table:   make(map[string]Member),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		lost:    map[string]lostPeer{},
		stop:    make(chan struct{}),
		timing:  cfg.Timing.orDefault(),
		prove:   cfg.Prove,
		confirm: cfg.Confirm,
		doubted: map[string]Member{},
		keyed:   cfg.SecretKey != nil,
	}
	if m.prove != nil {
		m.adm = NewAdmission()
		m.proofWake = make(chan struct{}, 1)
	}

	// Bind the transport ourselves, to know the port before choosing a default name.
	var transport *memberlist.NetTransport
	var mlLog *log.Logger
	if cfg.Listener != nil {
		transport, mlLog = cfg.Listener.t, cfg.Listener.log
	} else {
		mlLog = log.New(io.Discard, "", 0)
		if transport, err = bindTransport(bindIP, bindPort, mlLog); err != nil {
			return nil, err
		}
	}
	port := transport.GetAutoBindPort()
	name := cfg.Name
	if name == "" {
		name = DefaultName(port)
	}
	logger = logger.With("node", name)
	m.log = logger
	m.name = name
	// Known before memberlist starts: its alive delegate admits this node by name.
	m.local = Member{Name: name, Meta: cfg.Meta}
	m.logLim = newLimiter(logger, logEvery)
	if cfg.Logger != nil {
		mlLog.SetOutput(&logWriter{lim: m.logLim, stopping: &m.shut})
	}

	mc := memberlist.DefaultLocalConfig()
	mc.Name = name
	mc.BindAddr = bindIP
	mc.BindPort = port
	mc.AdvertiseAddr = advIP
	mc.AdvertisePort = port
	if advPort != 0 {
		mc.AdvertisePort = advPort
	}
	streams := limitStreams(transport, cfg.FrontDoor)
	m.streams = streams
	mc.Transport = streams
	var selfAddr atomic.Value // the advertised gossip address, known once memberlist runs
	selfAddr.Store("")
	if cfg.Partition != nil {
		mc.Transport = &partitionedTransport{Transport: streams, self: func() string { return selfAddr.Load().(string) }, p: cfg.Partition}
	}
	mc.Label = gossipLabel
	mc.SecretKey = cfg.SecretKey
	mc.Logger = mlLog
	mc.Delegate = delegate{m}
	mc.Events = delegate{m}
	mc.Alive = delegate{m}
	mc.Conflict = delegate{m}
	m.timing.apply(mc)

	ml, err := memberlist.Create(mc)
	if err != nil {
		_ = streams.Shutdown()
		return nil, fmt.Errorf("cluster: start memberlist %q on %s: %v", name, net.JoinHostPort(bindIP, strconv.Itoa(port)), err)
	}
	m.ml = ml
	self := ml.LocalNode()
	selfAddr.Store(hostPort(self.Addr, self.Port))
	m.mu.Lock()
	m.local = Member{Name: name, Gossip: hostPort(self.Addr, self.Port), Meta: cfg.Meta}
	m.mu.Unlock()
	if m.prove != nil {
		for range proofs {
			go m.proofLoop()
		}
	}

	if len(cfg.Join) > 0 {
		pp := probeParams{name: name, bindIP: bindIP, advIP: self.Addr.String(), port: port, self: m.local.Gossip,
			key: cfg.SecretKey, partition: cfg.Partition, tcpTimeout: m.timing.TCPTimeout}
		err := m.checkName(pp, cfg.Join)
		if err == nil {
			if cfg.afterProbe != nil {
				cfg.afterProbe()
			}
			err = m.join(cfg.Join)
		}
		if err != nil {
			// No Leave: a leave under a name another node holds would be taken for the holder's.
			m.shut.Store(true)
			close(m.stop)
			_ = ml.Shutdown()
			return nil, err
		}
		m.awaitProofs()
	}
	// A node claiming this name met from now on is logged by conflict; one met before (after
	// join's last look) still fails the start.
	m.started.Store(true)
	if rival := m.rivalErr(); rival != nil {
		m.shut.Store(true)
		close(m.stop)
		_ = ml.Shutdown()
		return nil, rival
	}
	// Events queued so far (this node's own join, the members learned while joining) are
	// delivered now: OnEvent is never called if Start fails.
	if m.onEvent != nil {
		go m.dispatch()
	} else {
		close(m.done)
	}
	go m.rejoinLoop()
	logger.Info("cluster: gossip started", "gossip", m.local.Gossip, "role", cfg.Meta.Role, "members", len(m.Members()))
	return m, nil
}

// DefaultName is the name of a node started without one whose gossip port is port:
// "<hostname>-<port>" ("node-<port>" if the host name is unknown).
func DefaultName(port int) string {
	host, _ := os.Hostname()
	if host == "" {
		host = "node"
	}
	return host + "-" + strconv.Itoa(port)
}

// Listener is a gossip port bound before Start (see Config.Listener), for a node whose name
// (and so its certificate) depends on its port: DefaultName(l.Port()).
type Listener struct {
	t   *memberlist.NetTransport
	log *log.Logger
	ip  string
}

// Listen binds the gossip port (TCP and UDP) at bind, as Start would (see Config.Bind).
func Listen(bind string) (*Listener, error) {
	ip, port, err := parseBind(bind)
	if err != nil {
		return nil, err
	}
	mlLog := log.New(io.Discard, "", 0)
	t, err := bindTransport(ip, port, mlLog)
	if err != nil {
		return nil, err
	}
	return &Listener{t: t, log: mlLog, ip: ip}, nil
}

// Port returns the bound port.
func (l *Listener) Port() int { return l.t.GetAutoBindPort() }

// Addr returns the bound ip:port.
func (l *Listener) Addr() string { return net.JoinHostPort(l.ip, strconv.Itoa(l.Port())) }

// Close unbinds the port of a listener not given to Start (Start owns the one it is given).
func (l *Listener) Close() error { return l.t.Shutdown() }

// awaitProofs waits, up to startWait, until the claims queued so far (those of the members
// met while joining) are proven and taken in, or failed: a node that has just started sees
// the members it can prove.
func (m *Membership) awaitProofs() {
	if m.adm == nil {
		return
	}
	m.admMu.Lock()
	seq := m.adm.seq
	m.admMu.Unlock()
	deadline := time.Now().Add(startWait)
	for time.Now().Before(deadline) {
		m.admMu.Lock()
		busy := m.adm.pendingUpTo(seq)
		m.admMu.Unlock()
		if !busy {
			return
		}
		time.Sleep(startPoll)
	}
	m.log.Warn("cluster: some members met while joining are not proven yet", "waited", startWait)
}

// proofLoop is one of the goroutines that prove claims (Config.Prove): it takes a queued
// claim, proves it and, once proven, joins the node's gossip address so that a push/pull
// brings the node's state in again, now admitted.
func (m *Membership) proofLoop() {
	for {
		m.admMu.Lock()
		mem, ok := m.adm.Next()
		more := len(m.adm.queue) > 0
		m.admMu.Unlock()
		if !ok {
			select {
			case <-m.stop:
				return
			case <-m.proofWake:
			}
			continue
		}
		if more {
			m.wakeProofs()
		}
		c := ClaimOf(mem)
		ctx, cancel := context.WithTimeout(context.Background(), proofTime)
		err := m.prove(ctx, mem)
		cancel()
		now := time.Now()
		if err != nil {
			m.admMu.Lock()
			m.adm.Failed(c, now)
			m.admMu.Unlock()
			m.logLim.log(slog.LevelWarn, "cluster: refused a node whose claim failed its proof ("+flatten(err)+")",
				"peer", mem.Name, "gossip", mem.Gossip, "actor", mem.Meta.Actor)
			continue
		}
		m.admMu.Lock()
		m.adm.Proven(c, now)
		m.admMu.Unlock()
		if !m.shut.Load() {
			if _, err := m.ml.Join([]string{mem.Gossip}); err != nil {
				m.log.Info("cluster: a proven node did not answer", "peer", mem.Name, "gossip", mem.Gossip, "err", flatten(err))
			}
		}
		m.admMu.Lock()
		m.adm.Finish(c)
		m.admMu.Unlock()
	}
}

// wakeProofs wakes a proof goroutine.
func (m *Membership) wakeProofs() {
	select {
	case m.proofWake <- struct{}{}:
	default:
	}
}

// Refused returns how many claims of other nodes this node refused, by cause (the Refused*
// constants): proofs that failed, counted once each, and alive messages refused without a
// proof (failed recently, the proof queue full, another member's actor address, not a
// member, the table full, unreadable meta). A node waiting for its proof is not counted.
// Without Config.Prove only unreadable meta is counted.
func (m *Membership) Refused() map[string]int64 {
	out := map[string]int64{}
	if m.adm != nil {
		m.admMu.Lock()
		out = m.adm.Refused()
		m.admMu.Unlock()
	}
	if n := m.refusedMeta.Load(); n > 0 {
		out[RefusedMeta] = n
	}
	if n := m.undoubted.Load(); n > 0 {
		out[dropUndoubted] = n
	}
	return out
}

// join contacts every seed; it fails only if none could be reached, or with a
// *NameTakenError as soon as a node claiming this node's name is met.
func (m *Membership) join(seeds []string) error {
	var errs []string
	ok := 0
	for _, seed := range seeds {
		n, err := m.ml.Join([]string{seed})
		if e := m.rivalErr(); e != nil {
			return e
		}
		if n > 0 {
			ok++
			continue
		}
		if err == nil {
			err = errors.New("no node reached")
		}
		errs = append(errs, seedError(seed, err))
	}
	if ok > 0 {
		if len(errs) > 0 {
			m.log.Warn("cluster: some seeds could not be reached", "errors", strings.Join(errs, "; "))
		}
		return nil
	}
	return joinError(seeds, errs, nil)
}

// JoinError is Start's error when no seed could be joined. Detect it with
// errors.As(err, new(*JoinError)).
type JoinError struct {
	// Seeds are the seeds tried.
	Seeds []string
	// Errs says why each seed could not be joined, a line each, naming it.
	Errs []string
	// Unreached is set when no connection to any seed could be made: nothing listens there
	// (refused), the address is not reached from here (time-out, no route), or its name does
	// not resolve. It holds why, for each seed. It is nil when a seed answered and then
	// refused this node (another gossip key, not a gossip port).
	Unreached []error
}

func (e *JoinError) Error() string {
	msg := fmt.Sprintf("cluster: could not join the cluster through any seed of [%s]: %s", strings.Join(e.Seeds, " "), strings.Join(e.Errs, "; "))
	if strings.Contains(msg, "crypt") {
		msg += " (do all nodes use the same gossip key?)"
	}
	return msg
}

// joinError is the error of a join that reached none of the seeds; errs says why, a line each,
// and unreached, when no seed could be connected to, why not (see JoinError).
func joinError(seeds, errs []string, unreached []error) error {
	return &JoinError{Seeds: seeds, Errs: errs, Unreached: unreached}
}

// flatten turns a possibly multi-error into one line.
func flatten(err error) string {
	if w, ok := err.(interface{ WrappedErrors() []error }); ok {
		var parts []string
		for _, e := range w.WrappedErrors() {
			parts = append(parts, flatten(e))
		}
		if len(parts) > 0 {
			return strings.Join(parts, "; ")
		}
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}

// Local returns this node as it advertises itself.
func (m *Membership) Local() Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.local
}

// RefusedStreams is the number of connections to the gossip port closed at once because
// maxStreams were being served, or maxStreamsPerIP from their address.
func (m *Membership) RefusedStreams() int64 { return m.streams.refused.Load() }

// GossipBytes returns the bytes this node's gossip port sent and received since it started:
// memberlist's packets and streams, and the front door's streams. It may be called from any
// goroutine.
func (m *Membership) GossipBytes() (sent, received int64) {
	return m.streams.sent.Load(), m.streams.received.Load()
}

// HealthScore returns memberlist's awareness of this node's own health (its
// GetHealthScore): 0 when it answers probes in time, higher (up to the awareness cap)
// after it was slow to, when its view of others may be wrong. It may be called from any
// goroutine.
func (m *Membership) HealthScore() int { return m.ml.GetHealthScore() }

// Members returns the live nodes, this one included and both roles (only members with
// Config.Prove), sorted by name. It reads this package's own table, kept up to date from
// memberlist's events.
func (m *Membership) Members() []Member {
	m.mu.Lock()
	out := make([]Member, 0, len(m.table))
	for _, mem := range m.table {
		out = append(out, mem)
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Workers returns the live nodes with RoleMember, sorted by name, except those leaving
// (Meta.Leaving): the members that may get work.
func (m *Membership) Workers() []Member {
	return slices.DeleteFunc(m.Members(), func(mem Member) bool {
		return mem.Meta.Role != RoleMember || mem.Meta.Leaving
	})
}

// UpdateMeta advertises new metadata for this node and waits (up to 5 s) until the update has
// been gossiped. Others see an EventUpdate, or a leave and a join if meta.Started changed.
func (m *Membership) UpdateMeta(meta Meta) error {
	return m.updateMeta(meta, updateTimeout)
}

func (m *Membership) updateMeta(meta Meta, timeout time.Duration) error {
	enc, err := meta.Encode()
	if err != nil {
		return err
	}
	m.updateMu.Lock()
	defer m.updateMu.Unlock()
	if m.shut.Load() {
		return ErrShutdown
	}
	m.metaMu.Lock()
	m.metaEnc = enc
	m.metaMu.Unlock()
	m.mu.Lock()
	m.local.Meta = meta
	m.mu.Unlock()
	if err := m.ml.UpdateNode(timeout); err != nil {
		return fmt.Errorf("cluster: meta updated locally, but its gossip was not confirmed: %v", err)
	}
	return nil
}

// Leave leaves the cluster gracefully, then shuts down. It first advertises Meta.Leaving (the
// others report an EventUpdate and drop this node from their Workers), then has memberlist
// announce the leave (they report an EventLeave with Dead false). It waits up to timeout in
// all (0: no limit) for both to be gossiped. Calling Shutdown afterwards is safe; Leave after
// shutdown returns ErrShutdown.
func (m *Membership) Leave(timeout time.Duration) error {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	if m.shut.Load() {
		return ErrShutdown
	}
	deadline := time.Now().Add(timeout)
	meta := m.Local().Meta
	meta.Leaving = true
	var errs []error
	if err := m.updateMeta(meta, timeout); err != nil {
		errs = append(errs, err)
	}
	m.pushLeaving(deadline, timeout)
	rest := time.Until(deadline)
	if timeout <= 0 {
		rest = 0
	} else if rest <= 0 {
		rest = time.Millisecond
	}
	if rival := m.rivalErr(); rival != nil {
		// Memberlist's leave is a dead message for the name, which the members that list the
		// other node would apply to it.
		m.log.Warn("cluster: leaving without announcing it: another node claims this name", "claimant", rival.Address)
	} else if err := m.ml.Leave(rest); err != nil {
		errs = append(errs, fmt.Errorf("cluster: leave: %v", err))
	}
	errs = append(errs, m.shutdownLocked())
	return errors.Join(errs...)
}

// pushLeaving hands this node's state, now advertising Meta.Leaving, to every listed member
// over a TCP push/pull, waiting for them up to half the time left before deadline (all of it
// when timeout is 0). The gossip of the update and of memberlist's leave travel as UDP
// packets, each sent a few times and then counted as delivered: one lost on a busy machine
// and a member sees a failure where there was a leave. With the Leaving flag pushed, a
// member that misses the leave itself still reports a leave when its failure detector
// notices the node gone (see observe).
//
// Only a keyed cluster pushes: a push/pull hands over every member this node lists, and a
// listed address may by now be another cluster's node (a member that died, its port taken
// again); the key keeps that cluster from reading it, while without one the two would merge.
func (m *Membership) pushLeaving(deadline time.Time, timeout time.Duration) {
	if !m.keyed {
		return
	}
	m.mu.Lock()
	var peers []string
	for name, mem := range m.table {
		if name != m.local.Name {
			peers = append(peers, mem.Gossip)
		}
	}
	m.mu.Unlock()
	if len(peers) == 0 {
		return
	}
	sort.Strings(peers)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = m.ml.Join(peers) // a member that cannot be reached learns it from the gossip
	}()
	var wait <-chan time.Time
	if timeout > 0 {
		wait = time.After(time.Until(deadline) / 2)
	}
	select {
	case <-done:
	case <-wait:
	}
}

// Shutdown stops gossip at once, without announcing a leave: to the others this node looks
// failed and is declared dead after a few seconds. It waits until OnEvent has returned for
// every event already queued; no OnEvent call starts after it returns. It is idempotent.
func (m *Membership) Shutdown() error {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	if m.shut.Load() {
		return nil
	}
	return m.shutdownLocked()
}

func (m *Membership) shutdownLocked() error {
	m.shut.Store(true)
	close(m.stop)
	err := m.ml.Shutdown()
	m.closeEvents()
	<-m.done
	if err != nil {
		return fmt.Errorf("cluster: shutdown: %v", err)
	}
	m.log.Info("cluster: gossip stopped")
	return nil
}

// observe updates the table from a memberlist event and queues the resulting events. It runs
// under memberlist's lock: it must not call into memberlist.
func (m *Membership) observe(kind EventKind, n *memberlist.Node) {
	now := time.Now()
	mem := Member{Name: n.Name, Gossip: hostPort(n.Addr, n.Port)}
	meta, err := DecodeMeta(n.Meta)
	m.mu.Lock()
	defer m.mu.Unlock()
	old, had := m.table[n.Name]
	if err != nil {
		// The alive delegate keeps such nodes out; a leave may still name one we never listed.
		if had {
			meta = old.Meta
		} else {
			m.log.Warn("cluster: ignoring event for a node with unreadable meta", "peer", n.Name, "event", kind, "err", err)
			return
		}
	}
	mem.Meta = meta
	if n.Name != m.local.Name {
		m.lostMu.Lock()
		if kind == EventLeave && !meta.Leaving && !(had && old.Meta.Leaving) {
			if _, ok := m.lost[n.Name]; !ok && len(m.lost) >= maxLost {
				m.dropOldestLost()
			}
			m.lost[n.Name] = lostPeer{gossip: mem.Gossip, at: now}
		} else if kind != EventLeave {
			delete(m.lost, n.Name)
		}
		m.lostMu.Unlock()
		// A claim gone (when no Confirm doubts the report first: confirmGone forgets it) or
		// replaced by another is proven again if it comes back.
		gone := kind == EventLeave && m.confirm == nil
		replaced := kind != EventLeave && ClaimOf(old) != ClaimOf(mem)
		if m.adm != nil && had && (gone || replaced) {
			m.admMu.Lock()
			m.adm.Forget(ClaimOf(old))
			m.admMu.Unlock()
		}
	}
	if kind != EventLeave {
		delete(m.doubted, n.Name) // back in the gossip: a refuted report, or a restart
	} else if had && m.confirm != nil && n.Name != m.local.Name {
		// Reported gone: anyone with the gossip key can say so. The member stays listed
		// until it is confirmed gone (confirmGone).
		if _, doubting := m.doubted[n.Name]; !doubting {
			m.doubted[n.Name] = old
			go m.confirmGone(old, kind, meta.Leaving || old.Meta.Leaving)
		}
		return
	}
	switch kind {
	case EventJoin, EventUpdate:
		m.table[n.Name] = mem
		switch {
		case !had:
			m.noteListed(n.Name, now)
			m.enqueue(Event{Kind: EventJoin, Member: mem, At: now})
		case old.Meta.Started != meta.Started:
			m.noteListed(n.Name, now)
			m.log.Info("cluster: node restarted", "peer", n.Name, "gossip", mem.Gossip)
			m.enqueue(Event{Kind: EventLeave, Member: old, Dead: true, At: now})
			m.enqueue(Event{Kind: EventJoin, Member: mem, At: now})
		case old != mem:
			m.enqueue(Event{Kind: EventUpdate, Member: mem, At: now})
		}
	case EventLeave:
		delete(m.table, n.Name)
		// memberlist never fills in Node.State for its delegates, so whether the node left
		// or died is told by the Leaving flag it advertised before leaving.
		dead := !meta.Leaving && !(had && old.Meta.Leaving)
		if had {
			m.noteGone(mem, dead, now)
		}
		m.log.Info("cluster: node gone", "peer", n.Name, "gossip", mem.Gossip, "dead", dead)
		m.enqueue(Event{Kind: EventLeave, Member: mem, Dead: dead, At: now})
	}
}

// confirmEvery is how often a member reported gone that still answers is asked again, and
// confirmWait how long one answer may take.
const (
	confirmEvery = time.Second
	confirmWait  = 2 * time.Second
)

// dropUndoubted is the Refused cause of reported deaths the member itself answered.
const dropUndoubted = "reported gone but answers"

// confirmGone runs while mem, listed, is reported gone (by the gossip's leave event kind,
// left gracefully when leaving): it asks Config.Confirm until the member is confirmed gone,
// then removes it and raises its EventLeave, or until the member is back in the gossip
// (observe clears the doubt) or the membership shuts down.
func (m *Membership) confirmGone(mem Member, kind EventKind, leaving bool) {
	logged := false
	for {
		ctx, cancel := context.WithTimeout(context.Background(), confirmWait)
		alive := m.confirm(ctx, mem)
		cancel()
		m.mu.Lock()
		if cur, ok := m.doubted[mem.Name]; !ok || cur != mem || m.table[mem.Name] != mem {
			m.mu.Unlock()
			return // back, restarted, or gone another way
		}
		if !alive {
			delete(m.doubted, mem.Name)
			delete(m.table, mem.Name)
			m.noteGone(mem, !leaving, time.Now())
			if m.adm != nil {
				m.admMu.Lock()
				m.adm.Forget(ClaimOf(mem))
				m.admMu.Unlock()
			}
			m.log.Info("cluster: node gone", "peer", mem.Name, "gossip", mem.Gossip, "dead", !leaving)
			m.enqueue(Event{Kind: EventLeave, Member: mem, Dead: !leaving, At: time.Now()})
			m.mu.Unlock()
			return
		}
		m.mu.Unlock()
		if !logged && !leaving { // a leaving member's front door answers until it has left
			logged = true
			m.undoubted.Add(1)
			m.log.Warn("cluster: the gossip reports a member gone that still answers: not acting on it (a forged or stale report?)",
				"peer", mem.Name, "gossip", mem.Gossip, "event", kind)
		}
		// Have it hear of the report, so that it refutes it (a push/pull with it).
		_, _ = m.ml.Join([]string{mem.Gossip})
		select {
		case <-m.stop:
			return
		case <-time.After(confirmEvery):
		}
	}
}

// dropOldestLost forgets the member declared dead longest ago. It runs under lostMu.
func (m *Membership) dropOldestLost() {
	var oldest string
	var at time.Time
	for name, p := range m.lost {
		if oldest == "" || p.at.Before(at) {
			oldest, at = name, p.at
		}
	}
	delete(m.lost, oldest)
}

// enqueue hands an event to the event goroutine; it never blocks on OnEvent.
func (m *Membership) enqueue(e Event) {
	if m.onEvent == nil {
		return
	}
	m.qmu.Lock()
	if !m.closed {
		m.queue = append(m.queue, e)
	}
	m.qmu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *Membership) closeEvents() {
	m.qmu.Lock()
	m.closed = true
	m.qmu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// dispatch is the one goroutine that calls OnEvent; it delivers what was queued before the
// close, then exits.
func (m *Membership) dispatch() {
	defer close(m.done)
	for {
		m.qmu.Lock()
		batch, closed := m.queue, m.closed
		m.queue = nil
		m.qmu.Unlock()
		for _, e := range batch {
			m.onEvent(e)
		}
		if closed {
			return
		}
		if len(batch) == 0 {
			<-m.wake
		}
	}
}

// delegate implements memberlist's Delegate, EventDelegate, AliveDelegate and ConflictDelegate
// for a Membership without adding those methods to its API.
type delegate struct{ m *Membership }

func (d delegate) NodeMeta(limit int) []byte {
	d.m.metaMu.Lock()
	defer d.m.metaMu.Unlock()
	if len(d.m.metaEnc) > limit {
		return nil // unreachable: Encode enforces memberlist.MetaMaxSize
	}
	return slices.Clone(d.m.metaEnc)
}

func (delegate) NotifyMsg([]byte)                           {}
func (delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (delegate) LocalState(join bool) []byte                { return nil }
func (delegate) MergeRemoteState(buf []byte, join bool)     {}

func (d delegate) NotifyJoin(n *memberlist.Node)   { d.m.observe(EventJoin, n) }
func (d delegate) NotifyLeave(n *memberlist.Node)  { d.m.observe(EventLeave, n) }
func (d delegate) NotifyUpdate(n *memberlist.Node) { d.m.observe(EventUpdate, n) }

// NotifyAlive is memberlist's alive delegate, called under its lock for every alive message
// (gossiped, or merged from a push/pull), this node's own included, before memberlist takes
// the node in or updates it: an error makes memberlist ignore the message, so the node is not
// added to its table (nothing else adds nodes to it) or not updated. It keeps out nodes whose
// meta this build cannot read, among them the name probes of starting nodes (see Names), which
// advertise none; and, with Config.Prove, every node whose claim is not proven (see
// Admission), queuing its proof.
func (d delegate) NotifyAlive(n *memberlist.Node) error {
	m := d.m
	meta, err := DecodeMeta(n.Meta)
	if err != nil {
		if !strings.HasPrefix(n.Name, probePrefix) {
			m.refusedMeta.Add(1)
		}
		return fmt.Errorf("%s: node %q (%s): %v", RefusedMeta, n.Name, hostPort(n.Addr, n.Port), err)
	}
	if m.adm == nil {
		return nil
	}
	mem := Member{Name: n.Name, Gossip: hostPort(n.Addr, n.Port), Meta: meta}
	m.mu.Lock()
	m.admMu.Lock()
	queued := len(m.adm.queue)
	cause := m.adm.Decide(mem, m.table, m.local, time.Now())
	queued = len(m.adm.queue) - queued
	m.admMu.Unlock()
	m.mu.Unlock()
	if queued > 0 {
		m.wakeProofs()
	}
	if cause == "" {
		return nil
	}
	return fmt.Errorf("%s: node %q (gossip %s, actor %q)", cause, mem.Name, mem.Gossip, meta.Actor)
}

func hostPort(ip net.IP, port uint16) string {
	return net.JoinHostPort(ip.String(), strconv.Itoa(int(port)))
}

// parseBind splits Config.Bind into an IP literal and a port.
func parseBind(s string) (string, int, error) {
	if s == "" {
		return "0.0.0.0", defaultPort, nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("cluster: bind address %q is not ip:port: %v", s, err)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	if net.ParseIP(host) == nil {
		return "", 0, fmt.Errorf("cluster: bind address %q: %q is not an IP address", s, host)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("cluster: bind address %q: port %q is not a number in 0..65535", s, port)
	}
	return host, int(p), nil
}

// parseAdvertise splits Config.Advertise into an IP literal and a port (0: the bound port).
func parseAdvertise(s string) (string, int, error) {
	if s == "" {
		return "", 0, nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), "0"
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return "", 0, fmt.Errorf("cluster: advertise address %q: %q is not an IP address (memberlist needs an IP, not a host name)", s, host)
	}
	if ip.IsUnspecified() {
		return "", 0, fmt.Errorf("cluster: advertise address %q: %s cannot be advertised, give this host's IP", s, host)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("cluster: advertise address %q: port %q is not a number in 0..65535", s, port)
	}
	return host, int(p), nil
}

// bindTransport opens memberlist's TCP and UDP listeners. For port 0 it retries a few times:
// the kernel picks a free TCP port, which may be taken for UDP.
func bindTransport(ip string, port int, logger *log.Logger) (*memberlist.NetTransport, error) {
	tries := 1
	if port == 0 {
		tries = 10
	}
	var err error
	for range tries {
		var t *memberlist.NetTransport
		t, err = memberlist.NewNetTransport(&memberlist.NetTransportConfig{
			BindAddrs: []string{ip},
			BindPort:  port,
			Logger:    logger,
		})
		if err == nil {
			return t, nil
		}
		if !strings.Contains(err.Error(), "address already in use") || port != 0 {
			break
		}
	}
	return nil, fmt.Errorf("cluster: bind gossip on %s: %v", net.JoinHostPort(ip, strconv.Itoa(port)), err)
}

// logWriter adapts memberlist's *log.Logger output ("[LEVEL] memberlist: text") to slog,
// dropping DEBUG and TRACE lines, those about a starting node's name probe (the warning that
// its alive message was ignored: see Names) and those about a node refused while its proof is
// pending (the membership logs the proof's outcome), and rate-limiting the rest by kind (see
// limiter). log.Logger calls Write once per line. Once stopping is set (the membership shuts
// down: memberlist closes its sockets before its gossip loop stops), a line about a closed
// connection is the shutdown's own doing, not an error: it is dropped.
// closedConn is the text of net.ErrClosed, as memberlist's lines carry it.
var closedConn = net.ErrClosed.Error()

type logWriter struct {
	lim      *limiter
	stopping *atomic.Bool // nil: never
}

func (w *logWriter) Write(p []byte) (int, error) {
	s := strings.TrimSpace(string(p))
	if strings.Contains(s, probePrefix) || strings.Contains(s, "': "+ProofPending+": ") {
		return len(p), nil
	}
	if w.stopping != nil && w.stopping.Load() && strings.Contains(s, closedConn) {
		return len(p), nil
	}
	level := slog.LevelInfo
	if strings.HasPrefix(s, "[") {
		if i := strings.IndexByte(s, ']'); i > 0 {
			switch s[1:i] {
			case "DEBUG", "TRACE":
				return len(p), nil
			case "WARN", "WARNING":
				level = slog.LevelWarn
			case "ERR", "ERROR":
				level = slog.LevelError
			}
			s = strings.TrimSpace(s[i+1:])
		}
	}
	s = strings.TrimPrefix(s, "memberlist: ")
	w.lim.log(level, "memberlist: "+s)
	return len(p), nil
}
