package cli

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/didnmf/didnmf/pki"
)

// helpFlags are flags each command's help must list (demo's are its own, not factorize's).
var helpFlags = map[string][]string{
	"factorize": {"-input", "-rank", "-out", "-algo", "-cluster", "-nodes", "-quiet"},
	"serve":     {"-bind", "-join", "-name", "-data-dir", "-secret-file", "-history-max", "-history-time"},
	"status":    {"-cluster", "-json", "-client-bind"},
	"jobs":      {"-cluster", "-json", "-all"},
	"cancel":    {"-cluster", "-client-bind"},
	"certs":     {"-name", "-hosts", "-client", "-dir"},
	"bench":     {"-input", "-rank", "-iters", "-table2", "-procs"},
	"demo":      {"-input", "-rank", "-shards", "-out", "-nodes", "-cluster"},
	"convert":   {"-input", "-out", "-format"},
}

// notInHelp are flags a command's help must not list.
var notInHelp = map[string][]string{
	"demo": {"-checkpoint-every", "-stall-tol", "-overwrite", "-detach"},
}

// noSideEffects runs f with TMPDIR set to an empty directory and checks that f left no file
// there nor in the working directory, and no goroutine running (no listener, no node).
func noSideEffects(t *testing.T, what string, f func()) {
	t.Helper()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	cwd := dirNames(t, ".")
	goroutines := runtime.NumGoroutine()
	f()
	if names := dirNames(t, tmp); len(names) > 0 {
		t.Errorf("%s left %v in TMPDIR", what, names)
	}
	if names := dirNames(t, "."); !slices.Equal(names, cwd) {
		t.Errorf("%s changed the working directory: %v, was %v", what, names, cwd)
	}
	for deadline := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > goroutines; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("%s left goroutines running: %d, was %d", what, runtime.NumGoroutine(), goroutines)
			break
		}
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestUsageHelpEveryCommand: every command of the general help answers -h, -help and --help
// with its help on stdout (its usage line first, a description, its flags) and exit 0, and
// does nothing else: nothing on stderr, no file, nothing left running.
func TestUsageHelpEveryCommand(t *testing.T) {
	names := commandNames()
	for name := range helpFlags {
		if !slices.Contains(names, name) {
			t.Errorf("commandNames() = %v lacks %s", names, name)
		}
	}
	flagLine := regexp.MustCompile(`(?m)^  -[a-z0-9-]+`)
	for _, name := range names {
		for _, h := range []string{"-h", "-help", "--help"} {
			var code int
			var stdout, stderr string
			noSideEffects(t, name+" "+h, func() { code, stdout, stderr = runNode(t, name, h) })
			if code != exitOK || stderr != "" {
				t.Errorf("%s %s: exit %d, stderr %q", name, h, code, stderr)
			}
			if !strings.HasPrefix(stdout, "usage: didnmf "+name) {
				t.Errorf("%s %s: help does not start with its usage line:\n%s", name, h, stdout)
			}
			// A description between the usage line(s) and the flags.
			before, _, ok := strings.Cut(stdout, "\nflags")
			if parts := strings.SplitN(before, "\n\n", 2); !ok || len(parts) != 2 || len(strings.TrimSpace(parts[1])) < 20 {
				t.Errorf("%s %s: want a usage line, a description and the flags:\n%s", name, h, stdout)
			}
			listed := flagLine.FindAllString(stdout, -1)
			if len(listed) == 0 {
				t.Errorf("%s %s: no flags listed:\n%s", name, h, stdout)
			}
			for _, f := range helpFlags[name] {
				if !slices.Contains(listed, "  "+f) {
					t.Errorf("%s %s: %s not listed:\n%s", name, h, f, stdout)
				}
			}
			for _, f := range notInHelp[name] {
				if slices.Contains(listed, "  "+f) {
					t.Errorf("%s %s: lists %s, which is not its own flag:\n%s", name, h, f, stdout)
				}
			}
		}
	}
}

