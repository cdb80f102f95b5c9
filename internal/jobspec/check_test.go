package jobspec

import (
	"errors"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/usererr"
)

// TestCheckOn is the check of a spec against its data and where it runs, rule by rule: each
// case names the field it refuses and words of the message (the value included).
func TestCheckOn(t *testing.T) {
	local := func(s *Spec) {
		s.Ingest, s.OutShared, s.Detached, s.Overwrite, s.Nodes = IngestShared, "", false, false, nil
	}
	data := &Shape{Name: "x.npy", Samples: 20, Features: 6}
	shape := func(r, c int) *[2]int { return &[2]int{r, c} }
	cases := []struct {
		name  string
		edit  func(*Spec)
		d     *Shape
		c     Cluster
		field string // "": accepted
		want  string
	}{
		{"good, local", local, data, Cluster{Memory: 1 << 40}, "", ""},
		{"good, submitted, no data", func(*Spec) {}, nil, Cluster{Where: Submitted}, "", ""},
		{"good, on a node", func(*Spec) {}, data, Cluster{Where: OnNode, Members: []string{"10.0.0.1:7000"}}, "", ""},
		{"spec rule first", func(s *Spec) { local(s); s.FanIn = 3 }, data, Cluster{}, "fan-in", "fan-in must be a power of two >= 2, got 3"},
		{"rank 0 without data", func(s *Spec) { s.Rank = 0 }, nil, Cluster{Where: Submitted}, "rank", "rank must be >= 1, got 0"},
		{"rank 0 with data: the range", func(s *Spec) { local(s); s.Rank = 0 }, data, Cluster{}, "rank",
			"rank: rank 0 out of range"},
		{"rank above min(M, N)", func(s *Spec) { local(s); s.Rank = 7 }, data, Cluster{}, "rank", "for x.npy (20 samples x 6 features)"},
		{"transform: K <= M is enough", func(s *Spec) {
			local(s)
			s.Algo, s.Init, s.InitBasis, s.Stop, s.Layout, s.Shards, s.Rank = kernels.Transform, kernels.InitCustom, "/b.npy", kernels.StopRule{MaxIter: 1}, matio.AutoFor(kernels.Transform, matio.LayoutAuto), 1, 5
		}, &Shape{Name: "few.npy", Samples: 2, Features: 6}, Cluster{}, "", ""},
		{"transform: K > M", func(s *Spec) {
			local(s)
			s.Algo, s.Init, s.InitBasis, s.Stop, s.Layout, s.Shards, s.Rank = kernels.Transform, kernels.InitCustom, "/b.npy", kernels.StopRule{MaxIter: 1}, matio.AutoFor(kernels.Transform, matio.LayoutAuto), 1, 7
		}, data, Cluster{}, "rank", "1 <= K <= M = 6"},
		{"shards above samples", func(s *Spec) { local(s); s.Shards = 4 }, &Shape{Name: "x.npy", Samples: 3, Features: 6}, Cluster{}, "shards",
			"shards 4 is more than the 3 samples of x.npy"},
		{"basis of the wrong shape", func(s *Spec) {
			local(s)
			s.Init, s.InitBasis, s.InitCoef = kernels.InitCustom, "/b.npy", "/c.npy"
		}, &Shape{Name: "x.npy", Samples: 20, Features: 6, InitBasis: shape(5, 3), InitCoef: shape(20, 3)}, Cluster{}, "init_basis",
			"init_basis /b.npy: shape (5, 3), but x.npy has 6 features and rank is 3: want features x K = (6, 3)"},
		{"coef of the wrong shape", func(s *Spec) {
			local(s)
			s.Init, s.InitBasis, s.InitCoef = kernels.InitCustom, "/b.npy", "/c.npy"
		}, &Shape{Name: "x.npy", Samples: 20, Features: 6, InitBasis: shape(6, 3), InitCoef: shape(20, 2)}, Cluster{}, "init_coef",
			"init_coef /c.npy: shape (20, 2), but x.npy has 20 samples and rank is 3: want samples x K = (20, 3)"},
		{"memory", local, data, Cluster{Memory: 1000}, "input", "x.npy (20 samples x 6 features, rank 3) needs about 264 KiB of memory for its data and factors; this machine has 1000 B available"},
		{"ingest in process", func(s *Spec) { local(s); s.Ingest = IngestStream }, data, Cluster{}, "ingest", "ingest stream is for jobs on a cluster"},
		{"out_shared in process", func(s *Spec) { local(s); s.OutShared = "/o" }, data, Cluster{}, "out_shared", "out_shared /o is for jobs on a cluster"},
		{"detached in process", func(s *Spec) { local(s); s.Detached = true }, data, Cluster{}, "detached", "detached is for jobs on a cluster"},
		{"detached without out_shared", func(s *Spec) { s.OutShared = "" }, nil, Cluster{Where: Submitted}, "detached", "detached needs out_shared"},
		{"relative out_shared", func(s *Spec) { s.OutShared = "out" }, nil, Cluster{Where: Submitted}, "out_shared", "out_shared out: give an absolute path"},
		{"relative input, shared", func(s *Spec) { s.Inputs = []string{"x.npy"} }, nil, Cluster{Where: Submitted}, "input",
			"input x.npy: give an absolute path with ingest shared"},
		{"relative input, streamed", func(s *Spec) { s.Inputs, s.Ingest = []string{"x.npy"}, IngestStream }, nil, Cluster{Where: Submitted}, "", ""},
		{"relative input on a node", func(s *Spec) { s.Inputs = []string{"x.npy"} }, data, Cluster{Where: OnNode}, "", ""},
		{"relative basis, shared", func(s *Spec) { s.Init, s.InitBasis, s.InitCoef = kernels.InitCustom, "b.npy", "/c.npy" }, nil, Cluster{Where: Submitted},
			"init_basis", "init_basis b.npy: give an absolute path"},
		{"node not a member", func(*Spec) {}, data, Cluster{Where: OnNode, Members: []string{"10.0.0.2:7000"}}, "nodes",
			"nodes: 10.0.0.1:7000 is not a member of the cluster"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := good(t)
			c.edit(s)
			err := s.CheckOn(c.d, c.c)
			if c.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ue *usererr.Error
			if !errors.As(err, &ue) || !errors.Is(err, usererr.ErrUser) {
				t.Fatalf("got %v (%T), want a *usererr.Error", err, err)
			}
			if ue.Field != c.field || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got field %q, %q; want field %q, %q", ue.Field, err, c.field, c.want)
			}
		})
	}
}

