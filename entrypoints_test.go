package didnmf_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf"
	"github.com/didnmf/didnmf/internal/actors"
	"github.com/didnmf/didnmf/internal/cli"
	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/sweep"
	"github.com/didnmf/didnmf/usererr"
)

// TestEveryEntryPointRefusesAlike: one bad spec, given to each entry point (the CLI's flags,
// the Go API's Open, a node's submit), is refused by the one check with the same words: the
// CLI names the flag and exits with status 2, the API's error is a *usererr.Error naming the
// field, and the node's refusal comes back over the wire as the user's fault with the same
// message.
func TestEveryEntryPointRefusesAlike(t *testing.T) {
	lc, err := actors.StartLocalCluster(1, actors.NodeConfig{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	client := actors.NewClient(lc.Nodes[0].System(), actors.Timeouts{})
	t.Cleanup(func() {
		client.Close()
		lc.Close()
	})
	const input = "synthetic:m=6,n=40,k=3,seed=1"
	for _, c := range []struct {
		name  string
		flags []string
		edit  func(*jobspec.Spec)
		field string
		msg   string // in the spec's field names; the CLI's flag names replace them
		cli   string
	}{
		{"negative alpha", []string{"--alpha-coef", "-1"}, func(s *jobspec.Spec) { s.AlphaCoef = -1 }, "alpha_coef",
			"alpha_coef must be a finite number >= 0, got -1", "--alpha-coef must be a finite number >= 0, got -1"},
		{"fan-in 3", []string{"--nodes", "1", "--fan-in", "3"}, func(s *jobspec.Spec) { s.FanIn = 3 }, "fan-in",
			"fan-in must be a power of two >= 2, got 3", "--fan-in must be a power of two >= 2, got 3"},
		{"l1 ratio 2", []string{"--l1-ratio", "2"}, func(s *jobspec.Spec) { s.L1Ratio = 2 }, "l1_ratio",
			"l1_ratio must be a number between 0 and 1, got 2", "--l1-ratio must be a number between 0 and 1, got 2"},
		{"kl on did", []string{"--loss", "kl"}, func(s *jobspec.Spec) { s.Loss = kernels.LossKL }, "loss",
			"loss kl needs algorithm mu (multiplicative updates)", "--loss kl needs --algo mu (multiplicative updates)"},
		{"rho -1", []string{"--rho", "-1"}, func(s *jobspec.Spec) { s.Rho = -1 }, "rho",
			"rho must be a positive number, got -1", "--rho must be a positive number, got -1"},
		{"accel on mu", []string{"--algo", "mu", "--accel", "auto"}, func(s *jobspec.Spec) {
			s.Algo, s.Accel, s.Layout = kernels.MU, kernels.AccelAuto, matio.AutoFor(kernels.MU, s.Layout)
		}, "accel", "algorithm mu has no accelerated inner loops (accel auto): the algorithms that have are did, bcd, hals",
			"--algo mu has no accelerated inner loops (--accel auto): the algorithms that have are did, bcd, hals"},
		{"accel on dbcd", []string{"--algo", "dbcd", "--accel", "2,4,0.5"}, func(s *jobspec.Spec) {
			s.Algo, s.Accel, s.Layout = kernels.DBCD, kernels.Accel{CSweeps: 2, BSweeps: 4, Eps: 0.5}, matio.AutoFor(kernels.DBCD, s.Layout)
		}, "accel", "algorithm dbcd has no accelerated inner loops (accel 2,4,0.5)", "--algo dbcd has no accelerated inner loops (--accel 2,4,0.5)"},
		{"shards above the samples", []string{"--shards", "41"}, func(s *jobspec.Spec) { s.Shards = 41 }, "shards",
			"shards 41 is more than the 40 samples of " + input, "--shards 41 is more than the 40 samples of " + input},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The CLI: exit status 2, the message naming the flag.
			var stdout, stderr bytes.Buffer
			args := append([]string{"factorize", "--input", input, "--rank", "3", "--out", filepath.Join(t.TempDir(), "out")}, c.flags...)
			if code := cli.Main(args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "didnmf: "+c.cli) {
				t.Errorf("CLI: exit %d, %q; want exit 2 and %q", code, stderr.String(), c.cli)
			}

			// The Go API: the user's fault, naming the field.
			spec := jobspec.New([]string{input}, kernels.DID, 3, 1)
			c.edit(spec)
			j, err := didnmf.Open(spec, didnmf.Local(1))
			if err == nil {
				j.Close()
				t.Fatal("API: accepted")
			}
			var ue *usererr.Error
			if !errors.Is(err, usererr.ErrUser) || !errors.As(err, &ue) || ue.Field != c.field || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("API: %v (%T, field %v); want the user's fault of %s with %q", err, err, ue, c.field, c.msg)
			}

			// A node's submit: the same words, the user's fault on this side of the wire too.
			w := spec.Wire()
			w.Nodes = lc.Addresses()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			job, err := client.Submit(ctx, "", w)
			if err == nil {
				_, err = job.Wait(ctx)
			}
			var je *actors.JobError
			if !errors.As(err, &je) || je.Kind != actors.KindInput || !errors.Is(err, usererr.ErrUser) || je.Message != ue.Error() {
				t.Errorf("node: %v; want the user's fault with the API's words %q", err, ue.Error())
			}
			// ... and the field crosses the wire: a front end names it its way on this side.
			flag := func(field string) string { return "--" + field }
			var nodeUE *usererr.Error
			if !errors.As(err, &nodeUE) {
				t.Fatalf("node: %v is no *usererr.Error", err)
			}
			if nodeUE.Field != c.field || nodeUE.Text(flag) != ue.Text(flag) {
				t.Errorf("node: field %q, text %q; want field %q and %q", nodeUE.Field, nodeUE.Text(flag), c.field, ue.Text(flag))
			}
		})
	}
}

