package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// converge is how long tests wait for gossip to converge: generous, since the machine may be busy.
const converge = 10 * time.Second

// recorder collects the events a node reports.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) add(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// find returns the first event of kind about name.
func (r *recorder) find(kind EventKind, name string) (Event, bool) {
	for _, e := range r.all() {
		if e.Kind == kind && e.Member.Name == name {
			return e, true
		}
	}
	return Event{}, false
}

// waitFor polls cond until it holds or the deadline passes.
// last returns the last event of kind about name.
func (r *recorder) last(kind EventKind, name string) (Event, bool) {
	events := r.all()
	for i := len(events) - 1; i >= 0; i-- {
		if e := events[i]; e.Kind == kind && e.Member.Name == name {
			return e, true
		}
	}
	return Event{}, false
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func names(ms []Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

func memberMeta(actorPort int) Meta {
	return Meta{Role: RoleMember, Actor: "127.0.0.1:" + strconv.Itoa(actorPort), Cores: 2, Memory: 1 << 30, Capacity: 1, Started: time.Now().UnixNano()}
}

type node struct {
	*Membership
	rec *recorder
}

// start starts a node on a free loopback port and shuts it down at the end of the test.
func start(t *testing.T, cfg Config) node {
	t.Helper()
	rec := &recorder{}
	cfg.OnEvent = rec.add
	if cfg.Bind == "" {
		cfg.Bind = "127.0.0.1:0"
	}
	m, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start(%s): %v", cfg.Name, err)
	}
	t.Cleanup(func() {
		if err := m.Shutdown(); err != nil {
			t.Errorf("Shutdown(%s): %v", cfg.Name, err)
		}
	})
	return node{m, rec}
}

func TestMembership(t *testing.T) {
	t.Parallel()
	a := start(t, Config{Name: "a", Meta: memberMeta(9001)})
	seed := []string{a.Local().Gossip}
	b := start(t, Config{Name: "b", Join: seed, Meta: memberMeta(9002)})
	c := start(t, Config{Name: "c", Join: []string{"127.0.0.1:1", b.Local().Gossip}, Meta: memberMeta(9003)}) // one dead seed is fine
	all := []node{a, b, c}
	for _, n := range all {
		waitFor(t, converge, n.Local().Name+" sees a, b, c", func() bool {
			return slices.Equal(names(n.Members()), []string{"a", "b", "c"})
		})
	}
	for _, n := range all {
		for _, other := range all {
			want := other.Local()
			e, ok := n.rec.find(EventJoin, want.Name)
			if !ok {
				t.Fatalf("%s: no join event for %s; events %v", n.Local().Name, want.Name, n.rec.all())
			}
			if e.Member != want || e.Dead || e.At.IsZero() {
				t.Errorf("%s: join event %+v, want member %+v", n.Local().Name, e, want)
			}
		}
		if got := n.Members(); !slices.Contains(got, n.Local()) {
			t.Errorf("%s: Members %v lacks itself %v", n.Local().Name, got, n.Local())
		}
	}

	t.Run("client", func(t *testing.T) {
		d := start(t, Config{Name: "d-client", Join: seed, Meta: Meta{Role: RoleClient}})
		for _, n := range append(all, d) {
			waitFor(t, converge, n.Local().Name+" sees the client", func() bool {
				return slices.Equal(names(n.Members()), []string{"a", "b", "c", "d-client"})
			})
			if got := names(n.Workers()); !slices.Equal(got, []string{"a", "b", "c"}) {
				t.Errorf("%s: Workers %v, want [a b c]", n.Local().Name, got)
			}
		}
		if err := d.Leave(5 * time.Second); err != nil {
			t.Fatalf("client Leave: %v", err)
		}
		for _, n := range all {
			waitFor(t, converge, n.Local().Name+" sees the client leave", func() bool {
				return len(n.Members()) == 3
			})
		}
	})

	t.Run("update", func(t *testing.T) {
		meta := b.Local().Meta
		meta.Memory *= 2
		meta.Capacity = 3
		if err := b.UpdateMeta(meta); err != nil {
			t.Fatal(err)
		}
		if got := b.Local().Meta; got != meta {
			t.Errorf("Local().Meta = %+v, want %+v", got, meta)
		}
		for _, n := range []node{a, c} {
			waitFor(t, converge, n.Local().Name+" sees b's update", func() bool {
				e, ok := n.rec.find(EventUpdate, "b")
				return ok && e.Member.Meta == meta
			})
			i := slices.IndexFunc(n.Members(), func(m Member) bool { return m.Name == "b" })
			if i < 0 || n.Members()[i].Meta != meta {
				t.Errorf("%s: Members %v lack b with meta %+v", n.Local().Name, n.Members(), meta)
			}
		}
		// A member advertising Leaving stays a member but is no longer a worker.
		leaving := meta
		leaving.Leaving = true
		if err := b.UpdateMeta(leaving); err != nil {
			t.Fatal(err)
		}
		waitFor(t, converge, "a drops leaving b from its workers", func() bool {
			return slices.Equal(names(a.Workers()), []string{"a", "c"}) && slices.Equal(names(a.Members()), []string{"a", "b", "c"})
		})
		if err := b.UpdateMeta(meta); err != nil {
			t.Fatal(err)
		}
		waitFor(t, converge, "a lists b as a worker again", func() bool {
			return slices.Equal(names(a.Workers()), []string{"a", "b", "c"})
		})
		if err := b.UpdateMeta(Meta{Role: RoleMember}); err == nil {
			t.Error("UpdateMeta accepted a member without actor address and capacity")
		}

		// A new start time means a new instance: the old one is reported dead, the new one joined.
		old := c.Local()
		restarted := old.Meta
		restarted.Started++
		if err := c.UpdateMeta(restarted); err != nil {
			t.Fatal(err)
		}
		waitFor(t, converge, "a sees c's new instance", func() bool {
			events := a.rec.all()
			leave := slices.IndexFunc(events, func(e Event) bool {
				return e.Kind == EventLeave && e.Member == old && e.Dead
			})
			join := slices.IndexFunc(events, func(e Event) bool {
				return e.Kind == EventJoin && e.Member.Name == "c" && e.Member.Meta == restarted
			})
			return leave >= 0 && join == leave+1
		})
		if _, ok := a.rec.find(EventUpdate, "c"); ok {
			t.Error("a restart was reported as an update")
		}
	})

	t.Run("leave", func(t *testing.T) {
		started := c.Local().Meta.Started
		if err := c.Leave(5 * time.Second); err != nil {
			t.Fatalf("Leave: %v", err)
		}
		for _, n := range []node{a, b, c} {
			var e Event
			waitFor(t, converge, n.Local().Name+" sees c leave", func() bool {
				var ok bool
				e, ok = n.rec.last(EventLeave, "c")
				return ok && e.Member.Meta.Started == started
			})
			if e.Dead {
				t.Errorf("%s: graceful leave reported as death: %+v", n.Local().Name, e)
			}
			if n != c {
				if got := names(n.Members()); !slices.Equal(got, []string{"a", "b"}) {
					t.Errorf("%s: Members %v after c left", n.Local().Name, got)
				}
			}
		}
		if err := c.Shutdown(); err != nil {
			t.Errorf("Shutdown after Leave: %v", err)
		}
		if err := c.Leave(time.Second); !errors.Is(err, ErrShutdown) {
			t.Errorf("Leave after Shutdown: %v, want ErrShutdown", err)
		}
		if err := c.UpdateMeta(c.Local().Meta); !errors.Is(err, ErrShutdown) {
			t.Errorf("UpdateMeta after Shutdown: %v, want ErrShutdown", err)
		}
	})

	// Events arrive in order: for every node, a member's leave follows its join.
	for _, n := range all {
		seen := map[string]bool{}
		for _, e := range n.rec.all() {
			switch e.Kind {
			case EventJoin:
				if seen[e.Member.Name] {
					t.Errorf("%s: %s joined twice without leaving", n.Local().Name, e.Member.Name)
				}
				seen[e.Member.Name] = true
			case EventLeave:
				if !seen[e.Member.Name] {
					t.Errorf("%s: %s left before joining", n.Local().Name, e.Member.Name)
				}
				seen[e.Member.Name] = false
			}
		}
	}
}

func TestMembershipCrash(t *testing.T) {
	t.Parallel()
	a := start(t, Config{Name: "a", Meta: memberMeta(9001)})
	b := start(t, Config{Name: "b", Join: []string{a.Local().Gossip}, Meta: memberMeta(9002)})
	c := start(t, Config{Name: "c", Join: []string{a.Local().Gossip}, Meta: memberMeta(9003)})
	for _, n := range []node{a, b, c} {
		waitFor(t, converge, n.Local().Name+" sees 3 members", func() bool { return len(n.Members()) == 3 })
	}

	killed := time.Now()
	if err := c.Shutdown(); err != nil { // no leave: a crash as far as a and b can tell
		t.Fatal(err)
	}
	if err := c.Shutdown(); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
	for _, n := range []node{a, b} {
		var e Event
		waitFor(t, 30*time.Second, n.Local().Name+" declares c dead", func() bool {
			var ok bool
			e, ok = n.rec.find(EventLeave, "c")
			return ok
		})
		if !e.Dead {
			t.Errorf("%s: crash reported as graceful leave: %+v", n.Local().Name, e)
		}
		t.Logf("%s declared c dead %.2f s after its Shutdown", n.Local().Name, e.At.Sub(killed).Seconds())
		if got := names(n.Members()); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("%s: Members %v after c died", n.Local().Name, got)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a slog handler.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestMembershipSecretKey(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{7}, 32)
	other := bytes.Repeat([]byte{8}, 32)
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := start(t, Config{Name: "a", SecretKey: key, Meta: memberMeta(9001), Logger: logger})
	b := start(t, Config{Name: "b", SecretKey: key, Join: []string{a.Local().Gossip}, Meta: memberMeta(9002)})
	seeds := []string{a.Local().Gossip, b.Local().Gossip}

	tests := []struct {
		name string
		key  []byte
	}{
		{"other 32-byte key", other},
		{"16-byte key", key[:16]},
		{"no key", nil},
	}
	for _, tt := range tests {
		m, err := Start(Config{Name: "intruder", Bind: "127.0.0.1:0", SecretKey: tt.key, Join: seeds, Meta: memberMeta(9009)})
		if err == nil {
			m.Shutdown()
			t.Fatalf("%s: Start joined a cluster with another key", tt.name)
		}
		for _, s := range seeds {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error does not name seed %s: %v", tt.name, s, err)
			}
		}
		t.Logf("%s: %v", tt.name, err)
	}
	// The right key joins, and the intruder never shows up.
	c := start(t, Config{Name: "c", SecretKey: key, Join: seeds[1:], Meta: memberMeta(9003)})
	for _, n := range []node{a, b, c} {
		waitFor(t, converge, n.Local().Name+" sees a, b, c", func() bool {
			return slices.Equal(names(n.Members()), []string{"a", "b", "c"})
		})
		if _, ok := n.rec.find(EventJoin, "intruder"); ok {
			t.Errorf("%s saw the intruder join", n.Local().Name)
		}
	}

	out := logs.String()
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "memberlist:") || !strings.Contains(out, "node=a") {
		t.Errorf("a's log lacks memberlist's errors about the intruder:\n%s", out)
	}
	if strings.Contains(out, "[DEBUG]") || strings.Contains(out, "level=DEBUG") {
		t.Errorf("memberlist DEBUG lines leaked into the log:\n%s", out)
	}
}

