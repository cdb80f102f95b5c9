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

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/internal/actors"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/pki"
)

// ClientConfig configures a client of a cluster.
type ClientConfig struct {
	// Cluster lists gossip addresses (ip:port) of members: the client asks their front
	// doors for the cluster's members (see frontdoor.go).
	Cluster []string
	// Bind is the IP the client's actor node listens on (results come back to it); empty:
	// the local address that routes to the first cluster address.
	Bind string
	// Credentials, as in Config: TLS (a client certificate, see `didnmf certs --client`), or
	// the cluster Secret, from which the client derives a client certificate; Insecure for a
	// cluster that runs without authentication. A client takes no gossip key: it is not in
	// the gossip.
	TLS      *pki.Config
	Secret   []byte
	Insecure bool
	// Name is the client's name in a certificate derived from the secret: the jobs it
	// submits are listed as that owner's (empty: the user's login name).
	Name string
	// Logger receives the client's warnings (nil: discarded).
	Logger *slog.Logger
	// Wait is how long to wait for a member to be listed (0: 10 s).
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
	// (partition tests in one process); the client is on the side of its actor address.
	Partition *cluster.Partition
}

// Client is a process connected to a cluster. It is not a member: it takes no part in the
// gossip, runs no host and is never given work. It learns the members from their front
// doors (Members, kept fresh about every ViewRefresh) and submits jobs through a client
// actor.
type Client struct {
	Node    *actors.Node
	Members *View
	Actors  *actors.Client
	seeds   []string
	door    *doorClient
	log     *slog.Logger
	// takeoverWait is ClientConfig.TakeoverWait or its default.
	takeoverWait time.Duration
	mu           sync.Mutex
	watches      map[string][]*actors.Job // coordinator's actor address -> jobs it coordinates
	following    map[*actors.Job]bool     // the jobs in watches: each is dropped when it ends
	submits      map[string][]*submitting // node's actor address -> submissions it has not accepted yet
	failed       map[string]time.Time     // front doors that did not answer, when (refresh's own)
	known        []string                 // the gossip addresses of the last view that listed members
	stop         context.CancelFunc       // ends refresh
	refreshed    chan struct{}            // closed when refresh has returned
	closeOnce    sync.Once
}

// View is a client's view of the cluster: the workers a member's front door listed last.
// Its methods are safe for concurrent use.
type View struct {
	mu      sync.Mutex
	workers []cluster.Member
}

// Workers returns the members that may get work, sorted by name, as the last view listed
// them.
func (v *View) Workers() []cluster.Member {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.workers)
}

// set replaces the view; it returns the members that were listed and no longer are.
func (v *View) set(workers []cluster.Member) []cluster.Member {
	workers = slices.Clone(workers)
	slices.SortFunc(workers, func(a, b cluster.Member) int { return strings.Compare(a.Name, b.Name) })
	v.mu.Lock()
	defer v.mu.Unlock()
	lost := gone(v.workers, workers)
	v.workers = workers
	return lost
}

// ViewRefresh is how often a client asks for the cluster's view again.
const ViewRefresh = 500 * time.Millisecond

// viewRound bounds one refresh of the view: the front doors asked in turn until one answers.
const viewRound = 2 * fetchWait

// viewLost is how long a client keeps its view while no member's front door answers: after
// it, the members count as gone (their jobs wait TakeoverWait for them to come back).
const viewLost = 10 * time.Second

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