// TestOneUserErrorAcrossPackages: the user's fault from each package that reports one is the
// one error, usererr.ErrUser, through errors.Is and errors.As, whatever wraps it.
func TestOneUserErrorAcrossPackages(t *testing.T) {
	_, matioErr := matio.Open(filepath.Join(t.TempDir(), "none.npy"))
	_, sweepErr := sweep.Consensus(nil, 3, 2, 1)
	_, specErr := jobspec.FromWire(&messages.JobSpec{Inputs: []string{"/x.npy"}, Algorithm: messages.Algorithm_ALGORITHM_DID, Rank: 2, Shards: 1, FanIn: 3})
	_, targetErr := didnmf.Open(jobspec.New([]string{"synthetic:m=5,n=9,k=2,seed=1"}, kernels.DID, 2, 1), didnmf.InProcess(-1, 0))
	nodeErr := error(&actors.JobError{JobID: "j", Kind: actors.KindInput, Message: "rank must be >= 1, got 0"})
	for _, c := range []struct {
		name  string
		err   error
		field string
	}{
		{"matio", matioErr, ""},
		{"sweep", sweepErr, ""},
		{"jobspec", specErr, "fan-in"},
		{"didnmf.Target", targetErr, "nodes"},
		{"a node's refusal, over the wire", nodeErr, ""},
		{"wrapped", fmt.Errorf("run 3: %w", specErr), "fan-in"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ue *usererr.Error
			if !errors.Is(c.err, usererr.ErrUser) || !errors.As(c.err, &ue) || !didnmf.IsInput(c.err) {
				t.Fatalf("%v (%T): not the user's fault", c.err, c.err)
			}
			if ue.Field != c.field {
				t.Errorf("%v: field %q, want %q", c.err, ue.Field, c.field)
			}
		})
	}
	for _, err := range []error{
		&actors.JobError{JobID: "j", Kind: actors.KindFailure, Message: "node gone"},
		&actors.JobError{JobID: "j", Kind: actors.KindCanceled, Message: "canceled"},
		errors.New("disk full"),
	} {
		if errors.Is(err, usererr.ErrUser) || didnmf.IsInput(err) {
			t.Errorf("%v: a failure taken for the user's fault", err)
		}
	}
}
