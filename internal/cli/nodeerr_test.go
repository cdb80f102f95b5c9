package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestNodeErrorsNameFlags: a job a node refuses for a path (outside its data roots, a file
// missing under them) is exit 2 with the CLI's flag named in the node's message: the node's
// error names the spec's field, and the CLI names it as its flag (the HTTP API's test is
// internal/nodeview's TestSubmitErrorsNameJSONKeys).
func TestNodeErrorsNameFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	isolateGossip(t)
	root := t.TempDir()
	b := startJoined(t, []string{"a", "b"}, "--data-root", root)[1]
	x := filepath.Join(root, "x.npy")
	if code, out := runProc(t, "convert", "--input", "synthetic:m=8,n=40,k=2,seed=3", "--out", x); code != 0 {
		t.Fatalf("convert: %s", out)
	}
	outside := t.TempDir()
	roots := " is outside the node's data roots (" + root + "): use a path under one of them (or start the node with serve --data-root DIR)"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"input outside the roots", []string{"--input", "/etc/passwd"}, "didnmf: --input /etc/passwd" + roots},
		{"input missing", []string{"--input", root + "/absent.npy"}, "didnmf: --input " + root + "/absent.npy: no such file or directory"},
		{"out-shared outside the roots", []string{"--input", x, "--out-shared", outside + "/out"}, "didnmf: --out-shared " + outside + "/out" + roots},
		{"init-basis missing", []string{"--input", x, "--init", "custom", "--init-basis", root + "/b.npy", "--init-coef", root + "/c.npy"},
			"didnmf: --init-basis " + root + "/b.npy: no such file or directory"},
		{"init-coef outside the roots", []string{"--input", x, "--init", "custom", "--init-basis", x, "--init-coef", "/etc/c.npy"},
			"didnmf: --init-coef /etc/c.npy" + roots},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"factorize", "--cluster", b.Gossip, "--ingest", "shared", "--rank", "2", "--max-iter", "5",
				"--out", filepath.Join(t.TempDir(), "out")}, tc.args...)
			code, _, stderr := runNode(t, args...)
			if code != 2 || lastLine(stderr) != tc.want {
				t.Errorf("exit %d:\n%s\nwant exit 2 and\n%s", code, stderr, tc.want)
			}
		})
	}
}

// TestCertsRefusesReservedClientNames: certs makes no client certificate named as an owner
// that is no client's (the node's own process, the HTTP operator), which every node would
// refuse; a peer may be named so.
func TestCertsRefusesReservedClientNames(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"--name", "local", "--client"}, 2},
		{[]string{"--name", "Operator", "--client"}, 2},
		{[]string{"--name", "alice", "--client"}, 0},
		{[]string{"--name", "operator"}, 0},
	} {
		code, _, stderr := runNode(t, append([]string{"certs", "--dir", dir}, tc.args...)...)
		if code != tc.code || code == 2 && !strings.Contains(stderr, "choose another name") {
			t.Errorf("certs %v: exit %d, %s", tc.args, code, stderr)
		}
	}
}
