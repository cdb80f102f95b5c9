package jobspec

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/usererr"
)

// good returns a valid spec of a distributed job.
func good(t *testing.T) *Spec {
	t.Helper()
	return &Spec{Inputs: []string{"/data/x.npy", "synthetic:m=5,n=9,k=2,seed=3"}, Algo: kernels.DID, Rank: 3, Shards: 4, Seed: 7,
		Init: kernels.InitNNDSVD, Form: kernels.FormGram, Storage: kernels.StorageFloat32,
		Layout: matio.AutoFor(kernels.DID, matio.LayoutAuto), Stop: kernels.StopRule{Tol: 1e-5, MaxIter: 50,
			TimeLimit: 90 * time.Second, StallTol: 1e-4, StallWindow: 5}, Rho: 2, FanIn: 4, CheckpointEvery: -1,
		Ingest: IngestShared, OutShared: "/shared/out", Overwrite: true, Detached: true, Nodes: []string{"10.0.0.1:7000"}}
}

// testFlag names a field as the CLI's flags do (internal/cli tests its own mapping), to show
// that every field a message names is a {field} a front end may rename.
func testFlag(field string) string {
	switch field {
	case "algorithm":
		return "--algo"
	case "missing":
		return "--missing nan"
	}
	return "--" + strings.ReplaceAll(field, "_", "-")
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name      string
		edit      func(*Spec)
		field     string
		wire, cli string // "" for both: no error
	}{
		{"good", func(*Spec) {}, "", "", ""},
		{"no input", func(s *Spec) { s.Inputs = nil }, "input", "input: no input given", "--input: no input given"},
		{"no algorithm", func(s *Spec) { s.Algo = "svd" }, "algorithm", "algorithm: unknown algorithm", "--algo: unknown algorithm"},
		{"rank 0", func(s *Spec) { s.Rank = 0 }, "rank", "rank must be >= 1, got 0", "--rank must be >= 1, got 0"},
		{"rank -2", func(s *Spec) { s.Rank = -2 }, "rank", "rank must be >= 1, got -2", "--rank must be >= 1, got -2"},
		{"shards 0", func(s *Spec) { s.Shards = 0 }, "shards", "shards must be >= 1, got 0", "--shards must be >= 1, got 0"},
		{"shards on hals", func(s *Spec) { s.Algo = kernels.HALS; s.Layout = matio.LayoutAuto }, "shards",
			"algorithm hals runs on one shard; shards 4 needs a distributed algorithm", "--algo hals runs on one shard; --shards 4 needs"},
		{"unknown init", func(s *Spec) { s.Init = "svd" }, "init", `init: unknown init "svd"`, `--init: unknown init "svd"`},
		{"basis without custom", func(s *Spec) { s.InitBasis = "/b.npy" }, "init",
			"init_basis and init_coef need init custom", "--init-basis and --init-coef need --init custom"},
		{"custom without coef", func(s *Spec) { s.Init, s.InitBasis = kernels.InitCustom, "/b.npy" }, "init",
			"init custom needs both init_basis and init_coef", "--init custom needs both --init-basis and --init-coef"},
		{"empty ingest", func(s *Spec) { s.Ingest = "" }, "ingest", `ingest "": want shared or stream`, `--ingest "": want shared or stream`},
		{"bad ingest", func(s *Spec) { s.Ingest = "{rank}" }, "ingest", `ingest "{rank}": want`, `--ingest "{rank}": want`},
		{"storage as-is", func(s *Spec) { s.Storage = kernels.StorageAsIs }, "storage", "storage: unknown storage", "--storage: unknown storage"},
		{"form 9", func(s *Spec) { s.Form = 9 }, "form", "form: unknown kernel form 9", "--form: unknown kernel form 9"},
		{"layout before AutoFor", func(s *Spec) { s.Layout = matio.LayoutAuto }, "layout", "layout auto: want", "--layout auto: want"},
		{"rho 0", func(s *Spec) { s.Rho = 0 }, "rho", "rho must be a positive number, got 0", "--rho must be a positive number, got 0"},
		{"rho NaN", func(s *Spec) { s.Rho = math.NaN() }, "rho", "rho must be a positive number, got NaN", "--rho must be"},
		{"rho Inf", func(s *Spec) { s.Rho = math.Inf(1) }, "rho", "rho must be a positive number, got +Inf", "--rho must be"},
		{"tol negative", func(s *Spec) { s.Stop.Tol = -1 }, "tol", "tol must be a finite number >= 0, got -1", "--tol must be a finite number >= 0, got -1"},
		{"max-iter 0", func(s *Spec) { s.Stop.MaxIter = 0 }, "max_iter", "max_iter must be >= 1, got 0", "--max-iter must be >= 1, got 0"},
		{"time limit negative", func(s *Spec) { s.Stop.TimeLimit = -time.Second }, "time_limit", "time_limit must be >= 0, got -1s", "--time-limit must be >= 0, got -1s"},
		{"stall tol 1", func(s *Spec) { s.Stop.StallTol = 1 }, "stall_tol", "stall_tol must be in [0, 1), got 1", "--stall-tol must be in [0, 1), got 1"},
		{"fan-in 0", func(s *Spec) { s.FanIn = 0 }, "fan-in", "fan-in must be a power of two >= 2, got 0", "--fan-in must be a power of two >= 2, got 0"},
		{"fan-in 3", func(s *Spec) { s.FanIn = 3 }, "fan-in", "fan-in must be a power of two >= 2, got 3", "--fan-in must be"},
		{"fan-in 1", func(s *Spec) { s.FanIn = 1 }, "fan-in", "got 1", "--fan-in must be"},
		{"fan-in 2^17", func(s *Spec) { s.FanIn = 1 << 17 }, "fan-in", "got 131072", "--fan-in must be"},
		{"fan-in 2", func(s *Spec) { s.FanIn = 2 }, "", "", ""},
		{"checkpoint 0", func(s *Spec) { s.CheckpointEvery = 0 }, "", "", ""},
		{"transform", func(s *Spec) {
			s.Algo, s.Init, s.InitBasis, s.Stop, s.Layout = kernels.Transform, kernels.InitCustom, "/b.npy", kernels.StopRule{MaxIter: 1}, matio.LayoutAuto
		}, "", "", ""},
		{"transform without basis", func(s *Spec) {
			s.Algo, s.Stop, s.Layout = kernels.Transform, kernels.StopRule{MaxIter: 1}, matio.LayoutAuto
		},
			"init_basis", "a transform needs the basis: init custom with init_basis", "a transform needs the basis: --init custom with --init-basis"},
		{"transform of many passes", func(s *Spec) {
			s.Algo, s.Init, s.InitBasis, s.Layout = kernels.Transform, kernels.InitCustom, "/b.npy", matio.LayoutAuto
		}, "max_iter", "max_iter must be 1, got 50", "--max-iter must be 1, got 50"},
		{"kl on did", func(s *Spec) { s.Loss = kernels.LossKL }, "loss", "loss kl needs algorithm mu (multiplicative updates); did, dbcd",
			"--loss kl needs --algo mu (multiplicative updates); did, dbcd"},
		{"beta NaN", func(s *Spec) { s.Algo, s.Loss, s.Layout = kernels.MU, kernels.BetaLoss(math.NaN()), matio.LayoutAuto }, "loss",
			"loss: beta must be a finite number, got NaN", "--loss: beta must be a finite number"},
		{"penalties", func(s *Spec) { s.AlphaCoef, s.AlphaBasis, s.L1Ratio = 0.1, 0.2, 0.5 }, "", "", ""},
		{"alpha coef negative", func(s *Spec) { s.AlphaCoef = -1 }, "alpha_coef", "alpha_coef must be a finite number >= 0, got -1",
			"--alpha-coef must be a finite number >= 0, got -1"},
		{"alpha basis Inf", func(s *Spec) { s.AlphaBasis = math.Inf(1) }, "alpha_basis", "alpha_basis must be a finite number >= 0, got +Inf",
			"--alpha-basis must be"},
		{"alpha coef NaN", func(s *Spec) { s.AlphaCoef = math.NaN() }, "alpha_coef", "got NaN", "--alpha-coef must be"},
		{"l1 ratio 2", func(s *Spec) { s.L1Ratio = 2 }, "l1_ratio", "l1_ratio must be a number between 0 and 1, got 2",
			"--l1-ratio must be a number between 0 and 1, got 2"},
		{"l1 ratio without alpha", func(s *Spec) { s.L1Ratio = 1 }, "", "", ""},
		{"penalties on dadmm", func(s *Spec) { s.Algo, s.AlphaCoef = kernels.DADMM, 0.1 }, "algorithm",
			"algorithm dadmm has no L1/L2 penalties (alpha_coef 0.1, alpha_basis 0): the algorithms that have them are did, dbcd, bcd, hals, mu, anls, hpc-anls",
			"--algo dadmm has no L1/L2 penalties (--alpha-coef 0.1, --alpha-basis 0)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := good(t)
			c.edit(s)
			err := s.Check()
			if c.wire == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var fe *usererr.Error
			if !errors.As(err, &fe) || !errors.Is(err, usererr.ErrUser) {
				t.Fatalf("got %v (%T), want a *usererr.Error", err, err)
			}
			if flags := fe.Text(testFlag); fe.Field != c.field || !strings.Contains(fe.Error(), c.wire) || !strings.Contains(flags, c.cli) {
				t.Errorf("got field %q, %q, flags %q; want field %q, %q, flags %q", fe.Field, fe.Error(), flags, c.field, c.wire, c.cli)
			}
		})
	}
	var nilSpec *Spec
	if err := nilSpec.Check(); err == nil {
		t.Error("nil spec accepted")
	}
}