func TestStartDefaultName(t *testing.T) {
	t.Parallel()
	n := start(t, Config{Meta: Meta{Role: RoleClient}})
	_, port, err := net.SplitHostPort(n.Local().Gossip)
	if err != nil {
		t.Fatal(err)
	}
	if port == "0" || !strings.HasSuffix(n.Local().Name, "-"+port) {
		t.Errorf("default name %q, gossip %s: want <hostname>-<port>", n.Local().Name, n.Local().Gossip)
	}
	if got := names(n.Members()); !slices.Equal(got, []string{n.Local().Name}) {
		t.Errorf("Members of a lone node: %v", got)
	}
	if len(n.Workers()) != 0 {
		t.Errorf("a lone client lists workers %v", n.Workers())
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	busy := start(t, Config{Name: "busy", Meta: Meta{Role: RoleClient}})
	ok := memberMeta(9000)
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"bind not ip:port", Config{Bind: "127.0.0.1", Meta: ok}, "not ip:port"},
		{"bind host name", Config{Bind: "localhost:0", Meta: ok}, "not an IP address"},
		{"bind bad port", Config{Bind: "127.0.0.1:99999", Meta: ok}, "port"},
		{"bind port in use", Config{Bind: busy.Local().Gossip, Meta: ok}, "bind gossip on " + busy.Local().Gossip},
		{"advertise host name", Config{Bind: "127.0.0.1:0", Advertise: "example.com:7946", Meta: ok}, "not an IP address"},
		{"advertise unspecified", Config{Bind: "127.0.0.1:0", Advertise: "0.0.0.0:7946", Meta: ok}, "cannot be advertised"},
		{"key length", Config{Bind: "127.0.0.1:0", SecretKey: make([]byte, 20), Meta: ok}, "20 bytes"},
		{"meta too big", Config{Bind: "127.0.0.1:0", Meta: Meta{Role: RoleMember, Capacity: 1, Actor: strings.Repeat("x", 600) + ":1"}}, "512"},
		{"meta invalid", Config{Bind: "127.0.0.1:0", Meta: Meta{}}, "role 0"},
		{"no seed reachable", Config{Bind: "127.0.0.1:0", Join: []string{"127.0.0.1:1", "127.0.0.1:2"}, Meta: ok}, "127.0.0.1:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var called atomic.Bool
			tt.cfg.OnEvent = func(Event) { called.Store(true) }
			m, err := Start(tt.cfg)
			if err == nil {
				m.Shutdown()
				t.Fatalf("Start succeeded, want an error mentioning %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
			if called.Load() {
				t.Error("OnEvent was called although Start failed")
			}
		})
	}
}

