package actors

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/internal/chunked"
	"github.com/didnmf/didnmf/internal/jobctl"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/report"
	"github.com/didnmf/didnmf/usererr"
)

// Client submits factorization jobs to nodes and receives their progress and results through a
// client actor.
type Client struct {
	system   *actor.ActorSystem
	timeouts Timeouts
	pid      *actor.PID
	mu       sync.Mutex
	jobs     map[string]*Job
	closed   bool
}

// Error kinds of a job (JobError.Kind).
const (
	KindInput    = messages.ErrorKind_ERROR_KIND_INPUT
	KindCanceled = messages.ErrorKind_ERROR_KIND_CANCELED
	KindFailure  = messages.ErrorKind_ERROR_KIND_FAILURE
)

// JobError is a job's failure as the coordinator reported it. A job refused for the user's
// fault (KindInput: its spec, its data, where it may run) is the user's to fix on this side as
// on the node's: it unwraps to a *usererr.Error of its message, so errors.Is(err,
// usererr.ErrUser) holds (the wire carries the kind and the message, not the field).
type JobError struct {
	JobID string
	// Kind is KindInput for a refused spec or bad data, KindCanceled, or KindFailure (an
	// unspecified kind from the wire counts as a failure).
	Kind    messages.ErrorKind
	Message string
	// Field and Template, for an error of kind KindInput about a field of the spec: the
	// field's wire name, and the message with the fields it names written {field}
	// (usererr.Error.Template), so that Unwrap gives the *usererr.Error a front end names
	// its way ("" : about no field).
	Field, Template string
}

func (e *JobError) Error() string { return e.Message }

// maxErrorTemplate bounds the template of a JobError a client reads (a message names a field
// and a value, not a file's content).
const maxErrorTemplate = 4096

// ErrCanceled is returned (wrapped) by Wait for a job that was cancelled.
var ErrCanceled = errors.New("job canceled")

// Unwrap lets errors.Is(err, ErrCanceled) recognise a cancelled job, and errors.Is(err,
// usererr.ErrUser) and errors.As(err, **usererr.Error) a job refused for the user's fault.
func (e *JobError) Unwrap() error {
	switch e.Kind {
	case KindCanceled:
		return ErrCanceled
	case KindInput:
		// A template names the field for the front end, when it says what the message says
		// (a member is trusted, but its words are bounded before they are parsed).
		if e.Template != "" && len(e.Template) <= maxErrorTemplate {
			if ue := usererr.FromTemplate(e.Field, e.Template); ue.Error() == e.Message {
				return ue
			}
		}
		return usererr.New(e.Message, nil)
	}
	return nil
}

// Result is a finished job: the factors and run figures as the in-process driver reports
// them, plus the measured message accounting of the job's actors.
type Result struct {
	kernels.Result
	JobID    string
	Counters *messages.Counters
	// Per iteration, measured over the job's actors: messages sent, their protobuf bytes, and
	// collectives completed at the root of the reduce tree.
	MessagesPerIteration, BytesPerIteration, ReductionsPerIteration float64
	// ShardNodes is the actor address of the node each shard ran on, by shard id.
	ShardNodes []string
	// Recoveries are the job's rollbacks to a checkpoint after failures, in order.
	Recoveries []report.Recovery
	// Checkpoints is the number of committed checkpoints; CheckpointSeconds the time shards
	// spent writing and replicating them, summed.
	Checkpoints       int64
	CheckpointSeconds float64
	// Storage and XBytes are how the shards held X ("float32", "float64", or "mixed" when
	// they differ) and its bytes over all shards; Threads the most worker threads of a node
	// that ran a shard.
	Storage string
	XBytes  int64
	Threads int
}

