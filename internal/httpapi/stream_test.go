package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// sseEvent is one event read off a stream.
type sseEvent struct {
	name string
	data string
}

// readEvent reads the next event (comments skipped).
func readEvent(t *testing.T, br *bufio.Reader) sseEvent {
	t.Helper()
	var ev sseEvent
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("stream: %v (so far %+v)", err, ev)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if ev.name != "" || ev.data != "" {
				return ev
			}
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data += strings.TrimPrefix(line, "data: ")
		}
	}
}

// openStream opens an event stream and returns its reader.
func (ts *testServer) openStream(t *testing.T, path, auth string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, _ := http.NewRequest("GET", ts.base+path, nil)
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, bufio.NewReader(resp.Body)
}

// TestClusterStream checks the cluster stream: the cluster and the jobs at connect, the jobs
// again when a snapshot changed them (a client's own only), nothing when none did, and the
// heartbeat.
func TestClusterStream(t *testing.T) {
	ts := startServer(t, Config{}, func(s *Server) { s.ping = 50 * time.Millisecond })
	resp, br := ts.openStream(t, "/api/v1/events", bearer(ClientToken(testSecret, "alice")))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if ev := readEvent(t, br); ev.name != "cluster" || !strings.Contains(ev.data, `"self":"n1"`) {
		t.Fatalf("first event %+v", ev)
	}
	if ev := readEvent(t, br); ev.name != "jobs" || ev.data != `{"jobs":[]}` {
		t.Fatalf("second event %+v", ev)
	}
	ts.b.update(func(b *fakeBackend) {}) // nothing changed: no event
	ts.b.update(func(b *fakeBackend) {
		b.jobs["bobs"] = JobView{ID: "bobs", Owner: "bob", State: "running"}
		b.jobs["alices"] = JobView{ID: "alices", Owner: "alice", State: "running"}
	})
	ev := readEvent(t, br)
	var jobs jobsView
	if ev.name != "jobs" || json.Unmarshal([]byte(ev.data), &jobs) != nil || len(jobs.Jobs) != 1 || jobs.Jobs[0].ID != "alices" {
		t.Fatalf("jobs event %+v", ev)
	}
	// Then only heartbeats.
	for i := 0; i < 2; i++ {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line != ": ping\n" {
			br.ReadString('\n')
			t.Fatalf("want a heartbeat, got %q", line)
		}
		br.ReadString('\n')
	}
}

// TestJobStream checks one job's stream: the job whole, progress with only the new points
// and events, and the end, after which the server closes the stream; an unknown job is 404
// before any event.
func TestJobStream(t *testing.T) {
	ts := startServer(t, Config{})
	start := JobView{ID: "j1", Owner: "operator", State: "running", Iteration: 2,
		History: []PointView{{Iteration: 1, RelErr2: 0.5}, {Iteration: 2, RelErr2: 0.25}},
		Events:  []EventView{{UnixMs: 1, Kind: "started"}}}
	ts.b.update(func(b *fakeBackend) { b.jobs["j1"] = start })
	if code, _, _ := ts.do(t, "GET", "/api/v1/jobs/nope/events", ts.op, ""); code != 404 {
		t.Fatalf("unknown job's stream: %d", code)
	}
	_, br := ts.openStream(t, "/api/v1/jobs/j1/events", ts.op)
	var j JobView
	if ev := readEvent(t, br); ev.name != "job" || json.Unmarshal([]byte(ev.data), &j) != nil || len(j.History) != 2 || len(j.Events) != 1 {
		t.Fatalf("first event %+v", ev)
	}
	ts.b.update(func(b *fakeBackend) {
		j := b.jobs["j1"]
		j.Iteration = 3
		j.History = append(j.History[:2:2], PointView{Iteration: 3, RelErr2: 0.125})
		j.Events = append(j.Events[:1:1], EventView{UnixMs: 2, Kind: "checkpoint", Iteration: 3})
		b.jobs["j1"] = j
	})
	ev := readEvent(t, br)
	var p JobView
	if ev.name != "progress" || json.Unmarshal([]byte(ev.data), &p) != nil || p.Iteration != 3 ||
		len(p.History) != 1 || p.History[0].Iteration != 3 || len(p.Events) != 1 || p.Events[0].Kind != "checkpoint" {
		t.Fatalf("progress event %+v", ev)
	}
	ts.b.update(func(b *fakeBackend) {
		j := b.jobs["j1"]
		j.State, j.Stop, j.EndedUnixMs = "done", "converged", 3
		b.jobs["j1"] = j
	})
	ev = readEvent(t, br)
	if ev.name != "end" || json.Unmarshal([]byte(ev.data), &p) != nil || p.State != "done" || len(p.History) != 3 {
		t.Fatalf("end event %+v", ev)
	}
	if _, err := br.ReadString('\n'); err != io.EOF {
		t.Fatalf("after the end: %v, want the stream closed", err)
	}
}

// rawStream opens a stream on a raw connection and returns it with its status; it reads the
// status line only.
func (ts *testServer) rawStream(t *testing.T, path, auth string) (net.Conn, int) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\n\r\n", path, auth)
	line, err := bufio.NewReaderSize(c, 16).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var code int
	fmt.Sscanf(line, "HTTP/1.1 %d", &code)
	return c, code
}

