package nodeview

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/httpapi"
	"github.com/didnmf/didnmf/matio"
)

// TestSubmitErrorsNameJSONKeys: a job the node refuses for a path (outside its data roots, a
// file missing under them), submitted over HTTP, is a 400 whose message names the spec's
// JSON key, not the CLI's flag, with field set: the node's error crosses the wire as a
// template, and the API renders it with its own names (the CLI's test is
// internal/cli's TestNodeErrorsNameFlags).
func TestSubmitErrorsNameJSONKeys(t *testing.T) {
	root := t.TempDir()
	members := startClusterWith(t, root, "a", "b")
	v, err := New(Config{Server: members[0], Refresh: 50 * time.Millisecond, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	waitFor(t, 10*time.Second, "the node is ready", func() bool { return v.Ready() == nil && len(states(t, v)) == 2 })
	secret := []byte("a secret of the test, thirty-two bytes or more")
	srv, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0", Backend: v, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	x := filepath.Join(root, "x.npy")
	var buf bytes.Buffer
	if err := matio.WriteNPY(&buf, 8, 3, make([]float64, 24)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(x, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	for _, tc := range []struct {
		name, body, field, message string
	}{
		{"input outside the roots", `{"input": "/etc/passwd", "rank": 2}`, "input",
			"input /etc/passwd is outside the node's data roots (" + root + "): use a path under one of them (or start the node with serve --data-root DIR)"},
		{"input missing", `{"input": "` + root + `/absent.npy", "rank": 2}`, "input",
			"input " + root + "/absent.npy: no such file or directory"},
		{"out_shared outside the roots", `{"input": "` + x + `", "rank": 2, "out_shared": "` + outside + `/out"}`, "out_shared",
			"out_shared " + outside + "/out is outside the node's data roots (" + root + "): use a path under one of them (or start the node with serve --data-root DIR)"},
		{"init_basis missing", `{"input": "` + x + `", "rank": 2, "init": "custom", "init_basis": "` + root + `/b.npy", "init_coef": "` + root + `/c.npy"}`,
			"init_basis", "init_basis " + root + "/b.npy: no such file or directory"},
		{"init_coef outside the roots", `{"input": "` + x + `", "rank": 2, "init": "custom", "init_basis": "` + x + `", "init_coef": "/etc/c.npy"}`,
			"init_coef", "init_coef /etc/c.npy is outside the node's data roots"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/api/v1/jobs", strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+httpapi.OperatorToken(secret))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, req)
			var ev httpapi.ErrorView
			if err := json.Unmarshal(rec.Body.Bytes(), &ev); err != nil || rec.Code != http.StatusBadRequest {
				t.Fatalf("%d %s (%v)", rec.Code, rec.Body, err)
			}
			if ev.Kind != "user" || ev.Field != tc.field || !strings.HasPrefix(ev.Message, tc.message) || strings.Contains(ev.Message, "--"+strings.ReplaceAll(tc.field, "_", "-")) {
				t.Errorf("got %+v\nwant kind user, field %s, message %s", ev, tc.field, tc.message)
			}
		})
	}
}
