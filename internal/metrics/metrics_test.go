package metrics

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/didnmf/didnmf/internal/actors"
	"github.com/didnmf/didnmf/internal/jobctl"
)

// families is every family the issue names, with its type.
var families = map[string]dto.MetricType{
	"didnmf_members":                     dto.MetricType_GAUGE,
	"didnmf_jobs":                        dto.MetricType_GAUGE,
	"didnmf_iterations_total":            dto.MetricType_COUNTER,
	"didnmf_iteration_duration_seconds":  dto.MetricType_HISTOGRAM,
	"didnmf_allreduce_duration_seconds":  dto.MetricType_HISTOGRAM,
	"didnmf_sent_bytes_total":            dto.MetricType_COUNTER,
	"didnmf_received_bytes_total":        dto.MetricType_COUNTER,
	"didnmf_checkpoint_duration_seconds": dto.MetricType_HISTOGRAM,
	"didnmf_checkpoint_failures_total":   dto.MetricType_COUNTER,
	"didnmf_recoveries_total":            dto.MetricType_COUNTER,
	"didnmf_memory_offered_bytes":        dto.MetricType_GAUGE,
	"didnmf_memory_reserved_bytes":       dto.MetricType_GAUGE,
	"didnmf_guard_drops_total":           dto.MetricType_COUNTER,
	"didnmf_gossip_health_score":         dto.MetricType_GAUGE,
	"didnmf_build_info":                  dto.MetricType_GAUGE,
}

// scrape gets h's exposition in the text format and parses it with Prometheus's own parser.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// value returns the value of the series of a family whose labels are the given name, value
// pairs: a counter's or gauge's value, a histogram's count. It fails the test when there is
// no such series.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no family %s", name)
	}
	for _, m := range f.Metric {
		if matches(m, labels) {
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount())
			}
			t.Fatalf("%s: type %s", name, f.GetType())
		}
	}
	t.Fatalf("%s: no series %v among %v", name, labels, f.Metric)
	return 0
}

