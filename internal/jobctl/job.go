package jobctl

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/didnmf/didnmf/internal/jobctl/internal/bugs"
	"github.com/didnmf/didnmf/messages"
)

// Config is what a job's control machine knows of the node it runs on and of the job's
// parsed spec. It is fixed for the job's life.
type Config struct {
	// Self is the coordinator's own PID: the messages it sends name it, and Self.Address is
	// its node.
	Self *messages.Pid
	// Cluster is set when the node is a member of a gossip cluster: the job gets a standby,
	// and recovery places on the cluster's live workers (MemberEvent.Workers).
	Cluster bool
	// Lease cancels a job (not detached) whose client sent no lease renewal for that long
	// (0: never); MaxJobTime cancels a job that ran longer (0: no cap).
	Lease, MaxJobTime time.Duration
	// QuorumWait is how long a job without a majority of its nodes waits for them.
	QuorumWait time.Duration
	// ReportInterval is how long shard 0 holds its iteration reports to send them in bursts;
	// automatic checkpoints are asked that much further ahead.
	ReportInterval time.Duration
	// FanIn is the reduce tree's fan-in (a power of two >= 2).
	FanIn int
	// TimeLimit is the job's time limit (0: none): the control grants iterations and stops
	// the shards when it is reached.
	TimeLimit time.Duration
	// StallTimeout rolls the job back when nothing of it progressed for that long, or for
	// StallFactor times its slowest iteration if that is longer (0: never): a message the
	// transport lost (a connection that broke without a node dying) stalls a job otherwise.
	StallTimeout time.Duration
	// Submitted is when the job was submitted to this coordinator (zero: at its first event;
	// a takeover keeps the first coordinator's, from the replicated state).
	Submitted time.Time
	// Bugs plants deliberate bugs for the simulator's bite test; production leaves it 0.
	Bugs bugs.Set
}

// StallFactor is how many of its slowest iterations a job may go without progress before
// StallTimeout rolls it back.
const StallFactor = 20

// Job is the control of one job: placement and buddies, recovery, quorum and takeover,
// grants and progress, checkpoint commits and the result, as a deterministic state machine.
// Feed it events with Step and carry out what Ready returns; it reads no clock (every Step
// gets the time), sends nothing and touches no file itself.
//
// A Job is not safe for concurrent use: one goroutine (the coordinator actor's, or a
// simulation's) owns it.
type Job struct {
	cfg    Config
	sub    *messages.SubmitJob
	id     string
	client *messages.Pid
	epoch  uint64
	m, n   int
	// density is the input's stored entries over M x N when known (sparse inputs), else 0.
	density float64
	begun   bool

	hosts    []string        // distinct nodes with shards of this job, in shard order
	shards   []*messages.Pid // this epoch's shard actors
	reducers []*messages.Pid // this epoch's reducers, root last
	placed   int
	sqNormX  float64 // ||X||^2, summed in shard order once every shard is placed
	// mask and testSSE are a masked job's global counts and its held-out error at the last
	// reported iteration (nil and 0 for a job without a mask).
	mask    *messages.MaskStats
	testSSE float64
	sqNorms []float64
	shardOf map[string]int // a shard actor's id -> its shard, for this epoch
	running bool
	over    bool
	// committing is set while the output files are committed (Ready.Commit).
	committing *messages.JobResult
	// answer is what ended the job for the client (see Answer).
	answer proto.Message

	granted   int64
	timeUp    bool
	started   time.Time
	history   []*messages.HistoryPoint
	iterSec   []float64
	lastSec   float64
	initial   float64
	objective float64

	done        map[int64]*messages.ShardDone
	reducerDone int
	counters    messages.Counters // the shards' and reducers' counters
	own         messages.Counters // the control's own messages
	initPhase   bool              // the control's messages count with the initialisation

	workers []string // the cluster's live workers (actor addresses), as last told

	ft faultState

	ownsPartial bool
	lease       *LeaseWatch // the client's lease, at this end
	announced   bool        // the client was told this coordinator has the job (JobAccepted)
	published   time.Time
	// progressAt is when the job last progressed (an assignment taken, an iteration, a
	// checkpoint, a shard or reducer done); stallArmed is set while a stall timer runs.
	progressAt time.Time
	stallArmed bool
	stallNext  time.Duration // the next stall timer's wait, when shorter than stallAfter
	// slowest is the longest an iteration (or the initialisation) took, as the reports'
	// arrival shows; reportAt when the last report of this epoch came (zero: none yet).
	slowest  time.Duration
	reportAt time.Time

	// submitted is when the job was submitted; events its timeline (the latest
	// MaxInfoEvents); now the time of the event being stepped.
	submitted time.Time
	events    []*messages.JobEvent
	now       time.Time

	ready Ready
}

// New returns the control of the job sub, not begun: Step it a Begin (a new job) or a
// TakeOver (a job whose coordinator was lost). It refuses a configuration that Validate
// refuses and a submission without a job id.
func New(cfg Config, sub *messages.SubmitJob) (*Job, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if sub.GetJobId() == "" {
		return nil, errors.New("jobctl: a submission without a job id")
	}
	return &Job{cfg: cfg, sub: sub, id: sub.GetJobId(), client: sub.GetClient(), epoch: 1, done: map[int64]*messages.ShardDone{},
		submitted: cfg.Submitted,
		lease:     NewLeaseWatch(sub.GetJobId(), cfg.Lease, sub.GetSpec().GetDetached()),
		ft:        faultState{involved: map[string]bool{}, lost: map[string]bool{}, reported: map[int64]map[int64]bool{}}}, nil
}