func TestWireRoundTrip(t *testing.T) {
	streamed := good(t)
	streamed.Ingest, streamed.Samples, streamed.Features, streamed.StoredEntries, streamed.NaturalLayout = IngestStream, 9, 5, 12, matio.LayoutSparse
	custom := good(t)
	custom.Init, custom.InitBasis, custom.InitCoef, custom.Nodes, custom.Layout = kernels.InitCustom, "/b.npy", "/c.npy", nil, matio.LayoutDense
	penalized := good(t)
	penalized.AlphaCoef, penalized.AlphaBasis, penalized.L1Ratio = 0.25, 1.5, 0.3
	kl, beta := good(t), good(t)
	kl.Algo, kl.Loss, kl.Layout = kernels.MU, kernels.LossKL, matio.AutoFor(kernels.MU, matio.LayoutAuto)
	beta.Algo, beta.Loss, beta.Layout = kernels.MU, kernels.BetaLoss(1.5), matio.AutoFor(kernels.MU, matio.LayoutAuto)
	for name, s := range map[string]*Spec{"shared": good(t), "streamed": streamed, "custom": custom, "penalized": penalized, "kl": kl, "beta 1.5": beta} {
		t.Run(name, func(t *testing.T) {
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
			got, err := FromWire(s.Wire())
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, s) {
				t.Errorf("FromWire(Wire(s)) = %+v, want %+v", got, s)
			}
		})
	}
}