func TestLogWriter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		want string // "" when dropped
	}{
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:4000\n", ""},
		{"[TRACE] memberlist: x\n", ""},
		{"[INFO] memberlist: Marking b as failed, suspect timeout reached (0 peer confirmations)\n", "level=INFO msg=\"memberlist: Marking b as failed, suspect timeout reached (0 peer confirmations)\""},
		{"[WARN] memberlist: Refuting a suspect message (from: a)\n", "level=WARN msg=\"memberlist: Refuting a suspect message (from: a)\""},
		{"[ERR] memberlist: failed to receive: No installed keys could decrypt the message\n", "level=ERROR msg=\"memberlist: failed to receive: No installed keys could decrypt the message\""},
		{"Err: Could not set the deadline: boom\n", "level=INFO msg=\"memberlist: Err: Could not set the deadline: boom\""},
		{"[WARN] memberlist: ignoring alive message for '" + probePrefix + "0123456789abcdef': node meta is empty\n", ""},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		w := &logWriter{lim: newLimiter(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
			Level:       slog.LevelDebug,
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return dropTime(a) },
		})), logEvery)}
		if n, err := fmt.Fprint(w, tt.line); err != nil || n != len(tt.line) {
			t.Errorf("Write(%q) = %d, %v", tt.line, n, err)
		}
		if got := strings.TrimSpace(buf.String()); got != tt.want {
			t.Errorf("Write(%q) logged %q, want %q", tt.line, got, tt.want)
		}
	}
}