// Connect connects to the cluster as a client: it starts the client's actor node and asks
// the front doors of cfg.Cluster, in turn, for the cluster's view. A malformed address, or a
// host name that does not resolve, is an *AddressError; if no address answers within
// cfg.Reach, the error is an *UnreachableError; a member that refuses the client's
// credentials (or whose own the client does not trust) gives an *AuthError.
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
	var noKey []byte // a client takes no part in the gossip
	if err := credentials(&cfg.TLS, &noKey, cfg.Secret, cfg.Insecure, name, host, pki.RoleClient); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Client{seeds: cfg.Cluster, Members: &View{}, log: logger, watches: map[string][]*actors.Job{}, following: map[*actors.Job]bool{},
		submits: map[string][]*submitting{}, failed: map[string]time.Time{}}
	var err error
	// A client takes part in no collective: it opens no data plane, and runs no host.
	ncfg := actors.NodeConfig{Host: host, Threads: 1, DataPort: -1, Logger: cfg.Logger, TLS: cfg.TLS, Insecure: cfg.TLS == nil, ClientOnly: true, Members: c.Members}
	if cfg.Partition != nil {
		ncfg.Partition = cfg.Partition
	}
	c.Node, err = actors.StartNode(ncfg)
	if err != nil {
		return nil, err
	}
	c.door = &doorClient{tls: cfg.TLS, self: c.Node.Address(), part: cfg.Partition}
	reach := cfg.Reach
	if reach == 0 {
		reach = DefaultReach
	}
	wait := cfg.Wait
	if wait == 0 {
		wait = 10 * time.Second
	}
	fail := func(err error) (*Client, error) {
		c.Node.Close()
		return nil, err
	}
	start := time.Now()
	for answered := false; ; {
		members, _, errs, _, unreached := c.door.fetchAny(context.Background(), cfg.Cluster)
		switch {
		case len(members) > 0:
			c.Members.set(members)
			for _, m := range members {
				c.known = append(c.known, m.Gossip)
			}
		case slices.ContainsFunc(errs, func(e error) bool { return errors.Is(e, errEmptyView) }):
			// A member answered, with no worker yet (it is starting).
			answered = true
			if time.Since(start) >= wait {
				return fail(fmt.Errorf("the cluster at %v lists no member after %v", strings.Join(cfg.Cluster, ", "), wait))
			}
		case !unreached:
			var ae *AuthError
			if errors.As(errors.Join(errs...), &ae) {
				return fail(ae)
			}
			return fail(fmt.Errorf("asking the cluster at %v for its members: %w", strings.Join(cfg.Cluster, ", "), errors.Join(errs...)))
		case answered || time.Since(start) < reach:
			// Nothing answered: try again until reach has passed (a node may be starting).
		default:
			var causes []error
			for _, e := range errs {
				var de *dialError
				if errors.As(e, &de) {
					causes = append(causes, de.err)
				}
			}
			return fail(&UnreachableError{Addrs: cfg.Cluster, Tried: time.Since(start), Reason: unreachedReason(causes)})
		}
		if len(c.Members.Workers()) > 0 {
			break
		}
		pause := 250 * time.Millisecond
		if left := reach - time.Since(start); !answered && left > 0 && left < pause {
			pause = left
		}
		time.Sleep(pause)
	}
	c.takeoverWait = cfg.TakeoverWait
	if c.takeoverWait <= 0 {
		c.takeoverWait = DefaultTakeoverWait
	}
	c.Actors = actors.NewClient(c.Node.System(), cfg.Timeouts)
	ctx, stop := context.WithCancel(context.Background())
	c.stop, c.refreshed = stop, make(chan struct{})
	go c.refresh(ctx)
	return c, nil
}

// refresh asks for the cluster's view every ViewRefresh until ctx ends, and turns a member's
// disappearance from it into what the jobs that member coordinated need (see memberGone).
// It asks the seeds first, then the members of the last view; a front door that did not
// answer is asked after the others for a while.
func (c *Client) refresh(ctx context.Context) {
	defer close(c.refreshed)
	tick := time.NewTicker(ViewRefresh)
	defer tick.Stop()
	lastAnswer := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		round, cancel := context.WithTimeout(ctx, viewRound)
		members, from, errs, failed, _ := c.door.fetchAny(round, c.sources())
		cancel()
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		c.mu.Lock()
		for _, a := range failed {
			c.failed[a] = now
		}
		delete(c.failed, from)
		c.mu.Unlock()
		if len(errs) > 0 {
			c.log.Debug("client: front doors did not answer", slog.Any("errors", errors.Join(errs...)))
		}
		if from == "" {
			if now.Sub(lastAnswer) < viewLost {
				continue
			}
			// Nothing answered for viewLost: the members it listed count as gone (and are
			// still asked, see sources).
		} else {
			lastAnswer = now
			c.mu.Lock()
			c.known = c.known[:0]
			for _, m := range members {
				c.known = append(c.known, m.Gossip)
			}
			c.mu.Unlock()
		}
		for _, m := range c.Members.set(members) {
			c.memberGone(m)
		}
	}
}

// sources lists the front doors refresh asks, in order: the seeds, then the members of the
// last view that listed any; those that failed in the last 10 s come after the others.
func (c *Client) sources() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	all := slices.Clone(c.seeds)
	for _, g := range c.known {
		if !slices.Contains(all, g) {
			all = append(all, g)
		}
	}
	var ok, failed []string
	for _, a := range all {
		if at, bad := c.failed[a]; bad && time.Since(at) < 10*time.Second {
			failed = append(failed, a)
		} else {
			ok = append(ok, a)
		}
	}
	return append(ok, failed...)
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

// watch follows job, coordinated at coordinator, for memberGone. A job is followed until it
// ends and no longer: an ended job holds its result (the coefficients, K x samples), and a
// client that runs many jobs (a sweep: hundreds) must not keep them all.
func (c *Client) watch(job *actors.Job, coordinator string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-job.Done():
		return // ended while it was being followed elsewhere: nothing to follow
	default:
	}
	c.watches[coordinator] = append(c.watches[coordinator], job)
	if !c.following[job] {
		c.following[job] = true
		go c.unwatchWhenDone(job)
	}
}

