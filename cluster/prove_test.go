package cluster

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// testKey is a gossip key every node of these tests, forgers included, holds.
var testKey = []byte("0123456789abcdef0123456789abcdef")

// certs stands for the certificates of a test cluster: the actor address at which each name
// can prove itself. Its prove admits a claim whose name is known at that actor address.
type certs struct {
	mu    sync.Mutex
	actor map[string]string
	asked map[string]int // proofs asked, by name
	delay time.Duration  // how long a proof takes (a TLS handshake's round trips)
}

func newCerts() *certs { return &certs{actor: map[string]string{}, asked: map[string]int{}} }

func (c *certs) issue(name string, meta Meta) Meta {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.actor[name] = meta.Actor
	return meta
}

func (c *certs) prove(ctx context.Context, m Member) error {
	select {
	case <-time.After(c.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked[m.Name]++
	if a, ok := c.actor[m.Name]; !ok || a != m.Meta.Actor {
		return fmt.Errorf("no certificate for %q at %s", m.Name, m.Meta.Actor)
	}
	return nil
}

// fakeDelegate serves a forger's meta.
type fakeDelegate struct{ meta []byte }

func (d fakeDelegate) NodeMeta(int) []byte                  { return d.meta }
func (fakeDelegate) NotifyMsg([]byte)                       {}
func (fakeDelegate) GetBroadcasts(int, int) [][]byte        { return nil }
func (fakeDelegate) LocalState(bool) []byte                 { return nil }
func (fakeDelegate) MergeRemoteState(buf []byte, join bool) {}

// forge starts a raw memberlist that holds the gossip key and claims whatever meta it likes,
// and joins seed. It is shut down (without a leave) at the end of the test, if not before.
func forge(t *testing.T, name string, meta Meta, seed string) *memberlist.Memberlist {
	t.Helper()
	enc, err := meta.Encode()
	if err != nil {
		t.Fatal(err)
	}
	mc := memberlist.DefaultLocalConfig()
	mc.Name = name
	mc.BindAddr = "127.0.0.1"
	mc.BindPort = 0
	mc.Label = gossipLabel
	mc.SecretKey = testKey
	mc.Delegate = fakeDelegate{enc}
	mc.Logger = log.New(io.Discard, "", 0)
	DefaultTiming().apply(mc)
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ml.Shutdown() })
	if _, err := ml.Join([]string{seed}); err != nil {
		t.Fatalf("forger %s: join %s: %v", name, seed, err)
	}
	return ml
}

// lists reports whether any of the nodes lists a member named name in Members or Workers.
func lists(ns []node, name string) string {
	for _, n := range ns {
		for _, list := range [][]Member{n.Members(), n.Workers()} {
			if slices.ContainsFunc(list, func(m Member) bool { return m.Name == name }) {
				return n.Local().Name
			}
		}
	}
	return ""
}

// TestProveForgedMembers: nodes that check every claim (Config.Prove) meet forgers that hold
// the gossip key: one advertising a member's actor address, one an address it cannot prove,
// one a client's role, and a "twin" whose claim proves but whose actor address another member
// already has. None is ever listed, each refusal is counted by its cause, the real members
// see each other as soon as Start returns, and the forgers' deaths raise no event.
func TestProveForgedMembers(t *testing.T) {
	t.Parallel()
	ca := newCerts()
	ca.delay = 300 * time.Millisecond
	a := start(t, Config{Name: "a", SecretKey: testKey, Prove: ca.prove, Meta: ca.issue("a", memberMeta(9101))})
	b := start(t, Config{Name: "b", SecretKey: testKey, Prove: ca.prove, Join: []string{a.Local().Gossip}, Meta: ca.issue("b", memberMeta(9102))})
	// Start waits for the proofs of the members met while joining.
	if got := names(b.Members()); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("b lists %v when Start returns, want [a b]", got)
	}
	waitFor(t, converge, "a lists b", func() bool { return slices.Equal(names(a.Members()), []string{"a", "b"}) })
	real := []node{a, b}

	forgers := []struct {
		name  string
		meta  Meta
		seed  node
		cause string
	}{
		{"forger-a-actor", memberMeta(9101), b, RefusedDuplicate},
		{"forger-unproven", memberMeta(9199), a, RefusedProof},
		{"forger-client", Meta{Role: RoleClient, Actor: "127.0.0.1:9198"}, a, RefusedClient},
		{"twin-of-b", ca.issue("twin-of-b", memberMeta(9102)), a, RefusedDuplicate},
	}
	var mls []*memberlist.Memberlist
	for _, f := range forgers {
		mls = append(mls, forge(t, f.name, f.meta, f.seed.Local().Gossip))
	}
	// The forgers gossip for a while (their alive messages, push/pulls), then die.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		for _, f := range forgers {
			if who := lists(real, f.name); who != "" {
				t.Fatalf("%s lists the forger %s", who, f.name)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, f := range forgers {
		if n := f.seed.Refused()[f.cause]; n == 0 {
			t.Errorf("%s: %s refused nothing for %q: %v", f.name, f.seed.Local().Name, f.cause, f.seed.Refused())
		}
	}
	ca.mu.Lock()
	if n := ca.asked["twin-of-b"]; n != 0 {
		t.Errorf("the twin's claim was proven %d times: a duplicate actor address is refused before any proof", n)
	}
	if n := ca.asked["forger-unproven"]; n > 2 {
		t.Errorf("the unproven forger was proven %d times in 3 s: a failed claim waits %v", n, failedFor)
	}
	ca.mu.Unlock()
	for _, ml := range mls {
		_ = ml.Shutdown() // no leave: the members would declare them dead, had they listed them
	}
	time.Sleep(5 * time.Second) // a listed member is declared dead in about 3 s
	for _, n := range real {
		for _, e := range n.rec.all() {
			if strings.HasPrefix(e.Member.Name, "forger") || strings.HasPrefix(e.Member.Name, "twin") {
				t.Errorf("%s: event about a forger: %+v", n.Local().Name, e)
			}
		}
		if got := names(n.Members()); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("%s lists %v after the forgers died, want [a b]", n.Local().Name, got)
		}
	}
}

