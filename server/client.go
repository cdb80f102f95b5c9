package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/didnmf/didnmf/actors"
	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/pki"
)

// ClientConfig configures a client of a cluster.
type ClientConfig struct {
	// Cluster lists gossip addresses (ip:port) of members to join through.
	Cluster []string
	// Bind is the IP the client listens on for its actor and gossip traffic (results come
	// back to it); empty: the local address that routes to the first cluster address.
	Bind string
	// Credentials, as in Config: TLS (a client certificate, see `node certs --client`), or
	// the cluster Secret, from which the client derives a client certificate and the gossip
	// key; Insecure for a cluster that runs without authentication.
	GossipKey []byte
	TLS       *pki.Config
	Secret    []byte
	Insecure  bool
	// Name is the client's name in a certificate derived from the secret: the jobs it
	// submits are listed as that owner's (empty: the user's login name).
	Name string
	// Logger receives the client's warnings (nil: discarded).
	Logger *slog.Logger
	// Wait is how long to wait for a member to be seen (0: 10 s).
	Wait time.Duration
	// Reach is how long Connect keeps trying while no address of Cluster answers (nothing
	// listens there, or it is not reached from here): a node that is starting gets that long
	// to come up (0: DefaultReach). Connect then fails with an *UnreachableError.
	Reach time.Duration
	// TakeoverWait is how long the client waits for a job whose coordinator's node left or
	// died to be taken over, or for that node to come back (0: DefaultTakeoverWait).
	TakeoverWait time.Duration
	// Timeouts are the client actor's waits (zero fields: actors.DefaultTimeouts).
	Timeouts actors.Timeouts
	// Partition, when set, cuts the client's traffic to nodes on the other side of it
	// (partition tests in one process).
	Partition *cluster.Partition
}

// Client is a process connected to a cluster: it gossips as a client (it learns the members
// and is never given work) and submits jobs through a client actor.
type Client struct {
	Node    *actors.Node
	Members *cluster.Membership
	Actors  *actors.Client
	seeds   []string
	// takeoverWait is ClientConfig.TakeoverWait or its default.
	takeoverWait time.Duration
	mu           sync.Mutex
	watches      map[string][]*actors.Job // coordinator's actor address -> jobs it coordinates
	submits      map[string][]*submitting // node's actor address -> submissions it has not accepted yet
}

// DefaultTakeoverWait is how long a client waits, after the node coordinating its job left or died,
// for a standby node to take the job over, or for the coordinator's node to come back, before
// it gives the job up. A coordinator cut off from the client on the minority side of a
// partition takes 10-16 s (more on a loaded machine) to declare the majority dead and pause,
// and then waits for the partition to heal; when its standby is cut off with it, nobody takes
// the job over, and a client that gave up before the heal would lose a job that goes on
// (TestPartition). 30 s covers that; a job whose coordinator really died without a standby
// is given up 30 s after the gossip declared it dead.
const DefaultTakeoverWait = 30 * time.Second

// DefaultReach is how long Connect keeps trying to reach a cluster at which nothing answers.
const DefaultReach = 5 * time.Second

// AddressError is Connect's error for a cluster address that is not the address of a gossip
// port: no port, a port out of range, no host, a host name that does not resolve. Connect
// has tried nothing.
type AddressError struct {
	Addr   string
	Reason string
}

func (e *AddressError) Error() string { return e.Addr + ": " + e.Reason }

// CheckAddress checks that addr has the form HOST:PORT of a gossip address (it does not look
// the host up); the error is an *AddressError.
func CheckAddress(addr string) error {
	const want = "; want IP:PORT, a member's gossip address"
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		reason := err.Error()
		var ae *net.AddrError
		if errors.As(err, &ae) {
			reason = ae.Err
		}
		return &AddressError{Addr: addr, Reason: reason + want}
	}
	if host == "" {
		return &AddressError{Addr: addr, Reason: "no host" + want}
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return &AddressError{Addr: addr, Reason: fmt.Sprintf("port %q is not a number from 1 to 65535", port) + want}
	}
	return nil
}

// resolve looks up the host names of addrs (not IP addresses), so that a name that does not
// resolve is told before anything is tried.
func resolve(addrs []string) error {
	for _, a := range addrs {
		host, _, _ := net.SplitHostPort(a)
		if net.ParseIP(host) != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := net.DefaultResolver.LookupHost(ctx, host)
		cancel()
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			return &AddressError{Addr: a, Reason: fmt.Sprintf("host %s: %s", host, de.Err)}
		}
		if err != nil {
			return fmt.Errorf("%s: looking up %s: %w", a, host, err)
		}
	}
	return nil
}

