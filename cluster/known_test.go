package cluster

import (
	"testing"
	"time"
)

// TestKnown: Known lists the live members alive, a member that crashed dead and one that left
// left, each as it was last known, and a node that comes back once, alive again.
func TestKnown(t *testing.T) {
	t.Parallel()
	a := start(t, Config{Name: "a", Meta: memberMeta(9101)})
	b := start(t, Config{Name: "b", Join: []string{a.Local().Gossip}, Meta: memberMeta(9102)})
	c := start(t, Config{Name: "c", Join: []string{a.Local().Gossip}, Meta: memberMeta(9103)})
	d := start(t, Config{Name: "d", Join: []string{a.Local().Gossip}, Meta: memberMeta(9104)})
	states := func() map[string]State {
		out := map[string]State{}
		for _, k := range a.Known() {
			if _, twice := out[k.Name]; twice {
				t.Errorf("Known lists %s twice", k.Name)
			}
			out[k.Name] = k.State
		}
		return out
	}
	waitFor(t, converge, "a sees 4 alive members", func() bool {
		s := states()
		return len(s) == 4 && s["a"] == StateAlive && s["b"] == StateAlive && s["c"] == StateAlive && s["d"] == StateAlive
	})
	if err := c.Shutdown(); err != nil { // a crash, as the others can tell
		t.Fatal(err)
	}
	if err := d.Leave(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a lists c dead and d left", func() bool {
		s := states()
		return s["c"] == StateDead && s["d"] == StateLeft
	})
	for _, k := range a.Known() {
		if k.Name == "c" && k.Meta.Actor != "127.0.0.1:9103" {
			t.Errorf("dead c as last known: %+v", k)
		}
		if k.Since.IsZero() {
			t.Errorf("%s: no Since", k.Name)
		}
	}
	d2 := start(t, Config{Name: "d", Join: []string{b.Local().Gossip}, Meta: memberMeta(9105)})
	waitFor(t, converge, "a lists d alive again", func() bool { return states()["d"] == StateAlive })
	_ = d2
	if s := states(); len(s) != 4 || s["c"] != StateDead || s["a"] != StateAlive || s["b"] != StateAlive {
		t.Errorf("states %v", s)
	}
}
