// Package nodeview is the HTTP service's backend over a running member node
// (internal/server): it implements httpapi.Backend.
//
// One goroutine takes a snapshot every Config.Refresh: the nodes the membership knows, with
// their states (cluster.Membership.Known), each live member's load (its host's answer to
// HostStatus, asked through the node's actor system, all members at once), and the jobs the
// members coordinate, running and ended (ListJobs with detail and ended records), one record
// per job. Reads answer from the last snapshot, so that any number of HTTP streams cost the
// cluster one snapshot per Refresh; Updated tells them when a new one is taken.
//
// Jobs are submitted through a client actor on the node's own actor system to the node's own
// host: the host sees a submission from its process and keeps the owner the view names (the
// identity the HTTP service authenticated). A job with an out_shared directory runs detached;
// any other is attached to this view's client, which collects its result and writes
// report.json, coef.npy, basis.npy and the pictures under Config.DataDir/http-jobs/ID (the
// last Config.KeepOutputs jobs). An attached job is canceled when this node dies (its
// client's lease runs out): only a detached job outlives the node it was submitted to.
package nodeview

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/internal/actors"
	"github.com/didnmf/didnmf/internal/httpapi"
	"github.com/didnmf/didnmf/internal/server"
	"github.com/didnmf/didnmf/messages"
)

// Config configures New.
type Config struct {
	// Server is the running member node the view shows and submits to. It must outlive
	// the view (Close the view first).
	Server *server.Server
	// Logger receives the view's errors (writing a job's outputs); nil discards them.
	Logger *slog.Logger
	// Refresh is how often the snapshot is taken while the view is used (0: 500 ms).
	Refresh time.Duration
	// Idle is how long after its last use (a request, or a stream waiting for the next
	// snapshot) the view counts as idle (0: 10 s): an idle view asks the members only every
	// IdleRefresh (0: 10 s), so that a node nobody watches costs its cluster next to
	// nothing; the first use after takes a snapshot at once.
	Idle, IdleRefresh time.Duration
	// AskTimeout bounds each member's answer to a snapshot's questions (0: 1 s). A member
	// that does not answer in time is shown with the error and its last jobs are not listed.
	AskTimeout time.Duration
	// DataDir is where the outputs of attached jobs are written, under http-jobs/ID ("":
	// attached jobs are refused; submit them with out_shared).
	DataDir string
	// KeepOutputs is how many attached jobs' outputs are kept (0: 32); the oldest are
	// removed. As many ended attached jobs are remembered for Job and Jobs when no member
	// lists them any more.
	KeepOutputs int
	// Version is this node's build, shown as ClusterView.Version.
	Version string
}

// View is the backend over a node. Its methods are safe for concurrent use.
type View struct {
	cfg     Config
	srv     *server.Server
	log     *slog.Logger
	client  *actors.Client
	outputs *outputs

	mu      sync.Mutex
	snap    snapshot
	updated chan struct{}
	// attached are the jobs this view submitted, by id: their last state as this view
	// knows it, for the jobs no member lists any more.
	attached map[string]*attachedJob

	cpu  map[string]cpuSample // each member's last CPU time, for Load (loop goroutine only)
	drop map[string]int64     // each member's refused messages at the last snapshot (loop only)

	lastUse atomic.Int64  // unix nanoseconds of the last use
	kick    chan struct{} // a use after idleness: take a snapshot now
	stop    chan struct{}
	done    chan struct{}
	collect sync.WaitGroup
	once    sync.Once
}

var _ httpapi.Backend = (*View)(nil)

