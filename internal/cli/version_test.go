package cli

import (
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestVersionLine: `didnmf --version` and `didnmf CMD --version`, for every command, exit 0 with
// one line naming the version, the commit, the Go version and the kernel path; -h still
// prints only help.
func TestVersionLine(t *testing.T) {
	line := regexp.MustCompile(`^didnmf \S+, commit \S+, go\S+, kernels \S+\n$`)
	for _, args := range append([][]string{{"--version"}}, func() (all [][]string) {
		for _, c := range commandNames() {
			all = append(all, []string{c, "--version"})
		}
		return
	}()...) {
		code, stdout, stderr := runNode(t, args...)
		if code != 0 || !line.MatchString(stdout) {
			t.Errorf("didnmf %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, stdout, stderr)
		}
		if !strings.Contains(stdout, runtime.Version()) {
			t.Errorf("didnmf %s: %q does not name %s", strings.Join(args, " "), stdout, runtime.Version())
		}
	}
	code, stdout, stderr := runNode(t, "factorize", "-h", "--version")
	if code != 0 || strings.Contains(stdout+stderr, ", commit ") || !strings.Contains(stdout+stderr, "--rank") {
		t.Errorf("factorize -h --version: exit %d, not only help:\n%s%s", code, stdout, stderr)
	}
	// As a flag's value, --version is that value: here a directory, and the job lacks its input.
	if code, stdout, stderr := runNode(t, "factorize", "--out", "--version"); code != 2 || strings.Contains(stdout+stderr, ", commit ") {
		t.Errorf("factorize --out --version: exit %d, want the usage error of a job without --input:\n%s%s", code, stdout, stderr)
	}
}

// TestREADMEGoVersion: README.md names the Go version go.mod's go line says, one truth.
func TestREADMEGoVersion(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`Go \(>= ([0-9.]+)\)`).FindAllSubmatch(readme, -1)
	if len(names) == 0 {
		t.Fatalf("README.md names no Go version as Go (>= X)")
	}
	for _, n := range names {
		if string(n[1]) != string(m[1]) {
			t.Errorf("README.md says Go >= %s, go.mod says go %s", n[1], m[1])
		}
	}
}

// TestServeLogsVersion: serve's "serving" record carries the version line's fields.
func TestServeLogsVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node process")
	}
	isolateGossip(t)
	a := startServe(t, "a")
	for _, k := range []string{"version", "commit", "go", "kernels"} {
		if a.serving.Attr(k) == "" {
			t.Errorf("the serving record has no %s: %s", k, a.serving.Line)
		}
	}
	if a.serving.Attr("go") != runtime.Version() {
		t.Errorf("the serving record's go is %q, not %s", a.serving.Attr("go"), runtime.Version())
	}
}