// TestCommandFlags: CommandFlags lists, for every command, every flag its help lists (demo's
// help shows only some of the factorize flags it takes), for serve exactly those (the deploy
// recipes' flags are checked against it), and refuses an unknown command.
func TestCommandFlags(t *testing.T) {
	flagEntry := regexp.MustCompile(`(?m)^  -([a-z0-9][a-z0-9-]*)(?: .*)?\n    \t`) // as flag.PrintDefaults writes one
	for _, name := range commandNames() {
		got, err := CommandFlags(name)
		if err != nil {
			t.Errorf("CommandFlags(%s): %v", name, err)
			continue
		}
		_, help, _ := runNode(t, name, "-h")
		var listed []string
		for _, m := range flagEntry.FindAllStringSubmatch(help, -1) {
			listed = append(listed, m[1])
		}
		slices.Sort(listed)
		if len(listed) == 0 || !slices.IsSorted(got) {
			t.Errorf("CommandFlags(%s) = %v; its help lists %v", name, got, listed)
		}
		for _, f := range listed {
			if !slices.Contains(got, f) {
				t.Errorf("CommandFlags(%s) = %v lacks -%s, which its help lists", name, got, f)
			}
		}
		if name == "serve" && !slices.Equal(got, listed) {
			t.Errorf("CommandFlags(serve) = %v, its help lists %v", got, listed)
		}
	}
	if got, err := CommandFlags("serve"); err != nil || !slices.Contains(got, "bind") || !slices.Contains(got, "secret-file") || slices.Contains(got, "rank") {
		t.Errorf("CommandFlags(serve) = %v, %v", got, err)
	}
	if got, err := CommandFlags("nosuch"); err == nil {
		t.Errorf("CommandFlags(nosuch) = %v, want an error", got)
	}
}

// TestHelpCommand: "didnmf help CMD" prints exactly what "didnmf CMD -h" prints; "didnmf help" and
// "didnmf -h" print the general help; an unknown command is a usage error of one line.
func TestHelpCommand(t *testing.T) {
	for _, name := range commandNames() {
		code, stdout, stderr := runNode(t, "help", name)
		code2, stdout2, stderr2 := runNode(t, name, "-h")
		if code != exitOK || code2 != exitOK || stdout != stdout2 || stderr != "" || stderr2 != "" {
			t.Errorf("help %s: exit %d, %d; stdout equal %v; stderr %q, %q", name, code, code2, stdout == stdout2, stderr, stderr2)
		}
	}
	for _, args := range [][]string{{"help"}, {"-h"}, {"-help"}, {"--help"}, {"help", "help"}} {
		if code, stdout, stderr := runNode(t, args...); code != exitOK || stdout != usageText || stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	for _, args := range [][]string{{"help", "nosuch"}, {"nosuch"}, {"help", "factorize", "serve"}} {
		code, stdout, stderr := runNode(t, args...)
		if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "(see didnmf help)") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line", args, code, stdout, stderr)
		}
	}
	if _, _, stderr := runNode(t, "help", "nosuch"); !strings.Contains(stderr, `"nosuch"`) || !strings.Contains(stderr, "factorize") {
		t.Errorf("help nosuch: %q, want the name and the commands", stderr)
	}
}

// TestUsageBadFlags: an unknown flag, a bad or missing value or an extra argument is one line
// on stderr naming the flag (or argument) and the command's help, exit 2, and nothing starts.
func TestUsageBadFlags(t *testing.T) {
	type badFlag struct {
		args []string
		want string // in the line
	}
	cases := []badFlag{
		{[]string{"factorize", "--rnak", "3"}, "flag provided but not defined: -rnak"},
		{[]string{"factorize", "--rank", "abc"}, `invalid value "abc" for flag -rank`},
		{[]string{"factorize", "--input", "synthetic:m=3,n=30,k=2,seed=1", "--rank"}, "flag needs an argument: -rank"},
		{[]string{"factorize", "--max-iter=1e3"}, "-max-iter"},
		{[]string{"factorize", "extra"}, `unexpected argument "extra"`},
		{[]string{"demo", "--rnak", "3"}, "flag provided but not defined: -rnak"},
		{[]string{"demo", "--shards", "four"}, `invalid value "four" for flag -shards`},
		{[]string{"serve", "--capacity", "x"}, `invalid value "x" for flag -capacity`},
		{[]string{"serve", "--bind"}, "flag needs an argument: -bind"},
		{[]string{"status", "--json=maybe"}, "-json"},
		{[]string{"jobs", "--cluster"}, "flag needs an argument: -cluster"},
		{[]string{"cancel", "a", "b"}, `unexpected argument "b"`},
		{[]string{"certs", "--hots", "x"}, "flag provided but not defined: -hots"},
		{[]string{"bench", "--iters", "many"}, `invalid value "many" for flag -iters`},
		{[]string{"convert", "--format"}, "flag needs an argument: -format"},
	}
	for _, name := range commandNames() { // every command, those added later too
		cases = append(cases, badFlag{[]string{name, "--no-such-flag"}, "flag provided but not defined: -no-such-flag"})
	}
	for _, c := range cases {
		var code int
		var stdout, stderr string
		noSideEffects(t, strings.Join(c.args, " "), func() { code, stdout, stderr = runNode(t, c.args...) })
		hint := "(see didnmf " + c.args[0] + " -h)\n"
		if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "didnmf "+c.args[0]+": ") ||
			!strings.Contains(stderr, c.want) || !strings.HasSuffix(stderr, hint) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q and %q", c.args, code, stdout, stderr, c.want, hint)
		}
	}
}

