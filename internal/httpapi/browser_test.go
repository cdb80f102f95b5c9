package httpapi

// The dashboard in a real browser: Debian's chromium, headless, driven through the DevTools
// protocol with chromedp. The test logs in with the login URL, sees the members, follows a
// running job's iterations over server-sent events, sees a member die (its row, the warning,
// the failure and the recovery on the job's timeline), checks the phone-width layout, the
// ended job's outputs and pictures, the escaping of hostile strings, the cancel button, and
// the "node went away" banner and its retry; it saves screenshots (DIDNMF_SCREENSHOT names
// the desktop one; the phone one is beside it with "-390" before the extension).
//
// The service is the real one (New) over a backend the test drives (dashBackend); the network
// between the browser and it is cut and healed by the test (cuttableListener).
//
// Skipped when no chromium is found: apt-get install -y chromium (or set DIDNMF_CHROMIUM to
// the binary).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/browsertest"

	"github.com/chromedp/chromedp"

	"github.com/didnmf/didnmf/internal/jobspec"
)

// ---- a fake Backend the test drives step by step ----

// dashBackend is a cluster of three members and a few jobs whose state the test changes
// explicitly (advance, kill), each change waking the streams through Updated.
type dashBackend struct {
	mu       sync.Mutex
	cluster  ClusterView
	jobs     []*JobView // full, with history and events
	outputs  map[string][]byte
	updated  chan struct{}
	canceled []string
}

var _ Backend = (*dashBackend)(nil)

const hostileOwner = `<img src=x onerror="window.pwned=1">`

func newDashBackend(t *testing.T, selfHTTP string) *dashBackend {
	t.Helper()
	now := time.Now().UnixMilli()
	b := &dashBackend{updated: make(chan struct{}), outputs: map[string][]byte{}}
	member := func(name, actor, http string, offered, reserved int64, load float64) MemberView {
		return MemberView{
			Name: name, State: "alive", Role: "member", Gossip: actor[:strings.LastIndex(actor, ":")] + ":7946",
			Actor: actor, HTTP: http, Machine: "host-" + name, Version: "v0.33.0", Cores: 8, Threads: 16,
			MemoryOffered: offered, MemoryReserved: reserved, Jobs: 1, Shards: 2, Actors: 5, Load: load,
			StartedUnixMs: now - 3600_000,
		}
	}
	b.cluster = ClusterView{
		Self: "n1", Version: "v0.33.0", UnixMs: now,
		Members: []MemberView{
			member("n1", "10.0.0.1:8090", selfHTTP, 8<<30, 3<<30, 0.42),
			member("n2", "10.0.0.2:8090", "http://127.0.0.2:8265/", 8<<30, 7<<30+900<<20, 0.91),
			member("n3", "10.0.0.3:8090", "", 16<<30, 1<<30, 0.05),
		},
	}
	run := &JobView{
		ID: "job-run", Owner: "alice", Coordinator: "n1", Algorithm: "mu", Rank: 12, Shards: 4,
		Samples: 60000, Features: 784, State: "running", MaxIter: 100, StopRule: "max_iter 100 or tol 1e-6",
		ShardNodes:      []string{"10.0.0.1:8090", "10.0.0.2:8090", "10.0.0.3:8090", "10.0.0.1:8090"},
		SubmittedUnixMs: now - 30_000, Epoch: 1,
		Events: []EventView{{UnixMs: now - 30_000, Kind: "started", Text: "4 shards placed"}},
		Spec:   map[string]any{"input": []string{"/data/<b>x</b>.npy"}, "rank": 12, "algorithm": "mu"},
	}
	b.jobs = append(b.jobs, run)
	b.advanceLocked(run, 5)
	done := &JobView{
		ID: "job-done", Owner: "bob", Coordinator: "n2", Algorithm: "hals", Rank: 8, Shards: 2,
		Samples: 1000, Features: 300, State: "done", Iteration: 200, MaxIter: 200, RelErr2: 0.0123,
		StopRule: "max_iter 200", Stop: "max_iter reached", ShardNodes: []string{"10.0.0.2:8090", "10.0.0.3:8090"},
		SubmittedUnixMs: now - 600_000, EndedUnixMs: now - 500_000, Checkpoints: 2,
		Outputs: []string{"report.json", "coef.npy", "basis.npy", "figures/convergence.png"},
		Events: []EventView{
			{UnixMs: now - 600_000, Kind: "started"},
			{UnixMs: now - 560_000, Kind: "checkpoint", Iteration: 100},
			{UnixMs: now - 500_000, Kind: "ended", Iteration: 200, Text: "max_iter reached"},
		},
	}
	for i := int64(0); i <= 200; i += 10 {
		done.History = append(done.History, PointView{Iteration: i, Seconds: float64(i) / 2,
			RelErr2: 0.9*pow(0.97, i) + 0.0123, TestRelErr2: 0.95*pow(0.97, i) + 0.02})
	}
	failed := &JobView{
		ID: "job-failed", Owner: hostileOwner, Coordinator: "n1", Algorithm: "mu", Rank: 3, Shards: 1,
		State: "failed", Iteration: 7, MaxIter: 50, SubmittedUnixMs: now - 900_000, EndedUnixMs: now - 899_000,
		Error: &ErrorView{Kind: "user", Field: "input", Message: "input: row 3 column 2: value -1 is negative " + hostileOwner},
	}
	b.jobs = append(b.jobs, done, failed)
	b.outputs["job-done/report.json"] = []byte(`{"iterations":200}`)
	b.outputs["job-done/coef.npy"] = []byte("\x93NUMPY fake")
	b.outputs["job-done/basis.npy"] = []byte("\x93NUMPY fake")
	b.outputs["job-done/figures/convergence.png"] = testPNG(t)
	return b
}