// Job is a submitted job.
type Job struct {
	// ID is the job's id.
	ID       string
	client   *Client
	progress chan kernels.Progress
	warnings chan string
	accepted chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	// lease is the client's end of the job's lease (under mu): it knows the coordinator the
	// client follows, when to renew, and when to give the job up.
	lease *jobctl.LeaseClient
	// leaseTimer is the lease's renewal timer while one is armed (under mu).
	leaseTimer *leaseTimer
	k          int
	m, n       int
	b, c       []float64
	streams    map[[2]int64]*chunked.Assembly[float64] // (0 for B / 1 for C, shard)
	result     *Result
	err        error
	once       sync.Once
	canceled   atomic.Bool
	blocks     *blockStreams // the inputs this client streams to the shards (ingest "stream")
	outShared  bool          // C goes to a shared directory, not to the client
	// seen is the last iteration the client was told of; peaks holds, for every rollback it
	// saw (an iteration told again), the highest iteration told before it. A coordinator
	// that took the job over knows only the last state its predecessor sent, so the client
	// counts the iterations redone (client actor only).
	seen  int64
	peaks []int64
	// token proves ownership of the job to its actors (made at submission, never gossiped).
	token    string
	detached bool
}

// Token returns the job's owner token: with it, any client process may cancel the job.
func (j *Job) Token() string { return j.token }

// NewClient starts a client actor in the given actor system (which must have a remote for
// jobs on other nodes).
func NewClient(system *actor.ActorSystem, timeouts Timeouts) *Client {
	c := &Client{system: system, timeouts: timeouts.orDefault(), jobs: map[string]*Job{}}
	c.pid = system.Root.SpawnPrefix(actor.PropsFromProducer(func() actor.Actor { return clientActor{c} }), "client")
	return c
}

// Close stops the client actor; jobs still running end with an error on the client side (their
// actors are cancelled).
func (c *Client) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	jobs := c.jobs
	c.jobs = map[string]*Job{}
	c.mu.Unlock()
	for _, j := range jobs {
		j.Abandon(fmt.Errorf("job %s: client closed", j.ID))
	}
	_ = c.system.Root.StopFuture(c.pid).Wait()
}

// Submit sends a job to the host of the node at address (spec.Nodes[0] when address is empty),
// which starts its coordinator, and returns once the coordinator accepted or refused it.
func (c *Client) Submit(ctx context.Context, address string, spec *messages.JobSpec) (*Job, error) {
	return c.SubmitAs(ctx, address, "", spec)
}

// SubmitAs is Submit naming the job's owner. Only a host in the client's own process takes
// the name (the node's HTTP service submits for the identity it authenticated); any other
// host makes the job its authenticated caller's, whatever the name.
func (c *Client) SubmitAs(ctx context.Context, address, owner string, spec *messages.JobSpec) (*Job, error) {
	if address == "" {
		if len(spec.GetNodes()) == 0 {
			return nil, fmt.Errorf("submit: no node address given")
		}
		address = spec.Nodes[0]
	}
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	token := hex.EncodeToString(tok[:])
	j := &Job{ID: JobIDFor(token), client: c, progress: make(chan kernels.Progress, 256), warnings: make(chan string, 64),
		accepted: make(chan struct{}), done: make(chan struct{}), k: int(spec.GetRank()), streams: map[[2]int64]*chunked.Assembly[float64]{},
		outShared: spec.GetOutShared() != "", token: token, detached: spec.GetDetached()}
	j.lease = jobctl.NewLeaseClient(jobctl.LeaseConfig{JobID: j.ID, Renew: c.timeouts.LeaseRenew, Quorum: c.timeouts.Quorum, Detached: j.detached})
	if spec.GetIngest() == messages.Ingest_INGEST_STREAM {
		spec = proto.Clone(spec).(*messages.JobSpec)
		var err error
		if j.blocks, err = openStreams(spec); err != nil {
			return nil, &JobError{JobID: j.ID, Kind: KindInput, Message: err.Error()}
		}
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, fmt.Errorf("submit: client closed")
	}
	c.jobs[j.ID] = j
	c.mu.Unlock()
	res, err := c.system.Root.RequestFuture(HostPID(address), &messages.Ping{}, c.timeouts.Ping).Result()
	if _, ok := res.(*messages.Pong); err != nil || !ok {
		c.forget(j.ID)
		j.finish(nil, nil)
		// The client cannot tell why: a node that is down, one that does not trust this
		// client's certificate, and one refusing this identity's connection or stream past
		// its share (limits_identity.go) all leave the ping unanswered.
		return nil, fmt.Errorf("node %s is unreachable (no answer to a ping in %v: %v): it may be down or not listening there; "+
			"if the cluster uses mutual TLS, this client needs --tls-cert, --tls-key and --tls-ca signed by the cluster's authority (or the cluster's secret); "+
			"or the node may be refusing this client's connections past its certificate name's share (%d streams at a node, shared by every client process with the same certificate name: with the cluster's secret, every process of one user)",
			address, c.timeouts.Ping, err, maxClientStreams)
	}
	c.system.Root.Send(HostPID(address), &messages.SubmitJob{Spec: spec, Client: wirePid(c.pid), JobId: j.ID, OwnerToken: j.token, Owner: owner})
	select {
	case <-j.accepted:
		return j, nil
	case <-j.done:
		return nil, j.err
	case <-ctx.Done():
		j.Cancel()
		return nil, ctx.Err()
	}
}

