package cli

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
)

// TestAccelFlagReachesOptions: --accel reaches the job's spec and the kernels' options, and
// without it a job gets jobspec.DefaultAccel.
func TestAccelFlagReachesOptions(t *testing.T) {
	def, err := kernels.ParseAccel(jobspec.DefaultAccel)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want kernels.Accel
	}{
		{nil, def},
		{[]string{"--accel", "off"}, kernels.Accel{}},
		{[]string{"--accel", "auto"}, kernels.AccelAuto},
		{[]string{"--accel", "2,4"}, kernels.Accel{CSweeps: 2, BSweeps: 4, Eps: kernels.AccelAuto.Eps}},
		{[]string{"--accel", "2,4,0.3", "--algo", "bcd"}, kernels.Accel{CSweeps: 2, BSweeps: 4, Eps: 0.3}},
		{[]string{"--accel", "3,5", "--algo", "hals"}, kernels.Accel{CSweeps: 3, BSweeps: 5, Eps: kernels.AccelAuto.Eps}},
		{[]string{"--accel", "x"}, kernels.Accel{Extrapolate: true}},
	} {
		fs := flag.NewFlagSet("factorize", flag.ContinueOnError)
		var jf jobFlags
		registerFactorize(fs, &jf)
		args := append([]string{"--input", "synthetic:m=5,n=40,k=3,seed=1", "--rank", "3"}, tc.args...)
		if err := parseFlags(fs, args, io.Discard); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		j, err := jf.open()
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if j.spec.Accel != tc.want || j.cfg.Options.Accel != tc.want {
			t.Errorf("%v: spec accel %+v, options accel %+v; want %+v", tc.args, j.spec.Accel, j.cfg.Options.Accel, tc.want)
		}
		j.Close()
	}
}

// TestAccelFlagErrors: a bad --accel exits 2 naming the flag and the value (kernels.ParseAccel's
// message), and an algorithm without inner loops is refused with ValidateAccel's.
func TestAccelFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"word", []string{"--accel", "fast"}, `invalid value "fast" for flag -accel: accel "fast": want off, auto, x, C,B or C,B,eps`},
		{"too many sweeps", []string{"--accel", "200,5"}, `invalid value "200,5" for flag -accel: accel "200,5": sweeps must be in 1..100, got C 200 and B 5`},
		{"eps NaN", []string{"--accel", "3,5,NaN"}, `accel "3,5,NaN": eps must be a number in (0, 1), got NaN`},
		{"eps 1", []string{"--accel", "3,5,1"}, `accel "3,5,1": eps must be a number in (0, 1), got 1`},
		{"not an integer", []string{"--accel", "3.5,5"}, `accel "3.5,5": C sweeps "3.5" is not an integer`},
		{"mu", []string{"--algo", "mu", "--accel", "auto"}, "--algo mu has no accelerated inner loops (--accel auto): the algorithms that have are did, bcd, hals"},
		{"dbcd", []string{"--algo", "dbcd", "--accel", "2,3"}, "--algo dbcd has no accelerated inner loops (--accel 2,3,0.1)"},
		{"hals with held-out entries", []string{"--algo", "hals", "--accel", "3,20", "--test-fraction", "0.1"},
			"--algo hals has no accelerated inner loops with held-out entries (--test-fraction 0.1; --accel 3,20,0.1): use --accel off, or --algo did"},
		{"bcd with missing values", []string{"--algo", "bcd", "--accel", "3,20", "--missing", "nan"},
			"--algo bcd has no accelerated inner loops with missing values (--missing nan; --accel 3,20,0.1): use --accel off, or --algo did"},
		{"two settings", []string{"--accel", "off;auto"}, "--accel off;auto: a fit takes one setting (bench --table2 takes several)"},
		{"repeated", []string{"--accel", "off", "--accel", "auto"}, "a fit takes one setting"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{"factorize", "--input", "synthetic:m=5,n=40,k=3,seed=1", "--rank", "3", "--out", out}, tc.args...)
			code, _, stderr := runNode(t, args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, %q; want exit 2 and %q", code, stderr, tc.want)
			}
		})
	}
}

