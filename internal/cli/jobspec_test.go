package cli

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"
)

// TestJobSpecFlagErrors checks that the rules jobspec.Spec.Check holds reach the user in
// flag names, on local jobs and on jobs for a cluster (refused before any connection).
func TestJobSpecFlagErrors(t *testing.T) {
	input := "synthetic:m=5,n=40,k=3,seed=1"
	cluster := []string{"--cluster", "127.0.0.1:1"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"rho 0", []string{"--rho", "0"}, "--rho must be a positive number, got 0"},
		{"rho NaN", []string{"--rho", "NaN"}, "--rho must be a positive number, got NaN"},
		{"shards 0", []string{"--shards", "0"}, "--shards must be >= 1, got 0"},
		{"basis without custom", []string{"--init-basis", "/b.npy"}, "--init-basis and --init-coef need --init custom"},
		{"max-iter 0", []string{"--max-iter", "0"}, "--max-iter must be >= 1, got 0"},
		{"alpha coef negative", []string{"--alpha-coef", "-0.5"}, "--alpha-coef must be a finite number >= 0, got -0.5"},
		{"alpha basis word", []string{"--alpha-basis", "half"}, `--alpha-basis must be a number or same (as --alpha-coef), got "half"`},
		{"l1 ratio 1.5", []string{"--alpha-coef", "0.1", "--l1-ratio", "1.5"}, "--l1-ratio must be a number between 0 and 1, got 1.5"},
		{"kl on did", []string{"--loss", "kl"}, "--loss kl needs --algo mu (multiplicative updates)"},
		{"loss word", []string{"--loss", "cosine"}, `invalid value "cosine" for flag -loss: unknown loss "cosine"`},
		{"penalty on admm", []string{"--algo", "admm", "--alpha-coef", "0.1"}, "--algo admm has no L1/L2 penalties"},
		{"fan-in 2^17", []string{"--nodes", "2", "--fan-in", "131072"}, "--fan-in must be a power of two >= 2, got 131072"},
		{"cluster rank 0", append([]string{"--rank", "0"}, cluster...), "--rank must be >= 1, got 0"},
		{"cluster bad ingest", append([]string{"--ingest", "pigeon"}, cluster...), `--ingest "pigeon": want shared or stream`},
		{"cluster custom shared relative", append([]string{"--init", "custom", "--init-basis", "b.npy", "--init-coef", "/c.npy"}, cluster...),
			"--init-basis b.npy: give an absolute path with --ingest shared"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{"factorize", "--input", input, "--rank", "3", "--out", out}, tc.args...)
			code, _, stderr := runNode(t, args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, %q; want exit 2 and %q", code, stderr, tc.want)
			}
		})
	}
}

// TestFieldFlagsAreFlags: every flag the field-to-flag table names is a flag of factorize or
// of sweep (a renamed flag would otherwise leave the check's messages naming one that is gone).
func TestFieldFlagsAreFlags(t *testing.T) {
	fs := flag.NewFlagSet("factorize", flag.ContinueOnError)
	var jf jobFlags
	registerFactorize(fs, &jf)
	sweepOnly := flag.NewFlagSet("sweep", flag.ContinueOnError)
	registerSweep(sweepOnly)
	sweepOnly.VisitAll(func(f *flag.Flag) {
		if fs.Lookup(f.Name) == nil {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
	for field, flags := range fieldFlags {
		for _, f := range strings.FieldsFunc(flags, func(r rune) bool { return r == ',' || r == ' ' }) {
			if f == "or" || f == "nan" {
				continue
			}
			if !strings.HasPrefix(f, "--") || fs.Lookup(f[2:]) == nil {
				t.Errorf("field %s: %q is not a flag of factorize or sweep", field, f)
			}
		}
	}
}

// TestPlaceRulesNameTheFlags: the check's rules of where a job runs reach the user in flag
// names, with exit status 2.
func TestPlaceRulesNameTheFlags(t *testing.T) {
	input := "synthetic:m=5,n=40,k=3,seed=1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ingest", "stream"}, "didnmf: --ingest stream is for jobs on a cluster"},
		{[]string{"--detach"}, "didnmf: --detach is for jobs on a cluster, with --out-shared"},
		{[]string{"--cluster", "127.0.0.1:1", "--out-shared", "rel"}, "didnmf: --out-shared rel: give an absolute path"},
		{[]string{"--cluster", "127.0.0.1:1", "--nodes", "2"}, "didnmf: --cluster and --nodes exclude each other"},
		{[]string{"--threads", "-1"}, "didnmf: --threads must be >= 0, got -1"},
		{[]string{"--algo", "svd"}, "didnmf: --algo: unknown algorithm"},
		{[]string{"--init", "svd"}, `didnmf: --init: unknown init "svd"`},
	} {
		args := append([]string{"factorize", "--input", input, "--rank", "3"}, tc.args...)
		if tc.args[0] != "--detach" { // a detached job writes no --out
			args = append(args, "--out", filepath.Join(t.TempDir(), "out"))
		}
		code, _, stderr := runNode(t, args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}