// TestUsageClusterAddress: a malformed --cluster is refused before anything is tried; an
// address where nothing listens is a usage error too, after server.DefaultReach, saying which
// address, what went wrong and how long it tried.
func TestUsageClusterAddress(t *testing.T) {
	job := []string{"--input", "synthetic:m=3,n=30,k=2,seed=1", "--rank", "2", "--quiet"}
	commands := func(addr, out string) [][]string {
		return [][]string{
			{"status", "--cluster", addr},
			{"jobs", "--cluster", addr},
			{"cancel", "--cluster", addr, "job-1"},
			append([]string{"factorize", "--cluster", addr, "--out", out}, job...),
		}
	}
	for _, addr := range []string{"127.0.0.1", "127.0.0.1:0", ":7946", "127.0.0.1:99999", ",", "127.0.0.1:1,nohost"} {
		for _, args := range commands(addr, filepath.Join(t.TempDir(), "out")) {
			start := time.Now()
			code, stdout, stderr := runNode(t, args...)
			if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "--cluster") ||
				!strings.Contains(stderr, "want IP:PORT") || time.Since(start) > 2*time.Second {
				t.Errorf("%v: exit %d after %v, stdout %q, stderr %q", args, code, time.Since(start), stdout, stderr)
			}
		}
	}
	// A port nothing listens on, on a loopback address no node or client here binds: the six
	// commands below start at once, and each binds its own gossip on 127.0.0.1 at a port the
	// kernel picks, which could be one just freed on 127.0.0.1; one of them would then answer
	// the others' probe and leave. One CI run failed so, most likely: "could not join", exit 1.
	l, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	out := filepath.Join(t.TempDir(), "out")
	var wg sync.WaitGroup
	for _, args := range commands(addr, out) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			code, stdout, stderr := runNode(t, args...)
			took := time.Since(start)
			if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 ||
				!strings.Contains(stderr, "--cluster "+addr+": nothing answered at "+addr+" (tried for 5.0 s; connection refused)") ||
				!strings.Contains(stderr, "is a node serving there? (see didnmf serve -h)") || took < 5*time.Second || took > 15*time.Second {
				t.Errorf("%v: exit %d after %v, stdout %q, stderr %q", args, code, took, stdout, stderr)
			}
		}()
	}
	wg.Wait()
	if _, err := os.Stat(out); err == nil {
		t.Errorf("factorize left --out %s behind", out)
	}
}

// TestServeRefusesBadValues: a serve flag with a value out of its range is one line naming
// the flag, exit 2, and nothing is made, not even the cluster secret a first serve writes.
func TestServeRefusesBadValues(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "cluster.secret")
	t.Setenv(pki.SecretFileEnv, secret)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--data-port", "70000"}, "--data-port must be a port"},
		{[]string{"--data-port", "-2"}, "--data-port must be a port"},
		{[]string{"--threads", "-1"}, "--threads must be >= 0"},
		{[]string{"--log-format", "xml"}, "--log-format"},
		{[]string{"--cpus", "0-x"}, "--cpus"},
		{[]string{"--cpus", "1023"}, "--cpus"},
		{[]string{"--owner-max-jobs", "-1"}, "--owner-max-jobs"},
		{[]string{"--owner-max-shards", "-3"}, "--owner-max-shards"},
		{[]string{"--owner-max-streams", "-1"}, "--owner-max-streams"},
		{[]string{"--owner-memory", "lots"}, "--owner-memory"},
		{[]string{"--max-job-time", "-1h"}, "--max-job-time"},
		{[]string{"--max-restarts", "-1"}, "--max-restarts must be >= 0, got -1"},
		{[]string{"--history-max", "-1"}, "--history-max must be >= 0"},
		{[]string{"--history-time", "0s"}, "--history-time > 0"},
	} {
		args := append([]string{"serve", "--bind", "127.0.0.1:0"}, c.args...)
		var code int
		var stdout, stderr string
		noSideEffects(t, strings.Join(args, " "), func() { code, stdout, stderr = runNode(t, args...) })
		if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", args, code, stdout, stderr, c.want)
		}
		if _, err := os.Stat(secret); err == nil {
			t.Fatalf("%v made the cluster secret %s", args, secret)
		}
	}
}

// TestServeHelpStatesTheLimits: serve's help gives the default --max-job-time (a day) and the
// per-owner quotas with their defaults.
func TestServeHelpStatesTheLimits(t *testing.T) {
	code, stdout, _ := runNode(t, "serve", "-h")
	if code != 0 {
		t.Fatalf("serve -h: exit %d", code)
	}
	for _, want := range []string{"(default 24h0m0s)", "-owner-max-jobs N", "a quarter of --max-jobs", "-owner-max-shards N",
		"a quarter of --max-shards", "-owner-memory SIZE", "three quarters of --memory", "-owner-max-streams N"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("serve -h does not say %q:\n%s", want, stdout)
		}
	}
}
