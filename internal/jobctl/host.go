package jobctl

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/internal/jobctl/internal/bugs"
	"github.com/didnmf/didnmf/messages"
)

// HostConfig is what a node's host knows of its node: its address and limits, fixed for the
// node's life. Zero limits and quotas are none.
type HostConfig struct {
	// Node is the actor address of the host's node: its children live there, and refusals
	// name it.
	Node string
	// Memory is the bytes of job data the node accepts; MaxShards the shards it holds;
	// MaxJobs the jobs with actors on it.
	Memory    int64
	MaxShards int
	MaxJobs   int
	// OwnerMemory, OwnerMaxShards and OwnerMaxJobs are the same for each owner's jobs: its
	// quotas on the node.
	OwnerMemory    int64
	OwnerMaxShards int
	OwnerMaxJobs   int
	// MaxRestarts is how many panics of a job's shards and reducers the node restarts; past
	// it the job fails.
	MaxRestarts int
	// Orphan is how long after the node of a job's coordinator left the host checks whether
	// a coordinator took the job over (HostTimer); a job nobody took is forgotten.
	Orphan time.Duration
	// HistoryMax is how many records of ended jobs the host keeps (0: DefaultHistoryMax;
	// negative: none), HistoryTime for how long (0: DefaultHistoryTime). See HostRecord.
	HistoryMax  int
	HistoryTime time.Duration
	// Bugs plants deliberate bugs (jobsim's TestSimulatorFindsPlantedBugs); production leaves
	// it 0.
	Bugs bugs.Set
}

// Validate tells what is wrong with a HostConfig, or nil.
func (c HostConfig) Validate() error {
	var errs []error
	if c.Node == "" {
		errs = append(errs, errors.New("no node address"))
	}
	if c.Memory < 0 || c.MaxShards < 0 || c.MaxJobs < 0 || c.OwnerMemory < 0 || c.OwnerMaxShards < 0 || c.OwnerMaxJobs < 0 {
		errs = append(errs, fmt.Errorf("a negative limit or quota (memory %d, shards %d, jobs %d; owners' %d, %d, %d): 0 is none",
			c.Memory, c.MaxShards, c.MaxJobs, c.OwnerMemory, c.OwnerMaxShards, c.OwnerMaxJobs))
	}
	if c.MaxRestarts < 0 {
		errs = append(errs, fmt.Errorf("MaxRestarts %d: want >= 0", c.MaxRestarts))
	}
	if c.Orphan <= 0 {
		errs = append(errs, fmt.Errorf("Orphan %v: want > 0", c.Orphan))
	}
	if c.HistoryTime < 0 {
		errs = append(errs, fmt.Errorf("HistoryTime %v: want >= 0 (0: the default)", c.HistoryTime))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("jobctl.HostConfig: %w", err)
	}
	return nil
}

// Host is the control of a node's host actor as a deterministic state machine: which jobs
// and actors the node admits (its limits, each owner's quotas), which coordinator and epoch
// of a job it serves (older assignments and stops are fenced off, a superseded coordinator is
// told so), when it takes a job over as its standby, when it forgets a job whose coordinator
// is gone, how many failures of a job's actors it restarts, and the answers of ended jobs it
// keeps for their clients. It decides; its runtime acts: the host actor (package actors)
// spawns and stops the actors, reserves the node's memory (shared with the shards, which
// take more as blocks arrive: events carry what is used), keeps checkpoint copies and
// sends. It has no clock, goroutine, network or file.
//
//	h, err := jobctl.NewHost(cfg)       // err: a config Validate refuses
//	err = h.Step(jobctl.HostSubmit{...}) // err: an event it does not know, or malformed
//	rd := h.Ready()                      // spawn, stop, send, reply, arm a timer, ...
//
// A Host is not safe for concurrent use: one goroutine (the host actor's) owns it.
type Host struct {
	cfg HostConfig
	// jobs is what the node keeps of each job it heard of (forgotten when the job ends here or
	// is orphaned); children the node's live actors, by actor id ("host/<name>"): they
	// outlive their job's record until they stopped.
	jobs     map[string]*hostJob
	children map[string]*hostChild
	answers  map[string]keptAnswer
	// records are the records of ended jobs the host keeps, by job id (host_history.go).
	records map[string]keptRecord
	ready   HostReady
}

// hostJob is what a host keeps of one job.
type hostJob struct {
	// coordinator is the job's coordinator as its latest assignment or Buddies named it;
	// epoch the latest epoch of its assignments here (assigned: one came).
	coordinator *messages.Pid
	epoch       uint64
	assigned    bool
	// failures counts the panics of the job's shards and reducers here (HostConfig.MaxRestarts).
	failures int
	// standby is the job's state its coordinator replicated here: this node takes the job over
	// when the coordinator's node goes.
	standby *messages.JobState
	// buddies are the shards whose checkpoint copies this node keeps, as the coordinator's
	// Buddies of buddyEpoch said; every is the job's checkpoint interval (negative: automatic).
	buddies    map[int64]bool
	buddyEpoch uint64
	every      int64
	// submit is the job's submission when its coordinator runs here; owner the owner of its
	// actors here. Both go with the job's last actor here.
	submit *messages.SubmitJob
	owner  string
}

