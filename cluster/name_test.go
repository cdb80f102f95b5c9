package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// watchHolder is how long the holder of a name is watched after a refusal: 8 probe intervals.
var watchHolder = 8 * DefaultTiming().ProbeInterval

// logged starts a node as start does, its log (INFO and up) kept in the returned buffer.
func logged(t *testing.T, cfg Config) (node, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	return start(t, cfg), logs
}

// listed reports whether n lists a member named name at gossip with meta.
func listed(n node, name, gossip string, meta Meta) bool {
	i := slices.IndexFunc(n.Members(), func(m Member) bool { return m.Name == name })
	return i >= 0 && n.Members()[i].Gossip == gossip && n.Members()[i].Meta == meta
}

// count counts n's events of kind about name.
func count(n node, kind EventKind, name string) int {
	c := 0
	for _, e := range n.rec.all() {
		if e.Kind == kind && e.Member.Name == name {
			c++
		}
	}
	return c
}

func TestNameTaken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// seeds returns the impostor's join list.
		seeds func(a, b, holder node) []string
		// race: the holder joins only after the impostor's lookup, before its join.
		race bool
	}{
		{"seen by the lookup", func(a, _, _ node) []string { return []string{a.Local().Gossip} }, false},
		{"first seed unreachable", func(_, b, _ node) []string { return []string{"127.0.0.1:1", b.Local().Gossip} }, false},
		{"the seed is the holder", func(_, _, h node) []string { return []string{h.Local().Gossip} }, false},
		{"holder joins after the lookup", func(a, _, _ node) []string { return []string{a.Local().Gossip} }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, aLog := logged(t, Config{Name: "a", Meta: memberMeta(9001)})
			b, bLog := logged(t, Config{Name: "b", Join: []string{a.Local().Gossip}, Meta: memberMeta(9002)})
			var holder node
			var hLog *syncBuffer
			startHolder := func() {
				holder, hLog = logged(t, Config{Name: "n2", Join: []string{b.Local().Gossip}, Meta: memberMeta(9003)})
				for _, n := range []node{a, b, holder} {
					waitFor(t, converge, n.Local().Name+" sees a, b, n2", func() bool {
						return slices.Equal(names(n.Members()), []string{"a", "b", "n2"})
					})
				}
			}
			var seeds []string
			impostor := Config{Name: "n2", Bind: "127.0.0.1:0", Meta: memberMeta(9009)}
			if tt.race {
				seeds = tt.seeds(a, b, node{})
				impostor.afterProbe = startHolder
			} else {
				startHolder()
				seeds = tt.seeds(a, b, holder)
			}
			impostor.Join = seeds
			var called atomic.Bool
			impostor.OnEvent = func(Event) { called.Store(true) }
			var iLogs syncBuffer
			impostor.Logger = slog.New(slog.NewTextHandler(&iLogs, nil))

			m, err := Start(impostor)
			if err == nil {
				m.Shutdown()
				t.Fatal("a second node named n2 started")
			}
			var taken *NameTakenError
			if !errors.As(err, &taken) {
				t.Fatalf("error %v (%T), want a *NameTakenError", err, err)
			}
			h := holder.Local()
			want := NameTakenError{Name: "n2", Address: h.Gossip, Actor: h.Meta.Actor}
			if *taken != want {
				t.Errorf("NameTakenError %+v, want %+v", *taken, want)
			}
			wantMsg := fmt.Sprintf(`a live member is already named "n2" (gossip %s, actor %s): choose another --name`, h.Gossip, h.Meta.Actor)
			if err.Error() != wantMsg {
				t.Errorf("error %q, want %q", err, wantMsg)
			}
			t.Logf("refused: %v", err)
			if called.Load() {
				t.Error("the refused node's OnEvent was called")
			}

			// The holder stays alive in every view, and nobody reports a change about it.
			members := []node{a, b, holder}
			for end := time.Now().Add(watchHolder); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
				for _, n := range members {
					if !listed(n, "n2", h.Gossip, h.Meta) {
						t.Fatalf("%s no longer lists the holder: %v", n.Local().Name, n.Members())
					}
				}
			}
			for _, n := range members {
				if c := count(n, EventJoin, "n2"); c != 1 {
					t.Errorf("%s: %d joins of n2, want 1: %v", n.Local().Name, c, n.rec.all())
				}
				if count(n, EventLeave, "n2")+count(n, EventUpdate, "n2") != 0 {
					t.Errorf("%s: n2 left or changed: %v", n.Local().Name, n.rec.all())
				}
			}
			for who, l := range map[string]*syncBuffer{"a": aLog, "b": bLog, "n2": hLog, "impostor": &iLogs} {
				out := strings.ToLower(l.String())
				for _, bad := range []string{probePrefix, "refuting", "suspect", "marking n2"} {
					if strings.Contains(out, bad) {
						t.Errorf("%s's log mentions %q:\n%s", who, bad, out)
					}
				}
				// Found by the lookup, the impostor never spoke under the name: no member met a
				// conflicting alive message.
				if !tt.race && (strings.Contains(out, "conflicting") || strings.Contains(out, "claim")) {
					t.Errorf("%s's log shows a conflict although the lookup found the holder:\n%s", who, out)
				}
			}
			// The holder never met the impostor: its leave will be announced.
			if strings.Contains(hLog.String(), "claim") || holder.rivalErr() != nil {
				t.Errorf("the holder met the impostor:\n%s", hLog)
			}
		})
	}
}

