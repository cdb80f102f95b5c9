package jobspec

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/usererr"
	"google.golang.org/protobuf/proto"
)

// TestDefaultAccel holds DefaultAccel to a setting ParseAccel reads, and New to it.
func TestDefaultAccel(t *testing.T) {
	a, err := kernels.ParseAccel(DefaultAccel)
	if err != nil {
		t.Fatalf("DefaultAccel %q: %v", DefaultAccel, err)
	}
	if got := New([]string{"/x.npy"}, kernels.DID, 2, 1).Accel; got != a {
		t.Errorf("New's accel is %v, want DefaultAccel %v", got, a)
	}
}

// TestAccelReachesOptions: the spec's accel is what every shard's kernels.Options get.
func TestAccelReachesOptions(t *testing.T) {
	for _, a := range []kernels.Accel{{}, kernels.AccelAuto, {CSweeps: 2, BSweeps: 7, Eps: 0.25}, {CSweeps: 1, BSweeps: 4, Eps: 0.5}} {
		s := good(t)
		s.Accel = a
		if got := s.Options().Accel; got != a {
			t.Errorf("Options().Accel = %+v, want %+v", got, a)
		}
		w, err := FromWire(s.Wire())
		if err != nil {
			t.Fatal(err)
		}
		if got := w.Options().Accel; got != a {
			t.Errorf("after the wire, Options().Accel = %+v, want %+v", got, a)
		}
	}
}

// TestCheckAccel: the spec's accel is checked by kernels.ValidateAccel, as field accel.
func TestCheckAccel(t *testing.T) {
	cases := []struct {
		name      string
		algo      kernels.Algorithm
		accel     kernels.Accel
		wire, cli string // "" for both: no error
	}{
		{"off", kernels.DID, kernels.Accel{}, "", ""},
		{"auto on did", kernels.DID, kernels.AccelAuto, "", ""},
		{"sweeps on bcd", kernels.BCD, kernels.Accel{CSweeps: 3, BSweeps: 5, Eps: 0.1}, "", ""},
		{"sweeps on hals", kernels.HALS, kernels.Accel{CSweeps: 3, BSweeps: 5, Eps: 0.1}, "", ""},
		{"extrapolation on hals", kernels.HALS, kernels.AccelAuto,
			"accel auto: algorithm hals does not extrapolate (--accel auto): only did does", "--accel auto: algorithm hals does not extrapolate"},
		{"one sweep each on mu", kernels.MU, kernels.Accel{CSweeps: 1, BSweeps: 1}, "", ""},
		{"auto on mu", kernels.MU, kernels.AccelAuto,
			"algorithm mu has no accelerated inner loops (accel auto): the algorithms that have are did, bcd, hals",
			"--algo mu has no accelerated inner loops (--accel auto): the algorithms that have are did, bcd, hals"},
		{"auto on dbcd", kernels.DBCD, kernels.AccelAuto, "algorithm dbcd has no accelerated inner loops", "--algo dbcd has no"},
		{"too many sweeps", kernels.DID, kernels.Accel{CSweeps: 101, BSweeps: 5, Eps: 0.1},
			"accel 101,5,0.1: sweeps must be in 1..100, got C 101 and B 5", "--accel 101,5,0.1: sweeps must be in 1..100"},
		{"negative sweeps", kernels.DID, kernels.Accel{CSweeps: 3, BSweeps: -1, Eps: 0.1}, "sweeps must be in 1..100, got C 3 and B -1", "--accel"},
		{"eps 1", kernels.DID, kernels.Accel{CSweeps: 3, BSweeps: 5, Eps: 1}, "accel 3,5,1: eps must be a number in (0, 1), got 1", "--accel 3,5,1: eps"},
		{"eps 0 with sweeps", kernels.DID, kernels.Accel{CSweeps: 3, BSweeps: 5}, "eps must be a number in (0, 1), got 0", "--accel"},
		{"eps NaN", kernels.DID, kernels.Accel{CSweeps: 3, BSweeps: 5, Eps: math.NaN()}, "eps must be a number in (0, 1), got NaN", "--accel"},
		{"eps NaN without sweeps", kernels.DID, kernels.Accel{Eps: math.NaN()}, "accel: eps must be a number in (0, 1), got NaN", "--accel: eps"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := good(t)
			s.Algo, s.Accel, s.Layout, s.Shards = c.algo, c.accel, matio.AutoFor(c.algo, matio.LayoutAuto), 1
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
			if flags := fe.Text(testFlag); fe.Field != "accel" || !strings.Contains(fe.Error(), c.wire) || !strings.Contains(flags, c.cli) {
				t.Errorf("got field %q, %q, flags %q; want field accel, %q, flags %q", fe.Field, fe.Error(), flags, c.wire, c.cli)
			}
		})
	}
}

