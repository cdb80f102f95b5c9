package metrics

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/actors"
)

// BenchmarkJobIteration measures the time of a small job's iterations on two in-process
// nodes (4 shards, 200 iterations a job, so that an iteration is an allreduce over loopback
// and little compute: where an observer's cost would show most) without an Observer and with
// a Metrics as the nodes' Observer (gathered after each job, as a scrape would, far less
// often). The two clusters run their jobs in turn (each first every other time), so that a machine shared with other work
// slows both alike; it reports the median over the jobs of each one's mean iteration time, as
// the coordinator measured it (ns/iteration-none, ns/iteration-metrics), and their ratio:
//
//	go test -run '^$' -bench BenchmarkJobIteration -benchtime 20x -count 5 ./internal/metrics
func BenchmarkJobIteration(b *testing.B) {
	const iterations = 200
	type side struct {
		m    *Metrics
		cl   *actors.Client
		addr []string
		per  []float64 // each job's mean iteration time, ns
	}
	start := func(m *Metrics) *side {
		cfg := actors.NodeConfig{Threads: 2, Memory: 1 << 30}
		if m != nil {
			cfg.Observer = m
		}
		lc, err := actors.StartLocalCluster(2, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(lc.Close)
		cl := actors.NewClient(lc.Nodes[0].System(), actors.Timeouts{})
		b.Cleanup(cl.Close)
		return &side{m: m, cl: cl, addr: lc.Addresses()}
	}
	run := func(s *side) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		job, err := s.cl.Submit(ctx, "", jobSpec(s.addr, 4, iterations, 0))
		if err != nil {
			b.Fatal(err)
		}
		res, err := job.Wait(ctx)
		if err != nil {
			b.Fatal(err)
		}
		sum := 0.0
		for _, sec := range res.IterSeconds {
			sum += sec
		}
		s.per = append(s.per, sum*1e9/float64(len(res.IterSeconds)))
		if s.m != nil {
			if _, err := s.m.Registry().Gather(); err != nil {
				b.Fatal(err)
			}
		}
	}
	none, with := start(nil), start(New(Config{}))
	run(none) // warm up: connections, data plane links
	run(with)
	none.per, with.per = nil, nil
	for i := 0; b.Loop(); i++ {
		first, second := none, with
		if i%2 == 1 {
			first, second = with, none // neither always runs after the other
		}
		run(first)
		run(second)
	}
	median := func(v []float64) float64 {
		slices.Sort(v)
		return v[len(v)/2]
	}
	n, w := median(none.per), median(with.per)
	b.ReportMetric(n, "ns/iteration-none")
	b.ReportMetric(w, "ns/iteration-metrics")
	b.ReportMetric(w/n, "metrics/none")
}