// TestAccelOnATransform: a transform (transform, factorize --fix-basis, consensus's refit) has no
// iterations to accelerate, and says so in the words of its command, naming no --algo.
func TestAccelOnATransform(t *testing.T) {
	dir := t.TempDir()
	basis := filepath.Join(dir, "basis.npy")
	if err := os.WriteFile(basis, append(matio.NPYHeader(5, 3), make([]byte, 5*3*8)...), 0o644); err != nil {
		t.Fatal(err)
	}
	in := "synthetic:m=5,n=40,k=3,seed=1"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"transform", []string{"transform", "--basis", basis, "--input", in, "--accel", "auto"}, "--accel auto: a transform solves every sample's coefficients for a fixed basis exactly, in one pass"},
		{"fix-basis", []string{"factorize", "--fix-basis", basis, "--input", in, "--accel", "3,5"}, "--accel 3,5,0.1: a transform solves every sample's coefficients"},
		{"consensus", []string{"consensus", "--sweep", dir, "--k", "3", "--input", in, "--accel", "x"}, "--accel x: consensus refits the usages by one exact solve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runNode(t, append(tc.args, "--out", filepath.Join(dir, tc.name))...)
			if code != 2 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "--algo") {
				t.Errorf("exit %d, %q; want exit 2 and %q, and no --algo", code, stderr, tc.want)
			}
		})
	}
}

// TestAccelOnEveryFitCommand: every command that runs a fit takes --accel, and its help says
// what auto is.
func TestAccelOnEveryFitCommand(t *testing.T) {
	for _, name := range []string{"factorize", "bench", "sweep", "consensus"} {
		got, err := CommandFlags(name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(got, "accel") {
			t.Errorf("%s has no --accel", name)
		}
		_, help, _ := runNode(t, name, "-h")
		if !strings.Contains(help, "-accel SETTING") || !strings.Contains(help, "auto (3,20,0.1,x)") {
			t.Errorf("%s -h does not explain --accel", name)
		}
	}
}

// TestAccelInReport: report.json records the accel in effect.
func TestAccelInReport(t *testing.T) {
	for _, tc := range []struct{ accel, want string }{{"auto", "auto"}, {"3,2,0.25", "3,2,0.25"}, {"off", "off"}} {
		out := filepath.Join(t.TempDir(), "out")
		code, _, stderr := runNode(t, "factorize", "--input", "synthetic:m=5,n=40,k=3,seed=1", "--rank", "3", "--max-iter", "3",
			"--accel", tc.accel, "--out", out)
		if code != 0 {
			t.Fatalf("--accel %s: exit %d: %s", tc.accel, code, stderr)
		}
		if r := readReport(t, out); r.Accel != tc.want {
			t.Errorf("--accel %s: report says accel %q, want %q", tc.accel, r.Accel, tc.want)
		}
	}
}

// TestAccelFlagList: the list forms bench --table2 reads.
func TestAccelFlagList(t *testing.T) {
	auto, c2 := kernels.AccelAuto, kernels.Accel{CSweeps: 2, BSweeps: 5, Eps: 0.1}
	for _, tc := range []struct {
		values []string
		want   []kernels.Accel
		err    string
	}{
		{[]string{"off"}, []kernels.Accel{{}}, ""},
		{[]string{"off,auto"}, []kernels.Accel{{}, auto}, ""},
		{[]string{"off;auto;2,5"}, []kernels.Accel{{}, auto, c2}, ""},
		{[]string{"off", "2,5,0.1", "auto"}, []kernels.Accel{{}, c2, auto}, ""},
		{[]string{"2,5"}, []kernels.Accel{c2}, ""},
		{[]string{"off,2,5"}, nil, `accel "off,2,5"`},
		{[]string{"off;fast"}, nil, `accel "fast"`},
	} {
		var a accelFlag
		var err error
		for _, v := range tc.values {
			if err = a.Set(v); err != nil {
				break
			}
		}
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: got %v, want an error %q", tc.values, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(a.list, tc.want) {
			t.Errorf("%q: got %v, %v; want %v", tc.values, a.list, err, tc.want)
		}
	}
}

// TestAccelOnTheConsole: the console's first line names the inner loops a fit runs (nothing
// when off).
func TestAccelOnTheConsole(t *testing.T) {
	for accel, want := range map[string]string{"2,3": "rank 3, did (--accel 2,3,0.1) on 1 shard(s)", "off": "rank 3, did on 1 shard(s)"} {
		out := filepath.Join(t.TempDir(), "out")
		code, _, stderr := runNode(t, "factorize", "--input", "synthetic:m=5,n=40,k=3,seed=1", "--rank", "3", "--max-iter", "3", "--accel", accel, "--out", out)
		if code != 0 || !strings.Contains(stderr, want) {
			t.Errorf("--accel %s: exit %d, %q; want %q", accel, code, stderr, want)
		}
	}
}
