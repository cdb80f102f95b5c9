package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/didnmf/didnmf/internal/httpapi"
	"github.com/didnmf/didnmf/internal/proccluster"
	"github.com/didnmf/didnmf/pki"
)

// lockedBuffer is a node's standard output, written by the process's copier while the test
// reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// webNode is a `didnmf serve --http` process: its base URL and the login URL it printed.
type webNode struct {
	*serveProc
	stdout   *lockedBuffer
	base     string // http://127.0.0.1:PORT
	loginURL string // base + /login?token=...
	token    string // the operator token of the login URL
}

// servingLine is what serve prints on a stdout that is no terminal: the address, not the
// token (didnmf dashboard prints the login URL).
var servingLine = regexp.MustCompile(`/metrics of node \S+ at (http://[0-9.:]+) \(its login URL, with the token: didnmf dashboard`)

// startWebNode starts `didnmf serve --http 127.0.0.1:0` named name, reading and writing job
// files under root, with extra args, and waits until it printed its login URL (on stdout
// only; the log has the address without the token).
func startWebNode(t *testing.T, name, root string, extra ...string) *webNode {
	t.Helper()
	args := append([]string{"serve", "--bind", "127.0.0.1:0", "--name", name, "--data-dir", filepath.Join(t.TempDir(), name),
		"--threads", "1", "--http", "127.0.0.1:0", "--data-root", root}, extra...)
	out := &lockedBuffer{}
	p := startServeWith(t, proccluster.Options{Stdout: out}, name, args)
	n := p.Node
	w := &webNode{serveProc: p, stdout: out}
	waitFor(t, name+"'s address on stdout", 10*time.Second, func() bool {
		m := servingLine.FindStringSubmatch(out.String())
		if m != nil {
			w.base = m[1]
		}
		return m != nil
	}, func() string { return "stdout: " + out.String() + "\nlog: " + n.Log() })
	w.token = httpapi.OperatorToken(testSecret(t))
	w.loginURL = w.base + "/login?token=" + w.token
	if strings.Contains(out.String(), w.token) {
		t.Errorf("%s printed the operator token on a stdout that is no terminal", name)
	}
	if r, err := n.WaitFor(5*time.Second, "dashboard and HTTP API"); err != nil || r.Attr("url") != w.base {
		t.Fatalf("%s's log names the URL %q, its stdout %q (%v)", name, r.Attr("url"), w.base, err)
	}
	if strings.Contains(n.Log(), w.token) {
		t.Errorf("%s's log holds the operator token", name)
	}
	return w
}

// startWebCluster starts nodes of these names with --http, each after the first joining it.
func startWebCluster(t *testing.T, root string, names []string, extra ...string) []*webNode {
	t.Helper()
	var nodes []*webNode
	for i, name := range names {
		args := extra
		if i > 0 {
			args = append(slices.Clone(extra), "--join", nodes[0].Gossip)
		}
		nodes = append(nodes, startWebNode(t, name, root, args...))
	}
	return nodes
}

// api is an HTTP client of one node with one credential ("" for none).
type api struct {
	t     *testing.T
	base  string
	token string
}

func (c api) do(method, path string, body string) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	cl := &http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// get GETs path and decodes its JSON into v, failing unless the status is 200.
func (c api) get(path string, v any) {
	c.t.Helper()
	code, b := c.do("GET", path, "")
	if code != http.StatusOK {
		c.t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			c.t.Fatalf("GET %s: %v\n%s", path, err, b)
		}
	}
}

// submit POSTs a job spec and returns its id.
func (c api) submit(spec string) string {
	c.t.Helper()
	code, b := c.do("POST", "/api/v1/jobs", spec)
	var got struct{ ID, URL string }
	if code != http.StatusAccepted || json.Unmarshal(b, &got) != nil || got.ID == "" || got.URL != "/api/v1/jobs/"+got.ID {
		c.t.Fatalf("POST /api/v1/jobs %s: %d %s", spec, code, b)
	}
	return got.ID
}

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data string
}

