package httpapi

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/usererr"
)

// TestDecodeSpecDefaults checks that a spec of input and rank alone is the CLI's job:
// jobspec.New's defaults, the seed in the synthetic input, the layout as didnmf.Open makes
// it.
func TestDecodeSpecDefaults(t *testing.T) {
	got, err := DecodeSpec(strings.NewReader(`{"input": "synthetic:m=50,n=40,k=3", "rank": 3}`))
	if err != nil {
		t.Fatal(err)
	}
	want := jobspec.New([]string{"synthetic:m=50,n=40,k=3,seed=1"}, kernels.DID, 3, 1)
	want.Layout = matio.AutoFor(kernels.DID, matio.LayoutAuto)
	want.TestSeed = 1 // the CLI's --test-seed default (jobspec.New leaves it 0)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", got, want)
	}
}

// TestDecodeSpec checks every key's reading.
func TestDecodeSpec(t *testing.T) {
	tests := []struct {
		name, body string
		check      func(s *jobspec.Spec) bool
	}{
		{"inputs", `{"input": ["/d/a.npy", "/d/b.npy"], "rank": 2}`, func(s *jobspec.Spec) bool {
			return reflect.DeepEqual(s.Inputs, []string{"/d/a.npy", "/d/b.npy"})
		}},
		{"seed seeds synthetic input", `{"input": "synthetic:m=5,n=4,k=2", "rank": 2, "seed": 7}`, func(s *jobspec.Spec) bool {
			return s.Seed == 7 && s.Inputs[0] == "synthetic:m=5,n=4,k=2,seed=7"
		}},
		{"a synthetic input's own seed", `{"input": "synthetic:m=5,n=4,k=2,seed=3", "rank": 2, "seed": 7}`, func(s *jobspec.Spec) bool {
			return s.Inputs[0] == "synthetic:m=5,n=4,k=2,seed=3"
		}},
		{"algorithm and shards", `{"input": "x", "rank": 2, "algorithm": "dbcd", "shards": 4, "fan_in": 2}`, func(s *jobspec.Spec) bool {
			return s.Algo == kernels.DBCD && s.Shards == 4 && s.FanIn == 2
		}},
		{"stop rule", `{"input": "x", "rank": 2, "max_iter": 50, "tol": 1e-4, "time_limit": "90s", "stall_tol": 0.01}`, func(s *jobspec.Spec) bool {
			return s.Stop == kernels.StopRule{MaxIter: 50, Tol: 1e-4, TimeLimit: 90 * time.Second, StallTol: 0.01}
		}},
		{"time limit in seconds", `{"input": "x", "rank": 2, "time_limit": 1.5}`, func(s *jobspec.Spec) bool {
			return s.Stop.TimeLimit == 1500*time.Millisecond
		}},
		{"tol 0 turns the stall rule off", `{"input": "x", "rank": 2, "tol": 0}`, func(s *jobspec.Spec) bool {
			return s.Stop.Tol == 0 && s.Stop.StallTol == 0
		}},
		{"tol 0 with a stall rule given", `{"input": "x", "rank": 2, "tol": 0, "stall_tol": 0.001}`, func(s *jobspec.Spec) bool {
			return s.Stop.StallTol == 0.001
		}},
		{"penalties, alpha_basis same", `{"input": "x", "rank": 2, "alpha_coef": 0.5, "l1_ratio": 0.25}`, func(s *jobspec.Spec) bool {
			return s.AlphaCoef == 0.5 && s.AlphaBasis == 0.5 && s.L1Ratio == 0.25
		}},
		{"alpha_basis of its own", `{"input": "x", "rank": 2, "alpha_coef": 0.5, "alpha_basis": 0}`, func(s *jobspec.Spec) bool {
			return s.AlphaBasis == 0
		}},
		{"loss by name", `{"input": "x", "rank": 2, "algorithm": "mu", "loss": "kl"}`, func(s *jobspec.Spec) bool { return s.Loss == kernels.LossKL }},
		{"loss by beta", `{"input": "x", "rank": 2, "algorithm": "mu", "loss": 1.5}`, func(s *jobspec.Spec) bool { return s.Loss == kernels.BetaLoss(1.5) }},
		{"enums", `{"input": "x", "rank": 2, "form": "gram", "storage": "float32", "layout": "dense", "init": "nndsvd"}`, func(s *jobspec.Spec) bool {
			return s.Form == kernels.FormGram && s.Storage == kernels.StorageFloat32 && s.Layout == matio.LayoutDense && s.Init == kernels.InitNNDSVD
		}},
		{"mask", `{"input": "x", "rank": 2, "missing": true, "test_fraction": 0.1, "test_seed": 9}`, func(s *jobspec.Spec) bool {
			return s.Missing && s.TestFraction == 0.1 && s.TestSeed == 9
		}},
		{"checkpoints", `{"input": "x", "rank": 2, "checkpoint_every": 5}`, func(s *jobspec.Spec) bool { return s.CheckpointEvery == 5 }},
		{"checkpoints auto", `{"input": "x", "rank": 2, "checkpoint_every": "auto"}`, func(s *jobspec.Spec) bool { return s.CheckpointEvery == -1 }},
		{"out_shared runs detached", `{"input": "/d/x.npy", "rank": 2, "out_shared": "/shared/out", "overwrite": true}`, func(s *jobspec.Spec) bool {
			return s.OutShared == "/shared/out" && s.Overwrite && s.Detached
		}},
		{"nodes", `{"input": "x", "rank": 2, "nodes": ["10.0.0.1:9000"]}`, func(s *jobspec.Spec) bool {
			return reflect.DeepEqual(s.Nodes, []string{"10.0.0.1:9000"})
		}},
		{"ingest is shared", `{"input": "x", "rank": 2}`, func(s *jobspec.Spec) bool { return s.Ingest == jobspec.IngestShared }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := DecodeSpec(strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(s) {
				t.Fatalf("spec %+v", s)
			}
		})
	}
}

