package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// NameTakenError is returned by Start when a live member of the cluster (alive or suspect in
// the view of the seed asked) already has the name this node was to join under, at another
// gossip address. Start has then announced nothing under that name: the holder and the other
// members are undisturbed (no suspicion, no death, no join or leave). Detect it with
// errors.As(err, new(*NameTakenError)).
type NameTakenError struct {
	// Name is the name asked for.
	Name string
	// Address is the holder's gossip address (ip:port).
	Address string
	// Actor is the holder's actor address, "" if it advertises none.
	Actor string
}

// Error says who holds the name and where, e.g.
// `a live member is already named "n2" (gossip 127.0.0.1:7947, actor 127.0.0.1:40123): choose another --name`.
func (e *NameTakenError) Error() string {
	where := "gossip " + e.Address
	if e.Actor != "" {
		where += ", actor " + e.Actor
	}
	return fmt.Sprintf("a live member is already named %q (%s): choose another --name", e.Name, where)
}

// nameTaken describes n, the holder of a name, as a NameTakenError.
func nameTaken(n *memberlist.Node) *NameTakenError {
	e := &NameTakenError{Name: n.Name, Address: hostPort(n.Addr, n.Port)}
	if meta, err := DecodeMeta(n.Meta); err == nil {
		e.Actor = meta.Actor
	}
	return e
}

// Names. Memberlist identifies nodes by name alone in its suspect and dead messages, and it
// refuses an alive message for a live node's name from another address (a "conflict") only
// on the nodes that already list the holder. So a second node started under a live member's
// name is refused by the members' views but, once it has gossiped, its leave (a dead message
// for the name) or its failure is taken for the holder's, which is then declared left or
// dead. Start therefore looks the name up before this node speaks under it:
//
//   - A probe: a throwaway memberlist under a random name starting with probePrefix, which
//     advertises no meta, does one join push/pull with a seed (the next seed if one cannot be
//     reached or only knows this node) and aborts the merge of what it receives in its merge
//     delegate, where it reads the seed's whole view with each node's state. The seed's alive
//     delegate refuses the probe (its meta is empty), so no member ever lists it, and its
//     memberlist's warning about that is dropped from the log (see logWriter). The probe is
//     shut down without a leave and never gossips (its probe, gossip and push/pull timers are
//     off).
//   - The name counts as taken if the view holds it alive or suspect at another gossip address
//     than this node's. At the same address it is this node's previous instance, killed and
//     restarted before the others noticed (no two live processes bind one address): memberlist
//     has the new instance refute the old one's suspicion, as it always did. A name held by a
//     dead or left member is free. If that member was at another address, Start first waits
//     out memberlist's DeadNodeReclaimTime (before which the members would refuse the new
//     address for a dead one) and the last retransmissions of the member's death or leave
//     (which, arriving after the new instance's alive message, would be applied to it: a
//     spurious death and rejoin). Memberlist forgets such members after about 15 s, and at the
//     same address its refutation handles both cases, so this wait is rare.
//   - A race (the holder joined between the probe and the join, or a seed that did not know it
//     yet) shows during the join: memberlist calls the conflict delegate of this node when it
//     meets an alive message for its own name from another address. Start then stops joining,
//     shuts memberlist down without a leave (a leave would be taken for the holder's) and
//     returns the NameTakenError. The seeds that met this node's alive message refused it as a
//     conflict and still list the holder.
//   - A conflict about its own name that reaches a node after Start returned (two nodes started
//     under one name at the same time, each through a seed that did not know the other) is
//     logged as an error, and that node's Leave then shuts down without announcing a leave.
const probePrefix = "didnmf-name-probe-"

// errProbeDone aborts the probe's merge once its merge delegate has read the seed's view.
var errProbeDone = errors.New("cluster: name probe: view read")

// probeParams is what a probe needs to reach the seeds as the node it probes for.
type probeParams struct {
	name       string // the name looked up
	bindIP     string
	advIP      string // the node's advertised IP
	port       int    // the node's gossip port: the default port of seeds given without one
	self       string // the node's advertised gossip address
	key        []byte
	partition  *Partition
	tcpTimeout time.Duration // Timing.TCPTimeout of the node
}

// probeView is the probe's merge delegate: it keeps the view a seed sent.
type probeView struct {
	mu    sync.Mutex
	nodes []*memberlist.Node
	got   bool
}

func (v *probeView) NotifyMerge(peers []*memberlist.Node) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.nodes = make([]*memberlist.Node, len(peers))
	for i, p := range peers {
		n := *p
		n.Addr = slices.Clone(p.Addr)
		n.Meta = slices.Clone(p.Meta)
		v.nodes[i] = &n
	}
	v.got = true
	return errProbeDone
}

func (v *probeView) take() ([]*memberlist.Node, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	nodes, got := v.nodes, v.got
	v.nodes, v.got = nil, false
	return nodes, got
}

// probeResult is what a probe learned.
type probeResult struct {
	reached bool               // some seed answered
	errs    []string           // why the seeds that did not answer failed, one line each
	holder  *memberlist.Node   // the name's entry in the view, nil if absent
	view    []*memberlist.Node // the view read
	// unreached has, for each seed no connection could be made to, why; when every seed is
	// such, no seed answered at all (see JoinError).
	unreached []error
}