// TestFromWireDefaults checks the defaults a minimal wire spec gets.
func TestFromWireDefaults(t *testing.T) {
	s, err := FromWire(&messages.JobSpec{Inputs: []string{"/x.npy"}, Algorithm: messages.Algorithm_ALGORITHM_DADMM, Rank: 2, Shards: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := &Spec{Inputs: []string{"/x.npy"}, Algo: kernels.DADMM, Rank: 2, Shards: 3, Init: kernels.InitRandom, Form: kernels.FormAuto,
		Storage: kernels.StorageAuto, Layout: matio.AutoFor(kernels.DADMM, matio.LayoutAuto), Stop: kernels.DefaultStopRule,
		Rho: 1, FanIn: DefaultFanIn, Ingest: IngestShared}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("got %+v, want %+v", s, want)
	}
}

// TestFromWireHostile feeds FromWire specs no honest client sends.
func TestFromWireHostile(t *testing.T) {
	base := func() *messages.JobSpec {
		return &messages.JobSpec{Inputs: []string{"/x.npy"}, Algorithm: messages.Algorithm_ALGORITHM_DID, Rank: 2, Shards: 2}
	}
	cases := []struct {
		name string
		edit func(*messages.JobSpec) *messages.JobSpec
		want string
	}{
		{"nil", func(*messages.JobSpec) *messages.JobSpec { return nil }, "no job spec"},
		{"no inputs", func(s *messages.JobSpec) *messages.JobSpec { s.Inputs = nil; return s }, "input: no input given"},
		{"no algorithm", func(s *messages.JobSpec) *messages.JobSpec { s.Algorithm = 0; return s }, "algorithm: no algorithm given"},
		{"unknown algorithm", func(s *messages.JobSpec) *messages.JobSpec { s.Algorithm = 99; return s }, "algorithm: unknown value 99 on the wire (known: did, dbcd, bcd, hals, mu, anls, admm, dadmm, hpc-anls, transform)"},
		{"rank 0", func(s *messages.JobSpec) *messages.JobSpec { s.Rank = 0; return s }, "rank must be >= 1, got 0"},
		{"rank 2^40", func(s *messages.JobSpec) *messages.JobSpec { s.Rank = 1 << 40; return s }, "out of range"},
		{"shards -1", func(s *messages.JobSpec) *messages.JobSpec { s.Shards = -1; return s }, "shards must be >= 1, got -1"},
		{"fan-in 3", func(s *messages.JobSpec) *messages.JobSpec { s.FanIn = 3; return s }, "fan-in must be a power of two >= 2, got 3"},
		{"fan-in -8", func(s *messages.JobSpec) *messages.JobSpec { s.FanIn = -8; return s }, "fan-in must be a power of two"},
		{"fan-in 2^62", func(s *messages.JobSpec) *messages.JobSpec { s.FanIn = 1 << 62; return s }, "out of range"},
		{"NaN rho", func(s *messages.JobSpec) *messages.JobSpec { s.Rho = math.NaN(); return s }, "rho must be a positive number, got NaN"},
		{"negative rho", func(s *messages.JobSpec) *messages.JobSpec { s.Rho = -1; return s }, "rho must be a positive number, got -1"},
		{"infinite rho", func(s *messages.JobSpec) *messages.JobSpec { s.Rho = math.Inf(1); return s }, "rho must be a positive number"},
		{"huge max-iter", func(s *messages.JobSpec) *messages.JobSpec {
			s.Stop = &messages.StopRule{MaxIter: math.MaxInt64}
			return s
		}, "max-iter 9223372036854775807 or stall window 0 out of range"},
		{"negative stall window", func(s *messages.JobSpec) *messages.JobSpec {
			s.Stop = &messages.StopRule{MaxIter: 5, StallWindow: -1}
			return s
		}, "out of range"},
		{"NaN time limit", func(s *messages.JobSpec) *messages.JobSpec {
			s.Stop = &messages.StopRule{MaxIter: 5, TimeLimitSeconds: math.NaN()}
			return s
		}, "time limit must be >= 0 seconds"},
		{"huge time limit", func(s *messages.JobSpec) *messages.JobSpec {
			s.Stop = &messages.StopRule{MaxIter: 5, TimeLimitSeconds: 1e300}
			return s
		}, "time limit must be >= 0 seconds"},
		{"NaN tol", func(s *messages.JobSpec) *messages.JobSpec {
			s.Stop = &messages.StopRule{MaxIter: 5, Tol: math.NaN()}
			return s
		}, "tol must be a finite number >= 0, got NaN"},
		{"max-iter 0", func(s *messages.JobSpec) *messages.JobSpec { s.Stop = &messages.StopRule{}; return s }, "max_iter must be >= 1, got 0"},
		{"unknown init", func(s *messages.JobSpec) *messages.JobSpec { s.Init = 99; return s }, "init: unknown value 99 on the wire (known: random, nndsvd, nndsvda, kmeans, custom)"},
		{"custom without files", func(s *messages.JobSpec) *messages.JobSpec { s.Init = messages.Init_INIT_CUSTOM; return s }, "init custom needs both"},
		{"files without custom", func(s *messages.JobSpec) *messages.JobSpec { s.InitCoef = "/c.npy"; return s }, "need init custom"},
		{"unknown ingest", func(s *messages.JobSpec) *messages.JobSpec { s.Ingest = 7; return s }, "ingest: unknown value 7 on the wire (known: shared, stream)"},
		{"stream without natural layout", func(s *messages.JobSpec) *messages.JobSpec { s.Ingest = messages.Ingest_INGEST_STREAM; return s },
			"streamed job: natural_layout auto (want dense or sparse)"},
		{"unknown natural layout", func(s *messages.JobSpec) *messages.JobSpec { s.NaturalLayout = -1; return s }, "natural_layout: unknown value -1 on the wire"},
		{"unknown form", func(s *messages.JobSpec) *messages.JobSpec { s.Form = 3; return s }, "form: unknown value 3 on the wire (known: auto, residual, gram)"},
		{"unknown storage", func(s *messages.JobSpec) *messages.JobSpec { s.Storage = 3; return s }, "storage: unknown value 3 on the wire (known: auto, float64, float32)"},
		{"unknown layout", func(s *messages.JobSpec) *messages.JobSpec { s.Layout = 3; return s }, "layout: unknown value 3 on the wire (known: auto, dense, sparse)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := FromWire(c.edit(base()))
			if err == nil {
				t.Fatalf("accepted: %+v", s)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %q, want %q", err, c.want)
			}
		})
	}
}