func pow(x float64, n int64) float64 {
	r := 1.0
	for range n {
		r *= x
	}
	return r
}

// testPNG is a small real picture, so that the page's <img> decodes it.
func testPNG(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 160, 90))
	for y := range 90 {
		for x := range 160 {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y * 2), 180, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// notifyLocked wakes every stream waiting on Updated.
func (b *dashBackend) notifyLocked() {
	b.cluster.UnixMs = time.Now().UnixMilli()
	close(b.updated)
	b.updated = make(chan struct{})
}

func (b *dashBackend) advanceLocked(j *JobView, n int) {
	for range n {
		j.Iteration++
		j.RelErr2 = 0.8*pow(0.9, j.Iteration) + 1e-4
		j.Seconds = float64(j.Iteration) * 0.25
		j.History = append(j.History, PointView{Iteration: j.Iteration, Seconds: j.Seconds, RelErr2: j.RelErr2})
	}
	j.Rate = 4
	j.ETASeconds = float64(j.MaxIter-j.Iteration) / j.Rate
}

// advance runs job id n iterations further.
func (b *dashBackend) advance(id string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advanceLocked(b.findLocked(id), n)
	b.notifyLocked()
}

// kill marks member name dead, warns, and puts a failure and its recovery on the running
// job's timeline (its shard there moved to n1), as a node's view would after a crash.
func (b *dashBackend) kill(name, jobID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var actor string
	for i := range b.cluster.Members {
		m := &b.cluster.Members[i]
		if m.Name == name {
			m.State, m.Load, m.Error, actor = "dead", 0, "no answer: member is dead", m.Actor
		}
	}
	b.cluster.Warnings = append(b.cluster.Warnings, "member "+name+" is dead", "a hostile warning "+hostileOwner)
	j := b.findLocked(jobID)
	now := time.Now().UnixMilli()
	j.Events = append(j.Events,
		EventView{UnixMs: now - 2000, Kind: "checkpoint", Iteration: j.Iteration - 2},
		EventView{UnixMs: now - 1000, Kind: "failure", Iteration: j.Iteration, Text: "member " + name + " died: shard 2 lost"},
		EventView{UnixMs: now, Kind: "recovered", Iteration: j.Iteration - 2, Text: "shard 2 moved to n1; resumed from the checkpoint"})
	for i, a := range j.ShardNodes {
		if a == actor {
			j.ShardNodes[i] = b.cluster.Members[0].Actor
		}
	}
	j.Recoveries++
	j.Checkpoints++
	j.Epoch++
	b.notifyLocked()
}

func (b *dashBackend) findLocked(id string) *JobView {
	for _, j := range b.jobs {
		if j.ID == id {
			return j
		}
	}
	return nil
}

func (b *dashBackend) canceledIDs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.canceled)
}