// Validate tells what is wrong with a configuration, naming the field: Self must name the
// coordinator, FanIn be a power of two >= 2, and no duration be negative.
func (c Config) Validate() error {
	if c.Self.GetAddress() == "" || c.Self.GetId() == "" {
		return fmt.Errorf("jobctl: Config.Self %v does not name the coordinator (address and id)", c.Self)
	}
	if c.FanIn < 2 || c.FanIn&(c.FanIn-1) != 0 {
		return fmt.Errorf("jobctl: Config.FanIn %d is not a power of two >= 2", c.FanIn)
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"Lease", c.Lease}, {"MaxJobTime", c.MaxJobTime}, {"QuorumWait", c.QuorumWait}, {"ReportInterval", c.ReportInterval},
		{"TimeLimit", c.TimeLimit}, {"StallTimeout", c.StallTimeout}} {
		if d.d < 0 {
			return fmt.Errorf("jobctl: Config.%s %v is negative", d.name, d.d)
		}
	}
	return nil
}

// ID is the job's id.
func (j *Job) ID() string { return j.id }

// Epoch is the job's current epoch: raised by every recovery, and by a takeover to a new
// generation (see EpochString).
func (j *Job) Epoch() uint64 { return j.epoch }

// Over tells whether the job ended (with a result or an error).
func (j *Job) Over() bool { return j.over }

// Send is one message to send, in order with the others of a Ready.
type Send struct {
	To  *messages.Pid
	Msg proto.Message
}

// TimerKind names a timer the control asks for.
type TimerKind uint8

const (
	// TimerQuorum ends a job's wait for a majority of its nodes.
	TimerQuorum TimerKind = iota + 1
	// TimerStall checks that the job progressed (Config.StallTimeout).
	TimerStall
)

// Timer asks for a TimerFired event carrying it, After from now.
type Timer struct {
	Kind  TimerKind
	Epoch uint64
	After time.Duration
}

// PingRequest asks for a ping of every node in Nodes; the answers come back as a Pongs event
// with the same Epoch.
type PingRequest struct {
	Epoch uint64
	Nodes []string
}

// Commit asks for the job's output files to be put in place (the shared coef.npy a job with
// --out-shared fills in, and a detached job's basis.npy and report.json), then for an
// OutputCommitted event. Result is the job's result, which reaches the client after the
// commit.
type Commit struct {
	Dir      string
	Detached bool
	Result   *messages.JobResult
}

// Log is a record for the node's log.
type Log struct {
	Level slog.Level
	Msg   string
	Attrs []slog.Attr
}

// Ready is what the control asks its runtime to do after a Step, in the order given: the
// sends in order, then the rest.
type Ready struct {
	Sends  []Send
	Pings  *PingRequest
	Timers []Timer
	Logs   []Log
	// Info, when set, is the job's state for the node's job board (its history thinned to
	// MaxInfoHistory points, its latest MaxInfoEvents events).
	Info *messages.JobInfo
	// Record, when set (with Over), is the record of the job that ended: its JobInfo in state
	// done, failed or canceled, with the outcome. It was sent to the hosts that keep it (this
	// node's and the standby's, as a JobRecord); the runtime writes a detached job's failure
	// into its --out-shared directory from it.
	Record *messages.JobInfo
	// Commit, when set, asks for the output files to be committed.
	Commit *Commit
	// RemovePartials asks for the job's partial output files (under the spec's out_shared
	// directory) to be removed: the job failed.
	RemovePartials bool
	// Over is set once: the job ended; the runtime stops its actor and forgets the job.
	Over bool
	// Recoveries are the recoveries that began, by cause: one each time the job rolls
	// back with none under way (causes added to a recovery under way are not told again).
	Recoveries []RecoveryCause
}

// Ready returns what the control asks for since the last call, and forgets it.
func (j *Job) Ready() Ready {
	r := j.ready
	j.ready = Ready{}
	return r
}

// send queues a message (none to a nil PID: a client gone after a takeover gave up).
func (j *Job) send(to *messages.Pid, msg proto.Message) {
	if to == nil {
		return
	}
	j.ready.Sends = append(j.ready.Sends, Send{To: to, Msg: msg})
}

// metered queues a message and counts it among the job's messages and bytes.
func (j *Job) metered(to *messages.Pid, msg proto.Message) {
	if to == nil {
		return
	}
	Count(&j.own, j.initPhase, msg)
	j.send(to, msg)
}

// Count adds a message to counters: to the initialisation's (placement, init collectives)
// when init, else to the iterations'. Every actor of a job counts what it sends this way.
func Count(c *messages.Counters, init bool, msg proto.Message) {
	size := int64(proto.Size(msg))
	if init {
		c.InitMessages++
		c.InitBytes += size
	} else {
		c.Messages++
		c.Bytes += size
	}
}

// log queues a log record.
func (j *Job) log(level slog.Level, msg string, attrs ...slog.Attr) {
	j.ready.Logs = append(j.ready.Logs, Log{Level: level, Msg: msg, Attrs: append([]slog.Attr{slog.String("job", j.id)}, attrs...)})
}