// follow reads the job's progress stream to its end event (or its close) and returns the
// events in order.
func (c api) follow(id string, limit time.Duration) []sseEvent {
	c.t.Helper()
	req, err := http.NewRequest("GET", c.base+"/api/v1/jobs/"+id+"/events", nil)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	cl := &http.Client{Timeout: limit}
	resp, err := cl.Do(req)
	if err != nil {
		c.t.Fatalf("events of %s: %v", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		c.t.Fatalf("events of %s: %d %s %s", id, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var events []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name != "" || cur.data != "" {
				events = append(events, cur)
				if cur.name == "end" {
					return events
				}
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, ":"), strings.HasPrefix(line, "retry:"):
		case strings.HasPrefix(line, "event:"):
			cur.name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if cur.data != "" {
				cur.data += "\n"
			}
			cur.data += strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		}
	}
	c.t.Fatalf("events of %s: the stream closed without an end event (%v) after %d events", id, sc.Err(), len(events))
	return nil
}

// output GETs one output of a job.
func (c api) output(id, name string) []byte {
	c.t.Helper()
	code, b := c.do("GET", "/api/v1/jobs/"+id+"/outputs/"+name, "")
	if code != http.StatusOK {
		c.t.Fatalf("output %s of %s: %d %s", name, id, code, b)
	}
	return b
}

// testSecret is the cluster secret the nodes of this test read (isolateGossip's).
func testSecret(t *testing.T) []byte {
	t.Helper()
	secret, err := pki.LoadSecret(os.Getenv(pki.SecretFileEnv))
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// TestHTTPAPIEndToEnd: three `didnmf serve --http` processes; a client of node a's API with
// the operator token it printed sees the members, submits a job, follows its progress stream
// to the end and fetches its outputs, bit for bit those of `factorize --cluster` for the same
// job; a detached job writes its files into out_shared; /metrics parses with Prometheus's
// own parser and counts the iterations; a client token sees only its own jobs; no token is
// refused, a bad spec names its field; and `didnmf jobs --all` lists an HTTP client's job as
// the same-named CLI user's.
func TestHTTPAPIEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes")
	}
	isolateGossip(t)
	root := t.TempDir()
	nodes := startWebCluster(t, root, []string{"a", "b", "c"})
	a := nodes[0]
	op := api{t: t, base: a.base, token: a.token}
	secret := testSecret(t)
	if a.token != httpapi.OperatorToken(secret) {
		t.Errorf("the login URL's token is not the operator token of the cluster secret")
	}

	// The cluster: 3 alive members, each with its version and its own HTTP URL.
	var cv httpapi.ClusterView
	waitFor(t, "3 alive members in a's /api/v1/cluster", 30*time.Second, func() bool {
		op.get("/api/v1/cluster", &cv)
		alive := 0
		for _, m := range cv.Members {
			if m.State == "alive" {
				alive++
			}
		}
		return alive == 3 && len(cv.Members) == 3
	}, func() string { return fmt.Sprintf("%+v", cv) })
	if cv.Self != "a" || cv.Version == "" {
		t.Errorf("cluster: self %q version %q", cv.Self, cv.Version)
	}
	for _, n := range nodes {
		i := slices.IndexFunc(cv.Members, func(m httpapi.MemberView) bool { return m.Name == n.name })
		if i < 0 {
			t.Fatalf("no member %s in %+v", n.name, cv.Members)
		}
		m := cv.Members[i]
		if m.Version == "" || m.HTTP != n.base || m.Actor != n.Actor || m.Gossip != n.Gossip || m.Role != "member" {
			t.Errorf("member %s: %+v (its URL %s, actor %s, gossip %s)", n.name, m, n.base, n.Actor, n.Gossip)
		}
	}

	// Credentials: none, a wrong one, and a bad spec.
	for _, path := range []string{"/api/v1/cluster", "/api/v1/jobs", "/metrics"} {
		if code, b := (api{t: t, base: a.base}).do("GET", path, ""); code != http.StatusUnauthorized || !strings.Contains(string(b), `"kind":"auth"`) {
			t.Errorf("GET %s without a token: %d %s", path, code, b)
		}
	}
	if code, b := (api{t: t, base: a.base, token: strings.Repeat("0", 64)}).do("GET", "/api/v1/jobs", ""); code != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d %s", code, b)
	}
	if code, b := (api{t: t, base: a.base}).do("POST", "/api/v1/jobs", `{"input":"synthetic:m=4,n=100,k=2,seed=1","rank":2}`); code != http.StatusUnauthorized {
		t.Errorf("a submission without a token: %d %s", code, b)
	}
	for _, bad := range []struct{ spec, field string }{
		{`{"input":"synthetic:m=4,n=100,k=2,seed=1","rank":2,"shardz":3}`, "shardz"},
		{`{"input":"synthetic:m=4,n=100,k=2,seed=1","rank":-1}`, "rank"},
		{`{"input":"synthetic:m=4,n=100,k=2,seed=1","rank":2,"max_iter":"many"}`, "max_iter"},
		{`{"rank":2}`, "input"},
	} {
		code, b := op.do("POST", "/api/v1/jobs", bad.spec)
		var ev httpapi.ErrorView
		if code != http.StatusBadRequest || json.Unmarshal(b, &ev) != nil || ev.Kind != "user" || ev.Field != bad.field || !strings.Contains(ev.Message, bad.field) {
			t.Errorf("bad spec %s: %d %s (want 400, kind user, field %s named in the message)", bad.spec, code, b, bad.field)
		}
	}

	// A job through the API, followed to its end; its outputs are the CLI's bits.
	const input = "synthetic:m=6,n=40000,k=3,seed=2"
	spec := fmt.Sprintf(`{"input":%q,"rank":3,"shards":6,"seed":11,"max_iter":25,"tol":0}`, input)
	golden := filepath.Join(t.TempDir(), "golden")
	if code, text := runProc(t, "factorize", "--cluster", nodes[1].Gossip, "--input", input, "--rank", "3", "--shards", "6", "--seed", "11",
		"--max-iter", "25", "--tol", "0", "--quiet", "--out", golden); code != 0 {
		t.Fatalf("factorize --cluster: exit %d: %s", code, text)
	}
	id := op.submit(spec)
	events := op.follow(id, 60*time.Second)
	if events[0].name != "job" {
		t.Errorf("the stream's first event is %q, not job", events[0].name)
	}
	var end httpapi.JobView
	if err := json.Unmarshal([]byte(events[len(events)-1].data), &end); err != nil {
		t.Fatalf("end event: %v\n%s", err, events[len(events)-1].data)
	}
	if end.ID != id || end.State != "done" || end.Iteration != 25 || end.Owner != "operator" || end.Shards != 6 || len(end.ShardNodes) != 6 || end.Detached {
		t.Errorf("end event: %+v", end)
	}
	for _, name := range []string{"coef.npy", "basis.npy"} {
		if want, got := mustRead(t, filepath.Join(golden, name)), op.output(id, name); !bytes.Equal(want, got) {
			t.Errorf("%s over HTTP (%d bytes) differs from factorize --cluster's (%d bytes)", name, len(got), len(want))
		}
	}
	var rep struct {
		Iterations int64 `json:"iterations"`
	}
	if err := json.Unmarshal(op.output(id, "report.json"), &rep); err != nil || rep.Iterations != 25 {
		t.Errorf("report.json over HTTP: %+v %v", rep, err)
	}
	var one httpapi.JobView
	op.get("/api/v1/jobs/"+id, &one)
	if one.State != "done" || len(one.History) == 0 || !slices.Contains(one.Outputs, "coef.npy") {
		t.Errorf("GET the job: state %s, %d history points, outputs %v", one.State, len(one.History), one.Outputs)
	}

	// A detached job (out_shared under the data root) writes its files there.
	shared := filepath.Join(root, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	detached := op.submit(fmt.Sprintf(`{"input":%q,"rank":3,"shards":6,"seed":11,"max_iter":25,"tol":0,"out_shared":%q}`, input, shared))
	if ev := op.follow(detached, 60*time.Second); !strings.Contains(ev[len(ev)-1].data, `"state":"done"`) {
		t.Errorf("the detached job's end: %s", ev[len(ev)-1].data)
	}
	waitFor(t, "the detached job's report.json in out_shared", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(shared, "report.json"))
		return err == nil
	})
	sameFiles(t, filepath.Join(golden, "coef.npy"), filepath.Join(shared, "coef.npy"))
	sameFiles(t, filepath.Join(golden, "basis.npy"), filepath.Join(shared, "basis.npy"))

	// /metrics of each node parses with Prometheus's own parser; the iterations are counted.
	iterations := 0.0
	for _, n := range nodes {
		code, b := (api{t: t, base: n.base, token: n.token}).do("GET", "/metrics", "")
		if code != http.StatusOK {
			t.Fatalf("/metrics of %s: %d %s", n.name, code, b)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("/metrics of %s does not parse: %v", n.name, err)
		}
		for _, name := range []string{"didnmf_members", "didnmf_jobs", "didnmf_iterations_total", "didnmf_build_info"} {
			if families[name] == nil {
				t.Errorf("/metrics of %s has no %s", n.name, name)
			}
		}
		if f := families["didnmf_iterations_total"]; f != nil && len(f.Metric) > 0 {
			iterations += f.Metric[0].GetCounter().GetValue()
		}
	}
	if iterations < 25 {
		t.Errorf("didnmf_iterations_total over the nodes: %v, after jobs of 25 iterations", iterations)
	}

	// A client token sees the cluster and only its own jobs; another's job is a 404.
	alice := api{t: t, base: a.base, token: httpapi.ClientToken(secret, "alice")}
	var who struct{ Name, Role string }
	alice.get("/api/v1/whoami", &who)
	if who.Name != "alice" || who.Role != "client" {
		t.Errorf("alice's whoami: %+v", who)
	}
	alice.get("/api/v1/cluster", &cv)
	aliceJob := alice.submit(`{"input":"synthetic:m=4,n=2000,k=2,seed=3","rank":2,"shards":2,"max_iter":5,"tol":0}`)
	if ev := alice.follow(aliceJob, 60*time.Second); !strings.Contains(ev[len(ev)-1].data, `"owner":"alice"`) {
		t.Errorf("alice's job's end: %s", ev[len(ev)-1].data)
	}
	var list struct{ Jobs []httpapi.JobView }
	alice.get("/api/v1/jobs", &list)
	if len(list.Jobs) != 1 || list.Jobs[0].ID != aliceJob || list.Jobs[0].Owner != "alice" {
		t.Errorf("alice lists %+v, want only her job %s", list.Jobs, aliceJob)
	}
	for _, path := range []string{"/api/v1/jobs/" + id, "/api/v1/jobs/" + id + "/outputs/coef.npy", "/api/v1/jobs/" + id + "/events"} {
		if code, b := alice.do("GET", path, ""); code != http.StatusNotFound || strings.Contains(string(b), "operator") {
			t.Errorf("alice GETs the operator's %s: %d %s", path, code, b)
		}
	}
	if code, b := alice.do("GET", "/metrics", ""); code != http.StatusForbidden {
		t.Errorf("alice GETs /metrics: %d %s", code, b)
	}
	op.get("/api/v1/jobs", &list)
	var ids []string
	for _, j := range list.Jobs {
		ids = append(ids, j.ID+"/"+j.Owner)
	}
	for _, want := range []string{id + "/operator", detached + "/operator", aliceJob + "/alice"} {
		if !slices.Contains(ids, want) {
			t.Errorf("the operator lists %v, without %s", ids, want)
		}
	}

	// The nodes record an HTTP job as the identity that submitted it: the operator's are
	// "operator"'s, a client's its name. `didnmf jobs --all` as this user (a client of the
	// cluster secret, named after the login) lists the job an HTTP client of that name
	// submitted, owner and outcome.
	me := userName(t)
	mine := api{t: t, base: nodes[2].base, token: httpapi.ClientToken(secret, me)}
	myJob := mine.submit(`{"input":"synthetic:m=4,n=2000,k=2,seed=3","rank":2,"shards":2,"max_iter":5,"tol":0}`)
	mine.follow(myJob, 60*time.Second)
	code, stdout, stderr := runNode(t, "jobs", "--all", "--cluster", a.Gossip, "--json")
	if code != 0 {
		t.Fatalf("jobs --all: exit %d: %s", code, stderr)
	}
	var cli struct {
		Jobs []struct {
			JobID       string `json:"job_id"`
			Owner       string `json:"owner"`
			EndedUnixMs int64  `json:"ended_unix_ms"`
		}
	}
	if err := json.Unmarshal([]byte(stdout), &cli); err != nil {
		t.Fatalf("jobs --all --json: %v\n%s", err, stdout)
	}
	found := false
	for _, j := range cli.Jobs {
		if j.JobID == myJob {
			found = true
			if j.Owner != me || j.EndedUnixMs == 0 {
				t.Errorf("jobs --all lists %s as %+v", myJob, j)
			}
		}
		if j.Owner != me {
			t.Errorf("jobs --all as %s lists another's job: %+v", me, j)
		}
	}
	if !found {
		t.Errorf("jobs --all as %s does not list the job %s an HTTP client %s submitted:\n%s", me, myJob, me, stdout)
	}
	code, stdout, _ = runNode(t, "jobs", "--all", "--cluster", a.Gossip)
	if code != 0 || !strings.Contains(stdout, myJob) || !strings.Contains(stdout, "done") {
		t.Errorf("jobs --all (table): exit %d:\n%s", code, stdout)
	}
}

// userName is the login name the CLI's clients submit as (the owner of their jobs).
func userName(t *testing.T) string {
	t.Helper()
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return fmt.Sprintf("uid-%d", os.Getuid())
}