// probe reads a seed's view of the cluster (see Names): from the first seed that answers with
// a view naming another node than pp.name, else from the last that answered.
func probe(pp probeParams, seeds []string) (probeResult, error) {
	var res probeResult
	mlLog := log.New(io.Discard, "", 0)
	transport, err := bindTransport(pp.bindIP, 0, mlLog)
	if err != nil {
		return res, fmt.Errorf("cluster: looking up name %q: %v", pp.name, err)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	view := &probeView{}
	mc := memberlist.DefaultLocalConfig()
	mc.Name = probePrefix + hex.EncodeToString(id[:])
	mc.BindAddr = pp.bindIP
	mc.BindPort = pp.port
	mc.AdvertiseAddr = pp.advIP
	mc.AdvertisePort = transport.GetAutoBindPort()
	mc.Transport = transport
	if pp.partition != nil {
		mc.Transport = &partitionedTransport{Transport: transport, self: func() string { return pp.self }, p: pp.partition}
	}
	dials := &dialRecorder{Transport: mc.Transport}
	mc.Transport = dials
	mc.Label = gossipLabel
	mc.SecretKey = pp.key
	mc.Logger = mlLog
	mc.Merge = view
	mc.ProbeInterval = 0 // no failure detection, gossip or push/pull of its own
	mc.GossipInterval = 0
	mc.PushPullInterval = 0
	mc.TCPTimeout = pp.tcpTimeout
	ml, err := memberlist.Create(mc)
	if err != nil {
		_ = transport.Shutdown()
		return res, fmt.Errorf("cluster: looking up name %q: %v", pp.name, err)
	}
	defer ml.Shutdown()
	for _, seed := range seeds {
		_, err := ml.Join([]string{seed})
		connected, dialErr := dials.take()
		nodes, ok := view.take()
		if !ok {
			if err == nil {
				err = errors.New("no node reached")
			}
			res.errs = append(res.errs, seedError(seed, err))
			if !connected {
				if dialErr == nil {
					dialErr = err // no dial: the address did not resolve
				}
				res.unreached = append(res.unreached, dialErr)
			}
			continue
		}
		res.reached, res.view = true, nodes
		if slices.ContainsFunc(nodes, func(n *memberlist.Node) bool { return n.Name != pp.name }) {
			break
		}
		// Only this node itself answered (a seed that is its own address): ask the next.
	}
	if i := slices.IndexFunc(res.view, func(n *memberlist.Node) bool { return n.Name == pp.name }); i >= 0 {
		res.holder = res.view[i]
	}
	return res, nil
}

// dialRecorder is the probe's transport: it notes whether a connection to the seed being
// joined was made, and why not, so that a seed nothing answers at is told from one that
// answered and refused.
type dialRecorder struct {
	memberlist.Transport
	mu        sync.Mutex
	connected bool
	err       error
}

// DialTimeout implements memberlist.Transport.
func (d *dialRecorder) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	c, err := d.Transport.DialTimeout(addr, timeout)
	d.mu.Lock()
	if err == nil {
		d.connected = true
	} else {
		d.err = err
	}
	d.mu.Unlock()
	return c, err
}

// take returns and clears what was noted since the last take.
func (d *dialRecorder) take() (connected bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	connected, err = d.connected, d.err
	d.connected, d.err = false, nil
	return connected, err
}

// seedError is one line saying why a seed could not be joined, naming it.
func seedError(seed string, err error) string {
	msg := flatten(err)
	if !strings.Contains(msg, seed) {
		msg = seed + ": " + msg
	}
	return msg
}

// checkName looks this node's name up through the seeds before it joins under it (see
// Names). It returns a *NameTakenError if a live member holds it, the join error if no seed
// answers, and nil when the node may join.
func (m *Membership) checkName(pp probeParams, seeds []string) error {
	res, err := probe(pp, seeds)
	if err != nil {
		return err
	}
	if !res.reached {
		var unreached []error
		if len(res.unreached) == len(seeds) {
			unreached = res.unreached
		}
		return joinError(seeds, res.errs, unreached)
	}
	if e := m.rivalErr(); e != nil { // a member reached this node while it probed
		return e
	}
	h := res.holder
	if h == nil || hostPort(h.Addr, h.Port) == pp.self {
		return nil
	}
	switch h.State {
	case memberlist.StateAlive, memberlist.StateSuspect:
		return nameTaken(h)
	case memberlist.StateDead, memberlist.StateLeft:
		how := "died"
		if h.State == memberlist.StateLeft {
			how = "left"
		}
		wait := m.timing.reclaimWait()
		m.log.Info("cluster: taking over the name of a member that "+how, "was", hostPort(h.Addr, h.Port), "waiting", wait)
		time.Sleep(wait)
	}
	return nil
}

// conflict is the conflict delegate: memberlist met an alive message for existing's name
// from other's address while it lists existing alive (or dead too recently to be replaced).
// It runs under memberlist's lock.
func (m *Membership) conflict(existing, other *memberlist.Node) {
	claimant := hostPort(other.Addr, other.Port)
	if existing.Name != m.name {
		m.log.Warn("cluster: refused a node claiming the name of a member at another address",
			"peer", existing.Name, "gossip", hostPort(existing.Addr, existing.Port), "claimant", claimant)
		return
	}
	m.rivalMu.Lock()
	if m.rival == nil {
		m.rival = nameTaken(other)
	}
	m.rivalMu.Unlock()
	if m.started.Load() {
		m.log.Error("cluster: another node claims this node's name; each member keeps the one it knew first, choose another name for one of them",
			"claimant", claimant)
	}
}

// rivalErr returns the NameTakenError for the first node met claiming this node's name, or nil.
func (m *Membership) rivalErr() *NameTakenError {
	m.rivalMu.Lock()
	defer m.rivalMu.Unlock()
	return m.rival
}

// NotifyConflict implements memberlist.ConflictDelegate.
func (d delegate) NotifyConflict(existing, other *memberlist.Node) { d.m.conflict(existing, other) }