// TestLogWriterStopping: memberlist's lines about a closed connection are errors while the
// membership runs, and dropped once it shuts down (memberlist closes its sockets before its
// gossip loop stops: a clean stop is not an error).
func TestLogWriterStopping(t *testing.T) {
	t.Parallel()
	line := "[ERR] memberlist: Failed to send gossip to 127.0.0.1:1: write udp 127.0.0.1:2->127.0.0.1:1: use of closed network connection\n"
	for _, stop := range []bool{false, true} {
		var stopping atomic.Bool
		stopping.Store(stop)
		var buf bytes.Buffer // a writer each: the limiter lets one line of a kind through a second
		w := &logWriter{lim: newLimiter(slog.New(slog.NewTextHandler(&buf, nil)), logEvery), stopping: &stopping}
		fmt.Fprint(w, line)
		if got := buf.String(); stop && got != "" {
			t.Errorf("stopping: %q, want nothing", got)
		} else if !stop && !strings.Contains(got, "level=ERROR") {
			t.Errorf("running: %q, want an ERROR line", got)
		}
	}
}

func dropTime(a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

func TestEventKindString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    fmt.Stringer
		want string
	}{
		{EventJoin, "join"}, {EventLeave, "leave"}, {EventUpdate, "update"}, {EventKind(9), "event(9)"},
		{RoleMember, "member"}, {RoleClient, "client"}, {Role(0), "role(0)"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

// TestGossipPortFlood opens many connections to a node's gossip port from one address and
// sends nothing on them, as anyone who reaches the port can. The node serves at most
// maxStreamsPerIP of them (each past it evicts the address's oldest); meanwhile a node from
// another address joins.
func TestGossipPortFlood(t *testing.T) {
	t.Parallel()
	a := start(t, Config{Name: "a", Meta: memberMeta(9001)})
	const flood = 3 * maxStreamsPerIP
	attacker := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
	for range flood {
		c, err := attacker.Dial("tcp", a.Local().Gossip)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	waitFor(t, 10*time.Second, "the flood's connections past the limit evicted", func() bool {
		return a.RefusedStreams() >= flood-maxStreamsPerIP
	})
	if got := a.RefusedStreams(); got > flood-maxStreamsPerIP {
		t.Fatalf("%d of %d connections evicted, want %d: the node serves %d from one address", got, flood, flood-maxStreamsPerIP, maxStreamsPerIP)
	}
	b := start(t, Config{Name: "b", Join: []string{a.Local().Gossip}, Meta: memberMeta(9002)})
	for _, n := range []node{a, b} {
		waitFor(t, converge, n.Local().Name+" sees a and b during the flood", func() bool {
			return slices.Equal(names(n.Members()), []string{"a", "b"})
		})
	}
}

// TestLeaveOverLossyNetwork: a node of a keyed cluster that leaves while every gossip packet
// it sends is lost (its streams still connect) is still seen leaving, not failing: its Leaving
// flag reaches the others over a push/pull, so when their failure detector notices it gone
// they report a leave.
func TestLeaveOverLossyNetwork(t *testing.T) {
	t.Parallel()
	p := NewPartition()
	key := []byte("this test's own 32-byte gossip k")
	a := start(t, Config{Name: "a", Meta: memberMeta(9101), Partition: p, SecretKey: key})
	seed := []string{a.Local().Gossip}
	b := start(t, Config{Name: "b", Join: seed, Meta: memberMeta(9102), Partition: p, SecretKey: key})
	c := start(t, Config{Name: "c", Join: seed, Meta: memberMeta(9103), Partition: p, SecretKey: key})
	for _, n := range []node{a, b, c} {
		waitFor(t, converge, n.Local().Name+" sees a, b, c", func() bool {
			return slices.Equal(names(n.Members()), []string{"a", "b", "c"})
		})
	}
	p.LosePackets(c.Local().Gossip)
	_ = c.Leave(5 * time.Second) // its broadcasts are lost; what matters is what the others see
	for _, n := range []node{a, b} {
		var e Event
		waitFor(t, 3*converge, n.Local().Name+" sees c gone", func() bool {
			var ok bool
			e, ok = n.rec.last(EventLeave, "c")
			return ok
		})
		if e.Dead {
			t.Errorf("%s: c left over a lossy network but was reported dead: %+v", n.Local().Name, e)
		}
	}
}