// TestProveRestart: a proven member restarted at its address with a new start time is a new
// claim: it is proven and replaces the old instance (a death and a join), as without proofs.
func TestProveRestart(t *testing.T) {
	t.Parallel()
	ca := newCerts()
	a := start(t, Config{Name: "a", SecretKey: testKey, Prove: ca.prove, Meta: ca.issue("a", memberMeta(9201))})
	cfg := Config{Name: "c", SecretKey: testKey, Prove: ca.prove, Join: []string{a.Local().Gossip}, Meta: ca.issue("c", memberMeta(9202)), Bind: "127.0.0.1:0"}
	c1, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, converge, "a lists c", func() bool { return slices.Equal(names(a.Members()), []string{"a", "c"}) })
	cfg.Bind = c1.Local().Gossip
	first := c1.Local().Meta.Started
	_ = c1.Shutdown()
	cfg.Meta.Started = first + 1
	c2 := start(t, cfg)
	if got := names(c2.Members()); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("the restarted c lists %v when Start returns", got)
	}
	waitFor(t, converge, "a lists the new c", func() bool {
		e, ok := a.rec.last(EventJoin, "c")
		return ok && e.Member.Meta.Started == first+1
	})
	if e, ok := a.rec.last(EventLeave, "c"); !ok || !e.Dead || e.Member.Meta.Started != first {
		t.Errorf("a's leave event for the old c: %+v, %v", e, ok)
	}
}