func copyJob(j *JobView, detail bool) JobView {
	c := *j
	c.ShardNodes = slices.Clone(j.ShardNodes)
	c.Outputs = slices.Clone(j.Outputs)
	if j.Error != nil {
		e := *j.Error
		c.Error = &e
	}
	c.History, c.Events = nil, nil
	if detail {
		c.History = slices.Clone(j.History)
		c.Events = slices.Clone(j.Events)
	}
	return c
}

func (b *dashBackend) Cluster(ctx context.Context) (ClusterView, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.cluster
	c.Members = slices.Clone(b.cluster.Members)
	c.Warnings = slices.Clone(b.cluster.Warnings)
	return c, nil
}

func (b *dashBackend) Jobs(ctx context.Context, owner string) ([]JobView, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []JobView
	for _, j := range b.jobs {
		if owner == "" || j.Owner == owner {
			out = append(out, copyJob(j, false))
		}
	}
	return out, nil
}

func (b *dashBackend) Job(ctx context.Context, id string) (JobView, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if j := b.findLocked(id); j != nil {
		return copyJob(j, true), nil
	}
	return JobView{}, ErrNotFound
}

func (b *dashBackend) Submit(ctx context.Context, owner string, spec *jobspec.Spec) (string, error) {
	return "", errors.New("the browser test's backend takes no submissions")
}

func (b *dashBackend) Cancel(ctx context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	j := b.findLocked(id)
	if j == nil || j.EndedUnixMs != 0 {
		return ErrNotFound
	}
	b.canceled = append(b.canceled, id)
	j.State, j.EndedUnixMs, j.Stop = "canceled", time.Now().UnixMilli(), "canceled"
	j.Error = &ErrorView{Kind: "canceled", Message: "canceled by its owner"}
	j.Events = append(j.Events, EventView{UnixMs: j.EndedUnixMs, Kind: "ended", Iteration: j.Iteration, Text: "canceled"})
	b.notifyLocked()
	return nil
}

func (b *dashBackend) Output(ctx context.Context, id, name string) (io.ReadCloser, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, ok := b.outputs[id+"/"+name]
	if !ok {
		return nil, ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (b *dashBackend) Ready() error { return nil }

func (b *dashBackend) Updated() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.updated
}

// ---- the network between the browser and the node, cut and healed at will ----

// cuttableListener accepts connections until cut: then it closes every open one (the
// streams too) and every new one at once, as a node the browser cannot reach, until healed.
// The service behind it keeps running (and keeps its sessions).
type cuttableListener struct {
	net.Listener
	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

// newCuttableListener listens on addr (retrying a little: the address may be one a closed
// server just left).
func newCuttableListener(t *testing.T, addr string) *cuttableListener {
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &cuttableListener{Listener: ln, conns: map[net.Conn]struct{}{}}
}

func (l *cuttableListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if l.down {
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.conns[c] = struct{}{}
		l.mu.Unlock()
		return &trackedConn{Conn: c, l: l}, nil
	}
}

func (l *cuttableListener) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.down = true
	for c := range l.conns {
		c.Close()
	}
	clear(l.conns)
}

func (l *cuttableListener) heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.down = false
}

type trackedConn struct {
	net.Conn
	l *cuttableListener
}

func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c.Conn)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// dashboardUnderTest is the service the browser talks to and the test's levers on it.
type dashboardUnderTest struct {
	url      string // base URL
	loginURL string // the URL with ?token= that serve prints
	ln       *cuttableListener
	// restart restarts the service on the same address (reachable again), its sessions
	// forgotten, as a node that restarted.
	restart func()
}

// startDashboard serves the page and the API with the service (New) over b, on loopback as
// `serve --http 127.0.0.1:PORT` does, with a cluster secret.
func startDashboard(t *testing.T, b *dashBackend) *dashboardUnderTest {
	secret := []byte("the browser test's cluster secret, 32+ bytes")
	d := &dashboardUnderTest{ln: newCuttableListener(t, "127.0.0.1:0")}
	addr := d.ln.Addr().String()
	var srv *Server
	start := func() {
		var err error
		if srv, err = New(Config{Addr: addr, Backend: b, Secret: secret}); err != nil {
			t.Fatal(err)
		}
		go srv.Serve(d.ln)
		d.url, d.loginURL = srv.URL(), srv.LoginURL()
	}
	start()
	t.Cleanup(func() { srv.Close() })
	d.restart = func() {
		srv.Close()
		d.ln = newCuttableListener(t, addr)
		start()
	}
	return d
}

// ---- the test ----