// TestFootprint: the shards' estimates sum to the job's, each as ShardFootprint gives it.
func TestFootprint(t *testing.T) {
	s := good(t)
	d := &Shape{Samples: 10, Features: 4}
	got := s.Footprint(d)
	if len(got) != s.Shards {
		t.Fatalf("%d estimates for %d shards", len(got), s.Shards)
	}
	cols := kernels.ColumnRanges(10, s.Shards)
	for i, n := range got {
		if want := ShardFootprint(4, int64(cols[i+1]-cols[i]), 3, 0, s.Layout); n != want {
			t.Errorf("shard %d: %d, want %d", i, n, want)
		}
	}
}

// TestCheckBeforeData: before the data is read every rule but the rank's applies; the rank
// is checked with the data, which gives its range.
func TestCheckBeforeData(t *testing.T) {
	s := good(t)
	s.Ingest, s.OutShared, s.Detached, s.Nodes, s.Rank = IngestShared, "", false, nil, 0
	if err := s.CheckBeforeData(Cluster{}); err != nil {
		t.Fatalf("rank 0 refused before the data: %v", err)
	}
	if err := s.CheckOn(&Shape{Name: "x", Samples: 9, Features: 5}, Cluster{}); err == nil || !strings.Contains(err.Error(), "rank 0 out of range") {
		t.Errorf("rank 0 with the data: %v, want its range", err)
	}
	s.FanIn = 3 // a rule after the rank's still holds
	if err := s.CheckBeforeData(Cluster{}); err == nil || !strings.Contains(err.Error(), "fan-in must be a power of two >= 2, got 3") {
		t.Errorf("fan-in 3 with rank 0, before the data: %v", err)
	}
	if err := s.CheckOn(&Shape{Name: "x", Samples: 9, Features: 5}, Cluster{}); err == nil || !strings.Contains(err.Error(), "fan-in must be") {
		t.Errorf("fan-in 3 with rank 0, with the data: %v", err)
	}
}