// New starts a view over cfg.Server: it takes the first snapshot before it returns.
func New(cfg Config) (*View, error) {
	if cfg.Server == nil || cfg.Server.Node == nil || cfg.Server.Members == nil {
		return nil, errors.New("nodeview: no running server")
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = 500 * time.Millisecond
	}
	if cfg.AskTimeout <= 0 {
		cfg.AskTimeout = time.Second
	}
	if cfg.Idle <= 0 {
		cfg.Idle = 10 * time.Second
	}
	if cfg.IdleRefresh <= 0 {
		cfg.IdleRefresh = 10 * time.Second
	}
	if cfg.KeepOutputs <= 0 {
		cfg.KeepOutputs = 32
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	v := &View{cfg: cfg, srv: cfg.Server, log: logger, updated: make(chan struct{}), attached: map[string]*attachedJob{},
		cpu: map[string]cpuSample{}, drop: map[string]int64{}, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	v.lastUse.Store(time.Now().UnixNano())
	if cfg.DataDir != "" {
		o, err := openOutputs(cfg.DataDir, cfg.KeepOutputs, logger)
		if err != nil {
			return nil, err
		}
		v.outputs = o
	}
	v.client = actors.NewClient(v.srv.Node.System(), actors.DefaultTimeouts())
	v.refresh()
	go v.loop()
	return v, nil
}

// Close stops the snapshots and the view's client (attached jobs still running are
// canceled: their lease ends) and waits for the outputs being written.
func (v *View) Close() {
	v.once.Do(func() {
		close(v.stop)
		<-v.done
		v.client.Close()
		v.collect.Wait()
	})
}

// loop takes a snapshot every Refresh while the view is used, every IdleRefresh while it is
// idle, and at once on the first use after idleness, until Close.
func (v *View) loop() {
	defer close(v.done)
	tick := time.NewTicker(v.cfg.Refresh)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-v.stop:
			return
		case <-v.kick:
		case now := <-tick.C:
			if v.idle(now) && now.Sub(last) < v.cfg.IdleRefresh {
				continue
			}
		}
		v.refresh()
		last = time.Now()
	}
}

// use records a use of the view; the first after idleness asks for a snapshot at once.
func (v *View) use() {
	now := time.Now()
	if prev := v.lastUse.Swap(now.UnixNano()); now.Sub(time.Unix(0, prev)) >= v.cfg.Idle {
		select {
		case v.kick <- struct{}{}:
		default:
		}
	}
}

// idle tells whether the view was last used Idle or more before now.
func (v *View) idle(now time.Time) bool {
	return now.Sub(time.Unix(0, v.lastUse.Load())) >= v.cfg.Idle
}

// Updated implements httpapi.Backend.
func (v *View) Updated() <-chan struct{} {
	v.use()
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.updated
}

// Cluster implements httpapi.Backend.
func (v *View) Cluster(ctx context.Context) (httpapi.ClusterView, error) {
	v.use()
	v.mu.Lock()
	defer v.mu.Unlock()
	c := v.snap.cluster
	c.Members = append([]httpapi.MemberView(nil), c.Members...)
	c.Warnings = append([]string(nil), c.Warnings...)
	return c, nil
}

// Ready implements httpapi.Backend: the node is listed alive among the cluster's workers,
// not leaving, and has memory free for shards.
func (v *View) Ready() error {
	m := v.srv.Members
	self := m.Local()
	if self.Meta.Leaving {
		return errors.New("the node is leaving the cluster")
	}
	listed := false
	for _, w := range m.Workers() {
		if w.Name == self.Name {
			listed = true
		}
	}
	if !listed {
		return errors.New("the node is not listed among the cluster's members yet")
	}
	for _, k := range m.Known() {
		if k.Name == self.Name && k.State != cluster.StateAlive {
			return fmt.Errorf("the node is %s in its own view", k.State)
		}
	}
	v.mu.Lock()
	pong, err := v.snap.self, v.snap.selfErr
	v.mu.Unlock()
	if pong == nil {
		return fmt.Errorf("the node's host did not answer: %v", err)
	}
	if pong.Memory > 0 && pong.Memory-pong.Reserved <= 0 {
		return fmt.Errorf("the node has no memory free for shards: %s of its %s are reserved",
			cluster.FormatBytes(pong.Reserved), cluster.FormatBytes(pong.Memory))
	}
	return nil
}

// Cancel implements httpapi.Backend: the node asks every member's host to cancel the job,
// as a peer (which may cancel any job: the HTTP service checks who owns it).
func (v *View) Cancel(ctx context.Context, id string) error {
	v.use()
	v.mu.Lock()
	j, listed := v.snap.jobs[id]
	a := v.attached[id]
	v.mu.Unlock()
	running := listed && j.EndedUnixMs == 0
	if a != nil && !a.ended() {
		running = true
		a.job.Cancel()
	}
	if !running {
		return httpapi.ErrNotFound
	}
	root := v.srv.Node.System().Root
	for _, w := range v.srv.Members.Workers() {
		root.Send(actors.HostPID(w.Meta.Actor), &messages.CancelJob{JobId: id})
	}
	return nil
}