// unwatchWhenDone drops job from watches once it ended (Client.Close ends every job).
func (c *Client) unwatchWhenDone(job *actors.Job) {
	<-job.Done()
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.following, job)
	for addr, jobs := range c.watches {
		jobs = slices.DeleteFunc(jobs, func(j *actors.Job) bool { return j == job })
		if len(jobs) == 0 {
			delete(c.watches, addr)
		} else {
			c.watches[addr] = jobs
		}
	}
}

// watched is the number of jobs the client follows (for tests).
func (c *Client) watched() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.following)
}

// memberGone follows the jobs whose coordinator's node is no longer in the cluster's view (it
// left, failed, restarted, or no member answers any more): a standby node takes such a job
// over and tells the client; a job nobody took over in the client's TakeoverWait is given
// up, with an error that says why. A submission the node had not accepted yet fails.
func (c *Client) memberGone(m cluster.Member) {
	addr := m.Meta.Actor
	c.mu.Lock()
	jobs := c.watches[addr]
	delete(c.watches, addr)
	subs := c.submits[addr]
	c.mu.Unlock()
	const how = "is gone from the cluster (it left or failed)"
	for _, s := range subs {
		s.cancel(fmt.Errorf("submit: node %s (%s) %s before it accepted the job; submit again", m.Name, addr, how))
	}
	for _, j := range jobs {
		go c.awaitTakeover(j, addr, fmt.Sprintf("node %s (%s), which coordinated it, %s", m.Name, addr, how))
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

// Status asks every member of the cluster (as the client's view lists them: clients are not
// members) for its load.
func (c *Client) Status(timeout time.Duration) []MemberStatus {
	members := c.Members.Workers()
	out := make([]MemberStatus, len(members))
	futures := make([]func() (any, error), len(members))
	for i, m := range members {
		out[i].Member = m
		futures[i] = c.Node.System().Root.RequestFuture(actors.HostPID(m.Meta.Actor), &messages.HostStatus{}, timeout).Result
	}
	for i, f := range futures {
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

// Close stops following the cluster's view and stops the client's node. It may be called
// more than once.
func (c *Client) Close() {
	c.closeOnce.Do(func() {
		if c.stop != nil {
			c.stop()
			<-c.refreshed
		}
		if c.Actors != nil {
			c.Actors.Close()
		}
		c.Node.Close()
	})
}

// Jobs lists the jobs the cluster's members coordinate, as ListJobs answers: a client sees
// its own (those submitted under its name), a peer all. Members that do not answer within
// timeout are listed in the errors.
func (c *Client) Jobs(timeout time.Duration) ([]*messages.JobInfo, []error) {
	return c.ListJobs(&messages.ListJobs{}, timeout)
}

// ListJobs sends req to every member and merges the answers: with req.Ended, the records of
// ended jobs too (kept by a job's coordinator's node and its standby's: a job is listed once,
// from the answer of its latest epoch, a record over a running entry of the same epoch).
// Members that do not answer within timeout are listed in the errors.
func (c *Client) ListJobs(req *messages.ListJobs, timeout time.Duration) ([]*messages.JobInfo, []error) {
	var futures []actor.Future
	var addrs []string
	for _, m := range c.Members.Workers() {
		futures = append(futures, c.Node.System().Root.RequestFuture(actors.HostPID(m.Meta.Actor), req, timeout))
		addrs = append(addrs, m.Meta.Actor)
	}
	byID := map[string]*messages.JobInfo{}
	var errs []error
	for i, f := range futures {
		res, err := f.Result()
		list, ok := res.(*messages.JobList)
		if err != nil || !ok {
			errs = append(errs, fmt.Errorf("no answer from %s: %v", addrs[i], err))
			continue
		}
		for _, j := range list.Jobs {
			if old := byID[j.JobId]; old == nil || newerJobInfo(j, old) {
				byID[j.JobId] = j
			}
		}
	}
	jobs := make([]*messages.JobInfo, 0, len(byID))
	for _, j := range byID {
		jobs = append(jobs, j)
	}
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].JobId < jobs[b].JobId })
	return jobs, errs
}

// newerJobInfo tells whether a says more recent news of a job than b: a later epoch, or at
// the same epoch an ended job's record over a running entry.
func newerJobInfo(a, b *messages.JobInfo) bool {
	if a.Epoch != b.Epoch {
		return a.Epoch > b.Epoch
	}
	return a.EndedUnixMs != 0 && b.EndedUnixMs == 0
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
		return fmt.Errorf("no job %s of yours on the cluster (didnmf jobs lists them)", id)
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
