package cli

import (
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/httpapi"
	"github.com/didnmf/didnmf/pki"
)

// TestDashboardCommand: the secret's holder gets each member's login URL, which logs in, and
// a client token for a name; a name that cannot be an identity, or no cluster, is the user's
// to fix.
func TestDashboardCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node process")
	}
	isolateGossip(t)
	secret, err := pki.LoadSecret(os.Getenv(pki.SecretFileEnv))
	if err != nil {
		t.Fatal(err)
	}
	a := startServe(t, "a", "--http", "127.0.0.1:0")
	rec, err := a.WaitFor(10*time.Second, "dashboard and HTTP API")
	if err != nil {
		t.Fatal(err)
	}
	base := rec.Attr("url")
	code, stdout, stderr := runNode(t, "dashboard", "--cluster", a.Gossip)
	want := "a\t" + base + "/login?token=" + httpapi.OperatorToken(secret) + "\n"
	if code != 0 || stdout != want {
		t.Fatalf("dashboard: exit %d, stdout %q, want %q; stderr:\n%s", code, stdout, want, stderr)
	}
	// The printed URL logs in: the session cookie it sets lets a browser ask who it is.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(strings.TrimSuffix(stdout[2:], "\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp, err = browser.Get(base + "/api/v1/whoami"); err != nil {
		t.Fatal(err)
	}
	var who struct{ Name, Role string }
	err = json.NewDecoder(resp.Body).Decode(&who)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil || who.Role != "operator" {
		t.Errorf("whoami after logging in with the printed URL: %s %+v (%v), want the operator", resp.Status, who, err)
	}
	if code, stdout, _ := runNode(t, "dashboard", "--token", "--client", "alice"); code != 0 || stdout != httpapi.ClientToken(secret, "alice")+"\n" {
		t.Errorf("dashboard --token --client alice: exit %d, %q", code, stdout)
	}
	for _, args := range [][]string{{"dashboard"}, {"dashboard", "--token", "--client", "a/b"}} {
		if code, _, stderr := runNode(t, args...); code != 2 || !strings.Contains(stderr, "didnmf: ") {
			t.Errorf("%q: exit %d, want 2 with a message; stderr %q", args, code, stderr)
		}
	}
}
