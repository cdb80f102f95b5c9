package metrics

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/didnmf/didnmf/internal/actors"
)

// stateCollector reads the node's state when it is scraped: members and jobs by state,
// memory, the planes' bytes, the guard's drops, the gossip's health. Nothing is read between
// scrapes.
type stateCollector struct {
	cfg Config
	m   *Metrics

	members, jobs            *prometheus.Desc
	offered, reserved        *prometheus.Desc
	sent, received           *prometheus.Desc
	drops                    *prometheus.Desc
	health                   *prometheus.Desc
	memberStates, jobsStates []string
}

func newStateCollector(cfg Config, m *Metrics) *stateCollector {
	return &stateCollector{cfg: cfg, m: m,
		members: prometheus.NewDesc("didnmf_members", "Members this node's gossip knows, by state.", []string{"state"}, nil),
		jobs: prometheus.NewDesc("didnmf_jobs", "Live jobs coordinated on this node, by state (placing, running, recovering, paused).",
			[]string{"state"}, nil),
		offered: prometheus.NewDesc("didnmf_memory_offered_bytes", "Bytes of job data the node offers (0: no limit).", nil, nil),
		reserved: prometheus.NewDesc("didnmf_memory_reserved_bytes", "Bytes of job data the shards placed on the node reserve.",
			nil, nil),
		sent: prometheus.NewDesc("didnmf_sent_bytes_total", "Bytes the node wrote on its connections, by plane (actor remote, data plane, gossip port).",
			[]string{"plane"}, nil),
		received: prometheus.NewDesc("didnmf_received_bytes_total", "Bytes the node read on its connections, by plane (actor remote, data plane, gossip port).",
			[]string{"plane"}, nil),
		drops: prometheus.NewDesc("didnmf_guard_drops_total", "Messages and connections from the network the node dropped, by cause.",
			[]string{"cause"}, nil),
		health: prometheus.NewDesc("didnmf_gossip_health_score",
			"Memberlist's awareness score of this node: 0 when it answers probes in time, higher after it was slow to (its view of others may be wrong).",
			nil, nil),
		memberStates: append(slices.Clone(MemberStates), other),
		jobsStates:   append(slices.Clone(JobStates), other),
	}
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.members, c.jobs, c.offered, c.reserved, c.sent, c.received, c.drops, c.health} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	if f := c.cfg.Members; f != nil {
		byState(ch, c.members, c.memberStates, f())
	}
	if f := c.cfg.Jobs; f != nil {
		byState(ch, c.jobs, c.jobsStates, f())
	}
	if f := c.cfg.Memory; f != nil {
		offered, reserved := f()
		ch <- prometheus.MustNewConstMetric(c.offered, prometheus.GaugeValue, float64(offered))
		ch <- prometheus.MustNewConstMetric(c.reserved, prometheus.GaugeValue, float64(reserved))
	}
	var gossipSent, gossipReceived int64
	if f := c.cfg.GossipBytes; f != nil {
		gossipSent, gossipReceived = f()
	}
	for _, p := range []actors.Plane{actors.PlaneActor, actors.PlaneData} {
		ch <- prometheus.MustNewConstMetric(c.sent, prometheus.CounterValue, float64(c.m.sent[p].Load()), p.String())
		ch <- prometheus.MustNewConstMetric(c.received, prometheus.CounterValue, float64(c.m.received[p].Load()), p.String())
	}
	if c.cfg.GossipBytes != nil {
		ch <- prometheus.MustNewConstMetric(c.sent, prometheus.CounterValue, float64(gossipSent), "gossip")
		ch <- prometheus.MustNewConstMetric(c.received, prometheus.CounterValue, float64(gossipReceived), "gossip")
	}
	if f := c.cfg.Drops; f != nil {
		byClass := make(map[string]int64, len(actors.DropClasses))
		for _, class := range actors.DropClasses {
			byClass[class] = 0
		}
		for cause, n := range f() {
			class := actors.DropClass(cause)
			if _, ok := byClass[class]; !ok {
				class = other
			}
			byClass[class] += n
		}
		if _, ok := byClass[other]; !ok {
			byClass[other] = 0
		}
		for class, n := range byClass {
			ch <- prometheus.MustNewConstMetric(c.drops, prometheus.CounterValue, float64(n), class)
		}
	}
	if f := c.cfg.GossipHealth; f != nil {
		ch <- prometheus.MustNewConstMetric(c.health, prometheus.GaugeValue, float64(f()))
	}
}

// byState sends one gauge of desc for each state of states (0 for those not in counts), the
// counts of states not among them summed under "other" (the last of states).
func byState(ch chan<- prometheus.Metric, desc *prometheus.Desc, states []string, counts map[string]int) {
	values := make([]float64, len(states))
	for state, n := range counts {
		i := slices.Index(states, state)
		if i < 0 {
			i = len(states) - 1
		}
		values[i] += float64(n)
	}
	for i, s := range states {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, values[i], s)
	}
}

// errorLog passes promhttp's errors to a logger.
type errorLog struct{ l *slog.Logger }

func (e errorLog) Println(v ...any) { e.l.Error("metrics: " + fmt.Sprint(v...)) }