func (c *Client) forget(id string) {
	c.mu.Lock()
	delete(c.jobs, id)
	c.mu.Unlock()
}

func (c *Client) job(id string) *Job {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.jobs[id]
}

// Progress returns the job's progress, one value per iteration, closed when the job ends.
// Progress is best effort: a reader that falls behind by more than 256 iterations misses some;
// the result's History has them all.
func (j *Job) Progress() <-chan kernels.Progress { return j.progress }

// Warnings returns news about the job that does not end it (a checkpoint that failed, a
// recovery from a failure), closed when the job ends. Best effort, like Progress.
func (j *Job) Warnings() <-chan string { return j.warnings }

// Coordinator returns the actor address of the job's coordinator ("" before acceptance); it
// changes when a standby takes the job over.
func (j *Job) Coordinator() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lease.Coordinator().GetAddress()
}

func (j *Job) coord() *actor.PID {
	j.mu.Lock()
	defer j.mu.Unlock()
	return pidOf(j.lease.Coordinator())
}

// Done is closed when the job has ended.
func (j *Job) Done() <-chan struct{} { return j.done }

// Wait waits for the job's result.
func (j *Job) Wait(ctx context.Context) (*Result, error) {
	select {
	case <-j.done:
		return j.result, j.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Cancel asks the coordinator to stop the job and free its actors; Wait then returns an error
// that wraps ErrCanceled.
func (j *Job) Cancel() {
	j.canceled.Store(true) // a job accepted after this is cancelled on acceptance
	select {
	case <-j.accepted:
		j.client.system.Root.Send(j.coord(), &messages.CancelJob{JobId: j.ID, OwnerToken: j.token})
	default:
	}
}

// leaseStep feeds the job's lease (jobctl.LeaseClient) one event and carries out what it
// asks for; it returns the Ready, whose Stale tells the client actor to drop the acceptance or
// error it stepped. The lease decides; this only sends, arms timers and ends the job. Any
// goroutine may call it (the client actor, a timer, a renewal's answer).
func (j *Job) leaseStep(ev any) jobctl.LeaseReady {
	j.mu.Lock()
	err := j.lease.Step(ev)
	rd := j.lease.Ready()
	j.mu.Unlock()
	if err != nil {
		return rd // an event the lease does not know: this file sends only those it does
	}
	root := j.client.system.Root
	if to := rd.Cancel; to != nil {
		root.Send(pidOf(to), &messages.CancelJob{JobId: j.ID, OwnerToken: j.token})
	}
	if r := rd.Renew; r != nil {
		go j.renew(r)
	}
	j.mu.Lock()
	if d := rd.Timer; d > 0 && !j.lease.Over() {
		j.leaseTimer = armLease(j, d)
	}
	var stop *leaseTimer
	if j.lease.Over() {
		stop, j.leaseTimer = j.leaseTimer, nil
	}
	j.mu.Unlock()
	if stop != nil {
		stop.stop()
	}
	if e := rd.End; e != nil {
		j.client.forget(j.ID)
		switch e.Verdict {
		case jobctl.LeaseReleased:
			j.finish(nil, nil)
		case jobctl.LeaseAbandoned:
			j.finish(nil, e.Err)
		default:
			j.finish(nil, &JobError{JobID: j.ID, Kind: KindFailure, Message: e.Reason})
		}
	}
	return rd
}

// leaseTimer is an armed renewal timer of a job's lease. It reaches its job through a pointer
// that stop clears: the runtime may keep a stopped timer, and with it its function, until it
// would have fired, and a job that ended (its result included) must not be kept that long.
type leaseTimer struct {
	t *time.Timer
	j atomic.Pointer[Job]
}

// armLease asks for a LeaseTimerFired for j in d.
func armLease(j *Job, d time.Duration) *leaseTimer {
	lt := &leaseTimer{}
	lt.j.Store(j)
	lt.t = time.AfterFunc(d, func() {
		if j := lt.j.Load(); j != nil {
			j.leaseStep(jobctl.LeaseTimerFired{At: time.Now()})
		}
	})
	return lt
}

// stop stops the timer and lets its job go.
func (lt *leaseTimer) stop() {
	lt.t.Stop()
	lt.j.Store(nil)
}

// renew sends one lease renewal, a request, and steps its outcome into the lease. A
// coordinator answers LeaseAck; one that is gone is answered by protoactor's
// DeadLetterResponse. A renewal to the coordinator's host (r.Host) gets the job's answer if
// the job ended there; that answer goes to the client actor as if it had come the first time.
func (j *Job) renew(r *jobctl.LeaseRenewal) {
	t := j.client.timeouts
	root := j.client.system.Root
	msg := &messages.LeaseRenew{JobId: j.ID, OwnerToken: j.token}
	if r.Host == "" {
		res, err := root.RequestFuture(pidOf(r.To), msg, t.Ping).Result()
		outcome := jobctl.LeaseAcked
		if _, dead := res.(*actor.DeadLetterResponse); dead || errors.Is(err, actor.ErrDeadLetter) {
			outcome = jobctl.LeaseDeadLetter
		} else if err != nil {
			outcome = jobctl.LeaseUnanswered
		}
		j.leaseStep(jobctl.LeaseRenewAnswered{At: time.Now(), Outcome: outcome})
		return
	}
	again, err := root.RequestFuture(HostPID(r.Host), msg, t.Ping).Result()
	kept := false
	switch again.(type) {
	case *messages.JobResult, *messages.JobError:
		if a := again.(interface{ GetJobId() string }); err == nil && a.GetJobId() == j.ID {
			root.Send(j.client.pid, again)
			kept = true
		}
	}
	j.leaseStep(jobctl.LeaseHostAnswered{At: time.Now(), Kept: kept})
}

// Release lets a detached job go: the client stops following it, and closing the client no
// longer cancels it.
func (j *Job) Release() {
	j.leaseStep(jobctl.LeaseRelease{})
}

// Abandon ends the job on the client's side with err, for a caller that learned the job is
// lost (its coordinator's node died, say); the coordinator, if alive, is asked to cancel it.
func (j *Job) Abandon(err error) {
	j.canceled.Store(true) // a job accepted after this is cancelled on acceptance
	j.leaseStep(jobctl.LeaseAbandon{Err: err})
}

// finish ends the job once, and the renewals of its lease.
func (j *Job) finish(res *Result, err error) {
	j.once.Do(func() {
		if j.blocks != nil {
			j.blocks.close()
		}
		j.result, j.err = res, err
		close(j.progress)
		close(j.warnings)
		close(j.done)
	})
	j.leaseStep(jobctl.LeaseAnswered{})
}

// clientActor is the actor side of a Client.
type clientActor struct{ c *Client }

// Receive implements actor.Actor.
func (a clientActor) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(interface{ GetJobId() string }); ok {
		if j := a.c.job(m.GetJobId()); j != nil {
			j.leaseStep(jobctl.LeaseHeard{At: time.Now()})
		}
	}
	switch m := ctx.Message().(type) {
	case *messages.JobAccepted:
		j := a.c.job(m.JobId)
		if j == nil || m.Coordinator == nil {
			return
		}
		before := j.coord()
		if j.leaseStep(jobctl.LeaseAccepted{At: time.Now(), Coordinator: m.Coordinator, Epoch: m.Epoch}).Stale {
			return // a superseded coordinator's
		}
		if j.coord() == nil {
			if j.canceled.Load() { // given up before any coordinator accepted it
				ctx.Send(pidOf(m.Coordinator), &messages.CancelJob{JobId: j.ID, OwnerToken: j.token})
			}
			return
		}
		if before != nil {
			// Told again (the same coordinator), or a takeover: the renewals follow the lease.
			if after := j.coord(); m.Takeover && (after.Address != before.Address || after.Id != before.Id) {
				select {
				case j.warnings <- fmt.Sprintf("node %s took the job over", m.Coordinator.Address):
				default:
				}
			}
			return
		}
		j.m, j.n = int(m.Features), int(m.Samples)
		close(j.accepted)
		if j.canceled.Load() {
			ctx.Send(j.coord(), &messages.CancelJob{JobId: j.ID, OwnerToken: j.token})
		}
	case *messages.Progress:
		if j := a.c.job(m.JobId); j != nil && m.Warning != "" {
			select {
			case j.warnings <- m.Warning:
			default:
			}
		} else if j != nil {
			if m.Iteration <= j.seen {
				j.peaks = append(j.peaks, j.seen)
			}
			j.seen = m.Iteration
			select {
			case j.progress <- kernels.Progress{Iteration: int(m.Iteration), Seconds: m.Seconds, Ratio: m.Ratio, Objective: m.Objective,
				RelErr2: m.RelErr2, RMSE: m.Rmse, InitSeconds: m.InitSeconds, TestSSE: m.TestSse, TestRelErr2: m.TestRelErr2,
				TestRMSE: m.TestRmse, TestCount: m.TestCount}:
			default:
			}
		}
	case *messages.ResultChunk:
		j := a.c.job(m.JobId)
		if j == nil {
			return
		}
		if err := j.chunk(m); err != nil {
			ctx.Send(j.coord(), &messages.CancelJob{JobId: j.ID, OwnerToken: j.token})
			a.c.forget(j.ID)
			j.finish(nil, &JobError{JobID: j.ID, Kind: KindFailure, Message: fmt.Sprintf("job %s: result: %v", j.ID, err)})
			return
		}
		if m.Sender != nil {
			ctx.Send(pidOf(m.Sender), &messages.ResultAck{JobId: m.JobId, Name: m.Name, Shard: m.Shard, Seq: m.Chunk.GetSeq(), OwnerToken: j.token})
		}
	case *messages.BlockRequest:
		j := a.c.job(m.JobId)
		if j == nil || j.blocks == nil {
			return
		}
		if err := j.blocks.request(ctx.ActorSystem(), ctx.Self(), m, j.token); err != nil {
			ctx.Send(j.coord(), &messages.CancelJob{JobId: j.ID, OwnerToken: j.token})
			a.c.forget(j.ID)
			j.finish(nil, &JobError{JobID: j.ID, Kind: KindFailure, Message: fmt.Sprintf("job %s: %v", j.ID, err)})
		}
	case *messages.BlockAck:
		if j := a.c.job(m.JobId); j != nil && j.blocks != nil {
			j.blocks.ack(m)
		}
	case *messages.JobResult:
		j := a.c.job(m.JobId)
		if j == nil {
			return
		}
		a.c.forget(j.ID)
		res, err := j.assemble(m)
		j.finish(res, err)
	case *messages.JobError:
		j := a.c.job(m.JobId)
		if j == nil || j.leaseStep(jobctl.LeaseAnswered{Epoch: m.Epoch, Error: true}).Stale {
			return // a superseded coordinator's word (its lease ran out: the client renews its successor)
		}
		a.c.forget(j.ID)
		j.finish(nil, &JobError{JobID: m.JobId, Kind: m.Kind, Message: m.Message, Field: m.Field, Template: m.Template})
	}
}

// chunk places one result chunk into B or C.
func (j *Job) chunk(m *messages.ResultChunk) error {
	if j.coord() == nil {
		return fmt.Errorf("result chunk before the job was accepted")
	}
	var key [2]int64
	var dst []float64
	switch m.Name {
	case "B":
		if j.b == nil {
			j.b = make([]float64, j.m*j.k)
		}
		key, dst = [2]int64{0, 0}, j.b
	case "C":
		if m.ColLo < 0 || m.ColHi <= m.ColLo || m.ColHi > int64(j.n) {
			return fmt.Errorf("shard %d sent columns [%d, %d) of %d", m.Shard, m.ColLo, m.ColHi, j.n)
		}
		if j.c == nil {
			j.c = make([]float64, j.n*j.k)
		}
		key, dst = [2]int64{1, m.Shard}, j.c[int(m.ColLo)*j.k:int(m.ColHi)*j.k]
	default:
		return fmt.Errorf("unknown factor %q", m.Name)
	}
	a := j.streams[key]
	if a == nil {
		a = chunked.Into(dst)
		j.streams[key] = a
	}
	if _, err := a.Add(m.Chunk); err != nil && !errors.Is(err, chunked.ErrDuplicate) {
		return fmt.Errorf("%s from shard %d: %w", m.Name, m.Shard, err)
	}
	return nil
}

// assemble checks that every factor arrived whole and builds the result.
func (j *Job) assemble(m *messages.JobResult) (*Result, error) {
	complete := func(key [2]int64) bool {
		a := j.streams[key]
		return a != nil && a.Complete()
	}
	if !complete([2]int64{0, 0}) {
		return nil, fmt.Errorf("job %s: the basis B did not arrive whole", j.ID)
	}
	for s := int64(0); s < m.Shards && !j.outShared; s++ {
		if !complete([2]int64{1, s}) {
			return nil, fmt.Errorf("job %s: the coefficients of shard %d did not arrive whole", j.ID, s)
		}
	}
	r := resultOf(j.ID, m)
	if len(j.peaks) == len(r.Recoveries) {
		for i := range r.Recoveries {
			if redone := j.peaks[i] - r.Recoveries[i].FromIteration; redone > r.Recoveries[i].Redone {
				r.Recoveries[i].Redone = redone
			}
		}
	}
	r.B, r.C = j.b, j.c
	return r, nil
}

// resultOf is a job's result as its JobResult message gives it, without the factors (which
// come as chunks). The message accounting is per iteration of the last epoch: the counters are
// those of the actors that ran it, from the checkpoint it resumed from to the end.
func resultOf(id string, m *messages.JobResult) *Result {
	r := &Result{JobID: id, Counters: m.Counters, ShardNodes: m.ShardNodes, Checkpoints: m.Checkpoints, CheckpointSeconds: m.CheckpointSeconds}
	for _, rec := range m.Recoveries {
		r.Recoveries = append(r.Recoveries, report.Recovery{Epoch: rec.GetEpoch(), Cause: rec.GetCause(), Noticed: rec.GetNoticed(),
			Resumed: rec.GetResumed(), FromIteration: rec.GetFromIteration(), Redone: rec.GetRedone()})
	}
	r.M, r.N, r.K, r.Shards = int(m.M), int(m.N), int(m.K), int(m.Shards)
	r.Iterations = int(m.Iterations)
	r.StopReason = kernels.StopReason(m.Stop)
	r.Converged = r.StopReason == kernels.StopConverged
	r.Initial, r.Objective, r.Residual, r.SqNormX, r.Seconds = m.Initial, m.Objective, m.Residual, m.SqNormX, m.Seconds
	r.IterSeconds = m.IterSeconds
	for _, h := range m.History {
		r.History = append(r.History, kernels.HistoryPoint{Iteration: int(h.Iteration), Seconds: h.Seconds, Ratio: h.Ratio, RelErr2: h.RelErr2, RMSE: h.Rmse,
			TestSSE: h.TestSse, TestRelErr2: h.TestRelErr2, TestRMSE: h.TestRmse, TestCount: h.TestCount})
	}
	r.Observed = int64(r.M) * int64(r.N)
	if mk := m.Mask; mk != nil {
		r.Observed, r.Missing, r.TestCount, r.TestSqNorm, r.TestSSE = mk.Observed, mk.Missing, mk.Test, mk.TestSqNorm, m.TestSse
	}
	r.Comm.InitCollectives, r.Comm.Collectives = int(m.InitCollectives), int(m.Collectives)
	r.Comm.FloatsPerIteration = m.FloatsPerIteration
	r.Storage, r.XBytes, r.Threads = m.Storage, m.XBytes, int(m.Threads)
	ran := r.Iterations
	if n := len(m.Recoveries); n > 0 {
		ran -= int(m.Recoveries[n-1].FromIteration)
	}
	if ran > 0 {
		it := float64(ran)
		r.Comm.PerIteration = float64(m.Collectives) / it
		r.MessagesPerIteration = float64(m.Counters.GetMessages()) / it
		r.BytesPerIteration = float64(m.Counters.GetBytes()) / it
		r.ReductionsPerIteration = float64(m.Counters.GetReductions()) / it
	}
	return r
}
