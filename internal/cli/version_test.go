package cli

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/internal/actors"
	"github.com/didnmf/didnmf/internal/server"
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

// TestAdvertisedVersion: the version a node puts in its gossip meta is the module version, or
// for a source build the commit's first 12 digits after "(devel)@", and always meets the
// meta's rules (printable, no spaces, at most cluster.MaxVersionBytes).
func TestAdvertisedVersion(t *testing.T) {
	for _, c := range []struct {
		v    buildVersion
		want string
	}{
		{buildVersion{Version: "v0.4.0", Commit: "0123456789abcdef"}, "v0.4.0"},
		{buildVersion{Version: "(devel)"}, "(devel)"},
		{buildVersion{Version: "(devel)", Commit: "0123456789abcdef0123"}, "(devel)@0123456789ab"},
		{buildVersion{Version: "(devel)", Commit: "0123456789abcdef0123", Modified: true}, "(devel)@0123456789ab+modified"},
		{buildVersion{Version: "(devel)", Commit: "abc"}, "(devel)@abc"},
		{buildVersion{Version: "v1.0.0-0.20260101000000-0123456789ab+dirty"}, "v1.0.0-0.20260101000000-0123456789ab+dirty"},
		{buildVersion{Version: "v1 beta\n"}, "v1_beta_"},
		{buildVersion{Version: strings.Repeat("v", 70)}, strings.Repeat("v", cluster.MaxVersionBytes)},
		{buildVersion{Version: strings.Repeat("é", 40)}, strings.Repeat("é", cluster.MaxVersionBytes/2)},
	} {
		got := advertised(c.v)
		if got != c.want {
			t.Errorf("%+v: advertised %q, want %q", c.v, got, c.want)
		}
		if _, err := (cluster.Meta{Role: cluster.RoleClient, Version: got}).Encode(); err != nil {
			t.Errorf("%+v: advertised %q breaks the meta's rules: %v", c.v, got, err)
		}
	}
	if v := advertised(readBuildVersion()); v == "" {
		t.Error("this build advertises no version")
	}
}

// TestVersionWarning: status warns when the members run different versions, naming each
// version ("unknown" for a build from before versions were advertised) with its members.
func TestVersionWarning(t *testing.T) {
	for _, c := range []struct {
		members []memberVersion
		want    string
	}{
		{nil, ""},
		{[]memberVersion{{"a", "v1"}}, ""},
		{[]memberVersion{{"a", "v1"}, {"b", "v1"}}, ""},
		{[]memberVersion{{"a", ""}, {"b", ""}}, ""},
		{[]memberVersion{{"c", "v2"}, {"b", "v1"}, {"a", "v1"}},
			"the members run 2 different versions: v1 (a, b); v2 (c); run one build on every node"},
		{[]memberVersion{{"a", "v1"}, {"old", ""}, {"dev", "(devel)@0123456789ab"}},
			"the members run 3 different versions: unknown (old); (devel)@0123456789ab (dev); v1 (a); run one build on every node"},
	} {
		if got := versionWarning(c.members); got != c.want {
			t.Errorf("%v: %q, want %q", c.members, got, c.want)
		}
	}
}

// TestStatusShowsVersions: status lists each member's version (as --json's "version") and
// warns, in text and in --json's "warnings", when they differ: here a serve process (this
// build), a member of another version and one of a build from before versions were
// advertised (both in this process, joined to it).
func TestStatusShowsVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node process")
	}
	isolateGossip(t)
	a := startServe(t, "a")
	sec := securityFlags{member: true}
	cr, err := sec.credentials(io.Discard, false)
	if err != nil {
		t.Fatal(err)
	}
	for name, version := range map[string]string{"other": "v9.9.9", "older": ""} {
		s, err := server.Start(server.Config{Name: name, Bind: "127.0.0.1:0", Join: []string{a.Gossip}, GossipKey: cr.gossipKey, Secret: cr.secret,
			Version: version, HTTP: map[string]string{"other": "https://127.0.0.1:8265"}[name],
			Node: actors.NodeConfig{Threads: 1, DataDir: filepath.Join(t.TempDir(), name)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
	}
	this := advertised(readBuildVersion())
	var st struct {
		Members  []struct{ Name, Version, HTTP string }
		Warnings []string
	}
	waitFor(t, "status lists the 3 members", 20*time.Second, func() bool {
		code, stdout, _ := runNode(t, "status", "--cluster", a.Gossip, "--json")
		return code == 0 && json.Unmarshal([]byte(stdout), &st) == nil && len(st.Members) == 3
	})
	want := map[string][2]string{"a": {this, ""}, "other": {"v9.9.9", "https://127.0.0.1:8265"}, "older": {"", ""}}
	for _, m := range st.Members {
		if got := [2]string{m.Version, m.HTTP}; got != want[m.Name] {
			t.Errorf("status --json: %s has version and http %q, want %q", m.Name, got, want[m.Name])
		}
	}
	wantWarning := versionWarning([]memberVersion{{"a", this}, {"other", "v9.9.9"}, {"older", ""}})
	if !strings.Contains(wantWarning, "3 different versions") || !slices.Equal(st.Warnings, []string{wantWarning}) {
		t.Errorf("status --json warnings %q, want [%q]", st.Warnings, wantWarning)
	}
	code, stdout, stderr := runNode(t, "status", "--cluster", a.Gossip)
	if code != 0 || !strings.Contains(stdout, "VERSION") || !strings.Contains(stdout, "warning: "+wantWarning+"\n") ||
		!strings.Contains(stdout, "other serves its dashboard and API at https://127.0.0.1:8265\n") {
		t.Errorf("status: exit %d, want the versions, the dashboard and the warning:\n%s%s", code, stdout, stderr)
	}
	t.Logf("status:\n%s", stdout)
	for _, line := range strings.Split(stdout, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[1] != "member" { // not a row of the table
			continue
		}
		if f[0] == "older" && f[4] != "unknown" || f[0] == "other" && f[4] != "v9.9.9" || f[0] == "a" && f[4] != this {
			t.Errorf("status: the VERSION column of %s is %q:\n%s", f[0], f[4], stdout)
		}
	}
}
