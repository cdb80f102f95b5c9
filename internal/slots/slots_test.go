package slots

import (
	"net"
	"slices"
	"testing"
)

// TestLimiter takes and releases slots step by step and checks, after each, the slots in use
// and which holders were evicted (closed), in order.
func TestLimiter(t *testing.T) {
	l := New(4, 2)
	slots := map[string]*Slot{}
	var closed []string
	take := func(name, key string) {
		slots[name] = l.Take(key, func() { closed = append(closed, name) })
	}
	steps := []struct {
		op     string // "take" or "release"
		name   string // the holder
		key    string // for take
		used   int
		closed []string // every holder evicted so far, in order
		held   bool     // for release: whether the slot was still held
	}{
		{"take", "a1", "a", 1, nil, false},
		{"take", "a2", "a", 2, nil, false},
		{"take", "a3", "a", 2, []string{"a1"}, false}, // a holds its share: its oldest goes
		{"take", "b1", "b", 3, []string{"a1"}, false},
		{"take", "c1", "c", 4, []string{"a1"}, false},
		{"take", "d1", "d", 4, []string{"a1", "a2"}, false}, // full: a holds the most
		{"take", "e1", "e", 4, []string{"a1", "a2", "a3"}, false},
		// Full, every key holds one: the oldest slot of all goes (b1).
		{"take", "f1", "f", 4, []string{"a1", "a2", "a3", "b1"}, false},
		{"release", "a3", "", 4, []string{"a1", "a2", "a3", "b1"}, false}, // evicted already: nothing changes
		{"release", "c1", "", 3, []string{"a1", "a2", "a3", "b1"}, true},
		{"release", "c1", "", 3, []string{"a1", "a2", "a3", "b1"}, false}, // twice: nothing changes
		{"take", "g1", "g", 4, []string{"a1", "a2", "a3", "b1"}, false},
		{"release", "d1", "", 3, nil, true},
		{"release", "e1", "", 2, nil, true},
		{"release", "f1", "", 1, nil, true},
		{"release", "g1", "", 0, nil, true},
	}
	for i, s := range steps {
		switch s.op {
		case "take":
			take(s.name, s.key)
		case "release":
			if got := slots[s.name].Release(); got != s.held {
				t.Fatalf("step %d: Release of %s = %v, want %v", i, s.name, got, s.held)
			}
		}
		if got := l.InUse(); got != s.used {
			t.Fatalf("step %d (%s %s): %d in use, want %d", i, s.op, s.name, got, s.used)
		}
		if s.closed != nil && !slices.Equal(closed, s.closed) {
			t.Fatalf("step %d (%s %s): evicted %v, want %v", i, s.op, s.name, closed, s.closed)
		}
	}
	if got := l.Evicted(); got != 4 {
		t.Fatalf("Evicted() = %d, want 4", got)
	}
}

// TestFloodOfManyKeysKeepsTheFewKeysSlot: keys that fill the whole limit and keep taking
// slots (a flood over several addresses) evict one another, never the slot of a key that
// holds one.
func TestFloodOfManyKeysKeepsTheFewKeysSlot(t *testing.T) {
	l := New(16, 4)
	flooders := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}
	for _, k := range flooders {
		for range 4 {
			l.Take(k, nil)
		}
	}
	closed := false
	peer := l.Take("127.0.0.1", func() { closed = true })
	for i := range 1000 {
		l.Take(flooders[i%len(flooders)], nil)
	}
	if closed || !peer.held {
		t.Fatal("the flood evicted the slot of a key holding one")
	}
	if got := l.InUse(); got != 16 {
		t.Fatalf("%d slots in use, want 16", got)
	}
	if got := l.Evicted(); got != 1+1000 {
		t.Fatalf("Evicted() = %d, want %d", got, 1+1000)
	}
}

func TestRemoteIP(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := RemoteIP(a); got != "pipe" {
		t.Errorf("RemoteIP(net.Pipe) = %q, want the address's string %q", got, "pipe")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := RemoteIP(c); got != "127.0.0.1" {
		t.Errorf("RemoteIP of a TCP connection = %q, want 127.0.0.1 (no port)", got)
	}
}