// TestAccelWire: the accel goes on the wire as three fields, none when the job is plain (so a
// plain job's bytes are those before accel existed), and comes back the same.
func TestAccelWire(t *testing.T) {
	plain := good(t)
	b, err := proto.Marshal(plain.Wire())
	if err != nil {
		t.Fatal(err)
	}
	w := plain.Wire()
	w.AccelCSweeps, w.AccelBSweeps, w.AccelEps = 0, 0, 0
	if b2, _ := proto.Marshal(w); string(b) != string(b2) {
		t.Error("a plain job's wire spec carries accel fields")
	}
	acc := good(t)
	acc.Accel = kernels.Accel{CSweeps: 3, BSweeps: 5, Eps: 0.1}
	w = acc.Wire()
	if w.AccelCSweeps != 3 || w.AccelBSweeps != 5 || w.AccelEps != 0.1 {
		t.Errorf("wire accel %d, %d, %v; want 3, 5, 0.1", w.AccelCSweeps, w.AccelBSweeps, w.AccelEps)
	}
	// Through bytes, as every path a shard is (re)started by carries it: the submission, a
	// takeover's JobState, and the assignment of each placement and recovery (the submitted
	// spec, verbatim). A checkpoint is its job's (by job id), so a shard that resumes from one
	// resumes with the accel the job was submitted with.
	for name, m := range map[string]proto.Message{
		"submit":     &messages.SubmitJob{Spec: w},
		"takeover":   &messages.JobState{Submit: &messages.SubmitJob{Spec: w}},
		"assignment": &messages.ShardAssignment{Spec: w, ResumeFrom: 40},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		back := m.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(b, back); err != nil {
			t.Fatal(err)
		}
		var spec *messages.JobSpec
		switch v := back.(type) {
		case *messages.SubmitJob:
			spec = v.Spec
		case *messages.JobState:
			spec = v.Submit.Spec
		case *messages.ShardAssignment:
			spec = v.Spec
		}
		got, err := FromWire(spec)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, acc) || got.Options().Accel != acc.Accel {
			t.Errorf("%s: FromWire(Wire(s)) = %+v, want %+v", name, got, acc)
		}
	}
	// Two jobs that differ only in accel are different specs on the wire.
	if proto.Equal(plain.Wire(), acc.Wire()) {
		t.Error("specs of accel off and auto are equal on the wire")
	}
}

// TestFromWireHostileAccel: a node refuses accel fields no honest client sends, naming the
// field, before anything is made of them.
func TestFromWireHostileAccel(t *testing.T) {
	cases := []struct {
		name    string
		c, b    int64
		eps     float64
		algo    messages.Algorithm
		want    string
		refused bool
	}{
		{"c sweeps 1e9", 1e9, 5, 0.1, messages.Algorithm_ALGORITHM_DID, "accel: sweeps must be in 1..100, got C 1000000000 and B 5 on the wire", true},
		{"b sweeps 2^62", 3, 1 << 62, 0.1, messages.Algorithm_ALGORITHM_DID, "got C 3 and B 4611686018427387904 on the wire", true},
		{"negative c sweeps", -1, 5, 0.1, messages.Algorithm_ALGORITHM_DID, "got C -1 and B 5", true},
		{"eps NaN", 3, 5, math.NaN(), messages.Algorithm_ALGORITHM_DID, "eps must be a number in (0, 1), got NaN", true},
		{"eps NaN without sweeps", 0, 0, math.NaN(), messages.Algorithm_ALGORITHM_DID, "eps must be a number in (0, 1), got NaN", true},
		{"eps +Inf", 3, 5, math.Inf(1), messages.Algorithm_ALGORITHM_DID, "eps must be a number in (0, 1), got +Inf", true},
		{"eps negative", 3, 5, -0.5, messages.Algorithm_ALGORITHM_DID, "eps must be a number in (0, 1), got -0.5", true},
		{"accel on mu", 3, 5, 0.1, messages.Algorithm_ALGORITHM_MU, "algorithm mu has no accelerated inner loops", true},
		{"auto on did", 3, 5, 0.1, messages.Algorithm_ALGORITHM_DID, "", false},
		{"100 sweeps", 100, 100, 0.5, messages.Algorithm_ALGORITHM_DID, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := &messages.JobSpec{Inputs: []string{"/x.npy"}, Algorithm: c.algo, Rank: 2, Shards: 1,
				AccelCSweeps: c.c, AccelBSweeps: c.b, AccelEps: c.eps}
			s, err := FromWire(w)
			if !c.refused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if s.Accel != (kernels.Accel{CSweeps: int(c.c), BSweeps: int(c.b), Eps: c.eps}) {
					t.Errorf("accel %+v", s.Accel)
				}
				return
			}
			var fe *usererr.Error
			if !errors.As(err, &fe) || fe.Field != "accel" || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v (field %q), want a refusal of field accel: %q", err, fieldOf(fe), c.want)
			}
		})
	}
}

func fieldOf(e *usererr.Error) string {
	if e == nil {
		return ""
	}
	return e.Field
}

// TestAccelFootprint: an extrapolating job reserves its shards' previous coefficients.
func TestAccelFootprint(t *testing.T) {
	if got := AccelFootprint(1000, 7, kernels.AccelAuto); got != 8*1000*7 {
		t.Errorf("auto: %d bytes, want %d", got, 8*1000*7)
	}
	if got := AccelFootprint(1000, 7, kernels.Accel{CSweeps: 3, BSweeps: 5, Eps: 0.1}); got != 0 {
		t.Errorf("sweeps alone: %d bytes, want 0", got)
	}
}
