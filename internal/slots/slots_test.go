package slots

import (
	"net"
	"testing"
)

func TestLimiter(t *testing.T) {
	l := New(3, 2)
	steps := []struct {
		op   string // "take" or "give"
		key  string
		want bool // for take
		used int
	}{
		{"take", "a", true, 1},
		{"take", "a", true, 2},
		{"take", "a", false, 2}, // perKey
		{"take", "b", true, 3},
		{"take", "c", false, 3}, // max
		{"give", "a", false, 2},
		{"take", "c", true, 3},
		{"give", "z", false, 3}, // never taken: nothing changes
		{"give", "a", false, 2},
		{"give", "b", false, 1},
		{"give", "c", false, 0},
		{"take", "a", true, 1},
	}
	for i, s := range steps {
		switch s.op {
		case "take":
			if got := l.Take(s.key); got != s.want {
				t.Fatalf("step %d: Take(%q) = %v, want %v", i, s.key, got, s.want)
			}
		case "give":
			l.Give(s.key)
		}
		if got := l.InUse(); got != s.used {
			t.Fatalf("step %d (%s %q): %d in use, want %d", i, s.op, s.key, got, s.used)
		}
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
