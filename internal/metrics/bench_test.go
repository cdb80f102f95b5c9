package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/actors"
)

// BenchmarkJobIteration measures the wall time of a small job's iterations on two
// in-process nodes (4 shards, 200 iterations a job, so that an iteration is an allreduce over
// loopback and little compute: where an observer's cost would show most), without an
// Observer and with a Metrics as the nodes' Observer, gathered once a job (as a scrape would,
// far less often). Run it with -count to compare the medians of ns/iteration:
//
//	go test -run '^$' -bench BenchmarkJobIteration -count 10 ./internal/metrics
func BenchmarkJobIteration(b *testing.B) {
	const iterations = 200
	for _, c := range []struct {
		name string
		obs  func() *Metrics
	}{
		{"observer=none", func() *Metrics { return nil }},
		{"observer=metrics", func() *Metrics { return New(Config{}) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			m := c.obs()
			cfg := actors.NodeConfig{Threads: 2, Memory: 1 << 30}
			if m != nil {
				cfg.Observer = m
			}
			lc, err := actors.StartLocalCluster(2, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer lc.Close()
			cl := actors.NewClient(lc.Nodes[0].System(), actors.Timeouts{})
			defer cl.Close()
			spec := jobSpec(lc.Addresses(), 4, iterations, 0)
			var iterSeconds float64 // the iterations' own time, as the jobs' results give it
			var iterCount int
			run := func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				job, err := cl.Submit(ctx, "", spec)
				if err != nil {
					b.Fatal(err)
				}
				res, err := job.Wait(ctx)
				if err != nil {
					b.Fatal(err)
				}
				for _, s := range res.IterSeconds {
					iterSeconds += s
				}
				iterCount += len(res.IterSeconds)
			}
			run() // warm up: connections, data plane links
			iterSeconds, iterCount = 0, 0
			began := time.Now()
			for b.Loop() {
				run()
				if m != nil {
					if _, err := m.Registry().Gather(); err != nil {
						b.Fatal(err)
					}
				}
			}
			// ns/job-iteration: a job's wall time (submission to result) over its iterations;
			// ns/iteration: the iterations' own time, as the coordinator measured them.
			b.ReportMetric(float64(time.Since(began).Nanoseconds())/float64(b.N*iterations), "ns/job-iteration")
			b.ReportMetric(iterSeconds*1e9/float64(iterCount), "ns/iteration")
		})
	}
}