// UnreachableError is Connect's error when no address of the cluster answered for
// ClientConfig.Reach: nothing listens there, or it is not reached from here.
type UnreachableError struct {
	Addrs []string
	// Tried is how long Connect tried.
	Tried time.Duration
	// Reason is why the last attempt failed, e.g. "connection refused".
	Reason string
}

func (e *UnreachableError) Error() string {
	if e.Tried == 0 {
		return fmt.Sprintf("nothing answered at %s (%s)", strings.Join(e.Addrs, ", "), e.Reason)
	}
	return fmt.Sprintf("nothing answered at %s (tried for %.1f s; %s)", strings.Join(e.Addrs, ", "), e.Tried.Seconds(), e.Reason)
}

// unreachedReason says in a few words why the seeds could not be connected to.
func unreachedReason(errs []error) string {
	var reasons []string
	for _, err := range errs {
		var r string
		var ne net.Error
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			r = "connection refused"
		case errors.As(err, &ne) && ne.Timeout():
			r = "timed out"
		case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
			r = "no route to host"
		default:
			r = err.Error()
		}
		if !slices.Contains(reasons, r) {
			reasons = append(reasons, r)
		}
	}
	return strings.Join(reasons, ", ")
}

// Connect joins the cluster as a client. A malformed address, or a host name that does not
// resolve, is an *AddressError; if no address answers within cfg.Reach, the error is an
// *UnreachableError.
func Connect(cfg ClientConfig) (*Client, error) {
	if len(cfg.Cluster) == 0 {
		return nil, fmt.Errorf("--cluster: no address given")
	}
	for _, a := range cfg.Cluster {
		if err := CheckAddress(a); err != nil {
			return nil, err
		}
	}
	if err := resolve(cfg.Cluster); err != nil {
		return nil, err
	}
	host := cfg.Bind
	if host == "" {
		var err error
		if host, err = localIPFor(cfg.Cluster[0]); err != nil {
			return nil, err
		}
	}
	name := cfg.Name
	if name == "" {
		name = userName()
	}
	if err := credentials(&cfg.TLS, &cfg.GossipKey, cfg.Secret, cfg.Insecure, name, host, pki.RoleClient); err != nil {
		return nil, err
	}
	if err := CheckSecurity(host, cfg.GossipKey, cfg.TLS, cfg.Insecure); err != nil {
		return nil, err
	}
	c := &Client{seeds: cfg.Cluster, watches: map[string][]*actors.Job{}, submits: map[string][]*submitting{}}
	var err error
	// A client takes part in no collective: it opens no data plane.
	ncfg := actors.NodeConfig{Host: host, Threads: 1, DataPort: -1, Logger: cfg.Logger, TLS: cfg.TLS, Insecure: cfg.TLS == nil}
	if cfg.Partition != nil {
		ncfg.Partition = cfg.Partition
	}
	c.Node, err = actors.StartNode(ncfg)
	if err != nil {
		return nil, err
	}
	reach := cfg.Reach
	if reach == 0 {
		reach = DefaultReach
	}
	var prove func(context.Context, cluster.Member) error
	if cfg.TLS != nil { // the members it lists are proven, as a member's are (issue 30)
		prove = proveMember(cfg.TLS, cfg.Partition, c.Node.Address())
	}
	for start := time.Now(); ; {
		c.Members, err = cluster.Start(cluster.Config{Bind: net.JoinHostPort(host, "0"), Join: cfg.Cluster, SecretKey: cfg.GossipKey, Prove: prove,
			Logger: cfg.Logger, Meta: cluster.Meta{Role: cluster.RoleClient, Actor: c.Node.Address(), Started: time.Now().UnixNano()},
			OnEvent: c.onEvent, Partition: cfg.Partition})
		if err == nil {
			break
		}
		var je *cluster.JoinError
		if !errors.As(err, &je) || je.Unreached == nil {
			c.Node.Close()
			return nil, fmt.Errorf("joining the cluster at %v: %w", cfg.Cluster, err)
		}
		// Nothing answered: try again until reach has passed (a node may be starting).
		if tried := time.Since(start); tried >= reach {
			c.Node.Close()
			return nil, &UnreachableError{Addrs: cfg.Cluster, Tried: tried, Reason: unreachedReason(je.Unreached)}
		}
		time.Sleep(min(250*time.Millisecond, reach-time.Since(start)))
	}
	wait := cfg.Wait
	if wait == 0 {
		wait = 10 * time.Second
	}
	for deadline := time.Now().Add(wait); len(c.Members.Workers()) == 0; {
		if time.Now().After(deadline) {
			c.Close()
			return nil, fmt.Errorf("joined %v but no member node is listed after %v", cfg.Cluster, wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.takeoverWait = cfg.TakeoverWait
	if c.takeoverWait <= 0 {
		c.takeoverWait = DefaultTakeoverWait
	}
	c.Actors = actors.NewClient(c.Node.System(), cfg.Timeouts)
	return c, nil
}

// userName is the login name of the user running the client.
func userName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return fmt.Sprintf("uid-%d", os.Getuid())
}

// localIPFor returns the local IP the system would use to reach addr.
func localIPFor(addr string) (string, error) {
	host, _, _ := net.SplitHostPort(addr)
	if isLoopback(host) {
		return "127.0.0.1", nil
	}
	conn, err := net.Dial("udp", addr) // no packet is sent
	if err != nil {
		return "", &UnreachableError{Addrs: []string{addr}, Reason: "no route to it from here: " + unreachedReason([]error{err})}
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).IP.String(), nil
}

// Coordinator returns the member a job is submitted to: the first seed that is a live
// member, or else the first member by name.
func (c *Client) Coordinator() (cluster.Member, error) {
	workers := c.Members.Workers()
	if len(workers) == 0 {
		return cluster.Member{}, fmt.Errorf("the cluster has no live member")
	}
	for _, s := range c.seeds {
		for _, w := range workers {
			if w.Gossip == s {
				return w, nil
			}
		}
	}
	return workers[0], nil
}

// Submit submits a job to the cluster; the coordinator places it on the members.
func (c *Client) Submit(ctx context.Context, spec *messages.JobSpec) (*actors.Job, error) {
	m, err := c.Coordinator()
	if err != nil {
		return nil, err
	}
	// The node may leave before it accepts the job: the submission fails then, rather than
	// wait for an acceptance that cannot come.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sub := &submitting{cancel: cancel}
	addr := m.Meta.Actor
	c.mu.Lock()
	c.submits[addr] = append(c.submits[addr], sub)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.submits[addr] = slices.DeleteFunc(c.submits[addr], func(s *submitting) bool { return s == sub })
		if len(c.submits[addr]) == 0 {
			delete(c.submits, addr)
		}
		c.mu.Unlock()
	}()
	job, err := c.Actors.Submit(ctx, addr, spec)
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(err, context.Canceled) && cause != nil && !errors.Is(cause, context.Canceled) {
			return nil, cause
		}
		return nil, err
	}
	c.watch(job, job.Coordinator())
	return job, nil
}