func TestDashboardInBrowser(t *testing.T) {
	br := browsertest.New(t)
	desktopShot, phoneShot := browsertest.ScreenshotPaths(t)

	b := newDashBackend(t, "")
	d := startDashboard(t, b)
	// The member list names this node's own URL, known once it listens.
	b.mu.Lock()
	b.cluster.Members[0].HTTP = d.url + "/"
	b.mu.Unlock()

	// Without a session, the page is the login form.
	br.Do("open the page without a session", chromedp.Navigate(d.url+"/"))
	br.Wait("login form", `document.querySelector('#login-form input[name=token]') !== null`, `document.body.innerText`)

	// A wrong token: the form says so, and the token leaves the address bar.
	br.Do("log in with a wrong token", chromedp.Navigate(d.url+"/login?token="+strings.Repeat("0", 64)))
	br.Wait("token refused", `!document.getElementById('login-error').hidden && location.search === ''`,
		`location.href + ' ' + document.body.innerText`)

	// The printed URL logs in and lands on the dashboard with the members.
	br.Do("log in", chromedp.Navigate(d.loginURL))
	br.Wait("members listed",
		`document.querySelectorAll('#members tbody tr[data-member]').length === 3`,
		`document.querySelector('#members').innerText`)
	if got := br.Eval(`location.pathname + location.search`); got != "/" {
		t.Errorf("after login the address bar holds %q, want / (the token must leave it)", got)
	}
	if got := br.Eval(`document.getElementById('node-name').textContent`); got != "n1" {
		t.Errorf("header node name = %q, want n1", got)
	}
	if got := br.Eval(`document.getElementById('whoami').textContent`); !strings.Contains(got, "operator") {
		t.Errorf("whoami = %q, want the operator", got)
	}
	for _, m := range []string{"n1", "n2", "n3"} {
		if got := br.Eval(`document.querySelector('#members tr[data-member="` + m + `"] .state').className`); !strings.Contains(got, "state-alive") {
			t.Errorf("member %s state badge class %q, want state-alive", m, got)
		}
	}
	if got := br.Eval(`document.querySelector('#members tr[data-member="n2"] a') && document.querySelector('#members tr[data-member="n2"] a').href`); got != "http://127.0.0.2:8265/" {
		t.Errorf("n2's name links to %q, want its HTTP URL", got)
	}
	if got := br.Eval(`document.querySelector('#members tr[data-member="n3"] a') === null`); got != "true" {
		t.Errorf("n3 serves no HTTP but its name is a link")
	}
	// n2 has nearly all its memory reserved: its bar says so.
	if got := br.Eval(`document.querySelector('#members tr[data-member="n2"] .bar-fill').className`); !strings.Contains(got, "full") {
		t.Errorf("n2's memory bar class %q, want full (7.9 of 8 GiB reserved)", got)
	}

	// Jobs: running and ended in their tables; hostile strings stay text.
	br.Wait("jobs listed", `document.querySelector('#running tr[data-job="job-run"]') && document.querySelector('#ended tr[data-job="job-done"]') && document.querySelector('#ended tr[data-job="job-failed"]')`,
		`document.querySelector('#jobs-section').innerText`)
	if got := br.Eval(`document.querySelector('#ended tr[data-job="job-failed"] td[data-label=owner]').textContent`); got != hostileOwner {
		t.Errorf("hostile owner shown as %q, want the text itself", got)
	}
	if got := br.Eval(`document.querySelectorAll('img[src="x"]').length + ':' + (window.pwned === undefined)`); got != "0:true" {
		t.Errorf("a string from the API became markup: imgs:pwned-undefined = %s", got)
	}
	if got := br.Eval(`document.querySelector('#ended tr[data-job="job-failed"] td[data-label=error]').textContent`); !strings.Contains(got, "row 3 column 2") || !strings.Contains(got, "input") {
		t.Errorf("failed job's error shown as %q", got)
	}
	if got := br.Eval(`document.querySelector('#running tr[data-job="job-run"] td[data-label="shards on"]').textContent`); !strings.Contains(got, "n1: shard 0, 3") || !strings.Contains(got, "n3: shard 2") {
		t.Errorf("running job's shard places %q, want them by member name", got)
	}

	// Follow the running job: its iteration advances over the stream.
	br.Do("select the running job", chromedp.Click(chromedp.CSS(`#running tr[data-job="job-run"] td[data-label=owner]`)))
	br.Wait("job detail at iteration 5", `document.getElementById('detail-iteration').dataset.iteration === '5'`,
		`document.getElementById('job-detail').innerText`)
	// Its spec, as the API takes it, shown as text.
	br.Wait("the job's spec", `!document.getElementById('detail-spec').hidden &&
		JSON.parse(document.getElementById('detail-spec-json').textContent).input[0] === '/data/<b>x</b>.npy' &&
		document.querySelector('#detail-spec-json b') === null`, `document.getElementById('detail-spec').outerHTML`)
	b.advance("job-run", 7)
	br.Wait("iteration advances to 12", `document.getElementById('detail-iteration').dataset.iteration === '12' &&
		document.querySelector('#chart svg').dataset.points === '12' &&
		document.querySelector('#running tr[data-job="job-run"] .iter').textContent.startsWith('12 /')`,
		`document.getElementById('detail-iteration').textContent + ' | ' + document.querySelector('#running tr[data-job="job-run"]').innerText`)
	// The chart's y axis is a log axis with decade labels that do not overprint.
	ticks := br.Eval(`JSON.stringify([...document.querySelectorAll('#chart .tick-y')].map(t => [t.textContent, Math.round(t.getBBox().y), Math.round(t.getBBox().height)]))`)
	var yt [][]any
	if err := json.Unmarshal([]byte(ticks), &yt); err != nil || len(yt) < 2 {
		t.Fatalf("chart y ticks %s: want at least two decades (%v)", ticks, err)
	}
	for i := 1; i < len(yt); i++ {
		if !strings.HasPrefix(yt[i][0].(string), "10") {
			t.Errorf("y tick %q is not a power of ten", yt[i][0])
		}
		// Decades go up the axis: each label sits above the one before, clear of it.
		if below, above := yt[i-1][1].(float64), yt[i][1].(float64); below-above < yt[i][2].(float64) {
			t.Errorf("y tick labels overlap: %s", ticks)
		}
	}

	// A member dies: its row turns dead, the warning shows, the timeline has the failure and
	// the recovery, the shard moved.
	b.kill("n3", "job-run")
	br.Wait("n3 dead", `document.querySelector('#members tr[data-member="n3"]').dataset.state === 'dead' &&
		document.querySelector('#members tr[data-member="n3"] .state').classList.contains('state-dead')`,
		`document.querySelector('#members').innerText`)
	br.Wait("the lost shard shown on its new node", `document.querySelector('#running tr[data-job="job-run"] td[data-label="shards on"]').textContent.includes('n1: shard 0, 2, 3')`,
		`document.querySelector('#running tr[data-job="job-run"]').innerText`)
	br.Wait("warning banner", `!document.getElementById('warnings').hidden && document.getElementById('warnings').textContent.includes('member n3 is dead')`,
		`document.getElementById('warnings').outerHTML`)
	br.Wait("failure and recovery on the timeline", `document.querySelector('#timeline svg [data-kind=failure]') &&
		document.querySelector('#timeline svg [data-kind=recovered]') &&
		document.querySelector('#timeline-legend [data-kind=failure]') &&
		document.querySelector('#events tr[data-kind=failure]')`,
		`document.getElementById('timeline').innerHTML + document.getElementById('events').innerText`)
	if got := br.Eval(`document.querySelectorAll('img[src="x"]').length + ':' + (window.pwned === undefined)`); got != "0:true" {
		t.Errorf("a warning became markup: imgs:pwned-undefined = %s", got)
	}
	if got := br.Eval(`document.querySelector('#events tr[data-kind=failure] td[data-label=what]').textContent`); !strings.Contains(got, "member n3 died") {
		t.Errorf("failure event text %q", got)
	}
	if got := br.Eval(`[...document.querySelectorAll('#timeline svg text')].map(t => t.textContent).join(' ')`); !strings.Contains(got, "time since submission") || !strings.Contains(got, "0s") {
		t.Errorf("timeline's time axis labels: %q", got)
	}
	br.Do("timeline by iteration", chromedp.Click(chromedp.CSS(`input[name=tl-axis][value=iteration]`)))
	br.Wait("timeline redrawn by iteration", `[...document.querySelectorAll('#timeline svg text')].some(t => t.textContent === 'iteration')`,
		`document.getElementById('timeline').innerHTML`)
	br.Screenshot(desktopShot)

	// Phone width: the tables become cards and nothing scrolls sideways.
	br.Do("390 px", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	br.Wait("cards at 390 px", `getComputedStyle(document.querySelector('#members thead')).display === 'none' &&
		getComputedStyle(document.querySelector('#members tbody tr')).display === 'block'`,
		`window.innerWidth + ' ' + getComputedStyle(document.querySelector('#members thead')).display`)
	br.Wait("chart redrawn for 390 px", `+document.querySelector('#chart svg').getAttribute('width') <= 390`,
		`document.querySelector('#chart svg').getAttribute('width')`)
	if got := br.Eval(`document.documentElement.scrollWidth`); got != "390" {
		t.Errorf("at 390 px the page is %s px wide, want 390 (nothing may scroll sideways)", got)
	}
	br.Screenshot(phoneShot)
	br.Do("back to desktop", chromedp.EmulateViewport(1280, 900))

	// An ended job: its outputs as links and its pictures.
	br.Do("select the ended job", chromedp.Click(chromedp.CSS(`#ended tr[data-job="job-done"] td[data-label=owner]`)))
	br.Wait("outputs and picture", `!document.getElementById('outputs-block').hidden &&
		document.querySelectorAll('#outputs a').length === 4 &&
		document.querySelector('#figures img') && document.querySelector('#figures img').complete &&
		document.querySelector('#figures img').naturalWidth === 160`,
		`document.getElementById('outputs-block').outerHTML`)
	if got := br.Eval(`document.querySelector('#outputs a[download="job-done-coef.npy"]').getAttribute('href')`); got != "/api/v1/jobs/job-done/outputs/coef.npy" {
		t.Errorf("coef.npy link %q", got)
	}
	br.Wait("test error as a second series", `document.querySelector('#chart .series-test') !== null`, `document.getElementById('chart').innerHTML`)

	// The node goes away: the banner names it and offers the members that serve a dashboard;
	// when it is back, the page reconnects by itself.
	d.ln.cut()
	br.Wait("went-away banner", `!document.getElementById('away').hidden &&
		document.getElementById('away-text').textContent.includes('node n1 went away') &&
		document.querySelector('#away-others a[data-member=n2]') !== null &&
		document.querySelector('#away-others a[data-member=n3]') === null`,
		`document.getElementById('away').outerHTML`)
	if got := br.Eval(`document.querySelector('#away-others a[data-member=n2]').href`); got != "http://127.0.0.2:8265/" {
		t.Errorf("the banner offers %q for n2", got)
	}
	d.ln.heal()
	br.Wait("reconnected", `document.getElementById('away').hidden && document.getElementById('conn').textContent === 'live'`,
		`document.getElementById('away').outerHTML + document.getElementById('conn').textContent`)
	// The node restarts and forgets the session: the page says so and offers the login form
	// (it does not reload itself in a loop); the printed URL logs in again.
	d.ln.cut()
	br.Wait("went away again", `!document.getElementById('away').hidden`, `document.getElementById('away').outerHTML`)
	d.restart()
	br.Wait("logged out", `document.getElementById('conn').textContent === 'logged out' &&
		document.getElementById('away-text').textContent.includes('not logged in') &&
		document.querySelector('#away-others a[href="/"]') !== null`,
		`document.getElementById('away').outerHTML + document.getElementById('conn').textContent`)
	br.Do("log in again", chromedp.Navigate(d.loginURL))
	br.Wait("live again", `document.getElementById('conn').textContent === 'live' && document.querySelector('button[data-cancel="job-run"]') !== null`,
		`document.body.innerText`)

	// Cancel a running job: two clicks (arm, confirm) send the DELETE with the CSRF header.
	br.Do("arm cancel", chromedp.Click(chromedp.CSS(`button[data-cancel="job-run"]`)))
	br.Wait("cancel armed", `document.querySelector('button[data-cancel="job-run"]').classList.contains('armed')`, `document.querySelector('#running').innerText`)
	br.Do("confirm cancel", chromedp.Click(chromedp.CSS(`button[data-cancel="job-run"]`)))
	br.Wait("job canceled", `document.querySelector('#ended tr[data-job="job-run"][data-state=canceled]') !== null`, `document.getElementById('jobs-section').innerText`)
	if got := b.canceledIDs(); !slices.Equal(got, []string{"job-run"}) {
		t.Errorf("backend canceled %v, want [job-run]", got)
	}
	br.Check()
}