// TestProveChurn: hundreds of forgers with the gossip key join and die without leaving, as
// finding 7 of issue 30 had it; none is ever listed, and a real member that then fails is
// declared dead within the usual time (a few seconds; 15 s allowed on a busy machine).
func TestProveChurn(t *testing.T) {
	t.Parallel()
	fakes := 300
	if testing.Short() {
		fakes = 60
	}
	ca := newCerts()
	a := start(t, Config{Name: "a", SecretKey: testKey, Prove: ca.prove, Meta: ca.issue("a", memberMeta(9301))})
	b := start(t, Config{Name: "b", SecretKey: testKey, Prove: ca.prove, Join: []string{a.Local().Gossip}, Meta: ca.issue("b", memberMeta(9302))})
	c, err := Start(Config{Name: "c", SecretKey: testKey, Prove: ca.prove, Join: []string{a.Local().Gossip}, Meta: ca.issue("c", memberMeta(9303)), Bind: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown() })
	real := []node{a, b}
	for _, n := range real {
		waitFor(t, converge, n.Local().Name+" lists a, b, c", func() bool { return slices.Equal(names(n.Members()), []string{"a", "b", "c"}) })
	}
	stop := make(chan struct{})
	var seen sync.Map // fakes some real node listed
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		for {
			for _, n := range append(real, node{Membership: c}) {
				for _, m := range n.Members() {
					if strings.HasPrefix(m.Name, "fake-") {
						seen.Store(m.Name, n.Local().Name)
					}
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	const batch = 30
	seeds := []string{a.Local().Gossip, b.Local().Gossip, c.Local().Gossip}
	for i := 0; i < fakes; i += batch {
		var mls []*memberlist.Memberlist
		for j := i; j < min(i+batch, fakes); j++ {
			name := "fake-" + strconv.Itoa(j)
			mls = append(mls, forge(t, name, memberMeta(20000+j), seeds[j%len(seeds)]))
		}
		time.Sleep(200 * time.Millisecond)
		for _, ml := range mls {
			_ = ml.Shutdown()
		}
	}
	// A real member fails while the fakes' news still goes round.
	failed := time.Now()
	_ = c.Shutdown()
	for _, n := range real {
		waitFor(t, 15*time.Second, n.Local().Name+" declares c dead", func() bool {
			e, ok := n.rec.last(EventLeave, "c")
			return ok && e.Dead
		})
	}
	t.Logf("c declared dead by a and b within %v of its failure, after %d fakes", time.Since(failed).Round(time.Millisecond), fakes)
	close(stop)
	watch.Wait()
	seen.Range(func(k, v any) bool {
		t.Errorf("%s listed %s", v, k)
		return true
	})
	if n := a.Refused()[RefusedProof] + b.Refused()[RefusedProof] + a.Refused()[RefusedQueueFull] + b.Refused()[RefusedQueueFull]; n == 0 {
		t.Errorf("no refusal counted: a %v, b %v", a.Refused(), b.Refused())
	}
}

// TestLogRateLimit: 1,000 lines of one kind (finding 10 of issue 30: a line per garbage
// datagram, each from another port) are logged once, then counted in one line at the end of
// the window; a line of another kind is still logged; a refusal while a proof is pending is
// not logged at all.
func TestLogRateLimit(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	w := &logWriter{lim: newLimiter(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return dropTime(a) },
	})), 300*time.Millisecond)}
	for i := range 1000 {
		fmt.Fprintf(w, "[ERR] memberlist: failed to receive: No installed keys could decrypt the message from=127.0.0.%d:%d\n", i%7, 1000+i)
	}
	fmt.Fprintf(w, "[WARN] memberlist: ignoring alive message for 'x': %s: node \"x\" (gossip 127.0.0.1:5, actor \"127.0.0.1:6\")\n", ProofPending)
	fmt.Fprint(w, "[INFO] memberlist: Marking b as failed, suspect timeout reached (0 peer confirmations)\n")
	waitFor(t, 5*time.Second, "the count of suppressed lines", func() bool { return strings.Contains(buf.String(), "suppressed") })
	time.Sleep(100 * time.Millisecond)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`level=ERROR msg="memberlist: failed to receive: No installed keys could decrypt the message from=127.0.0.0:1000"`,
		`level=INFO msg="memberlist: Marking b as failed, suspect timeout reached (0 peer confirmations)"`,
		`level=ERROR msg="log lines suppressed (one a second of each kind is logged)" suppressed=999 last="memberlist: failed to receive: No installed keys could decrypt the message from=127.0.0.5:1999"`,
	}
	if !slices.Equal(lines, want) {
		t.Errorf("logged:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// The next window logs again.
	fmt.Fprint(w, "[ERR] memberlist: failed to receive: No installed keys could decrypt the message from=127.0.0.9:9\n")
	if got := strings.Count(buf.String(), "\n"); got != 4 {
		t.Errorf("%d lines after the window, want 4:\n%s", got, buf.String())
	}
}

func TestLineKind(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ a, b string }{
		{"from=127.0.0.1:4000", "from=10.1.2.3:7"},
		{"from=[::1]:4000 size 12", "from=[fe80::1]:9 size 700"},
		{"ignoring alive message for 'fake-1': proof failed", "ignoring alive message for 'bob': proof failed"},
		{`node "alice" (actor "h:1")`, `node "bob" (actor "x:2")`},
	} {
		if ka, kb := lineKind(tt.a), lineKind(tt.b); ka != kb {
			t.Errorf("kinds differ: %q -> %q, %q -> %q", tt.a, ka, tt.b, kb)
		}
	}
	if lineKind("failed to receive") == lineKind("failed to send") {
		t.Error("different words make one kind")
	}
}

// TestGarbageDatagramsLogged is finding 10 of issue 30: 2,000 garbage UDP datagrams to the
// gossip port, each from another port, made 2,000 ERROR lines. Now a second of them makes one
// line and one count.
func TestGarbageDatagramsLogged(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	a := start(t, Config{Name: "a", SecretKey: testKey, Meta: memberMeta(9401),
		Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	const n = 2000
	for i := range n {
		c, err := net.Dial("udp", a.Local().Gossip)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "garbage %d", i)
		c.Close()
	}
	time.Sleep(2 * logEvery)
	var garbage int
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, "level=ERROR") {
			garbage++
		}
	}
	if garbage == 0 || garbage > 8 {
		t.Errorf("%d ERROR lines for %d garbage datagrams, want a few (one a second, and a count):\n%s", garbage, n, buf.String())
	}
	if !strings.Contains(buf.String(), "suppressed=") {
		t.Errorf("no count of the lines suppressed:\n%s", buf.String())
	}
}