// TestHeldOutFootprint: a test set adds to each shard's estimate the masked copy of the block
// and, for DID without missing values, only the stored held-out entries and a work space
// fixed by M and K (kernels.HeldOutBytes); with missing values every held-out entry (32 bytes
// each, zeros of a sparse block included). So a cross-validated job over a large sparse
// matrix is placed, or refused, for what it holds.
func TestHeldOutFootprint(t *testing.T) {
	s := good(t)
	s.Rank = 30
	d := &Shape{Samples: 200000, Features: 20000, StoredEntries: 80000000}
	plain := s.Footprint(d)
	cols := kernels.ColumnRanges(d.Samples, s.Shards)
	for _, missing := range []bool{false, true} {
		s.TestFraction, s.Missing = 0.1, missing
		held := s.Footprint(d)
		var extra int64
		for i := range held {
			n := int64(cols[i+1] - cols[i])
			x := ShardFootprint(20000, n, 0, d.Density(), s.Layout) - ShardOverhead
			want := int64(32*0.1*20000*float64(n)) + x
			if !missing {
				want = kernels.HeldOutBytes(20000, n, int64(0.02*20000*float64(n)), 30, 0.1) + x
			}
			if got := held[i] - plain[i]; got != want {
				t.Errorf("missing %v, shard %d: a test fraction of 0.1 adds %d bytes, want %d", missing, i, got, want)
			}
			extra += held[i] - plain[i]
		}
		if missing && extra < 12_800_000_000 {
			t.Errorf("10%% of 200,000 x 20,000 held out with missing values adds %d bytes in all, want at least 12.8 GB", extra)
		}
		if !missing && extra > 3_000_000_000 {
			t.Errorf("10%% of 200,000 x 20,000 held out by did adds %d bytes in all, want under 3 GB", extra)
		}
		t.Logf("missing %v: %.2f GB in all", missing, float64(extra)/1e9)
	}
	if got := HeldOutFootprint(kernels.DID, 10, 10, 3, 1, 0, s.Layout, false); got != 0 {
		t.Errorf("no test set: %d bytes, want 0", got)
	}
}

// TestFootprintCountsDenseWorkArrays: the algorithms that keep a dense M x n array per shard
// (the residual of bcd, dbcd and masked hals; dadmm's Y and U) have it in the footprint
// placement reserves, whatever the density of X, and the others do not.
func TestFootprintCountsDenseWorkArrays(t *testing.T) {
	const m, n = 20000, 25000
	d := &Shape{Name: "counts.mtx", Samples: n, Features: m, StoredEntries: m * n / 50} // 2% dense
	for _, tc := range []struct {
		algo   kernels.Algorithm
		masked bool
		extra  int64
	}{
		{kernels.DID, false, 0}, {kernels.DID, true, 0}, {kernels.MU, true, 0}, {kernels.HALS, false, 0},
		{kernels.HALS, true, 8 * m * n}, {kernels.BCD, false, 8 * m * n}, {kernels.BCD, true, 8 * m * n},
		{kernels.DBCD, false, 8 * m * n}, {kernels.DADMM, false, 16 * m * n},
	} {
		s := New([]string{"/counts.mtx"}, tc.algo, 10, 1)
		s.Layout = matio.LayoutSparse
		if tc.masked {
			s.Missing = true
		}
		base := ShardFootprint(m, n, 10, d.Density(), s.Layout) + AccelFootprint(n, 10, s.Accel)
		if got := s.Footprint(d)[0] - base; got != tc.extra {
			t.Errorf("%s (masked %v): %d bytes beyond the block and factors, want %d", tc.algo, tc.masked, got, tc.extra)
		}
	}
}