// empty tells whether a record holds nothing worth keeping.
func (j *hostJob) empty() bool {
	return j.coordinator == nil && !j.assigned && j.failures == 0 && j.standby == nil && j.buddies == nil && j.submit == nil && j.owner == ""
}

// hostChild is one live actor of the host.
type hostChild struct {
	job   string
	role  messages.ActorRole
	shard int64 // a shard's index
	// owner is the owner of the job the actor counts for; reserve the memory it holds.
	owner   string
	reserve int64
	epoch   uint64
	// coordinator and client hear of its failures: the job's coordinator (shards, reducers),
	// or its client (coordinators).
	coordinator, client *messages.Pid
}

// HostReady is what a Host asks its runtime to do after a Step, in the order of its fields.
type HostReady struct {
	// Logs are records for the node's log.
	Logs []Log
	// Drops are messages dropped as stale or of another coordinator than the job's (what
	// they were), for the node's drop counters.
	Drops []string
	// Stops are actors to stop (their ids): reducers of an earlier epoch, an actor past the
	// job's restarts.
	Stops []string
	// Forget are jobs whose actors here stop and whose data the node drops.
	Forget []HostForget
	// Spawns are actors to start; one that cannot be started is stepped back at once
	// (HostSpawnFailed).
	Spawns []HostSpawn
	// Sends are messages to send, in order.
	Sends []Send
	// Reply, when set, answers the request stepped (HostLeaseRenew).
	Reply proto.Message
	// Timers are orphan checks to arm.
	Timers []HostTimer
	// Releases give back the memory of actors that stopped.
	Releases []HostRelease
	// Prunes are commits whose job's checkpoint copies here older than KeepFrom may go.
	Prunes []*messages.CheckpointCommitted
	// Gone are jobs with no actor left here: their clients are no longer routed.
	Gone []string
	// Idle is set when the node runs no actor any more.
	Idle bool
}

// HostSpawn asks for a child of the host: a coordinator (Submit, or Takeover from the state
// its old coordinator replicated, for Cause), a shard (Shard) or a reducer (Reducer). Once
// it runs, the runtime reserves Reserve bytes of the node's memory for Owner and, but for a
// reducer, routes the job's messages to and from its client (Client's address).
type HostSpawn struct {
	Name    string // its actor name under the host
	Job     string
	Role    messages.ActorRole
	Owner   string
	Reserve int64
	Client  *messages.Pid

	Submit   *messages.SubmitJob
	Takeover *messages.JobState
	Cause    string
	Shard    *messages.ShardAssignment
	Reducer  *messages.ReducerAssignment
}

// HostForget asks to stop a job's actors here (Actors, their ids; interrupt their kernels
// first) and to drop what the node keeps of it: checkpoint copies, kept blocks, checkpoints.
// A job that Ended is remembered as such (a later assignment is answered Placed.Ended); a job
// forgotten as an orphan is not.
type HostForget struct {
	Job    string
	Ended  bool
	Actors []string
}

// HostTimer asks for a HostOrphanCheck of Job After from now: its coordinator's node
// (Coordinator, its address) left.
type HostTimer struct {
	After       time.Duration
	Job         string
	Coordinator string
}

// HostRelease gives back the memory an actor of Owner's reserved.
type HostRelease struct {
	Owner string
	Bytes int64
}

// NewHost returns the host of a node that runs nothing yet, or why cfg is wrong.
func NewHost(cfg HostConfig) (*Host, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Host{cfg: cfg, jobs: map[string]*hostJob{}, children: map[string]*hostChild{}, answers: map[string]keptAnswer{},
		records: map[string]keptRecord{}}, nil
}

// Ready returns what the host asks for since the last call, and forgets it.
func (h *Host) Ready() HostReady {
	rd := h.ready
	h.ready = HostReady{}
	return rd
}