func matches(m *dto.Metric, labels []string) bool {
	if len(m.Label) != len(labels)/2 {
		return false
	}
	for i := 0; i < len(labels); i += 2 {
		found := false
		for _, l := range m.Label {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// fakeState is a node's state as the tests set it, read by Config's functions.
type fakeState struct {
	mu                     sync.Mutex
	members, jobs          map[string]int
	offered, reserved      int64
	drops                  map[string]int64
	gossipSent, gossipRecv int64
	health                 int
}

func (s *fakeState) config() Config {
	lock := func() func() { s.mu.Lock(); return s.mu.Unlock }
	return Config{Version: "v1.2.3",
		Members: func() map[string]int { defer lock()(); return s.members },
		Jobs:    func() map[string]int { defer lock()(); return s.jobs },
		Memory:  func() (int64, int64) { defer lock()(); return s.offered, s.reserved },
		Drops:   func() map[string]int64 { defer lock()(); return s.drops },
		GossipBytes: func() (int64, int64) {
			defer lock()()
			return s.gossipSent, s.gossipRecv
		},
		GossipHealth: func() int { defer lock()(); return s.health },
	}
}

// TestEveryFamilyIsExposedWithItsType: every family the issue names is in the text
// exposition with its type, with the series of every state, plane and cause at 0 before
// anything happened; the Go and process collectors are there too.
func TestEveryFamilyIsExposedWithItsType(t *testing.T) {
	st := &fakeState{}
	m := New(st.config())
	fams := scrape(t, m.Handler())
	for name, typ := range families {
		f := fams[name]
		if f == nil {
			t.Errorf("family %s missing", name)
			continue
		}
		if f.GetType() != typ {
			t.Errorf("family %s: type %s, want %s", name, f.GetType(), typ)
		}
		if f.GetHelp() == "" {
			t.Errorf("family %s has no help", name)
		}
	}
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_cpu_seconds_total"} {
		if fams[name] == nil {
			t.Errorf("family %s (Go and process collectors) missing", name)
		}
	}
	for _, s := range append(MemberStates, "other") {
		if v := value(t, fams, "didnmf_members", "state", s); v != 0 {
			t.Errorf("members %s = %v before any", s, v)
		}
	}
	for _, s := range append(JobStates, "other") {
		value(t, fams, "didnmf_jobs", "state", s)
	}
	// An ended job is coordinated nowhere: no series would ever leave 0, and the help says
	// one thing, true of each node.
	for _, m := range fams["didnmf_jobs"].GetMetric() {
		for _, l := range m.GetLabel() {
			if v := l.GetValue(); v == "done" || v == "failed" || v == "canceled" {
				t.Errorf("didnmf_jobs has a series for ended jobs: %s", v)
			}
		}
	}
	if h := fams["didnmf_jobs"].GetHelp(); strings.Contains(h, "summed") || !strings.Contains(h, "Live jobs coordinated on this node") {
		t.Errorf("didnmf_jobs help: %q", h)
	}
	for _, p := range []string{"actor", "data", "gossip"} {
		value(t, fams, "didnmf_sent_bytes_total", "plane", p)
		value(t, fams, "didnmf_received_bytes_total", "plane", p)
	}
	for _, c := range jobctl.RecoveryCauses {
		value(t, fams, "didnmf_recoveries_total", "cause", string(c))
	}
	for _, c := range actors.DropClasses {
		value(t, fams, "didnmf_guard_drops_total", "cause", c)
	}
	if v := value(t, fams, "didnmf_build_info", "version", "v1.2.3", "goversion", runtime.Version()); v != 1 {
		t.Errorf("build info %v, want 1", v)
	}
	// Units as Prometheus's conventions say: the families' names end in their base unit.
	for name, typ := range families {
		switch {
		case typ == dto.MetricType_COUNTER && !strings.HasSuffix(name, "_total"):
			t.Errorf("counter %s does not end in _total", name)
		case strings.Contains(name, "duration") && !strings.HasSuffix(name, "_seconds"):
			t.Errorf("duration %s is not in seconds", name)
		case strings.Contains(name, "memory") && !strings.HasSuffix(name, "_bytes"):
			t.Errorf("memory %s is not in bytes", name)
		}
	}
}

// TestNamesPassPrometheusLint runs client_golang's linter (promlint) over the didnmf families.
func TestNamesPassPrometheusLint(t *testing.T) {
	m := New((&fakeState{}).config())
	names := make([]string, 0, len(families))
	for name := range families {
		names = append(names, name)
	}
	problems, err := testutil.GatherAndLint(m.Registry(), names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		// build_info is a gauge holding 1 by convention (as go_build_info is): the linter
		// checks no such thing, so any problem is a real one.
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// series is a series of a family and the value it should have.
type series struct {
	family string
	labels []string
	want   float64
}

// TestCollectorsReadTheStateAtEachScrape: the gauges and the counters read from the node
// show its state as of the scrape; states and causes outside their fixed sets count under
// "other", drop causes by their class.
func TestCollectorsReadTheStateAtEachScrape(t *testing.T) {
	st := &fakeState{}
	m := New(st.config())
	h := m.Handler()
	for _, step := range []struct {
		name  string
		set   func()
		check []series
	}{
		{"members by state", func() { st.members = map[string]int{"alive": 3, "suspect": 1, "dead": 2, "zombie": 1} },
			[]series{{"didnmf_members", []string{"state", "alive"}, 3}, {"didnmf_members", []string{"state", "suspect"}, 1},
				{"didnmf_members", []string{"state", "dead"}, 2}, {"didnmf_members", []string{"state", "left"}, 0},
				{"didnmf_members", []string{"state", "other"}, 1}}},
		{"jobs by state", func() { st.jobs = map[string]int{"running": 2, "paused": 1, "unspecified": 4} },
			[]series{{"didnmf_jobs", []string{"state", "running"}, 2}, {"didnmf_jobs", []string{"state", "paused"}, 1},
				{"didnmf_jobs", []string{"state", "placing"}, 0}, {"didnmf_jobs", []string{"state", "other"}, 4}}},
		{"memory", func() { st.offered, st.reserved = 8<<30, 3<<30 },
			[]series{{"didnmf_memory_offered_bytes", nil, 8 << 30}, {"didnmf_memory_reserved_bytes", nil, 3 << 30}}},
		{"drops by class", func() {
			st.drops = map[string]int64{"unauthenticated stream": 2, "not the owner: CancelJob": 3, "not the owner: LeaseRenew": 1,
				"role may not send didnmf.Grant": 4, "data plane: TLS handshake failed": 5, "gossip: member refused: bad name": 6,
				"something new": 7}
		}, []series{{"didnmf_guard_drops_total", []string{"cause", "unauthenticated"}, 2},
			{"didnmf_guard_drops_total", []string{"cause", "owner"}, 4},
			{"didnmf_guard_drops_total", []string{"cause", "role"}, 4},
			{"didnmf_guard_drops_total", []string{"cause", "handshake"}, 5},
			{"didnmf_guard_drops_total", []string{"cause", "gossip"}, 6},
			{"didnmf_guard_drops_total", []string{"cause", "other"}, 7},
			{"didnmf_guard_drops_total", []string{"cause", "malformed"}, 0}}},
		{"gossip", func() { st.gossipSent, st.gossipRecv, st.health = 1000, 2000, 2 },
			[]series{{"didnmf_sent_bytes_total", []string{"plane", "gossip"}, 1000},
				{"didnmf_received_bytes_total", []string{"plane", "gossip"}, 2000},
				{"didnmf_gossip_health_score", nil, 2}}},
	} {
		t.Run(step.name, func(t *testing.T) {
			st.mu.Lock()
			step.set()
			st.mu.Unlock()
			fams := scrape(t, h)
			for _, c := range step.check {
				if got := value(t, fams, c.family, c.labels...); got != c.want {
					t.Errorf("%s%v = %v, want %v", c.family, c.labels, got, c.want)
				}
			}
		})
	}
}

// TestObserverMovesItsFamilies: each Observer method moves its family, and only it.
func TestObserverMovesItsFamilies(t *testing.T) {
	for _, c := range []struct {
		name   string
		event  func(*Metrics)
		family string
		labels []string
		want   float64
	}{
		{"iteration counted", func(m *Metrics) { m.IterationDone(3 * time.Millisecond) }, "didnmf_iterations_total", nil, 1},
		{"collective", func(m *Metrics) { m.CollectiveDone(time.Millisecond) }, "didnmf_allreduce_duration_seconds", nil, 1},
		{"actor bytes sent", func(m *Metrics) { m.BytesSent(actors.PlaneActor, 100) }, "didnmf_sent_bytes_total", []string{"plane", "actor"}, 100},
		{"data bytes received", func(m *Metrics) { m.BytesReceived(actors.PlaneData, 70) }, "didnmf_received_bytes_total", []string{"plane", "data"}, 70},
		{"checkpoint written", func(m *Metrics) { m.CheckpointWritten(time.Second, nil) }, "didnmf_checkpoint_duration_seconds", nil, 1},
		{"checkpoint failed", func(m *Metrics) { m.CheckpointWritten(time.Second, errors.New("disk full")) }, "didnmf_checkpoint_failures_total", nil, 1},
		{"recovery", func(m *Metrics) { m.RecoveryBegan(jobctl.CauseNodeDead) }, "didnmf_recoveries_total", []string{"cause", "node_dead"}, 1},
		{"recovery of an unknown cause", func(m *Metrics) { m.RecoveryBegan("cosmic_ray") }, "didnmf_recoveries_total", []string{"cause", "other"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := New(Config{})
			before := scrape(t, m.Handler())
			c.event(m)
			after := scrape(t, m.Handler())
			if got := value(t, after, c.family, c.labels...) - value(t, before, c.family, c.labels...); got != c.want {
				t.Errorf("%s%v moved by %v, want %v", c.family, c.labels, got, c.want)
			}
			if c.family == "didnmf_iterations_total" {
				h := after["didnmf_iteration_duration_seconds"].Metric[0].GetHistogram()
				if h.GetSampleCount() != 1 || h.GetSampleSum() != 0.003 {
					t.Errorf("iteration histogram: %d observations summing to %v, want 1 of 0.003 s", h.GetSampleCount(), h.GetSampleSum())
				}
			}
			// Nothing else of the observer's families moved.
			for name := range families {
				if name == c.family || before[name] == nil || c.family == "didnmf_iterations_total" && name == "didnmf_iteration_duration_seconds" {
					continue
				}
				for _, s := range after[name].Metric {
					var labels []string
					for _, l := range s.Label {
						labels = append(labels, l.GetName(), l.GetValue())
					}
					if value(t, after, name, labels...) != value(t, before, name, labels...) {
						t.Errorf("%s%v moved too", name, labels)
					}
				}
			}
		})
	}
}

// TestFamiliesOfMissingFunctionsAreLeftOut: a Config without a function leaves its
// families out rather than reporting made-up zeros.
func TestFamiliesOfMissingFunctionsAreLeftOut(t *testing.T) {
	fams := scrape(t, New(Config{}).Handler())
	for _, name := range []string{"didnmf_members", "didnmf_jobs", "didnmf_memory_offered_bytes", "didnmf_guard_drops_total", "didnmf_gossip_health_score"} {
		if fams[name] != nil {
			t.Errorf("family %s exposed without its function", name)
		}
	}
	for _, p := range []string{"actor", "data"} {
		value(t, fams, "didnmf_sent_bytes_total", "plane", p)
	}
	for _, s := range fams["didnmf_sent_bytes_total"].Metric {
		if matches(s, []string{"plane", "gossip"}) {
			t.Error("gossip bytes exposed without GossipBytes")
		}
	}
}

// TestRegistriesAreTheNodes': two nodes' metrics in one process keep apart (no global
// registry).
func TestRegistriesAreTheNodes(t *testing.T) {
	a, b := New(Config{}), New(Config{})
	a.IterationDone(time.Millisecond)
	if got := value(t, scrape(t, b.Handler()), "didnmf_iterations_total"); got != 0 {
		t.Fatalf("b counted a's iteration: %v", got)
	}
	if got := value(t, scrape(t, a.Handler()), "didnmf_iterations_total"); got != 1 {
		t.Fatalf("a's iterations %v, want 1", got)
	}
}