func TestNameFree(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// free ends the first x (nil: there is none) and returns the bind address of the new one.
		free func(t *testing.T, x node, others []node) string
		// dead: the others report the first x's end as a death.
		dead bool
		// short: runs under -short (does not wait for failure detection).
		short bool
	}{
		{name: "distinct name", short: true},
		{name: "killed, declared dead, new address", dead: true, free: func(t *testing.T, x node, others []node) string {
			if err := x.Shutdown(); err != nil {
				t.Fatal(err)
			}
			for _, n := range others {
				waitFor(t, 30*time.Second, n.Local().Name+" declares x dead", func() bool {
					_, ok := n.rec.find(EventLeave, "x")
					return ok
				})
			}
			return "127.0.0.1:0"
		}},
		{name: "killed, restarted at once at its address", dead: true, short: true, free: func(t *testing.T, x node, _ []node) string {
			if err := x.Shutdown(); err != nil {
				t.Fatal(err)
			}
			return x.Local().Gossip
		}},
		{name: "left, new address", short: true, free: func(t *testing.T, x node, _ []node) string {
			if err := x.Leave(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			return "127.0.0.1:0"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if testing.Short() && !tt.short {
				t.Skip("waits for failure detection")
			}
			a := start(t, Config{Name: "a", Meta: memberMeta(9001)})
			b := start(t, Config{Name: "b", Join: []string{a.Local().Gossip}, Meta: memberMeta(9002)})
			others := []node{a, b}
			bind := "127.0.0.1:0"
			var old Member
			if tt.free != nil {
				x := start(t, Config{Name: "x", Join: []string{a.Local().Gossip}, Meta: memberMeta(9003)})
				for _, n := range others {
					waitFor(t, converge, n.Local().Name+" sees x", func() bool { return len(n.Members()) == 3 })
				}
				old = x.Local()
				bind = tt.free(t, x, others)
			}
			meta := memberMeta(9004)
			began := time.Now()
			x2 := start(t, Config{Name: "x", Bind: bind, Join: []string{b.Local().Gossip}, Meta: meta})
			t.Logf("x started in %v", time.Since(began).Round(time.Millisecond))
			now := x2.Local()
			for _, n := range append(others, x2) {
				waitFor(t, converge, n.Local().Name+" lists the new x", func() bool {
					return listed(n, "x", now.Gossip, meta) && len(n.Members()) == 3
				})
			}
			if tt.free == nil {
				return
			}
			// The others saw the first x join, end (as a death or a leave) and the new one join.
			// The member table can list the new x a moment before its join event is delivered:
			// the events are waited for too (on a loaded machine the last one came late).
			for _, n := range others {
				want := []string{
					fmt.Sprintf("join %s false", old.Gossip),
					fmt.Sprintf("leave %s %v", old.Gossip, tt.dead),
					fmt.Sprintf("join %s false", now.Gossip),
				}
				var got []string
				deadline := time.Now().Add(converge)
				for {
					got = got[:0]
					for _, e := range n.rec.all() {
						if e.Member.Name == "x" && e.Kind != EventUpdate { // x's Leave advertises Leaving first
							got = append(got, fmt.Sprintf("%s %s %v", e.Kind, e.Member.Gossip, e.Kind == EventLeave && e.Dead))
						}
					}
					if len(got) >= len(want) || time.Now().After(deadline) {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: events about x %q, want %q", n.Local().Name, got, want)
				}
			}
		})
	}
}

// TestNameConflictAfterStart: a node that meets another node claiming its name after Start
// logs it, and its Leave does not announce a leave the members could apply to the other.
func TestNameConflictAfterStart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits for failure detection")
	}
	a := start(t, Config{Name: "a", Meta: memberMeta(9001)})
	x, xLog := logged(t, Config{Name: "x", Join: []string{a.Local().Gossip}, Meta: memberMeta(9002)})
	waitFor(t, converge, "a sees x", func() bool { return len(a.Members()) == 2 })
	self := x.ml.LocalNode()
	other := *self
	other.Port++
	delegate{x.Membership}.NotifyConflict(self, &other)
	if !strings.Contains(xLog.String(), "claims this node's name") {
		t.Errorf("x did not log the conflict:\n%s", xLog)
	}
	if err := x.Leave(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(xLog.String(), "leaving without announcing it") {
		t.Errorf("x did not say why it did not announce its leave:\n%s", xLog)
	}
	// a still learns of the leave from the Leaving meta, and reports it as graceful.
	e, ok := Event{}, false
	waitFor(t, 30*time.Second, "a sees x go", func() bool {
		e, ok = a.rec.last(EventLeave, "x")
		return ok
	})
	if e.Dead {
		t.Errorf("x's leave reported as a death: %+v", e)
	}
}

func TestNameReserved(t *testing.T) {
	t.Parallel()
	_, err := Start(Config{Name: probePrefix + "1", Bind: "127.0.0.1:0", Meta: memberMeta(9000)})
	if err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("Start under a probe's name: %v, want an error saying it is reserved", err)
	}
}
