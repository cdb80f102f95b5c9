package netns

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain makes the test binary a probe when asked, run in a host's namespace:
//
//	NETNS_PROBE=listen IP      accepts TCP on IP:9000 (answers "hi") and prints every UDP datagram to IP:9000
//	NETNS_PROBE=dial IP        connects to IP:9000 (1 s), prints "ok" or the error
//	NETNS_PROBE=udp IP TEXT    sends TEXT in a datagram to IP:9000
func TestMain(m *testing.M) {
	args := os.Args[1:]
	switch os.Getenv("NETNS_PROBE") {
	case "":
		os.Exit(m.Run())
	case "listen":
		tl, err := net.Listen("tcp", net.JoinHostPort(args[0], "9000"))
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		ul, err := net.ListenPacket("udp", net.JoinHostPort(args[0], "9000"))
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		go func() {
			for {
				c, err := tl.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte("hi"))
				_ = c.Close()
			}
		}()
		fmt.Println("ready")
		buf := make([]byte, 100)
		for {
			k, _, err := ul.ReadFrom(buf)
			if err != nil {
				os.Exit(1)
			}
			fmt.Println(string(buf[:k]))
		}
	case "dial":
		c, err := net.DialTimeout("tcp", net.JoinHostPort(args[0], "9000"), time.Second)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		got, err := io.ReadAll(c)
		if err != nil || string(got) != "hi" {
			fmt.Printf("read %q: %v\n", got, err)
			os.Exit(1)
		}
		fmt.Println("ok")
	case "udp":
		c, err := net.Dial("udp", net.JoinHostPort(args[0], "9000"))
		if err == nil {
			_, err = c.Write([]byte(args[1]))
		}
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
	os.Exit(0)
}

// probe runs the test binary as a probe in host h and returns what it printed.
func probe(t *testing.T, h *Host, mode string, args ...string) string {
	t.Helper()
	cmd := h.Command(testExe(t), args...)
	cmd.Env = append(os.Environ(), "NETNS_PROBE="+mode)
	out, err := cmd.CombinedOutput()
	if err != nil && !errors.As(err, new(*exec.ExitError)) {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func testExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// listener is a probe listening in a host: its datagrams arrive on lines.
type listener struct{ lines chan string }

func listen(t *testing.T, h *Host) *listener {
	t.Helper()
	cmd := h.Command(testExe(t), h.IP.String())
	cmd.Env = append(os.Environ(), "NETNS_PROBE=listen")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	l := &listener{lines: make(chan string, 100)}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "ready" {
		t.Fatalf("listener in %s: %q", h.Name, sc.Text())
	}
	go func() {
		for sc.Scan() {
			l.lines <- sc.Text()
		}
		close(l.lines)
	}()
	return l
}

// next is the next datagram the listener got (guarded: "" after 10 s).
func (l *listener) next() string {
	select {
	case s := <-l.lines:
		return s
	case <-time.After(10 * time.Second):
		return ""
	}
}

// TestCutAndHeal: hosts reach each other through the router; a cut drops the packets
// between two groups silently (a TCP connect times out: no refusal, no unreachable) and
// nothing else; a one-way cut drops one direction only; Heal restores all. The root
// namespace's links are untouched, and Close leaves no namespace behind.
func TestCutAndHeal(t *testing.T) {
	if err := Check(); err != nil {
		t.Skipf("needs network namespaces: %v", err)
	}
	rootLinks := links(t)
	n := ForTest(t, "a", "b", "c")
	if got := links(t); got != rootLinks {
		t.Errorf("the root namespace's links changed:\nbefore %s\nafter %s", rootLinks, got)
	}
	a, b, c := n.Host("a"), n.Host("b"), n.Host("c")
	if a.IP.String() != "10.213.1.2" || c.IP.String() != "10.213.3.2" || n.Host("d") != nil || len(n.Hosts()) != 3 {
		t.Fatalf("hosts %+v %+v %+v", a, b, c)
	}
	lb, la := listen(t, b), listen(t, a)
	listen(t, c)
	for _, from := range []*Host{a, c} {
		if got := probe(t, from, "dial", b.IP.String()); got != "ok" {
			t.Fatalf("%s -> b before any cut: %s", from.Name, got)
		}
	}

	if err := n.Cut([]*Host{a}, []*Host{b}); err != nil {
		t.Fatal(err)
	}
	for _, p := range [][2]*Host{{a, b}, {b, a}} {
		if got := probe(t, p[0], "dial", p[1].IP.String()); !strings.Contains(got, "i/o timeout") {
			t.Errorf("%s -> %s across the cut: %q, want a timeout (packets dropped silently)", p[0].Name, p[1].Name, got)
		}
	}
	for _, p := range [][2]*Host{{a, c}, {c, a}, {c, b}} {
		if got := probe(t, p[0], "dial", p[1].IP.String()); got != "ok" {
			t.Errorf("%s -> %s, not cut: %s", p[0].Name, p[1].Name, got)
		}
	}
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	if got := probe(t, a, "dial", b.IP.String()); got != "ok" {
		t.Errorf("a -> b after Heal: %s", got)
	}

	// One way: a's datagrams to b are lost, b's to a arrive.
	if err := n.CutOneWay([]*Host{a}, []*Host{b}); err != nil {
		t.Fatal(err)
	}
	probe(t, a, "udp", b.IP.String(), "lost")
	probe(t, b, "udp", a.IP.String(), "from b")
	if got := la.next(); got != "from b" {
		t.Errorf("a got %q from b, whose direction is not cut", got)
	}
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	probe(t, a, "udp", b.IP.String(), "after")
	if got := lb.next(); got != "after" {
		t.Errorf("b got %q first, want the datagram a sent after Heal (the one before it was cut)", got)
	}

	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if left := ours(t, fmt.Sprintf("%s%d-", Prefix, os.Getpid())); len(left) > 0 {
		t.Errorf("namespaces left after Close: %v", left)
	}
}

// TestRemoveStale: namespaces of a process that is gone are removed; a live process's are
// kept.
func TestRemoveStale(t *testing.T) {
	n := ForTest(t, "a")
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Skip(err)
	}
	stale := fmt.Sprintf("%s%d-1-hub", Prefix, done.Process.Pid)
	if alive(done.Process.Pid) {
		t.Skipf("pid %d was reused at once", done.Process.Pid)
	}
	if err := ip("netns", "add", stale); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remove(stale) })
	if err := RemoveStale(); err != nil {
		t.Fatal(err)
	}
	left := ours(t, Prefix)
	if slices.Contains(left, stale) {
		t.Errorf("the stale namespace %s is still there", stale)
	}
	if !slices.Contains(left, n.hub) || !slices.Contains(left, n.Host("a").NS) {
		t.Errorf("RemoveStale removed a live process's namespaces: left %v", left)
	}
}

// TestNames: bad host names are refused before anything is made.
func TestNames(t *testing.T) {
	for _, names := range [][]string{nil, {"a", "a"}, {"A"}, {"a-b"}, {""}, {"abcdefghijklmnopq"}} {
		if _, err := New(names...); err == nil || errors.Is(err, ErrUnavailable) {
			t.Errorf("New(%q): %v", names, err)
		}
	}
}

// links lists the root namespace's links.
func links(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(ipPath(), "-o", "link", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			names = append(names, f[1])
		}
	}
	return strings.Join(names, " ")
}

// ours lists the namespaces whose names start with prefix.
func ours(t *testing.T, prefix string) []string {
	t.Helper()
	out, err := exec.Command(ipPath(), "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], prefix) {
			names = append(names, f[0])
		}
	}
	return names
}