// submitting is a submission waiting for its node to accept the job.
type submitting struct{ cancel context.CancelCauseFunc }

func (c *Client) watch(job *actors.Job, coordinator string) {
	c.mu.Lock()
	c.watches[coordinator] = append(c.watches[coordinator], job)
	c.mu.Unlock()
}

// onEvent follows the jobs whose coordinator's node left or died: a standby node takes such a
// job over and tells the client; a job nobody took over in the client's TakeoverWait is given up, with an
// error that says why.
func (c *Client) onEvent(e cluster.Event) {
	if e.Kind != cluster.EventLeave {
		return
	}
	addr := e.Member.Meta.Actor
	c.mu.Lock()
	jobs := c.watches[addr]
	delete(c.watches, addr)
	subs := c.submits[addr]
	c.mu.Unlock()
	how := "left the cluster"
	if e.Dead {
		how = "failed (declared dead by the gossip)"
	}
	for _, s := range subs {
		s.cancel(fmt.Errorf("submit: node %s (%s) %s before it accepted the job; submit again", e.Member.Name, addr, how))
	}
	for _, j := range jobs {
		go c.awaitTakeover(j, addr, fmt.Sprintf("node %s (%s), which coordinated it, %s", e.Member.Name, addr, how))
	}
}

// awaitTakeover waits for another node to take a job over from the coordinator at old.
func (c *Client) awaitTakeover(j *actors.Job, old, what string) {
	deadline := time.NewTimer(c.takeoverWait)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-j.Done():
			return
		case <-tick.C:
			if now := j.Coordinator(); now != old {
				c.watch(j, now)
				return
			}
			// The coordinator's node is back (a partition healed, a pause ended): it goes on.
			for _, w := range c.Members.Workers() {
				if w.Meta.Actor == old {
					c.watch(j, old)
					return
				}
			}
		case <-deadline.C:
			j.Abandon(&actors.JobError{JobID: j.ID, Kind: actors.KindFailure,
				Message: fmt.Sprintf("job %s: %s, and no node took the job over in %v (its standby died too, or the cluster lost its majority); the job is lost", j.ID, what, c.takeoverWait)})
			return
		}
	}
}

