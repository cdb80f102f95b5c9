package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/usererr"
)

// fakeBackend is a Backend of canned views, changed by the tests.
type fakeBackend struct {
	mu      sync.Mutex
	cluster ClusterView
	jobs    map[string]JobView
	outputs map[string][]byte // by id + "/" + name
	ready   error
	panics  bool
	updated chan struct{}
	// submitted records the submissions (owner, spec).
	submitted []submission
	canceled  []string
	nextID    int
}

type submission struct {
	owner string
	spec  *jobspec.Spec
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{
		cluster: ClusterView{Self: "n1", Version: "test", Members: []MemberView{{Name: "n1", State: "alive", Role: "member"}}},
		jobs:    map[string]JobView{}, outputs: map[string][]byte{}, updated: make(chan struct{}),
	}
}

func (b *fakeBackend) Cluster(ctx context.Context) (ClusterView, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.panics {
		panic("fake backend: panic in Cluster")
	}
	return b.cluster, nil
}

func (b *fakeBackend) Jobs(ctx context.Context, owner string) ([]JobView, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []JobView
	for _, j := range b.jobs {
		if owner == "" || j.Owner == owner {
			j.History, j.Events = nil, nil
			out = append(out, j)
		}
	}
	return out, nil
}

func (b *fakeBackend) Job(ctx context.Context, id string) (JobView, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	j, ok := b.jobs[id]
	if !ok {
		return JobView{}, ErrNotFound
	}
	return j, nil
}

func (b *fakeBackend) Submit(ctx context.Context, owner string, spec *jobspec.Spec) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if strings.HasPrefix(spec.Inputs[0], "/missing") {
		return "", usererr.Field("fan-in", "{input} %s: no such file (and {fan-in} %d)", spec.Inputs[0], spec.FanIn)
	}
	b.nextID++
	id := fmt.Sprintf("job-%d", b.nextID)
	b.submitted = append(b.submitted, submission{owner, spec})
	b.jobs[id] = JobView{ID: id, Owner: owner, State: "placing", Rank: int64(spec.Rank)}
	return id, nil
}

func (b *fakeBackend) Cancel(ctx context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.jobs[id]; !ok {
		return ErrNotFound
	}
	b.canceled = append(b.canceled, id)
	return nil
}

func (b *fakeBackend) Output(ctx context.Context, id, name string) (io.ReadCloser, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, ok := b.outputs[id+"/"+name]
	if !ok {
		return nil, ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (b *fakeBackend) Ready() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ready
}

func (b *fakeBackend) Updated() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.updated
}

// update changes the backend under its lock and announces a new snapshot.
func (b *fakeBackend) update(f func(b *fakeBackend)) {
	b.mu.Lock()
	f(b)
	close(b.updated)
	b.updated = make(chan struct{})
	b.mu.Unlock()
}

// testSecret is the cluster secret of the tests.
var testSecret = []byte("0123456789abcdef0123456789abcdef")

// testServer is a server on loopback over a fake backend.
type testServer struct {
	*Server
	b    *fakeBackend
	base string
	op   string // the operator's bearer header
}

// startServer starts a server on 127.0.0.1 with cfg (Addr and Backend filled in), applying
// opts to it before it serves.
func startServer(t *testing.T, cfg Config, opts ...func(*Server)) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := newFakeBackend()
	if cfg.Backend == nil {
		cfg.Backend = b
	}
	if cfg.Secret == nil && !cfg.Insecure {
		cfg.Secret = testSecret
	}
	cfg.Addr = ln.Addr().String()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.settle = 10 * time.Millisecond // a 404 waits no longer than that (TestJustSubmitted waits)
	for _, o := range opts {
		o(s)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return &testServer{Server: s, b: b, base: s.URL(), op: "Bearer " + s.operator}
}

// do makes a request with the given Authorization header ("" none) and body, and returns the
// status and body.
func (ts *testServer) do(t *testing.T, method, path, auth, body string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	client := &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// bearer returns the Authorization header of a token.
func bearer(tok string) string { return "Bearer " + tok }
