package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// certFlags makes a peer certificate named name under a temporary directory and returns
// serve's --tls-* flags for it.
func certFlags(t *testing.T, name string) []string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	if code, _, stderr := runNode(t, "certs", "--dir", dir, "--name", name); code != 0 {
		t.Fatal(stderr)
	}
	return []string{"--tls-ca", filepath.Join(dir, "ca.pem"), "--tls-cert", filepath.Join(dir, name+".pem"), "--tls-key", filepath.Join(dir, name+"-key.pem")}
}

// TestServeDataDirFromCertificateName: a node named only by its certificate (no --name) gets
// the default data directory of that name, didnmf-data/NAME, as the help says; not one named
// after its address.
func TestServeDataDirFromCertificateName(t *testing.T) {
	work := t.TempDir()
	cmd := nodeCmd(t, append([]string{"serve", "--bind", "127.0.0.1:0", "--threads", "1", "--data-root", os.TempDir()}, certFlags(t, "alpha")...)...)
	cmd.Dir = work
	cmd.Env = append(cmd.Env, gossipKeyEnv+"=MDEyMzQ1Njc4OWFiY2RlZg==")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var made []string
	deadline := time.Now().Add(20 * time.Second)
	for len(made) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		entries, _ := os.ReadDir(filepath.Join(work, "didnmf-data"))
		for _, e := range entries {
			made = append(made, e.Name())
		}
	}
	if len(made) != 1 || made[0] != "alpha" {
		t.Fatalf("serve named by its certificate made data directories %v under didnmf-data, want [alpha]; output: %s", made, out.String())
	}
}

// TestServeTwoGossipKeys: --gossip-key-file and $DIDNMF_GOSSIP_KEY both given are refused
// (exit 2, naming both): neither silently wins.
func TestServeTwoGossipKeys(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(keyFile, []byte("MDEyMzQ1Njc4OWFiY2RlZg==\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A process, ended after 20 s: a build that took one of the keys would serve.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeCmd(t).Path, "serve", "--bind", "127.0.0.1:0", "--data-dir", filepath.Join(t.TempDir(), "n"),
		"--secret-file", filepath.Join(t.TempDir(), "secret"), "--gossip-key-file", keyFile)
	cmd.Env = append(nodeEnv(), gossipKeyEnv+"=ZmVkY2JhOTg3NjU0MzIxMA==")
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != 2 || !strings.Contains(string(out), "--gossip-key-file") || !strings.Contains(string(out), "$"+gossipKeyEnv) {
		t.Fatalf("both gossip keys given: exit %d (%v), want 2 naming --gossip-key-file and $%s: %s", code, err, gossipKeyEnv, out)
	}
}

// TestClientTLSHelp: the client commands' --tls-* help speaks of the client's certificate,
// not of "this node's certificate ... between nodes" (serve's); serve's speaks of the node's.
func TestClientTLSHelp(t *testing.T) {
	for _, cmd := range []string{"status", "jobs", "cancel", "factorize"} {
		_, stdout, stderr := runNode(t, cmd, "-h")
		help := stdout + stderr
		if !strings.Contains(help, "this client's certificate") || strings.Contains(help, "this node's") || strings.Contains(help, "between nodes") {
			t.Errorf("%s -h: the --tls-* help is not a client's:\n%s", cmd, help)
		}
	}
	_, stdout, stderr := runNode(t, "serve", "-h")
	if help := stdout + stderr; !strings.Contains(help, "this node's peer certificate") || strings.Contains(help, "this client's") {
		t.Errorf("serve -h: the --tls-* help is not a node's:\n%s", help)
	}
}

// TestClientBind: a client command with --client-bind 127.0.0.7 gets the node's answers: its
// node listens there and its connections leave from there (the member's sender proof finds
// a client's address on the IP its connection comes from, and dropped every reply when the
// connections left from 127.0.0.1).
func TestClientBind(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node process")
	}
	isolateGossip(t)
	a := startServe(t, "a")
	rows := clusterStatus(t, a.Gossip, "--client-bind", "127.0.0.7")
	if r, ok := rows["a"]; !ok || r.Error != "" || r.Memory == 0 {
		t.Errorf("status --client-bind 127.0.0.7: node a's row %+v (of %v), want its answer", r, rows)
	}
	if code, stdout, stderr := runNode(t, "jobs", "--cluster", a.Gossip, "--json", "--client-bind", "127.0.0.7"); code != 0 || strings.Contains(stdout+stderr, "unreachable") {
		t.Errorf("jobs --client-bind 127.0.0.7: exit %d: %s%s", code, stdout, stderr)
	}
}