// MemberStatus is one member's state as status reports it.
type MemberStatus struct {
	Member cluster.Member
	// Load is the member's host answer (nil when it did not answer; Err says why).
	Load *messages.Pong
	Err  error
}

// Status asks every member (and lists every client) of the cluster for its load.
func (c *Client) Status(timeout time.Duration) []MemberStatus {
	members := c.Members.Members()
	out := make([]MemberStatus, len(members))
	futures := make([]func() (any, error), len(members))
	for i, m := range members {
		out[i].Member = m
		if m.Meta.Role != cluster.RoleMember {
			continue
		}
		f := c.Node.System().Root.RequestFuture(actors.HostPID(m.Meta.Actor), &messages.HostStatus{}, timeout)
		futures[i] = f.Result
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		res, err := f()
		if pong, ok := res.(*messages.Pong); ok && err == nil {
			out[i].Load = pong
		} else {
			out[i].Err = fmt.Errorf("no answer from %s: %v", out[i].Member.Meta.Actor, err)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Member.Name < out[b].Member.Name })
	return out
}

// Close leaves the cluster and stops the client's node.
func (c *Client) Close() {
	if c.Actors != nil {
		c.Actors.Close()
	}
	if c.Members != nil {
		_ = c.Members.Leave(2 * time.Second)
	}
	c.Node.Close()
}

// Jobs lists the jobs the cluster's members coordinate, as ListJobs answers: a client sees
// its own (those submitted under its name), a peer all. Members that do not answer within
// timeout are listed in the errors.
func (c *Client) Jobs(timeout time.Duration) ([]*messages.JobInfo, []error) {
	var futures []actor.Future
	var addrs []string
	for _, m := range c.Members.Workers() {
		futures = append(futures, c.Node.System().Root.RequestFuture(actors.HostPID(m.Meta.Actor), &messages.ListJobs{}, timeout))
		addrs = append(addrs, m.Meta.Actor)
	}
	var jobs []*messages.JobInfo
	var errs []error
	for i, f := range futures {
		res, err := f.Result()
		list, ok := res.(*messages.JobList)
		if err != nil || !ok {
			errs = append(errs, fmt.Errorf("no answer from %s: %v", addrs[i], err))
			continue
		}
		jobs = append(jobs, list.Jobs...)
	}
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].JobId < jobs[b].JobId })
	return jobs, errs
}

// Cancel asks the cluster to cancel a job this client owns (by name), and waits up to timeout
// for it to be gone from every member's list. It fails when no member lists the job as one
// of this client's.
func (c *Client) Cancel(id string, timeout time.Duration) error {
	listed := func() (bool, error) {
		jobs, errs := c.Jobs(2 * time.Second)
		for _, j := range jobs {
			if j.JobId == id {
				return true, nil
			}
		}
		if len(errs) > 0 {
			return false, errs[0]
		}
		return false, nil
	}
	if ok, err := listed(); !ok {
		if err != nil {
			return fmt.Errorf("job %s is not listed (and %v)", id, err)
		}
		return fmt.Errorf("no job %s of yours on the cluster (node jobs lists them)", id)
	}
	for _, m := range c.Members.Workers() {
		c.Node.System().Root.Send(actors.HostPID(m.Meta.Actor), &messages.CancelJob{JobId: id})
	}
	for deadline := time.Now().Add(timeout); ; time.Sleep(100 * time.Millisecond) {
		if ok, _ := listed(); !ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("job %s is still listed %v after the cancel", id, timeout)
		}
	}
}