// Step feeds the host one event (see host_events.go). An event of another type, or one
// missing its message, is an error and changes nothing.
func (h *Host) Step(ev any) error {
	switch e := ev.(type) {
	case HostSubmit:
		if e.Submit == nil {
			return errors.New("jobctl.Host: HostSubmit without its SubmitJob")
		}
		h.submit(e)
	case HostShardAssign:
		if e.Assignment == nil {
			return errors.New("jobctl.Host: HostShardAssign without its ShardAssignment")
		}
		h.assignShard(e)
	case HostReducerAssign:
		if e.Assignment == nil {
			return errors.New("jobctl.Host: HostReducerAssign without its ReducerAssignment")
		}
		h.assignReducer(e)
	case HostStop:
		if e.Stop == nil {
			return errors.New("jobctl.Host: HostStop without its StopJob")
		}
		h.stop(e)
	case HostBuddies:
		if e.Buddies == nil {
			return errors.New("jobctl.Host: HostBuddies without its Buddies")
		}
		h.buddies(e)
	case HostJobState:
		if e.State == nil {
			return errors.New("jobctl.Host: HostJobState without its JobState")
		}
		h.keepState(e.State)
	case HostCheckpointCommitted:
		if e.Commit == nil {
			return errors.New("jobctl.Host: HostCheckpointCommitted without its CheckpointCommitted")
		}
		h.committed(e.Commit)
	case HostMemberLeft:
		h.memberLeft(e)
	case HostOrphanCheck:
		h.orphanCheck(e)
	case HostChildFailed:
		h.childFailed(e)
	case HostChildStopped:
		h.childStopped(e.ID)
	case HostSpawnFailed:
		return h.spawnFailed(e)
	case HostAnswerKept:
		if e.Answer == nil || e.At.IsZero() {
			return errors.New("jobctl.Host: HostAnswerKept without its answer or its time")
		}
		h.keepAnswer(e)
	case HostRecord:
		if !ValidRecord(e.Record) || e.At.IsZero() {
			return errors.New("jobctl.Host: HostRecord without a valid record of an ended job, or without its time")
		}
		h.keepRecord(e)
	case HostLeaseRenew:
		if e.Renew == nil || e.At.IsZero() {
			return errors.New("jobctl.Host: HostLeaseRenew without its LeaseRenew or its time")
		}
		h.answerAgain(e)
	default:
		return fmt.Errorf("jobctl.Host: unknown event %T", ev)
	}
	return nil
}

// Submission returns the submission of a job whose coordinator runs here (nil: none).
func (h *Host) Submission(job string) *messages.SubmitJob {
	if j := h.jobs[job]; j != nil {
		return j.submit
	}
	return nil
}

// KeepsCopies tells whether this node keeps the checkpoint copies of a job's shard (its
// coordinator's latest Buddies said so), and the job's checkpoint interval (negative:
// automatic).
func (h *Host) KeepsCopies(job string, shard int64) (bool, int64) {
	j := h.jobs[job]
	if j == nil {
		return false, 0
	}
	return j.buddies[shard], j.every
}

// HostLoad is what runs on a node, as a status shows it.
type HostLoad struct {
	// Jobs are the ids of the jobs with actors here, sorted.
	Jobs []string
	// Actors, Shards and Reserved are their actors, shards and reserved memory.
	Actors, Shards int
	Reserved       int64
}

// Load returns what runs on the node: all of it, or only the jobs with an actor of owner.
func (h *Host) Load(all bool, owner string) HostLoad {
	mine := map[string]bool{}
	for _, c := range h.children {
		if all || c.owner == owner {
			mine[c.job] = true
		}
	}
	var l HostLoad
	for job := range mine {
		l.Jobs = append(l.Jobs, job)
	}
	slices.Sort(l.Jobs)
	for _, c := range h.children {
		if mine[c.job] {
			l.Actors++
			l.Reserved += c.reserve
			if c.role == messages.ActorRole_ACTOR_ROLE_SHARD {
				l.Shards++
			}
		}
	}
	return l
}

// job returns the record of a job, made if new.
func (h *Host) job(id string) *hostJob {
	j := h.jobs[id]
	if j == nil {
		j = &hostJob{}
		h.jobs[id] = j
	}
	return j
}

// tidy drops a job's record once it holds nothing.
func (h *Host) tidy(id string) {
	if j := h.jobs[id]; j != nil && j.empty() {
		delete(h.jobs, id)
	}
}

// knows tells whether the node has anything of a job: actors, standby state, assignments.
func (h *Host) knows(id string) bool {
	if j := h.jobs[id]; j != nil && (j.assigned || j.standby != nil) {
		return true
	}
	return h.running(id)
}

// running tells whether a job has an actor here.
func (h *Host) running(id string) bool {
	for _, c := range h.children {
		if c.job == id {
			return true
		}
	}
	return false
}

// actorsOf returns the ids of a job's actors here, sorted.
func (h *Host) actorsOf(id string) []string {
	var out []string
	for cid, c := range h.children {
		if c.job == id {
			out = append(out, cid)
		}
	}
	slices.Sort(out)
	return out
}

// childID is the actor id of the host's child named name.
func childID(name string) string { return HostName + "/" + name }

// CoordinatorName is the actor name of a job's coordinator (a child of the host).
func CoordinatorName(job string) string { return job + "-coord" }

// send queues a message (none to a nil PID).
func (h *Host) send(to *messages.Pid, msg proto.Message) {
	if to != nil {
		h.ready.Sends = append(h.ready.Sends, Send{To: to, Msg: msg})
	}
}

// log queues a log record.
func (h *Host) log(level slog.Level, msg string, attrs ...slog.Attr) {
	h.ready.Logs = append(h.ready.Logs, Log{Level: level, Msg: msg, Attrs: attrs})
}

// drop counts a message dropped as stale or of another coordinator.
func (h *Host) drop(what string) { h.ready.Drops = append(h.ready.Drops, what) }

// spawn records a child about to be spawned and asks for it.
func (h *Host) spawn(s HostSpawn, c *hostChild) {
	c.job, c.role, c.owner, c.reserve = s.Job, s.Role, s.Owner, s.Reserve
	h.children[childID(s.Name)] = c
	h.ready.Spawns = append(h.ready.Spawns, s)
}