// TestIdleStreamsBounded opens 1,000 idle streams from 40 clients: the server holds
// MaxStreams of them and answers the rest 429, keeps answering /healthz and an authorized
// request meanwhile, and refuses an identity's stream past its own bound.
func TestIdleStreamsBounded(t *testing.T) {
	ts := startServer(t, Config{})
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	counts := map[int]int{}
	for i := 0; i < 1000; i++ {
		c, code := ts.rawStream(t, "/api/v1/events", bearer(ClientToken(testSecret, fmt.Sprintf("client%d", i%40))))
		counts[code]++
		if code == 200 {
			held = append(held, c)
		} else {
			c.Close()
		}
	}
	if counts[200] != DefaultMaxStreams || counts[429] != 1000-DefaultMaxStreams {
		t.Fatalf("1,000 streams: %v, want %d held and the rest 429", counts, DefaultMaxStreams)
	}
	if code, _, _ := ts.do(t, "GET", "/healthz", "", ""); code != 200 {
		t.Errorf("healthz with the streams held: %d", code)
	}
	if code, _, _ := ts.do(t, "GET", "/api/v1/cluster", ts.op, ""); code != 200 {
		t.Errorf("cluster with the streams held: %d", code)
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	waitFor(t, "the streams' slots", func() bool { return ts.streams.open() == 0 })

	// One identity's bound.
	for i := 0; i < DefaultMaxStreamsPerIdentity; i++ {
		c, code := ts.rawStream(t, "/api/v1/events", ts.op)
		if code != 200 {
			t.Fatalf("stream %d of one identity: %d", i, code)
		}
		held = append(held, c)
	}
	if c, code := ts.rawStream(t, "/api/v1/events", ts.op); code != 429 {
		c.Close()
		t.Fatalf("one identity's stream past its bound: %d, want 429", code)
	} else {
		c.Close()
	}
	if c, code := ts.rawStream(t, "/api/v1/events", bearer(ClientToken(testSecret, "another"))); code != 200 {
		t.Fatalf("another identity's stream: %d, want 200", code)
	} else {
		c.Close()
	}
}

// TestStreamThatNeverReads checks that a reader that does not read is cut once a write
// waits past WriteTimeout, and its slot freed: the same identity may open a stream again.
func TestStreamThatNeverReads(t *testing.T) {
	var logs lockedBuffer
	ts := startServer(t, Config{WriteTimeout: 200 * time.Millisecond, MaxStreamsPerIdentity: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c, code := ts.rawStream(t, "/api/v1/events", ts.op)
	defer c.Close()
	if code != 200 {
		t.Fatalf("stream: %d", code)
	}
	// Big, changing snapshots fill the socket's buffers; the client reads nothing.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			ts.b.update(func(b *fakeBackend) { b.cluster.Warnings = []string{fmt.Sprint(i), strings.Repeat("w", 1<<20)} })
		}
	}()
	waitFor(t, "the stream that does not read to be cut", func() bool { return ts.streams.open() == 0 })
	if !strings.Contains(logs.String(), "did not read") {
		t.Errorf("the cut is not logged: %s", logs.String())
	}
	resp, br := ts.openStream(t, "/api/v1/events", ts.op)
	if resp.StatusCode != 200 {
		t.Fatalf("a new stream after the cut: %d", resp.StatusCode)
	}
	if ev := readEvent(t, br); ev.name != "cluster" {
		t.Fatalf("new stream's first event %+v", ev.name)
	}
}

// waitFor waits until cond holds (a minute at most: a bound for a stuck test, not a timing
// assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStreamOutlivesServerTimeouts checks that a stream lives past the server's read and
// write timeouts (which bound requests and answers, not streams).
func TestStreamOutlivesServerTimeouts(t *testing.T) {
	ts := startServer(t, Config{}, func(s *Server) {
		s.http.ReadTimeout, s.http.WriteTimeout = 100*time.Millisecond, 100*time.Millisecond
	})
	_, br := ts.openStream(t, "/api/v1/events", ts.op)
	readEvent(t, br)
	readEvent(t, br)
	time.Sleep(500 * time.Millisecond) // past both timeouts
	ts.b.update(func(b *fakeBackend) { b.jobs["j1"] = JobView{ID: "j1", Owner: "x", State: "running"} })
	if ev := readEvent(t, br); ev.name != "jobs" || !strings.Contains(ev.data, `"j1"`) {
		t.Fatalf("event after the timeouts: %+v", ev)
	}
}

// lockedBuffer is a bytes.Buffer safe for a logger's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestJustSubmittedJobIsFound checks that a job the backend's snapshot does not hold yet (it
// was just submitted) is found once the next snapshot holds it, not answered 404.
func TestJustSubmittedJobIsFound(t *testing.T) {
	ts := startServer(t, Config{}, func(s *Server) { s.settle = time.Minute })
	go func() {
		time.Sleep(50 * time.Millisecond)
		ts.b.update(func(b *fakeBackend) { b.jobs["j9"] = JobView{ID: "j9", Owner: "operator", State: "running"} })
	}()
	resp, br := ts.openStream(t, "/api/v1/jobs/j9/events", ts.op)
	if resp.StatusCode != 200 {
		t.Fatalf("stream of a job in the next snapshot: %d", resp.StatusCode)
	}
	if ev := readEvent(t, br); ev.name != "job" || !strings.Contains(ev.data, `"j9"`) {
		t.Fatalf("first event %+v", ev)
	}
}
