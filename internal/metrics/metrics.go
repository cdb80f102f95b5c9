package metrics

import (
	"log/slog"
	"net/http"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/didnmf/didnmf/internal/actors"
	"github.com/didnmf/didnmf/internal/jobctl"
)

// Config is what a node's metrics read when they are scraped. Each function is called on the
// scraping request's goroutine, possibly by several scrapes at once: it must be safe for
// concurrent use and quick (it reads counters and tables the node keeps; it must not ask
// other nodes). A nil function leaves its families out.
type Config struct {
	// Version is the node's version, for didnmf_build_info ("" reads "unknown").
	Version string
	// Members counts the members this node's gossip knows by state: "alive", "suspect",
	// "dead", "left" (other states count as "other").
	Members func() map[string]int
	// Jobs counts the live jobs coordinated on this node by state, as actors.JobState names
	// them (actors.Node.JobsByState): an ended job is no longer coordinated, so done, failed
	// and canceled have no series (the jobs' history tells of ended jobs).
	Jobs func() map[string]int
	// Memory is the bytes of job data the node offers (0: no limit) and those reserved
	// (actors.Node.Memory).
	Memory func() (offered, reserved int64)
	// Drops is the node's drop counters by cause (actors.Node.Drops): they only grow.
	Drops func() map[string]int64
	// GossipBytes is the bytes the gossip port sent and received since it started
	// (cluster.Membership.GossipBytes); GossipHealth memberlist's health score
	// (cluster.Membership.HealthScore).
	GossipBytes  func() (sent, received int64)
	GossipHealth func() int
	// Logger receives the errors of scrapes (nil: none).
	Logger *slog.Logger
}

// The states of members and jobs with a series of their own (others count as "other").
var (
	MemberStates = []string{"alive", "suspect", "dead", "left"}
	JobStates    = []string{"placing", "running", "recovering", "paused"}
)

// other is the label value of a state or cause not in its fixed set.
const other = "other"

// Buckets of the histograms, in seconds: from the smallest iterations and collectives of a
// loopback cluster (tens of microseconds) to a large job's (minutes), and checkpoints
// from a small shard's to a large one's written to a slow disk.
var (
	iterationBuckets  = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}
	collectiveBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	checkpointBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
)

// Metrics is one node's metrics: its registry, the instruments its Observer methods move,
// and the collectors that read its state at scrape time. Its methods may be called from any
// goroutine.
type Metrics struct {
	reg    *prometheus.Registry
	logger *slog.Logger // nil: none

	iterations         prometheus.Counter
	iterationSeconds   prometheus.Histogram
	collectiveSeconds  prometheus.Histogram
	checkpointSeconds  prometheus.Histogram
	checkpointFailures prometheus.Counter
	recoveries         *prometheus.CounterVec
	// sent and received count the actor and data planes' bytes, by actors.Plane.
	sent, received [2]atomic.Int64
}

// New makes a node's metrics on a registry of their own.
func New(cfg Config) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), logger: cfg.Logger}
	m.iterations = prometheus.NewCounter(prometheus.CounterOpts{Name: "didnmf_iterations_total",
		Help: "Job iterations ended by the shard 0s on this node (each iteration of every job counts once across the cluster; redone ones again)."})
	m.iterationSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "didnmf_iteration_duration_seconds",
		Help: "Wall time of the job iterations counted by didnmf_iterations_total.", Buckets: iterationBuckets})
	m.collectiveSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "didnmf_allreduce_duration_seconds",
		Help:    "Latency of an iteration's collective (allreduce or reduce-scatter) as each shard on this node sees it: from sending its part to having the whole result.",
		Buckets: collectiveBuckets})
	m.checkpointSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "didnmf_checkpoint_duration_seconds",
		Help: "Time a shard on this node took to snapshot, encode and durably write its checkpoint (those written).", Buckets: checkpointBuckets})
	m.checkpointFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "didnmf_checkpoint_failures_total",
		Help: "Checkpoints of shards on this node that could not be taken or written."})
	m.recoveries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "didnmf_recoveries_total",
		Help: "Recoveries (rollbacks to a checkpoint, takeovers included) begun by jobs coordinated on this node, by cause."}, []string{"cause"})
	for _, c := range jobctl.RecoveryCauses {
		m.recoveries.WithLabelValues(string(c))
	}
	m.recoveries.WithLabelValues(other)
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "didnmf_build_info",
		Help: "The node's version and the Go version it was built with; always 1."}, []string{"version", "goversion"})
	version := cfg.Version
	if version == "" {
		version = "unknown"
	}
	build.WithLabelValues(version, runtime.Version()).Set(1)
	m.reg.MustRegister(m.iterations, m.iterationSeconds, m.collectiveSeconds, m.checkpointSeconds, m.checkpointFailures,
		m.recoveries, build, newStateCollector(cfg, m),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the node's registry (to gather from, or to register more collectors on).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler returns the handler of the Prometheus text exposition of the node's metrics (and
// OpenMetrics when asked for). It serves a few scrapes at a time, each within 10 s; what a
// collector fails to gather is left out and logged, the rest served.
func (m *Metrics) Handler() http.Handler {
	opts := promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, MaxRequestsInFlight: 4, Timeout: 10 * time.Second,
		EnableOpenMetrics: true}
	if m.logger != nil {
		opts.ErrorLog = errorLog{m.logger}
	}
	return promhttp.HandlerFor(m.reg, opts)
}

// The Observer's methods (see actors.Observer for when each is called): each moves its
// instruments with a few atomic operations, never blocking.
var _ actors.Observer = (*Metrics)(nil)

// IterationDone counts a job iteration and observes its duration.
func (m *Metrics) IterationDone(d time.Duration) {
	m.iterations.Inc()
	m.iterationSeconds.Observe(d.Seconds())
}

// CollectiveDone observes a collective's latency.
func (m *Metrics) CollectiveDone(d time.Duration) { m.collectiveSeconds.Observe(d.Seconds()) }

// BytesSent counts bytes written on a plane.
func (m *Metrics) BytesSent(p actors.Plane, n int) {
	if int(p) < len(m.sent) {
		m.sent[p].Add(int64(n))
	}
}

// BytesReceived counts bytes read on a plane.
func (m *Metrics) BytesReceived(p actors.Plane, n int) {
	if int(p) < len(m.received) {
		m.received[p].Add(int64(n))
	}
}

// CheckpointWritten observes a checkpoint written, or counts one that failed.
func (m *Metrics) CheckpointWritten(d time.Duration, err error) {
	if err != nil {
		m.checkpointFailures.Inc()
		return
	}
	m.checkpointSeconds.Observe(d.Seconds())
}

// RecoveryBegan counts a recovery by its cause ("other" for a cause not in
// jobctl.RecoveryCauses).
func (m *Metrics) RecoveryBegan(cause jobctl.RecoveryCause) {
	for _, c := range jobctl.RecoveryCauses {
		if c == cause {
			m.recoveries.WithLabelValues(string(c)).Inc()
			return
		}
	}
	m.recoveries.WithLabelValues(other).Inc()
}