// TestDecodeSpecErrors checks that every error is the user's, names the key at fault and
// reads with the JSON keys.
func TestDecodeSpecErrors(t *testing.T) {
	tests := []struct{ body, field, msg string }{
		{``, "", "not complete JSON"},
		{`[1]`, "", "must be a JSON object"},
		{`{"input": "x", "rank": 2} {}`, "", "nothing after it"},
		{`{"input": "x", "rank": 2`, "", "not complete JSON"},
		{`{"rank": 2}`, "input", "input is required"},
		{`{"input": "x"}`, "rank", "rank is required"},
		{`{"input": "x", "rank": 2, "Rank": 3}`, "Rank", `unknown key "Rank"`},
		{`{"input": "x", "rank": 2, "rank": 3}`, "rank", "rank given twice"},
		{`{"input": "x", "rank": "2"}`, "rank", `rank must be a number, got "2" (a string)`},
		{`{"input": "x", "rank": 2.5}`, "rank", "rank must be an integer"},
		{`{"input": "x", "rank": 1e30}`, "rank", "rank must be an integer"},
		{`{"input": "x", "rank": 0}`, "rank", "rank must be >= 1"},
		{`{"input": "x", "rank": null}`, "rank", "rank must be a number, got null"},
		{`{"input": [], "rank": 2}`, "input", "input must hold 1 to"},
		{`{"input": [""], "rank": 2}`, "input", "input[0] is empty"},
		{`{"input": 5, "rank": 2}`, "input", "input must be a string or a list"},
		{`{"input": "x", "rank": 2, "seed": -1}`, "seed", "seed must be an integer between 0"},
		{`{"input": "x", "rank": 2, "tol": -1}`, "tol", "tol must be a finite number >= 0"},
		{`{"input": "x", "rank": 2, "tol": 1e400}`, "tol", "tol must be a finite number"},
		{`{"input": "x", "rank": 2, "max_iter": 0}`, "max_iter", "max_iter must be >= 1"},
		{`{"input": "x", "rank": 2, "stall_tol": 1}`, "stall_tol", "stall_tol must be in [0, 1)"},
		{`{"input": "x", "rank": 2, "time_limit": "soon"}`, "time_limit", "not a duration"},
		{`{"input": "x", "rank": 2, "time_limit": -1}`, "time_limit", "time_limit must be >= 0"},
		{`{"input": "x", "rank": 2, "algorithm": "svd"}`, "algorithm", "algorithm: unknown algorithm"},
		{`{"input": "x", "rank": 2, "shards": 2, "algorithm": "anls"}`, "shards", "algorithm anls runs on one shard; shards 2"},
		{`{"input": "x", "rank": 2, "fan_in": 3}`, "fan_in", "fan_in must be a power of two"},
		{`{"input": "x", "rank": 2, "form": "fast"}`, "form", "form: "},
		{`{"input": "x", "rank": 2, "layout": "csr"}`, "layout", "layout: "},
		// A NUL string is a value like any (it once meant "absent", and the job ran with defaults).
		{`{"input": "x", "rank": 2, "accel": "\u0000"}`, "accel", "accel"},
		{`{"input": "x", "rank": 2, "form": "\u0000"}`, "form", "form: "},
		{`{"input": "x", "rank": 2, "storage": "\u0000"}`, "storage", "storage"},
		{`{"input": "x", "rank": 2, "layout": "\u0000"}`, "layout", "layout: "},
		{`{"input": "x", "rank": 2, "transform": "\u0000"}`, "transform", "transform"},
		{`{"input": "x", "rank": 2, "loss": "kl"}`, "loss", "loss kl needs algorithm mu"},
		{`{"input": "x", "rank": 2, "loss": true}`, "loss", "loss must be frobenius"},
		{`{"input": "x", "rank": 2, "missing": "nan"}`, "missing", "missing must be true or false"},
		{`{"input": "x", "rank": 2, "overwrite": true}`, "overwrite", "overwrite is for out_shared"},
		{`{"input": "x", "rank": 2, "checkpoint_every": -2}`, "checkpoint_every", "checkpoint_every must be auto or"},
		{`{"input": "x", "rank": 2, "alpha_coef": -1}`, "alpha_coef", "alpha_coef must be a finite number >= 0"},
		{`{"input": "x", "rank": 2, "init_basis": "/b.npy"}`, "init", "init_basis and init_coef need init custom"},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			_, err := DecodeSpec(strings.NewReader(tt.body))
			if !errors.Is(err, usererr.ErrUser) {
				t.Fatalf("error %v is not the user's", err)
			}
			var ue *usererr.Error
			if !errors.As(err, &ue) || jsonField(ue.Field) != tt.field {
				t.Fatalf("error %v: field %q, want %q", err, ue.Field, tt.field)
			}
			if msg := ue.Text(jsonName); !strings.Contains(msg, tt.msg) {
				t.Fatalf("message %q, want it to hold %q", msg, tt.msg)
			}
		})
	}
}
